"""What one idle connected stdio connection keeps alive: its trio tasks, pinned (issue 15).

Memory per idle connection is mostly the tasks it keeps (each a coroutine frame, a cancel
status, often a nursery) and what they hold. These tests count the tasks of a real stdio
connection (the fault server, pings on) once it is connected, listed and idle, so that a
task added to the idle path shows up here rather than in a benchmark months later.
"""

from __future__ import annotations

from collections.abc import Iterator

import trio
import trio.testing
from testkit import running

from mcp_actors.connection import ConnectionSettings
from mcp_actors.testing import fault_server_command
from mcp_actors.transports import StdioParams

BOUND = 60.0
"""Generous bound for a connect and a listing that take well under a second on a quiet machine."""

IDLE_TASKS = {
    "mcp_actors.connection.open_connection.<locals>.start": "the slot: mailbox, actor and restarts, one task",
    "mcp_actors.connection._ConnectionActor._run_session": "the session: connect, then ping and watch for death",
    "mcp_actors.transports._drain_stderr": "stderr drained into the tail (a full pipe would block the server)",
    "mcp_actors.transports._watch_exit": "the process exit, seen even while a grandchild holds the pipes",
    "mcp_actors._dispatch.WireDispatcher.run": "the dispatcher (lead's file: its nursery host)",
    "mcp_actors._dispatch.WireDispatcher._read": "the dispatcher's wire runner",
    "mcp_actors.transports.StdioWire._read": "stdout: the one reader that wakes each waiting caller",
    "mcp.client.session.ClientSession._deliver_bound_notifications": "the SDK's queue for notifications/tasks/status",
}
"""Every task an idle connected stdio connection (handshake revision) keeps, and why."""


def stdio_settings(argv: list[str]) -> ConnectionSettings:
    """Settings for a stdio server ``argv`` with generous timeouts."""
    return ConnectionSettings(
        server_id="id-srv",
        server_name="srv",
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


async def test_an_idle_connected_stdio_connection_keeps_eight_tasks() -> None:
    """An idle, connected, listed stdio connection with pings on runs exactly the tasks of IDLE_TASKS."""
    before = _task_names()
    settings = stdio_settings(fault_server_command())  # pings on (every 30 s)
    async with running(settings) as ([handle], _):
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
    assert added == ["mcp_actors.connection.open_connection.<locals>.start"], added
