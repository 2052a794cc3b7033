"""What one idle connected stdio connection keeps alive: its trio tasks, pinned.

Memory per idle connection is mostly the tasks it keeps (each a coroutine frame, a cancel
status, often a nursery) and what they hold. These tests count the tasks of a real stdio
connection (the fault server, pings on) once it is connected, listed and idle, so that a
task added to the idle path shows up here rather than in a benchmark months later.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import trio
import trio.testing
from testkit import running, state_is, wait_event

from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import StdioParams
from mcp_actors.testing import fault_server_command

BOUND = 60.0
"""Generous bound for a connect and a listing that take well under a second on a quiet machine."""

IDLE_TASKS = {
    "mcp_actors._connection.handle.SlotRunner.run": "the slot: mailbox, actor and restarts, one task",
    "mcp_actors._connection.actor._ConnectionActor._run_session": "the session: connect, then ping and watch for death",
    "mcp_actors._wire.dispatch.WireDispatcher.run": "the dispatcher, running the wire: the one stdout reader that wakes"
    " each waiting caller (its nursery holds only inbound handlers and a cut line's rest)",
}
"""Every task an idle connected stdio connection (handshake revision) keeps, and why."""

SHARED_PUMPS = "mcp_actors._wire.transports stdio pumps"
"""The one system task per trio run that drains every server's stderr and watches every exit."""


def stdio_settings(argv: list[str], name: str = "srv") -> ConnectionSettings:
    """Settings for a stdio server ``argv`` with generous timeouts; pings on (every 30 s)."""
    return ConnectionSettings(
        server_id=f"id-{name}",
        server_name=name,
        transport=StdioParams(command=argv[0], args=tuple(argv[1:])),
        connect_timeout=BOUND,
        call_timeout=BOUND,
    )


def _tasks(task: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    yield task
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from _tasks(child)


def _task_names() -> list[str]:
    return [task.name for task in _tasks(trio.lowlevel.current_root_task())]


async def test_an_idle_connected_stdio_connection_keeps_three_tasks() -> None:
    """An idle, connected, listed stdio connection with pings on runs exactly the tasks of IDLE_TASKS.

    Counted for a second connection, so that what a run shares between all its servers
    (the stdio pumps: every stderr pipe and process exit in one task) is not counted.
    """
    async with running(stdio_settings(fault_server_command(), "first")) as ([first], _):
        with trio.fail_after(BOUND):
            await first.list_tools()
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        before = _task_names()
        assert SHARED_PUMPS in before, before
        async with running(stdio_settings(fault_server_command(), "second")) as ([handle], _):
            with trio.fail_after(BOUND):
                await handle.list_tools()
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            after = _task_names()
    added = list(after)
    for name in before:
        added.remove(name)
    assert sorted(added) == sorted(IDLE_TASKS), f"tasks of one idle connection: {sorted(added)}"


async def test_an_idle_slot_that_never_connected_keeps_one_task() -> None:
    """A configured server that was never used costs one task (its slot), no supervisor, no session."""
    before = _task_names()
    async with running(stdio_settings(fault_server_command())):
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        after = _task_names()
    added = list(after)
    for name in before:
        added.remove(name)
    assert added == ["mcp_actors._connection.handle.SlotRunner.run"], added


def _pipe_holding_server() -> list[str]:
    """The fault server, exec'd by a shell that first starts a child holding all three pipes open."""
    fault = " ".join(fault_server_command())
    return ["/bin/sh", "-c", f"sleep 3600 & exec {fault}"]


async def _killed_server_is_seen_dead(command: list[str] | None = None) -> str:
    """SIGKILL the server (not its pipe-holding child); return the error its state reports."""
    async with running(stdio_settings(command or _pipe_holding_server())) as ([handle], sub):
        with trio.fail_after(BOUND):
            await handle.list_tools()
        pid = handle.status().pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        event = await wait_event(sub, state_is("error"), timeout=BOUND)
        return str(event.data["error"])


async def test_an_exit_is_seen_while_a_child_holds_the_pipes() -> None:
    """A server killed while its child keeps stdout open is declared dead by its exit (no EOF ever comes)."""
    assert "killed by SIGKILL" in await _killed_server_is_seen_dead()


async def test_a_killed_server_is_named_killed_even_when_its_exit_is_seen_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a loaded machine the shared pumps may see an exit well after the pipes broke (one
    task for every server, behind hundreds of failing calls). The death still names the
    signal: after a bounded wait for the watcher, it is read from the zombie, not guessed
    from the broken pipe."""
    import mcp_actors._wire.transports as transports

    # The pumps never get to this exit: they stop watching it and leave the zombie unreaped.
    monkeypatch.setattr(transports._Pumps, "_exited", lambda self, entry: self._close_pidfd(entry))
    assert "killed by SIGKILL" in await _killed_server_is_seen_dead(fault_server_command())
    zombies = [c.pid for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE]
    assert not zombies  # the unreported exit was still reaped at the close


async def test_without_pidfds_each_server_gets_its_own_watch_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no pidfd can be had, stderr and the exit are watched by two tasks per server, with the same outcome."""

    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "pidfd_open is not available here")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    async with running(stdio_settings(fault_server_command())) as ([handle], _):
        with trio.fail_after(BOUND):
            await handle.list_tools()
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        names = _task_names()
    assert (
        "mcp_actors._wire.transports._drain_stderr" in names and "mcp_actors._wire.transports._watch_exit" in names
    ), names
    assert "killed by SIGKILL" in await _killed_server_is_seen_dead()


async def test_a_failure_serving_one_server_in_the_shared_pumps_spares_the_others(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug while the shared pumps read one server's stderr ends only that server's watch; the run goes on."""
    import mcp_actors._wire.transports as transports

    split = transports._stderr_chunk

    def failing_for_bad(chunk: bytes, pending: bytes, tail: Any, server_log: Any) -> bytes:
        if server_log.name.endswith(".bad"):
            raise RuntimeError("a bug in the pumps, for this server only")
        return split(chunk, pending, tail, server_log)

    monkeypatch.setattr(transports, "_stderr_chunk", failing_for_bad)
    bad = stdio_settings(fault_server_command("--flood-stderr", "64"), "bad")
    good = stdio_settings(fault_server_command("--flood-stderr", "64"), "good")
    async with running(bad, good) as ([bad_handle, good_handle], sub):
        with trio.fail_after(BOUND):
            await bad_handle.list_tools()
            await good_handle.list_tools()
            result = await bad_handle.call_tool("echo", {"text": "still served"})
        assert not result.is_error
        assert SHARED_PUMPS in _task_names()
        pid = good_handle.status().pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        event = await wait_event(sub, lambda e: state_is("error")(e) and e.data["serverName"] == "good", timeout=BOUND)
    assert "killed by SIGKILL" in str(event.data["error"])
    assert any("server bad: watching its stderr and exit failed" in r.getMessage() for r in caplog.records)
