"""JSON as servers of other languages write it, over real stdio processes and over HTTP.

One parse rule on every wire: what a server's own JSON library calls valid (a string cut
mid-emoji by Node's ``JSON.stringify``, Python's ``NaN``) is read, integers wider than 64
bits stay exact both ways, and an answer that is no JSON at all fails its call at once
when its id can be read.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import attrs
import pytest
import trio
from test_wire_http import BOUND, http_answer, open_wire, request, scripted_server
from testkit import running, text_of

from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import StdioParams
from mcp_actors.errors import ServerProtocolError, ToolCallTimeout
from supervisors import Backoff

ODD = [sys.executable, "-m", "mcp_actors.testing.hostile.wire_odd_json"]
BIG = 1000000000000000000123
NEGATIVE = -9223372036854775809


def odd_settings(**overrides: Any) -> ConnectionSettings:
    settings = ConnectionSettings(
        server_id="id-odd",
        server_name="odd",
        transport=StdioParams(command=ODD[0], args=tuple(ODD[1:]), close_grace=2.0, term_grace=1.0),
        connect_timeout=20.0,
        call_timeout=5.0,
        ping_interval=0,
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
    )
    return attrs.evolve(settings, **overrides)


async def test_json_its_server_calls_valid_is_read_over_stdio() -> None:
    """A lone surrogate (Node's cut emoji) and NaN / Infinity (Python's json) are read, not skipped as garbage."""
    async with running(odd_settings()) as ([handle], _):
        with trio.fail_after(BOUND):
            cut = await handle.call_tool("lone_surrogate", {})
            odd = await handle.call_tool("nan", {})
        assert text_of(cut) == "cut \ud83d"
        assert odd.structured_content is not None
        assert math.isnan(odd.structured_content["nan"])
        assert odd.structured_content["inf"] == math.inf and odd.structured_content["minus_inf"] == -math.inf
        live = handle._cell.live
        assert live is not None and live.link.garbage_lines == 0


async def test_an_unparseable_answer_with_its_id_fails_its_call_at_once() -> None:
    """An answer that is no JSON but whose top-level id can be read fails that call at once, saying why."""
    async with running(odd_settings(call_timeout=30.0)) as ([handle], _):
        await handle.connect()
        start = trio.current_time()
        with trio.fail_after(BOUND), pytest.raises(ServerProtocolError) as info:
            await handle.call_tool("unparseable", {})
        assert trio.current_time() - start < 10.0, "the call waited for its timeout"
        message = str(info.value)
        assert "not valid JSON" in message and "escape" in message.lower(), message
        # The nested "id": 999 was not taken for the answer's id; the session lives on.
        with trio.fail_after(BOUND):
            assert (await handle.call_tool("big_ints", {})).structured_content is not None


async def test_an_unparseable_answer_without_an_id_is_skipped_and_the_call_times_out() -> None:
    """An answer cut before its id cannot be matched to a call: counted as garbage, the call ends at its timeout."""
    async with running(odd_settings(call_timeout=1.0)) as ([handle], _):
        with trio.fail_after(BOUND), pytest.raises(ToolCallTimeout):
            await handle.call_tool("truncated", {})
        live = handle._cell.live
        assert live is not None and live.link.garbage_lines == 1
        assert live.link.garbage_sample is not None and live.link.garbage_sample.startswith('{"jsonrpc"')


async def test_integers_wider_than_64_bits_are_exact_both_ways_over_stdio() -> None:
    """2**70 goes out exact (not a protocol error blamed on the server); 1000000000000000000123 comes back exact."""
    arguments = {"n": 2**70, "m": -(2**64) - 1, "small": 7}
    async with running(odd_settings()) as ([handle], _):
        with trio.fail_after(BOUND):
            result = await handle.call_tool("big_ints", arguments)
    assert result.structured_content == {"big": BIG, "negative": NEGATIVE, "echo": arguments}


ODD_RESULTS = {
    "big": (b'{"big":1000000000000000000123,"negative":-9223372036854775809}', {"big": BIG, "negative": NEGATIVE}),
    "surrogate": (b'{"cut":"cut \\ud83d"}', {"cut": "cut \ud83d"}),
    "infinity": (b'{"inf":Infinity}', {"inf": math.inf}),
}


@pytest.mark.parametrize("kind", ["json", "sse"])
@pytest.mark.parametrize("odd", sorted(ODD_RESULTS))
async def test_http_answers_follow_the_same_rule(kind: str, odd: str) -> None:
    """Over HTTP, a JSON body and an SSE message are read by the stdio rule: exact integers, surrogates, infinity."""
    raw, expected = ODD_RESULTS[odd]
    body = b'{"jsonrpc":"2.0","id":7,"result":' + raw + b"}"
    if kind == "json":
        answer = http_answer("200 OK", body, "application/json")
    else:
        answer = http_answer("200 OK", b"event: message\r\ndata: " + body + b"\r\n\r\n", "text/event-stream")
    async with scripted_server(lambda seen: answer) as url, open_wire(url) as (wire, _, inbox):
        with trio.fail_after(BOUND):
            await wire.send(request(7, "tools/list"))
    result = inbox.response(7)["result"]
    assert result == expected and [type(v) for v in result.values()] == [type(v) for v in expected.values()]


async def test_http_sends_integers_wider_than_64_bits_exact() -> None:
    """A request carrying 2**70 is POSTed with every digit."""
    answer = http_answer("200 OK", b'{"jsonrpc":"2.0","id":7,"result":{}}', "application/json")
    seen: list[Any] = []
    async with scripted_server(lambda s: answer, seen) as url, open_wire(url) as (wire, _, _):
        with trio.fail_after(BOUND):
            await wire.send(request(7, "tools/call", {"name": "t", "arguments": {"n": 2**70}}))
    assert b'"n":1180591620717411303424' in seen[0].body
