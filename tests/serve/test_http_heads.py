"""How the gateway's HTTP server side reads header lines: ``token: value``, spaces around the value dropped.

A line that is not a header (a folded continuation, no colon, a name that is not a token, a
space before the colon) makes the whole request a 400 and ends the connection; a value keeps
what is inside it (colons, inner spaces) and loses the spaces and tabs around it.
"""

from __future__ import annotations

import json

import pytest
import trio

from mcp_actors.serve import HttpGateway
from tests.serve.test_http_front import BOUND, INIT, connect, gateway

__all__ = ["gateway"]  # the fixture, imported for the tests below


def _post(port: int, *lines: str) -> bytes:
    body = json.dumps(INIT)
    head = ["POST /mcp HTTP/1.1", f"host: 127.0.0.1:{port}", *lines, f"content-length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n" + body).encode()


@pytest.mark.parametrize(
    "line",
    [
        " folded-onto-the-host-line",  # obs-fold: a continuation line
        "no colon at all",
        "bad name: x",  # a space inside the name
        "content-type : application/json",  # a space before the colon
        ": no name",
        "caf\u00e9: x",  # not a token character
    ],
)
async def test_a_line_that_is_not_a_header_is_a_400_and_the_connection_closes(gateway: HttpGateway, line: str) -> None:
    """Every malformed line is refused whole: the framing of that connection is no longer trusted."""
    raw = await connect(gateway)
    await raw.send(_post(raw.port, "content-type: application/json", "accept: application/json", line))
    status, headers, _ = await raw.answer()
    assert status == 400 and headers.get("connection") == "close"
    with trio.fail_after(BOUND):
        assert await raw.stream.receive_some(100) == b""


async def test_values_lose_the_spaces_around_them_and_keep_what_is_inside(gateway: HttpGateway) -> None:
    """Spaces and tabs around a value are not part of it; a value with colons and inner spaces is read whole."""
    raw = await connect(gateway)
    await raw.send(
        _post(raw.port, "content-type:\t application/json \t", "accept:application/json,  text/event-stream   ")
    )
    status, headers, body = await raw.answer()
    assert status == 200 and json.loads(body)["id"] == 1
    session = headers["mcp-session-id"]
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    head = [
        "POST /mcp HTTP/1.1",
        f"Host:   127.0.0.1:{raw.port}",  # a value with a colon, spaces before it
        "Content-Type: application/json",
        "Accept: application/json",
        f"MCP-Session-Id: \t{session}\t",
        f"Content-Length: {len(ping)}",
    ]
    await raw.send(("\r\n".join(head) + "\r\n\r\n" + ping).encode())
    status, _, body = await raw.answer()
    assert status == 200 and json.loads(body) == {"jsonrpc": "2.0", "id": 2, "result": {}}
