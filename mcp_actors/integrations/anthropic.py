"""The supervised servers' tools as function tools of the Anthropic SDK's tool runner.

``client.beta.messages.tool_runner(tools=...)`` runs the model's tool calls itself: it
takes *function tools* (``BetaAsyncFunctionTool`` with an ``AsyncAnthropic`` client,
``BetaFunctionTool`` with an ``Anthropic`` one), sends each one's ``to_dict()`` with the
request and, for every ``tool_use`` block of a reply, awaits ``tool.call(input)`` and sends
back a ``tool_result``. The SDK's own MCP helper (``anthropic.lib.tools.mcp``:
``async_mcp_tool`` / ``mcp_tool``) builds such tools from one ``mcp.ClientSession`` that the
host opens, keeps alive and closes itself. This module builds them over the runtime:

* :func:`async_tools` — one :class:`McpAsyncFunctionTool` (a ``BetaAsyncFunctionTool``) per
  tool, for the async runner, over the asyncio facade (``portal.asyncio_service()``), or
  over the runtime's ``McpService`` when the runner runs on trio (the SDK's async client
  runs on trio too).
* :func:`sync_tools` — one :class:`McpFunctionTool` (a ``BetaFunctionTool``) per tool, for
  the sync runner, over ``portal.sync_service()``. The sync runner is the shape of the SDK's
  own examples (``Anthropic()`` and a ``for message in runner`` loop), and the SDK's sync
  ``mcp_tool`` only works from a worker thread of an anyio loop; ours blocks the calling
  thread only, from any thread, while the runtime's thread serves the call.

How a call maps onto the runner:

* The definition: the tool's name under the ``naming`` rule, its description and its MCP
  ``inputSchema`` unchanged (the very dict the registry listed; never copied per request).
* ``call(input)`` goes straight to the service, through
  :class:`~mcp_actors.adapters.McpToolAdapter` (bounded by ``timeout``, connecting a lazy
  server, asking the service's approver). It skips the per-call pydantic validation a
  ``beta_async_tool`` function gets (the input schema is the server's, and the server
  validates the arguments and answers a bad one with a tool error the model reads).
* A result becomes content blocks as the SDK's helper makes them (its own ``mcp_content``):
  text as text blocks, a PNG/JPEG/GIF/WebP image as an image block, an embedded text or PDF
  resource as a document block; structured content alone as its JSON text. Where the SDK's
  helper fails the whole call (audio, a resource link, another MIME type), the item becomes
  the text :func:`~mcp_actors.adapters.flatten_content` gives it (``[Audio: audio/wav]``).
* A failing tool: the runner turns ``ToolError(content)`` into a ``tool_result`` with that
  content and ``is_error: true``; any other exception becomes ``repr(exc)`` and a logged
  traceback. So a tool-level error (``isError: true``) raises ``ToolError`` with the tool's
  own content (as the SDK's helper does), and a typed failure of ours
  (:class:`~mcp_actors.errors.McpActorsError`: the server died, the call timed out, the
  approver said no, the portal closed) raises ``ToolError`` with
  :func:`~mcp_actors.integrations.failure_message`'s text — ``Error: tool '<id>': ...``,
  naming the tool, the server and what to do — chained to the typed error (``__cause__``).
  The model reads a sentence, not a Python repr, and the runner goes on.
* Progress: the runner has no progress channel (a tool gets its input and nothing else),
  so progress goes to the host: ``on_progress(tool, progress, total, message)``, ``tool``
  being the name the model called (:data:`~mcp_actors.integrations.ToolProgress`).
* Cancellation: the async runner awaits ``call`` in the runner's task; cancelling that task
  cancels the call on the runtime and the server is told (``notifications/cancelled``). The
  sync runner calls ``call`` on its own thread: a ``KeyboardInterrupt`` there cancels the
  call the same way.
* The tool list is listed once per :func:`async_tools` / :func:`sync_tools` call (no listing
  per call); the runner's tools are fixed when it is made, so after a ``tools:changed``
  event build the tools again (or hand new ones to ``runner.add_tools``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Literal, TypeAlias, TypeVar

import attrs
import mcp.types as mcp_types
from anthropic.lib.tools import BetaAsyncFunctionTool, BetaFunctionTool, BetaFunctionToolResultType, ToolError
from anthropic.lib.tools.mcp import UnsupportedMCPValueError, mcp_content
from anthropic.types.beta import BetaCacheControlEphemeralParam
from anthropic.types.beta.beta_tool_result_block_param import Content as BetaContent

from mcp_actors._loops import RuntimeHop
from mcp_actors.adapters import DEFAULT_TOOL_TIMEOUT, ERROR_PREFIX, McpToolAdapter, flatten_content
from mcp_actors.errors import McpActorsError
from mcp_actors.integrations._common import (
    SelectedTool,
    ToolNaming,
    ToolProgress,
    ToolSelection,
    bind_progress,
    check_selection,
    failure_message,
    select_tools,
)
from mcp_actors.portal import SyncMcpService
from mcp_actors.service import McpService
from mcp_actors.tools import McpTool

__all__ = ["McpAsyncFunctionTool", "McpFunctionTool", "McpToolList", "async_tools", "sync_tools", "tool_result"]

AllowedCallers: TypeAlias = list[
    Literal["direct", "code_execution_20250825", "code_execution_20260120", "code_execution_20260521"]
]
"""Who may call a tool (``allowed_callers`` of a tool definition), as the SDK types it."""

_AsyncCall: TypeAlias = Callable[..., Coroutine[Any, Any, BetaFunctionToolResultType]]
_SyncCall: TypeAlias = Callable[..., BetaFunctionToolResultType]

ToolT = TypeVar("ToolT")

_NO_MESSAGE = "the tool reported an error without a message"


# ---------------------------------------------------------------------- results


def _block(item: mcp_types.ContentBlock) -> BetaContent:
    """One MCP content item as the SDK's helper converts it; as our text where the helper gives up."""
    try:
        return mcp_content(item)
    except UnsupportedMCPValueError:
        return {"type": "text", "text": flatten_content((item,))}


