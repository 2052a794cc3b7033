"""The registry actor: the one owner of server records, connection slots, tool cache and tool ids.

The actor reads a bounded mailbox of frozen messages (:data:`RegistryMessage`):

* mutations — :class:`AddServers`, :class:`UpdateServer`, :class:`RemoveServer`,
  :class:`SyncConfig` — run one at a time, in order, in a worker task of their own, so a
  slow one (a remove waiting for a process to stop, a write waiting for the file lock)
  never holds up the mailbox;
* :class:`StoreTools` and :class:`ForgetTools` are served at once. The registry never
  fetches: the facade lists on the server's connection (whose actor joins concurrent
  misses into one ``tools/list``) and hands the list here, where the view and its tool
  ids are built and cached.

Every mutation is a read-modify-write of the store whose result (the whole list of records,
as written) is applied to the running tree by one function, :meth:`_RegistryActor.apply`.
Changes another process made to the file are applied by the same function, so they look
exactly like changes made here (slots started or stopped, ``servers:changed`` emitted). It
puts the new records and the new slots' handles in the view, and publishes, before its
first await: a listing served while a slot starts or stops publishes whole state, never a
server without its handle.

After every change the actor publishes an immutable :class:`Snapshot` on the
:class:`RegistryRef`. The facade (:class:`~mcp_actors.service.McpService`) reads that
snapshot for look-ups, statuses and cache hits, and sends messages for everything else.

The ref outlives the actor's incarnations, as a registered name does in OTP: a facade
created before a restart keeps working after it. When an incarnation ends — a crash or a
stop — every request queued in its mailbox or in progress is answered with
:class:`~mcp_actors.errors.ActorStopped` at once; on its next start the actor rebuilds its
view from the store and from the connection slots that are still alive, without touching
them.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs
import mcp.types as mcp_types
import trio

from mcp_actors import events
from mcp_actors._config.codec import record_from_json_dict, record_to_json_dict
from mcp_actors._config.record import McpServerRecord
from mcp_actors._config.store import ConfigStore
from mcp_actors._connection.callbacks import HostCallbacks
from mcp_actors._connection.handle import ConnectionHandle, SlotRunner, open_slot
from mcp_actors._connection.listings import Freshness, Listing
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._registry.rules import check_new_name, server_not_found
from mcp_actors._wire.transports import params_for_record
from mcp_actors.errors import (
    ActorStopped,
    ConfigError,
    ConfigStoreError,
    DuplicateServerName,
    InvalidServerConfig,
    McpActorsError,
    ServerInactive,
    ServerNotFound,
    ToolDisabled,
)
from mcp_actors.naming import ToolIdMap
from mcp_actors.tools import McpTool
from supervisors import ChildSpec, Mailbox, Reply, Restart, Shutdown, Supervisor, open_mailbox

logger = logging.getLogger("mcp_actors.service")

DEFAULT_TOOL_CACHE_TTL: Final = 300.0
DEFAULT_CONFIG_POLL_INTERVAL: Final = 2.0
REGISTRY_MAILBOX: Final = 256
RESTART_WAIT: Final = 30.0
"""Longest a request waits for the next registry incarnation while the registry restarts."""
SLOT_STOP_BOUND: Final = 30.0

MUTABLE_FIELDS: Final = frozenset(
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
_CAMEL: Final = {
    "isActive": "is_active",
    "isTrusted": "is_trusted",
    "disabledTools": "disabled_tools",
    "disabledAutoApproveTools": "disabled_auto_approve_tools",
    "installSource": "install_source",
    "projectPath": "project_path",
}
RECONNECT_FIELDS: Final = frozenset({"name", "type", "config"})
_SLOT_SEQ = itertools.count(1)
_UNKNOWN: Final = ("unknown",)
"""A fingerprint no file has: after our own write the next check re-reads once."""


# ---------------------------------------------------------------------- one home per rule


def server_inactive(record: McpServerRecord) -> ServerInactive:
    """The error for using a disabled server (the one place it is worded)."""
    return ServerInactive(
        f"server {record.name!r} is disabled; enable it (isActive: true) to use it", server=record.name
    )


def enabled_tools(record: McpServerRecord, tools: Iterable[mcp_types.Tool]) -> list[mcp_types.Tool]:
    """The tools a record lets through (``disabledTools`` filtered out; the one place it is)."""
    disabled = set(record.disabled_tools)
    return [tool for tool in tools if tool.name not in disabled]


def check_tool_enabled(record: McpServerRecord, tool_name: str) -> None:
    """Refuse a call to a tool in ``disabledTools`` (the other half of :func:`enabled_tools`).

    Raises:
        ToolDisabled: Names the tool and the server and says how to enable it.
    """
    if tool_name in record.disabled_tools:
        raise ToolDisabled(
            f"tool {tool_name!r} of server {record.name!r} is disabled (disabledTools); enable it to call it",
            server=record.name,
            tool=tool_name,
        )


def normalise_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """``update()`` changes with the record's camelCase keys turned into field names.

    Raises:
        ConfigError: An unknown or immutable field (named, with the updatable ones).
    """
    out: dict[str, Any] = {}
    for key, value in changes.items():
        field = _CAMEL.get(key, key)
        if field not in MUTABLE_FIELDS:
            updatable = ", ".join(sorted(MUTABLE_FIELDS))
            raise ConfigError(
                f"cannot update field {key!r}; updatable: {updatable} (or their camelCase names)", field=key
            )
        out[field] = value
    return out


def settings_for(record: McpServerRecord, *, host: HostCallbacks | None = None) -> ConnectionSettings:
    """The connection settings a record implies (``host``: the runtime's host callbacks)."""
    config = record.config
    return ConnectionSettings(
        host=host,
        allow_sampling=config.allow_sampling,
        allow_elicitation=config.allow_elicitation,
        allow_roots=config.allow_roots,
        negotiate=config.protocol,
        server_id=record.id,
        server_name=record.name,
        transport=params_for_record(record),
        connect_timeout=config.connect_timeout,
        call_timeout=config.call_timeout,
        ping_interval=config.ping_interval,
        reset_timeout_on_progress=config.reset_timeout_on_progress,
        max_total_timeout=config.max_total_timeout,
        log_level=config.log_level,
        max_server_requests=config.max_server_requests,
        # A ping is answered in milliseconds by any live server; a short interval means
        # the host wants death noticed quickly, so the timeout follows it (at most 10 s).
        ping_timeout=min(10.0, max(config.ping_interval, 0.5)) if config.ping_interval > 0 else 10.0,
    )


def _config_from_mapping(current: McpServerRecord, config: Mapping[str, Any], server_type: Any = None) -> Any:
    """A new ServerConfig from camelCase keys, validated like the config file (for the new type, if any)."""
    data = record_to_json_dict(current)
    data["config"] = dict(config)
    if server_type is not None:
        data["type"] = str(server_type)
    return record_from_json_dict(data).config


def _updated(current: McpServerRecord, changes: Mapping[str, Any]) -> McpServerRecord:
    fields = dict(changes)
    if "config" in fields and isinstance(fields["config"], Mapping):
        fields["config"] = _config_from_mapping(current, fields["config"], fields.get("type"))
    try:
        return current.updated(**fields)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, McpActorsError) and not (isinstance(exc, ConfigError) and exc.server is None):
            raise
        # A field's own rule (a validator) does not know the record: name the server here.
        field = exc.field if isinstance(exc, ConfigError) else None
        raise InvalidServerConfig(
            f"invalid update of server {current.name!r}: {exc}", server=current.name, field=field
        ) from exc


