"""LangChain / LangGraph: the supervised servers' tools as LangChain ``BaseTool`` objects.

:func:`load_tools` lists the servers of a running mcp-actors runtime and returns one
:class:`SupervisedMcpTool` (a ``langchain_core.tools.BaseTool``) per tool, ready for
``langchain.agents.create_agent``, LangGraph's ``ToolNode`` or ``model.bind_tools``::

    portal = start_portal()
    tools = await load_tools(portal.asyncio_service(), ["demo"])
    agent = create_agent(model, tools)

Every call goes through the runtime's service (:class:`~mcp_actors.adapters.McpToolAdapter`):
one supervised session per server shared by every tool and every agent, a lazy server
connected on first use, the service's approver asked, the whole call bounded by ``timeout``,
a crashed server restarted by its supervisor.

How the pieces map (modelled on ``langchain-mcp-adapters``, LangChain's own MCP client: the
same response format, artifact shape and error handling; its content is a list of LangChain
content blocks, ours one text):

* **Arguments**: ``args_schema`` is the server's JSON schema as a dict, which LangChain
  passes to the model as is and does not validate; the server validates and answers a
  tool error the model can read. A schema without ``properties`` gets an empty one (once,
  at load time) because LangChain's ``BaseTool.args`` reads that key.
* **Results**: ``response_format="content_and_artifact"``. The content is the result as
  one text (:func:`~mcp_actors.adapters.flatten_result`: images and audio are named, not
  inlined); the artifact is ``{"structured_content": ...}`` when the server sent structured
  content, else ``None`` (the shape ``langchain-mcp-adapters`` uses). The artifact stays
  out of the model's context but is kept on the ``ToolMessage``.
* **Failures** raise ``ToolException``: a tool-level error (``isError``) with the tool's
  text, and our typed failures (:class:`~mcp_actors.errors.McpActorsError`: timeout,
  connection lost, circuit open, denied, ...) with :func:`~mcp_actors.integrations.failure_message`.
  Both start with ``"Error: "``. ``ToolException`` is the exception LangChain reserves for
  "the tool failed, tell the model": with ``handle_tool_error=True`` (our default, as
  ``langchain-mcp-adapters``' ``handle_tool_errors=True``) the tool answers a
  ``ToolMessage(status="error")`` carrying that text and the agent goes on. Any other
  exception would reach LangGraph's ``ToolNode``, whose default handler re-raises all but
  argument errors and so ends the whole run: a crashed server must not end an agent. With
  ``handle_tool_error=False`` the ``ToolException`` propagates (for a ``ToolNode`` with
  ``handle_tool_errors`` of its own). Misuse (the trio ``McpService`` awaited on asyncio, a
  blocking call on a thread running a loop) raises ``RuntimeError`` and is not hidden.
* **Progress**: LangChain has two channels and both get it. Each ``notifications/progress``
  of a call is dispatched as the custom callback event :data:`PROGRESS_EVENT`
  (``adispatch_custom_event``: ``on_custom_event`` in ``astream_events``, or any callback
  handler), and inside a LangGraph run it is written to the graph's custom stream
  (``stream_mode="custom"``) and counted as the node's heartbeat (``idle_timeout``). The
  payload is :func:`progress_payload`. Progress is asked of the server only when someone
  can hear it (a callback handler, or a LangGraph run). The callback events dispatched by
  the time the result arrives are awaited before the tool returns (the runtime relays each
  notification from a task of its own, so one sent right before the result may trail it).
* **Cancellation**: cancelling the asyncio task that awaits the tool (the agent's task, an
  ``asyncio.timeout``) cancels the call on the runtime and the server is told
  (``notifications/cancelled``).
* **Sync**: ``tool.invoke`` (and ``agent.invoke``) works when the service is the portal's
  asyncio facade: the call runs on the portal's loop and the calling thread blocks, as
  LangGraph's sync ``ToolNode`` runs tools in worker threads. Called on a thread that runs
  an asyncio loop it raises ``RuntimeError`` instead (blocking that loop would stall an
  approver or a progress handler that runs there); await ``ainvoke`` there. Progress is not
  relayed on the sync path. With the trio ``McpService`` there is no blocking path.

Tool lists are a snapshot: call :func:`load_tools` again after a server's tools change
(the ``tools:changed`` event); the registry caches each server's listing until then, so
loading again is cheap.
"""

# No ``from __future__ import annotations`` here, on purpose: LangChain resolves the type hints
# of a tool's ``_arun`` on every call (``typing.get_type_hints``, looking for a RunnableConfig
# parameter), and string annotations are compiled anew each time. With that import and a precise
# return type it cost 170 us a call, with plain ``Any`` objects 10 us (StructuredTool's own: 160 us).

import asyncio
import contextvars
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

import attrs
import mcp.types as mcp_types
from langchain_core.callbacks import BaseCallbackManager
from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import ArgsSchema, BaseTool, ToolException
from pydantic import Field, SkipValidation

