"""The connection actor's lifecycle rules: death is published before anyone sees it, no request is lost.

Real fault servers over stdio. Every wait is bounded generously; no test sleeps for a
fixed time to let something happen.
"""

from __future__ import annotations

import importlib.metadata
import os
import signal

import psutil
import pytest
import trio
from test_connection import FAST_BACKOFF, drain, running, state_is, stdio_settings, text_of, wait_event

from mcp_actors import events
from mcp_actors.connection import CLIENT_INFO, ConnectionState, open_connection
from mcp_actors.errors import ActorStopped, ConnectionFailed, ServerCircuitOpen, ServerConnectionLost
from mcp_actors.process_tracker import ProcessIdentity
from mcp_actors.testing import fault_server_command
from supervisors import Backoff, Intensity

BOUND = 30.0
"""Generous bound for anything expected within a second on a busy machine."""

NO_RESTART = Intensity(max_restarts=0, period=60)


async def wait_in_flight(handle, n: int) -> None:
    """Wait (bounded) until ``n`` calls are registered on the live connection."""
    with trio.fail_after(BOUND):
        while handle.status().calls_in_flight < n:  # noqa: ASYNC110  (no event for it; a bounded poll)
            await trio.sleep(0.005)


async def wait_stderr(handle, text: str) -> str:
    """Wait (bounded) until the server runs and writes a stderr line containing ``text``."""
    with trio.fail_after(BOUND):
        while handle.status().pid is None:  # noqa: ASYNC110  (no event for a spawn; a bounded poll)
            await trio.sleep(0.005)
        return await handle.wait_for_stderr(lambda line: text in line)


def states(sub: events.Subscription) -> list[str]:
    return [e.data["state"] for e in drain(sub) if e.type == events.CONNECTION_STATE]


@pytest.mark.parametrize("cold", [False, True], ids=["connected", "cold"])
async def test_state_is_error_before_an_in_flight_call_fails(cold: bool) -> None:
    """A call failed by the server's death finds the state error and its event already emitted."""
    async with running(stdio_settings(fault_server_command(), intensity=NO_RESTART)) as ([handle], sub):
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
            os.kill(handle.status().pid, signal.SIGKILL)
        assert seen == [(ConnectionState.ERROR, True)]


async def test_call_right_after_a_crash_gets_the_restarted_servers_answer() -> None:
    """Only calls in flight at a crash fail; a call issued right after waits for the restart and succeeds."""
    async with running(stdio_settings(fault_server_command())) as ([handle], _sub):
        await handle.connect()
        first = handle.status().pid
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
                os.kill(first, signal.SIGKILL)
        assert answers == ["back"]
        assert handle.status().pid not in (None, first)
        assert handle.status().restarts == 1


async def test_every_call_in_flight_fails_at_a_crash_and_later_ones_succeed() -> None:
    """Ten calls in flight all fail with the death; ten issued right after all get the new server's answer."""
    async with running(stdio_settings(fault_server_command())) as ([handle], _sub):
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
                os.kill(handle.status().pid, signal.SIGKILL)
        assert len(failed) == 10
        assert sorted(answers, key=int) == [str(i) for i in range(10)]


async def test_connect_waiters_are_answered_at_once_when_the_attempt_dies() -> None:
    """Requests waiting on a connection attempt get its failure the moment the server dies, not at the timeout."""
    settings = stdio_settings(fault_server_command("--slow-start", "600"), connect_timeout=600.0, intensity=NO_RESTART)
    async with running(settings) as ([handle], _sub):
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
                await wait_stderr(handle, "fault: slow start")
                os.kill(handle.status().pid, signal.SIGKILL)
        assert len(outcomes) == 3