def tool_result(result: mcp_types.CallToolResult) -> BetaFunctionToolResultType:
    """An MCP tool result as what a runner's function tool returns: content blocks, or JSON text.

    Why public: a host that calls a tool itself (``McpToolAdapter.call``) and writes the
    ``tool_result`` by hand gets the same content the tools of this module give the runner.

    Args:
        result: The MCP ``tools/call`` result.

    Returns:
        The content blocks (see the module docstring); the structured content as JSON when
        the server sent no content.

    Raises:
        ToolError: The result is a tool-level error (``is_error``); its content is the
            tool's own (or a sentence saying the tool gave none), as the runner sends it
            with ``is_error: true``.
    """
    blocks = [_block(item) for item in result.content]
    if result.is_error:
        raise ToolError(blocks or ERROR_PREFIX + _NO_MESSAGE)
    if not blocks and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return blocks


def _failed(exc: McpActorsError) -> ToolError:
    return ToolError(failure_message(exc))


# ---------------------------------------------------------------------- the tools


def _tool_options(
    tool: McpTool,
    name: str,
    *,
    cache_control: BetaCacheControlEphemeralParam | None,
    defer_loading: bool | None,
    allowed_callers: AllowedCallers | None,
    eager_input_streaming: bool | None,
    strict: bool | None,
) -> dict[str, Any]:
    return {
        "name": name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "cache_control": cache_control,
        "defer_loading": defer_loading,
        "allowed_callers": allowed_callers,
        "eager_input_streaming": eager_input_streaming,
        "strict": strict,
    }


