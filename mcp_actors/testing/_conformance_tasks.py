"""The conformance fixture's tasks: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663) at 2026-07-28.

Why here: the SDK implements no tasks at 2026-07-28 (there they are an extension, no longer
part of the protocol), but it offers what an extension needs: :class:`~mcp.server.mcpserver.Extension`
with request methods of its own and an interceptor of ``tools/call``, whose answer with an
extension ``resultType`` (``"task"``) the SDK sends as is. This module builds the extension the
suite's ``tasks-*`` scenarios check on those public hooks, so the run measures the SDK's
extension API, not a patched SDK.

The surface:

* ``tools/call`` of a task tool from a client that declared the extension (for the session, or
  in the request's ``_meta``) answers a flat ``CreateTaskResult``: ``resultType: "task"``,
  ``taskId``, ``status``, ``createdAt``, ``lastUpdatedAt``, ``ttlMs``, ``pollIntervalMs``.
  Without the extension an optional task tool runs as a plain call, and a required one is
  refused with ``-32021`` naming the extension.
* ``tasks/get`` answers the task with its ``result`` (completed), ``error`` (failed) or
  ``inputRequests`` (input_required) inlined; ``tasks/update`` delivers ``inputResponses``;
  ``tasks/cancel`` cancels. Both answer an empty ack. All three refuse a client without the
  extension (``-32021``), an unknown task (``-32602``), and an ``Mcp-Name`` header that is not
  the task id (``-32020``: the SDK checks that header for the core methods only).

A task's work is modelled on the clock, not run in a background task: ``slow_compute`` is
``working`` until ``seconds`` after its creation, then ``completed``. The answers are then the
same whichever request asks, with nothing to leak when the server stops.

======================  ====================  ============================================
tool                    task support          as a task
======================  ====================  ============================================
``greet(name)``         none                  (a plain call: ``Hello, {name}!``)
``slow_compute``        optional              completes ``seconds`` after creation
``failing_job``         required              completes after 1 s with ``isError: true``
``protocol_error_job``  optional              fails (a JSON-RPC error inlined) after 0.2 s
``confirm_delete``      optional              input_required until ``confirm`` is answered
``multi_input``         optional              input_required until both of its inputs are
``test_tool_with_task`` required              asks ``user_name`` by an input request first,
                                              then completes with a greeting as a task
======================  ====================  ============================================
"""

from __future__ import annotations

import datetime as _dt
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Literal

import anyio
import attrs
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver import Context, Extension, MCPServer, MethodBinding, require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