# ---------------------------------------------------------------------- published state


@attrs.frozen(kw_only=True)
class ToolView:
    """A server's listed tools as handed out: built once per fetch (and record), then reused.

    Attributes:
        record: The record the view was built for (identity: a changed record means a rebuild).
        tools: The McpTool objects (``disabledTools`` filtered out, ids assigned).
        fetched_at: ``trio.current_time()`` of the ``tools/list`` it came from.
        epoch: The connection's ``tools_epoch`` at that fetch.
        word: The server's word on the list's life (2026-07-28 ``ttlMs``/``cacheScope``), if any.
        principal: Who the list was fetched as (the connection's principal then).
    """

    record: McpServerRecord
    tools: tuple[McpTool, ...]
    fetched_at: float
    epoch: int
    word: Freshness | None = None
    principal: str | None = attrs.field(default=None, repr=False)

    def fresh(self, record: McpServerRecord, handle: ConnectionHandle, ttl: float) -> bool:
        """Whether the view may be handed out for ``record`` now: same record, same epoch, and fresh.

        Fresh by the server's word when it gave one (``ttlMs``, which replaces ``ttl``; a
        ``private`` list only while the connection's principal is the one it was fetched as),
        else within ``ttl``. A ``ttl`` of 0 is the host turning the cache off: never fresh,
        whatever the server allows (its word is a permission to cache, not an order).
        """
        if self.record is not record or self.epoch != handle.status().tools_epoch or ttl <= 0:
            return False
        word = self.word
        if word is None:
            return trio.current_time() - self.fetched_at <= ttl
        if word.scope == "private" and self.principal != handle.principal():
            return False
        return trio.current_time() < word.expires_at


@attrs.frozen(kw_only=True)
class Snapshot:
    """What the facade reads without asking; replaced (never changed) by the actor."""

    records: Mapping[str, McpServerRecord] = attrs.field(factory=dict)
    handles: Mapping[str, ConnectionHandle] = attrs.field(factory=dict)
    by_name: Mapping[str, str] = attrs.field(factory=dict)
    tools: Mapping[str, ToolView] = attrs.field(factory=dict)
    tool_ids: Mapping[str, tuple[str, str]] = attrs.field(factory=dict)
    slots: Mapping[str, str] = attrs.field(factory=dict)
    """Server id → the child id of its slot in the connections supervisor."""

    def find(self, server: str) -> McpServerRecord | None:
        """The record by id or by name, or ``None``."""
        record = self.records.get(server)
        if record is None and server in self.by_name:
            record = self.records[self.by_name[server]]
        return record


