"""The supervised servers as a Google ADK toolset: ``LlmAgent(tools=[McpActorsToolset(service)])``.

Google ADK (``google-adk``) gives an agent its tools as :class:`~google.adk.tools.BaseTool`
objects, or as a :class:`~google.adk.tools.base_toolset.BaseToolset` the agent asks for
them before every model call (``get_tools``). ADK's own MCP client,
``McpToolset(connection_params=...)``, is one such toolset per server, holding its own
session. :class:`McpActorsToolset` is the same kind of toolset over the runtime's
:class:`~mcp_actors.service.McpService`: one toolset for all the supervised servers (or a
selection), every call going through the server's one supervised connection — restarted
when it dies, behind a circuit breaker, killed when the runtime ends.

How it maps onto ADK, read from ADK's own ``McpTool`` / ``McpToolset``
(``google/adk/tools/mcp_tool/``) and its tool-calling flow:

* **Declarations.** Each tool declares the server's input schema unchanged, as
  ``FunctionDeclaration(parameters_json_schema=...)``, as ADK's ``McpTool`` does (no copy:
  ADK's model adapters copy the schema before changing it).
* **Results.** A call answers what ADK's ``McpTool`` answers: the MCP result as a dict with
  the MCP wire keys (``content``, ``structuredContent``, ``isError``), so a tool-level error
  reaches the model as the server's own text with ``"isError": true``, and callbacks that
  read ``McpTool`` results read ours.
* **Failures.** ADK ends the whole agent run when a tool raises (unless an
  ``on_tool_error_callback`` answers for it), and its own ``McpTool`` therefore returns
  ``{"error": "..."}`` for a failed call instead of raising. Ours does the same with our typed
  failures (:class:`~mcp_actors.errors.McpActorsError`: the server died during the call,
  the call timed out, the approver said no, the server is disabled, ...): the model gets
  ``{"error": "Error: tool 'mcp__<server>__<tool>': <what happened and what to do>"}`` and
  the run goes on. Programming errors (a trio ``McpService`` awaited on ADK's asyncio loop,
  say) still raise.
* **Progress.** ADK has a channel: ``McpToolset(progress_callback=...)``, an async
  ``(progress, total, message)`` callback, or a factory ``(tool_name, *,
  callback_context, **kwargs)`` returning one per call. :class:`McpActorsToolset` takes the
  same ``progress_callback`` with the same meaning; it runs on ADK's loop.
* **Cancellation.** ADK runs each tool call in an asyncio task of its own and cancels it
  when the invocation is cancelled (the task iterating ``Runner.run_async`` cancelled, or
  stopped early). Cancelling it cancels our call on the runtime's loop, and the server is
  sent ``notifications/cancelled``.
* **Approval.** The service's approver (``set_approver``) is asked for every call that is
  not auto-approved, before the call is sent; ADK's own ``require_confirmation`` gate is not
  offered here.
* **Closing.** ``Runner.close()`` closes every toolset of the agent. :meth:`McpActorsToolset.close`
  forgets the toolset's tools and nothing else: the servers belong to the runtime, which may
  serve other agents, and stop when the runtime (portal) closes.

ADK runs on asyncio only: pass the asyncio facade (``portal.asyncio_service()``, or
``rt.service`` of ``mcp_actors.asyncio.open_runtime``). The trio ``McpService`` is refused when
the toolset is built, not when ADK first lists it: ADK catches a listing's exception, logs it
and runs the agent without the toolset, so a late refusal would read as "the agent has no
tools".
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, Protocol, TypeAlias, cast

import attrs
import mcp.types as mcp_types
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset, ToolPredicate
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from mcp_actors._loops import RuntimeHop
from mcp_actors.adapters import DEFAULT_TOOL_TIMEOUT, McpToolAdapter
from mcp_actors.errors import McpActorsError
from mcp_actors.integrations._common import (
    SelectedTool,
    ToolNaming,
    ToolSelection,
    check_selection,
    failure_message,
    select_tools,
)
from mcp_actors.tools import McpTool

__all__ = ["McpActorsTool", "McpActorsToolset", "ProgressCallback", "ProgressCallbackFactory"]

logger = logging.getLogger(__name__)


class ProgressCallback(Protocol):
    """An async ``(progress, total, message)`` callback: ADK's ``ProgressFnT``, for every call."""

    async def __call__(self, progress: float, total: float | None, message: str | None, /) -> None:
        """Called for each progress notification of a call, on ADK's loop."""


