"""The registry actor and its facade, :class:`McpService`.

The registry owns the server records (persisted by :class:`~mcp_actors.store.ConfigStore`),
one connection slot per active server (children of the connections supervisor), the tool
cache and the tool-id map. It is an actor: mutations (add, update, remove) and cache
fills are messages handled by its own tasks, one at a time for mutations, so two
concurrent ``add`` calls can never both take the same name, and the store is written
in order.

Reads that sit on the hot path (``call_tool``, status) do not queue behind the actor: the
actor publishes an immutable :class:`_Snapshot` after every change, and the facade reads
the current one. A tool call therefore costs one mailbox round trip (to the server's
connection actor), not two.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import functools
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs
import mcp.types as mcp_types
import trio

from mcp_actors import events
from mcp_actors.config_import import parse_server_configs
from mcp_actors.connection import ConnectionHandle, ConnectionSettings, ConnectionStatus, open_connection
from mcp_actors.errors import (
    ActorStopped,
    ConfigError,
    DuplicateServerName,
    InvalidServerConfig,
    McpActorsError,
    ServerConnectionLost,
    ServerInactive,
    ServerNotFound,
    ToolCallDenied,
    ToolDisabled,
    ToolNotFound,
)
from mcp_actors.naming import ToolIdMap, clean_name
from mcp_actors.records import (
    McpServerRecord,
    ServerType,
    new_server_id,
    record_from_json_dict,
    record_to_json_dict,
)
from mcp_actors.store import ConfigStore
from mcp_actors.tools import MCPTool
from mcp_actors.transports import HttpParams, StdioParams
from supervisors import ChildSpec, Mailbox, MailboxClosed, NoReply, Reply, Restart, Shutdown, Supervisor, open_mailbox

__all__ = [
    "AddJsonEntryResult",
    "ApprovalRequest",
    "Approver",
    "Discovery",
    "McpService",
    "ServerTestResult",
    "ToolListing",
    "run_registry",
    "settings_for",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_TOOL_CACHE_TTL: Final = 300.0
_REGISTRY_MAILBOX: Final = 256
_MUTABLE_FIELDS: Final = frozenset(
    {
        "name",
        "type",
        "scope",
        "config",
        "is_active",
        "is_trusted",
        "disabled_tools",
        "disabled_auto_approve_tools",
        "install_source",
        "project_path",
    }
)
_RECONNECT_FIELDS: Final = frozenset({"name", "type", "config"})


# ---------------------------------------------------------------------- public values


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """What an approver is asked about: one tool call that is not auto-approved."""

    server_id: str
    server_name: str
    tool_name: str
    arguments: Mapping[str, Any]
    call_id: str


Approver = Callable[[ApprovalRequest], Awaitable[bool] | bool]
"""A host's callback deciding calls that are not auto-approved (True allows)."""


