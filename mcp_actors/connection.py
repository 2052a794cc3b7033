"""The connection actor: one per server, owning its transport, session and process.

Semantics (DESIGN §5):

* States ``disconnected → connecting → connected | error``; ``connected → disconnected``
  on :class:`~mcp_actors._messages.Disconnect`; ``error → connecting`` and
  ``connected → connecting`` on reconnect. Every change emits ``connection:state``;
  reaching ``connected`` also emits ``server:connected``.
* Lazy: nothing is started until the first demand. Demands that arrive while an attempt
  is under way wait for that one attempt (coalesced).
* One call path. Every request (tool call, listing, ping) runs in the caller's task over
  the live session (:class:`~mcp_actors._live.LiveSession`), multiplexed. The caller asks
  the actor only for that session: it takes it from the status cell when connected, or
  sends :class:`~mcp_actors._messages.Connect` (which waits through a connect attempt or a
  restart). The request registers itself with the session for its duration.
* Death is observed directly (stdout EOF, process exit, broken stdin, HTTP stream error,
  unanswered ping). The actor then, in one step with no checkpoint: records the failure,
  stops reading its mailbox, sets the state to ``error`` (emitting the event), and ends
  the session, which fails every registered request with
  :class:`~mcp_actors.errors.ServerConnectionLost` carrying the last stderr lines. So the
  state is ``error`` before any caller sees the failure. Tool calls are never replayed.
* A timed-out or cancelled call is cancelled on the server (``notifications/cancelled``).

Supervision: a dead connection (or a failed connect) *crashes* the actor, and the
per-server supervisor (:func:`run_connection_slot`) restarts it after an exponential
backoff; a restarted actor connects at once. When restarts exceed the intensity (5 in
60 s by default) the slot parks the server in ``error`` with its circuit open: every
request is answered with :class:`~mcp_actors.errors.ServerCircuitOpen` until
:class:`~mcp_actors._messages.Reconnect`. Errors that no retry can fix
(:class:`~mcp_actors.errors.ServerMisconfigured`) open the circuit at once.

No request is lost or left waiting (issue 10.2). The mailbox belongs to the slot:

* requests an incarnation is serving (waiting for its connect attempt) get that
  attempt's error the moment it fails;
* requests still queued when an incarnation ends (or taken by it after its end) are
  served by the next incarnation — a call issued right after a crash gets the restarted
  server's answer;
* a parked slot answers every request with ``ServerCircuitOpen``;
* when the slot stops (mailbox closed, or cancelled with the runtime), every request
  still queued is answered :class:`~mcp_actors.errors.ActorStopped` and the mailbox is
  closed, so later requests fail at once too.

Bounds a reader can add up: a request is bounded by its own timeout, counted from the
moment it is registered with a live session; getting that session is bounded by
:meth:`ConnectionSettings.session_bound` (one restart backoff, closing the old
connection, and one connect attempt).
"""

from __future__ import annotations

import enum
import importlib.metadata
import inspect
import json
import logging
import math
import operator
import random
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

# The SDK's ClientSession enters an anyio task group, and anyio imports its trio backend the
# first time one is made: ~6 ms on the first connection of a host on plain trio, between the
# spawn and the first byte to the server (docs/performance.md, round 10). Imported with the
# connection actor, it costs the host its import time instead of its first connection.
import anyio._backends._trio  # noqa: F401
import attrs
import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.client._input_required import InputRequiredRoundsExceededError
from mcp.client._probe import negotiate_auto
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_actors import events
from mcp_actors._cache import MAX_PAGES, Listing, ListingCache, ListingKind, fetch_listing, make_listing
from mcp_actors._callbacks import INPUT_REQUIRED_MAX_ROUNDS, HostCallbacks, fulfil_input_required
from mcp_actors._dispatch import BoundNotification, StreamWire, WireDispatcher
from mcp_actors._listen import Listener
from mcp_actors._live import LiveSession, ProgressDeadline, RequestStamp, SessionEnded
from mcp_actors._messages import Connect, ConnectionMessage, Disconnect, FillListing, Reconnect
from mcp_actors._tasks import TaskStatusWatch
from mcp_actors._transport_base import server_logger
from mcp_actors.errors import (
    ActorStopped,
    ConnectionFailed,
    ConnectTimeout,
    McpActorsError,
    ServerCircuitOpen,
    ServerConnectionLost,
    ServerMisconfigured,
    ServerProtocolError,
    ServerRequestFailed,
    ServerStartFailed,
    ToolCallFailed,
    ToolOutputInvalid,
    ToolTaskFailed,
)
from mcp_actors.process_tracker import ProcessIdentity
from mcp_actors.transports import StderrTail, TransportLink, TransportParams, open_transport
from supervisors import (
    Backoff,
    Intensity,
    Mailbox,
    MailboxClosed,
    NoReply,
    Reply,
    add_restart,
    backoff_delay,
    open_mailbox,
)

__all__ = [
    "ConnectionHandle",
    "ConnectionSettings",
    "ConnectionState",
    "ConnectionStatus",
    "ProgressCallback",
    "RESOURCE_CACHE_TTL",
]

logger = logging.getLogger(__name__)


def _package_version() -> str:
    try:
        return importlib.metadata.version("mcp-actors")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


CLIENT_INFO: Final = mcp_types.Implementation(name="mcp-actors", version=_package_version())
"""What we announce in ``initialize``: our name and the installed version."""

STOP_BOUND: Final = 15.0
"""Seconds one session may take to stop: close_grace + term_grace + reaping, with room to spare."""
_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}
"""MCP log levels (RFC 5424) as stdlib levels; notice, alert and emergency fall between or above."""
_TASK_POLL_MS: Final = 50
_TASK_CANCEL_BOUND: Final = 5.0
RESOURCE_CACHE_TTL: Final = 300.0
"""Seconds a server's resource list stays cached (invalidated earlier by list_changed)."""
T = TypeVar("T")

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""Called with ``(progress, total, message)`` for each progress notification of a call."""


class ConnectionState(enum.Enum):
    """Where a server's connection is."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    ERROR = "error"


@attrs.frozen(kw_only=True)
class ConnectionSettings:
    """Everything a connection actor needs to know about its server.

    Attributes:
        server_id: The server record's id.
        server_name: Its name (used in messages, events and logs).
        transport: How to reach it.
        connect_timeout: Bound for spawn/connect + ``initialize``, seconds.
        call_timeout: Default bound for one request (tool call, listing), seconds.
        ping_interval: Seconds between health pings while connected; 0 disables.
        ping_timeout: Bound for one ping, seconds.
        intensity: Restarts allowed per period before the circuit opens.
        backoff: Delay policy between restarts.
        mailbox_capacity: Requests that may queue before senders wait.
        negotiate: ``"auto"`` (default, as the SDK's ``Client``): probe ``server/discover``
            first and speak 2026-07-28 with a server that offers it, falling back to the
            handshake; ``"legacy"``: only the ``initialize`` handshake (2025-06-18 / 2025-11-25).
        host: The runtime's host callbacks (sampling, elicitation, roots); ``None`` offers none.
        allow_sampling: The record lets this server sample through the host (``config.allowSampling``).
        allow_elicitation: The record lets this server elicit (``config.allowElicitation``).
        allow_roots: The record lets this server list the host's roots (``config.allowRoots``).
        reset_timeout_on_progress: Progress restarts a tool call's timeout (bounded by
            ``max_total_timeout``).
        max_total_timeout: Hard bound on one tool call, seconds, whatever its progress.
        log_level: The server log level asked for: sent as ``logging/setLevel`` on every
            connect when the server can log (handshake revisions), or stamped on every
            request as its log opt-in (2026-07-28).
    """

    server_id: str
    server_name: str
    transport: TransportParams
    connect_timeout: float = 30.0
    call_timeout: float = 120.0
    ping_interval: float = 30.0
    ping_timeout: float = 10.0
    intensity: Intensity = Intensity(max_restarts=5, period=60.0)
    backoff: Backoff = Backoff(min_delay=0.5, max_delay=30.0, jitter=0.2, reset_after=60.0)
    mailbox_capacity: int = 256
    negotiate: str = attrs.field(default="auto", validator=attrs.validators.in_(("legacy", "auto")))
    # -- host callbacks (issue 12 item 1): what the host offers, and what this server's record allows
    host: HostCallbacks | None = None
    allow_sampling: bool = True
    allow_elicitation: bool = True
    allow_roots: bool = True
    reset_timeout_on_progress: bool = False
    max_total_timeout: float = 3600.0
    log_level: str | None = None

    def session_bound(self) -> float:
        """Seconds a caller may wait for a live session.

        The worst case is a caller arriving just after a crash: it sits out the longest
        restart backoff (with its jitter) while the old connection is closed, then one
        connect attempt of the next incarnation. A request's own timeout starts after that.
        """
        backoff = self.backoff
        return backoff.max_delay * (1 + backoff.jitter) + STOP_BOUND + self.connect_timeout


