"""The demo server's protocol features beyond tools: resources, prompts, logging, tasks.

Registered on the demo server by :func:`add_protocol_features` (one call from
:func:`mcp_actors.demo_server.create_demo_server`), so every feature of the client side of
MCP has a real server to be tested against, over every transport:

==============================  ==========================================================
``demo://counter``              a text resource whose value ``bump_counter`` increments;
                                subscribers get ``notifications/resources/updated``
``demo://note/{name}``          a resource template (completion offers note names)
``demo://pixel.png``            a blob resource
``toggle_extra_resource()``     adds or removes ``demo://extra``; sends ``resources/list_changed``
``end_subscriptions()``         closes every ``subscriptions/listen`` stream (2026-07-28), so a
                                client's re-listen can be tested
``compose(topic, tone)``        a prompt with arguments (``tone`` completes)
``log(level, message)``         sends a log notification at ``level`` (honours ``logging/setLevel``,
                                or at 2026-07-28 the request's own log-level opt-in)
``weather(city)``               structured output validated by its ``outputSchema``
``bad_weather()``               structured output that breaks its own ``outputSchema``
``research(topic, seconds)``    a tool whose ``execution.taskSupport`` is ``required``
``count(n, seconds, fail,       a tool with optional task support, counting to ``n`` (as a
poll_ms, ask)``                 task it ends ``failed`` when ``fail`` is true, and asks to be
                                polled every ``poll_ms``; at 2026-07-28 with ``ask`` it first
                                asks the user to go on, an input request of the task)
``finish_task(task_id)``        ends a task's work now and pushes its status
                                (``notifications/tasks/status``; at 2026-07-28 ``notifications/tasks``)
``list_requests()``             how many ``tools/list``, ``prompts/list``, ``resources/list`` and
                                ``resources/templates/list`` requests it answered (JSON)
``cache_hints(ttl_ms, scope)``  what its lists say from now on about their life (2026-07-28
                                ``ttlMs``, ``cacheScope``); at start: 300 000 ms, ``public``
==============================  ==========================================================

The task tools speak both revisions' tasks (:mod:`mcp_actors._demo.tasks`): the 2025-11-25
core tasks (``tools/call`` with ``task``, ``tasks/get``, ``tasks/result``, ``tasks/cancel``,
``tasks/list`` in pages of :data:`TASK_PAGE_SIZE`), and at 2026-07-28 the
``io.modelcontextprotocol/tasks`` extension, which the MCP SDK does not implement (a task for
every call of ``research`` or ``count`` whose client declares it; ``tasks/get`` with the payload
inline, ``tasks/update``, ``tasks/cancel``). A task's work is modelled on the server's clock
(it completes ``seconds`` after creation), so it needs no background task.
"""

from __future__ import annotations

import collections
import json
from typing import Annotated, Any, Final, Literal

import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from mcp_actors._demo.tasks import (
    POLL_MS,
    TASK_TOOL,
    TASKS_EXTENSION,
    TaskTable,
    UpdateTaskParams,
    declared_tasks,
    modern,
    refuse_undeclared,
)
from mcp_actors._sdk import lowlevel_server, remove_resource

__all__ = [
    "CACHE_HINT",
    "COUNTER_URI",
    "EXTRA_RESOURCE_URI",
    "NOTE_TEMPLATE",
    "NOTE_NAMES",
    "TASK_PAGE_SIZE",
    "TASK_TOOL",
    "add_protocol_features",
]

COUNTER_URI: Final = "demo://counter"
"""A resource whose text is a counter; ``bump_counter`` changes it and notifies subscribers."""

EXTRA_RESOURCE_URI: Final = "demo://extra"
"""The resource ``toggle_extra_resource`` adds and removes."""

NOTE_TEMPLATE: Final = "demo://note/{name}"
"""The demo server's resource template."""

NOTE_NAMES: Final = ("alpha", "beta", "gamma")
"""Note names the completion offers for ``demo://note/{name}``."""

TASK_PAGE_SIZE: Final = 2
"""Tasks per ``tasks/list`` page (small, so that a client's paging is exercised)."""

CACHE_HINT: Final = CacheHint(ttl_ms=300_000, scope="public")
"""What the demo's lists say at start about their life (2026-07-28): fresh for five minutes, the
same for everyone. It sends ``list_changed`` whenever one changes, as the spec suggests a server
with a long ``ttlMs`` does."""

_LISTS: Final = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")

