"""Streamable-HTTP answers that try to exhaust memory, from real hostile servers on 127.0.0.1.

Each bomb (:mod:`mcp_actors.testing.hostile`) answers a request with a body the wire must
refuse at ``max_message_bytes`` before it holds it: an endless chunked body, a huge
``Content-Length``, a body that runs to a close that never comes, gzip and deflate bombs,
an SSE event that never ends. The servers are capped far above the limit; the test checks
the client stopped reading long before that cap, and that the peak of memory allocated
during the request stayed far below what the bomb holds.
"""

from __future__ import annotations

import logging
import tracemalloc

import pytest
import trio
from test_wire_http import BOUND, call, handshake, open_wire, version_headers

from mcp_actors.errors import ServerMessageTooLarge
from mcp_actors.testing.hostile import Bomb, serve_bomb

LIMIT = 256 * 1024
"""The wire's max_message_bytes here: small, so a few MiB of bomb is 'too large'."""
HELD = 8 * 1024 * 1024
"""Peak memory allocated during a refused request must stay below this (the bombs hold 32-64 MiB)."""
READ = 16 * 1024 * 1024
"""Bytes a bomb may have written before the client stopped (the limit plus what the sockets buffer)."""


@pytest.mark.parametrize("bomb", list(Bomb))
async def test_a_hostile_answer_is_refused_at_the_message_limit_before_it_is_held(bomb: Bomb) -> None:
    """A bomb fails its request with ServerMessageTooLarge (server, limit, what to do); the wire stops
    reading at the limit, holds far less than the bomb, and the connection lives on."""
    async with serve_bomb(bomb) as server, open_wire(server.url, max_message_bytes=LIMIT) as (wire, link, inbox):
        tracemalloc.start()
        try:
            with trio.fail_after(BOUND), pytest.raises(ServerMessageTooLarge) as info:
                await wire.send(call(1, "big", {}), headers=version_headers())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        with trio.fail_after(BOUND):
            await server.answered.wait()
        assert link.death_reason is None, link.death_reason
    message = str(info.value)
    assert info.value.limit == LIMIT and info.value.server == "wired"
    assert "'wired'" in message and str(LIMIT) in message and "max_message_bytes" in message, message
    assert not server.capped and server.sent < READ, server.sent
    assert peak < HELD, f"{peak} bytes allocated at the peak"
    assert not inbox.messages


@pytest.mark.parametrize("bomb", [Bomb.GZIP_SSE, Bomb.ENDLESS_SSE_EVENT])
async def test_a_hostile_get_stream_is_dropped_at_the_message_limit_before_it_is_held(
    bomb: Bomb, caplog: pytest.LogCaptureFixture
) -> None:
    """A GET stream whose event outgrows max_message_bytes (a gzip bomb, a line that never ends) is
    dropped with a warning as the event crosses the limit; the wire holds far less than the bomb,
    and the connection lives on."""
    caplog.set_level(logging.WARNING, logger="mcp_actors._wire.transports")
    async with (
        serve_bomb(bomb, session=True) as server,
        open_wire(server.url, max_message_bytes=LIMIT) as (wire, link, inbox),
    ):
        tracemalloc.start()
        try:
            with trio.fail_after(BOUND):
                await handshake(wire, inbox)
                await server.answered.wait()  # the wire closed the stream (or the cap ended it)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert link.death_reason is None, link.death_reason
    assert any("GET stream dropped" in record.getMessage() for record in caplog.records), caplog.text
    assert not server.capped and server.sent < READ, server.sent
    assert peak < HELD, f"{peak} bytes allocated at the peak"