ProgressCallbackFactory: TypeAlias = Callable[..., ProgressCallback | None]
"""ADK's ``ProgressCallbackFactory``: ``factory(tool_name, *, callback_context=tool_context, **kwargs)``.

A plain (not async) callable, called once per call with the tool's name and the call's
``ToolContext`` (its session state, say); it returns the call's async callback, or ``None``.
"""

# Names ADK gives its own function calls: a server tool offered under one would be run in
# their place (or they in its), so such a tool is left out, with a warning. Only naming="tool"
# or a naming function can produce them; the default ids (mcp__<server>__<tool>) cannot.
_RESERVED_NAMES: Final = frozenset(
    {
        # ADK's own McpToolset refuses these (google.adk.tools.mcp_tool.mcp_tool): the
        # framework's human-in-the-loop calls, agent transfer, structured output.
        "adk_request_credential",
        "adk_request_confirmation",
        "adk_request_input",
        "transfer_to_agent",
        "set_model_response",
        # The tool a task-mode LlmAgent ends its task with, also found by this name.
        "finish_task",
    }
)

# Server-owned JSON inside a result: its keys are not renamed.
_OPAQUE_KEYS: Final = frozenset({"_meta", "structuredContent"})
_NOT_FOR_THE_MODEL: Final = frozenset({"result_type"})


def _meta_as_meta(value: Any) -> Any:
    """``_meta`` keys of the MCP models renamed ``meta``, as ADK's ``McpTool`` hands them out."""
    if isinstance(value, dict):
        return {
            ("meta" if key == "_meta" else key): (item if key in _OPAQUE_KEYS else _meta_as_meta(item))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_meta_as_meta(item) for item in value]
    return value


def _payload(result: mcp_types.CallToolResult) -> dict[str, Any]:
    """An MCP tool result as ADK's ``McpTool`` returns it to the flow (and so to the model).

    The result's JSON with the MCP wire keys (``content``, ``structuredContent``,
    ``isError``), fields that are not set left out, ``_meta`` named ``meta``; the protocol's
    ``resultType`` (always ``"complete"`` here) is dropped, as ADK drops it.

    Args:
        result: The result of ``tools/call``.

    Returns:
        A JSON-ready dict.
    """
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=set(_NOT_FOR_THE_MODEL))
    payload: dict[str, Any] = _meta_as_meta(dumped)
    return payload


