"""The connection actor against real demo and fault servers over stdio."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import attrs
import psutil
import pytest
import trio
from testkit import drain, text_of

from mcp_actors import events
from mcp_actors.connection import ConnectionHandle, ConnectionSettings, ConnectionState, open_connection
from mcp_actors.errors import (
    CommandNotFound,
    ConnectionFailed,
    ConnectTimeout,
    ServerCircuitOpen,
    ServerConnectionLost,
    ToolCallTimeout,
)
from mcp_actors.testing import demo_server_command, fault_server_command
from mcp_actors.transports import StdioParams
from supervisors import Backoff, Intensity

FAST_BACKOFF = Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0)


def stdio_settings(argv: Sequence[str], name: str = "srv", **overrides: object) -> ConnectionSettings:
    base = ConnectionSettings(
        server_id=f"id-{name}",
        server_name=name,
        transport=StdioParams(command=argv[0], args=tuple(argv[1:]), close_grace=2.0, term_grace=1.0),
        connect_timeout=20.0,
        call_timeout=30.0,
        ping_interval=0,
        backoff=FAST_BACKOFF,
    )
    return attrs.evolve(base, **overrides)


@asynccontextmanager
async def running(*settings: ConnectionSettings) -> AsyncIterator[tuple[list[ConnectionHandle], events.Subscription]]:
    """Run connection slots for the block; close their mailboxes and wait for them after."""
    bus = events.EventBus()
    sub = bus.subscribe(buffer=10_000)
    handles = []
    async with trio.open_nursery() as nursery:
        for s in settings:
            handle, start = open_connection(s, bus)
            await nursery.start(start)
            handles.append(handle)
        try:
            yield handles, sub
        finally:
            for handle in handles:
                await handle.aclose()


async def wait_event(sub: events.Subscription, predicate, *, timeout: float = 30.0) -> events.Event:
    """The next event satisfying ``predicate`` (bounded)."""
    with trio.fail_after(timeout):
        async for event in sub:
            if predicate(event):
                return event
    raise AssertionError("event stream ended")


def state_is(state: str, **data: object):
    return lambda e: (
        e.type == events.CONNECTION_STATE
        and e.data["state"] == state
        and all(e.data.get(k) == v for k, v in data.items())
    )


async def test_connect_is_lazy(no_leaked_tasks: None) -> None:
    """Nothing is spawned until the first demand; the first call connects."""
    async with running(stdio_settings(demo_server_command())) as ([handle], _):
        await trio.testing.wait_all_tasks_blocked()
        assert handle.status().state is ConnectionState.DISCONNECTED
        assert handle.status().pid is None
        assert all("mcp_actors.demo_server" not in " ".join(c.cmdline()) for c in psutil.Process().children())
        result = await handle.call_tool("echo", {"text": "hi"})
        assert text_of(result) == "hi"
        assert handle.status().state is ConnectionState.CONNECTED
        assert handle.status().pid is not None


async def test_state_transitions_emit_events() -> None:
    """connecting → connected (+ server:connected) → disconnected, in order, each an event."""
    async with running(stdio_settings(demo_server_command())) as ([handle], sub):
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


async def test_concurrent_connects_are_coalesced() -> None:
    """Fifty concurrent first demands start exactly one server process."""
    async with running(stdio_settings(demo_server_command())) as ([handle], sub):
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(handle.connect)
        states = [e.data["state"] for e in drain(sub) if e.type == events.CONNECTION_STATE]
        assert states == ["connecting", "connected"]


async def test_two_hundred_concurrent_calls_overlap() -> None:
    """200 calls in flight at once over one connection all succeed."""
    async with running(stdio_settings(demo_server_command())) as ([handle], _):
        await handle.connect()
        results: list[str] = []

        async def one(i: int) -> None:
            result = await handle.call_tool("sleep", {"seconds": 1.0})
            assert not result.is_error
            results.append(str(i))

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for i in range(200):
                    nursery.start_soon(one, i)
                # All 200 are in flight at the same time before any finishes.
                await trio.testing.wait_all_tasks_blocked(cushion=0.05)
                assert handle.status().calls_in_flight == 200
                assert not results
        assert len(results) == 200


async def test_kill_mid_call_fails_fast_with_stderr_tail() -> None:
    """SIGKILL of the server fails in-flight calls at once (not at the 30 s call timeout) with its last stderr line."""
    async with running(stdio_settings(demo_server_command(), intensity=Intensity(max_restarts=0, period=60))) as (
        [handle],
        _,
    ):
        await handle.call_tool("stderr", {"text": "last-words-4711"})
        failures: list[BaseException] = []

        async def doomed() -> None:
            try:
                await handle.call_tool("sleep", {"seconds": 60})
            except ServerConnectionLost as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(doomed)
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            assert handle.status().calls_in_flight == 5
            os.kill(handle.status().pid, signal.SIGKILL)
            start = trio.current_time()
        elapsed = trio.current_time() - start
        assert len(failures) == 5
        assert elapsed < 10.0, elapsed  # expected ~0.05 s; generous for a loaded machine
        assert all("SIGKILL" in str(f) for f in failures)
        assert any("last-words-4711" in line for line in failures[0].stderr_tail)


async def test_reconnects_after_crash() -> None:
    """After the server dies, the supervisor restarts the actor, which reconnects by itself."""
    async with running(stdio_settings(demo_server_command())) as ([handle], sub):
        await handle.connect()
        first_pid = handle.status().pid
        os.kill(first_pid, signal.SIGKILL)
        await wait_event(sub, state_is("error"))
        await wait_event(sub, state_is("connected"))
        assert handle.status().pid not in (None, first_pid)
        assert handle.status().restarts == 1
        assert text_of(await handle.call_tool("echo", {"text": "back"})) == "back"
        assert text_of(await handle.call_tool("echo", {"text": "still"})) == "still"


async def test_crash_on_every_start_opens_circuit_and_sibling_keeps_serving() -> None:
    """A server that exits at every start is parked in error after its intensity; a sibling is unaffected."""
    bad = stdio_settings(
        fault_server_command("--exit-at-start", "3"), name="bad", intensity=Intensity(max_restarts=3, period=60)
    )
    good = stdio_settings(demo_server_command(), name="good")
    async with running(bad, good) as ([bad_h, good_h], sub):
        with pytest.raises(ConnectionFailed):
            await bad_h.connect()
        await wait_event(sub, state_is("error", serverName="bad", circuitOpen=True))
        assert bad_h.status().state is ConnectionState.ERROR
        assert bad_h.status().restarts == 3
        with pytest.raises(ServerCircuitOpen):
            await bad_h.call_tool("echo", {"text": "x"})
        assert text_of(await good_h.call_tool("echo", {"text": "fine"})) == "fine"
        # Reconnect closes the circuit and tries again (and fails again, honestly).
        with pytest.raises(ConnectionFailed):
            await bad_h.reconnect()


async def test_missing_command_opens_circuit_at_once() -> None:
    """A command that does not exist is reported by name and not retried."""
    settings = stdio_settings(["definitely-not-a-command-xyz"], name="ghost")
    async with running(settings) as ([handle], sub):
        with pytest.raises(CommandNotFound, match="definitely-not-a-command-xyz"):
            await handle.connect()
        await wait_event(sub, state_is("error", circuitOpen=True))
        assert handle.status().restarts == 0


async def test_hung_call_times_out_and_server_sees_cancellation() -> None:
    """A call past its timeout raises ToolCallTimeout and the server receives notifications/cancelled."""
    async with running(stdio_settings(fault_server_command("--hang-tool", "echo"))) as ([handle], _):
        with pytest.raises(ToolCallTimeout, match="echo"):
            await handle.call_tool("echo", {"text": "x"}, timeout=0.5)
        with trio.fail_after(10):
            await handle.wait_for_stderr(lambda line: "fault: cancelled" in line)
        # The connection survives a timed-out call.
        assert handle.status().state is ConnectionState.CONNECTED


async def test_grandchild_ignoring_sigterm_is_gone_after_shutdown() -> None:
    """Disconnect kills the whole tree, including a grandchild that ignores SIGTERM."""
    async with running(stdio_settings(fault_server_command("--spawn-grandchild"))) as ([handle], _):
        await handle.connect()
        with trio.fail_after(10):
            line = await handle.wait_for_stderr(lambda line: "fault: grandchild" in line)
        pid = int(re.search(r"fault: grandchild (\d+)", line).group(1))
        grandchild = psutil.Process(pid)
        await handle.disconnect()
        assert not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE


async def test_full_stderr_pipe_does_not_deadlock() -> None:
    """A server writing megabytes to stderr keeps answering (we drain stderr continuously)."""
    async with running(stdio_settings(fault_server_command("--flood-stderr", "2000000"))) as ([handle], _):
        for i in range(3):
            assert text_of(await handle.call_tool("echo", {"text": str(i)})) == str(i)


async def test_slow_start_beyond_connect_timeout() -> None:
    """A server slower than the connect timeout fails with ConnectTimeout, leaving no process."""
    settings = stdio_settings(
        fault_server_command("--slow-start", "30"), connect_timeout=0.5, intensity=Intensity(max_restarts=0, period=60)
    )
    async with running(settings) as ([handle], _):
        with pytest.raises(ConnectTimeout, match=r"0\.5s"):
            await handle.connect()


async def test_garbage_on_stdout_is_skipped_and_reported() -> None:
    """Non-JSON (and non-UTF-8) lines on stdout are skipped; the session still works."""
    async with running(stdio_settings(fault_server_command("--garbage-stdout=interleave"))) as ([handle], _):
        for i in range(3):
            assert text_of(await handle.call_tool("echo", {"text": f"g{i}"})) == f"g{i}"


async def test_close_stdout_is_death() -> None:
    """A server that closes stdout but stays alive is treated as dead and killed."""
    async with running(
        stdio_settings(fault_server_command("--close-stdout"), intensity=Intensity(max_restarts=0, period=60))
    ) as ([handle], _):
        with pytest.raises(ConnectionFailed):
            await handle.connect()
            await handle.call_tool("echo", {"text": "x"})


async def test_crash_on_nth_call() -> None:
    """The call that crashes the server fails with ServerConnectionLost; earlier calls succeeded."""
    async with running(
        stdio_settings(fault_server_command("--crash-on-call", "2"), intensity=Intensity(max_restarts=0, period=60))
    ) as ([handle], _):
        assert text_of(await handle.call_tool("echo", {"text": "one"})) == "one"
        with pytest.raises(ServerConnectionLost, match="exited") as info:
            await handle.call_tool("echo", {"text": "two"})
        assert any("crash" in line for line in info.value.stderr_tail)


async def test_huge_output_arrives_whole() -> None:
    """A 50 MB tool result is received intact."""
    size = 50 * 1024 * 1024
    async with running(stdio_settings(demo_server_command())) as ([handle], _):
        result = await handle.call_tool("big", {"n": size})
        assert len(text_of(result)) == size


async def test_unanswered_pings_mark_the_server_dead() -> None:
    """With periodic pings on, a server that stops answering them is declared dead."""
    settings = stdio_settings(
        fault_server_command("--no-ping"),
        ping_interval=0.2,
        ping_timeout=0.3,
        intensity=Intensity(max_restarts=0, period=60),
    )
    async with running(settings) as ([handle], sub):
        await handle.connect()
        await wait_event(sub, state_is("error"))
        assert "ping" in (handle.status().error or "")


async def test_notification_flood_does_not_block_calls() -> None:
    """Thousands of notifications per call do not stall the session."""
    async with running(stdio_settings(fault_server_command("--flood-notifications", "2000"))) as ([handle], _):
        for i in range(3):
            assert text_of(await handle.call_tool("echo", {"text": str(i)})) == str(i)


async def test_tools_list_changed_bumps_epoch_and_emits_event() -> None:
    """notifications/tools/list_changed invalidates (epoch) and emits tools:changed."""
    async with running(stdio_settings(demo_server_command())) as ([handle], sub):
        names = {t.name for t in await handle.list_tools()}
        assert "extra" not in names
        epoch = handle.status().tools_epoch
        await handle.call_tool("toggle_extra_tool", {})
        await wait_event(sub, lambda e: e.type == events.TOOLS_CHANGED)
        assert handle.status().tools_epoch > epoch
        assert "extra" in {t.name for t in await handle.list_tools()}


async def test_health_ping_returns_round_trip() -> None:
    """Health pings the server and returns a positive round-trip time."""
    async with running(stdio_settings(demo_server_command())) as ([handle], _):
        rtt = await handle.health()
        assert 0 < rtt < 5