async def test_requests_queued_when_the_slot_stops_get_actor_stopped() -> None:
    """A request queued during a restart backoff is answered ActorStopped at once when the slot is stopped."""
    settings = stdio_settings(
        fault_server_command("--exit-at-start", "3"),
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


async def test_closing_the_mailbox_answers_requests_in_progress() -> None:
    """Requests waiting on a connection attempt are answered at once when the mailbox is closed."""
    settings = stdio_settings(fault_server_command("--slow-start", "600"), connect_timeout=600.0)
    bus = events.EventBus()
    handle, start = open_connection(settings, bus)
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
            await wait_stderr(handle, "fault: slow start")
            await handle.aclose()
    assert len(outcomes) == 3
    assert handle.status().state is ConnectionState.DISCONNECTED


async def test_status_carries_the_process_identity() -> None:
    """status().process is the stdio server's PID with its create time; pid is its convenience view."""
    async with running(stdio_settings(fault_server_command())) as ([handle], _sub):
        assert handle.status().process is None
        await handle.connect()
        identity = handle.status().process
        assert isinstance(identity, ProcessIdentity)
        assert identity.pid == handle.status().pid
        assert identity.create_time == pytest.approx(psutil.Process(identity.pid).create_time())
        await handle.disconnect()
        assert handle.status().process is None and handle.status().pid is None


def test_client_version_is_the_installed_package_version() -> None:
    """The client announces the installed mcp-actors version, not a hard-coded one."""
    assert CLIENT_INFO.name == "mcp-actors"
    assert CLIENT_INFO.version == importlib.metadata.version("mcp-actors")


async def test_cancelled_caller_cancels_the_call_on_the_server() -> None:
    """A caller that is cancelled mid-call makes the server receive notifications/cancelled; the session lives."""
    async with running(stdio_settings(fault_server_command("--hang-tool", "echo"))) as ([handle], _sub):
        await handle.connect()
        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(handle.call_tool, "echo", {"text": "x"})
                line = await handle.wait_for_stderr(lambda line: "fault: hanging call" in line)
                nursery.cancel_scope.cancel()
            request_id = line.rsplit(" ", 1)[1]
            await handle.wait_for_stderr(lambda line: f"fault: cancelled {request_id}" in line)
        assert handle.status().calls_in_flight == 0
        assert text_of(await handle.call_tool("add", {"a": 1, "b": 2})) == "3"
        assert handle.status().state is ConnectionState.CONNECTED


async def test_reconnect_after_a_crash_event() -> None:
    """After the error event of a crash the slot restarts the server by itself (eager reconnect)."""
    async with running(stdio_settings(fault_server_command(), backoff=FAST_BACKOFF)) as ([handle], sub):
        await handle.connect()
        os.kill(handle.status().pid, signal.SIGKILL)
        await wait_event(sub, state_is("error"))
        await wait_event(sub, state_is("connected"))
        assert text_of(await handle.call_tool("echo", {"text": "again"})) == "again"


async def test_unanswered_health_ping_publishes_the_death_before_failing() -> None:
    """health() on a server that ignores pings fails only after the state is error, naming the ping."""
    async with running(stdio_settings(fault_server_command("--no-ping"), intensity=NO_RESTART)) as ([handle], sub):
        await handle.connect()
        drain(sub)
        with pytest.raises(ServerConnectionLost, match="did not answer a ping") as info:
            await handle.health(timeout=0.5)
        assert handle.status().state is ConnectionState.ERROR
        assert "error" in states(sub)
        assert info.value.server == "srv"


async def test_disconnect_fails_calls_in_flight_and_reconnects_lazily() -> None:
    """Disconnect fails the calls running on the session, ends in disconnected, and the next call reconnects."""
    async with running(stdio_settings(fault_server_command())) as ([handle], _sub):
        await handle.connect()
        first = handle.status().pid
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
        assert handle.status().state is ConnectionState.DISCONNECTED and handle.status().pid is None
        assert text_of(await handle.call_tool("echo", {"text": "lazy"})) == "lazy"
        assert handle.status().pid not in (None, first)


async def test_disconnect_while_connecting_abandons_the_attempt() -> None:
    """A disconnect during a connect attempt answers its waiters at once and leaves the server disconnected."""
    settings = stdio_settings(fault_server_command("--slow-start", "600"), connect_timeout=600.0)
    async with running(settings) as ([handle], _sub):
        outcomes: list[BaseException] = []

        async def waiter() -> None:
            try:
                await handle.connect()
            except ConnectionFailed as exc:
                outcomes.append(exc)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                await wait_stderr(handle, "fault: slow start")
                await handle.disconnect()
        assert len(outcomes) == 1 and "abandoned" in str(outcomes[0])
        assert handle.status().state is ConnectionState.DISCONNECTED
        assert handle.status().restarts == 0


async def test_reconnect_replaces_the_process_without_passing_through_disconnected() -> None:
    """reconnect() closes the session and connects a new process: connecting then connected, no disconnected."""
    async with running(stdio_settings(fault_server_command())) as ([handle], sub):
        await handle.connect()
        first = handle.status().pid
        drain(sub)
        await handle.reconnect()
        assert states(sub) == ["connecting", "connected"]
        assert handle.status().pid not in (None, first)
        assert text_of(await handle.call_tool("echo", {"text": "new"})) == "new"


async def test_call_right_after_the_last_allowed_crash_gets_circuit_open() -> None:
    """With no restarts left, a call issued right after the crash is answered ServerCircuitOpen, not left waiting."""
    async with running(stdio_settings(fault_server_command(), intensity=NO_RESTART)) as ([handle], _sub):
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
                os.kill(handle.status().pid, signal.SIGKILL)
        assert len(outcomes) == 1 and "SIGKILL" in str(outcomes[0])
        assert handle.status().circuit_open