def _is_async_callable(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or (callable(fn) and inspect.iscoroutinefunction(fn.__call__))


def _awaited(callback: ProgressCallback) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    """``callback`` as a coroutine function: the facade schedules those on the caller's loop.

    An object with an async ``__call__`` is not a coroutine function to ``inspect``; wrapped,
    every async callback is run the same way.
    """

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await callback(progress, total, message)

    return relay


class McpActorsTool(BaseTool):
    """One supervised MCP tool as an ADK tool: declared with the server's schema, called through the service.

    Built by :meth:`McpActorsToolset.get_tools`; an agent may also hold one directly
    (``LlmAgent(tools=[tool])``). A call is bounded (the toolset's ``timeout``), asks the
    service's approver, connects a lazy server first, and is cancelled with its ADK task.

    Args:
        selected: The tool and the name the model calls it by.
        progress_callback: A :data:`ProgressCallback` for every call, or a
            :data:`ProgressCallbackFactory` asked once per call.
    """

    def __init__(
        self,
        selected: SelectedTool,
        *,
        progress_callback: ProgressCallback | ProgressCallbackFactory | None = None,
    ) -> None:
        super().__init__(name=selected.name, description=selected.mcp_tool.description)
        adapter = selected.adapter
        self._factory: ProgressCallbackFactory | None = None
        if progress_callback is not None:
            if _is_async_callable(progress_callback):
                adapter = attrs.evolve(adapter, on_progress=_awaited(cast(ProgressCallback, progress_callback)))
            elif callable(progress_callback):
                self._factory = cast(ProgressCallbackFactory, progress_callback)
            else:
                raise TypeError(
                    "progress_callback must be an async (progress, total, message) callback or a factory"
                    f" (tool_name, *, callback_context) returning one, got {progress_callback!r}"
                )
        self._adapter = adapter

    @property
    def mcp_tool(self) -> McpTool:
        """The listed tool: its id, own name, server, description and input schema."""
        return self._adapter.mcp_tool

    @property
    def adapter(self) -> McpToolAdapter:
        """What calls the tool (bounded, approved, progress relayed); its ``call`` gives the raw MCP result."""
        return self._adapter

    def _get_declaration(self) -> types.FunctionDeclaration:
        """The declaration the model sees: this tool's name, the server's description and input schema.

        A new declaration each time: ADK's ``tool_name_prefix`` renames the one it gets.
        """
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self.mcp_tool.input_schema,
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any]:
        """Call the tool with the model's arguments; the result, or the failure, as a dict for the model.

        Args:
            args: The model's arguments.
            tool_context: The call's ADK context (given to a progress factory).

        Returns:
            The MCP result as ADK's ``McpTool`` returns it (a tool-level error has
            ``"isError": true``), or ``{"error": "Error: tool '<id>': ..."}`` when the call
            failed with a typed :class:`~mcp_actors.errors.McpActorsError`.

        Raises:
            asyncio.CancelledError: The ADK task was cancelled; so was the call.
        """
        adapter = self._adapter
        if self._factory is not None:
            callback = self._factory(self.name, callback_context=tool_context)
            if callback is not None:
                adapter = attrs.evolve(adapter, on_progress=_awaited(callback))
        try:
            result = await adapter.call(args)
        except McpActorsError as exc:
            return {"error": failure_message(exc)}
        return _payload(result)

    def _detect_error_in_response(self, response: Any) -> str | None:
        """ADK's telemetry hook (read with ``getattr``): a tool-level error, as ADK's ``McpTool`` reports it."""
        if isinstance(response, dict) and response.get("isError"):
            return "MCP_TOOL_ERROR"
        return None


