"""The transport seam and the in-memory transport: connection behaviour on trio's virtual clock."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio
import trio.testing
from mcp.server.mcpserver import MCPServer
from testkit import text_of

from mcp_actors import events
from mcp_actors._auth.oauth import OAuthTarget
from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._wire.transports import (
    HttpParams,
    MemoryParams,
    StdioParams,
    TransportParams,
    open_transport,
    params_for_record,
    register_transport_kind,
)
from mcp_actors.errors import InvalidServerConfig, ServerConnectionLost, ToolCallTimeout
from supervisors import Backoff, Intensity

# Real seconds a whole virtual-time test may take on a loaded 2-core machine (it takes
# tens of milliseconds alone); the virtual durations below are hours.
REAL_BOUND = 20.0


def make_server(name: str = "mem") -> MCPServer[Any]:
    """A small SDK server; ``crash`` exits it the way a process exits (SystemExit)."""
    server: MCPServer[Any] = MCPServer(name)

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def sleep(seconds: float) -> str:
        await trio.sleep(seconds)
        return f"slept {seconds:g}"

    @server.tool()
    async def crash(code: int = 3) -> str:
        raise SystemExit(code)

    return server


def memory_settings(**overrides: Any) -> ConnectionSettings:
    fields: dict[str, Any] = {
        "server_id": "id-mem",
        "server_name": "mem",
        "transport": MemoryParams(server=make_server),
        "ping_interval": 0,
        "backoff": Backoff(min_delay=0.5, max_delay=1.0, jitter=0.0, reset_after=60.0),
    }
    fields.update(overrides)
    return ConnectionSettings(**fields)


async def wait_state(sub: events.Subscription, state: ConnectionState) -> events.Event:
    async for event in sub:
        if event.type == events.CONNECTION_STATE and event.data["state"] == state.value:
            return event
    raise AssertionError("event bus closed")


async def test_memory_call_and_crash_on_virtual_time(autojump_clock: trio.abc.Clock) -> None:
    """Over the in-memory transport a call, an hour-long call and a crash all run on virtual time."""
    started = time.perf_counter()
    bus = events.EventBus()
    sub = bus.subscribe()
    handle, start = open_connection(memory_settings(intensity=Intensity(max_restarts=0, period=60)), bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            assert text_of(await handle.call_tool("echo", {"text": "hi"})) == "hi"
            assert handle.status().state is ConnectionState.CONNECTED and handle.status().pid is None
            before = trio.current_time()
            result = await handle.call_tool("sleep", {"seconds": 3600}, timeout=7200)
            assert text_of(result) == "slept 3600"
            assert trio.current_time() - before == pytest.approx(3600, abs=1)

            doomed: list[BaseException] = []

            async def hanging() -> None:
                with pytest.raises(ServerConnectionLost) as info:
                    await handle.call_tool("sleep", {"seconds": 3600}, timeout=7200)
                doomed.append(info.value)

            async with trio.open_nursery() as calls:
                calls.start_soon(hanging)
                await trio.testing.wait_all_tasks_blocked()
                crash_at = trio.current_time()
                with pytest.raises(ServerConnectionLost, match="exited with code 3"):
                    await handle.call_tool("crash", {"code": 3})
            # The in-flight call failed at once (not after its hour), with the same reason.
            assert trio.current_time() - crash_at < 1.0
            assert "exited with code 3" in str(doomed[0])
            with trio.fail_after(60):
                event = await wait_state(sub, ConnectionState.ERROR)
            assert "exited with code 3" in event.data["error"]
            assert handle.status().state is ConnectionState.ERROR
        finally:
            await handle.aclose()
    assert time.perf_counter() - started < REAL_BOUND


async def test_memory_timeout_is_exact_on_virtual_time(autojump_clock: trio.abc.Clock) -> None:
    """A call past its timeout raises ToolCallTimeout at exactly the timeout, and the session lives on."""
    handle, start = open_connection(memory_settings(), events.EventBus())
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            await handle.connect()
            before = trio.current_time()
            with pytest.raises(ToolCallTimeout, match="sleep"):
                await handle.call_tool("sleep", {"seconds": 3600}, timeout=5)
            assert trio.current_time() - before == pytest.approx(5, abs=0.01)
            assert text_of(await handle.call_tool("echo", {"text": "alive"})) == "alive"
        finally:
            await handle.aclose()


async def test_memory_factory_gives_each_restart_a_fresh_server(autojump_clock: trio.abc.Clock) -> None:
    """A crashed in-memory server is restarted by the supervisor from its factory, and serves again."""
    built: list[MCPServer[Any]] = []

    def factory() -> MCPServer[Any]:
        built.append(make_server())
        return built[-1]

    bus = events.EventBus()
    sub = bus.subscribe()
    handle, start = open_connection(memory_settings(transport=MemoryParams(server=factory)), bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            with pytest.raises(ServerConnectionLost):
                await handle.call_tool("crash", {})
            with trio.fail_after(60):
                await wait_state(sub, ConnectionState.ERROR)
            # Let the crashed incarnation finish dying: the supervisor now sleeps its backoff.
            await trio.testing.wait_all_tasks_blocked()
            with trio.fail_after(60):
                assert text_of(await handle.call_tool("echo", {"text": "again"})) == "again"
            assert len(built) == 2 and handle.status().restarts == 1
        finally:
            await handle.aclose()


async def test_memory_transport_stops_its_server_on_exit(autojump_clock: trio.abc.Clock) -> None:
    """Leaving the transport's block marks the link dead and ends the server task (no task left behind)."""
    params = MemoryParams(server=make_server())
    async with open_transport(params, label="mem") as link:
        assert not link.dead.is_set()
    assert link.dead.is_set() and link.exited.is_set()
    assert link.death_reason == "closed by the client"