@attrs.frozen(kw_only=True)
class AddJsonEntryResult:
    """The outcome of one entry of :meth:`McpService.add_json`.

    Attributes:
        name: The entry's server name.
        record: The saved record, or ``None`` when the entry was rejected.
        error: Why it was rejected (names the field and what to do).
        unknown_keys: Keys of the entry we do not understand (reported, not silently dropped).
        notes: Anything else worth telling (a guessed type, a converted timeout, ...).
    """

    name: str
    record: McpServerRecord | None = None
    error: McpActorsError | None = None
    unknown_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the entry was saved."""
        return self.record is not None


@attrs.frozen(kw_only=True)
class ToolListing:
    """Tools of several servers, plus which servers failed and why."""

    tools: tuple[MCPTool, ...] = ()
    failures: Mapping[str, McpActorsError] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ServerTestResult:
    """The outcome of :meth:`McpService.test`.

    Attributes:
        ok: Connected and listed tools.
        connect_seconds: Time to connect (0 when it was already connected).
        list_seconds: Time for ``tools/list``.
        tool_names: The tools the server offers (before ``disabledTools`` filtering).
        server_info: ``(name, version)`` from ``initialize``.
        error: What failed, when not ok.
    """

    ok: bool
    connect_seconds: float = 0.0
    list_seconds: float = 0.0
    tool_names: tuple[str, ...] = ()
    server_info: tuple[str, str] | None = None
    error: McpActorsError | None = None


@attrs.frozen(kw_only=True)
class Discovery:
    """Tools, prompts and resources of one server; each part may fail on its own."""

    tools: tuple[MCPTool, ...] = ()
    prompts: tuple[mcp_types.Prompt, ...] = ()
    resources: tuple[mcp_types.Resource, ...] = ()
    errors: Mapping[str, McpActorsError] = attrs.field(factory=dict)


# ---------------------------------------------------------------------- actor state


@attrs.frozen
class _Snapshot:
    """What the facade reads without asking: records and handles by id, ids by name."""

    records: Mapping[str, McpServerRecord] = attrs.field(factory=dict)
    handles: Mapping[str, ConnectionHandle] = attrs.field(factory=dict)
    by_name: Mapping[str, str] = attrs.field(factory=dict)


@attrs.define(eq=False)
class _CacheEntry:
    tools: tuple[mcp_types.Tool, ...]
    fetched_at: float
    epoch: int


@attrs.define(eq=False)
class _Fetch:
    done: trio.Event = attrs.field(factory=trio.Event)
    tools: tuple[mcp_types.Tool, ...] = ()
    error: McpActorsError | None = None


@attrs.frozen(kw_only=True)
class _Mutate:
    op: Callable[[], Awaitable[Any]]
    reply: Reply[Any]


@attrs.frozen(kw_only=True)
class _GetTools:
    server_id: str
    reply: Reply[tuple[mcp_types.Tool, ...]]


_RegistryMessage = _Mutate | _GetTools


def settings_for(record: McpServerRecord) -> ConnectionSettings:
    """The connection settings a record implies."""
    config = record.config
    transport: StdioParams | HttpParams
    if record.type is ServerType.STDIO:
        assert config.command is not None
        transport = StdioParams(command=config.command, args=tuple(config.args), env=dict(config.env), cwd=config.cwd)
    else:
        assert config.url is not None
        transport = HttpParams(
            url=config.url,
            kind="sse" if record.type is ServerType.SSE else "http",
            headers=dict(config.headers),
            connect_timeout=config.connect_timeout,
        )
    return ConnectionSettings(
        server_id=record.id,
        server_name=record.name,
        transport=transport,
        connect_timeout=config.connect_timeout,
        call_timeout=config.call_timeout,
        ping_interval=config.ping_interval,
        # A ping is answered in milliseconds by any live server; a short interval means
        # the host wants death noticed quickly, so the timeout follows it (at most 10 s).
        ping_timeout=min(10.0, max(config.ping_interval, 0.5)) if config.ping_interval > 0 else 10.0,
    )


class _Registry:
    """The actor's state; touched only by the actor's own tasks."""

    def __init__(
        self, store: ConfigStore, connections: Supervisor, bus: events.EventBus, *, tool_cache_ttl: float
    ) -> None:
        self.store = store
        self.connections = connections
        self.bus = bus
        self.ttl = tool_cache_ttl
        self.snapshot = _Snapshot()
        self.ids = ToolIdMap()
        self.cache: dict[str, _CacheEntry] = {}
        # The MCPTool list last built for a server, keyed by the exact tools tuple and
        # record it was built from: a cached listing per LLM request costs a lookup.
        self.views: dict[str, tuple[tuple[mcp_types.Tool, ...], McpServerRecord, builtins.list[MCPTool]]] = {}
        self.fetches: dict[str, _Fetch] = {}
        self.nursery: trio.Nursery | None = None
        self.connect_on_add = True
        self.tool_list_requests = 0
        """How many ``tools/list`` requests the registry sent (for tests and statistics)."""

    # --------------------------------------------------------------- snapshot

    def publish(self, records: Iterable[McpServerRecord], handles: Mapping[str, ConnectionHandle]) -> None:
        recs = {r.id: r for r in records}
        self.snapshot = _Snapshot(records=recs, handles=dict(handles), by_name={r.name: r.id for r in recs.values()})

    # --------------------------------------------------------------- connections

    async def start_connection(self, record: McpServerRecord) -> ConnectionHandle:
        handle, start = open_connection(settings_for(record), self.bus)
        await self.connections.start_child(
            ChildSpec(id=record.id, start=start, restart=Restart.TRANSIENT, shutdown=Shutdown.after(30.0))
        )
        return handle

    async def stop_connection(self, server_id: str, handle: ConnectionHandle) -> None:
        """Close the mailbox (the actor closes its server) and forget the child."""
        await handle.aclose()
        with trio.move_on_after(30.0):
            await self.connections.terminate_child(server_id)
        try:
            self.connections.delete_child(server_id)
        except (KeyError, RuntimeError, LookupError):
            pass
        self.forget_tools(server_id)

    def forget_tools(self, server_id: str) -> None:
        self.cache.pop(server_id, None)
        self.views.pop(server_id, None)
        self.ids.forget_server(server_id)

    # --------------------------------------------------------------- tool cache

    def cached(self, server_id: str, handle: ConnectionHandle) -> tuple[mcp_types.Tool, ...] | None:
        entry = self.cache.get(server_id)
        if entry is None:
            return None
        if trio.current_time() - entry.fetched_at > self.ttl or entry.epoch != handle.status().tools_epoch:
            del self.cache[server_id]
            return None
        return entry.tools

    async def fetch(self, server_id: str, handle: ConnectionHandle, fetch: _Fetch) -> None:
        """One ``tools/list`` (retried once if the connection was lost), shared by every waiter."""
        try:
            for attempt in (1, 2):
                try:
                    await handle.connect()
                    epoch = handle.status().tools_epoch
                    self.tool_list_requests += 1
                    tools = await handle.list_tools()
                    break
                except ServerConnectionLost:
                    if attempt == 2:
                        raise
            self.cache[server_id] = _CacheEntry(tools=tools, fetched_at=trio.current_time(), epoch=epoch)
            fetch.tools = tools
        except McpActorsError as exc:
            fetch.error = exc
        finally:
            self.fetches.pop(server_id, None)
            fetch.done.set()

    async def get_tools(self, message: _GetTools) -> None:
        handle = self.snapshot.handles.get(message.server_id)
        if handle is None:
            message.reply.fail(
                ServerNotFound(f"no active server with id {message.server_id!r}", server=message.server_id)
            )
            return
        tools = self.cached(message.server_id, handle)
        if tools is not None:
            message.reply.send(tools)
            return
        fetch = self.fetches.get(message.server_id)
        if fetch is None:
            fetch = _Fetch()
            self.fetches[message.server_id] = fetch
            assert self.nursery is not None
            self.nursery.start_soon(self.fetch, message.server_id, handle, fetch)
        await fetch.done.wait()
        if fetch.error is not None:
            message.reply.fail(fetch.error)
        else:
            message.reply.send(fetch.tools)


async def run_registry(
    store: ConfigStore,
    connections: Supervisor,
    bus: events.EventBus,
    *,
    tool_cache_ttl: float = DEFAULT_TOOL_CACHE_TTL,
    connect_on_add: bool = True,
    initial_records: Sequence[McpServerRecord] | None = None,
    task_status: trio.TaskStatus[McpService] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the registry actor: load the records (or take ``initial_records``), start a slot per active server, serve.

    Calls ``task_status.started(service)`` with the :class:`McpService` facade once every
    active server has its (lazy) connection slot.
    """
    registry = _Registry(store, connections, bus, tool_cache_ttl=tool_cache_ttl)
    registry.connect_on_add = connect_on_add
    records = list(initial_records) if initial_records is not None else await trio.to_thread.run_sync(store.load)
    handles: dict[str, ConnectionHandle] = {}
    for record in records:
        if record.is_active:
            handles[record.id] = await registry.start_connection(record)
    registry.publish(records, handles)
    mailbox, inbox = open_mailbox(_REGISTRY_MAILBOX)
    service = McpService(registry, mailbox)
    async with trio.open_nursery() as nursery:
        registry.nursery = nursery
        task_status.started(service)
        async for message in inbox:
            match message:
                case _Mutate():
                    # Mutations run one at a time, in order: no two can interleave.
                    try:
                        message.reply.send(await message.op())
                    except McpActorsError as exc:
                        message.reply.fail(exc)
                case _GetTools():
                    nursery.start_soon(registry.get_tools, message)
                case _:
                    raise TypeError(f"unknown message for the registry: {message!r}")