@attrs.frozen(kw_only=True)
class ConnectionStatus:
    """A snapshot of one server's connection.

    Attributes:
        state: The connection state.
        error: Why the last attempt or connection failed, if it did.
        circuit_open: The server exceeded its restart intensity and waits for a reconnect.
        process: The stdio server's process (PID with its create time) while it runs.
        restarts: How many times the actor was restarted since the slot (re)started.
        tools_epoch: Increases whenever the server's tool list may have changed
            (every new connection, every ``tools/list_changed``); caches compare it.
        calls_in_flight: Requests (tool calls, listings, pings) running on the live session.
        stderr_tail: The server's last stderr lines (stdio only).
        server_info: The server's name/version from ``initialize``, if connected once.
        resources_epoch: Like ``tools_epoch``, for resources and templates (``resources/list_changed``).
        prompts_epoch: Like ``tools_epoch``, for prompts (``prompts/list_changed``).
    """

    server_id: str
    server_name: str
    state: ConnectionState = ConnectionState.DISCONNECTED
    error: str | None = None
    circuit_open: bool = False
    process: ProcessIdentity | None = None
    restarts: int = 0
    tools_epoch: int = 0
    calls_in_flight: int = 0
    stderr_tail: tuple[str, ...] = ()
    server_info: tuple[str, str] | None = None
    resources_epoch: int = 0
    prompts_epoch: int = 0

    @property
    def pid(self) -> int | None:
        """The stdio server's PID while it runs (``process.pid``); pair it with ``process.create_time``."""
        return self.process.pid if self.process is not None else None


_STATUS_FIELDS: Final = tuple(field.name for field in attrs.fields(ConnectionStatus))
_status_values: Final = operator.attrgetter(*_STATUS_FIELDS)


def _evolved(status: ConnectionStatus, changes: dict[str, Any]) -> ConnectionStatus:
    """``attrs.evolve`` for the status at a third of its cost: every connect changes it twice (issue 15)."""
    values = dict(zip(_STATUS_FIELDS, _status_values(status), strict=True))
    values.update(changes)
    return ConnectionStatus(**values)


@attrs.define(eq=False)
class _StatusCell:
    """The server's published state: written only by its actor and slot; handles read it.

    Attributes:
        status: The latest snapshot.
        bus: Where state changes are emitted.
        live: The connected session, exactly while the state is ``connected``: the
            handle's way to a session without a mailbox round trip.
        stderr: The running server's stderr (stdio), for live tails and waits.
    """

    status: ConnectionStatus
    bus: events.EventBus
    live: LiveSession | None = None
    stderr: StderrTail | None = None
    listings: ListingCache = attrs.field(factory=ListingCache)
    """The connection's listings: written by its actor only (:mod:`mcp_actors._cache`)."""
    tasks: TaskStatusWatch = attrs.field(factory=TaskStatusWatch)
    """The task calls running on the connection, for the server's pushed statuses."""
    listener: Listener | None = None
    """The 2026-07-28 session's ``subscriptions/listen`` owner (``None`` on the handshake revisions)."""
    log_level: tuple[ClientSession, str] | None = None
    """A run-time ``set_log_level`` for that session: it lasts until the next connect, as on legacy."""
    stop_reason: str | None = None
    """Why the slot is being stopped (``"the server was disabled"``), set by whoever closes its
    mailbox (:meth:`ConnectionHandle.aclose`): what its ending calls and waiters are told."""

    def set(self, **changes: Any) -> None:
        self.status = _evolved(self.status, changes)

    def transition(self, state: ConnectionState, *, error: str | None = None, **changes: Any) -> None:
        previous = self.status.state
        changes["state"] = state
        changes["error"] = error
        self.status = _evolved(self.status, changes)
        if previous is state and state is not ConnectionState.ERROR:
            return
        data = {"serverId": self.status.server_id, "serverName": self.status.server_name}
        self.bus.emit(
            events.CONNECTION_STATE,
            **data,
            state=state.value,
            previous=previous.value,
            error=error,
            circuitOpen=self.status.circuit_open,
        )
        if state is ConnectionState.CONNECTED:
            self.bus.emit(events.SERVER_CONNECTED, **data)

    def bump_tools_epoch(self) -> None:
        self.status = attrs.evolve(self.status, tools_epoch=self.status.tools_epoch + 1)

    def bump_resources_epoch(self) -> None:
        self.status = attrs.evolve(self.status, resources_epoch=self.status.resources_epoch + 1)

    def bump_prompts_epoch(self) -> None:
        self.status = attrs.evolve(self.status, prompts_epoch=self.status.prompts_epoch + 1)

    def epoch(self, kind: ListingKind) -> int:
        """The current epoch of a listing kind (a ``list_changed`` moves it on)."""
        status = self.status
        if kind is ListingKind.TOOLS:
            return status.tools_epoch
        if kind is ListingKind.PROMPTS:
            return status.prompts_epoch
        return status.resources_epoch


@attrs.define(eq=False)
class _Slot:
    """What outlives one incarnation of a server's actor.

    Attributes:
        settings: The server's settings.
        inbox: The mailbox's receive end (the mailbox belongs to the slot).
        cell: The published status.
        carried: Requests an ending incarnation received but did not serve; the next
            incarnation (or the park) answers them first.
        failure: Why the current incarnation ended; ``None`` while it lives. The one
            record of a crash's reason.
    """

    settings: ConnectionSettings
    inbox: trio.MemoryReceiveChannel[ConnectionMessage]
    cell: _StatusCell
    carried: list[ConnectionMessage] = attrs.field(factory=list)
    failure: McpActorsError | None = None

    def stopped_error(self) -> ActorStopped:
        name = self.settings.server_name
        why = self.cell.stop_reason or "the server was removed or the runtime is closing"
        return ActorStopped(f"server {name!r}: its connection actor stopped ({why})", server=name)


@attrs.define(eq=False)
class _SessionRun:
    """One session task, from spawn to close.

    Attributes:
        scope: Bounds the connect phase (the connect timeout); cancelled to abandon it.
        live: The session once ``initialize`` succeeded.
        close_why: Set when a close was requested (disconnect, reconnect, removal): the
            end is then not a failure.
        watch: The connected life's current scope (its wait for the next ping, or the
            ping): cancelled to close gracefully (a callback, not a task waiting for an
            event). A close request sets ``close_why`` first, so a scope not entered yet
            is never waited in.
        done: Set when the session and its transport are closed.
    """

    scope: trio.CancelScope | None = None
    live: LiveSession | None = None
    close_why: str | None = None
    watch: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)


_FillKey = tuple[ListingKind, LiveSession, int]
"""A listing fill: its kind, the connection it lists on, and the epoch it belongs to."""


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


