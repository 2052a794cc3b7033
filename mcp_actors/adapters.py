"""MCP tools as agent-engine tools: ``name``, ``description``, ``parameters``, ``execute``.

An agent loop keeps a registry of tools it can offer a model and call by name. This module
wraps MCP tools in that shape (DESIGN §8):

* :class:`Tool` — the protocol an agent engine's tool registry holds.
* :class:`McpToolAdapter` — one tool of a server configured in the registry
  (:class:`~mcp_actors.registry.McpService`); named by its tool id
  (``mcp__<server>__<tool>``). :func:`load_mcp_tools` builds them for a list of servers;
  a server that fails is reported and skipped, the others load.
* :class:`DirectMcpToolAdapter` — one tool of a *built-in* server that the caller's
  session connects to directly, bypassing the registry: the connection actor lives in
  the caller's nursery and ends with the session. Named ``<server>__<tool>``.
  :func:`open_direct_mcp_tools` (an async context manager) or
  :func:`load_direct_mcp_tools` (hosted in a nursery you own) build them; every
  connection is tracked by the :class:`~mcp_actors.process_tracker.ProcessTracker`.
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

import contextlib
import copy
import functools
import hashlib
import json
import logging
import math
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar, overload, runtime_checkable

import attrs
import mcp.types as mcp_types
import trio

from mcp_actors import events
from mcp_actors.connection import ConnectionHandle, ConnectionState, ConnectionStatus, open_connection
from mcp_actors.errors import McpActorsError, ServerInactive, ToolCallTimeout
from mcp_actors.naming import MAX_TOOL_NAME_LENGTH, direct_tool_name
from mcp_actors.process_tracker import ProcessIdentity, ProcessTracker
from mcp_actors.records import McpServerRecord
from mcp_actors.registry import McpService, settings_for
from mcp_actors.tools import MCPTool

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

DEFAULT_TOOL_TIMEOUT: Final = 120.0
"""Seconds an adapter's :meth:`~Tool.execute` may take, unless the adapter says otherwise."""

ERROR_PREFIX: Final = "Error: "
"""How a tool-level error (``isError: true``) starts when :meth:`~Tool.execute` returns it."""

_EMPTY_ERROR: Final = "the tool reported an error without a message"
# The adapter's own deadline fires this long after the call's: the call's deadline (which
# also cancels the call on the server) must win, this one only catches a stuck actor.
_BACKSTOP: Final = 5.0
# Bound for closing one direct connection (its actor closes the server with the kill ladder).
_CLOSE_BOUND: Final = 30.0
_HASH_LENGTH: Final = 8


# ---------------------------------------------------------------------- the protocol


@runtime_checkable
class Tool(Protocol):
    """What an agent engine's tool registry holds: a named, described, callable tool.

    The adapters of this module implement it; an engine may hold other tools of its own
    beside them. ``isinstance(x, Tool)`` checks the attributes' presence only.
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by (provider-safe, unique in the registry)."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model (may be empty)."""
        ...

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments, as its server declared it."""
        ...

    async def execute(self, params: Mapping[str, Any] | None = None) -> str:
        """Run the tool with the model's arguments and return the result as text for the model."""
        ...


# ---------------------------------------------------------------------- content


def _get(item: Any, *keys: str) -> Any:
    """The first of ``keys`` present on a model object or in a mapping, else None."""
    for key in keys:
        value = item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)
        if value is not None:
            return value
    return None


def _flatten_one(item: Any) -> str:
    kind = _get(item, "type")
    if kind == "text":
        return str(_get(item, "text") or "")
    if kind == "image":
        return f"[Image: {_get(item, 'mime_type', 'mimeType') or 'unknown type'}]"
    if kind == "audio":
        return f"[Audio: {_get(item, 'mime_type', 'mimeType') or 'unknown type'}]"
    if kind == "resource":
        resource = _get(item, "resource")
        text = _get(resource, "text") if resource is not None else None
        if isinstance(text, str):
            return text
        uri = _get(resource, "uri") if resource is not None else None
        return f"[Resource: {uri or 'unknown uri'}]"
    if kind == "resource_link":
        return f"[Resource link: {_get(item, 'uri') or 'unknown uri'}]"
    return f"[Unsupported content: {kind or type(item).__name__}]"


