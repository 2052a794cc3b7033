"""The connection actor's behaviour, over the in-memory transport on trio's virtual clock.

Laziness, coalescing, multiplexing, restarts, the circuit, tool-list changes and health do
not depend on pipes: the demo and fault servers' in-memory twins (``mcp_actors.testing.memory``)
serve them in milliseconds, and ``autojump_clock`` makes seconds of sleeps and backoffs
free. A :class:`~mcp_actors.testing.memory.KillableServer` is killed the way ``os.kill``
kills a process. What needs a process (SIGKILL, stderr, stdout framing, process trees) is
in tests/test_connection_processes.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from mcp.server.mcpserver import MCPServer
from testkit import drain, running, state_is, text_of, wait_event

from mcp_actors import events
from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.errors import ConnectionFailed, ConnectTimeout, ServerCircuitOpen, ServerConnectionLost
from mcp_actors.testing._fault_plan import FaultPlan
from mcp_actors.testing.memory import KillableServer, memory_demo_server, memory_fault_server
from supervisors import Backoff, Intensity

FAST_BACKOFF = Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0)


def memory_settings(
    server: Callable[[], MCPServer[Any]] = memory_demo_server, name: str = "srv", **overrides: object
) -> ConnectionSettings:
    """Settings for an in-memory server built by ``server``, with the stdio tests' timeouts."""
    base = ConnectionSettings(
        server_id=f"id-{name}",
        server_name=name,
        transport=MemoryParams(server=server),
        connect_timeout=20.0,
        call_timeout=30.0,
        ping_interval=0,
        backoff=FAST_BACKOFF,
    )
    return attrs.evolve(base, **overrides)


def faulty(**plan: Any) -> Callable[[], MCPServer[Any]]:
    """A factory of in-memory fault servers with this fault plan."""
    return lambda: memory_fault_server(FaultPlan(**plan))


async def test_connect_is_lazy(no_leaked_tasks: None, autojump_clock: trio.abc.Clock) -> None:
    """Nothing is started until the first demand; the first call connects."""
    server = KillableServer(memory_demo_server)
    async with running(memory_settings(server)) as ([handle], _):
        await trio.testing.wait_all_tasks_blocked()
        assert handle.status().state is ConnectionState.DISCONNECTED
        assert server.starts == 0
        result = await handle.call_tool("echo", {"text": "hi"})
        assert text_of(result) == "hi"
        assert handle.status().state is ConnectionState.CONNECTED
        assert server.starts == 1


async def test_state_transitions_emit_events(autojump_clock: trio.abc.Clock) -> None:
    """connecting → connected (+ server:connected) → disconnected, in order, each an event."""
    async with running(memory_settings()) as ([handle], sub):
        await handle.connect()
        await handle.disconnect()
        got = [(e.type, e.data.get("state")) for e in drain(sub)]
        assert got == [
            (events.CONNECTION_STATE, "connecting"),
            (events.CONNECTION_STATE, "connected"),
            (events.SERVER_CONNECTED, None),
            (events.CONNECTION_STATE, "disconnected"),
        ]
        # Lazy again: the next demand reconnects.
        assert text_of(await handle.call_tool("echo", {"text": "again"})) == "again"


async def test_concurrent_connects_are_coalesced(autojump_clock: trio.abc.Clock) -> None:
    """Fifty concurrent first demands start exactly one server."""
    server = KillableServer(memory_demo_server)
    async with running(memory_settings(server)) as ([handle], sub):
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(handle.connect)
        states = [e.data["state"] for e in drain(sub) if e.type == events.CONNECTION_STATE]
        assert states == ["connecting", "connected"]
        assert server.starts == 1


async def test_two_hundred_concurrent_calls_overlap(autojump_clock: trio.abc.Clock) -> None:
    """200 calls in flight at once over one connection all succeed, in the time of one."""
    async with running(memory_settings()) as ([handle], _):
        await handle.connect()
        results: list[str] = []

        async def one(i: int) -> None:
            result = await handle.call_tool("sleep", {"seconds": 1.0})
            assert not result.is_error
            results.append(str(i))

        started = trio.current_time()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in range(200):
                    nursery.start_soon(one, i)
                # All 200 are in flight at the same time before any finishes.
                await trio.testing.wait_all_tasks_blocked()
                assert handle.status().calls_in_flight == 200
                assert not results
        assert len(results) == 200
        assert trio.current_time() - started == pytest.approx(1.0, abs=0.01)