class _ConnectionActor:
    """One incarnation of a server's actor; restarted by the slot's supervisor.

    It owns the mailbox loop, at most one session task at a time, and the requests
    waiting for that session (``_waiters``, and ``_cold_fills``: listings asked for before
    it existed). It never runs a request itself.
    """

    def __init__(self, slot: _Slot, *, eager: bool) -> None:
        self.slot = slot
        self.settings = slot.settings
        self.cell = slot.cell
        self.label = slot.settings.server_name
        self.eager = eager
        self._nursery: trio.Nursery | None = None
        self._inbox_scope = trio.CancelScope()
        self._session: _SessionRun | None = None
        self._waiters: list[Reply[LiveSession]] = []
        self._cold_fills: list[FillListing] = []
        """Listings asked for with no connection: filled on the one being made, or failed with it."""

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the mailbox until it closes; raise (crash) when the connection dies.

        Returns normally when the mailbox closes, or when the failure is one no restart
        can fix (the slot then parks the server).
        """
        slot = self.slot
        slot.failure = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started(None)
                carried, slot.carried = slot.carried, []
                if self.eager and not carried:
                    self._start_session()
                for message in carried:
                    self._dispatch(message)
                with self._inbox_scope:
                    async for message in slot.inbox:
                        self._dispatch(message)
                if slot.failure is None:
                    # The mailbox closed: the server was removed or the runtime is closing.
                    self._answer_waiters(slot.stopped_error())
                    with trio.move_on_after(STOP_BOUND) as scope:
                        scope.shield = True
                        await self._close(self.cell.stop_reason or "the server was removed")
                    nursery.cancel_scope.cancel()
        finally:
            self._answer_waiters(slot.failure or slot.stopped_error())
        if slot.failure is None or isinstance(slot.failure, ServerMisconfigured):
            return
        raise slot.failure

    def _dispatch(self, message: ConnectionMessage) -> None:
        """Take one request; never waits (long work runs in the nursery)."""
        if self.slot.failure is not None:
            # This incarnation has ended: the next one serves the request (or the park answers it).
            self.slot.carried.append(message)
            return
        match message:
            case Connect(reply=reply):
                if self.cell.live is not None:
                    reply.send(self.cell.live)
                    return
                self._waiters.append(reply)
                self._start_session()
            case Disconnect(reply=reply):
                assert self._nursery is not None
                self._nursery.start_soon(self._disconnect, reply)
            case Reconnect(reply=reply):
                self._waiters.append(reply)
                run = self._session
                if run is not None and run.live is not None:
                    self._request_close(run, "reconnecting")  # the next session starts when it is closed
                else:
                    self._start_session()  # joins an attempt under way
            case FillListing():
                self._fill_listing(message)
            case _:
                raise TypeError(f"unknown message for a connection actor: {message!r}")

    def _fill_listing(self, message: FillListing) -> None:
        """Answer a listing miss from the cache, or join (or start) the one fill of it."""
        live = message.live
        if live is None:
            live = self.cell.live
            if live is None:  # cold: connect (or join the attempt) and list on that connection
                self._cold_fills.append(message)
                self._start_session()
                return
        if live is not self.cell.live or live.lost is not None:
            message.reply.fail(SessionEnded(self.label))  # the caller asks again on the current connection
            return
        key = self._demand(message, live)
        if key is not None:
            assert self._nursery is not None
            self._nursery.start_soon(self._run_fill, key)

    def _demand(self, message: FillListing, live: LiveSession) -> _FillKey | None:
        """Join ``message`` to its listing's fill on ``live`` (or answer it from the cache).

        Returns the fill's key when the fill is new and someone must run it, else ``None``.
        """
        key = (message.kind, live, self.cell.epoch(message.kind))
        return key if self.cell.listings.demand(key, message.reply, message.max_age) else None

    async def _run_fill(self, key: _FillKey) -> None:
        """A fill task: one listing on a connected session."""
        try:
            await self._fill(key)
        except BaseException:
            self.cell.listings.settle(key, self.slot.stopped_error(), publish=False)  # the actor is stopping
            raise

    async def _fill(self, key: _FillKey) -> None:
        """Fetch one listing on the connection (bounded by the call timeout) and settle it: the only cache writer.

        Raises only what cancels it (it is then not settled: the caller settles it).
        """
        kind, live, epoch = key
        listings = self.cell.listings
        try:
            items = await live.request(
                kind.value,
                live_op=lambda live: fetch_listing(live.session, kind, self.label, live.send_raw),
                timeout=self.settings.call_timeout,
            )
        except (McpActorsError, SessionEnded) as exc:
            listings.settle(key, exc, publish=False)
        else:
            current = live is self.cell.live and epoch == self.cell.epoch(kind)
            listing = make_listing(kind, live, epoch, items)
            if kind is ListingKind.TOOLS:
                # The lean tools/call checks output schemas and header params against these.
                live.tool_defs = dict(listing.by_name)
            listings.settle(key, listing, publish=current)

    def _answer_waiters(self, outcome: LiveSession | McpActorsError) -> None:
        waiters, self._waiters = self._waiters, []
        for reply in waiters:
            if isinstance(outcome, LiveSession):
                reply.send(outcome)
            else:
                reply.fail(outcome)
        if isinstance(outcome, LiveSession):
            return  # the listings asked for cold are the session task's first fills (:meth:`_connected`)
        fills, self._cold_fills = self._cold_fills, []
        for message in fills:
            message.reply.fail(outcome)

    def _die(self, failure: McpActorsError, live: LiveSession | None) -> None:
        """End this incarnation, in one step with no checkpoint (the order is the contract).

        Record the failure; stop taking requests (later ones wait for the next
        incarnation); publish the state ``error``; only then fail the requests running
        on the session and the ones waiting for it.
        """
        self.slot.failure = failure
        self._inbox_scope.cancel()
        self.cell.live = None
        tail = failure.stderr_tail if isinstance(failure, ConnectionFailed) else ()
        self.cell.transition(ConnectionState.ERROR, error=str(failure), stderr_tail=tail)
        if live is not None:
            lost = failure if isinstance(failure, ConnectionFailed) else self._lost_error(live)
            live.end(lost)
        self._answer_waiters(failure)

    # ------------------------------------------------------------------ sessions

    def _start_session(self) -> None:
        """Start a session task unless one runs (its end starts the next one if demand is left)."""
        if self._session is not None:
            return
        run = _SessionRun()
        self._session = run
        assert self._nursery is not None
        self._nursery.start_soon(self._run_session, run)

    async def _run_session(self, run: _SessionRun) -> None:
        try:
            await self._session_life(run)
        finally:
            run.done.set()
            if self._session is run:
                self._session = None
            stopping = trio.current_effective_deadline() == -math.inf
            if (self._waiters or self._cold_fills) and self.slot.failure is None and not stopping:
                self._start_session()  # demand arrived while the previous session was closing

    async def _session_life(self, run: _SessionRun) -> None:
        """Own one connection from spawn to close; on a death, end the incarnation."""
        settings, cell = self.settings, self.cell
        cell.transition(ConnectionState.CONNECTING)
        link: TransportLink | None = None
        failure: McpActorsError | None = None
        with trio.CancelScope(deadline=trio.current_time() + settings.connect_timeout) as scope:
            run.scope = scope
            if run.close_why is not None:
                # A close requested before this task first ran found no scope to cancel.
                scope.cancel()
            try:
                async with open_transport(settings.transport, label=self.label) as link:
                    try:
                        cell.set(process=link.process)
                        cell.stderr = link.stderr
                        # Host callbacks: fixed for the session's life, as its handshake declared them.
                        offered = settings.host.offers(settings) if settings.host is not None else frozenset()
                        host_kwargs = settings.host.session_kwargs(settings) if settings.host is not None else {}
                        # One dispatcher for every transport (issue 15): the link's own wire, or its streams.
                        dispatcher = WireDispatcher(
                            link.wire or StreamWire(link.read_stream, link.write_stream),
                            # Task statuses are types-only in the SDK's method tables: handled by the
                            # dispatcher (the SDK's notification_bindings would cost a task per session).
                            bound={
                                "notifications/tasks/status": BoundNotification(
                                    params_type=mcp_types.TaskStatusNotificationParams, handler=self._on_task_status
                                )
                            },
                        )
                        session = ClientSession(
                            dispatcher=dispatcher,
                            message_handler=self._on_message,
                            logging_callback=self._on_log,
                            client_info=CLIENT_INFO,
                            **host_kwargs,
                        )
                        async with session:
                            result = await _handshake(session, settings.negotiate)
                            if isinstance(result, mcp_types.InitializeResult):
                                await self._apply_log_level(session)
                            else:
                                # 2026-07-28: server events ride one subscriptions/listen stream.
                                cell.listener = Listener(
                                    session=session, label=self.label, on_reopen=self._listen_reopened
                                )
                            scope.deadline = math.inf
                            run.live = LiveSession(
                                session=session,
                                link=link,
                                label=self.label,
                                offered=offered,
                                dispatcher=dispatcher,
                                stamp=RequestStamp.negotiated(
                                    session, client_info=CLIENT_INFO, host_kwargs=host_kwargs
                                ),
                            )
                            first = self._connected(run.live, result)
                            await self._connected_life(run, run.live, first)
                    finally:
                        if run.live is None:
                            link.abandoned = True  # never connected: killed at once, no graceful close
            except BaseException as exc:
                failure = self._classify(exc, link)
                if failure is None:
                    raise
            finally:
                cell.listener = None
                if run.live is not None:
                    self._end_closed(run, run.live)  # the actor is stopping: nobody may wait on it
        cell.stderr = None
        cell.set(process=None, stderr_tail=link.stderr_tail() if link is not None else ())
        if self.slot.failure is not None:
            return  # the death was declared while connected
        if run.close_why is not None:
            if not (self._waiters or self._cold_fills):
                cell.transition(ConnectionState.DISCONNECTED)
            return
        if failure is None and run.live is None and scope.cancelled_caught:
            note = link.describe_garbage() if link is not None else ""
            failure = ConnectTimeout(
                f"server {self.label!r} did not finish connecting within {settings.connect_timeout:g}s"
                + (f" ({note})" if note else "")
                + "; check that it starts and speaks MCP on stdout, or raise config.connectTimeout",
                server=self.label,
                stderr_tail=link.stderr_tail() if link is not None else (),
            )
        if failure is None and run.live is not None:
            failure = self._lost_error(run.live)
        if failure is None:
            return  # cancelled from outside (the actor is stopping)
        self._die(failure, run.live)

    async def _apply_log_level(self, session: ClientSession) -> None:
        """Ask the server for the record's log level (``logLevel``), when it can log at all."""
        level = self.settings.log_level
        caps = session.server_capabilities
        if level is None or caps is None or caps.logging is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MCPDeprecationWarning: deprecated only in 2026-07-28
            await session.set_logging_level(level)  # type: ignore[arg-type]

    def _connected(
        self, live: LiveSession, result: mcp_types.InitializeResult | mcp_types.DiscoverResult
    ) -> list[_FillKey]:
        """Publish the connection and answer its waiters; the listings asked for cold are the fills it returns.

        Those fills are the session task's to run (:meth:`_watch`), not a fill task's:
        at a runtime's start every server's first listing is one of them.
        """
        info = live.session.server_info if isinstance(result, mcp_types.DiscoverResult) else result.server_info
        cell = self.cell
        cell.listings.forget()
        cell.live = live
        status = cell.status
        # Every listing epoch moves on (a new session's lists are new), in the state's one evolve.
        cell.transition(
            ConnectionState.CONNECTED,
            server_info=(info.name, info.version) if info is not None else None,
            tools_epoch=status.tools_epoch + 1,
            resources_epoch=status.resources_epoch + 1,
            prompts_epoch=status.prompts_epoch + 1,
        )
        cold, self._cold_fills = self._cold_fills, []
        self._answer_waiters(live)
        return [key for message in cold if (key := self._demand(message, live)) is not None]

    async def _connected_life(self, run: _SessionRun, live: LiveSession, first: list[_FillKey]) -> None:
        """Run the first listings, then watch the connection until it dies or a close is requested.

        The session's own task does it: it lists what was asked for before the connection
        existed, waits for the death and pings between waits (no fill task, no ping task,
        no close watcher: a close request cancels :attr:`_SessionRun.watch`). Only a
        2026-07-28 session adds a task, its ``subscriptions/listen`` stream.
        """
        left = list(first)
        try:
            listener = self.cell.listener
            if listener is None or listener.session is not live.session:
                await self._watch(run, live, left)
            else:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(listener.run)
                    await self._watch(run, live, left)
                    nursery.cancel_scope.cancel()
            if run.close_why is not None:
                self._end_closed(run, live)
        finally:
            # First listings a death or a close interrupted get that end (the session's
            # error, as a fill task's request would have); if the actor is stopping, its stop.
            for key in left:
                self.cell.listings.settle(key, live.lost or self.slot.stopped_error(), publish=False)

    async def _watch(self, run: _SessionRun, live: LiveSession, first: list[_FillKey]) -> None:
        """Run the ``first`` fills, then wait for the link's death, pinging every ``ping_interval``; declare it at once.

        Returns when the link died (the death declared, unless a close was requested) or
        when :attr:`_SessionRun.watch` is cancelled by a close request. ``first`` is emptied
        as its fills are settled: what is left in it then, a death or a close interrupted.
        """
        interval = self.settings.ping_interval
        dead = live.link.dead
        while run.close_why is None and not dead.is_set():
            # One scope per wait (not a watch scope around a timer scope): its deadline is the
            # next ping, and a close request cancels it (it is the run's ``watch`` meanwhile).
            deadline = trio.current_time() + interval if interval > 0 and not first else math.inf
            with trio.CancelScope(deadline=deadline) as run.watch:
                if first:
                    # The first listings, in this task with no deadline (each request has its
                    # own): the link cancels the wait as it dies, since the death is declared
                    # here, after it, and a close request cancels it as any wait here.
                    live.link.cancel_on_death(run.watch)
                    while first:
                        await self._fill(first[0])
                        del first[0]
                    if interval > 0:
                        run.watch.deadline = trio.current_time() + interval
                await dead.wait()
            if run.close_why is None and not dead.is_set():
                with trio.CancelScope() as run.watch:
                    await self._ping(live)
        if run.close_why is None:
            self._die(self._lost_error(live), live)  # at once: no checkpoint since the death was seen

    async def _ping(self, live: LiveSession) -> None:
        """One health ping, bounded by ``ping_timeout``; silence marks the transport dead.

        A death during the ping ends it at once (the dispatcher answers every waiter when
        its wire dies), and the watch then declares that death.
        """
        timeout = self.settings.ping_timeout
        with trio.move_on_after(timeout) as scope:
            try:
                await _probe(live.session)
            except MCPError as exc:
                logger.debug("server %s: ping failed: %s", self.label, exc)
            except Exception:
                if not live.link.dead.is_set():
                    raise
        if scope.cancelled_caught:
            live.link.die(f"the server did not answer a ping within {timeout:g}s")

    def _end_closed(self, run: _SessionRun, live: LiveSession) -> None:
        """A requested close (or the actor stopping): fail what still runs on the session, not a death."""
        if live.lost is not None:
            return
        self.cell.live = None
        live.end(
            ServerConnectionLost(
                f"server {self.label!r}: the connection was closed ({run.close_why or 'its actor stopped'})"
                " during the request",
                server=self.label,
            )
        )

    def _request_close(self, run: _SessionRun, why: str) -> None:
        """Ask a session to close: a connected one gracefully, an attempt by abandoning it."""
        if run.close_why is None:
            run.close_why = why
        if run.live is not None:
            run.watch.cancel()
            return
        self._answer_waiters(
            ConnectionFailed(f"server {self.label!r}: connection attempt abandoned: {why}", server=self.label)
        )
        if run.scope is not None:
            run.scope.cancel()

    async def _close(self, why: str) -> None:
        run = self._session
        if run is None:
            self.cell.transition(ConnectionState.DISCONNECTED)
            return
        self._request_close(run, why)
        with trio.move_on_after(STOP_BOUND):
            await run.done.wait()

    async def _disconnect(self, reply: Reply[None]) -> None:
        try:
            await self._close("disconnect requested")
        finally:
            reply.send(None)

    def _listen_reopened(self) -> None:
        """A lost listen stream is open again: what changed meanwhile was not replayed, so refetch all."""
        ids = {"serverId": self.settings.server_id, "serverName": self.label}
        cell = self.cell
        cell.bump_tools_epoch()
        cell.bump_resources_epoch()
        cell.bus.emit(events.TOOLS_CHANGED, **ids)
        cell.bus.emit(events.RESOURCES_CHANGED, **ids)
        if cell.listener is not None:
            for uri in cell.listener.uris:
                cell.bus.emit(events.RESOURCE_UPDATED, **ids, uri=uri)

    async def _on_message(self, message: Any) -> None:
        ids = {"serverId": self.settings.server_id, "serverName": self.label}
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.cell.bump_tools_epoch()
            self.cell.bus.emit(events.TOOLS_CHANGED, **ids)
        elif isinstance(message, mcp_types.ResourceListChangedNotification):
            self.cell.bump_resources_epoch()
            self.cell.bus.emit(events.RESOURCES_CHANGED, **ids)
        elif isinstance(message, mcp_types.PromptListChangedNotification):
            self.cell.bump_prompts_epoch()
        elif isinstance(message, mcp_types.ElicitCompleteNotification):
            # The URL-mode interaction ended out of band; a host UI waiting for it may stop (2025-11-25).
            self.cell.bus.emit(events.ELICITATION_COMPLETE, **ids, elicitationId=message.params.elicitation_id)
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            self.cell.bus.emit(events.RESOURCE_UPDATED, **ids, uri=str(message.params.uri))
        elif isinstance(message, Exception):
            logger.warning("server %s: transport reported %s: %s", self.label, type(message).__name__, message)

    async def _on_task_status(self, params: mcp_types.TaskStatusNotificationParams) -> None:
        """A pushed task status: to the call running that task, else published as ``task:status``."""
        if not self.cell.tasks.deliver(params):
            self.cell.bus.emit(
                events.TASK_STATUS,
                serverId=self.settings.server_id,
                serverName=self.label,
                taskId=params.task_id,
                status=params.status,
                message=params.status_message,
            )

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        """A server's log message: to stdlib logging (``mcp_actors.server.<name>``) and the bus."""
        level = _LOG_LEVELS.get(params.level, logging.INFO)
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        server_logger(self.label).log(level, "%s", data, extra={"mcp_logger": params.logger, "mcp_level": params.level})
        self.cell.bus.emit(
            events.SERVER_LOG,
            serverId=self.settings.server_id,
            serverName=self.label,
            level=params.level,
            logger=params.logger,
            data=params.data,
        )

    # ------------------------------------------------------------------ errors

    def _classify(self, exc: BaseException, link: TransportLink | None) -> McpActorsError | None:
        """Map what escaped a connection to one typed error; None means re-raise it.

        Anything that is not an ``Exception`` (Cancelled, KeyboardInterrupt) propagates.
        """
        leaves = _leaves(exc)
        if any(not isinstance(leaf, Exception) for leaf in leaves):
            return None
        for leaf in leaves:
            if isinstance(leaf, McpActorsError):
                return leaf
        leaf = leaves[0]
        logger.debug("server %s: connection failed", self.label, exc_info=exc)
        if isinstance(leaf, MCPError):
            return self._connect_error(link, f"the server answered with an error: {leaf.error.message}")
        return self._connect_error(link, f"{type(leaf).__name__}: {leaf}")

    def _connect_error(self, link: TransportLink | None, detail: str) -> ConnectionFailed:
        tail = link.stderr_tail() if link is not None else ()
        reason = link.death_reason if link is not None and link.death_reason else None
        if reason == "closed by the client":
            reason = None  # our own clean-up after the failure, not its cause: the detail says more
        garbage = link.describe_garbage() if link is not None else ""
        parts = [f"server {self.label!r} failed to connect: {reason or detail}"]
        if garbage:
            parts.append(garbage)
            return ServerProtocolError("; ".join(parts), server=self.label, stderr_tail=tail)
        parts.append("check the command/url and run `mcp-actors test` on it")
        return ServerStartFailed("; ".join(parts), server=self.label, stderr_tail=tail)

    def _lost_error(self, live: LiveSession) -> ServerConnectionLost:
        reason = live.link.death_reason or "the connection closed"
        return ServerConnectionLost(
            f"server {self.label!r}: connection lost: {reason}",
            server=self.label,
            stderr_tail=live.link.stderr_tail(),
        )


