"""Tasks of both revisions: pushed statuses, and the 2026-07-28 extension's shapes and advertisement.

**Pushed status.** A task-augmented tool call polls ``tasks/get`` at the server's interval; a
server that also pushes status changes (``notifications/tasks/status`` at 2025-11-25,
``notifications/tasks`` at 2026-07-28) lets the call react at once (a completion is fetched
without sitting out the rest of the interval). A call watches its own task id for as long as
it polls; the connection's notification handler hands each status to the call watching that
task, or reports that nobody does (the connection then publishes it as a ``task:status``
event itself). The handler only hands a value over (``send_nowait`` on the watcher's own
channel); each call owns its watch and its task's state.

**The extension.** At 2026-07-28 tasks left the core protocol: they are the
``io.modelcontextprotocol/tasks`` extension (SEP-2663), negotiated through ``extensions`` in
both sides' capabilities, with shapes and methods of its own (``resultType: "task"``,
``tasks/get`` carrying the result or error inline, ``tasks/update``, an acknowledging
``tasks/cancel``; no ``tasks/result``, no ``tasks/list``). The MCP SDK does not implement it,
so this module holds what the client needs of it:

* the advertisement (:func:`session_kwargs`): the SDK's session is told of the extension with
  a result claim on ``tools/call``, so that the SDK itself declares it in every request it
  stamps at 2026-07-28 and never in a 2025-11-25 handshake (a claim is active only at the
  revisions that have ``resultType``); :class:`~mcp_actors._connection.live.RequestStamp`
  restates the same for the requests we send;
* the negotiation (:func:`negotiated`): the server lists the extension in its ``server/discover``
  capabilities. Only then is a ``tasks/*`` request ever sent to it;
* the wire shapes (:class:`ExtensionTask`), validated once where they arrive.

Driving an extension task (poll, answer its input requests, cancel it when abandoned) is the
connection handle's, next to the 2025-11-25 driver.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
import mcp.types as mcp_types
import pydantic
import trio
from mcp.client.extension import ClaimContext, ResultClaim
from pydantic.alias_generators import to_camel

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "TASKS_EXTENSION",
    "TERMINAL",
    "CreatedTask",
    "ExtensionTask",
    "TASK_STARTED",
    "TaskStatusWatch",
    "negotiated",
    "session_kwargs",
]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's identifier, in ``capabilities.extensions`` on both sides."""

TASK_STARTED: contextvars.ContextVar[Callable[[ExtensionTask], None] | None] = contextvars.ContextVar(
    "mcp_actors_task_started", default=None
)
"""Told, in the caller's task, when a ``tools/call``'s server answered with a task (2026-07-28).

Why: a caller that serves tasks itself (the gateway) turns its own call into a task exactly
when the upstream made one; every other caller leaves it unset and sees a plain call.
"""

TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
"""The statuses a task never leaves."""

_BUFFER: Final = 16
"""Statuses one watch may hold unread; past it the newest are dropped (the next poll catches up)."""

ExtensionStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class ExtensionTask(pydantic.BaseModel):
    """A task as the 2026-07-28 extension shows it: a ``DetailedTask``, its payload inline.

    What ``tasks/get`` answers and ``notifications/tasks`` carries, and (without a payload)
    what a ``tools/call`` answers with ``resultType: "task"``. Unknown keys are ignored
    (``resultType``, ``_meta``, and whatever a later draft adds).

    Attributes:
        task_id: The server's handle of the task.
        status: Where it is; :data:`TERMINAL` ones never change.
        status_message: The server's words about it, for people.
        created_at: ISO 8601, as the server wrote it.
        last_updated_at: ISO 8601, as the server wrote it.
        ttl_ms: How long the server keeps it after creation (``None``: unlimited).
        poll_interval_ms: How often the server wants to be asked.
        input_requests: ``input_required``: what the server asks the host (sampling,
            elicitation, roots), by key; answered with ``tasks/update``.
        result: ``completed``: what the request would have answered (a ``CallToolResult``).
        error: ``failed``: the JSON-RPC error the request ended with.
    """

    model_config = pydantic.ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    task_id: str
    status: ExtensionStatus
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, mcp_types.InputRequest] | None = None
    result: dict[str, Any] | None = None
    error: mcp_types.ErrorData | None = None


class CreatedTask(mcp_types.Result):
    """``CreateTaskResult`` (``Result & Task``, ``resultType: "task"``): only the SDK's result claim names it.

    Our own ``tools/call`` path reads the answer as :class:`ExtensionTask`; this model exists
    because the SDK's claim machinery, which decides at which revisions the extension is
    advertised, takes a ``Result`` subclass.
    """

    result_type: Literal["task"] = "task"
    task_id: str
    status: ExtensionStatus


async def _not_through_the_sdk(created: CreatedTask, ctx: ClaimContext) -> mcp_types.CallToolResult:
    """The claim's resolver: never reached, because no ``tools/call`` of ours goes through the SDK's ``call_tool``."""
    raise RuntimeError(
        f"task {created.task_id} came through the SDK's call_tool; mcp-actors drives extension tasks on its own"
        " call path (ConnectionHandle.call_tool)"
    )


_CLAIM: Final = ResultClaim(result_type="task", model=CreatedTask, resolve=_not_through_the_sdk)


def session_kwargs() -> dict[str, Any]:
    """What the SDK's ``ClientSession`` is given so that it advertises the extension, at 2026-07-28 only."""
    return {"extensions": {TASKS_EXTENSION: {}}, "result_claims": {TASKS_EXTENSION: [_CLAIM]}}


def negotiated(session: ClientSession) -> bool:
    """Whether the server offered the extension (its ``server/discover`` capabilities): a 2026-07-28 session only.

    A 2025-11-25 ``initialize`` may carry the key too (the SDK's server advertises its
    extensions there as well), but the extension does not exist at that revision.
    """
    if session.discover_result is None:
        return False
    caps = session.server_capabilities
    return bool(caps is not None and caps.extensions and TASKS_EXTENSION in caps.extensions)


PushedTask = mcp_types.Task | ExtensionTask
"""A pushed status: 2025-11-25's ``Task``, or the extension's whole task."""


@attrs.define(eq=False)
class TaskStatusWatch:
    """The running task calls of one connection, by task id."""

    _watchers: dict[str, trio.MemorySendChannel[PushedTask]] = attrs.field(factory=dict, init=False)

    @contextlib.contextmanager
    def watch(self, task_id: str) -> Iterator[trio.MemoryReceiveChannel[PushedTask]]:
        """Receive the pushed statuses of ``task_id`` for the length of the block."""
        send, receive = trio.open_memory_channel[PushedTask](_BUFFER)
        self._watchers[task_id] = send
        try:
            yield receive
        finally:
            if self._watchers.get(task_id) is send:
                del self._watchers[task_id]
            send.close()
            receive.close()

    def deliver(self, task: PushedTask) -> bool:
        """Hand a pushed status to the call watching its task; False when none does."""
        send = self._watchers.get(task.task_id)
        if send is None:
            return False
        try:
            send.send_nowait(task)
        except (trio.WouldBlock, trio.ClosedResourceError):
            pass  # a full or closing watch: its next poll sees the status anyway
        return True
