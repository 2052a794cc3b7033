"""The connection actor's lifecycle rules: death is published before anyone sees it, no request is lost.

In-memory fault servers on virtual time: a :class:`~mcp_actors.testing.memory.KillableServer`
dies the way a killed process does (its link ends with "exited with code 137" while calls
are in flight). Every wait is bounded; no test sleeps for a fixed time to let something
happen. The rules that need a process (its identity, a server-side cancellation seen on
stderr, a ping-deaf server) are in tests/test_connection_processes.py.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from mcp.server.mcpserver import MCPServer
from testkit import counting_steps, drain, running, state_is, text_of, wait_event

from mcp_actors import events
from mcp_actors._connection.handle import ConnectionHandle, open_connection, open_slot
from mcp_actors._connection.status import CLIENT_INFO, ConnectionSettings, ConnectionState, _StatusCell
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.errors import ActorStopped, ConnectionFailed, ServerCircuitOpen, ServerConnectionLost
from mcp_actors.testing._fault_plan import FaultPlan
from mcp_actors.testing.memory import KillableServer, memory_demo_server, memory_fault_server
from supervisors import Backoff, Intensity

BOUND = 30.0
"""Bound (virtual seconds) for anything expected at once."""

NO_RESTART = Intensity(max_restarts=0, period=60)
FAST_BACKOFF = Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0)


def fault_server(**plan: Any) -> KillableServer:
    """A killable factory of in-memory fault servers with this fault plan."""
    return KillableServer(lambda: memory_fault_server(FaultPlan(**plan)))


def settings_for(server: Callable[[], MCPServer[Any]], **overrides: object) -> ConnectionSettings:
    """Connection settings for the in-memory ``server``, named ``srv``."""
    base = ConnectionSettings(
        server_id="id-srv",
        server_name="srv",
        transport=MemoryParams(server=server),
        connect_timeout=20.0,
        call_timeout=30.0,
        ping_interval=0,
        backoff=FAST_BACKOFF,
    )
    return attrs.evolve(base, **overrides)


async def wait_in_flight(handle: ConnectionHandle, n: int) -> None:
    """Wait (bounded) until ``n`` calls are registered on the live connection."""
    with trio.fail_after(BOUND):
        while handle.status().calls_in_flight < n:  # noqa: ASYNC110  (no event for it; a bounded poll)
            await trio.sleep(0.005)


async def wait_started(server: KillableServer) -> None:
    """Wait (bounded) until an instance of ``server`` runs and every task is blocked (e.g. in its slow start)."""
    with trio.fail_after(BOUND):
        while server.starts == 0:  # noqa: ASYNC110  (no event for a start; a bounded poll)
            await trio.sleep(0.005)
    await trio.testing.wait_all_tasks_blocked()


def states(sub: events.Subscription) -> list[str]:
    return [e.data["state"] for e in drain(sub) if e.type == events.CONNECTION_STATE]


@pytest.mark.parametrize("cold", [False, True], ids=["connected", "cold"])
async def test_state_is_error_before_an_in_flight_call_fails(cold: bool, autojump_clock: trio.abc.Clock) -> None:
    """A call failed by the server's death finds the state error and its event already emitted."""
    server = fault_server()
    async with running(settings_for(server, intensity=NO_RESTART)) as ([handle], sub):
        if not cold:
            await handle.connect()
        seen: list[object] = []

        async def doomed() -> None:
            try:
                await handle.call_tool("sleep", {"seconds": 600})
            except ServerConnectionLost:
                seen.append((handle.status().state, "error" in states(sub)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(doomed)
            await wait_in_flight(handle, 1)
            server.kill()
        assert seen == [(ConnectionState.ERROR, True)]


async def test_call_right_after_a_crash_gets_the_restarted_servers_answer(autojump_clock: trio.abc.Clock) -> None:
    """Only calls in flight at a crash fail; a call issued right after waits for the restart and succeeds."""
    server = fault_server()
    async with running(settings_for(server)) as ([handle], _sub):
        await handle.connect()
        answers: list[str] = []

        async def doomed() -> None:
            with pytest.raises(ServerConnectionLost):
                await handle.call_tool("sleep", {"seconds": 600})
            # Issued the moment the failure is seen, while the dead incarnation may still be closing.
            answers.append(text_of(await handle.call_tool("echo", {"text": "back"})))

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                await wait_in_flight(handle, 1)
                server.kill()
        assert answers == ["back"]
        assert server.starts == 2
        assert handle.status().restarts == 1


async def test_every_call_in_flight_fails_at_a_crash_and_later_ones_succeed(autojump_clock: trio.abc.Clock) -> None:
    """Ten calls in flight all fail with the death; ten issued right after all get the new server's answer."""
    server = fault_server()
    async with running(settings_for(server)) as ([handle], _sub):
        await handle.connect()
        failed: list[BaseException] = []
        answers: list[str] = []

        async def doomed(i: int) -> None:
            try:
                await handle.call_tool("sleep", {"seconds": 600})
            except ServerConnectionLost as exc:
                failed.append(exc)
            answers.append(text_of(await handle.call_tool("echo", {"text": str(i)})))

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                for i in range(10):
                    nursery.start_soon(doomed, i)
                await wait_in_flight(handle, 10)
                server.kill()
        assert len(failed) == 10
        assert sorted(answers, key=int) == [str(i) for i in range(10)]


async def test_connect_waiters_are_answered_at_once_when_the_attempt_dies(autojump_clock: trio.abc.Clock) -> None:
    """Requests waiting on a connection attempt get its failure the moment the server dies, not at the timeout."""
    server = fault_server(slow_start=600)
    async with running(settings_for(server, connect_timeout=600.0, intensity=NO_RESTART)) as ([handle], _sub):
        outcomes: list[BaseException] = []

        async def waiter() -> None:
            try:
                await handle.connect()
            except ConnectionFailed as exc:
                outcomes.append(exc)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(waiter)
                await wait_started(server)
                server.kill()
        assert len(outcomes) == 3


async def test_requests_queued_when_the_slot_stops_get_actor_stopped(autojump_clock: trio.abc.Clock) -> None:
    """A request queued during a restart backoff is answered ActorStopped at once when the slot is stopped."""
    settings = settings_for(
        fault_server(exit_at_start=3),
        backoff=Backoff(min_delay=1000.0, max_delay=1000.0, jitter=0.0, reset_after=60.0),
    )
    bus = events.EventBus()
    handle, start = open_connection(settings, bus)
    outcomes: list[BaseException] = []

    async def queued() -> None:
        try:
            await handle.connect()
        except ActorStopped as exc:
            outcomes.append(exc)

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as callers:
            async with trio.open_nursery() as slot:
                await slot.start(start)
                with pytest.raises(ConnectionFailed):
                    await handle.connect()  # the first incarnation crashes; the next one is 1000 s away
                callers.start_soon(queued)
                await trio.testing.wait_all_tasks_blocked()
                slot.cancel_scope.cancel()
    assert len(outcomes) == 1
    with pytest.raises(ActorStopped):
        await handle.connect()  # and the mailbox is closed for good


async def test_closing_the_mailbox_answers_requests_in_progress(autojump_clock: trio.abc.Clock) -> None:
    """Requests waiting on a connection attempt are answered at once when the mailbox is closed."""
    server = fault_server(slow_start=600)
    bus = events.EventBus()
    handle, start = open_connection(settings_for(server, connect_timeout=600.0), bus)
    outcomes: list[BaseException] = []

    async def waiter() -> None:
        try:
            await handle.connect()
        except (ConnectionFailed, ActorStopped) as exc:
            outcomes.append(exc)

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            for _ in range(3):
                nursery.start_soon(waiter)
            await wait_started(server)
            await handle.aclose()
    assert len(outcomes) == 3
    assert handle.status().state is ConnectionState.DISCONNECTED


def test_client_version_is_the_installed_package_version() -> None:
    """The client announces the installed mcp-actors version, not a hard-coded one."""
    assert CLIENT_INFO.name == "mcp-actors"
    assert CLIENT_INFO.version == importlib.metadata.version("mcp-actors")


async def test_reconnect_after_a_crash_event(autojump_clock: trio.abc.Clock) -> None:
    """After the error event of a crash the slot restarts the server by itself (eager reconnect)."""
    server = fault_server()
    async with running(settings_for(server)) as ([handle], sub):
        await handle.connect()
        server.kill()
        await wait_event(sub, state_is("error"))
        await wait_event(sub, state_is("connected"))
        assert text_of(await handle.call_tool("echo", {"text": "again"})) == "again"
        assert server.starts == 2


async def test_disconnect_fails_calls_in_flight_and_reconnects_lazily(autojump_clock: trio.abc.Clock) -> None:
    """Disconnect fails the calls running on the session, ends in disconnected, and the next call reconnects."""
    server = fault_server()
    async with running(settings_for(server)) as ([handle], _sub):
        await handle.connect()
        failures: list[BaseException] = []

        async def doomed() -> None:
            try:
                await handle.call_tool("sleep", {"seconds": 600})
            except ServerConnectionLost as exc:
                failures.append(exc)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                await wait_in_flight(handle, 1)
                await handle.disconnect()
        assert len(failures) == 1 and "disconnect requested" in str(failures[0])
        assert handle.status().state is ConnectionState.DISCONNECTED and server.starts == 1
        await trio.testing.wait_all_tasks_blocked()
        assert server.starts == 1, "nothing reconnects before a demand"
        assert text_of(await handle.call_tool("echo", {"text": "lazy"})) == "lazy"
        assert server.starts == 2


async def test_disconnect_while_connecting_abandons_the_attempt(autojump_clock: trio.abc.Clock) -> None:
    """A disconnect during a connect attempt answers its waiters at once and leaves the server disconnected."""
    server = fault_server(slow_start=600)
    async with running(settings_for(server, connect_timeout=600.0)) as ([handle], _sub):
        outcomes: list[BaseException] = []

        async def waiter() -> None:
            try:
                await handle.connect()
            except ConnectionFailed as exc:
                outcomes.append(exc)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                await wait_started(server)
                await handle.disconnect()
        assert len(outcomes) == 1 and "abandoned" in str(outcomes[0])
        assert handle.status().state is ConnectionState.DISCONNECTED
        assert handle.status().restarts == 0


async def test_reconnect_replaces_the_server_without_passing_through_disconnected(
    autojump_clock: trio.abc.Clock,
) -> None:
    """reconnect() closes the session and connects a new server: connecting then connected, no disconnected."""
    server = fault_server()
    async with running(settings_for(server)) as ([handle], sub):
        await handle.connect()
        drain(sub)
        await handle.reconnect()
        assert states(sub) == ["connecting", "connected"]
        assert server.starts == 2
        assert text_of(await handle.call_tool("echo", {"text": "new"})) == "new"


async def test_call_right_after_the_last_allowed_crash_gets_circuit_open(autojump_clock: trio.abc.Clock) -> None:
    """With no restarts left, a call issued right after the crash is answered ServerCircuitOpen, not left waiting."""
    server = fault_server()
    async with running(settings_for(server, intensity=NO_RESTART)) as ([handle], _sub):
        await handle.connect()
        outcomes: list[BaseException] = []

        async def doomed() -> None:
            with pytest.raises(ServerConnectionLost):
                await handle.call_tool("sleep", {"seconds": 600})
            try:
                await handle.call_tool("echo", {"text": "x"})
            except ServerCircuitOpen as exc:
                outcomes.append(exc)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                await wait_in_flight(handle, 1)
                server.kill()
        assert len(outcomes) == 1 and "exited with code 137" in str(outcomes[0])
        assert handle.status().circuit_open


@pytest.mark.parametrize("when", ["in the backoff", "while reconnecting"])
async def test_closing_after_a_crash_stops_at_once(when: str, autojump_clock: trio.abc.Clock) -> None:
    """Closing the mailbox after a crash (in the restart backoff, or during the reconnect) stops the slot at once."""
    server = fault_server(slow_start=5)
    bus = events.EventBus()
    sub = bus.subscribe()
    handle, start = open_connection(settings_for(server, connect_timeout=600.0), bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        await handle.connect()
        server.kill()
        await wait_event(sub, state_is("error"))
        if when == "while reconnecting":
            with trio.fail_after(BOUND):
                while server.starts < 2:  # noqa: ASYNC110  (no event for a start; a bounded poll)
                    await trio.sleep(0.005)
        closing_at = trio.current_time()
        await handle.aclose()
    assert trio.current_time() - closing_at < 1.0


async def test_a_cold_servers_first_listing_is_one_round_trip_to_its_actor(autojump_clock: trio.abc.Clock) -> None:
    """The actor connects and lists on one request: the caller runs to ask and once more for the list.

    It asked "connect", then "list on this connection" (three steps) before; every
    first listing of a runtime's start is one (docs/performance.md).
    """
    async with running(settings_for(fault_server())) as ([handle], _sub):
        assert handle.status().state is ConnectionState.DISCONNECTED
        names: list[str] = []

        async def caller() -> None:
            names.extend(tool.name for tool in await handle.list_tools())

        with counting_steps("caller") as steps, trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller, name="caller")
        assert {"echo", "add"} <= set(names)
        assert handle.status().state is ConnectionState.CONNECTED
        assert steps.count == 2


class SpawnedNames(trio.abc.Instrument):
    """The names of the tasks spawned while it is installed."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.names.append(task.name)


async def test_a_cold_servers_first_listing_runs_in_its_session_task(autojump_clock: trio.abc.Clock) -> None:
    """No fill task: the session task that connected lists what was asked for cold (the start-up path)."""
    async with running(settings_for(fault_server())) as ([handle], _sub):
        spawned = SpawnedNames()
        trio.lowlevel.add_instrument(spawned)
        try:
            with trio.fail_after(BOUND):
                tools = await handle.list_tools()
        finally:
            trio.lowlevel.remove_instrument(spawned)
        assert {"echo", "add"} <= {tool.name for tool in tools}
        assert any(name.endswith("_run_session") for name in spawned.names), spawned.names
        assert not [name for name in spawned.names if "fill" in name], spawned.names
        # A listing asked for on the live connection still gets a fill task of its own.
        spawned = SpawnedNames()
        trio.lowlevel.add_instrument(spawned)
        try:
            with trio.fail_after(BOUND):
                assert [t.name for t in await handle.list_tools()] == [t.name for t in tools]
        finally:
            trio.lowlevel.remove_instrument(spawned)
        assert [name for name in spawned.names if name.endswith("_run_fill")], spawned.names


def hanging_listing_server() -> MCPServer[Any]:
    """A fault server whose ``tools/list`` never answers."""
    server = memory_fault_server(FaultPlan())

    async def never() -> list[Any]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    server.list_tools = never  # type: ignore[method-assign]
    return server


async def wait_listing_sent(handle: ConnectionHandle) -> None:
    """Wait (bounded) until the connection is up and its first listing has gone out and hangs."""
    with trio.fail_after(BOUND):
        while handle.status().state is not ConnectionState.CONNECTED:  # noqa: ASYNC110  (a bounded poll)
            await trio.sleep(0.005)
    await trio.testing.wait_all_tasks_blocked()


@pytest.mark.parametrize("end", ["the server dies", "a disconnect", "the actor stops"])
async def test_a_first_listing_in_the_session_task_gets_the_sessions_end_at_once(
    end: str, autojump_clock: trio.abc.Clock
) -> None:
    """A death, a disconnect or a stop while the session task runs a first listing answers it at once.

    The death is declared by that same task: the listing must not wait for it (it would
    wait forever) nor for the call timeout (an hour here).
    """
    server = KillableServer(hanging_listing_server)
    settings = settings_for(server, call_timeout=3600.0, intensity=NO_RESTART)
    async with running(settings) as ([handle], sub):
        outcomes: list[BaseException] = []
        seen: list[object] = []

        async def lister() -> None:
            try:
                await handle.list_tools()
            except ConnectionFailed as exc:  # ServerConnectionLost and ActorStopped are ConnectionFailed
                seen.append(handle.status().state)
                outcomes.append(exc)

        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(lister)
            await wait_listing_sent(handle)
            if end == "the server dies":
                server.kill()
            elif end == "a disconnect":
                await handle.disconnect()
            else:
                await handle.aclose()
        assert trio.current_time() - started < BOUND
        assert len(outcomes) == 2
        if end == "the server dies":
            assert all(isinstance(exc, ServerConnectionLost) for exc in outcomes)
            assert seen == [ConnectionState.ERROR] * 2  # the state first, then the failure
            assert "error" in states(sub)
        elif end == "a disconnect":
            assert all(isinstance(exc, ServerConnectionLost) and "closed" in str(exc) for exc in outcomes)
            assert handle.status().state is ConnectionState.DISCONNECTED
        else:  # closed as a removed server's connection is
            assert all(isinstance(exc, ServerConnectionLost) and "removed" in str(exc) for exc in outcomes)


async def test_a_first_listing_that_times_out_fails_alone(autojump_clock: trio.abc.Clock) -> None:
    """A first listing past the call timeout fails with a timeout; the connection stays up and answers pings."""
    server = KillableServer(hanging_listing_server)
    async with running(settings_for(server, call_timeout=5.0)) as ([handle], _sub):
        with trio.fail_after(BOUND), pytest.raises(ConnectionFailed, match="timed out after 5s"):
            await handle.list_tools()
        assert handle.status().state is ConnectionState.CONNECTED
        with trio.fail_after(BOUND):
            assert await handle.health() >= 0.0
        assert handle.status().state is ConnectionState.CONNECTED
        assert server.starts == 1


@pytest.mark.parametrize("end", ["the server dies", "a disconnect"])
async def test_listings_waiting_on_a_connection_attempt_get_its_end_at_once(
    end: str, autojump_clock: trio.abc.Clock
) -> None:
    """Cold listings wait on the attempt like connects do: its failure answers them at once, not a timeout."""
    server = fault_server(slow_start=600)
    async with running(settings_for(server, connect_timeout=600.0, intensity=NO_RESTART)) as ([handle], _sub):
        outcomes: list[BaseException] = []

        async def lister() -> None:
            try:
                await handle.list_tools()
            except ConnectionFailed as exc:
                outcomes.append(exc)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(lister)
                await wait_started(server)
                if end == "a disconnect":
                    await handle.disconnect()
                else:
                    server.kill()
        assert len(outcomes) == 3
        if end == "a disconnect":
            assert all("abandoned" in str(exc) for exc in outcomes)
            assert handle.status().state is ConnectionState.DISCONNECTED


async def test_list_tools_at_epoch_names_the_connections_tools_epoch(autojump_clock: trio.abc.Clock) -> None:
    """The epoch given with a list is the status's ``tools_epoch`` of its connection; a new connection moves it."""
    async with running(settings_for(fault_server())) as ([handle], _sub):
        with trio.fail_after(BOUND):
            tools, epoch = await handle.list_tools_at_epoch()
            assert epoch == handle.status().tools_epoch
            await handle.reconnect()
            again, later = await handle.list_tools_at_epoch()
        assert later == handle.status().tools_epoch > epoch
        assert [t.name for t in again] == [t.name for t in tools]


# ---------------------------------------------------------------------- one writer of the status cell


def cell_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, trio.lowlevel.Task]]:
    """Every assignment to a status cell's attribute from now on: ``(name, task that wrote it)``."""
    writes: list[tuple[str, trio.lowlevel.Task]] = []

    def spy(cell: _StatusCell, name: str, value: object) -> None:
        writes.append((name, trio.lowlevel.current_task()))
        object.__setattr__(cell, name, value)

    monkeypatch.setattr(_StatusCell, "__setattr__", spy)
    return writes


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # the server's log at 2026-07-28
@pytest.mark.parametrize("negotiate", ["auto", "legacy"])
async def test_set_log_level_is_recorded_by_the_actor_not_the_caller(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch, negotiate: str
) -> None:
    """set_log_level changes what the server logs from the next request on; the caller's task never writes the cell.

    At 2026-07-28 the level is stamped on every later request, so the connection keeps it:
    the actor records it when asked (a message), as it writes everything else in the cell.
    """
    settings = settings_for(memory_demo_server, negotiate=negotiate, log_level="warning")
    async with running(settings) as ([handle], _):
        quiet = await handle.call_tool("log", {"level": "info", "message": "hidden"})
        assert text_of(quiet) == "not logged: info is below warning"
        writes = cell_writes(monkeypatch)
        await handle.set_log_level("debug")
        loud = await handle.call_tool("log", {"level": "info", "message": "shown"})
        assert text_of(loud) == "logged at info"
        me = trio.lowlevel.current_task()
        assert [name for name, task in writes if task is me] == []