from mcp_actors._loops import RuntimeHop
from mcp_actors.adapters import DEFAULT_TOOL_TIMEOUT, McpToolAdapter, flatten_result
from mcp_actors.errors import McpActorsError
from mcp_actors.integrations._common import ToolNaming, ToolSelection, failure_message, select_tools
from mcp_actors.portal import RuntimePortal
from mcp_actors.service import McpService

try:
    from langgraph.runtime import get_runtime as _graph_runtime
except ImportError:  # LangChain without LangGraph: no graph stream or heartbeat to feed
    _graph_runtime = None  # type: ignore[assignment]

__all__ = ["PROGRESS_EVENT", "SupervisedMcpTool", "ToolList", "load_tools", "progress_payload"]

PROGRESS_EVENT: Final = "mcp_actors.progress"
"""The name of the custom callback event carrying a tool's progress, and the ``event`` of its payload."""

ToolErrorHandling = bool | str | Callable[[ToolException], str]
"""LangChain's ``handle_tool_error``: ``True`` answers the exception's text, a string answers that string."""


def progress_payload(
    tool: str, server: str, progress: float, total: float | None, message: str | None
) -> dict[str, Any]:
    """What a progress notification reads as in LangChain: one flat dict.

    ``{"event": PROGRESS_EVENT, "tool": <LangChain tool name>, "server": <server name>,
    "progress": ..., "total": ..., "message": ...}``. The same dict is the custom callback
    event's data and the chunk written to LangGraph's custom stream, where ``event`` tells it
    from the graph's other custom chunks.
    """
    return {
        "event": PROGRESS_EVENT,
        "tool": tool,
        "server": server,
        "progress": progress,
        "total": total,
        "message": message,
    }


@attrs.define(eq=False)
class _ProgressRelay:
    """One call's progress listeners; called on the caller's loop for each notification.

    A plain function (not a coroutine function), so the portal relays it with
    ``call_soon_threadsafe``, in order. Callback events are dispatched as tasks, and
    :meth:`flush` awaits the ones already dispatched before the tool returns.
    """

    tool: str
    server: str
    config: RunnableConfig | None
    graph: Any
    context: contextvars.Context = attrs.Factory(contextvars.copy_context)
    pending: list[asyncio.Task[None]] = attrs.Factory(list)

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        # In the tool's own context: LangGraph's stream writer reads the run's config from it.
        self.context.run(self._deliver, progress_payload(self.tool, self.server, progress, total, message))

    def _deliver(self, data: dict[str, Any]) -> None:
        if self.graph is not None:
            heartbeat = getattr(self.graph, "heartbeat", None)
            if heartbeat is not None:
                heartbeat()
            self.graph.stream_writer(data)
        if self.config is not None:
            event = adispatch_custom_event(PROGRESS_EVENT, data, config=self.config)
            self.pending.append(asyncio.get_running_loop().create_task(event))

    async def flush(self) -> None:
        """Wait for the callback events already dispatched."""
        if self.pending:
            await asyncio.gather(*self.pending)


def _listeners(tool: str, server: str) -> _ProgressRelay | None:
    """A relay for this call's progress, or None when nobody can hear it (then none is asked for).

    Read from the run's config, which ``BaseTool.arun`` sets for the tool's body: callback
    handlers (``astream_events`` adds one) and, inside a LangGraph run, its runtime.
    """
    config = var_child_runnable_config.get()
    if config is None:
        return None
    callbacks = config.get("callbacks")
    hears = isinstance(callbacks, BaseCallbackManager) and bool(callbacks.handlers)
    graph = None
    if _graph_runtime is not None and config.get("configurable"):
        try:
            graph = _graph_runtime()
        except (RuntimeError, KeyError):
            graph = None
    if graph is None and not hears:
        return None
    return _ProgressRelay(tool, server, config if hears else None, graph)


def _content_and_artifact(result: mcp_types.CallToolResult) -> tuple[str, dict[str, Any] | None]:
    text = flatten_result(result)
    if result.is_error:
        raise ToolException(text)
    if result.structured_content is None:
        return text, None
    return text, {"structured_content": result.structured_content}