def flatten_content(content: Iterable[mcp_types.ContentBlock | Mapping[str, Any]]) -> str:
    """Turn an MCP tool result's content into one string a model can read.

    Models take text; binary content is named, not inlined (a base64 PNG would only
    burn the context window). Each item becomes:

    ==================================  ===============================================
    text                                its text, unchanged
    image                               ``[Image: <mime type>]``
    audio                               ``[Audio: <mime type>]``
    embedded text resource              its text
    embedded blob resource              ``[Resource: <uri>]``
    resource link                       ``[Resource link: <uri>]``
    anything else                       ``[Unsupported content: <type>]``
    ==================================  ===============================================

    The items are joined with ``"\\n"``; no content gives ``""``.

    Args:
        content: The result's ``content``: SDK content models, or their JSON form as
            mappings (``{"type": "image", "mimeType": ...}``).

    Returns:
        The flattened text.
    """
    return "\n".join(_flatten_one(item) for item in content)


def flatten_result(result: mcp_types.CallToolResult) -> str:
    """The text :meth:`Tool.execute` returns for a tool result.

    :func:`flatten_content` of the content; if the server sent no content but structured
    content, that as JSON. A tool-level error (``is_error``) is marked by starting with
    exactly :data:`ERROR_PREFIX` (``"Error: "``), followed by the text, or by a note
    that the tool gave no message.

    Args:
        result: The MCP result of ``tools/call``.

    Returns:
        The text for the model.
    """
    text = flatten_content(result.content)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if result.is_error:
        return ERROR_PREFIX + (text or _EMPTY_ERROR)
    return text


# ---------------------------------------------------------------------- the call


