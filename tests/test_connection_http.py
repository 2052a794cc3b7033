"""The connection actor over SSE and streamable HTTP against the real demo server on 127.0.0.1."""

from __future__ import annotations

import os
import signal

import pytest
import trio

from mcp_actors import events
from mcp_actors.connection import ConnectionSettings, ConnectionState, open_connection
from mcp_actors.errors import ConnectionFailed, ToolCallTimeout
from mcp_actors.testing import demo_server_command, serve_http
from mcp_actors.transports import HttpParams
from supervisors import Backoff, Intensity

KINDS = [("streamable-http", "http"), ("sse", "sse")]


def http_settings(url: str, kind: str, **overrides: object) -> ConnectionSettings:
    return ConnectionSettings(
        server_id=f"id-{kind}",
        server_name=f"remote-{kind}",
        transport=HttpParams(url=url, kind=kind, headers={"X-Test": "1"}, connect_timeout=10.0),  # type: ignore[arg-type]
        connect_timeout=10.0,
        call_timeout=20.0,
        ping_interval=0,
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
        **overrides,  # type: ignore[arg-type]
    )


def text_of(result) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


@pytest.mark.parametrize(("transport", "kind"), KINDS)
async def test_http_list_call_and_concurrency(transport: str, kind: str) -> None:
    """Tools list, calls work, and 50 concurrent calls over one HTTP session all succeed."""
    async with serve_http(demo_server_command("--transport", transport, "--port", "0")) as server:
        bus = events.EventBus()
        handle, start = open_connection(http_settings(server.url, kind), bus)
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                names = {t.name for t in await handle.list_tools()}
                assert {"echo", "sleep", "fail"} <= names
                assert handle.status().state is ConnectionState.CONNECTED and handle.status().pid is None
                results = []

                async def one(i: int) -> None:
                    results.append(text_of(await handle.call_tool("echo", {"text": str(i)})))

                async with trio.open_nursery() as calls:
                    for i in range(50):
                        calls.start_soon(one, i)
                assert sorted(results, key=int) == [str(i) for i in range(50)]
                failed = await handle.call_tool("fail", {"message": "nope"})
                assert failed.is_error
            finally:
                await handle.aclose()


@pytest.mark.parametrize(("transport", "kind"), KINDS)
async def test_http_timeout_is_typed(transport: str, kind: str) -> None:
    """A slow HTTP call past its timeout raises ToolCallTimeout; the session keeps working."""
    async with serve_http(demo_server_command("--transport", transport, "--port", "0")) as server:
        handle, start = open_connection(http_settings(server.url, kind), events.EventBus())
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                with pytest.raises(ToolCallTimeout, match="sleep"):
                    await handle.call_tool("sleep", {"seconds": 30}, timeout=0.5)
                assert text_of(await handle.call_tool("echo", {"text": "alive"})) == "alive"
            finally:
                await handle.aclose()


@pytest.mark.parametrize(("transport", "kind"), KINDS)
async def test_http_server_killed_mid_call_fails_fast(transport: str, kind: str) -> None:
    """Killing the HTTP server fails the in-flight call long before its 20 s timeout."""
    async with serve_http(demo_server_command("--transport", transport, "--port", "0")) as server:
        handle, start = open_connection(
            http_settings(server.url, kind, intensity=Intensity(max_restarts=0, period=60)), events.EventBus()
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                await handle.connect()
                outcome: list[BaseException] = []

                async def doomed() -> None:
                    try:
                        await handle.call_tool("sleep", {"seconds": 60})
                    except ConnectionFailed as exc:
                        outcome.append(exc)

                async with trio.open_nursery() as calls:
                    calls.start_soon(doomed)
                    await trio.testing.wait_all_tasks_blocked(cushion=0.1)
                    os.kill(server.pid, signal.SIGKILL)
                    start_time = trio.current_time()
                elapsed = trio.current_time() - start_time
                assert outcome and isinstance(outcome[0], ConnectionFailed)
                assert elapsed < 5.0, elapsed
            finally:
                await handle.aclose()


async def test_http_unreachable_is_a_clear_error() -> None:
    """Nothing listening on the port: a typed connection error naming the server."""
    handle, start = open_connection(
        http_settings("http://127.0.0.1:9/mcp", "http", intensity=Intensity(max_restarts=0, period=60)),
        events.EventBus(),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            with pytest.raises(ConnectionFailed, match="remote-http"):
                await handle.connect()
        finally:
            await handle.aclose()