def _new_call_id() -> str:
    return uuid.uuid4().hex[:16]


class McpService:
    """The facade hosts use: the operations of the reference design's McpService.

    Every method is a coroutine safe to cancel; every wait inside is bounded by the
    server's configured timeouts. Servers are named by id or by name.
    """

    def __init__(self, registry: _Registry, mailbox: Mailbox[_RegistryMessage]) -> None:
        self._registry = registry
        self._mailbox = mailbox
        self._approver: Approver | None = None

    # --------------------------------------------------------------- helpers

    async def _ask(self, build: Callable[[Reply[Any]], _RegistryMessage]) -> Any:
        try:
            return await self._mailbox.ask(build)
        except (MailboxClosed, NoReply):
            raise ActorStopped("the registry is not running (the runtime is closed)") from None

    async def _mutate(self, op: Callable[[], Awaitable[T]]) -> T:
        result: T = await self._ask(lambda r: _Mutate(op=op, reply=r))
        return result

    def _record(self, server: str) -> McpServerRecord:
        snap = self._registry.snapshot
        record = snap.records.get(server)
        if record is None and server in snap.by_name:
            record = snap.records[snap.by_name[server]]
        if record is None:
            known = ", ".join(sorted(snap.by_name)) or "none"
            raise ServerNotFound(
                f"no server named or with id {server!r} (configured: {known}); add it first or check the spelling",
                server=server,
            )
        return record

    def _handle(self, record: McpServerRecord) -> ConnectionHandle:
        handle = self._registry.snapshot.handles.get(record.id)
        if handle is None or not record.is_active:
            raise ServerInactive(
                f"server {record.name!r} is disabled; enable it (isActive: true) to use it", server=record.name
            )
        return handle

    def _tools_of(self, record: McpServerRecord, tools: Sequence[mcp_types.Tool]) -> list[MCPTool]:
        disabled = set(record.disabled_tools)
        ids = self._registry.ids
        return [
            MCPTool(
                id=ids.assign(record.id, record.name, tool.name),
                name=tool.name,
                description=tool.description or "",
                input_schema=dict(tool.input_schema or {}),
                server_id=record.id,
                server_name=record.name,
            )
            for tool in tools
            if tool.name not in disabled
        ]

    # --------------------------------------------------------------- records

    def list(self) -> list[McpServerRecord]:
        """Every configured server's record, in configuration order."""
        return list(self._registry.snapshot.records.values())

    def get(self, server: str) -> McpServerRecord:
        """One server's record, by id or name.

        Raises:
            ServerNotFound: No such server.
        """
        return self._record(server)

    def status(self, server: str) -> ConnectionStatus:
        """One server's connection status (disabled servers report ``disconnected``)."""
        record = self._record(server)
        handle = self._registry.snapshot.handles.get(record.id)
        if handle is None:
            return ConnectionStatus(server_id=record.id, server_name=record.name)
        return handle.status()

    @property
    def tool_list_requests(self) -> int:
        """How many ``tools/list`` requests were sent to servers so far (cache misses)."""
        return self._registry.tool_list_requests

    async def add(self, input: McpServerRecord | Mapping[str, Any]) -> McpServerRecord:
        """Add a server and save it; connect it in the background if it is active.

        Args:
            input: A record, or a JSON-style mapping with the config file's camelCase keys
                (``name``, ``type``, ``config``, ``isActive``, ...); ``id`` and the
                timestamps are generated when absent.

        Raises:
            DuplicateServerName: The name is taken, or collides with another after
                cleaning (tool ids would collide).
            InvalidServerConfig: A field is invalid (the error names it).
        """
        record = _to_record(input)
        return await self._mutate(lambda: self._add(record))

    async def _add(self, record: McpServerRecord, *, connect: bool = True) -> McpServerRecord:
        reg = self._registry

        def write(records: builtins.list[McpServerRecord]) -> McpServerRecord:
            _check_name_free(records, record.name, record.id)
            if any(r.id == record.id for r in records):
                raise DuplicateServerName(
                    f"a server with id {record.id!r} already exists", server=record.name, field="id"
                )
            records.append(record)
            return record

        await trio.to_thread.run_sync(reg.store.modify, write)
        handles = dict(reg.snapshot.handles)
        if record.is_active:
            handles[record.id] = handle = await reg.start_connection(record)
            if connect and reg.connect_on_add:
                reg.nursery.start_soon(_connect_quietly, handle)  # type: ignore[union-attr]
        reg.publish([*reg.snapshot.records.values(), record], handles)
        reg.bus.emit(events.SERVERS_CHANGED, action="added", serverId=record.id, serverName=record.name)
        return record

    async def add_json(self, text: str) -> builtins.list[AddJsonEntryResult]:
        """Add every server of a desktop-app / IDE ``mcpServers`` document (or VS Code ``servers``).

        Good entries are saved even when others fail; each entry gets its own result.

        Raises:
            ConfigError: The text is not JSON, or not any known shape (line/column given).
        """
        report = parse_server_configs(text)
        results: builtins.list[AddJsonEntryResult] = []
        for entry in report.entries:
            if entry.record is None:
                results.append(
                    AddJsonEntryResult(
                        name=entry.name, error=entry.error, unknown_keys=entry.unknown_keys, notes=entry.notes
                    )
                )
                continue
            record = entry.record
            try:
                saved = await self._mutate(functools.partial(self._add, record))
            except ConfigError as exc:
                results.append(
                    AddJsonEntryResult(name=entry.name, error=exc, unknown_keys=entry.unknown_keys, notes=entry.notes)
                )
            else:
                results.append(
                    AddJsonEntryResult(
                        name=entry.name, record=saved, unknown_keys=entry.unknown_keys, notes=entry.notes
                    )
                )
        return results

    async def update(self, server: str, **changes: Any) -> McpServerRecord:
        """Change fields of a record (snake_case field names) and save it.

        ``id`` is immutable; ``updated_at`` is set. A change of name, type or config
        reconnects the server; ``is_active`` starts or stops its connection.

        Raises:
            ConfigError: An unknown or immutable field, or an invalid value.
            ServerNotFound: No such server.
        """
        bad = sorted(set(changes) - _MUTABLE_FIELDS)
        if bad:
            raise ConfigError(
                f"cannot update field(s) {', '.join(bad)}; updatable: {', '.join(sorted(_MUTABLE_FIELDS))}",
                server=server,
                field=bad[0],
            )
        server_id = self._record(server).id
        return await self._mutate(lambda: self._update(server_id, changes))

    async def _update(self, server_id: str, changes: Mapping[str, Any]) -> McpServerRecord:
        reg = self._registry

        def write(records: builtins.list[McpServerRecord]) -> tuple[McpServerRecord, McpServerRecord]:
            for i, current in enumerate(records):  # noqa: B007 - i is used after the loop
                if current.id == server_id:
                    break
            else:
                raise ServerNotFound(f"server {server_id!r} was removed meanwhile", server=server_id)
            fields = dict(changes)
            if "config" in fields and isinstance(fields["config"], Mapping):
                fields["config"] = _config_from_mapping(current, fields["config"])
            try:
                updated = current.updated(**fields)
            except (TypeError, ValueError) as exc:
                if isinstance(exc, McpActorsError):
                    raise
                raise InvalidServerConfig(
                    f"invalid update of server {current.name!r}: {exc}", server=current.name
                ) from exc
            if updated.name != current.name:
                _check_name_free(records, updated.name, updated.id)
            records[i] = updated
            return current, updated

        before, after = await trio.to_thread.run_sync(reg.store.modify, write)
        handles = dict(reg.snapshot.handles)
        reconnect = any(getattr(before, f) != getattr(after, f) for f in _RECONNECT_FIELDS)
        old = handles.pop(server_id, None)
        if old is not None and (reconnect or not after.is_active):
            await reg.stop_connection(server_id, old)
        elif old is not None:
            handles[server_id] = old
        if after.is_active and server_id not in handles:
            handles[server_id] = await reg.start_connection(after)
        records = [after if r.id == server_id else r for r in reg.snapshot.records.values()]
        reg.publish(records, handles)
        reg.bus.emit(events.SERVERS_CHANGED, action="updated", serverId=after.id, serverName=after.name)
        return after

    async def remove(self, server: str) -> McpServerRecord:
        """Remove a server: stop its connection (and process) and delete its record.

        Raises:
            ServerNotFound: No such server.
        """
        server_id = self._record(server).id
        return await self._mutate(lambda: self._remove(server_id))

    async def _remove(self, server_id: str) -> McpServerRecord:
        reg = self._registry

        def write(records: builtins.list[McpServerRecord]) -> McpServerRecord:
            for i, current in enumerate(records):
                if current.id == server_id:
                    return records.pop(i)
            raise ServerNotFound(f"server {server_id!r} was removed meanwhile", server=server_id)

        removed = await trio.to_thread.run_sync(reg.store.modify, write)
        handles = dict(reg.snapshot.handles)
        handle = handles.pop(server_id, None)
        if handle is not None:
            await reg.stop_connection(server_id, handle)
        reg.publish([r for r in reg.snapshot.records.values() if r.id != server_id], handles)
        reg.bus.emit(events.SERVERS_CHANGED, action="removed", serverId=removed.id, serverName=removed.name)
        return removed

    # --------------------------------------------------------------- tools

    async def list_server_tools(self, server: str) -> builtins.list[MCPTool]:
        """The server's tools (cached for the TTL; ``disabledTools`` filtered out).

        Raises:
            ServerNotFound, ServerInactive, ConnectionFailed: As the names say.
        """
        record = self._record(server)
        handle = self._handle(record)
        # A fresh cache entry is read directly (the actor's state, read in its own thread,
        # never across an await); only a miss goes to the actor, which fetches once.
        tools = self._registry.cached(record.id, handle)
        if tools is None:
            tools = await self._ask(lambda r: _GetTools(server_id=record.id, reply=r))
            record = self._record(record.id)
        view = self._registry.views.get(record.id)
        if view is not None and view[0] is tools and view[1] is record:
            return list(view[2])
        built = self._tools_of(record, tools)
        self._registry.views[record.id] = (tools, record, built)
        return list(built)

    async def list_all_active_server_tools(self) -> builtins.list[MCPTool]:
        """Tools of every active server; a failing server is logged and skipped."""
        return list((await self.list_tools_detailed()).tools)

    async def list_tools_detailed(self, servers: Sequence[str] | None = None) -> ToolListing:
        """Tools of the given servers (default: all active), with per-server failures.

        The servers are asked concurrently; one that fails does not hold up the others.
        """
        if servers is None:
            records = [r for r in self._registry.snapshot.records.values() if r.is_active]
        else:
            records = []
            failures: dict[str, McpActorsError] = {}
            for name in servers:
                try:
                    records.append(self._record(name))
                except McpActorsError as exc:
                    failures[name] = exc
        results: dict[str, builtins.list[MCPTool]] = {}
        failures = {} if servers is None else failures

        async def one(record: McpServerRecord) -> None:
            try:
                results[record.id] = await self.list_server_tools(record.id)
            except McpActorsError as exc:
                logger.warning("server %s: listing tools failed: %s", record.name, exc)
                failures[record.name] = exc

        async with trio.open_nursery() as nursery:
            for record in records:
                nursery.start_soon(one, record)
        tools = [tool for record in records for tool in results.get(record.id, ())]
        return ToolListing(tools=tuple(tools), failures=failures)

    def resolve_tool_id(self, tool_id: str) -> tuple[McpServerRecord, str]:
        """``(record, tool name)`` for a tool id handed out by a listing.

        Raises:
            ToolNotFound: The id was never handed out (list the tools first) or its server is gone.
        """
        found = self._registry.ids.resolve(tool_id)
        if found is None:
            raise ToolNotFound(
                f"unknown tool id {tool_id!r}; ids come from list_server_tools / list_all_active_server_tools"
            )
        server_id, name = found
        return self._record(server_id), name

    def is_auto_approved(self, server: str, tool_name: str) -> bool:
        """Whether a call needs no approval: the server is trusted and the tool is not excluded."""
        record = self._record(server)
        return record.is_trusted and tool_name not in record.disabled_auto_approve_tools

    def set_approver(self, approver: Approver | None) -> None:
        """Install (or remove) the callback consulted for calls that are not auto-approved.

        Without an approver, such calls proceed: approval is the host's policy.
        """
        self._approver = approver

    async def call_tool(
        self,
        server: str,
        tool_name: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool and return the MCP result (a tool-level error is ``is_error``, not an exception).

        Emits ``tool:called`` with the duration and success.

        Raises:
            ServerNotFound, ServerInactive: The server does not exist or is disabled.
            ToolDisabled: The tool is in ``disabledTools``.
            ToolCallDenied: The approver said no.
            ToolCallTimeout: No result within the timeout (the server was told to cancel).
            ConnectionFailed: The server could not be reached or died during the call.
        """
        record = self._record(server)
        handle = self._handle(record)
        if tool_name in record.disabled_tools:
            raise ToolDisabled(
                f"tool {tool_name!r} of server {record.name!r} is disabled (disabledTools); enable it to call it",
                server=record.name,
                tool=tool_name,
            )
        call_id = call_id or _new_call_id()
        args = dict(arguments or {})
        if self._approver is not None and not (
            record.is_trusted and tool_name not in record.disabled_auto_approve_tools
        ):
            verdict = self._approver(
                ApprovalRequest(
                    server_id=record.id, server_name=record.name, tool_name=tool_name, arguments=args, call_id=call_id
                )
            )
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if not verdict:
                raise ToolCallDenied(
                    f"the call to {tool_name!r} of server {record.name!r} was not approved",
                    server=record.name,
                    tool=tool_name,
                )
        start = time.perf_counter()
        success = False
        try:
            result = await handle.call_tool(tool_name, args, timeout=timeout, call_id=call_id)
            success = not result.is_error
            return result
        finally:
            self._registry.bus.emit(
                events.TOOL_CALLED,
                serverId=record.id,
                serverName=record.name,
                toolName=tool_name,
                callId=call_id,
                duration=time.perf_counter() - start,
                success=success,
            )

    async def call_tool_by_id(
        self,
        tool_id: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> mcp_types.CallToolResult:
        """:meth:`call_tool` for a tool id from a listing (what an LLM asks for)."""
        record, name = self.resolve_tool_id(tool_id)
        return await self.call_tool(record.id, name, arguments, call_id, timeout=timeout)

    # --------------------------------------------------------------- connections

    async def test(self, server: str) -> ServerTestResult:
        """Connect (if needed) and list tools, timing both; failures are a result, not an exception."""
        record = self._record(server)
        try:
            handle = self._handle(record)
            start = time.perf_counter()
            await handle.connect()
            connected = time.perf_counter()
            tools = await handle.list_tools()
            listed = time.perf_counter()
        except McpActorsError as exc:
            return ServerTestResult(ok=False, error=exc)
        return ServerTestResult(
            ok=True,
            connect_seconds=connected - start,
            list_seconds=listed - connected,
            tool_names=tuple(t.name for t in tools),
            server_info=handle.status().server_info,
        )

    async def discover(self, server: str) -> Discovery:
        """Tools, prompts and resources; each part that fails is reported in ``errors``."""
        record = self._record(server)
        handle = self._handle(record)
        errors: dict[str, McpActorsError] = {}
        tools: builtins.list[MCPTool] = []
        prompts: tuple[mcp_types.Prompt, ...] = ()
        resources: tuple[mcp_types.Resource, ...] = ()
        try:
            tools = await self.list_server_tools(record.id)
        except McpActorsError as exc:
            errors["tools"] = exc
        try:
            prompts = await handle.list_prompts()
        except McpActorsError as exc:
            errors["prompts"] = exc
        try:
            resources = await handle.list_resources()
        except McpActorsError as exc:
            errors["resources"] = exc
        return Discovery(tools=tuple(tools), prompts=prompts, resources=resources, errors=errors)

    async def connect(self, server: str) -> None:
        """Connect now (servers otherwise connect on first use)."""
        await self._handle(self._record(server)).connect()

    async def disconnect(self, server: str) -> None:
        """Close the server's connection (it reconnects lazily on the next use)."""
        await self._handle(self._record(server)).disconnect()

    async def reconnect(self, server: str) -> None:
        """Close and reconnect; also closes an open circuit and invalidates the tool cache."""
        record = self._record(server)
        self._registry.cache.pop(record.id, None)
        await self._handle(record).reconnect()

    async def cleanup(self) -> None:
        """Disconnect every server (their processes stop); records are kept."""
        async with trio.open_nursery() as nursery:
            for handle in self._registry.snapshot.handles.values():
                nursery.start_soon(_disconnect_quietly, handle)

    async def wait_for_stderr(self, server: str, predicate: Callable[[str], bool]) -> str:
        """Wait until a running stdio server writes a stderr line satisfying ``predicate``.

        For fault-injection tests ("fault: cancelled 7"); unbounded, so wrap it in
        ``trio.fail_after``. Raises ``RuntimeError`` when the server has no process.
        """
        return await self._handle(self._record(server)).wait_for_stderr(predicate)

    def stderr_tail(self, server: str, n: int = 20) -> tuple[str, ...]:
        """The server's last stderr lines (live while it runs; stdio only)."""
        return self._handle(self._record(server)).stderr_tail(n)

    def subscribe(self, *, buffer: int = 1024) -> events.Subscription:
        """Events from now on (bounded; a slow reader loses its oldest events, counted)."""
        return self._registry.bus.subscribe(buffer=buffer)


async def _connect_quietly(handle: ConnectionHandle) -> None:
    try:
        await handle.connect()
    except McpActorsError as exc:
        logger.info("server %s: background connect failed: %s", handle.settings.server_name, exc)


async def _disconnect_quietly(handle: ConnectionHandle) -> None:
    try:
        await handle.disconnect()
    except McpActorsError as exc:
        logger.info("server %s: disconnect failed: %s", handle.settings.server_name, exc)


def _check_name_free(records: Sequence[McpServerRecord], name: str, own_id: str) -> None:
    cleaned = clean_name(name)
    for other in records:
        if other.id == own_id:
            continue
        if other.name == name:
            raise DuplicateServerName(
                f"a server named {name!r} already exists; choose another name or update that one",
                server=name,
                field="name",
            )
        if clean_name(other.name) == cleaned:
            raise DuplicateServerName(
                f"server name {name!r} collides with {other.name!r}: both become {cleaned!r} in tool ids; choose a name"
                " that differs in letters or digits",
                server=name,
                field="name",
            )


def _to_record(input: McpServerRecord | Mapping[str, Any]) -> McpServerRecord:
    if isinstance(input, McpServerRecord):
        return input
    if not isinstance(input, Mapping):
        raise InvalidServerConfig(f"a server must be a record or a mapping, got {type(input).__name__}")
    data = dict(input)
    # A new server: the id and timestamps are ours to make when the input has none.
    data.setdefault("id", new_server_id())
    now = _dt.datetime.now(_dt.UTC).isoformat().replace("+00:00", "Z")
    data.setdefault("createdAt", now)
    data.setdefault("updatedAt", data["createdAt"])
    return record_from_json_dict(data)


def _config_from_mapping(current: McpServerRecord, config: Mapping[str, Any]) -> Any:
    """A new ServerConfig from camelCase keys, validated like the config file."""
    data = record_to_json_dict(current)
    data["config"] = dict(config)
    return record_from_json_dict(data).config