__all__ = ["TASKS_EXTENSION", "TASK_SUPPORT", "TasksExtension", "add_task_tools"]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised under ``capabilities.extensions``."""

TASK_SUPPORT: Final[Mapping[str, Literal["optional", "required"]]] = {
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "required",
}
"""The tools that may (or must) run as tasks. A 2026-07-28 tool has no ``execution`` field, so the
extension keeps its own table."""

TTL_MS: Final = 300_000
"""How long a task stays readable after its last change; never less than the suite waits."""

POLL_INTERVAL_MS: Final = 100
"""The poll interval suggested to clients (the suite polls every 200 ms whatever it is told)."""

MAX_TASKS: Final = 1000
"""Tasks kept at most (the oldest go first): a long run must not grow without bound."""

MAX_SECONDS: Final = 3600.0
"""Upper bound of ``slow_compute(seconds)``: every wait in our code is bounded."""

_FAILING_JOB_SECONDS: Final = 1.0
_PROTOCOL_ERROR_SECONDS: Final = 0.2
_ESCALATED_SECONDS: Final = 0.2
_ALL_MODERN: Final = frozenset(MODERN_PROTOCOL_VERSIONS)
_ENDED: Final = frozenset({"completed", "failed", "cancelled"})

_CONFIRM_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Go ahead?"}},
    "required": ["confirm"],
}
_NAME_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


def _iso(wall: float) -> str:
    return _dt.datetime.fromtimestamp(wall, _dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    """A task's result as the tool's plain call answers it.

    A successful one carries the structured result too: the task tools return ``str``, so their
    listing promises an ``outputSchema`` of ``{"result": string}``, which a client checks a
    task's result against as it checks a plain call's.
    """
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    else:
        result["structuredContent"] = {"result": text}
    return result


def _elicit(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
    return request.model_dump(by_alias=True, mode="json", exclude_none=True)


def _accepted(answer: object, key: str) -> Any:
    """The value of ``key`` in an accepted elicitation answer (a wire dict), else None."""
    if isinstance(answer, Mapping) and answer.get("action") == "accept" and isinstance(answer.get("content"), Mapping):
        return answer["content"].get(key)
    return None


@attrs.define(eq=False)
class _Task:
    """One task. Its status is a function of the clock and of what clients sent.

    Attributes:
        task_id: The server-minted id.
        created: Wall-clock creation time (seconds since the epoch).
        due: Monotonic time at which the work ends; None while inputs are pending.
        outcome: The inlined ``result`` (completed) or ``error`` (failed), known once the work can end.
        failed: Whether ``outcome`` is an error.
        pending: Input requests not answered yet, by key.
        answers: Input responses received, by key.
        finish: Builds the outcome from the answers once none is pending.
        cancelled_at: Wall-clock time of the cancellation, if any.
        updated: Wall-clock time of the last change a client caused.
    """

    task_id: str
    created: float
    due: float | None
    outcome: dict[str, Any] | None = None
    failed: bool = False
    pending: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    answers: dict[str, Any] = attrs.field(factory=dict)
    finish: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    cancelled_at: float | None = None
    updated: float = 0.0

    def status(self) -> Status:
        if self.cancelled_at is not None:
            return "cancelled"
        if self.pending:
            return "input_required"
        if self.due is None or time.monotonic() < self.due:
            return "working"
        return "failed" if self.failed else "completed"

    def last_updated(self) -> float:
        """The last change: a client's, or the end of the work (which happened on the clock)."""
        ended = 0.0
        if self.due is not None and self.cancelled_at is None and time.monotonic() >= self.due:
            ended = time.time() - (time.monotonic() - self.due)
        return max(self.created, self.updated, ended)

    def envelope(self) -> dict[str, Any]:
        """The ``Task`` fields every answer about the task carries (flat, SEP-2663 names)."""
        return {
            "taskId": self.task_id,
            "status": self.status(),
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.last_updated()),
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }

    def detailed(self) -> dict[str, Any]:
        """The ``tasks/get`` answer: the envelope plus what the status inlines."""
        answer = self.envelope()
        status = answer["status"]
        if status == "input_required":
            answer["inputRequests"] = dict(self.pending)
        elif status == "completed":
            answer["result"] = self.outcome
        elif status == "failed":
            answer["error"] = self.outcome
        return answer

    def answer(self, responses: Mapping[str, Any]) -> None:
        """Take the responses to pending requests; unknown keys are ignored. The last one starts the finish."""
        if self.status() != "input_required":
            return
        for key, response in responses.items():
            if key in self.pending:
                del self.pending[key]
                self.answers[key] = response
                self.updated = time.time()
        if not self.pending and self.finish is not None:
            self.outcome = self.finish(self.answers)
            self.due = time.monotonic()

    def cancel(self) -> None:
        """Cancel unless the task already ended (cancelling an ended task changes nothing)."""
        if self.status() in ("working", "input_required"):
            self.cancelled_at = self.updated = time.time()