def _is_modern(session: ClientSession) -> bool:
    """Whether the session negotiated 2026-07-28 (or later) through ``server/discover``."""
    return session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def _probe(session: ClientSession) -> None:
    """The health probe: ``ping`` on the handshake revisions; 2026-07-28 has no ping, so ``server/discover``."""
    if _is_modern(session):
        await session.send_discover(session.protocol_version or "")
    else:
        await session.send_ping()


async def _handshake(session: ClientSession, negotiate: str) -> mcp_types.InitializeResult | mcp_types.DiscoverResult:
    """Negotiate the protocol revision: the handshake, or (``auto``) ``server/discover`` first."""
    if negotiate == "auto":
        await negotiate_auto(session)
        discovered = session.discover_result
        if discovered is not None:
            return discovered
        initialized = session.initialize_result
        assert initialized is not None  # negotiate_auto sets one of the two or raises
        return initialized
    return await session.initialize()


# ---------------------------------------------------------------------- the slot


async def _park(slot: _Slot, cause: BaseException | None) -> Reconnect | None:
    """Answer every request with ServerCircuitOpen until a Reconnect (or the mailbox closes)."""
    settings = slot.settings
    reason = str(cause) if cause is not None else "too many failures"
    tail = cause.stderr_tail if isinstance(cause, ConnectionFailed) else ()
    slot.cell.transition(ConnectionState.ERROR, error=reason, circuit_open=True, process=None)
    # A misconfiguration opens the circuit at once: no retry was made, none can help.
    why = "because no retry can fix this" if isinstance(cause, ServerMisconfigured) else "after repeated failures"

    def answer(message: ConnectionMessage) -> Reconnect | None:
        match message:
            case Reconnect():
                return message
            case Disconnect():
                message.reply.send(None)
            case _:
                message.reply.fail(
                    ServerCircuitOpen(
                        f"server {settings.server_name!r} is parked in error {why} ({reason}); fix it"
                        " and call reconnect",
                        server=settings.server_name,
                        stderr_tail=tail,
                    )
                )
        return None

    while slot.carried:
        reconnect = answer(slot.carried.pop(0))
        if reconnect is not None:
            return reconnect
    async for message in slot.inbox:
        reconnect = answer(message)
        if reconnect is not None:
            return reconnect
    return None


