"""The supervised servers as one pydantic-ai toolset: :class:`McpActorsToolset`.

Install with ``pip install 'mcp-actors[pydantic-ai]'``. Give an ``Agent`` the toolset and
its model sees the tools of every active server (or of the ``servers`` you pick), called
through the runtime: one supervised session per server shared by every agent and run,
lazy connection, restarts with backoff and a circuit breaker, every call bounded, the
approver asked, nothing left running when the runtime closes::

    portal = start_portal()
    agent = Agent(model, toolsets=[McpActorsToolset(portal.asyncio_service())])

It is an :class:`~pydantic_ai.toolsets.AbstractToolset`, the interface pydantic-ai's own
``MCPToolset`` implements, so it composes with the framework's wrappers
(``.filtered()``, ``.prefixed()``, ``.renamed()``, ``.approval_required()``, ...) and with
its agent loop exactly as that toolset does. What it maps, and why:

* **Tools.** Each tool becomes a ``ToolDefinition`` whose ``parameters_json_schema`` is the
  server's input schema (copied once per listed tool, never per call) and whose
  ``metadata`` names the server and the tool id. As ``MCPToolset`` does, the arguments are
  only checked to be an object: the server validates them and answers a tool error the
  model can read. ``get_tools`` lists on every run step, as the framework asks; the
  registry answers from its tool cache, which ``notifications/tools/list_changed``, a
  reconnect and a config change invalidate, so a changed server shows its new tools at
  the next step. Servers that cannot be listed are left out (see :attr:`failures`).
* **Results** are returned as ``MCPToolset`` returns them: structured content when every
  content item is text (a lone ``result`` key unwrapped), else each item mapped — text (a
  JSON object or array parsed), images and audio as ``BinaryContent`` (so a vision model
  sees the picture), embedded resources as their text or ``BinaryContent``, resource
  links as their URI — one item alone, several as a list.
* **A tool-level error** (``isError: true``) raises ``ModelRetry`` with the tool's text,
  like ``MCPToolset``'s default ``tool_error_behavior='retry'``: the model sees it and
  may correct its arguments. ``tool_error_behavior='failed'`` raises ``ToolFailed``
  instead (the model sees the failure and adapts, no retry budget spent).
* **Our typed failures** never escape as exceptions the agent loop does not know: one
  would end the whole run, while the supervisor's failures are exactly what a model can
  work around. Each becomes the text of :func:`~mcp_actors.integrations.failure_message`
  (``Error: tool '<id>': <what happened, which server, what to do>``) in the framework's
  own exception, chosen by :func:`~mcp_actors.integrations.retry_may_help`:
  ``ModelRetry`` when trying again may work (the server died and is being restarted, the
  call timed out, the arguments were refused), so the model may call again within the
  tool's retry budget; ``ToolFailed`` when no retry can (the approver said no, the tool
  or server is disabled or unknown, the circuit is open), so the model adapts without
  spending the budget on a call that cannot succeed. ``ActorStopped`` (the runtime is
  closing) is raised as it is: that ends the run, as it should.
* **Retries.** ``max_retries`` is the tool's retry budget; ``None`` (default) takes the
  agent's, as ``MCPToolset`` does. Retrying is the model's choice: a ``tools/call`` is
  never replayed by the runtime (tools are not idempotent).
* **Progress.** A server's ``notifications/progress`` for a call become
  :class:`McpToolProgress` events in the run's event stream (``RunContext.emit``,
  stamped with the tool call's id): ``event_stream_handler``, ``run_stream_events`` and
  ``iter`` see them; the model does not. Outside a run (a bare ``RunContext``) they are
  dropped.
* **Cancellation.** Cancelling the agent's task (``task.cancel()``, a timeout around
  ``agent.run``) cancels the call: the runtime's task is cancelled and the server is sent
  ``notifications/cancelled``.
* **Approval.** The runtime's approver (``service.set_approver``) is asked for every call
  that is not auto-approved, as for any other caller; ``.approval_required()`` adds
  pydantic-ai's own deferred approval on top, if wanted.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import attrs
import mcp.types as mcp_types
import pydantic_core
from pydantic_ai import messages
from pydantic_ai.exceptions import ModelRetry, ToolFailed, UserError
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from mcp_actors._loops import RuntimeHop
from mcp_actors.adapters import DEFAULT_TOOL_TIMEOUT, ERROR_PREFIX, McpToolAdapter, flatten_content, flatten_result
from mcp_actors.errors import ActorStopped, McpActorsError
from mcp_actors.integrations._common import (
    SelectedTool,
    ToolNaming,
    ToolSelection,
    check_selection,
    failure_message,
    retry_may_help,
    select_tools,
)
from mcp_actors.service import McpService
from mcp_actors.tools import McpTool

__all__ = ["McpActorsToolset", "McpToolProgress"]

_ARGS_VALIDATOR = pydantic_core.SchemaValidator(
    pydantic_core.core_schema.dict_schema(
        pydantic_core.core_schema.str_schema(), pydantic_core.core_schema.any_schema()
    )
)
"""The arguments are an object; the server checks the rest (as pydantic-ai's ``MCPToolset`` does)."""


@dataclass(repr=False, kw_only=True)
class McpToolProgress(messages.CustomEvent, name="mcp_actors.tool_progress"):
    """A progress notification of a running MCP tool call, in the agent run's event stream.

    Emitted with ``RunContext.emit``, so ``tool_call_id`` and ``tool_name`` name the tool
    call it belongs to. For a UI's progress bar; the model never sees it.

    Attributes:
        progress: How far the call is (grows with every notification).
        total: The total the server announced, if any.
        message: The server's message, if any.
        server: The name of the server running the tool.
        tool: The tool's own name on that server.
    """

    progress: float
    total: float | None = None
    message: str | None = None
    server: str = ""
    tool: str = ""


@dataclass(kw_only=True)
class _ServiceTool(ToolsetTool[Any]):
    """A listed tool and the adapter that calls it, so a call needs no look-up by name."""

    adapter: McpToolAdapter


class McpActorsToolset(AbstractToolset[Any]):
    """The tools of the runtime's servers (all active ones, or a selection) as a pydantic-ai toolset.

    The toolset holds no connection: the runtime owns the servers, so entering and
    leaving it (``async with agent``) is free and never stops a server, and any number of
    agents and runs may share one toolset. Close the runtime (the portal) to stop the
    servers.

    Args:
        service: The runtime's service: the asyncio facade (``portal.asyncio_service()``,
            or ``rt.service`` of :func:`mcp_actors.asyncio.open_runtime`) when the agent
            runs on asyncio, as pydantic-ai does; the trio ``McpService`` when it runs on trio.
        servers: Server names or ids, in the order their tools should come; ``None``
            (default) means every active server, read again at every listing.
        tools: Which tools (names, ids or a predicate; see
            :data:`~mcp_actors.integrations.ToolSelection`).
        naming: How the model sees the names (see :data:`~mcp_actors.integrations.ToolNaming`):
            ``"id"`` (default, ``mcp__<server>__<tool>``, unique and provider-safe),
            ``"tool"`` (the server's own names) or a function of the ``McpTool``.
        timeout: The bound of one call, connecting a lazy server and approval included (seconds).
        max_retries: The retry budget of each tool (``ModelRetry``s before the run fails);
            ``None`` takes the agent's.
        tool_error_behavior: A tool-level error (``isError``) raises ``ModelRetry``
            (``"retry"``, default) or ``ToolFailed`` (``"failed"``).
        progress: Emit :class:`McpToolProgress` events for the servers' progress notifications.
        id: The toolset's id (pydantic-ai needs one for durable execution); ``None`` by default.

    Raises:
        ValueError: ``naming``, ``timeout``, ``max_retries`` or ``tool_error_behavior`` is not valid.
        TypeError: ``servers`` or ``tools`` is one string instead of a collection.
    """

    def __init__(
        self,
        service: McpService | RuntimeHop,
        servers: Iterable[str] | None = None,
        *,
        tools: ToolSelection = None,
        naming: ToolNaming = "id",
        timeout: float = DEFAULT_TOOL_TIMEOUT,
        max_retries: int | None = None,
        tool_error_behavior: Literal["retry", "failed"] = "retry",
        progress: bool = True,
        id: str | None = None,
    ) -> None:
        if max_retries is not None and (
            isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0
        ):
            raise ValueError(f"max_retries must be None or an int >= 0, got {max_retries!r}")
        if tool_error_behavior not in ("retry", "failed"):
            raise ValueError(f"tool_error_behavior must be 'retry' or 'failed', got {tool_error_behavior!r}")
        # Refused here, where the mistake is made, not at the agent's first listing.
        checked_servers = check_selection(servers, tools=tools, naming=naming, timeout=timeout)
        self._service = service
        self._servers = checked_servers
        self._tools = tools
        self._naming = naming
        self._timeout = timeout
        self.max_retries = max_retries
        self.tool_error_behavior = tool_error_behavior
        self.progress = progress
        self._id = id
        # Definitions by tool name, with the listed tool they were built from: the registry
        # hands out the very same McpTool while a server's tools are unchanged, so a repeated
        # listing reuses the definition (and its schema copy) instead of building it again.
        self._definitions: dict[str, tuple[McpTool, ToolDefinition]] = {}
        self._failures: Mapping[str, McpActorsError] = {}

    @property
    def id(self) -> str | None:
        """The id given at construction (pydantic-ai needs one for durable execution), or None."""
        return self._id

    @property
    def label(self) -> str:
        """How pydantic-ai names this toolset in its messages: its id, or the servers it offers."""
        if self._id is not None:
            return f"McpActorsToolset {self._id!r}"
        return (
            "McpActorsToolset(all active servers)"
            if self._servers is None
            else f"McpActorsToolset({', '.join(self._servers)})"
        )

    @property
    def tool_name_conflict_hint(self) -> str:
        """What pydantic-ai suggests when two toolsets offer the same tool name."""
        return "Use naming='id' (unique across servers), select fewer tools, or wrap the toolset with .prefixed('...')."

    @property
    def failures(self) -> Mapping[str, McpActorsError]:
        """The servers the last listing left out (down, disabled, unknown), with why."""
        return self._failures

    async def __aenter__(self) -> McpActorsToolset:
        """Nothing to open: the runtime owns the connections, and servers connect on first use."""
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        """Nothing to close: the servers outlive the agent and are stopped with the runtime."""
        return None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools offered now, listed through the registry's tool cache (see the module docstring).

        Raises:
            ValueError: Two tools would get the same name under ``naming``.
        """
        selected, self._failures = await select_tools(
            self._service, self._servers, tools=self._tools, naming=self._naming, timeout=self._timeout
        )
        max_retries = self.max_retries if self.max_retries is not None else ctx.max_retries
        definitions: dict[str, tuple[McpTool, ToolDefinition]] = {}
        tools: dict[str, ToolsetTool[Any]] = {}
        for chosen in selected:
            definition = self._definition(chosen)
            definitions[chosen.name] = (chosen.mcp_tool, definition)
            tools[chosen.name] = _ServiceTool(
                toolset=self,
                tool_def=definition,
                max_retries=max_retries,
                args_validator=_ARGS_VALIDATOR,
                adapter=chosen.adapter,
            )
        self._definitions = definitions
        return tools

    def _definition(self, chosen: SelectedTool) -> ToolDefinition:
        known = self._definitions.get(chosen.name)
        if known is not None and known[0] is chosen.mcp_tool:
            return known[1]
        tool = chosen.mcp_tool
        return ToolDefinition(
            name=chosen.name,
            description=tool.description or None,
            # A copy: pydantic-ai and its model profiles own the definition; the registry's
            # schema is shared by every caller and must never change.
            parameters_json_schema=copy.deepcopy(dict(tool.input_schema)),
            metadata={"mcp_actors": {"tool_id": tool.id, "server": tool.server_name, "tool": tool.name}},
        )

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Call the tool through the runtime and return its result as pydantic-ai's MCP toolset does.

        Raises:
            ModelRetry: A tool-level error (with ``tool_error_behavior="retry"``), or a
                typed failure that a retry may overcome; the message is for the model.
            ToolFailed: A tool-level error (with ``tool_error_behavior="failed"``), or a
                typed failure no retry can overcome; the message is for the model.
            ActorStopped: The runtime is closing or closed.
        """
        adapter = tool.adapter if isinstance(tool, _ServiceTool) else self._adapter_named(name)
        relay = None
        if self.progress:
            relay = _ProgressRelay(ctx, adapter.mcp_tool)
            adapter = attrs.evolve(adapter, on_progress=relay.emit)
        try:
            result = await adapter.call(tool_args)
        except ActorStopped:
            raise
        except McpActorsError as exc:
            _raise_for_model(failure_message(exc), retry=retry_may_help(exc), cause=exc)
        finally:
            if relay is not None:
                relay.done = True
        if result.is_error:
            # The tool's own text, as MCPToolset raises it: the exception already says it failed.
            message = flatten_result(result).removeprefix(ERROR_PREFIX)
            _raise_for_model(message, retry=self.tool_error_behavior == "retry")
        return _map_result(result)

    def _adapter_named(self, name: str) -> McpToolAdapter:
        # A ToolsetTool this toolset did not build (a host or wrapper that rebuilt it from
        # its definition): the tool of that name in the last listing.
        known = self._definitions.get(name)
        if known is None:
            raise ModelRetry(f"Error: no tool named {name!r} is offered now; call one of the listed tools")
        return McpToolAdapter(known[0], self._service, timeout=self._timeout)


def _raise_for_model(message: str, *, retry: bool, cause: BaseException | None = None) -> NoReturn:
    if retry:
        raise ModelRetry(message) from cause
    raise ToolFailed(message) from cause


@attrs.define(eq=False)
class _ProgressRelay:
    """One call's progress callback: each notification as an :class:`McpToolProgress` in the run's stream.

    Runs on the agent's loop (the asyncio facade schedules it there). A notification that
    comes after the call ended, or in a context with no event stream, is dropped.
    """

    ctx: RunContext[Any]
    tool: McpTool
    done: bool = False

    async def emit(self, progress: float, total: float | None, message: str | None) -> None:
        """Emit one notification (a coroutine function: the asyncio facade runs it on the agent's loop)."""
        if self.done:
            return
        event = McpToolProgress(
            progress=progress, total=total, message=message, server=self.tool.server_name, tool=self.tool.name
        )
        try:
            await self.ctx.emit(event)
        except UserError:
            self.done = True  # not in a run: no stream to emit into


# ---------------------------------------------------------------------- results, as pydantic-ai's MCPToolset maps them


def _map_result(result: mcp_types.CallToolResult) -> Any:
    structured = result.structured_content
    if structured is not None and all(isinstance(item, mcp_types.TextContent) for item in result.content):
        # The SDK wraps a primitive or a list in {"result": ...}: the tool's own value is inside.
        if isinstance(structured, dict) and len(structured) == 1 and "result" in structured:
            return structured["result"]
        return structured
    mapped = [_map_item(item) for item in result.content]
    return mapped[0] if len(mapped) == 1 else mapped


def _map_item(item: mcp_types.ContentBlock) -> Any:
    if isinstance(item, mcp_types.TextContent):
        text = item.text
        if text.startswith(("[", "{")):
            try:
                return pydantic_core.from_json(text)
            except ValueError:
                pass
        return text
    if isinstance(item, mcp_types.ImageContent):
        return messages.BinaryImage(data=base64.b64decode(item.data), media_type=item.mime_type)
    if isinstance(item, mcp_types.AudioContent):
        return messages.BinaryContent(data=base64.b64decode(item.data), media_type=item.mime_type)
    if isinstance(item, mcp_types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return messages.BinaryContent.narrow_type(
            messages.BinaryContent(
                data=base64.b64decode(resource.blob), media_type=resource.mime_type or "application/octet-stream"
            )
        )
    if isinstance(item, mcp_types.ResourceLink):
        return str(item.uri)
    return flatten_content([item])  # a content kind a later protocol adds: named, as for the other adapters
