"""MCP tools as agent-engine tools: ``name``, ``description``, ``parameters``, ``execute``.

An agent loop keeps a registry of tools it can offer a model and call by name. This module
wraps MCP tools in that shape (DESIGN §8):

* :class:`Tool` — the protocol an agent engine's tool registry holds.
* :class:`McpToolAdapter` — one tool of a server configured in the registry
  (:class:`~mcp_actors.service.McpService`); named by its tool id
  (``mcp__<server>__<tool>``). :func:`load_mcp_tools` builds them for a list of servers;
  a server that fails is reported and skipped, the others load.
* :class:`DirectMcpToolAdapter` — one tool of a *built-in* server that the caller's
  session connects to directly, bypassing the registry: the connection actor lives in
  the caller's nursery and ends with the session. Named ``<server>__<tool>``.
  :func:`open_direct_mcp_tools` (an async context manager) or
  :func:`load_direct_mcp_tools` (hosted in a nursery you own) build them; every
  connection is tracked by the :class:`~mcp_actors._process.tracker.ProcessTracker`.
* :func:`flatten_content` — an MCP result's content as one string for the model.

Results, errors, bounds — the contract of :meth:`Tool.execute` for both adapters:

* A successful call returns :func:`flatten_content` of the result's content (or, if the
  server sent only structured content, that content as JSON).
* A tool-level error (``isError: true``) is *returned*, not raised, as text that starts
  with exactly :data:`ERROR_PREFIX` (``"Error: "``), so that the model sees it and can
  react.
* Everything else raises a typed :class:`~mcp_actors.errors.McpActorsError`, with its
  message prefixed by ``tool '<name>': `` so that it names the tool, the server and what
  happened: :class:`~mcp_actors.errors.ToolCallTimeout` when the call did not finish in
  time (the server is told to cancel it), :class:`~mcp_actors.errors.ServerConnectionLost`
  when the server died during the call, and so on.
* ``execute`` never hangs: the whole call — connecting a server that is not connected
  yet, waiting for approval, running the tool — is bounded by the adapter's ``timeout``
  (120 s by default, as in the reference design).
* The adapters validate nothing about the arguments: the server validates them and
  answers with a tool error the model can read.
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, cast

import attrs
import mcp.types as mcp_types
import trio

from mcp_actors._connection.status import ProgressCallback
from mcp_actors._loops import RuntimeHop, hop_for
from mcp_actors.adapters._base import DEFAULT_TOOL_TIMEOUT as DEFAULT_TOOL_TIMEOUT
from mcp_actors.adapters._base import ERROR_PREFIX as ERROR_PREFIX
from mcp_actors.adapters._base import LoadedTools as LoadedTools
from mcp_actors.adapters._base import Tool as Tool
from mcp_actors.adapters._base import _call, _check_timeout, _Target
from mcp_actors.adapters._base import flatten_content as flatten_content
from mcp_actors.adapters._base import flatten_result as flatten_result
from mcp_actors.adapters._direct import DirectMcpConnection as DirectMcpConnection
from mcp_actors.adapters._direct import DirectMcpToolAdapter as DirectMcpToolAdapter
from mcp_actors.adapters._direct import close_direct_mcp_connections as close_direct_mcp_connections
from mcp_actors.adapters._direct import load_direct_mcp_tools as load_direct_mcp_tools
from mcp_actors.adapters._direct import open_direct_mcp_tools as open_direct_mcp_tools
from mcp_actors.errors import McpActorsError
from mcp_actors.service import McpService
from mcp_actors.tools import McpTool

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "DirectMcpConnection",
    "DirectMcpToolAdapter",
    "ERROR_PREFIX",
    "LoadedTools",
    "McpToolAdapter",
    "Tool",
    "close_direct_mcp_connections",
    "flatten_content",
    "flatten_result",
    "load_direct_mcp_tools",
    "load_mcp_tools",
    "open_direct_mcp_tools",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------- registry adapters


@attrs.frozen(eq=False)
class McpToolAdapter:
    """One tool of a registry server as a :class:`Tool`.

    Calls go through the :class:`~mcp_actors.service.McpService`, so they share its
    connection, its approval policy and its ``tool:called`` events. The adapter holds no
    connection of its own and is cheap to create.

    Args:
        mcp_tool: The tool, from :meth:`McpService.list_server_tools` and friends.
        service: The service to call through: the runtime's ``McpService``, or (for an
            asyncio host) the asyncio facade (``rt.service``), which runs each call on the
            runtime's loop.
        timeout: Bound for one :meth:`execute`, connecting included (seconds, > 0).
        on_progress: Called with ``(progress, total, message)`` for every progress
            notification of this tool's calls (an agent UI's progress bar); with the
            asyncio facade, on the caller's loop (a function or coroutine function).

    Raises:
        ValueError: ``timeout`` is not a finite positive number.
    """

    mcp_tool: McpTool
    service: McpService | RuntimeHop
    timeout: float = attrs.field(default=DEFAULT_TOOL_TIMEOUT, kw_only=True, validator=_check_timeout)
    on_progress: ProgressCallback | None = attrs.field(default=None, kw_only=True)
    _last_target: list[tuple[McpService, _Target]] = attrs.field(factory=list, init=False, eq=False, repr=False)
    """The target of the last call without a per-call relay, and its service: built once, not per call."""

    @property
    def name(self) -> str:
        """The tool id, ``mcp__<server>__<tool>`` (provider-safe, unique in the runtime)."""
        return self.mcp_tool.id

    @property
    def description(self) -> str:
        """The server's description of the tool."""
        return self.mcp_tool.description

    @property
    def parameters(self) -> dict[str, Any]:
        """The tool's input schema, as the server sent it (a copy; change it freely)."""
        return copy.deepcopy(dict(self.mcp_tool.input_schema))

    def _target(self, service: McpService, on_progress: ProgressCallback | None) -> _Target:
        tool, server_id = self.mcp_tool, self.mcp_tool.server_id

        def call(arguments: dict[str, Any], timeout: float, call_id: str | None) -> Awaitable[mcp_types.CallToolResult]:
            return service.call_tool(server_id, tool.name, arguments, call_id, timeout=timeout, on_progress=on_progress)

        return _Target(
            name=self.name,
            tool=tool.name,
            server=tool.server_name,
            timeout=self.timeout,
            straight=functools.partial(service.call_goes_straight, server_id, tool.name),
            connected=lambda: service.is_connected(server_id),
            connect=lambda: service.connect(server_id),
            call=call,
        )

    def _steady_target(self, service: McpService) -> _Target:
        """:meth:`_target` with the adapter's own ``on_progress``, kept for the next call on the same service."""
        last = self._last_target
        if last and last[0][0] is service:
            return last[0][1]
        target = self._target(service, self.on_progress)
        last[:] = [(service, target)]
        return target

    async def call(self, params: Mapping[str, Any] | None = None) -> mcp_types.CallToolResult:
        """Call the tool and return the raw MCP result (for hosts that want images, say).

        Bounded and raising exactly like :meth:`execute`; a tool-level error is the
        result's ``is_error``.
        """
        hop = hop_for(self.service, f"tool {self.name!r}")
        if hop is None:
            return await _call(self._steady_target(cast(McpService, self.service)), params)
        if self.on_progress is None:
            return await hop.run_in_runtime(lambda runtime_service: _call(self._steady_target(runtime_service), params))
        relay = hop.relay_progress(self.on_progress)  # on the caller's loop: one per call
        return await hop.run_in_runtime(lambda runtime_service: _call(self._target(runtime_service, relay), params))

    async def execute(self, params: Mapping[str, Any] | None = None) -> str:
        """Call the tool with the model's arguments; return the result as text.

        Args:
            params: The arguments (``None`` means none).

        Returns:
            :func:`flatten_content` of the result; a tool-level error as text starting
            with :data:`ERROR_PREFIX`.

        Raises:
            TypeError: ``params`` is not a mapping.
            ToolCallTimeout: No result within :attr:`timeout` (the server was told to cancel).
            ConnectionFailed: The server could not be reached or died during the call
                (:class:`~mcp_actors.errors.ServerConnectionLost`, with its last stderr lines).
            McpActorsError: Any other typed failure (the server was removed or disabled,
                the tool was disabled, the approver said no). Every message starts with
                ``tool '<name>': ``.
        """
        return flatten_result(await self.call(params))