class McpAsyncFunctionTool(BetaAsyncFunctionTool[_AsyncCall]):
    """One MCP tool as a function tool of the async runner (``AsyncAnthropic``).

    Made by :func:`async_tools`. A ``BetaAsyncFunctionTool``: the runner sends
    :meth:`to_dict` and awaits :meth:`call`; awaiting the tool itself
    (``await tool(text="hi")``) calls it too.
    """

    def __init__(
        self,
        selected: SelectedTool,
        *,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        defer_loading: bool | None = None,
        allowed_callers: AllowedCallers | None = None,
        eager_input_streaming: bool | None = None,
        strict: bool | None = None,
    ) -> None:
        self._mcp_adapter = selected.adapter

        async def call_mcp(**arguments: Any) -> BetaFunctionToolResultType:
            return await self.call(arguments)

        super().__init__(
            call_mcp,
            **_tool_options(
                selected.mcp_tool,
                selected.name,
                cache_control=cache_control,
                defer_loading=defer_loading,
                allowed_callers=allowed_callers,
                eager_input_streaming=eager_input_streaming,
                strict=strict,
            ),
        )

    @property
    def mcp_tool(self) -> McpTool:
        """The listed tool: its id, own name, server, description and input schema."""
        return self._mcp_adapter.mcp_tool

    @property
    def adapter(self) -> McpToolAdapter:
        """The adapter the calls go through (``adapter.call(params)`` gives the raw MCP result)."""
        return self._mcp_adapter

    async def call(self, input: object) -> BetaFunctionToolResultType:
        """Call the tool with the model's input; what the runner awaits for a ``tool_use`` block.

        Cancelling the awaiting task cancels the call, on the server too.

        Returns:
            The content blocks (see :func:`tool_result`).

        Raises:
            ToolError: A tool-level error (the tool's content), or a typed failure (its
                message, naming the tool and the server; the typed error is the ``__cause__``).
            TypeError: ``input`` is not a mapping.
        """
        if not isinstance(input, Mapping):
            raise TypeError(f"tool {self.name!r}: input must be a JSON object, got {type(input).__name__}")
        try:
            result = await self._mcp_adapter.call(input)
        except McpActorsError as exc:
            raise _failed(exc) from exc
        return tool_result(result)


class McpFunctionTool(BetaFunctionTool[_SyncCall]):
    """One MCP tool as a function tool of the sync runner (``Anthropic``).

    Made by :func:`sync_tools`. A ``BetaFunctionTool``: :meth:`call` blocks the calling
    thread (any thread but the portal's own) while the runtime's thread runs the call.
    """

    def __init__(
        self,
        selected: SelectedTool,
        service: SyncMcpService,
        *,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        defer_loading: bool | None = None,
        allowed_callers: AllowedCallers | None = None,
        eager_input_streaming: bool | None = None,
        strict: bool | None = None,
    ) -> None:
        self._mcp_adapter = selected.adapter
        self._portal = service.portal

        def call_mcp(**arguments: Any) -> BetaFunctionToolResultType:
            return self.call(arguments)

        super().__init__(
            call_mcp,
            **_tool_options(
                selected.mcp_tool,
                selected.name,
                cache_control=cache_control,
                defer_loading=defer_loading,
                allowed_callers=allowed_callers,
                eager_input_streaming=eager_input_streaming,
                strict=strict,
            ),
        )

    @property
    def mcp_tool(self) -> McpTool:
        """The listed tool: its id, own name, server, description and input schema."""
        return self._mcp_adapter.mcp_tool

    @property
    def adapter(self) -> McpToolAdapter:
        """The adapter the calls go through, on the runtime's thread (``portal.run(adapter.call, params)``)."""
        return self._mcp_adapter

    def call(self, input: object) -> BetaFunctionToolResultType:
        """Call the tool with the model's input and wait; what the runner calls for a ``tool_use`` block.

        A ``KeyboardInterrupt`` while waiting cancels the call, on the server too.

        Returns:
            The content blocks (see :func:`tool_result`).

        Raises:
            ToolError: A tool-level error (the tool's content), or a typed failure (its
                message, naming the tool and the server; the typed error is the ``__cause__``).
            TypeError: ``input`` is not a mapping.
            RuntimeError: Called on the portal's own thread.
        """
        if not isinstance(input, Mapping):
            raise TypeError(f"tool {self.name!r}: input must be a JSON object, got {type(input).__name__}")
        try:
            result = self._portal.run(self._mcp_adapter.call, input)
        except McpActorsError as exc:
            raise _failed(exc) from exc
        return tool_result(result)


