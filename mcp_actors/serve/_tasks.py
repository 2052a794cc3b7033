"""Task-augmented calls served by the gateway: the ``io.modelcontextprotocol/tasks`` extension (2026-07-28).

Why: a client that declares the extension may get a task for a long call instead of holding
its request open, and then polls it (``tasks/get``), answers what it asks (``tasks/update``)
or cancels it (``tasks/cancel``). The gateway does not proxy the upstream's tasks: each of its
tasks is a runtime call it runs itself, the parked call of :mod:`~mcp_actors.serve._client_requests`
(the call runs in the gateway's own task, its questions to the client are queued on it).

Which calls become tasks: those whose upstream answers with a task (the runtime tells its
caller through :data:`~mcp_actors._connection.tasks.TASK_STARTED`), so a call the upstream
answers plainly stays a plain call. The client's request then gets a ``CreateTaskResult`` with
a task id of the gateway's, and the runtime goes on driving the upstream task under it:

* ``working`` while the call runs, ``input_required`` with the open questions inline while
  the upstream waits on the client (its input requests, relayed as a parked call's), answered
  by ``tasks/update``'s ``inputResponses``;
* ``completed`` with the call's result inline (a tool error is a completed result, as in a
  plain call), ``failed`` with the JSON-RPC error inline when the upstream task failed,
  ``cancelled`` after ``tasks/cancel`` (which cancels the runtime call, so the upstream task
  gets its ``tasks/cancel`` from the runtime).

Bounds: at most :data:`MAX_TASKS` tasks (the oldest ended ones go first; past that a new task
is refused), each readable :data:`TTL_MS` after its last change once it ended.
"""

from __future__ import annotations

import datetime as _dt
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import mcp_types
import pydantic
import trio
from mcp.shared.exceptions import MCPError

from mcp_actors._connection.tasks import TASK_STARTED, TASKS_EXTENSION
from mcp_actors.errors import McpActorsError, ToolTaskFailed
from mcp_actors.serve._client_requests import Caller, ClientRequests, ParkedCall, client_capabilities

LEGACY: Final = "2025-11-25"
"""The handshake revision that has tasks in its core protocol (the ``tasks`` capability)."""
LEGACY_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
"""The 2025-11-25 task methods the gateway answers."""
CAPABILITY: Final[Mapping[str, Any]] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""The gateway's ``tasks`` capability at 2025-11-25: task-augmented ``tools/call``, ``tasks/list``, ``tasks/cancel``."""

__all__ = [
    "CAPABILITY",
    "LEGACY",
    "LEGACY_METHODS",
    "MAX_TASKS",
    "METHODS",
    "POLL_INTERVAL_MS",
    "TASKS_EXTENSION",
    "TTL_MS",
    "GatewayTasks",
    "declared",
]

TTL_MS: Final = 300_000
"""How long an ended task stays readable after its last change."""
POLL_INTERVAL_MS: Final = 100
"""The poll interval suggested to clients."""
MAX_TASKS: Final = 1000
"""Tasks kept at most: a long run of a gateway must not grow without bound."""
METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
"""The extension's methods the gateway answers (2026-07-28)."""
_ENDED: Final = frozenset({"completed", "failed", "cancelled"})