def _stop_mailbox(slot: _Slot) -> None:
    """Answer every request still queued with ActorStopped, and close the mailbox for good."""
    pending, slot.carried = slot.carried, []
    while True:
        try:
            pending.append(slot.inbox.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
    slot.inbox.close()
    for message in pending:
        message.reply.fail(slot.stopped_error())


async def run_connection_slot(
    settings: ConnectionSettings,
    inbox: trio.MemoryReceiveChannel[ConnectionMessage],
    cell: _StatusCell,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one server's actor, supervised in this task, until its mailbox closes.

    The slot supervises its actor itself (one_for_one, the settings' intensity and backoff,
    see :func:`_restart_loop`): it restarts the actor after every crash; past the intensity
    the server is parked with its circuit open until a :class:`Reconnect` arrives, which
    starts the count afresh. When the slot
    ends (its mailbox closed, or cancelled) every request still queued is answered
    :class:`~mcp_actors.errors.ActorStopped` and the mailbox is closed.
    """
    slot = _Slot(settings=settings, inbox=inbox, cell=cell)
    task_status.started(None)
    try:
        await _supervise(slot)
    except Exception:
        raise  # a bug: the supervisor above may restart this slot with the same mailbox
    except BaseException:
        _stop_mailbox(slot)
        raise
    _stop_mailbox(slot)


async def _supervise(slot: _Slot) -> None:
    """Run incarnations until the mailbox closes; park the server when they fail too often."""
    cell = slot.cell
    while True:
        cause = await _restart_loop(slot)
        if isinstance(slot.failure, ServerMisconfigured):
            cause = slot.failure  # no restart can fix it: the circuit opens at once
        if cause is None:
            return
        reconnect = await _park(slot, cause)
        if reconnect is None:
            return
        cell.set(circuit_open=False, restarts=0)
        slot.carried.insert(0, reconnect)


async def _restart_loop(slot: _Slot) -> Exception | None:
    """The slot's supervisor: one_for_one around its one transient actor, in the slot's own task.

    OTP's rules for a single transient child (:mod:`supervisors._policy`'s pure functions):
    an actor that returns is not restarted; one that crashes is restarted after
    :func:`~supervisors.backoff_delay` (reset after ``reset_after`` seconds of running),
    eagerly connecting; more than ``intensity.max_restarts`` crashes within
    ``intensity.period`` give up. No supervisor object, manager task or nursery per server:
    the actor runs right here, and cancelling this task stops it (its close is bounded).

    Returns:
        ``None`` when the actor returned; the last crash's error when the intensity was exceeded.
    """
    settings, cell = slot.settings, slot.cell
    intensity, backoff = settings.intensity, settings.backoff
    restarts: tuple[float, ...] = ()
    backoff_n = 0
    eager = False
    while True:
        started_at = trio.current_time()
        try:
            await _ConnectionActor(slot, eager=eager).run()
        except Exception as exc:
            error = exc
        else:
            return None
        now = trio.current_time()
        restarts = add_restart(restarts, now, intensity.period)
        if len(restarts) > intensity.max_restarts:
            logger.error(
                "server %s: giving up after %d restarts within %g s: %s",
                settings.server_name,
                len(restarts),
                intensity.period,
                error,
            )
            return error
        if now - started_at >= backoff.reset_after:
            backoff_n = 0
        delay = backoff_delay(backoff, backoff_n, random.random())
        backoff_n += 1
        logger.warning(
            "server %s: connection actor crashed: %s: %s; restarting in %.2f s",
            settings.server_name,
            type(error).__name__,
            error,
            delay,
        )
        await trio.sleep(delay)
        cell.set(restarts=cell.status.restarts + 1)
        eager = True


# ---------------------------------------------------------------------- the handle


@attrs.define(eq=False)
class ConnectionHandle:
    """The caller's side of one server's actor: typed requests, bounded waits.

    Every request runs in the caller's task over the live session; cancelling the caller
    cancels the request on the server too. Only getting that session (connecting, waiting
    through a restart) goes through the actor's mailbox.
    """

    settings: ConnectionSettings
    _mailbox: Mailbox[ConnectionMessage]
    _cell: _StatusCell

    @property
    def server_id(self) -> str:
        """The server record's id."""
        return self.settings.server_id

    def status(self) -> ConnectionStatus:
        """The latest status snapshot (no round trip)."""
        status = self._cell.status
        live = self._cell.live
        in_flight = live.requests_in_flight if live is not None else 0
        if status.calls_in_flight != in_flight:
            status = attrs.evolve(status, calls_in_flight=in_flight)
        return status

    def stderr_tail(self, n: int = 20) -> tuple[str, ...]:
        """The server's last stderr lines, live while it runs (stdio only)."""
        live = self._cell.stderr
        return live.lines(n) if live is not None else self._cell.status.stderr_tail[-n:]

    async def wait_for_stderr(self, predicate: Callable[[str], bool]) -> str:
        """Wait until the running server writes a stderr line satisfying ``predicate``.

        Unbounded: wrap it in ``trio.fail_after``. Raises ``RuntimeError`` when the server
        is not running.
        """
        live = self._cell.stderr
        if live is None:
            raise RuntimeError(f"server {self.settings.server_name!r} has no running process")
        return await live.wait_for(predicate)

    async def _ask(self, build: Callable[[Reply[T]], ConnectionMessage], *, bound: float) -> T:
        try:
            with trio.fail_after(bound):
                return await self._mailbox.ask(build)
        except (MailboxClosed, NoReply):
            raise ActorStopped(
                f"server {self.settings.server_name!r}: its connection actor is not running (removed or shutting down)",
                server=self.settings.server_name,
            ) from None
        except trio.TooSlowError:
            raise ConnectionFailed(
                f"server {self.settings.server_name!r} did not answer within {bound:g}s",
                server=self.settings.server_name,
            ) from None

    async def _live(self) -> LiveSession:
        """The live session: published while connected, else asked for (connecting, or after a restart)."""
        live = self._cell.live
        if live is not None:
            return live
        return await self._ask(lambda r: Connect(reply=r), bound=self.settings.session_bound())

    async def _request(
        self,
        what: str,
        op: Callable[[ClientSession], Awaitable[T]] | None = None,
        *,
        live_op: Callable[[LiveSession], Awaitable[T]] | None = None,
        timeout: float | None = None,
        tool: str | None = None,
        die_on_timeout: bool = False,
        progress: ProgressDeadline | None = None,
    ) -> T:
        """The one call path: get a live session, run the request on it in this task.

        ``op`` gets the SDK session; ``live_op`` gets the :class:`LiveSession` (requests we
        send through its dispatcher ourselves, ``tools/call``).
        """
        bound = timeout if timeout is not None else self.settings.call_timeout
        while True:
            live = self._cell.live or await self._live()
            try:
                return await live.request(
                    what,
                    op,
                    live_op=live_op,
                    timeout=bound,
                    tool=tool,
                    die_on_timeout=die_on_timeout,
                    progress=progress,
                )
            except SessionEnded:
                continue  # it ended before anything was sent: ask for the next one

    async def connect(self) -> None:
        """Connect if not connected (coalesced with an attempt under way)."""
        await self._live()

    async def _listing(self, kind: ListingKind, *, max_age: float) -> Listing:
        """A current listing of ``kind``: the published one, else the actor's one fill of it.

        A hit costs no round trip. A miss asks the actor, which joins every concurrent miss
        into one request (see :mod:`mcp_actors._cache`); giving up here never cancels it.
        With no connection the same one request has the actor connect first (a cold
        server's first listing is one round trip, not a connect and then a fill).
        """
        cell = self._cell
        while True:
            live = cell.live  # None: the actor connects first (a listing belongs to one connection)
            if live is not None:
                listing = cell.listings.lookup(kind, live, cell.epoch(kind), max_age)
                if listing is not None:
                    await trio.lowlevel.checkpoint()
                    return listing
            try:
                return await self._ask(
                    lambda r: FillListing(kind=kind, live=live, max_age=max_age, reply=r),  # noqa: B023
                    bound=self.settings.session_bound() + self.settings.call_timeout,
                )
            except SessionEnded:
                continue  # that connection ended before the fill began: list on the next one

    async def list_tools(self) -> tuple[mcp_types.Tool, ...]:
        """Every tool the server offers (all pages), fetched now (concurrent calls share one request)."""
        listing = await self._listing(ListingKind.TOOLS, max_age=0.0)
        return listing.items

    async def list_tools_at_epoch(self) -> tuple[tuple[mcp_types.Tool, ...], int]:
        """:meth:`list_tools`, with the ``tools_epoch`` the list belongs to (caches key on it).

        A ``notifications/tools/list_changed`` moves the status's ``tools_epoch`` on; a cache
        entry stamped with this epoch is stale from then on. Connects first when not
        connected, in the same request to the actor.
        """
        listing = await self._listing(ListingKind.TOOLS, max_age=0.0)
        return listing.items, listing.epoch

    async def tools_listing(self, *, max_age: float) -> Listing:
        """The connection's tool listing, no older than ``max_age`` seconds: the registry's cache fills from it.

        Like :meth:`list_tools_at_epoch`, with the whole :class:`~mcp_actors._cache.Listing`
        (its epoch and when it arrived); a listing a caller who gave up left behind answers
        the next caller while it is current.
        """
        return await self._listing(ListingKind.TOOLS, max_age=max_age)

    async def list_prompts(self) -> tuple[mcp_types.Prompt, ...]:
        """The server's prompts, all pages (empty when it has none); concurrent calls share one request."""
        listing = await self._listing(ListingKind.PROMPTS, max_age=0.0)
        return listing.items

    def _log_meta(self, session: ClientSession) -> mcp_types.RequestParamsMeta | None:
        """The request ``_meta`` that opts in to server log messages (2026-07-28), or ``None``."""
        if not _is_modern(session):
            return None
        override = self._cell.log_level
        level = override[1] if override is not None and override[0] is session else self.settings.log_level
        if level is None:
            return None
        meta: dict[str, Any] = {mcp_types.LOG_LEVEL_META_KEY: level}
        return meta  # type: ignore[return-value]  # RequestParamsMeta is a TypedDict with extra items

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> mcp_types.GetPromptResult:
        """One prompt rendered with its arguments (``prompts/get``).

        At 2026-07-28 a server may answer with an ``InputRequiredResult`` (it asks the user or
        the model before rendering): fulfilled through the host callbacks and retried, exactly
        as for ``tools/call``.

        Raises:
            ServerRequestFailed: The server answered with a JSON-RPC error (an unknown prompt,
                a missing argument, a refused question).
            ServerProtocolError: The server kept asking for input past the round cap.
        """

        async def op(session: ClientSession) -> mcp_types.GetPromptResult:
            async def send(
                responses: mcp_types.InputResponses | None, state: str | None
            ) -> mcp_types.GetPromptResult | mcp_types.InputRequiredResult:
                return await session.get_prompt(
                    name,
                    arguments,
                    input_responses=responses,
                    request_state=state,
                    meta=self._log_meta(session),
                    allow_input_required=True,
                )

            return await self._fulfilled(session, "prompts/get", send)

        return await self._request("prompts/get", op)

    async def list_resources(self) -> tuple[mcp_types.Resource, ...]:
        """The server's resources, all pages (empty when it has none).

        Cached per connection for :data:`RESOURCE_CACHE_TTL` seconds; a new connection or
        ``notifications/resources/list_changed`` invalidates the cache at once. Concurrent
        misses share one request, whose outcome (a failure too) each of them gets.
        """
        listing = await self._listing(ListingKind.RESOURCES, max_age=RESOURCE_CACHE_TTL)
        return listing.items

    async def list_resource_templates(self) -> tuple[mcp_types.ResourceTemplate, ...]:
        """The server's resource templates, all pages (empty when it has none); concurrent calls share one request."""
        listing = await self._listing(ListingKind.RESOURCE_TEMPLATES, max_age=0.0)
        return listing.items

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """Read one resource (text or blob contents).

        At 2026-07-28 a server may answer with an ``InputRequiredResult`` (a template that
        asks before it produces the resource): fulfilled through the host callbacks and
        retried, exactly as for ``tools/call``.

        Raises:
            ServerRequestFailed: The server answered with a JSON-RPC error (an unknown URI, a
                refused question).
            ServerProtocolError: The server kept asking for input past the round cap.
        """

        async def op(session: ClientSession) -> mcp_types.ReadResourceResult:
            async def send(
                responses: mcp_types.InputResponses | None, state: str | None
            ) -> mcp_types.ReadResourceResult | mcp_types.InputRequiredResult:
                return await session.read_resource(
                    uri,
                    input_responses=responses,
                    request_state=state,
                    meta=self._log_meta(session),
                    allow_input_required=True,
                )

            return await self._fulfilled(session, "resources/read", send)

        return await self._request("resources/read", op)

    async def _fulfilled(
        self,
        session: ClientSession,
        what: str,
        send: Callable[[mcp_types.InputResponses | None, str | None], Awaitable[T | mcp_types.InputRequiredResult]],
        *,
        tool: str | None = None,
    ) -> T:
        """Send a request that may answer ``InputRequiredResult`` (SEP-2322), and fulfil it until it is final.

        One home for the rule (``tools/call``, ``prompts/get``, ``resources/read``): the host
        callbacks answer the embedded requests, a refusal is raised at once (``MCPError``,
        reported by the call path as the server's error), and a server that keeps asking past
        :data:`~mcp_actors._callbacks.INPUT_REQUIRED_MAX_ROUNDS` rounds is a protocol error
        (:class:`ToolCallFailed` naming ``tool`` for a tool call). A final first answer, the
        usual case, is returned as it is.
        """
        first = await send(None, None)
        if not isinstance(first, mcp_types.InputRequiredResult):
            return first
        return await self._fulfil_rest(session, what, first, send, tool=tool)

    async def _fulfil_rest(
        self,
        session: ClientSession,
        what: str,
        first: mcp_types.InputRequiredResult,
        send: Callable[[mcp_types.InputResponses | None, str | None], Awaitable[T | mcp_types.InputRequiredResult]],
        *,
        tool: str | None = None,
    ) -> T:
        """:meth:`_fulfilled` once the first answer asked for input (``tools/call`` sends its first itself)."""
        name = self.settings.server_name
        try:
            return await fulfil_input_required(session, first, send)
        except InputRequiredRoundsExceededError:
            message = (
                f"server {name!r}: {what} still asked for input after {INPUT_REQUIRED_MAX_ROUNDS} rounds"
                " (InputRequiredResult); the server is at fault: report it to its authors"
            )
            if tool is not None:
                raise ToolCallFailed(message, server=name, tool=tool) from None
            raise ServerProtocolError(message, server=name) from None

    def _listener(self, session: ClientSession) -> Listener | None:
        """The session's listen-stream owner when it speaks 2026-07-28, else ``None``."""
        if not _is_modern(session):
            return None
        listener = self._cell.listener
        if listener is None or listener.session is not session:
            raise ServerConnectionLost(
                f"server {self.settings.server_name!r}: the connection closed during the request",
                server=self.settings.server_name,
            )
        return listener

    async def subscribe_resource(self, uri: str) -> None:
        """Ask for ``notifications/resources/updated`` about ``uri`` (emitted as ``resource:updated``).

        Up to 2025-11-25 this is ``resources/subscribe``. At 2026-07-28 the URI joins the
        connection's ``subscriptions/listen`` filter, and this returns once the server
        acknowledged it. Either way the subscription belongs to the connection.
        """

        async def op(session: ClientSession) -> None:
            listener = self._listener(session)
            if listener is not None:
                await listener.subscribe(uri)
                return
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MCPDeprecationWarning: deprecated only in 2026-07-28
                await session.subscribe_resource(uri)

        await self._request("resources/subscribe", op)

    async def unsubscribe_resource(self, uri: str) -> None:
        """Stop the updates about ``uri`` (at 2026-07-28: re-listen without it)."""

        async def op(session: ClientSession) -> None:
            listener = self._listener(session)
            if listener is not None:
                await listener.unsubscribe(uri)
                return
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MCPDeprecationWarning: deprecated only in 2026-07-28
                await session.unsubscribe_resource(uri)

        await self._request("resources/unsubscribe", op)

    async def complete(
        self,
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference,
        argument: dict[str, str],
        context: dict[str, str] | None = None,
    ) -> mcp_types.Completion:
        """Completion values for a prompt's or a resource template's argument."""

        async def op(session: ClientSession) -> mcp_types.Completion:
            return (await session.complete(ref, argument, context)).completion

        return await self._request("completion/complete", op)

    async def set_log_level(self, level: str) -> None:
        """Ask for server log messages at ``level`` and above, until the next connect.

        Up to 2025-11-25 this sends ``logging/setLevel`` (the record's ``logLevel`` is sent
        again on every connect). At 2026-07-28, where logging is a per-request opt-in, the
        level is stamped on every later request of this connection instead.
        """

        async def op(session: ClientSession) -> None:
            self._cell.log_level = (session, level)
            if _is_modern(session):
                await trio.lowlevel.checkpoint()
                return
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MCPDeprecationWarning: deprecated only in 2026-07-28
                await session.set_logging_level(level)  # type: ignore[arg-type]

        await self._request("logging/setLevel", op)

    async def tool_definition(self, name: str) -> mcp_types.Tool | None:
        """The tool's definition from this connection's last listing (listing once if needed).

        A definition listed on this connection is used even after ``tools/list_changed``;
        only an unknown name on a changed list lists again (one request for every caller).
        """
        found, tool = self._listed_tool(name)
        if found:
            return tool
        listing = await self._listing(ListingKind.TOOLS, max_age=math.inf)
        return listing.by_name.get(name)

    def _listed_tool(self, name: str) -> tuple[bool, mcp_types.Tool | None]:
        """``(True, definition or None)`` when the live listing answers for ``name``, else ``(False, None)``."""
        cell = self._cell
        live = cell.live
        listing = cell.listings.published.get(ListingKind.TOOLS)
        if live is not None and listing is not None and listing.live is live:
            tool: mcp_types.Tool | None = listing.by_name.get(name)
            if tool is not None or listing.epoch == cell.status.tools_epoch:
                return True, tool
        return False, None

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        call_id: str | None = None,
        on_progress: ProgressCallback | None = None,
        as_task: bool | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool by its name on the server; a tool-level error is a result, not an exception.

        Args:
            name: The tool's own name on the server.
            arguments: The arguments object.
            timeout: Seconds for the call once it is sent (default: the server's call
                timeout). Getting a live session first is bounded separately
                (:meth:`ConnectionSettings.session_bound`). With the server's
                ``resetTimeoutOnProgress``, every progress notification starts it again,
                up to ``maxTotalTimeout``.
            call_id: The caller's id for the call, for logs and events.
            on_progress: Called with ``(progress, total, message)`` for every progress
                notification of this call (sync or async); also emitted as ``tool:progress``.
            as_task: Run it as a task (2025-11-25): ``None`` does so exactly when the tool's
                ``execution.taskSupport`` is ``required``. At 2026-07-28 a call is always
                plain, and ``True`` raises :class:`~mcp_actors.errors.ToolCallFailed`.

        Raises:
            ToolCallTimeout: No answer within ``timeout``; the server was asked to cancel.
            ToolOutputInvalid: The structured result breaks the tool's ``outputSchema``.
            ToolTaskFailed: The task ended ``failed`` or ``cancelled`` on the server.
            ServerConnectionLost: The connection died during the call (never replayed).
            ConnectionFailed: No live session could be had (connect failure, circuit open).

        Cancelling the caller cancels the call on the server too (``notifications/cancelled``,
        or ``tasks/cancel`` for a task).
        """
        args = dict(arguments or {})
        settings = self.settings
        if call_id is not None:
            logger.debug("server %s: call %s of %s", settings.server_name, call_id, name)
        live = self._cell.live or await self._live()
        stamp = live.stamp
        modern = stamp.modern if stamp is not None else _is_modern(live.session)
        if modern:
            # 2026-07-28 has no tasks in the SDK (an extension, io.modelcontextprotocol/tasks,
            # that it does not negotiate) and its tool listings carry no execution.taskSupport.
            if as_task:
                raise ToolCallFailed(
                    f"server {settings.server_name!r}: tool {name!r} cannot run as a task: this connection speaks"
                    " protocol 2026-07-28, where tasks are an extension the MCP SDK does not support; call it"
                    " without as_task, or set the server's config.protocol to 'legacy' (2025-11-25 tasks)",
                    server=settings.server_name,
                    tool=name,
                )
            as_task = False
        # The definition comes from this connection's listing (one tools/list per connection, a
        # dictionary look-up after that): task support, output schema, header params.
        found, known = self._listed_tool(name)
        if not found:
            try:
                known = await self.tool_definition(name)
            except (ServerProtocolError, ServerRequestFailed):
                known = None  # the listing failed: call plainly; the call reports its own errors
        if as_task is None:
            execution = known.execution if known is not None else None
            as_task = execution is not None and execution.task_support == "required"
        deadline = (
            ProgressDeadline(max_total=settings.max_total_timeout) if settings.reset_timeout_on_progress else None
        )
        progressed: ProgressFnT | None = None
        bus = self._cell.bus
        bound = timeout if timeout is not None else settings.call_timeout
        # Progress is asked for (a progressToken) only when something can see it: the caller's
        # callback, a deadline that progress pushes back, or a subscriber to tool:progress.
        if on_progress is not None or deadline is not None or bus.has_subscribers or as_task:
            # The event fields: built only when an event can be emitted (not per plain call).
            ids: dict[str, Any] = {
                "serverId": settings.server_id,
                "serverName": settings.server_name,
                "toolName": name,
                "callId": call_id,
            }
        if on_progress is not None or deadline is not None or bus.has_subscribers:

            async def progressed(progress: float, total: float | None, message: str | None) -> None:
                if deadline is not None:
                    deadline.touch()
                bus.emit(events.TOOL_PROGRESS, **ids, progress=progress, total=total, message=message)
                if on_progress is not None:
                    outcome = on_progress(progress, total, message)
                    if inspect.isawaitable(outcome):
                        await outcome

        async def op(live: LiveSession) -> mcp_types.CallToolResult:
            session = live.session
            # The log-level opt-in is a 2026-07-28 thing; this session's own stamp says (one attribute).
            meta = self._log_meta(session) if live.stamp is None or live.stamp.modern else None
            try:
                # _fulfilled's first step, inline: two coroutine frames less on the hot path.
                first = await live.call_tool(name, args, on_progress=progressed, meta=meta, bound=bound)
                if not isinstance(first, mcp_types.InputRequiredResult):
                    return first

                async def send(
                    responses: mcp_types.InputResponses | None, state: str | None
                ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
                    return await live.call_tool(
                        name,
                        args,
                        on_progress=progressed,
                        input_responses=responses,
                        request_state=state,
                        meta=self._log_meta(session),
                        bound=bound,
                    )

                # 2026-07-28 (SEP-2322): an InputRequiredResult is fulfilled by the host callbacks and retried.
                return await self._fulfil_rest(session, f"tool {name!r}", first, send, tool=name)
            except RuntimeError as exc:
                raise self._invalid_output(name, exc) from None

        if as_task:

            async def task_op(live: LiveSession) -> mcp_types.CallToolResult:
                return await self._run_task(live, name, args, progressed, ids)

            return await self._request("tools/call", live_op=task_op, timeout=timeout, tool=name, progress=deadline)
        try:
            # _request's first pass, inline (a coroutine frame less per call): the session in hand.
            return await live.request("tools/call", live_op=op, timeout=bound, tool=name, progress=deadline)
        except SessionEnded:
            return await self._request("tools/call", live_op=op, timeout=timeout, tool=name, progress=deadline)

    def _invalid_output(self, name: str, exc: Exception) -> ToolOutputInvalid:
        return ToolOutputInvalid(
            f"server {self.settings.server_name!r}: tool {name!r} returned a result that breaks its outputSchema"
            f" ({exc}); the server is at fault: report it to its authors",
            server=self.settings.server_name,
            tool=name,
        )

    async def _run_task(
        self,
        live: LiveSession,
        name: str,
        args: dict[str, Any],
        progressed: ProgressFnT | None,
        ids: dict[str, Any],
    ) -> mcp_types.CallToolResult:
        """Create the task, poll it at the server's interval, fetch its result; cancel it if abandoned."""
        label = self.settings.server_name
        session = live.session
        # A task's reply is a CreateTaskResult, not a CallToolResult: sent through our own
        # call path (the session's dispatcher, stamped as the SDK would), no private SDK member.
        raw = await live.send_raw("tools/call", {"name": name, "arguments": args, "task": {}}, on_progress=progressed)
        task: mcp_types.Task = mcp_types.CreateTaskResult.model_validate(raw).task
        bus = self._cell.bus

        def publish(seen: mcp_types.Task) -> None:
            bus.emit(events.TASK_STATUS, **ids, taskId=seen.task_id, status=seen.status, message=seen.status_message)

        publish(task)
        finished = False
        try:
            with self._cell.tasks.watch(task.task_id) as pushed:
                while task.status in ("working", "input_required"):
                    # The server's pushed status (notifications/tasks/status) ends the wait early.
                    seen: mcp_types.Task | None = None
                    with trio.move_on_after(max(task.poll_interval or _TASK_POLL_MS, _TASK_POLL_MS) / 1000):
                        seen = await pushed.receive()
                    if seen is None:
                        seen = await session.send_request(
                            mcp_types.GetTaskRequest(params=mcp_types.GetTaskRequestParams(task_id=task.task_id)),
                            mcp_types.GetTaskResult,
                        )
                    if (seen.status, seen.status_message) != (task.status, task.status_message):
                        publish(seen)
                    task = seen
            finished = True
            if task.status != "completed":
                raise ToolTaskFailed(
                    f"server {label!r}: tool {name!r} ran as task {task.task_id} and ended {task.status}"
                    + (f": {task.status_message}" if task.status_message else ""),
                    server=label,
                    tool=name,
                    task_id=task.task_id,
                    status=task.status,
                )
            result = await session.send_request(
                mcp_types.GetTaskPayloadRequest(params=mcp_types.GetTaskPayloadRequestParams(task_id=task.task_id)),
                mcp_types.CallToolResult,
            )
            if not result.is_error:
                try:
                    live.check_output(name, result)
                except RuntimeError as exc:
                    raise self._invalid_output(name, exc) from None
            return result
        finally:
            if not finished:
                with trio.CancelScope(shield=True), trio.move_on_after(_TASK_CANCEL_BOUND):
                    try:
                        await session.send_request(
                            mcp_types.CancelTaskRequest(params=mcp_types.CancelTaskRequestParams(task_id=task.task_id)),
                            mcp_types.CancelTaskResult,
                        )
                        publish(task.model_copy(update={"status": "cancelled"}))
                    except Exception as exc:  # the call already failed; this is best effort
                        logger.info("server %s: cancelling task %s failed: %s", label, task.task_id, exc)

    async def list_tasks(self) -> tuple[mcp_types.Task, ...]:
        """The server's tasks (``tasks/list``, 2025-11-25), all pages.

        Raises:
            ServerRequestFailed: The server refused (one without tasks answers "method not found").
        """

        async def op(session: ClientSession) -> tuple[mcp_types.Task, ...]:
            tasks: list[mcp_types.Task] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.send_request(mcp_types.ListTasksRequest(params=params), mcp_types.ListTasksResult)
                tasks.extend(page.tasks)
                cursor = page.next_cursor
                if not cursor:
                    break
            return tuple(tasks)

        return await self._request("tasks/list", op)

    async def health(self, *, timeout: float = 10.0) -> float:
        """Ping now; returns the round-trip time in seconds. An unanswered ping means the server is dead.

        At 2026-07-28, which has no ``ping``, the probe is a ``server/discover``.
        """

        async def op(session: ClientSession) -> float:
            start = time.perf_counter()
            await _probe(session)
            return time.perf_counter() - start

        return await self._request("ping", op, timeout=timeout, die_on_timeout=True)

    # -- host callbacks (issue 12 item 1)

    def offers(self) -> frozenset[str]:
        """What the live session declared (``"sampling"``, ``"elicitation"``, ``"roots"``); empty when not connected."""
        live = self._cell.live
        return live.offered if live is not None else frozenset()

    async def notify_roots_changed(self) -> bool:
        """Send ``notifications/roots/list_changed`` if connected and roots are offered to this server.

        Not at 2026-07-28, which has no such notification: a server there asks for the roots
        in each request's ``InputRequiredResult``, so it always sees the current ones.

        Returns whether it was sent. Never connects, never raises for a dying connection
        (the next connection lists the roots afresh anyway); bounded by the ping timeout.
        """
        live = self._cell.live
        if live is None or "roots" not in live.offered or live.lost is not None:
            return False
        if _is_modern(live.session):
            return False  # 2026-07-28 has no roots/list_changed: every request asks for the roots afresh
        with trio.move_on_after(self.settings.ping_timeout):
            try:
                await live.session.send_notification(mcp_types.RootsListChangedNotification())
            except Exception as exc:
                logger.debug("server %s: roots/list_changed not sent: %s", self.settings.server_name, exc)
                return False
            return True
        return False

    async def disconnect(self) -> None:
        """Close the connection (and stop a stdio server); it reconnects lazily on the next demand."""
        await self._ask(lambda r: Disconnect(reply=r), bound=STOP_BOUND * 2)

    async def reconnect(self) -> None:
        """Close and connect again; also closes an open circuit."""
        await self._ask(lambda r: Reconnect(reply=r), bound=self.settings.session_bound())

    async def aclose(self, why: str | None = None) -> None:
        """Close the mailbox: the actor closes its connection and stops.

        Args:
            why: What its calls in flight and queued requests are told ended them
                (``"the server was disabled"``); by default, a removal.
        """
        if why is not None and self._cell.stop_reason is None:
            self._cell.stop_reason = why
        await self._mailbox.aclose()


@attrs.frozen(eq=False)
class SlotRunner:
    """The slot of one handle, to run under a supervisor (``await runner.run(task_status=...)``) — or never.

    The handle works from the moment :func:`open_slot` returns: requests queue in its
    mailbox until the slot runs. A slot that will never run (its owner stopped before
    starting it) must be abandoned (:meth:`abandon`), so that no request queued for it waits for
    an answer that cannot come.
    """

    settings: ConnectionSettings
    inbox: trio.MemoryReceiveChannel[ConnectionMessage]
    cell: _StatusCell

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the slot until its mailbox closes (see :func:`run_connection_slot`)."""
        await run_connection_slot(self.settings, self.inbox, self.cell, task_status=task_status)

    def abandon(self) -> None:
        """Answer every queued request with ActorStopped and close the mailbox; the slot never runs."""
        _stop_mailbox(_Slot(settings=self.settings, inbox=self.inbox, cell=self.cell))


def open_slot(settings: ConnectionSettings, bus: events.EventBus) -> tuple[ConnectionHandle, SlotRunner]:
    """A handle plus its slot, to run (:meth:`SlotRunner.run`) or abandon (:meth:`SlotRunner.abandon`)."""
    mailbox, inbox = open_mailbox[ConnectionMessage](settings.mailbox_capacity)
    cell = _StatusCell(ConnectionStatus(server_id=settings.server_id, server_name=settings.server_name), bus)
    return ConnectionHandle(settings, mailbox, cell), SlotRunner(settings, inbox, cell)


def open_connection(
    settings: ConnectionSettings, bus: events.EventBus
) -> tuple[ConnectionHandle, Callable[..., Awaitable[None]]]:
    """A handle plus the slot function to run under a supervisor (``await start(task_status=...)``)."""
    handle, runner = open_slot(settings, bus)
    return handle, runner.run