class McpToolList(list[ToolT]):
    """The tools, as a list to hand to ``tool_runner(tools=...)``, plus the servers left out.

    Attributes:
        failures: Server (as the caller named it) → the typed error that kept its tools out
            (down, disabled, unknown). The other servers' tools are in the list.
    """

    failures: Mapping[str, McpActorsError]

    def __init__(self, tools: Iterable[ToolT], failures: Mapping[str, McpActorsError]) -> None:
        super().__init__(tools)
        self.failures = failures


def _last_cached(count: int, cache_control: BetaCacheControlEphemeralParam | None) -> list[Any]:
    """``cache_control`` for each of ``count`` tools: on the last one only (it caches every tool before it)."""
    return [None] * (count - 1) + [cache_control] if count else []


async def async_tools(
    service: McpService | RuntimeHop,
    servers: Iterable[str] | None = None,
    *,
    tools: ToolSelection = None,
    naming: ToolNaming = "id",
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    on_progress: ToolProgress | None = None,
    cache_control: BetaCacheControlEphemeralParam | None = None,
    defer_loading: bool | None = None,
    allowed_callers: AllowedCallers | None = None,
    eager_input_streaming: bool | None = None,
    strict: bool | None = None,
) -> McpToolList[McpAsyncFunctionTool]:
    """The servers' tools as async function tools, for ``AsyncAnthropic().beta.messages.tool_runner``.

    Why: the runner takes a fixed list of function tools; this lists the servers once (a
    server that cannot be listed is left out and reported in ``failures``) and gives one
    tool per MCP tool, each calling through the service — bounded, approved, supervised.

    Args:
        service: The asyncio facade (``portal.asyncio_service()``); on trio, the runtime's
            ``McpService``.
        servers: Server names or ids, in order; ``None`` means every active server.
        tools: Which tools (see :data:`~mcp_actors.integrations.ToolSelection`); tools in a
            server's ``disabledTools`` are never offered.
        naming: How the model sees them (see :data:`~mcp_actors.integrations.ToolNaming`):
            ``"id"`` (``mcp__<server>__<tool>``), ``"tool"`` (the server's own name, as the
            SDK's helper names it) or a function of the ``McpTool``.
        timeout: The bound of each call, connecting and approval included (seconds).
        on_progress: Called with ``(tool, progress, total, message)`` for the progress of
            every call (see :data:`~mcp_actors.integrations.ToolProgress`): a function or a
            coroutine function, run on the caller's asyncio loop (on trio, in the runtime).
            The runner itself has no progress channel.
        cache_control: Put on the last tool, which caches every tool definition before it.
        defer_loading: ``defer_loading`` of every tool (for the tool search tool).
        allowed_callers: ``allowed_callers`` of every tool.
        eager_input_streaming: ``eager_input_streaming`` of every tool.
        strict: ``strict`` of every tool.

    Returns:
        The tools, with :attr:`McpToolList.failures`.

    Raises:
        ValueError: Two tools would get the same name (the message names both), or
            ``naming`` or ``timeout`` is not valid.
        TypeError: ``servers`` or ``tools`` is one string instead of a collection.
        RuntimeError: Awaited on asyncio with the trio ``McpService`` (pass the facade).
    """
    selected, failures = await select_tools(service, servers, tools=tools, naming=naming, timeout=timeout)
    if on_progress is not None:
        selected = tuple(_with_progress(one, on_progress) for one in selected)
    caches = _last_cached(len(selected), cache_control)
    made = (
        McpAsyncFunctionTool(
            one,
            cache_control=cache,
            defer_loading=defer_loading,
            allowed_callers=allowed_callers,
            eager_input_streaming=eager_input_streaming,
            strict=strict,
        )
        for one, cache in zip(selected, caches, strict=True)
    )
    return McpToolList(made, failures)