async def test_reconnects_after_crash(autojump_clock: trio.abc.Clock) -> None:
    """After the server dies, the supervisor restarts the actor, which reconnects by itself."""
    server = KillableServer(memory_demo_server)
    async with running(memory_settings(server)) as ([handle], sub):
        await handle.connect()
        server.kill()
        error = await wait_event(sub, state_is("error"))
        assert "exited with code 137" in error.data["error"]
        await wait_event(sub, state_is("connected"))
        assert server.starts == 2
        assert handle.status().restarts == 1
        assert text_of(await handle.call_tool("echo", {"text": "back"})) == "back"
        assert text_of(await handle.call_tool("echo", {"text": "still"})) == "still"


async def test_crash_on_every_start_opens_circuit_and_sibling_keeps_serving(autojump_clock: trio.abc.Clock) -> None:
    """A server that exits at every start is parked in error after its intensity; a sibling is unaffected."""
    bad = memory_settings(faulty(exit_at_start=3), name="bad", intensity=Intensity(max_restarts=3, period=60))
    good = memory_settings(name="good")
    async with running(bad, good) as ([bad_h, good_h], sub):
        with pytest.raises(ConnectionFailed):
            await bad_h.connect()
        await wait_event(sub, state_is("error", serverName="bad", circuitOpen=True))
        assert bad_h.status().state is ConnectionState.ERROR
        assert bad_h.status().restarts == 3
        with pytest.raises(ServerCircuitOpen, match="after repeated failures"):
            await bad_h.call_tool("echo", {"text": "x"})
        assert text_of(await good_h.call_tool("echo", {"text": "fine"})) == "fine"
        # Reconnect closes the circuit and tries again (and fails again, honestly).
        with pytest.raises(ConnectionFailed):
            await bad_h.reconnect()


async def test_kill_mid_call_fails_every_call_at_once(autojump_clock: trio.abc.Clock) -> None:
    """A server killed mid-call fails every call in flight at once (not at the 30 s call timeout), naming the exit."""
    server = KillableServer(memory_demo_server)
    async with running(memory_settings(server, intensity=Intensity(max_restarts=0, period=60))) as ([handle], _):
        await handle.connect()
        failures: list[ServerConnectionLost] = []

        async def doomed() -> None:
            try:
                await handle.call_tool("sleep", {"seconds": 60})
            except ServerConnectionLost as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(doomed)
            await trio.testing.wait_all_tasks_blocked()
            assert handle.status().calls_in_flight == 5
            killed_at = trio.current_time()
            server.kill()
        assert trio.current_time() - killed_at < 1.0
        assert len(failures) == 5
        assert all("exited with code 137" in str(f) for f in failures)


async def test_slow_start_beyond_connect_timeout(autojump_clock: trio.abc.Clock) -> None:
    """A server slower than the connect timeout fails with ConnectTimeout at exactly the timeout."""
    settings = memory_settings(
        faulty(slow_start=30), connect_timeout=0.5, intensity=Intensity(max_restarts=0, period=60)
    )
    async with running(settings) as ([handle], _):
        started = trio.current_time()
        with pytest.raises(ConnectTimeout, match=r"0\.5s"):
            await handle.connect()
        assert trio.current_time() - started == pytest.approx(0.5, abs=0.01)


async def test_crash_on_nth_call(autojump_clock: trio.abc.Clock) -> None:
    """The call that crashes the server fails with ServerConnectionLost naming the exit; earlier calls succeeded."""
    settings = memory_settings(faulty(crash_on_call=2), intensity=Intensity(max_restarts=0, period=60))
    async with running(settings) as ([handle], _):
        assert text_of(await handle.call_tool("echo", {"text": "one"})) == "one"
        with pytest.raises(ServerConnectionLost, match="exited with code 3"):
            await handle.call_tool("echo", {"text": "two"})


async def test_tools_list_changed_bumps_epoch_and_emits_event(autojump_clock: trio.abc.Clock) -> None:
    """notifications/tools/list_changed invalidates (epoch) and emits tools:changed."""
    async with running(memory_settings()) as ([handle], sub):
        names = {t.name for t in await handle.list_tools()}
        assert "extra" not in names
        epoch = handle.status().tools_epoch
        await handle.call_tool("toggle_extra_tool", {})
        await wait_event(sub, lambda e: e.type == events.TOOLS_CHANGED)
        assert handle.status().tools_epoch > epoch
        assert "extra" in {t.name for t in await handle.list_tools()}


async def test_health_ping_returns_round_trip() -> None:
    """Health pings the server and returns a positive round-trip time (real clock: a ping takes real time)."""
    async with running(memory_settings()) as ([handle], _):
        rtt = await handle.health()
        assert 0 < rtt < 5
