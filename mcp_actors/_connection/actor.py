"""The connection actor: one per server, owning its transport, session and process.

Semantics (DESIGN §5):

* States ``disconnected → connecting → connected | error``; ``connected → disconnected``
  on :class:`~mcp_actors._connection.messages.Disconnect`; ``error → connecting`` and
  ``connected → connecting`` on reconnect. Every change emits ``connection:state``;
  reaching ``connected`` also emits ``server:connected``.
* Lazy: nothing is started until the first demand. Demands that arrive while an attempt
  is under way wait for that one attempt (coalesced).
* One call path. Every request (tool call, listing, ping) runs in the caller's task over
  the live session (:class:`~mcp_actors._connection.live.LiveSession`), multiplexed. The caller asks
  the actor only for that session: it takes it from the status cell when connected, or
  sends :class:`~mcp_actors._connection.messages.Connect` (which waits through a connect attempt or a
  restart). The request registers itself with the session for its duration.
* Death is observed directly (stdout EOF, process exit, broken stdin, HTTP stream error,
  an unanswered ping while the server owes no request within its timeout: see
  :meth:`_ConnectionActor._ping`). The actor then, in one step with no checkpoint: records the failure,
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
:class:`~mcp_actors._connection.messages.Reconnect`. Errors that no retry can fix
(:class:`~mcp_actors.errors.ServerMisconfigured`) open the circuit at once.

No request is lost or left waiting. The mailbox belongs to the slot:

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

import functools
import json
import logging
import math
import random
import warnings
from typing import Any

# The SDK's ClientSession enters an anyio task group, and anyio imports its trio backend the
# first time one is made: ~6 ms on the first connection of a host on plain trio, between the
# spawn and the first byte to the server (docs/performance.md). Imported with the
# connection actor, it costs the host its import time instead of its first connection.
import anyio._backends._trio  # noqa: F401
import attrs
import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_actors import events
from mcp_actors._connection.listen import Listener
from mcp_actors._connection.listings import ListingKind, fetch_listing, make_listing
from mcp_actors._connection.live import LiveSession, RequestStamp, SessionEnded
from mcp_actors._connection.messages import (
    Connect,
    ConnectionMessage,
    Disconnect,
    FillListing,
    Reconnect,
    SetLogLevel,
)
from mcp_actors._connection.status import (
    _LOG_LEVELS,
    CLIENT_INFO,
    STOP_BOUND,
    ConnectionSettings,
    ConnectionState,
    _StatusCell,
)
from mcp_actors._connection.tasks import ExtensionTask, negotiated, session_kwargs
from mcp_actors._sdk import negotiate_auto
from mcp_actors._wire.dispatch import BoundNotification, StreamWire, WireDispatcher
from mcp_actors._wire.link import server_logger
from mcp_actors._wire.transports import TransportLink, open_transport
from mcp_actors.errors import (
    ActorStopped,
    ConnectionFailed,
    ConnectTimeout,
    McpActorsError,
    ServerCircuitOpen,
    ServerConnectionLost,
    ServerMisconfigured,
    ServerProtocolError,
    ServerStartFailed,
)
from supervisors import (
    Reply,
    add_restart,
    backoff_delay,
)

__all__ = ["run_connection_slot"]

logger = logging.getLogger(__name__)


@attrs.define(eq=False)
class _Slot:
    """What outlives one incarnation of a server's actor.

    Attributes:
        settings: The server's settings.
        inbox: The mailbox's receive end (the mailbox belongs to the slot).
        cell: The published status.
        stops: Why the mailbox was closed, sent by whoever closed it
            (:meth:`ConnectionHandle.aclose`) just before; one message at most.
        carried: Requests an ending incarnation received but did not serve; the next
            incarnation (or the park) answers them first.
        failure: Why the current incarnation ended; ``None`` while it lives. The one
            record of a crash's reason.
    """

    settings: ConnectionSettings
    inbox: trio.MemoryReceiveChannel[ConnectionMessage]
    cell: _StatusCell
    stops: trio.MemoryReceiveChannel[str]
    carried: list[ConnectionMessage] = attrs.field(factory=list)
    failure: McpActorsError | None = None

    def stop_reason(self) -> str | None:
        """Why the slot is being stopped, if its closer said: recorded in the cell here, by the slot."""
        if self.cell.stop_reason is None:
            try:
                self.cell.stop_reason = self.stops.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                pass
        return self.cell.stop_reason

    def stopped_error(self) -> ActorStopped:
        name = self.settings.server_name
        why = self.stop_reason() or "the server was removed or the runtime is closing"
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
        probe_due: A request timed out: the watch pings at once (see :meth:`_ConnectionActor._timed_out`).
        waiting: The watch is waiting for the death or the next ping (its ``watch`` may be cancelled to ping now).
        probe: The scope of the ping under way, if one is (cancelled to send it afresh).
    """

    scope: trio.CancelScope | None = None
    live: LiveSession | None = None
    close_why: str | None = None
    watch: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    probe_due: bool = False
    waiting: bool = False
    probe: trio.CancelScope | None = None


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
                        await self._close(slot.stop_reason() or "the server was removed")
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
            case SetLogLevel(live=live, level=level, reply=reply):
                if live is not self.cell.live:
                    reply.fail(SessionEnded(self.label))  # the caller sets it on the current connection
                    return
                self.cell.log_level = (live.session, level)
                reply.send(None)
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
        principal = live.link.principal()
        try:
            items, word = await live.request(
                kind.value,
                live_op=lambda live: fetch_listing(live.session, kind, self.label, live.send_raw),
                timeout=self.settings.call_timeout,
            )
        except (McpActorsError, SessionEnded) as exc:
            listings.settle(key, exc, publish=False)
        else:
            if word is not None and word.scope == "private" and live.link.principal() != principal:
                # The credential changed while the pages came: some may be another principal's.
                word = attrs.evolve(word, expires_at=-math.inf)
            current = live is self.cell.live and epoch == self.cell.epoch(kind)
            listing = make_listing(kind, live, epoch, items, word=word, principal=principal)
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
                        # The tasks extension: the SDK advertises it at 2026-07-28 only (a result claim).
                        host_kwargs = {**host_kwargs, **session_kwargs()}
                        # One dispatcher for every transport: the link's own wire, or its streams.
                        dispatcher = WireDispatcher(
                            link.wire or StreamWire(link.read_stream, link.write_stream),
                            # Task statuses are types-only in the SDK's method tables: handled by the
                            # dispatcher (the SDK's notification_bindings would cost a task per session).
                            bound={
                                "notifications/tasks/status": BoundNotification(
                                    params_type=mcp_types.TaskStatusNotificationParams, handler=self._on_task_status
                                ),
                                # 2026-07-28, the tasks extension: a task's whole state.
                                "notifications/tasks": BoundNotification(
                                    params_type=ExtensionTask, handler=self._on_task_status
                                ),
                            },
                            max_inbound=settings.max_server_requests,
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
                                tasks_extension=negotiated(session),
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
        if interval > 0:
            live.on_timeout = functools.partial(self._timed_out, run)
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
                if not run.probe_due:
                    run.waiting = True
                    try:
                        await dead.wait()
                    finally:
                        run.waiting = False
            if run.close_why is None and not dead.is_set():
                with trio.CancelScope() as run.watch:
                    await self._ping(run, live)
        if run.close_why is None:
            self._die(self._lost_error(live), live)  # at once: no checkpoint since the death was seen

    def _timed_out(self, run: _SessionRun) -> None:
        """A request on the session timed out: ping the server now, not at the next periodic ping.

        A server that froze lets every call time out while it stays ``connected``; probed
        at once, it is declared dead within the ping timeout (by :meth:`_ping`'s rule), so
        the next caller waits for a restarted server instead of its own timeout. Called in
        the timed-out caller's task: it only flags and cancels.
        """
        run.probe_due = True
        if run.probe is not None:
            run.probe.cancel()  # the ping under way is sent afresh, after the timeout
        elif run.waiting:
            run.watch.cancel()

    async def _ping(self, run: _SessionRun, live: LiveSession) -> None:
        """One health probe, and the rule that decides when its silence is a death.

        A server that blocks its own loop (a synchronous tool in Node or Python) reads
        nothing until the tool returns: a ping sent meanwhile waits behind the call, while
        the process lives (a stdio server's pidfd reports no exit; its exit would have been
        seen at once). A hung server looks the same from outside. What tells them apart is
        what the server owes:

        * a ping unanswered within ``ping_timeout`` is a death, unless a request that was
          already in flight when the first ping was sent was still within its own timeout
          when this one was: the server may be busy with it. The probe is then sent again,
          each bounded by ``ping_timeout``, until one is answered or one sent with none of
          those requests left in flight within its timeout goes unanswered. So the wait
          is bounded by those requests' own timeouts plus a ``ping_timeout`` or two;
          requests sent after the first ping never extend it, so a hung server under
          steady load still dies.
        * with nothing owed, silence for ``ping_timeout`` is a death, as it always was.
        * a request that times out has the server probed at once (:meth:`_timed_out`); a
          ping under way is then sent afresh, so the death of a server that let its last
          owed call time out is declared within one ``ping_timeout`` of that timeout.

        A death during the ping ends it at once (the dispatcher answers every waiter when
        its wire dies), and the watch then declares that death.
        """
        timeout = self.settings.ping_timeout
        owed = live.owed()
        while True:
            busy = live.still_owes(owed)
            run.probe_due = False  # this ping answers for every timeout so far
            try:
                with trio.move_on_after(timeout) as run.probe:
                    try:
                        await _probe(live.session)
                    except MCPError as exc:
                        logger.debug("server %s: ping failed: %s", self.label, exc)
                    except Exception:
                        if not live.link.dead.is_set():
                            raise
                scope = run.probe
            finally:
                run.probe = None
            if not scope.cancelled_caught:
                return
            if run.probe_due:
                continue  # a request timed out meanwhile: ping afresh, at once
            if not busy:
                break
            logger.debug(
                "server %s: no answer to a ping within %gs, but requests sent before it are within their"
                " timeouts: busy, not dead; probing again",
                self.label,
                timeout,
            )
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
        cell.bump_prompts_epoch()
        cell.bus.emit(events.TOOLS_CHANGED, **ids)
        cell.bus.emit(events.RESOURCES_CHANGED, **ids)
        cell.bus.emit(events.PROMPTS_CHANGED, **ids)
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
            self.cell.bus.emit(events.PROMPTS_CHANGED, **ids)
        elif isinstance(message, mcp_types.ElicitCompleteNotification):
            # The URL-mode interaction ended out of band; a host UI waiting for it may stop (2025-11-25).
            self.cell.bus.emit(events.ELICITATION_COMPLETE, **ids, elicitationId=message.params.elicitation_id)
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            self.cell.bus.emit(events.RESOURCE_UPDATED, **ids, uri=str(message.params.uri))
        elif isinstance(message, Exception):
            logger.warning("server %s: transport reported %s: %s", self.label, type(message).__name__, message)

    async def _on_task_status(self, params: mcp_types.TaskStatusNotificationParams | ExtensionTask) -> None:
        """A pushed task status (either revision's): to the call running that task, else a ``task:status`` event."""
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
    stops: trio.MemoryReceiveChannel[str],
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
    slot = _Slot(settings=settings, inbox=inbox, cell=cell, stops=stops)
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