class TasksExtension(Extension):
    """The ``io.modelcontextprotocol/tasks`` extension of the fixture server (see the module docstring).

    One per server: it owns that server's tasks. Only the 2026-07-28 protocol reaches it; the
    handshake revisions call every tool plainly.
    """

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        """Start with no task."""
        self._tasks: dict[str, _Task] = {}

    def methods(self) -> list[MethodBinding]:
        """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (``tasks/result`` and ``tasks/list`` are gone in v2)."""
        return [
            MethodBinding("tasks/get", _TaskParams, self._get, protocol_versions=_ALL_MODERN),
            MethodBinding("tasks/update", _UpdateParams, self._update, protocol_versions=_ALL_MODERN),
            MethodBinding("tasks/cancel", _TaskParams, self._cancel, protocol_versions=_ALL_MODERN),
        ]

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Answer a task tool's call with a new task when the client declared the extension.

        A legacy ``task`` parameter is ignored (tolerated, never a reason to make a task): the
        tool's registration decides.
        """
        support = TASK_SUPPORT.get(params.name)
        if support is None or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        if not _declared(ctx):
            if support == "required":
                require_client_extension(ctx, TASKS_EXTENSION)  # raises -32021 naming the extension
            return await call_next(ctx)
        arguments = dict(params.arguments or {})
        if params.name == "test_tool_with_task":
            # The input request is answered synchronously (the tool asks for user_name); its final
            # answer is not sent as is but becomes the result of a task (SEP-2663 composition).
            result = await call_next(ctx)
            if isinstance(result, types.CallToolResult):
                outcome = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                return self._create(due_in=_ESCALATED_SECONDS, outcome=outcome)
            return result
        return self._start(params.name, arguments)

    # ------------------------------------------------------------------------------ creation

    def _start(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        match tool:
            case "slow_compute":
                seconds = _seconds(arguments.get("seconds", 1))
                label = str(arguments.get("label", "slow_compute"))
                return self._create(due_in=seconds, outcome=_text_result(f"computed {label} in {seconds:g} s"))
            case "failing_job":
                outcome = _text_result("failing_job failed on purpose", is_error=True)
                return self._create(due_in=_FAILING_JOB_SECONDS, outcome=outcome)
            case "protocol_error_job":
                error = {"code": types.INTERNAL_ERROR, "message": "protocol_error_job crashed on purpose"}
                return self._create(due_in=_PROTOCOL_ERROR_SECONDS, outcome=error, failed=True)
            case "confirm_delete":
                filename = str(arguments.get("filename", "file"))
                pending = {"confirm": _elicit(f"Delete {filename}?", _CONFIRM_SCHEMA)}
                return self._create(pending=pending, finish=lambda answers: _deleted(filename, answers))
            case "multi_input":
                pending = {
                    "first": _elicit("First input: what is your name?", _NAME_SCHEMA),
                    "second": _elicit("Second input: go ahead?", _CONFIRM_SCHEMA),
                }
                return self._create(pending=pending, finish=_both_answered)
            case _:
                raise MCPError(code=types.INVALID_PARAMS, message=f"tool {tool!r} cannot run as a task")

    def _create(
        self,
        *,
        due_in: float | None = None,
        outcome: dict[str, Any] | None = None,
        failed: bool = False,
        pending: dict[str, dict[str, Any]] | None = None,
        finish: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Store a new task (readable at once: the answer is sent after this) and return its ``CreateTaskResult``."""
        self._forget_expired()
        now = time.time()
        task = _Task(
            task_id=uuid.uuid4().hex,
            created=now,
            due=None if due_in is None else time.monotonic() + due_in,
            outcome=outcome,
            failed=failed,
            pending=dict(pending or {}),
            finish=finish,
            updated=now,
        )
        self._tasks[task.task_id] = task
        return {"resultType": "task", **task.envelope()}

    def _forget_expired(self) -> None:
        """Drop the tasks that ended more than ``TTL_MS`` ago, then the oldest beyond ``MAX_TASKS``.

        A task still working or waiting for input is kept whatever its age (``MAX_TASKS`` bounds
        those): a client may poll it until it ends, and for ``TTL_MS`` after.
        """
        now = time.time()
        expired = [
            t.task_id for t in self._tasks.values() if t.status() in _ENDED and now - t.last_updated() > TTL_MS / 1000
        ]
        for task_id in expired:
            del self._tasks[task_id]
        while len(self._tasks) >= MAX_TASKS:
            del self._tasks[next(iter(self._tasks))]

    # ------------------------------------------------------------------------------ methods

    def _find(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> _Task:
        require_client_extension(ctx, TASKS_EXTENSION)
        _check_name_header(ctx, params.task_id)
        task = self._tasks.get(params.task_id)
        if task is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown task {params.task_id!r}")
        return task

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        return self._find(ctx, params).detailed()

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: _UpdateParams) -> dict[str, Any]:
        self._find(ctx, params).answer(params.input_responses)
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        self._find(ctx, params).cancel()
        return {}


class _TaskParams(types.RequestParams):
    task_id: str