class SupervisedMcpTool(BaseTool):
    """One MCP tool of the runtime as a LangChain tool, called through the runtime's service.

    Built by :func:`load_tools`; holds no connection of its own (the service's supervised
    session is shared by every tool of the server). A ``BaseTool`` of its own rather than a
    ``StructuredTool`` around a coroutine: the adapter is a field, ``_arun`` and ``_run`` are
    one pair, and LangChain's per-call inspection of the callable stays cheap. ``ainvoke`` is the path agents take;
    ``invoke`` blocks on the portal (see the module docstring). ``metadata`` names the
    server and the tool (``mcp_server``, ``mcp_tool``, ``mcp_tool_id``) for callback
    handlers and tracing.

    Attributes:
        adapter: Calls the tool (bounded, approved, progress relayed); its ``call`` gives
            the raw ``CallToolResult`` (images and audio as bytes) to a host that wants it.
    """

    adapter: SkipValidation[McpToolAdapter] = Field(exclude=True)
    args_schema: SkipValidation[ArgsSchema | None] = None
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: SkipValidation[ToolErrorHandling | None] = True

    async def _arun(self, *args: Any, **arguments: Any) -> Any:
        # Returns (content, artifact). Annotated ``Any`` on purpose (see the note at the imports).
        # ``args`` is always empty: LangChain refuses a string input for a JSON-schema tool.
        # No ``run_manager`` or ``config`` parameter on purpose: LangChain would inject them
        # by name, over a tool argument of the same name.
        mcp_tool = self.adapter.mcp_tool
        relay = _listeners(self.name, mcp_tool.server_name)
        adapter = self.adapter if relay is None else attrs.evolve(self.adapter, on_progress=relay)
        try:
            result = await adapter.call(arguments)
        except McpActorsError as exc:
            if relay is not None:
                await relay.flush()
            raise ToolException(failure_message(exc)) from exc
        if relay is not None:
            await relay.flush()
        return _content_and_artifact(result)

    def _run(self, *args: Any, **arguments: Any) -> Any:
        portal = getattr(self.adapter.service, "portal", None)
        if not isinstance(portal, RuntimePortal):
            raise RuntimeError(
                f"tool {self.name!r} cannot be called synchronously with {type(self.adapter.service).__name__}:"
                " await tool.ainvoke(...) (agent.ainvoke), or load the tools with the portal's asyncio"
                " facade (portal.asyncio_service()), whose portal can run a blocking call"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop in this thread: blocking it is fine
        else:
            raise RuntimeError(
                f"tool {self.name!r} was invoked synchronously on a thread running an asyncio loop,"
                " which the call would block; await tool.ainvoke(...) (agent.ainvoke) there"
            )
        blocking = attrs.evolve(self.adapter, service=portal.service, on_progress=None)
        try:
            result = portal.run(blocking.call, arguments)
        except McpActorsError as exc:
            raise ToolException(failure_message(exc)) from exc
        return _content_and_artifact(result)


class ToolList(list[SupervisedMcpTool]):
    """The tools :func:`load_tools` built (a plain list to LangChain), plus the servers left out.

    Attributes:
        failures: Server (as the caller named it) → the typed error that kept it out
            (unknown, disabled, failing to start, ...). A failing server never fails the load.
    """

    failures: Mapping[str, McpActorsError]

    def __init__(self, tools: Iterable[SupervisedMcpTool] = (), failures: Mapping[str, McpActorsError] | None = None):
        super().__init__(tools)
        self.failures = dict(failures or {})


def _args_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # Shared, not copied: LangChain never mutates it (McpTool.input_schema must not be mutated).
    return schema if "properties" in schema else {**schema, "properties": {}}


async def load_tools(
    service: McpService | RuntimeHop,
    servers: Iterable[str] | None = None,
    *,
    tools: ToolSelection = None,
    naming: ToolNaming = "id",
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    handle_tool_error: ToolErrorHandling = True,
) -> ToolList:
    """The runtime's tools as LangChain tools, for ``create_agent``, ``ToolNode`` or ``bind_tools``.

    Lists the servers now (concurrently; the registry caches each listing until the server
    says its tools changed). Call it again to pick up a changed tool list.

    Args:
        service: The portal's asyncio facade (``portal.asyncio_service()``): LangChain runs
            on asyncio. The runtime's trio ``McpService`` works only for code on trio.
        servers: Server names or ids, in order; ``None`` means every active server.
        tools: Which tools (:data:`~mcp_actors.integrations.ToolSelection`); tools in a
            server's ``disabledTools`` are never offered.
        naming: How tools are named (:data:`~mcp_actors.integrations.ToolNaming`): the
            runtime's id ``mcp__<server>__<tool>`` by default.
        timeout: The bound of each call, connecting and approval included (seconds).
        handle_tool_error: LangChain's ``handle_tool_error`` of every tool: ``True`` (the
            failure's text goes to the model in a ``ToolMessage(status="error")``), a fixed
            text, a function of the ``ToolException``, or ``False`` to let it propagate.

    Returns:
        The tools, with :attr:`ToolList.failures` naming the servers that could not be listed.

    Raises:
        ValueError: Two tools would get the same name (the message names both), or
            ``naming`` or ``timeout`` is not valid.
        TypeError: ``servers`` or ``tools`` is one string instead of a collection.
        RuntimeError: Awaited on asyncio with the trio ``McpService`` (pass the facade).
    """
    selected, failures = await select_tools(service, servers, tools=tools, naming=naming, timeout=timeout)
    return ToolList(
        (
            SupervisedMcpTool(
                name=chosen.name,
                description=chosen.mcp_tool.description,
                args_schema=_args_schema(chosen.mcp_tool.input_schema),
                adapter=chosen.adapter,
                handle_tool_error=handle_tool_error,
                metadata={
                    "mcp_server": chosen.mcp_tool.server_name,
                    "mcp_tool": chosen.mcp_tool.name,
                    "mcp_tool_id": chosen.mcp_tool.id,
                },
            )
            for chosen in selected
        ),
        failures,
    )