def declared(params: Mapping[str, Any]) -> bool:
    """Whether a 2026-07-28 request's client declared the tasks extension (its ``_meta`` capabilities)."""
    extensions = client_capabilities(params).get("extensions")
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _iso(wall: float) -> str:
    return _dt.datetime.fromtimestamp(wall, _dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _wire(value: Any) -> dict[str, Any]:
    if isinstance(value, pydantic.BaseModel):
        dumped: dict[str, Any] = value.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    return dict(value) if isinstance(value, Mapping) else {}


@attrs.define(eq=False)
class _Task:
    """One task of the gateway: a parked call the client follows by its id."""

    task_id: str
    parked: ParkedCall
    server: str
    created: float = attrs.field(factory=time.time)
    updated: float = attrs.field(factory=time.time)
    cancelled: bool = False
    ended_at: float | None = None
    owner: object = None
    """The 2025-11-25 session the task belongs to (its ``tasks/*`` only see its own); ``None`` at 2026-07-28."""
    ttl_ms: int = TTL_MS

    def status(self) -> str:
        if self.cancelled:
            return "cancelled"
        if self.parked.finished:
            return self._outcome()[0]
        if self.parked.questions:
            return "input_required"
        return "working"

    def _outcome(self) -> tuple[str, dict[str, Any]]:
        """``(status, payload)`` of a finished call: its result, or the error its upstream task failed with."""
        error = self.parked.error
        if error is None:
            return "completed", _wire(self.parked.result)
        if isinstance(error, ToolTaskFailed):
            if error.status == "cancelled":
                return "cancelled", {}
            return "failed", {"code": mcp_types.INTERNAL_ERROR, "message": str(error)}
        if isinstance(error, MCPError):
            return "failed", _wire(error.error)
        if isinstance(error, McpActorsError):  # as a plain call: the tool's error, naming the server
            text = str(error) if repr(self.server) in str(error) else f"server {self.server!r}: {error}"
            return "completed", {"content": [{"type": "text", "text": text}], "isError": True}
        return "failed", {"code": mcp_types.INTERNAL_ERROR, "message": "the gateway failed on this call"}

    def last_updated(self) -> float:
        if self.parked.finished and self.ended_at is None:
            self.ended_at = time.time()
        return max(self.updated, self.ended_at or 0.0)

    def envelope(self) -> dict[str, Any]:
        """The ``Task`` fields every answer about the task carries."""
        return {
            "taskId": self.task_id,
            "status": self.status(),
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.last_updated()),
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }

    def legacy(self) -> dict[str, Any]:
        """The task as 2025-11-25 shows it (``Task``: ``ttl``, ``pollInterval``)."""
        return {
            "taskId": self.task_id,
            "status": self.status(),
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.last_updated()),
            "ttl": self.ttl_ms,
            "pollInterval": POLL_INTERVAL_MS,
        }

    def detailed(self) -> dict[str, Any]:
        """The ``tasks/get`` answer: the envelope and what its status inlines."""
        answer = self.envelope()
        status = answer["status"]
        if status == "input_required":
            answer["inputRequests"] = {
                key: {"method": question.method, "params": question.params}
                for key, question in self.parked.questions.items()
                if not question.done.is_set()
            }
        elif status == "completed":
            answer["result"] = self._outcome()[1]
        elif status == "failed":
            answer["error"] = self._outcome()[1]
        return answer


