"""Task status pushed by the server (``notifications/tasks/status``, 2025-11-25) to the calls waiting on it.

Why: a task-augmented tool call polls ``tasks/get`` at the server's interval; a server that
also pushes status changes lets the call react at once (a completion is fetched without
sitting out the rest of the interval). A call watches its own task id for as long as it
polls; the connection's notification handler hands each status to the call watching that
task, or reports that nobody does (the connection then publishes it as a ``task:status``
event itself).

The handler only hands a value over (``send_nowait`` on the watcher's own channel); each
call owns its watch and its task's state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

import attrs
import mcp.types as mcp_types
import trio

__all__ = ["TaskStatusWatch"]

_BUFFER: Final = 16
"""Statuses one watch may hold unread; past it the newest are dropped (the next poll catches up)."""


@attrs.define(eq=False)
class TaskStatusWatch:
    """The running task calls of one connection, by task id."""

    _watchers: dict[str, trio.MemorySendChannel[mcp_types.Task]] = attrs.field(factory=dict, init=False)

    @contextlib.contextmanager
    def watch(self, task_id: str) -> Iterator[trio.MemoryReceiveChannel[mcp_types.Task]]:
        """Receive the pushed statuses of ``task_id`` for the length of the block."""
        send, receive = trio.open_memory_channel[mcp_types.Task](_BUFFER)
        self._watchers[task_id] = send
        try:
            yield receive
        finally:
            if self._watchers.get(task_id) is send:
                del self._watchers[task_id]
            send.close()
            receive.close()

    def deliver(self, task: mcp_types.Task) -> bool:
        """Hand a pushed status to the call watching its task; False when none does."""
        send = self._watchers.get(task.task_id)
        if send is None:
            return False
        try:
            send.send_nowait(task)
        except (trio.WouldBlock, trio.ClosedResourceError):
            pass  # a full or closing watch: its next poll sees the status anyway
        return True