_OPTIONAL_TASK_TOOL: Final = "count"
_REQUIRED: Final = types.ToolExecution(task_support="required")
_TONES: Final = ("formal", "friendly", "funny")
_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_WEATHER_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}


def add_protocol_features(server: MCPServer[Any]) -> None:
    """Add the demo server's resources, template, prompts, completion, logging and task tools.

    Args:
        server: The SDK server to extend (the demo server).
    """
    state: dict[str, Any] = {"counter": 0, "extra": False, "level": "debug"}
    subscribed: set[str] = set()
    tasks = TaskTable()
    lowlevel = lowlevel_server(server)  # the SDK's public decorators have no subscribe/tasks hooks

    # ------------------------------------------------------------------ resources

    @server.resource(
        COUNTER_URI, name="counter", description="A counter; bump_counter changes it.", mime_type="text/plain"
    )
    def counter() -> str:
        return str(state["counter"])

    @server.resource(
        "demo://pixel.png", name="pixel", description="One transparent pixel (a blob).", mime_type="image/png"
    )
    def pixel() -> bytes:
        from mcp_actors._demo.media import PNG_BYTES

        return PNG_BYTES

    @server.resource(NOTE_TEMPLATE, name="note", description="A note by name.", mime_type="text/plain")
    def note(name: str) -> str:
        return f"note {name}"

    def extra_resource() -> str:
        return "the extra resource is here"

    @server.tool(description="Increment demo://counter and notify its subscribers.", structured_output=False)
    async def bump_counter(ctx: Context) -> str:
        state["counter"] += 1
        if COUNTER_URI in subscribed:
            await ctx.session.send_notification(
                types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=COUNTER_URI)),
                related_request_id=ctx.request_context.request_id,
            )
        await ctx.notify_resource_updated(COUNTER_URI)
        return f"counter is {state['counter']}"

    @server.tool(
        description=f"Add {EXTRA_RESOURCE_URI} if absent, remove it if present; sends resources/list_changed.",
        structured_output=False,
    )
    async def toggle_extra_resource(ctx: Context) -> str:
        from mcp.server.mcpserver.resources import FunctionResource

        if state["extra"]:
            remove_resource(server, EXTRA_RESOURCE_URI)
        else:
            server.add_resource(FunctionResource.from_function(extra_resource, uri=EXTRA_RESOURCE_URI, name="extra"))
        state["extra"] = not state["extra"]
        await ctx.session.send_notification(
            types.ResourceListChangedNotification(), related_request_id=ctx.request_context.request_id
        )
        await ctx.notify_resources_changed()
        return f"resource {EXTRA_RESOURCE_URI} {'added' if state['extra'] else 'removed'}"

    @server.tool(
        description="Close every subscriptions/listen stream (2026-07-28); clients re-listen.",
        structured_output=False,
    )
    async def end_subscriptions() -> str:
        handler = lowlevel.get_request_handler("subscriptions/listen")
        closer = getattr(handler.handler, "close", None) if handler is not None else None
        if closer is None:
            return "no listen streams"
        closer()
        return "listen streams closed"

    async def on_subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def on_unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, on_unsubscribe)

    # ------------------------------------------------------------------ prompts and completion

    @server.prompt(name="compose", description="Ask the model to write about a topic in a tone.")
    def compose(
        topic: Annotated[str, Field(description="What to write about.")],
        tone: Annotated[str, Field(description="formal, friendly or funny.")] = "friendly",
    ) -> str:
        return f"Write a {tone} paragraph about {topic}."

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def complete(
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion | None:
        if isinstance(ref, types.PromptReference) and ref.name == "compose" and argument.name == "tone":
            values = [t for t in _TONES if t.startswith(argument.value)]
        elif isinstance(ref, types.ResourceTemplateReference) and argument.name == "name":
            values = [n for n in NOTE_NAMES if n.startswith(argument.value)]
        else:
            return None
        return types.Completion(values=values, total=len(values), has_more=False)

    # ------------------------------------------------------------------ logging

    async def on_set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        state["level"] = params.level
        return types.EmptyResult()

    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, on_set_level)

    @server.tool(description="Send a log notification at the given level (if the client's level lets it through).")
    async def log(
        level: Annotated[str, Field(description="debug, info, notice, warning, error, critical, alert or emergency.")],
        message: Annotated[str, Field(description="The text to log.")],
        ctx: Context,
    ) -> str:
        if level not in _LEVELS:
            raise ValueError(f"level must be one of {', '.join(_LEVELS)}, got {level!r}")
        threshold = state["level"]
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # 2026-07-28: no logging/setLevel; each request opts in with its own _meta level.
            meta = ctx.request_context.meta or {}
            threshold = meta.get(types.LOG_LEVEL_META_KEY)
            if threshold not in _LEVELS:
                return "not logged: this request asked for no log messages"
        if _LEVELS.index(level) >= _LEVELS.index(threshold):
            await ctx.log(level, message, logger_name="demo")  # type: ignore[arg-type]
            return f"logged at {level}"
        return f"not logged: {level} is below {threshold}"

    # ------------------------------------------------------------------ structured output

    @server.tool(description="The weather in a city, as structured content checked by its output schema.")
    def weather(city: Annotated[str, Field(description="The city.")]) -> types.CallToolResult:
        data = {"city": city, "celsius": 21.5}
        return types.CallToolResult(content=[], structured_content=data)

    @server.tool(description="Return structured content that breaks the tool's own output schema.")
    def bad_weather() -> types.CallToolResult:
        return types.CallToolResult(content=[], structured_content={"city": 42})

    # ------------------------------------------------------------------ caching (2026-07-28)

    listed: collections.Counter[str] = collections.Counter()
    lowlevel.cache_hints.update(dict.fromkeys(_LISTS, CACHE_HINT))

    async def count_lists(ctx: Any, call_next: Any) -> Any:
        if ctx.method in _LISTS:
            listed[ctx.method] += 1
        return await call_next(ctx)

    lowlevel.middleware.append(count_lists)

    @server.tool(
        description="How many list requests of each kind this server answered (JSON).", structured_output=False
    )
    def list_requests() -> str:
        return json.dumps({method: listed[method] for method in _LISTS})

    @server.tool(
        description="Say from now on how long the lists stay fresh (ttlMs) and for whom (public or private).",
        structured_output=False,
    )
    def cache_hints(
        ttl_ms: Annotated[int, Field(ge=0, description="Milliseconds a list stays fresh (0: stale at once).")],
        scope: Annotated[Literal["public", "private"], Field(description="public: the same for everyone.")],
    ) -> str:
        lowlevel.cache_hints.update(dict.fromkeys(_LISTS, CacheHint(ttl_ms=ttl_ms, scope=scope)))
        return f"lists fresh for {ttl_ms} ms, {scope}"

    # ------------------------------------------------------------------ tasks (mcp_actors/_demo/tasks.py)

    @server.tool(description="Research a topic; must be called as a task (takes `seconds`).", structured_output=False)
    def research(topic: str, seconds: float = 0.2) -> str:
        return f"research on {topic}: done"  # a plain call: at 2026-07-28, from a client without the extension

    @server.tool(
        description="Count from 1 to n; may be called as a task (at 2026-07-28 with ask=true it first asks to go on).",
        structured_output=False,
    )
    def count(n: int = 3, seconds: float = 0.1, fail: bool = False, poll_ms: int = POLL_MS, ask: bool = False) -> str:
        return " ".join(str(i) for i in range(1, n + 1))

    @server.tool(description="End a task's work now and push its status (notifications/tasks/status, or /tasks).")
    async def finish_task(ctx: Context, task_id: str) -> str:
        tasks.finish(task_id)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            shown = tasks.detailed(task_id)
            await ctx.session.send_notification(
                _ExtensionNotification(params=shown),  # the SDK has no such type: a Notification of ours
                related_request_id=ctx.request_id,
            )
            return str(shown["status"])
        view = tasks.view(task_id)
        params = types.TaskStatusNotificationParams.model_validate(view.model_dump())
        notification = types.TaskStatusNotification(params=params)
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
        return view.status

    extras: dict[str, types.ToolExecution] = {
        TASK_TOOL: _REQUIRED,
        _OPTIONAL_TASK_TOOL: types.ToolExecution(task_support="optional"),
    }
    schemas: dict[str, dict[str, Any]] = {"weather": _WEATHER_SCHEMA, "bad_weather": _WEATHER_SCHEMA}
    plain_list_tools = server.list_tools

    async def list_tools() -> list[types.Tool]:
        listed = await plain_list_tools()
        out = []
        for tool in listed:
            update: dict[str, Any] = {}
            if tool.name in extras:
                update["execution"] = extras[tool.name]
            if tool.name in schemas:
                update["output_schema"] = schemas[tool.name]
            out.append(tool.model_copy(update=update) if update else tool)
        return out

    server.list_tools = list_tools  # type: ignore[method-assign]

    plain_entry = lowlevel.get_request_handler("tools/call")
    assert plain_entry is not None  # MCPServer registers tools/call when it is built
    plain_call = plain_entry.handler

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        if extras.get(params.name) == _REQUIRED and not modern(ctx):
            raise MCPError(code=types.INVALID_REQUEST, message=f"tool {params.name!r} must be called as a task")
        return await plain_call(ctx, params)

    lowlevel.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    # 2026-07-28: the tasks extension, advertised in server/discover.
    lowlevel.extensions[TASKS_EXTENSION] = {}

    async def task_middleware(ctx: Any, call_next: Any) -> Any:
        # A task answers CreateTaskResult, which the SDK's result sieve (CallToolResult only)
        # would refuse; a middleware's answer is sent as is.
        params = ctx.params if isinstance(ctx.params, dict) else {}
        name = params.get("name")
        if ctx.method != "tools/call" or name not in extras:
            return await call_next(ctx)
        arguments = dict(params.get("arguments") or {})
        if modern(ctx):
            # The server decides: a task for every call of a task tool whose client declared the
            # extension on it (a `task` param means nothing at 2026-07-28).
            if not declared_tasks(ctx):
                return await call_next(ctx)
            task_id = tasks.create(name, arguments, ask=name == _OPTIONAL_TASK_TOOL and bool(arguments.get("ask")))
            created = tasks.detailed(task_id)
            for inline in ("inputRequests", "result", "error"):
                created.pop(inline, None)  # a CreateTaskResult is Result & Task: no payload
            return {"resultType": "task", **created}
        if params.get("task") is None:
            return await call_next(ctx)
        task_id = tasks.create(name, arguments)
        legacy = types.CreateTaskResult(task=tasks.view(task_id))
        return legacy.model_dump(by_alias=True, mode="json", exclude_none=True)

    lowlevel.middleware.append(task_middleware)

    def not_at_2026(ctx: Any, method: str) -> None:
        if modern(ctx):
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=method)

    async def tasks_get(ctx: Any, params: types.GetTaskRequestParams) -> Any:
        if modern(ctx):
            refuse_undeclared(ctx)
            return tasks.detailed(params.task_id)
        return types.GetTaskResult.model_validate(tasks.view(params.task_id).model_dump())

    async def tasks_update(ctx: Any, params: UpdateTaskParams) -> Any:
        if not modern(ctx):
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data="tasks/update")
        refuse_undeclared(ctx)
        tasks.answer(params.task_id, params.input_responses)
        return {}

    async def tasks_result(ctx: Any, params: types.GetTaskPayloadRequestParams) -> types.CallToolResult:
        not_at_2026(ctx, "tasks/result")  # the extension inlines the result in tasks/get
        view = tasks.view(params.task_id)
        if view.status != "completed":
            raise MCPError(code=types.INVALID_REQUEST, message=f"task {params.task_id!r} is {view.status}")
        return tasks.result(params.task_id)

    async def tasks_cancel(ctx: Any, params: types.CancelTaskRequestParams) -> Any:
        if modern(ctx):
            refuse_undeclared(ctx)
            tasks.cancel(params.task_id)
            return {}  # an acknowledgement: the next tasks/get shows the outcome
        tasks.cancel(params.task_id)
        return types.CancelTaskResult.model_validate(tasks.view(params.task_id).model_dump())

    async def tasks_list(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListTasksResult:
        not_at_2026(ctx, "tasks/list")  # the extension has no listing: a task id is its only handle
        start = int(params.cursor) if params is not None and params.cursor else 0
        ids = list(tasks.tasks)
        page = ids[start : start + TASK_PAGE_SIZE]
        more = start + TASK_PAGE_SIZE < len(ids)
        return types.ListTasksResult(
            tasks=[tasks.view(task_id) for task_id in page], next_cursor=str(start + TASK_PAGE_SIZE) if more else None
        )

    lowlevel.add_request_handler("tasks/list", types.PaginatedRequestParams, tasks_list)
    lowlevel.add_request_handler("tasks/get", types.GetTaskRequestParams, tasks_get)
    lowlevel.add_request_handler("tasks/update", UpdateTaskParams, tasks_update)
    lowlevel.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, tasks_result)
    lowlevel.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, tasks_cancel)


class _ExtensionNotification(types.Notification[dict[str, Any], str]):
    """``notifications/tasks`` (2026-07-28, the tasks extension): a task's whole state, pushed."""

    method: str = "notifications/tasks"
    params: dict[str, Any]
