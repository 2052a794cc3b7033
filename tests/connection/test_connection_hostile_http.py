"""The connection actor against hostile HTTP servers on 127.0.0.1 (:mod:`mcp_actors.testing.hostile`).

Legacy SSE with big messages and with a POST endpoint on another origin; secrets (the URL's
password and query token, a header's value) never reachable from an error we raise, its
exception chain included, for connect failures over SSE and streamable HTTP.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from testkit import text_of

from mcp_actors import events
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import HttpParams
from mcp_actors.errors import ConnectionFailed, ServerMessageTooLarge
from mcp_actors.testing.hostile import Bomb, serve_bomb, serve_legacy_sse
from supervisors import Backoff, Intensity

BOUND = 30
PASSWORD = "pa55w0rd-s3cret"
TOKEN = "t0ken-s3cret"
HEADER = "Bearer h3ader-s3cret"
SECRETS = (PASSWORD, TOKEN, HEADER.split()[1])


def settings_for(url: str, kind: str, **transport: Any) -> ConnectionSettings:
    return ConnectionSettings(
        server_id=f"id-{kind}",
        server_name="hostile",
        transport=HttpParams(url=url, kind=kind, connect_timeout=BOUND, **transport),  # type: ignore[arg-type]
        connect_timeout=BOUND,
        call_timeout=BOUND,
        ping_interval=0,
        intensity=Intensity(max_restarts=0, period=60),
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
    )


async def _start(nursery: trio.Nursery, settings: ConnectionSettings) -> ConnectionHandle:
    handle, start = open_connection(settings, events.EventBus())
    await nursery.start(start)
    return handle


# ---------------------------------------------------------------------- legacy SSE and big messages


async def test_a_big_result_over_legacy_sse_arrives_whole() -> None:
    """A 2 MB tool result over legacy SSE arrives whole (the limit is max_message_bytes, not 1 MiB)."""
    async with serve_legacy_sse(result_bytes=2_000_000) as server, trio.open_nursery() as nursery:
        handle = await _start(nursery, settings_for(server.url, "sse"))
        try:
            with trio.fail_after(BOUND):
                result = await handle.call_tool("big", {})
            assert len(text_of(result)) == 2_000_000
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()


async def test_a_legacy_sse_message_over_the_limit_names_the_limit_to_the_caller() -> None:
    """A result over max_message_bytes on legacy SSE fails the caller with the real reason: the limit."""
    limit = 1024 * 1024
    async with serve_legacy_sse(result_bytes=2_000_000) as server, trio.open_nursery() as nursery:
        handle = await _start(nursery, settings_for(server.url, "sse", max_message_bytes=limit))
        try:
            with trio.fail_after(BOUND), pytest.raises(ConnectionFailed) as info:
                await handle.call_tool("big", {})
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    message = str(info.value)
    assert "max_message_bytes" in message and str(limit) in message, message


async def test_a_streamable_http_bomb_at_connect_is_a_typed_error() -> None:
    """A server whose handshake answer is a gzip bomb fails the connect with ServerMessageTooLarge."""
    async with serve_bomb(Bomb.GZIP_JSON) as server, trio.open_nursery() as nursery:
        handle = await _start(nursery, settings_for(server.url, "http", max_message_bytes=64 * 1024))
        try:
            with trio.fail_after(BOUND), pytest.raises(ServerMessageTooLarge) as info:
                await handle.connect()
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    assert "'hostile'" in str(info.value) and "65536" in str(info.value)


# ---------------------------------------------------------------------- SSE on another origin


async def test_an_sse_endpoint_on_another_origin_is_refused_at_once() -> None:
    """An ``endpoint`` event naming another origin fails the connect at once, saying so; nothing is sent there."""
    async with (
        serve_legacy_sse() as decoy,
        serve_legacy_sse(endpoint=f"{decoy.origin}/messages") as server,
        trio.open_nursery() as nursery,
    ):
        url = server.url.replace("http://", f"http://user:{PASSWORD}@") + f"?token={TOKEN}"
        handle = await _start(nursery, settings_for(url, "sse", headers={"Authorization": HEADER}))
        try:
            with trio.fail_after(5), pytest.raises(ConnectionFailed) as info:
                await handle.connect()
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    message = str(info.value)
    assert "origin" in message and decoy.origin in message, message
    assert decoy.requests == []