def _check_timeout(_instance: object, _attribute: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {value!r}")


def _check_params(params: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(
            f"tool {name!r}: params must be a mapping of argument names to values, got {type(params).__name__}"
        )
    return dict(params)


def _in_context(exc: McpActorsError, name: str) -> McpActorsError:
    """The same error, its message prefixed with the adapter's tool name.

    Built without calling ``__init__`` (whose signature differs per class, and which for
    connection errors would append the stderr line a second time); every attribute
    (``server``, ``tool``, ``stderr_tail``, ``timeout``, ...) is carried over.
    """
    cls = type(exc)
    renamed = cls.__new__(cls, f"tool {name!r}: {exc}")
    renamed.__dict__.update(exc.__dict__)
    return renamed


@attrs.frozen(kw_only=True)
class _Target:
    """How an adapter reaches its tool: the pieces the shared call logic needs."""

    name: str
    tool: str
    server: str
    timeout: float
    status: Callable[[], ConnectionStatus]
    connect: Callable[[], Awaitable[None]]
    call: Callable[[dict[str, Any], float, str], Awaitable[mcp_types.CallToolResult]]


async def _call(target: _Target, params: Mapping[str, Any] | None) -> mcp_types.CallToolResult:
    """Call the tool, bounded by ``target.timeout`` from start to end.

    The call's own timeout is what is left of the budget once the server is connected,
    so the connection actor's deadline (which also sends ``notifications/cancelled``)
    falls at the adapter's deadline. A backstop a little later catches an actor that
    does not answer at all.
    """
    arguments = _check_params(params, target.name)
    deadline = trio.current_time() + target.timeout
    call_id = uuid.uuid4().hex[:16]
    connected = True
    try:
        with trio.move_on_at(deadline + _BACKSTOP):
            if target.status().state is not ConnectionState.CONNECTED:
                connected = False
                with trio.move_on_at(deadline):
                    await target.connect()
                connected = trio.current_time() < deadline
            remaining = deadline - trio.current_time()
            if remaining > 0:
                return await target.call(arguments, remaining, call_id)
    except ToolCallTimeout:
        pass
    except McpActorsError as exc:
        raise _in_context(exc, target.name) from exc.__cause__
    if connected:
        what = "did not finish within {}s; the server was asked to cancel the call"
    else:
        what = "could not be called within {}s: its server was still connecting; the call was not sent"
    raise ToolCallTimeout(
        f"tool {target.name!r} (tool {target.tool!r} of server {target.server!r}) {what.format(f'{target.timeout:g}')};"
        " raise the adapter's timeout if the tool is legitimately slow",
        server=target.server,
        tool=target.tool,
        timeout=target.timeout,
    ) from None


# ---------------------------------------------------------------------- registry adapters


@attrs.frozen(eq=False)
class McpToolAdapter:
    """One tool of a registry server as a :class:`Tool`.

    Calls go through the :class:`~mcp_actors.registry.McpService`, so they share its
    connection, its approval policy and its ``tool:called`` events. The adapter holds no
    connection of its own and is cheap to create.

    Args:
        mcp_tool: The tool, from :meth:`McpService.list_server_tools` and friends.
        service: The service to call through.
        timeout: Bound for one :meth:`execute`, connecting included (seconds, > 0).

    Raises:
        ValueError: ``timeout`` is not a finite positive number.
    """

    mcp_tool: MCPTool
    service: McpService
    timeout: float = attrs.field(default=DEFAULT_TOOL_TIMEOUT, kw_only=True, validator=_check_timeout)

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

    def _target(self) -> _Target:
        tool, service, server_id = self.mcp_tool, self.service, self.mcp_tool.server_id

        def call(arguments: dict[str, Any], timeout: float, call_id: str) -> Awaitable[mcp_types.CallToolResult]:
            return service.call_tool(server_id, tool.name, arguments, call_id, timeout=timeout)

        return _Target(
            name=self.name,
            tool=tool.name,
            server=tool.server_name,
            timeout=self.timeout,
            status=lambda: service.status(server_id),
            connect=lambda: service.connect(server_id),
            call=call,
        )

    async def call(self, params: Mapping[str, Any] | None = None) -> mcp_types.CallToolResult:
        """Call the tool and return the raw MCP result (for hosts that want images, say).

        Bounded and raising exactly like :meth:`execute`; a tool-level error is the
        result's ``is_error``.
        """
        return await _call(self._target(), params)

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


T_co = TypeVar("T_co", bound=Tool, covariant=True)


@attrs.frozen(kw_only=True)
class LoadedTools(Sequence[T_co]):
    """The adapters a loader built, plus the servers that failed and why.

    A sequence of the adapters (iterate it, index it, ``len`` it — like the list the
    reference design returns); :attr:`failures` says which servers were skipped.

    Attributes:
        tools: The adapters, in server order, then the server's tool order.
        failures: Server (as the caller named it) → the typed error that kept it out.
    """

    tools: tuple[T_co, ...] = ()
    failures: Mapping[str, McpActorsError] = attrs.field(factory=dict)

    @overload
    def __getitem__(self, index: int) -> T_co: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T_co]: ...

    def __getitem__(self, index: int | slice) -> T_co | Sequence[T_co]:
        return self.tools[index]

    def __len__(self) -> int:
        return len(self.tools)

    def __iter__(self) -> Iterator[T_co]:
        return iter(self.tools)


async def load_mcp_tools(
    service: McpService,
    server_ids: Iterable[str] | None = None,
    *,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> LoadedTools[McpToolAdapter]:
    """Adapters for every tool of every listed server, asked concurrently.

    A server that cannot be listed (unknown, disabled, failing to start, ...) is logged
    and reported in :attr:`LoadedTools.failures`; it never stops the others. Tools in the
    server's ``disabledTools`` are left out (the registry filters them).

    Args:
        service: The registry facade.
        server_ids: Servers by id or name, in the order the tools should come in;
            repeats are ignored. ``None`` means every active server.
        timeout: Each adapter's :attr:`~McpToolAdapter.timeout`.

    Returns:
        The adapters and the failures.

    Raises:
        ValueError: ``timeout`` is not a finite positive number.
    """
    _check_timeout(None, None, timeout)
    if server_ids is None:
        servers = [record.id for record in await service.list() if record.is_active]
    else:
        if isinstance(server_ids, str):
            raise TypeError("server_ids must be a collection of server ids or names, not one string")
        servers = list(dict.fromkeys(server_ids))
    listed: dict[str, list[MCPTool]] = {}
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


# ---------------------------------------------------------------------- direct connections


@attrs.define(eq=False)
class DirectMcpConnection:
    """A session's own connection to one built-in server (not the registry's).

    A connection actor under its own per-server supervisor (restart with backoff, circuit
    breaker), hosted in the nursery given to :func:`load_direct_mcp_tools`. It satisfies
    :class:`~mcp_actors.process_tracker.TrackedConnection`: close it with
    ``await ProcessTracker.get_instance().close_connection(connection)`` (a graceful
    close bounded by 3 s, then the process tree is killed) or with
    :func:`close_direct_mcp_connections`.

    Attributes:
        record: The server's record.
        handle: The connection actor's handle (status, stderr tail, raw calls).
    """

    record: McpServerRecord
    handle: ConnectionHandle
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    _identity: ProcessIdentity | None = attrs.field(default=None, init=False)

    @property
    def name(self) -> str:
        """The server's name."""
        return self.record.name

    @property
    def process(self) -> ProcessIdentity | None:
        """The stdio server process while it runs (PID with its create_time); else ``None``.

        Follows restarts: after the server is restarted this is the new process.
        """
        pid = self.handle.status().pid
        if pid is None:
            return None
        identity = self._identity
        if identity is None or identity.pid != pid:
            try:
                identity = ProcessIdentity.of(pid, label=self.record.name)
            except (ProcessLookupError, PermissionError):
                return None
            self._identity = identity
        return identity

    @property
    def closed(self) -> bool:
        """Whether the connection's actor has stopped (after :meth:`aclose`)."""
        return self._stopped.is_set()

    def status(self) -> ConnectionStatus:
        """The connection's status snapshot (state, pid, restarts, stderr tail, ...)."""
        return self.handle.status()

    async def aclose(self) -> None:
        """Close the server (stdin, then the kill ladder) and wait for the actor to stop.

        Idempotent. Bounded: gives up waiting after 30 s (the process tracker bounds it
        further and kills the tree).
        """
        await self.handle.aclose()
        with trio.move_on_after(_CLOSE_BOUND):
            await self._stopped.wait()

    async def _host(
        self, start: Callable[..., Awaitable[None]], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await start(task_status=task_status)
        finally:
            self._stopped.set()


@attrs.frozen(eq=False)
class DirectMcpToolAdapter:
    """One tool of a directly connected built-in server as a :class:`Tool`.

    Calls go straight to the session's :class:`DirectMcpConnection` (no registry, no
    approval step: built-in servers are trusted by the host that chose them).

    Args:
        name: The tool's name for the model: ``<server>__<tool>``, provider-safe, unique
            in its set (see :func:`load_direct_mcp_tools`).
        tool: The tool as the server listed it.
        connection: The connection to call through.
        timeout: Bound for one :meth:`execute`, connecting included (seconds, > 0).

    Raises:
        ValueError: ``timeout`` is not a finite positive number.
    """

    name: str
    tool: mcp_types.Tool
    connection: DirectMcpConnection
    timeout: float = attrs.field(default=DEFAULT_TOOL_TIMEOUT, kw_only=True, validator=_check_timeout)

    @property
    def description(self) -> str:
        """The server's description of the tool."""
        return self.tool.description or ""

    @property
    def parameters(self) -> dict[str, Any]:
        """The tool's input schema, as the server sent it (a copy; change it freely)."""
        return copy.deepcopy(dict(self.tool.input_schema or {}))

    @property
    def mcp_tool(self) -> MCPTool:
        """The tool as an :class:`~mcp_actors.tools.MCPTool` whose ``id`` is :attr:`name`.

        Feed these to the :mod:`mcp_actors.formats` converters to get provider tool
        definitions that match the adapters' names.
        """
        record = self.connection.record
        return MCPTool(
            id=self.name,
            name=self.tool.name,
            description=self.description,
            input_schema=self.parameters,
            server_id=record.id,
            server_name=record.name,
        )

    def _target(self) -> _Target:
        handle, tool_name = self.connection.handle, self.tool.name

        def call(arguments: dict[str, Any], timeout: float, call_id: str) -> Awaitable[mcp_types.CallToolResult]:
            return handle.call_tool(tool_name, arguments, timeout=timeout, call_id=call_id)

        return _Target(
            name=self.name,
            tool=tool_name,
            server=self.connection.name,
            timeout=self.timeout,
            status=handle.status,
            connect=handle.connect,
            call=call,
        )

    async def call(self, params: Mapping[str, Any] | None = None) -> mcp_types.CallToolResult:
        """Call the tool and return the raw MCP result; bounded and raising like :meth:`execute`."""
        return await _call(self._target(), params)

    async def execute(self, params: Mapping[str, Any] | None = None) -> str:
        """Call the tool with the model's arguments; return the result as text.

        Exactly the contract of :meth:`McpToolAdapter.execute`.
        """
        return flatten_result(await self.call(params))


def _suffixed(base: str, *parts: str) -> str:
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:_HASH_LENGTH]
    return base[: MAX_TOOL_NAME_LENGTH - _HASH_LENGTH - 1] + "_" + digest


def _unique_names(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """``server__tool`` names, made unique without depending on order where possible.

    Every name that two or more tools share after cleaning (``a.b``/``echo`` and
    ``a-b``/``echo`` both give ``a_b__echo``) is given a hash of the original server and
    tool names — all of them, not just the later ones, so adding a server never renames
    another server's tool that did not collide before. Only identical pairs (one server
    listed twice under the same name) fall back to a counter, in order.
    """
    bases = [direct_tool_name(server, tool) for server, tool in pairs]
    counts = Counter(bases)
    taken = {base for base in bases if counts[base] == 1}
    names: list[str] = []
    for (server, tool), base in zip(pairs, bases, strict=True):
        if counts[base] == 1:
            names.append(base)
            continue
        name, n = _suffixed(base, server, tool), 0
        while name in taken:
            n += 1
            name = _suffixed(base, server, tool, str(n))
        taken.add(name)
        names.append(name)
    return names


async def close_direct_mcp_connections(connections: Iterable[DirectMcpConnection], *, grace: float = 3.0) -> None:
    """Close direct connections concurrently through the process tracker.

    Each gets :meth:`ProcessTracker.close_connection`: a graceful close bounded by
    ``grace``, then its process tree is killed, then it is untracked. Shielded from
    cancellation, so a cancelled session still leaves no server behind.

    Args:
        connections: The connections (closed ones are fine).
        grace: Seconds each graceful close may take.
    """
    tracker = ProcessTracker.get_instance()
    with trio.CancelScope(shield=True):
        async with trio.open_nursery() as nursery:
            for connection in connections:
                nursery.start_soon(functools.partial(tracker.close_connection, connection, grace=grace))


async def load_direct_mcp_tools(
    servers: Iterable[McpServerRecord],
    *,
    nursery: trio.Nursery,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    bus: events.EventBus | None = None,
) -> tuple[LoadedTools[DirectMcpToolAdapter], list[DirectMcpConnection]]:
    """Connect to built-in servers directly and wrap their tools.

    For each server: a connection actor is started in ``nursery`` and tracked by the
    process tracker, then the servers are connected and listed concurrently. A server
    that fails (or is disabled) is closed at once, logged and reported in
    ``tools.failures`` (keyed by server name); the others load. If this function itself
    fails or is cancelled, every connection it started is closed before it returns.

    The caller owns the connections: close them at the end of the session with
    :func:`close_direct_mcp_connections` or ``ProcessTracker.close_connection`` — or
    use :func:`open_direct_mcp_tools`, which does it for you. Cancelling ``nursery``
    also stops every server (the kill ladder runs shielded).

    Tool names are ``<server>__<tool>`` (provider-safe; see
    :func:`~mcp_actors.naming.direct_tool_name`), unique within the set: names that
    collide after cleaning get a deterministic hash suffix.

    Args:
        servers: The servers' records (stdio, SSE or streamable HTTP).
        nursery: Hosts the connection actors; must outlive the connections.
        timeout: Each adapter's :attr:`~DirectMcpToolAdapter.timeout`.
        bus: Where the connections emit their ``connection:state`` events (default: a
            private bus nobody listens to).

    Returns:
        ``(tools, connections)``: the adapters (with ``failures``), and the open
        connections of the servers that loaded, in the given order.

    Raises:
        TypeError: A server is not an :class:`~mcp_actors.records.McpServerRecord`.
        ValueError: The same record id appears twice, or ``timeout`` is invalid.
    """
    _check_timeout(None, None, timeout)
    records = list(servers)
    seen: set[str] = set()
    for record in records:
        if not isinstance(record, McpServerRecord):
            raise TypeError(f"servers must be McpServerRecord values, got {type(record).__name__}")
        if record.id in seen:
            raise ValueError(f"server {record.name!r} (id {record.id!r}) is listed twice")
        seen.add(record.id)
    bus = bus if bus is not None else events.EventBus()
    tracker = ProcessTracker.get_instance()
    failures: dict[str, McpActorsError] = {}
    started: list[DirectMcpConnection] = []
    listed: dict[str, tuple[mcp_types.Tool, ...]] = {}

    async def load(connection: DirectMcpConnection) -> None:
        try:
            await connection.handle.connect()
            tools = await connection.handle.list_tools()
        except McpActorsError as exc:
            logger.warning("load_direct_mcp_tools: skipping server %s: %s", connection.name, exc)
            failures[connection.name] = exc
            await tracker.close_connection(connection)
            return
        disabled = set(connection.record.disabled_tools)
        listed[connection.record.id] = tuple(tool for tool in tools if tool.name not in disabled)

    try:
        for record in records:
            if not record.is_active:
                failures[record.name] = ServerInactive(
                    f"server {record.name!r} is disabled (isActive: false); enable it to load its tools",
                    server=record.name,
                )
                continue
            handle, start = open_connection(settings_for(record), bus)
            connection = DirectMcpConnection(record, handle)
            tracker.track(connection)
            started.append(connection)
            await nursery.start(connection._host, start)
        async with trio.open_nursery() as loaders:
            for connection in started:
                loaders.start_soon(load, connection)
    except BaseException:
        await close_direct_mcp_connections(started)
        raise
    connections = [c for c in started if c.record.id in listed]
    pairs = [(c.name, tool.name) for c in connections for tool in listed[c.record.id]]
    names = iter(_unique_names(pairs))
    adapters = tuple(
        DirectMcpToolAdapter(next(names), tool, connection, timeout=timeout)
        for connection in connections
        for tool in listed[connection.record.id]
    )
    ordered = {r.name: failures[r.name] for r in records if r.name in failures}
    return LoadedTools(tools=adapters, failures=ordered), connections


@contextlib.asynccontextmanager
async def open_direct_mcp_tools(
    servers: Iterable[McpServerRecord],
    *,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    bus: events.EventBus | None = None,
    grace: float = 3.0,
) -> AsyncIterator[tuple[LoadedTools[DirectMcpToolAdapter], list[DirectMcpConnection]]]:
    """A session's direct tools for the length of a block; every server is closed at exit.

    :func:`load_direct_mcp_tools` with a nursery of its own; on exit (normal, error or
    cancellation) :func:`close_direct_mcp_connections` closes every connection
    concurrently, each bounded by ``grace`` before its tree is killed.

    Args:
        servers: The servers' records.
        timeout: Each adapter's timeout, seconds.
        bus: Where the connections emit their events (default: a private bus).
        grace: Seconds each graceful close may take at exit.

    Yields:
        ``(tools, connections)`` as :func:`load_direct_mcp_tools` returns them.
    """
    async with trio.open_nursery() as nursery:
        tools, connections = await load_direct_mcp_tools(servers, nursery=nursery, timeout=timeout, bus=bus)
        try:
            yield tools, connections
        finally:
            await close_direct_mcp_connections(connections, grace=grace)