def sync_tools(
    service: SyncMcpService,
    servers: Iterable[str] | None = None,
    *,
    tools: ToolSelection = None,
    naming: ToolNaming = "id",
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    on_progress: Callable[[str, float, float | None, str | None], None] | None = None,
    cache_control: BetaCacheControlEphemeralParam | None = None,
    defer_loading: bool | None = None,
    allowed_callers: AllowedCallers | None = None,
    eager_input_streaming: bool | None = None,
    strict: bool | None = None,
) -> McpToolList[McpFunctionTool]:
    """The servers' tools as sync function tools, for ``Anthropic().beta.messages.tool_runner``.

    The same tools as :func:`async_tools`, for a thread: listing and every call block the
    calling thread only (any thread but the portal's own).

    Args:
        service: The blocking facade, ``portal.sync_service()``.
        servers: Server names or ids, in order; ``None`` means every active server.
        tools: Which tools (see :data:`~mcp_actors.integrations.ToolSelection`).
        naming: How the model sees them (see :data:`~mcp_actors.integrations.ToolNaming`).
        timeout: The bound of each call, connecting and approval included (seconds).
        on_progress: Called with ``(tool, progress, total, message)`` for the progress of
            every call, on the runtime's thread: a plain function that returns quickly
            (hand the value over, as to a queue).
        cache_control: Put on the last tool, which caches every tool definition before it.
        defer_loading: ``defer_loading`` of every tool.
        allowed_callers: ``allowed_callers`` of every tool.
        eager_input_streaming: ``eager_input_streaming`` of every tool.
        strict: ``strict`` of every tool.

    Returns:
        The tools, with :attr:`McpToolList.failures`.

    Raises:
        ValueError: Two tools would get the same name, or ``naming`` or ``timeout`` is not valid.
        TypeError: ``service`` is not the blocking facade, or ``servers`` or ``tools`` is one
            string instead of a collection.
        ActorStopped: The portal is closed.
    """
    if not isinstance(service, SyncMcpService):
        raise TypeError(
            f"sync_tools needs the portal's blocking facade (portal.sync_service()), got {type(service).__name__}; "
            "for the async runner use async_tools"
        )
    portal = service.portal
    # Checked and read here, on the caller's thread (an iterator of names is the caller's).
    names = check_selection(servers, tools=tools, naming=naming, timeout=timeout)

    async def select() -> tuple[tuple[SelectedTool, ...], Mapping[str, McpActorsError]]:
        return await select_tools(portal.service, names, tools=tools, naming=naming, timeout=timeout)

    selected, failures = portal.run(select)
    if on_progress is not None:
        selected = tuple(_with_progress(one, on_progress) for one in selected)
    caches = _last_cached(len(selected), cache_control)
    made = (
        McpFunctionTool(
            one,
            service,
            cache_control=cache,
            defer_loading=defer_loading,
            allowed_callers=allowed_callers,
            eager_input_streaming=eager_input_streaming,
            strict=strict,
        )
        for one, cache in zip(selected, caches, strict=True)
    )
    return McpToolList(made, failures)


def _with_progress(selected: SelectedTool, on_progress: ToolProgress) -> SelectedTool:
    """``selected`` whose adapter reports its calls' progress to ``on_progress``, under the tool's name."""
    relay = bind_progress(on_progress, selected.name)
    return attrs.evolve(selected, adapter=attrs.evolve(selected.adapter, on_progress=relay))
