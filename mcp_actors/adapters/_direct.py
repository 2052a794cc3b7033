"""Direct adapters: a session's own connections to built-in servers, and their tools.

Private: the public names are re-exported by :mod:`mcp_actors.adapters`. A direct tool
is named ``<server>__<tool>`` by the naming rules of :mod:`mcp_actors.naming` (see
:func:`_unique_names`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import mcp.types as mcp_types
import trio

from mcp_actors import events
from mcp_actors._config.record import McpServerRecord
from mcp_actors._connection.call_ids import new_call_id
from mcp_actors._connection.callbacks import (
    DEFAULT_CALLBACK_TIMEOUT,
    ElicitationHandler,
    HostCallbacks,
    RootsSource,
    SamplingHandler,
)
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.status import STOP_BOUND, ConnectionState, ConnectionStatus
from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker
from mcp_actors._registry.actor import enabled_tools, server_inactive, settings_for
from mcp_actors.adapters._base import (
    DEFAULT_TOOL_TIMEOUT,
    LoadedTools,
    _call,
    _check_timeout,
    _Target,
    flatten_result,
)
from mcp_actors.errors import McpActorsError
from mcp_actors.naming import claim_name, direct_tool_name
from mcp_actors.tools import McpTool
from supervisors import raise_single

__all__ = [
    "DirectMcpConnection",
    "DirectMcpToolAdapter",
    "close_direct_mcp_connections",
    "load_direct_mcp_tools",
    "open_direct_mcp_tools",
]

logger = logging.getLogger("mcp_actors.adapters")

# Bound for closing one direct connection (its actor closes the server with the kill ladder).


@attrs.define(eq=False)
class DirectMcpConnection:
    """A session's own connection to one built-in server (not the registry's).

    A connection actor under its own per-server supervisor (restart with backoff, circuit
    breaker), hosted in the nursery given to :func:`load_direct_mcp_tools`. It satisfies
    :class:`~mcp_actors._process.tracker.TrackedConnection`: close it with
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
        with trio.move_on_after(2 * STOP_BOUND):
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
    def mcp_tool(self) -> McpTool:
        """The tool as an :class:`~mcp_actors.tools.McpTool` whose ``id`` is :attr:`name`.

        Feed these to the :mod:`mcp_actors.formats` converters to get provider tool
        definitions that match the adapters' names.
        """
        record = self.connection.record
        return McpTool(
            id=self.name,
            name=self.tool.name,
            description=self.description,
            input_schema=self.parameters,
            server_id=record.id,
            server_name=record.name,
        )

    def _target(self) -> _Target:
        handle, tool_name = self.connection.handle, self.tool.name

        def call(arguments: dict[str, Any], timeout: float, call_id: str | None) -> Awaitable[mcp_types.CallToolResult]:
            return handle.call_tool(tool_name, arguments, timeout=timeout, call_id=call_id or new_call_id())

        return _Target(
            name=self.name,
            tool=tool_name,
            server=self.connection.name,
            timeout=self.timeout,
            straight=functools.partial(handle.call_goes_straight, tool_name),
            connected=lambda: handle.state is ConnectionState.CONNECTED,
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


# ---------------------------------------------------------------------- names


def _unique_names(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """``<server>__<tool>`` names for ``(server name, tool name)`` pairs, unique in the set.

    Each base name is :func:`~mcp_actors.naming.direct_tool_name` (cleaned,
    provider-safe, cut to 64 characters with a hash); collisions are resolved as the
    registry resolves tool ids: in order, the first tool keeps the plain name and a
    later one gets a deterministic hash suffix of its server and tool names. So a tool
    whose name collides with nobody's keeps its plain name, and adding a server at the
    end never renames a tool of the servers before it.
    """
    taken: set[str] = set()
    names = []
    for server, tool in pairs:
        name = claim_name(direct_tool_name(server, tool), taken, server, tool)
        taken.add(name)
        names.append(name)
    return names


async def close_direct_mcp_connections(connections: Iterable[DirectMcpConnection], *, close_grace: float = 3.0) -> None:
    """Close direct connections concurrently through the process tracker.

    Each gets :meth:`ProcessTracker.close_connection`: a graceful close bounded by
    ``close_grace``, then its process tree is killed, then it is untracked. Shielded from
    cancellation, so a cancelled session still leaves no server behind.

    Args:
        connections: The connections (closed ones are fine).
        close_grace: Seconds each graceful close may take.
    """
    tracker = ProcessTracker.get_instance()
    with trio.CancelScope(shield=True):
        async with trio.open_nursery() as nursery:
            for connection in connections:
                nursery.start_soon(functools.partial(tracker.close_connection, connection, close_grace=close_grace))


async def load_direct_mcp_tools(
    servers: Iterable[McpServerRecord],
    *,
    nursery: trio.Nursery,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    bus: events.EventBus | None = None,
    sampling_handler: SamplingHandler | None = None,
    elicitation_handler: ElicitationHandler | None = None,
    roots: RootsSource | None = None,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
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
    :func:`~mcp_actors.naming.direct_tool_name`), unique within the set by the
    registry's collision policy: when names collide after cleaning, the first server
    in ``servers`` keeps the plain name and a later one gets a deterministic hash suffix.

    Args:
        servers: The servers' records (stdio, SSE or streamable HTTP).
        nursery: Hosts the connection actors; must outlive the connections.
        timeout: Each adapter's :attr:`~DirectMcpToolAdapter.timeout`.
        bus: Where the connections emit their ``connection:state`` events (default: a
            private bus nobody listens to).
        sampling_handler: ``async (server_id, params) -> CreateMessageResult``: lets the
            servers sample the host's model. As in :func:`~mcp_actors.runtime.open_runtime`:
            declared only when given, and only to servers whose record allows it
            (``config.allowSampling``); see docs/protocol/callbacks.md.
        elicitation_handler: ``async (server_id, params) -> ElicitResult``: lets the servers
            ask the user (form or URL mode); defaults filled and answers validated as for
            the runtime (``config.allowElicitation``).
        roots: The host's roots: ``file://`` URIs / ``Root`` values, or
            ``async (server_id) -> list`` (``config.allowRoots``).
        callback_timeout: Seconds any one handler may take.

    Returns:
        ``(tools, connections)``: the adapters (with ``failures``), and the open
        connections of the servers that loaded, in the given order.

    Raises:
        TypeError: A server is not an :class:`~mcp_actors._config.record.McpServerRecord`.
        ValueError: The same record id appears twice, ``timeout`` or ``callback_timeout``
            is invalid, or a root is not a ``file://`` URI.
    """
    _check_timeout(None, None, timeout)
    # The runtime's rules, the runtime's code: one HostCallbacks shared by these connections.
    host = HostCallbacks(
        sampling=sampling_handler, elicitation=elicitation_handler, roots=roots, timeout=callback_timeout
    )
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
        listed[connection.record.id] = tuple(enabled_tools(connection.record, tools))

    try:
        for record in records:
            if not record.is_active:
                failures[record.name] = server_inactive(record)
                continue
            handle, start = open_connection(settings_for(record, host=host), bus)
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
    close_grace: float = 3.0,
    sampling_handler: SamplingHandler | None = None,
    elicitation_handler: ElicitationHandler | None = None,
    roots: RootsSource | None = None,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
) -> AsyncIterator[tuple[LoadedTools[DirectMcpToolAdapter], list[DirectMcpConnection]]]:
    """A session's direct tools for the length of a block; every server is closed at exit.

    :func:`load_direct_mcp_tools` with a nursery of its own; on exit (normal, error or
    cancellation) :func:`close_direct_mcp_connections` closes every connection
    concurrently, each bounded by ``close_grace`` before its tree is killed.

    Args:
        servers: The servers' records.
        timeout: Each adapter's timeout, seconds.
        bus: Where the connections emit their events (default: a private bus).
        close_grace: Seconds each graceful close may take at exit.
        sampling_handler: As for :func:`load_direct_mcp_tools`.
        elicitation_handler: As for :func:`load_direct_mcp_tools`.
        roots: As for :func:`load_direct_mcp_tools`.
        callback_timeout: As for :func:`load_direct_mcp_tools`.

    Yields:
        ``(tools, connections)`` as :func:`load_direct_mcp_tools` returns them.
    """
    try:
        async with trio.open_nursery() as nursery:
            tools, connections = await load_direct_mcp_tools(
                servers,
                nursery=nursery,
                timeout=timeout,
                bus=bus,
                sampling_handler=sampling_handler,
                elicitation_handler=elicitation_handler,
                roots=roots,
                callback_timeout=callback_timeout,
            )
            try:
                yield tools, connections
            finally:
                await close_direct_mcp_connections(connections, close_grace=close_grace)
    except BaseExceptionGroup as group:
        raise_single(group)  # the nursery is ours: the block's own error comes out as itself