class McpActorsToolset(BaseToolset):
    """The runtime's supervised MCP servers as one ADK toolset.

    ``LlmAgent(model=..., tools=[McpActorsToolset(portal.asyncio_service())])``. ADK asks
    :meth:`get_tools` before a model call and keeps the answer for the rest of the
    invocation; every ask lists the servers through the service, whose cache answers until a
    server's tools change (``notifications/tools/list_changed``, a reconnect), so a changed
    list is seen on the next ask. Tool objects are kept while their listed tool is unchanged.

    A server that cannot be listed (down, disabled, unknown) is left out of that ask, with a
    warning, and named in :attr:`failures`; the other servers' tools are offered.

    Args:
        service: The asyncio facade (``portal.asyncio_service()``): ADK runs on asyncio, where
            only a facade that hops onto the runtime's trio loop can call.
        servers: Server names or ids, in order; ``None`` means every active server.
        tools: Which tools (see :data:`~mcp_actors.integrations.ToolSelection`).
        naming: How the model sees tool names (see :data:`~mcp_actors.integrations.ToolNaming`):
            ``"id"`` (``mcp__<server>__<tool>``, the default), ``"tool"``, or a function.
        timeout: The bound of each call, connecting and approval included (seconds).
        progress_callback: ADK's progress channel (see :data:`ProgressCallback`,
            :data:`ProgressCallbackFactory`), as ``McpToolset`` takes it.
        tool_filter: ADK's own filter, applied after ``tools``: names (as the model sees
            them) or a ``ToolPredicate`` of the tool and the ``ReadonlyContext``.
        tool_name_prefix: ADK's prefix, put before each name (``<prefix>_<name>``).

    Raises:
        TypeError: ``service`` is the trio ``McpService`` (or anything else that cannot call
            from asyncio), ``servers`` or ``tools`` is one string, or ``progress_callback`` is
            not callable.
        ValueError: ``naming`` or ``timeout`` is not valid.
    """

    def __init__(
        self,
        service: RuntimeHop,
        servers: Iterable[str] | None = None,
        *,
        tools: ToolSelection = None,
        naming: ToolNaming = "id",
        timeout: float = DEFAULT_TOOL_TIMEOUT,
        progress_callback: ProgressCallback | ProgressCallbackFactory | None = None,
        tool_filter: ToolPredicate | list[str] | None = None,
        tool_name_prefix: str | None = None,
    ) -> None:
        super().__init__(tool_filter=tool_filter, tool_name_prefix=tool_name_prefix)
        if not isinstance(service, RuntimeHop):
            raise TypeError(
                f"McpActorsToolset needs the runtime's asyncio facade, got {type(service).__name__}: ADK runs on"
                " asyncio; pass portal.asyncio_service() (or rt.service of mcp_actors.asyncio.open_runtime)"
            )
        self._servers = check_selection(servers, tools=tools, naming=naming, timeout=timeout)
        if progress_callback is not None and not callable(progress_callback):
            raise TypeError(f"progress_callback must be callable, got {progress_callback!r}")
        self._service = service
        self._tools = tools
        self._naming = naming
        self._timeout = timeout
        self._progress_callback = progress_callback
        self._built: dict[str, McpActorsTool] = {}
        self._failures: Mapping[str, McpActorsError] = {}
        self._warned: set[str] = set()  # tools left out for their name: said once, not at every listing

    @property
    def failures(self) -> Mapping[str, McpActorsError]:
        """The servers the last :meth:`get_tools` could not list, and why (empty if none)."""
        return self._failures

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        """The tools offered now: listed through the service, selected, named, filtered.

        Args:
            readonly_context: ADK's context, given to a ``ToolPredicate`` filter.

        Returns:
            One :class:`McpActorsTool` per offered tool, in server order, then each server's order.

        Raises:
            ValueError: Two tools would get the same name (the message names both). ADK
                logs this and runs the agent without the toolset.
        """
        selected, failures = await select_tools(
            self._service, self._servers, tools=self._tools, naming=self._naming, timeout=self._timeout
        )
        self._failures = failures
        previous = self._built
        built: dict[str, McpActorsTool] = {}
        offered: list[BaseTool] = []
        for one in selected:
            if one.name in _RESERVED_NAMES:
                if one.mcp_tool.id not in self._warned:
                    self._warned.add(one.mcp_tool.id)
                    logger.warning(
                        "tool %r of server %r is left out: ADK calls its own function %r; use naming='id'",
                        one.mcp_tool.name,
                        one.mcp_tool.server_name,
                        one.name,
                    )
                continue
            tool = previous.get(one.name)
            if tool is None or tool.mcp_tool is not one.mcp_tool:
                tool = McpActorsTool(one, progress_callback=self._progress_callback)
            built[one.name] = tool
            if self._is_tool_selected(tool, readonly_context):
                offered.append(tool)
        self._built = built
        return offered

    async def close(self) -> None:
        """Forget the toolset's tools; the servers keep running.

        ADK's ``Runner.close()`` closes every toolset of its agent. The servers belong to
        the runtime, which may serve other agents and toolsets: they stop when the
        runtime (the portal) closes, never here. The toolset stays usable: the next
        :meth:`get_tools` lists again.
        """
        self._built = {}
