"""The connection actor against hostile HTTP servers on 127.0.0.1 (:mod:`mcp_actors.testing.hostile`).

Legacy SSE with big messages and with a POST endpoint on another origin; secrets (the URL's
password and query token, a header's value) never reachable from an error we raise, its
exception chain included, for connect failures over SSE and streamable HTTP.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from mcp_actors import events
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import HttpParams
from mcp_actors.errors import ServerMessageTooLarge
from mcp_actors.testing.hostile import Bomb, serve_bomb
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


# ---------------------------------------------------------------------- memory bombs


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