def test_memory_params_rejects_what_is_not_a_server() -> None:
    """MemoryParams over something that is not an SDK server fails with a TypeError naming the type."""

    async def main() -> None:
        async with open_transport(MemoryParams(server=lambda: 42), label="bad"):
            pass  # pragma: no cover - never reached

    with pytest.raises(TypeError, match="got int"):
        trio.run(main)


def test_every_kind_is_a_transport_params() -> None:
    """Each transport kind satisfies the TransportParams protocol; reprs name no secret."""
    kinds = [
        StdioParams(command="x", env={"API_KEY": "s3cret-env"}),
        HttpParams(url="http://127.0.0.1:1/mcp", headers={"Authorization": "Bearer s3cret-hdr"}),
        MemoryParams(server=make_server),
    ]
    for params in kinds:
        assert isinstance(params, TransportParams)
        assert "s3cret" not in repr(params)
    assert kinds[0].secret_values() == ("s3cret-env",)
    assert kinds[1].secret_values() == ("Bearer s3cret-hdr",)


def test_params_for_record_per_server_type() -> None:
    """A record maps to its kind's params through the registry, with every field carried over."""
    stdio = McpServerRecord(
        name="local",
        type=ServerType.STDIO,
        config=ServerConfig(command="npx", args=("-y", "pkg"), env={"K": "v"}, cwd="/tmp"),
    )
    assert params_for_record(stdio) == StdioParams(command="npx", args=("-y", "pkg"), env={"K": "v"}, cwd="/tmp")
    for server_type, kind in [(ServerType.HTTP, "http"), (ServerType.SSE, "sse")]:
        remote = McpServerRecord(
            name=f"remote-{kind}",
            type=server_type,
            config=ServerConfig(url="https://example.test/mcp", headers={"X": "y"}, connect_timeout=7.0),
        )
        # An sse/http record carries its OAuth target (OAuth engages only when the server challenges).
        oauth = OAuthTarget(server_id=remote.id, server_name=remote.name, url="https://example.test/mcp")
        assert params_for_record(remote) == HttpParams(
            url="https://example.test/mcp", kind=kind, headers={"X": "y"}, connect_timeout=7.0, oauth=oauth
        )


def test_a_new_kind_needs_only_a_registration() -> None:
    """Registering a builder for a server type routes its records to the new kind, with no other change."""
    record = McpServerRecord(name="local", type=ServerType.STDIO, config=ServerConfig(command="npx"))
    original = StdioParams.from_record
    register_transport_kind(ServerType.STDIO, lambda rec: MemoryParams(server=make_server))
    try:
        assert isinstance(params_for_record(record), MemoryParams)
    finally:
        register_transport_kind(ServerType.STDIO, original)
    assert isinstance(params_for_record(record), StdioParams)


def test_unknown_kind_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record whose type has no registered kind fails with InvalidServerConfig naming the type."""
    from mcp_actors._wire import link as _transport_base

    record = McpServerRecord(name="remote", type=ServerType.SSE, config=ServerConfig(url="https://example.test/sse"))
    monkeypatch.delitem(_transport_base._KINDS, "sse")
    with pytest.raises(InvalidServerConfig, match="'sse'") as info:
        params_for_record(record)
    assert info.value.field == "type" and info.value.server == "remote"