class _UpdateParams(_TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared the extension (for the session, or in this request's ``_meta``)."""
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION in capabilities.extensions)


def _check_name_header(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """Refuse an ``Mcp-Name`` header that is not the task id (SEP-2663 routing headers).

    The SDK compares that header with the body for ``tools/call``, ``prompts/get`` and
    ``resources/read`` only; over a transport without headers there is nothing to compare.
    """
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return
    if decode_header_value(headers.get("mcp-name")) != task_id:
        raise MCPError(code=types.HEADER_MISMATCH, message="Mcp-Name header does not match the request's taskId")


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_SECONDS:
        raise MCPError(code=types.INVALID_PARAMS, message=f"seconds must be a number in 0..{MAX_SECONDS:g}")
    return float(value)


def _deleted(filename: str, answers: dict[str, Any]) -> dict[str, Any]:
    if _accepted(answers.get("confirm"), "confirm") is True:
        return _text_result(f"deleted {filename}")
    return _text_result(f"kept {filename}: not confirmed")


def _both_answered(answers: dict[str, Any]) -> dict[str, Any]:
    return _text_result(f"both inputs received (first: {_accepted(answers.get('first'), 'name')!s})")


# ---------------------------------------------------------------------------------------- the tools


def add_task_tools(server: MCPServer[Any]) -> None:
    """Register the tools the tasks scenarios list, with their plain-call behaviour.

    A plain call is what a client without the extension gets (and every client of a handshake
    revision): ``slow_compute`` sleeps, ``confirm_delete`` and ``multi_input`` ask by a
    ``InputRequiredResult`` (2026-07-28), the others answer at once.
    """

    @server.tool(description="A synchronous tool: greets by name (never a task)")
    def greet(name: Annotated[str, Field(description="Who to greet")] = "World") -> str:
        return f"Hello, {name}!"

    @server.tool(description="Sleeps `seconds`, then answers; may run as a task (cancellable while working)")
    async def slow_compute(
        seconds: Annotated[float, Field(ge=0, le=MAX_SECONDS, description="How long the work takes")] = 1.0,
        label: Annotated[str, Field(description="A label echoed in the result")] = "slow_compute",
    ) -> str:
        await anyio.sleep(seconds)
        return f"computed {label} in {seconds:g} s"

    @server.tool(description="Reports a tool error after about a second; must run as a task")
    async def failing_job() -> types.CallToolResult:
        await anyio.sleep(_FAILING_JOB_SECONDS)
        return types.CallToolResult(content=[types.TextContent(text="failing_job failed on purpose")], is_error=True)

    @server.tool(description="Fails with a protocol error; may run as a task (then the task fails)")
    async def protocol_error_job() -> str:
        raise MCPError(code=types.INTERNAL_ERROR, message="protocol_error_job crashed on purpose")

    @server.tool(description="Asks for a confirmation, then deletes (pretends to); may run as a task")
    async def confirm_delete(
        ctx: Context, filename: Annotated[str, Field(description="The file to delete")] = "file"
    ) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if "confirm" not in responses:
            ask = types.ElicitRequest.model_validate(_elicit(f"Delete {filename}?", _CONFIRM_SCHEMA))
            return types.InputRequiredResult(input_requests={"confirm": ask})
        answer = responses["confirm"]
        confirmed = isinstance(answer, types.ElicitResult) and bool((answer.content or {}).get("confirm"))
        return f"deleted {filename}" if confirmed else f"kept {filename}: not confirmed"

    @server.tool(description="Asks for two inputs at once; may run as a task")
    async def multi_input(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if {"first", "second"} <= responses.keys():
            return "both inputs received"
        return types.InputRequiredResult(
            input_requests={
                "first": types.ElicitRequest.model_validate(_elicit("First input: what is your name?", _NAME_SCHEMA)),
                "second": types.ElicitRequest.model_validate(_elicit("Second input: go ahead?", _CONFIRM_SCHEMA)),
            }
        )

    @server.tool(description="Asks user_name by an input request, then greets as a task (must run as a task)")
    async def test_tool_with_task(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        answer = responses.get("user_name")
        if isinstance(answer, types.ElicitResult) and answer.action == "accept" and answer.content:
            return f"Hello, {answer.content.get('name', 'stranger')}!"
        ask = types.ElicitRequest.model_validate(_elicit("What is your name?", _NAME_SCHEMA))
        return types.InputRequiredResult(input_requests={"user_name": ask})