async def test_aclose_tells_the_slot_why_and_the_slot_records_it(
    autojump_clock: trio.abc.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aclose(why) closes the mailbox with its reason; the slot records it and tells the calls it ends.

    The caller's task never writes the cell: the reason reaches the slot as a message.
    """
    outcome: list[object] = []
    async with running(settings_for(fault_server())) as ([handle], _):
        await handle.connect()

        async def long_call() -> None:
            try:
                outcome.append(await handle.call_tool("sleep", {"seconds": 3600}))
            except ServerConnectionLost as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_call)
            await wait_in_flight(handle, 1)
            writes = cell_writes(monkeypatch)
            await handle.aclose("the server was disabled")
            me = trio.lowlevel.current_task()
            assert [name for name, task in writes if task is me] == []
        assert [str(error) for error in outcome] == [
            "server 'srv': the connection was closed (the server was disabled) during the request"
        ]
        assert "stop_reason" in {name for name, _task in writes}
        with pytest.raises(ActorStopped, match=r"its connection actor is not running"):
            await handle.connect()


async def test_requests_queued_for_a_slot_that_never_runs_are_told_why_it_was_closed(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A slot closed with a reason and abandoned before it ran answers what was queued with that reason.

    Its mailbox is full: the reason does not wait for room (it has a channel of its own),
    and a request still waiting to be queued is told the actor is not running.
    """
    handle, runner = open_slot(settings_for(fault_server(), mailbox_capacity=1), events.EventBus())
    outcome: list[str] = []

    async def connect() -> None:
        try:
            await handle.connect()
        except ActorStopped as exc:
            outcome.append(str(exc))

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connect)
            nursery.start_soon(connect)
            await trio.testing.wait_all_tasks_blocked()  # one request queued, one waiting for room
            closing = trio.current_time()
            await handle.aclose("the server was removed")
            runner.abandon()
    assert trio.current_time() == closing
    assert sorted(outcome) == [
        "server 'srv': its connection actor is not running (removed or shutting down)",
        "server 'srv': its connection actor stopped (the server was removed)",
    ]