@attrs.define(eq=False)
class RegistryRef:
    """The registry's address that survives its restarts, plus what it publishes.

    Written only by the registry actor (``attach``/``detach``/``publish``) and by the runtime
    (``close``); everyone else reads.

    Attributes:
        store: The config store.
        bus: The event bus.
        tool_cache_ttl: Seconds a tool list stays fresh when its server gives no word on it
            (a 2026-07-28 ``ttlMs`` replaces it); 0 turns the cache off.
        snapshot: The latest published :class:`Snapshot`.
        fingerprint: The store's fingerprint of the version the snapshot reflects.
        tool_list_requests: ``tools/list`` requests sent so far (for the registry's cache).
        counted_lists: Each server's last list counted in ``tool_list_requests``: a list is
            one request however many callers store it, in whichever incarnation.
        closed: The runtime is closed: no incarnation will come.
        host: The runtime's host callbacks, given to every connection it starts.
    """

    store: ConfigStore
    bus: events.EventBus
    tool_cache_ttl: float = DEFAULT_TOOL_CACHE_TTL
    snapshot: Snapshot = attrs.field(factory=Snapshot)
    fingerprint: object = _UNKNOWN
    tool_list_requests: int = 0
    counted_lists: dict[str, tuple[mcp_types.Tool, ...]] = attrs.field(factory=dict)
    closed: bool = False
    initial_records: list[McpServerRecord] | None = None
    host: HostCallbacks | None = None
    _mailbox: Mailbox[RegistryMessage] | None = None
    _up: trio.Event = attrs.field(factory=trio.Event)

    @property
    def mailbox(self) -> Mailbox[RegistryMessage] | None:
        """The current incarnation's mailbox, or ``None`` between incarnations."""
        return self._mailbox

    def attach(self, mailbox: Mailbox[RegistryMessage]) -> None:
        """A new incarnation is serving: requests go to ``mailbox`` from now on."""
        self._mailbox = mailbox
        self._up.set()

    def detach(self, mailbox: Mailbox[RegistryMessage]) -> None:
        """The incarnation owning ``mailbox`` ended: requests wait for the next one."""
        if self._mailbox is mailbox:
            self._mailbox = None
            self._up = trio.Event()

    def close(self) -> None:
        """The runtime is closing: waiting and future requests fail with ActorStopped."""
        self.closed = True
        self._mailbox = None
        self._up.set()

    async def current_mailbox(self) -> Mailbox[RegistryMessage]:
        """The serving incarnation's mailbox, waiting (bounded) while the registry restarts.

        Raises:
            ActorStopped: The runtime is closed, or no incarnation came within the bound.
        """
        if self._mailbox is not None and not self.closed:
            return self._mailbox  # serving: no timeout scope for the usual case
        with trio.move_on_after(RESTART_WAIT):
            while True:
                if self.closed:
                    raise ActorStopped("the registry is not running (the runtime is closed)")
                if self._mailbox is not None:
                    return self._mailbox
                await self._up.wait()
        raise ActorStopped(
            f"the registry did not come back within {RESTART_WAIT:g} s of a restart; see the log, then retry"
        )


# ---------------------------------------------------------------------- messages


@attrs.frozen(kw_only=True)
class AddServers:
    """Add records in one write; each gets its saved record or its own error (one bad one spoils none).

    A failure of the write itself (a :class:`~mcp_actors.errors.ConfigStoreError`) fails the
    whole request and nothing is written.
    """

    records: tuple[McpServerRecord, ...]
    reply: Reply[tuple[McpServerRecord | McpActorsError, ...]]


@attrs.frozen(kw_only=True)
class UpdateServer:
    """Change fields (already normalised to field names) of one record; replies the new record."""

    server_id: str
    changes: Mapping[str, Any]
    reply: Reply[McpServerRecord]


@attrs.frozen(kw_only=True)
class RemoveServer:
    """Remove one record and stop its slot (and process); replies the removed record."""

    server_id: str
    reply: Reply[McpServerRecord]


@attrs.frozen(kw_only=True)
class SyncConfig:
    """Re-read the store if it changed and apply what another process did; replies ``None``.

    The periodic check sends it without a reply.
    """

    reply: Reply[None] | None = None


@attrs.frozen(kw_only=True)
class StoreTools:
    """A server's tools as its connection listed them; replies the server's :class:`ToolView`.

    The registry builds the view (the tool ids are its own) and caches it, unless it holds
    a later listing of the same connection (a slower caller's older list never replaces it).
    """

    server_id: str
    handle: ConnectionHandle
    listing: Listing
    reply: Reply[ToolView]


@attrs.frozen(kw_only=True)
class ForgetTools:
    """Drop a server's cached tools (a reconnect); replies ``None``."""

    server_id: str
    reply: Reply[None]


RegistryMessage = AddServers | UpdateServer | RemoveServer | SyncConfig | StoreTools | ForgetTools
_Mutation = AddServers | UpdateServer | RemoveServer | SyncConfig


# ---------------------------------------------------------------------- slots


class _Relay:
    """The task status a connection slot gets: reports its handle as the child's value."""

    def __init__(self, status: trio.TaskStatus[ConnectionHandle], handle: ConnectionHandle) -> None:
        self._status = status
        self._handle = handle

    def started(self, value: object = None) -> None:
        """Report the slot's handle (the slot itself reports ``None``)."""
        self._status.started(self._handle)