async def load_mcp_tools(
    service: McpService | RuntimeHop,
    server_ids: Iterable[str] | None = None,
    *,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> LoadedTools[McpToolAdapter]:
    """Adapters for every tool of every listed server, asked concurrently.

    A server that cannot be listed (unknown, disabled, failing to start, ...) is logged
    and reported in :attr:`LoadedTools.failures`; it never stops the others. Tools in the
    server's ``disabledTools`` are left out (the registry filters them).

    Args:
        service: The registry facade. Awaited on asyncio, the asyncio facade (``rt.service``
            of ``mcp_actors.asyncio.open_runtime``): the servers are listed on the runtime's loop
            and the adapters call through the facade.
        server_ids: Servers by id or name, in the order the tools should come in;
            repeats are ignored. ``None`` means every active server.
        timeout: Each adapter's :attr:`~McpToolAdapter.timeout`.

    Returns:
        The adapters and the failures.

    Raises:
        ValueError: ``timeout`` is not a finite positive number.
        RuntimeError: Awaited off trio with a service that is not the asyncio facade.
    """
    _check_timeout(None, None, timeout)
    if isinstance(server_ids, str):
        raise TypeError("server_ids must be a collection of server ids or names, not one string")
    hop = hop_for(service, "load_mcp_tools")
    if hop is not None:
        ids = None if server_ids is None else list(server_ids)
        loaded = await hop.run_in_runtime(lambda runtime_service: load_mcp_tools(runtime_service, ids, timeout=timeout))
        return attrs.evolve(loaded, tools=tuple(attrs.evolve(tool, service=hop) for tool in loaded.tools))
    service = cast(McpService, service)
    if server_ids is None:
        servers = [record.id for record in await service.list() if record.is_active]
    else:
        servers = list(dict.fromkeys(server_ids))
    listed: dict[str, list[McpTool]] = {}
    failures: dict[str, McpActorsError] = {}

    async def one(server: str) -> None:
        try:
            listed[server] = await service.list_server_tools(server)
        except McpActorsError as exc:
            logger.warning("load_mcp_tools: skipping server %s: %s", server, exc)
            failures[server] = exc

    async with trio.open_nursery() as nursery:
        for server in servers:
            nursery.start_soon(one, server)
    adapters = tuple(
        McpToolAdapter(tool, service, timeout=timeout) for server in servers for tool in listed.get(server, ())
    )
    return LoadedTools(tools=adapters, failures={s: failures[s] for s in servers if s in failures})