@attrs.define(eq=False)
class GatewayTasks:
    """The gateway's tasks (2026-07-28, the tasks extension), each one a runtime call it runs."""

    relays: ClientRequests
    server_names: Callable[[str], str] = attrs.field(default=str)
    tasks: dict[str, _Task] = attrs.field(factory=dict)

    async def call(self, caller: Caller, params: Mapping[str, Any], op: Callable[[], Awaitable[Any]]) -> Any:
        """Run a call of a client that declared the extension: its result, its questions, or a new task.

        The call runs as a parked call; when its upstream answers with a task, the client's
        request is answered with a ``CreateTaskResult`` of the gateway's and the call goes on.
        """

        async def watched() -> Any:
            token = TASK_STARTED.set(lambda _upstream: self._started(caller))
            try:
                return await op()
            finally:
                TASK_STARTED.reset(token)

        return await self.relays.run_parked(caller, params, watched)

    def _started(self, caller: Caller) -> None:
        parked = caller.parked
        if parked is None or parked.task_answer is not None:
            return
        self._forget_expired()
        if len(self.tasks) >= MAX_TASKS:
            return  # no room: the call goes on as a plain call, the client waits for its result
        task = _Task(secrets.token_urlsafe(16), parked, self.server_names(caller.server_id))
        self.tasks[task.task_id] = task
        parked.task_answer = {"resultType": "task", **task.envelope()}
        parked.wake.set()

    def _forget_expired(self) -> None:
        now = time.time()
        for task_id, task in list(self.tasks.items()):
            if task.status() in _ENDED and now - task.last_updated() > task.ttl_ms / 1000:
                del self.tasks[task_id]
        for task_id, task in list(self.tasks.items()):
            if len(self.tasks) < MAX_TASKS:
                break
            if task.status() in _ENDED:
                del self.tasks[task_id]

    # ------------------------------------------------------------------ 2025-11-25: the tasks capability

    async def start(
        self, caller: Caller, owner: object, params: Mapping[str, Any], op: Callable[[], Awaitable[Any]]
    ) -> dict[str, Any]:
        """A 2025-11-25 ``tools/call`` with ``task``: start the call in the gateway's task; its ``CreateTaskResult``.

        The call's questions to the client wait on the task (``input_required``) for the
        client's ``tasks/result``, whose stream carries them (the call's own stream is answered).
        """
        self._forget_expired()
        if len(self.tasks) >= MAX_TASKS:
            raise MCPError(mcp_types.INTERNAL_ERROR, f"the gateway runs {MAX_TASKS} tasks already: call without task")
        asked = params.get("task")
        ttl = asked.get("ttl") if isinstance(asked, Mapping) else None
        ttl_ms = min(ttl, TTL_MS) if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else TTL_MS
        caller.ask = None  # the call's own request is answered at once: questions wait for tasks/result
        made: list[_Task] = []

        async def watched() -> Any:
            parked = caller.parked
            assert parked is not None  # run_parked set it before it started this
            task = _Task(
                secrets.token_urlsafe(16), parked, self.server_names(caller.server_id), owner=owner, ttl_ms=ttl_ms
            )
            self.tasks[task.task_id] = task
            made.append(task)
            notify = getattr(owner, "notify", None)
            if callable(notify):
                # notifications/tasks/status (optional in the revision): the end, on the session's stream.
                parked.on_end = lambda: notify(
                    {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task.legacy()}
                )
            parked.task_answer = {}
            parked.wake.set()
            return await op()

        await self.relays.run_parked(caller, {}, watched)
        return {"task": made[0].legacy()}

    async def check_allowed(self, service: Any, server_id: str, tool: str, name: str) -> None:
        """Refuse a task-augmented call of a tool whose server's listing forbids tasks (2025-11-25: ``-32601``).

        Raises:
            MCPError: ``-32601``, naming the tool.
        """
        for listed in await service.list_server_tools(server_id):
            execution = getattr(listed.definition, "execution", None) if listed.name == tool else None
            if execution is not None and execution.task_support == "forbidden":
                why = f"tool {name!r} cannot run as a task (its taskSupport is forbidden): call it without task"
                raise MCPError(mcp_types.METHOD_NOT_FOUND, why)

    async def handle_legacy(self, method: str, params: Mapping[str, Any], owner: object, ask: Any) -> dict[str, Any]:
        """``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel`` of a 2025-11-25 session.

        Raises:
            MCPError: The task is unknown to this session, or already ended (``tasks/cancel``): ``-32602``.
        """
        if method == "tasks/list":
            return {"tasks": [task.legacy() for task in self.tasks.values() if task.owner is owner]}
        task_id = params.get("taskId")
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.owner is not owner:
            raise MCPError(mcp_types.INVALID_PARAMS, f"unknown task {task_id!r} (not this session's, or expired)")
        if method == "tasks/get":
            return task.legacy()
        if method == "tasks/cancel":
            if task.status() in _ENDED:
                raise MCPError(mcp_types.INVALID_PARAMS, f"task {task_id!r} already ended {task.status()}")
            task.cancelled = True
            task.updated = time.time()
            task.parked.scope.cancel()
            return task.legacy()
        return await self._result(task, ask)

    async def _result(self, task: _Task, ask: Any) -> dict[str, Any]:
        """``tasks/result``: wait for the end, asking the client on this request's stream what the call asks."""
        parked = task.parked
        related = {"io.modelcontextprotocol/related-task": {"taskId": task.task_id}}
        while task.status() not in _ENDED:
            open_questions = [(k, q) for k, q in parked.questions.items() if not q.done.is_set() and not q.sent]
            if open_questions and ask is not None:
                for key, question in open_questions:
                    question.sent = True
                    try:
                        answer = await ask(question.method, {**question.params, "_meta": related})
                    except MCPError:
                        parked.scope.cancel()  # the client refused: the call cannot go on
                        raise
                    parked.deliver({key: answer})
                continue
            if parked.wake.is_set():
                parked.wake = trio.Event()  # shared by every tasks/result of the task: each re-checks on waking
            await parked.wake.wait()
        status, payload = task.status(), task._outcome()[1]
        if status == "completed":
            return {**payload, "_meta": {**payload.get("_meta", {}), **related}}
        if status == "cancelled":
            raise MCPError(mcp_types.INVALID_REQUEST, f"task {task.task_id!r} was cancelled")
        raise MCPError(int(payload.get("code", mcp_types.INTERNAL_ERROR)), str(payload.get("message")))

    async def handle(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer ``tasks/get``, ``tasks/update`` or ``tasks/cancel``.

        Raises:
            MCPError: The client did not declare the extension (``-32021``), or the task is unknown (``-32602``).
        """
        if not declared(params):
            raise MCPError(
                mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"{method} needs the {TASKS_EXTENSION} extension: declare it in the request's client capabilities",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        task_id = params.get("taskId")
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            why = f"unknown task {task_id!r} (never made here, or ended more than {TTL_MS} ms ago)"
            raise MCPError(mcp_types.INVALID_PARAMS, why)
        if method == "tasks/get":
            return task.detailed()
        if method == "tasks/update":
            responses = params.get("inputResponses")
            if isinstance(responses, dict) and task.status() == "input_required":
                task.parked.deliver(responses)
                task.updated = time.time()
            return {}
        if task.status() in ("working", "input_required"):
            task.cancelled = True
            task.updated = time.time()
            task.parked.scope.cancel()  # the runtime call ends, and with it the upstream task
        return {}