async def _run_slot(
    handle: ConnectionHandle,
    runner: SlotRunner,
    *,
    task_status: trio.TaskStatus[ConnectionHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    await runner.run(task_status=_Relay(task_status, handle))


@attrs.frozen(eq=False)
class PreparedSlot:
    """A slot whose handle exists (requests queue in its mailbox) but whose task has not started.

    :func:`start_prepared` runs prepared slots under the connections supervisor, together;
    a prepared slot that will never start must be abandoned (:meth:`abandon`: its queued
    requests are answered ActorStopped).
    """

    child_id: str
    handle: ConnectionHandle
    runner: SlotRunner

    def child_spec(self) -> ChildSpec:
        """The slot as a child of the connections supervisor."""
        return ChildSpec(
            id=self.child_id,
            start=functools.partial(_run_slot, self.handle, self.runner),
            restart=Restart.TRANSIENT,
            shutdown=Shutdown.after(SLOT_STOP_BOUND),
            # The slot's task reports its handle at once (SlotRunner.run): nothing to
            # wait for, so no start round trip per server (docs/performance.md).
            started_at_spawn=True,
        )

    def abandon(self) -> None:
        """Never start: answer what is queued, close the mailbox."""
        self.runner.abandon()


def prepare_slot(record: McpServerRecord, bus: events.EventBus, *, host: HostCallbacks | None = None) -> PreparedSlot:
    """A handle for ``record`` and its slot, not started yet (a fresh child id each time).

    Each slot gets a fresh child id, so a changed server's new slot can start before the
    old one has stopped: an update never leaves the server without a handle.
    """
    handle, runner = open_slot(settings_for(record, host=host), bus)
    return PreparedSlot(f"{record.id}#{next(_SLOT_SEQ)}", handle, runner)


async def start_prepared(connections: Supervisor, slots: Sequence[PreparedSlot]) -> None:
    """Start ``slots`` under ``connections`` in one scheduler pass, so their servers' spawns begin together.

    One :meth:`Supervisor.start_children` for all of them: started one after another, each
    behind its own wait for the supervisor's lock, twenty slots spread their spawns over
    ~150 ms of the loop's other work and cost the loop ~15 ms more CPU (``benchmarks.startup_layers
    --by-task``).

    Raises:
        RuntimeError: The connections supervisor is stopping (the runtime is closing);
            none of ``slots`` started.
    """
    await connections.start_children([slot.child_spec() for slot in slots])


async def stop_slot(
    connections: Supervisor, child_id: str, handle: ConnectionHandle | None, why: str | None = None
) -> None:
    """Stop a slot: close its mailbox (the actor closes its server), then terminate and forget the child.

    The one kill path of a slot, used by the registry and by the runtime's exit. ``why`` is
    what the server's calls in flight are told (``"the server was disabled"``).
    """
    if handle is not None:
        await handle.aclose(why)
    with trio.move_on_after(SLOT_STOP_BOUND):
        with contextlib.suppress(KeyError, RuntimeError):
            await connections.terminate_child(child_id)
    with contextlib.suppress(KeyError, RuntimeError, LookupError):
        connections.delete_child(child_id)


# ---------------------------------------------------------------------- the actor


@attrs.frozen(kw_only=True)
class _Change:
    """What :meth:`_RegistryActor.commit` leaves to do once the view shows a new list of records.

    Attributes:
        prepared: The new slots, in the view already, to start.
        stops: ``(child id, handle, why)`` of the slots out of the view, to stop.
        events: ``(action, record)`` to emit as ``servers:changed`` once they are stopped.
        added: The handles of added servers (connected at once when the runtime asks so).
    """

    prepared: list[PreparedSlot]
    stops: list[tuple[str, ConnectionHandle, str]]
    events: list[tuple[str, McpServerRecord]]
    added: list[ConnectionHandle]


@attrs.define(eq=False)
class _CacheEntry:
    tools: tuple[mcp_types.Tool, ...]
    fetched_at: float
    epoch: int
    word: Freshness | None = None
    principal: str | None = None


class _RegistryActor:
    """One incarnation's state, and the tasks that serve it.

    Its tasks — :meth:`serve` (listings), :meth:`mutation_worker`, :meth:`start_slots`,
    :meth:`poll_config` — share one trio thread, and the state is changed only in
    synchronous steps that publish before they return: :meth:`rebuild`'s tail,
    :meth:`commit`, :meth:`store_tools`, :meth:`mark_tools_stale`. A task awaits (a store
    write, a slot start or stop) only before or after such a step, never inside one, so no
    task can see, or publish, a change half made. This is why listings need not wait
    behind a slow mutation in one task.
    """

    def __init__(
        self, ref: RegistryRef, connections: Supervisor, *, connect_on_add: bool, poll_interval: float
    ) -> None:
        self.ref = ref
        self.store = ref.store
        self.bus = ref.bus
        self.connections = connections
        self.connect_on_add = connect_on_add
        self.poll_interval = poll_interval
        self.records: dict[str, McpServerRecord] = {}
        self.handles: dict[str, ConnectionHandle] = {}
        self.slots: dict[str, str] = {}
        self.cache: dict[str, _CacheEntry] = {}
        self.views: dict[str, ToolView] = {}
        self.tool_ids: dict[str, tuple[str, str]] = {}
        """Every view's tool ids, kept with the views (:meth:`set_view`): a listing's publish
        copies it instead of walking every server's tools (N listings of N servers with T
        tools each walked N²·T tools on the actor's loop)."""
        self.view_sources: dict[str, tuple[mcp_types.Tool, ...]] = {}
        self.ids = ToolIdMap()
        self.pending: set[Reply[Any]] = set()
        self.nursery: trio.Nursery | None = None
        self.unstarted: list[PreparedSlot] = []
        """Slots :meth:`rebuild` prepared and :meth:`start_slots` has not started yet."""
        self.mutations_send, self.mutations = trio.open_memory_channel[_Mutation](REGISTRY_MAILBOX)

    # --------------------------------------------------------------- publishing

    def set_view(self, server_id: str, view: ToolView | None) -> None:
        """Replace a server's view in place (the views keep their order) or, with ``None``, drop
        it; its tool ids go with it."""
        old = self.views.get(server_id) if view is not None else self.views.pop(server_id, None)
        if old is not None:
            for tool in old.tools:
                self.tool_ids.pop(tool.id, None)
        if view is not None:
            self.views[server_id] = view
            for tool in view.tools:
                self.tool_ids[tool.id] = (tool.server_id, tool.name)

    def publish(self) -> None:
        tool_ids = dict(self.tool_ids)
        self.ref.snapshot = Snapshot(
            records=dict(self.records),
            handles=dict(self.handles),
            by_name={r.name: r.id for r in self.records.values()},
            tools=dict(self.views),
            tool_ids=tool_ids,
            slots=dict(self.slots),
        )

    @contextlib.contextmanager
    def serving(self, reply: Reply[Any] | None) -> Iterator[None]:
        """Track a request in progress so that a crash or stop can answer it."""
        if reply is None:
            yield
            return
        self.pending.add(reply)
        try:
            yield
        finally:
            # Unanswered (cancelled by the incarnation's end): stays for answer_all to answer.
            if reply.answered:
                self.pending.discard(reply)

    # --------------------------------------------------------------- start: rebuild

    async def rebuild(self) -> list[tuple[str, ConnectionHandle | None]]:
        """Build the view from the store and the slots still alive; prepare missing slots.

        The missing slots' handles are in the view at once; their tasks are started by
        :meth:`start_slots`, in config order, while the registry serves.

        Returns:
            The orphan slots (of servers no longer configured, or with changed settings),
            for the caller to stop once the registry serves again.
        """
        records: list[McpServerRecord]
        fingerprint: object = _UNKNOWN
        if self.ref.initial_records is not None:
            # The runtime's own read, whose fingerprint it already set: keep it, or the first
            # poll would see a "change" and re-read an untouched file.
            records, self.ref.initial_records = self.ref.initial_records, None
            fingerprint = self.ref.fingerprint
        else:
            try:
                records, fingerprint = await trio.to_thread.run_sync(self.store.load_with_fingerprint)
            except (McpActorsError, OSError) as exc:
                # The file went bad while we ran: keep serving what we last knew.
                logger.warning("registry restart: cannot read the config (%s); keeping the last known servers", exc)
                records = list(self.ref.snapshot.records.values())
        previous = self.ref.snapshot
        live: dict[str, list[tuple[str, ConnectionHandle]]] = {}
        orphans: list[tuple[str, ConnectionHandle | None]] = []
        known_slots = {child: sid for sid, child in previous.slots.items()}
        for info in self.connections.which_children():
            handle = info.value if isinstance(info.value, ConnectionHandle) else None
            if handle is None and info.id in known_slots:
                handle = previous.handles.get(known_slots[info.id])
            if handle is None:
                orphans.append((info.id, None))
            else:
                live.setdefault(handle.server_id, []).append((info.id, handle))
        for record in records:
            self.records[record.id] = record
            candidates = live.pop(record.id, [])
            if record.is_active and candidates:  # (no live slot, as at the first start: nothing to compare)
                wanted = settings_for(record, host=self.ref.host)
                for i, (_child_id, handle) in enumerate(candidates):
                    if handle.settings == wanted:
                        self.slots[record.id], self.handles[record.id] = candidates.pop(i)
                        break
            orphans.extend(candidates)
        for leftovers in live.values():
            orphans.extend(leftovers)
        for record in records:
            if record.is_active and record.id not in self.handles:
                # Started by start_slots once the registry serves: a request queues in the
                # handle's mailbox meanwhile, and the first servers start connecting while
                # the slots of the rest are still starting.
                slot = prepare_slot(record, self.bus, host=self.ref.host)
                self.slots[record.id], self.handles[record.id] = slot.child_id, slot.handle
                self.unstarted.append(slot)
        self.ref.fingerprint = fingerprint
        self.publish()
        return orphans

    async def start_slots(self) -> None:
        """Start the slots :meth:`rebuild` prepared, all in one scheduler pass, while the registry serves.

        The handles are in the view already, so a request for a server whose slot has not
        started waits in its mailbox until it has. Starting them here rather than in
        :meth:`rebuild` lets the registry serve before the slots start; starting them
        together (:func:`start_prepared`) begins every server's spawn at once.

        A slot whose server was removed or changed meanwhile (its handle is no longer the
        view's) is abandoned, or stopped if it started while that happened. However this
        ends — cancelled with the incarnation, or the connections supervisor stopping —
        every slot it did not start is abandoned: its queued requests are answered.
        """
        pending = self.unstarted
        try:
            current = [slot for slot in pending if self.handles.get(slot.handle.server_id) is slot.handle]
            try:
                await start_prepared(self.connections, current)
            except RuntimeError:
                return  # the connections supervisor is stopping: the runtime is closing
            for slot in current:
                if self.handles.get(slot.handle.server_id) is not slot.handle and self.nursery is not None:
                    self.nursery.start_soon(stop_slot, self.connections, slot.child_id, slot.handle)
            pending[:] = [slot for slot in pending if slot not in current]  # the stale ones, abandoned below
        finally:
            for slot in pending:
                slot.abandon()
            pending.clear()

    # --------------------------------------------------------------- applying a new list of records

    async def apply(self, new_records: Sequence[McpServerRecord], *, connect_added: bool) -> None:
        """Make the running tree match ``new_records``: the one path for every change, ours or not.

        The view changes in one synchronous step (:meth:`commit`), published before the
        first await; only then are the new slots started and the old ones stopped.
        """
        change = self.commit(new_records)
        try:
            await start_prepared(self.connections, change.prepared)
        except BaseException:
            for slot in change.prepared:
                slot.abandon()
            raise
        if change.stops:
            async with trio.open_nursery() as nursery:
                for child_id, handle, why in change.stops:
                    nursery.start_soon(stop_slot, self.connections, child_id, handle, why)
        # After the stops: a listener told "removed" finds the server's process gone.
        for action, record in change.events:
            self.bus.emit(events.SERVERS_CHANGED, action=action, serverId=record.id, serverName=record.name)
        if connect_added and self.connect_on_add:
            assert self.nursery is not None
            for handle in change.added:
                self.nursery.start_soon(_connect_quietly, handle)

    def commit(self, new_records: Sequence[McpServerRecord]) -> _Change:
        """Put ``new_records`` in the view and publish, with no checkpoint; return what is left to do.

        The new slots are prepared (their handles are in the view at once: a request queues
        in the mailbox until :meth:`apply` has started them, as after :meth:`rebuild`); the
        handles of the slots to stop are out of the view.
        """
        old = self.records
        new = {r.id: r for r in new_records}
        stops: list[tuple[str, ConnectionHandle, str]] = []
        starts: list[McpServerRecord] = []
        changes: list[tuple[str, McpServerRecord]] = []
        for server_id, record in old.items():
            if server_id not in new:
                changes.append(("removed", record))
                if server_id in self.handles:
                    stops.append((self.slots.pop(server_id), self.handles.pop(server_id), "the server was removed"))
                self.forget_tools(server_id)
        for server_id, record in new.items():
            before = old.get(server_id)
            if before is None:
                changes.append(("added", record))
                if record.is_active:
                    starts.append(record)
                continue
            if before == record:
                new[server_id] = before  # keep identity: views built for it stay valid
                continue
            changes.append(("updated", record))
            reconnect = any(getattr(before, f) != getattr(record, f) for f in RECONNECT_FIELDS)
            if server_id in self.handles and (reconnect or not record.is_active):
                why = "the server was disabled" if not record.is_active else "its record was changed: it reconnects"
                stops.append((self.slots.pop(server_id), self.handles.pop(server_id), why))
                self.forget_tools(server_id)
            if record.is_active and server_id not in self.handles:
                starts.append(record)
        prepared = [prepare_slot(record, self.bus, host=self.ref.host) for record in starts]
        added_ids = {r.id for action, r in changes if action == "added"}
        added: list[ConnectionHandle] = []
        for record, slot in zip(starts, prepared, strict=True):
            self.slots[record.id], self.handles[record.id] = slot.child_id, slot.handle
            if record.id in added_ids:
                added.append(slot.handle)
        self.records = new
        self.publish()
        return _Change(prepared=prepared, stops=stops, events=changes, added=added)

    def forget_tools(self, server_id: str) -> None:
        """Drop everything known of a server's tools (it is gone, or its connection changed)."""
        self.cache.pop(server_id, None)
        self.ref.counted_lists.pop(server_id, None)
        self.set_view(server_id, None)
        self.view_sources.pop(server_id, None)
        self.ids.forget_server(server_id)

    # --------------------------------------------------------------- mutations

    async def write(self, change: Callable[[list[McpServerRecord]], Any]) -> Any:
        """Read-modify-write the store; then apply the whole list as written (external changes too)."""

        def run(records: list[McpServerRecord]) -> tuple[Any, list[McpServerRecord]]:
            result = change(records)
            return result, list(records)

        try:
            result, records = await trio.to_thread.run_sync(self.store.modify, run)
        except OSError as exc:  # the store raises typed errors; this is the belt to its braces
            if isinstance(exc, McpActorsError):
                raise
            raise ConfigStoreError(
                f"cannot write the config file {self.store.path}: {exc.strerror or exc}; fix the file's location or"
                " permissions, or point --config / MCP_ACTORS_CONFIG elsewhere",
                path=str(self.store.path),
            ) from exc
        self.ref.fingerprint = _UNKNOWN
        await self.apply(records, connect_added=True)
        return result

    async def add_servers(self, message: AddServers) -> tuple[McpServerRecord | McpActorsError, ...]:
        def change(records: list[McpServerRecord]) -> list[McpServerRecord | McpActorsError]:
            out: list[McpServerRecord | McpActorsError] = []
            for record in message.records:
                try:
                    check_new_name(records, record.name, record.id)
                    if any(r.id == record.id for r in records):
                        raise DuplicateServerName(
                            f"a server with id {record.id!r} already exists", server=record.name, field="id"
                        )
                except McpActorsError as exc:
                    out.append(exc)
                else:
                    records.append(record)
                    out.append(record)
            return out

        result: list[McpServerRecord | McpActorsError] = await self.write(change)
        return tuple(result)

    async def update_server(self, message: UpdateServer) -> McpServerRecord:
        server_id = message.server_id

        def change(records: list[McpServerRecord]) -> McpServerRecord:
            for i, current in enumerate(records):
                if current.id == server_id:
                    updated = _updated(current, message.changes)
                    if updated.name != current.name:
                        check_new_name(records, updated.name, updated.id)
                    records[i] = updated
                    return updated
            raise server_not_found(server_id, records, hint="it was removed meanwhile")

        updated: McpServerRecord = await self.write(change)
        return self.records.get(updated.id, updated)

    async def remove_server(self, message: RemoveServer) -> McpServerRecord:
        server_id = message.server_id

        def change(records: list[McpServerRecord]) -> McpServerRecord:
            for i, current in enumerate(records):
                if current.id == server_id:
                    return records.pop(i)
            raise server_not_found(server_id, records, hint="it was removed meanwhile")

        removed: McpServerRecord = await self.write(change)
        return removed

    async def sync_config(self) -> None:
        """Re-read the store when its fingerprint moved; apply what changed."""
        current = await trio.to_thread.run_sync(self.store.fingerprint)
        if current == self.ref.fingerprint:
            return
        try:
            records, fingerprint = await trio.to_thread.run_sync(self.store.load_with_fingerprint)
        except (McpActorsError, OSError) as exc:
            # A file another process broke: keep serving what we know, say so once per version.
            logger.warning("the config file changed but cannot be read (%s); keeping the servers as they were", exc)
            self.ref.fingerprint = current
            return
        self.ref.fingerprint = fingerprint  # with the records: apply commits them before its first await
        await self.apply(records, connect_added=True)

    async def mutation_worker(self) -> None:
        """Run mutations one at a time, in arrival order (no two can interleave)."""
        async for message in self.mutations:
            reply = message.reply
            with self.serving(reply):
                try:
                    match message:
                        case AddServers():
                            message.reply.send(await self.add_servers(message))
                        case UpdateServer():
                            message.reply.send(await self.update_server(message))
                        case RemoveServer():
                            message.reply.send(await self.remove_server(message))
                        case SyncConfig():
                            await self.sync_config()
                            if message.reply is not None:
                                message.reply.send(None)
                        case _:
                            raise TypeError(f"unknown registry mutation: {message!r}")
                except McpActorsError as exc:
                    # An expected failure (a refused write, a bad record) is a reply, never a crash.
                    if reply is not None:
                        reply.fail(exc)
                    else:
                        logger.warning("applying the config file failed: %s", exc)

    async def poll_config(self) -> None:
        """Check the store every ``poll_interval`` so external changes apply even with nobody calling."""
        while True:
            await trio.sleep(self.poll_interval)
            current = await trio.to_thread.run_sync(self.store.fingerprint)
            if current != self.ref.fingerprint:
                await self.mutations_send.send(SyncConfig())

    # --------------------------------------------------------------- tools

    def build_view(self, record: McpServerRecord, entry: _CacheEntry) -> ToolView:
        """The McpTool objects for a record and a fetched list.

        The previous objects are reused while the record and the enabled tools are equal
        to the ones they were built from: converters cache on their identity.
        """
        tools = tuple(enabled_tools(record, entry.tools))
        previous = self.views.get(record.id)
        if previous is not None and previous.record == record and self.view_sources.get(record.id) == tools:
            view = ToolView(
                record=record,
                tools=previous.tools,
                fetched_at=entry.fetched_at,
                epoch=entry.epoch,
                word=entry.word,
                principal=entry.principal,
            )
        else:
            ids = self.ids.assign_server(record.id, record.name, [t.name for t in tools])
            view = ToolView(
                record=record,
                tools=tuple(
                    McpTool(
                        id=ids[tool.name],
                        name=tool.name,
                        description=tool.description or "",
                        input_schema=dict(tool.input_schema or {}),
                        server_id=record.id,
                        server_name=record.name,
                        definition=tool,
                    )
                    for tool in tools
                ),
                fetched_at=entry.fetched_at,
                epoch=entry.epoch,
                word=entry.word,
                principal=entry.principal,
            )
        self.set_view(record.id, view)
        self.view_sources[record.id] = tools
        return view

    def store_tools(self, message: StoreTools) -> None:
        """Cache a server's listed tools and answer with its view (the current one if it is later); never waits."""
        reply, listing = message.reply, message.listing
        record = self.records.get(message.server_id)
        if record is None or self.handles.get(message.server_id) is not message.handle:
            reply.fail(
                ServerNotFound(
                    f"server {message.server_id!r} was removed or changed while listing", server=message.server_id
                )
            )
            return
        counted = self.ref.counted_lists
        if counted.get(record.id) is not listing.items:
            counted[record.id] = listing.items
            self.ref.tool_list_requests += 1
        entry = self.cache.get(record.id)
        if entry is None or (entry.epoch, entry.fetched_at) < (listing.epoch, listing.listed_at):
            entry = _CacheEntry(
                tools=listing.items,
                fetched_at=listing.listed_at,
                epoch=listing.epoch,
                word=listing.word,
                principal=listing.principal,
            )
            self.cache[record.id] = entry
        elif (view := self.views.get(record.id)) is not None and view.record is record and view.epoch == entry.epoch:
            reply.send(view)
            return
        view = self.build_view(record, entry)
        self.publish()
        reply.send(view)

    def mark_tools_stale(self, server_id: str) -> None:
        """Drop a server's cached listing (a reconnect): its view stays, its ids resolving, but stale."""
        self.cache.pop(server_id, None)
        view = self.views.get(server_id)
        if view is not None:
            word = attrs.evolve(view.word, expires_at=-math.inf) if view.word is not None else None
            self.set_view(server_id, attrs.evolve(view, fetched_at=-math.inf, word=word))
            self.publish()

    # --------------------------------------------------------------- the loop

    async def serve(self, inbox: trio.MemoryReceiveChannel[RegistryMessage]) -> None:
        assert self.nursery is not None
        while True:
            # Take what is queued without a checkpoint per message: twenty first listings
            # must reach their servers in one pass of the event loop, not in twenty.
            try:
                try:
                    message = inbox.receive_nowait()
                except trio.WouldBlock:
                    message = await inbox.receive()
            except trio.EndOfChannel:
                return
            match message:
                case AddServers() | UpdateServer() | RemoveServer() | SyncConfig():
                    await self.mutations_send.send(message)
                case StoreTools():
                    self.store_tools(message)
                case ForgetTools():
                    self.mark_tools_stale(message.server_id)
                    message.reply.send(None)
                case _:
                    raise TypeError(f"unknown message for the registry: {message!r}")

    def answer_all(self, inbox: trio.MemoryReceiveChannel[RegistryMessage], why: str) -> None:
        """Answer every request in progress, queued for the worker, or queued in the mailbox."""
        error = ActorStopped(why)
        for pending in list(self.pending):
            pending.fail(error)
        channels: tuple[trio.MemoryReceiveChannel[Any], ...] = (self.mutations, inbox)
        for channel in channels:
            while True:
                try:
                    message = channel.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                queued = getattr(message, "reply", None)
                if isinstance(queued, Reply):
                    queued.fail(error)


async def run_registry(
    ref: RegistryRef,
    connections: Supervisor,
    *,
    connect_on_add: bool = False,
    config_poll_interval: float = DEFAULT_CONFIG_POLL_INTERVAL,
    task_status: trio.TaskStatus[RegistryRef] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one incarnation of the registry actor under the root supervisor.

    Rebuilds the view from the store (or ``ref.initial_records`` on the first start) and
    the live slots, attaches its mailbox to ``ref``, then serves until cancelled. However
    it ends, every request it holds is answered with ActorStopped before it returns.

    Args:
        ref: The address that outlives incarnations.
        connections: The connections supervisor (the slots' parent).
        connect_on_add: Connect a newly added active server in the background (off by
            default: lazy, see :func:`~mcp_actors.runtime.open_runtime`).
        config_poll_interval: Seconds between checks of the config file for other
            processes' changes; 0 turns the periodic check off (list() and look-up
            misses still check).
    """
    actor = _RegistryActor(ref, connections, connect_on_add=connect_on_add, poll_interval=config_poll_interval)
    orphans = await actor.rebuild()
    mailbox, inbox = open_mailbox[RegistryMessage](REGISTRY_MAILBOX)
    why = "the registry stopped while handling this request (the runtime is closing); retry if it is not"
    try:
        async with trio.open_nursery() as nursery:
            actor.nursery = nursery
            if actor.unstarted:
                nursery.start_soon(actor.start_slots)
            nursery.start_soon(actor.mutation_worker)
            if config_poll_interval > 0:
                nursery.start_soon(actor.poll_config)
            for child_id, handle in orphans:  # in the background: serving does not wait for them
                nursery.start_soon(stop_slot, connections, child_id, handle)
            ref.attach(mailbox)
            task_status.started(ref)
            await actor.serve(inbox)
    except BaseException as exc:
        if not _only_cancelled(exc):
            why = f"the registry crashed while handling this request and is restarting; retry ({type(exc).__name__})"
            logger.error("the registry actor crashed; it restarts alone, live servers are kept", exc_info=True)
        raise
    finally:
        ref.detach(mailbox)
        actor.answer_all(inbox, why)
        inbox.close()
        mailbox.close()


async def _connect_quietly(handle: ConnectionHandle) -> None:
    try:
        await handle.connect()
    except McpActorsError as exc:
        logger.info("server %s: background connect failed: %s", handle.settings.server_name, exc)


def _only_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_cancelled(e) for e in exc.exceptions)
    return isinstance(exc, trio.Cancelled)
