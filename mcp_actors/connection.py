"""The connection actor: one per server, owning its transport, session and process.

Semantics (DESIGN §5):

* States ``disconnected → connecting → connected | error``; ``connected → disconnected``
  on :class:`~mcp_actors.messages.Disconnect`; ``error → connecting`` and
  ``connected → connecting`` on reconnect. Every change emits ``connection:state``;
  reaching ``connected`` also emits ``server:connected``.
* Lazy: nothing is started until the first demand. Demands that arrive while an attempt
  is under way wait for that one attempt (coalesced).
* Calls are multiplexed over one session; the actor never blocks its mailbox loop — every
  request runs in a task of its own.
* Death is observed directly (stdout EOF, process exit, broken stdin, HTTP stream error,
  unanswered ping): the state goes to ``error`` at once and in-flight calls fail at once
  with :class:`~mcp_actors.errors.ServerConnectionLost` carrying the server's last stderr
  lines. Tool calls are never replayed.
* A timed-out or cancelled call is cancelled on the server (``notifications/cancelled``).

Supervision: a dead connection (or a failed connect) *crashes* the actor, and the
per-server supervisor (:func:`run_connection_slot`) restarts it after an exponential
backoff; a restarted actor connects at once. When restarts exceed the intensity (5 in
60 s by default) the slot parks the server in ``error`` with its circuit open: every
request is answered with :class:`~mcp_actors.errors.ServerCircuitOpen` until
:class:`~mcp_actors.messages.Reconnect`. Errors that no retry can fix (a command that
does not exist) open the circuit at once. The mailbox belongs to the slot, so requests
queued during a restart are served by the next incarnation, never lost.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import attrs
import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from mcp_actors import events
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
    ToolCallFailed,
    ToolCallTimeout,
)
from mcp_actors.messages import (
    CallTool,
    Connect,
    ConnectionMessage,
    Disconnect,
    GetPrompts,
    GetResources,
    Health,
    ListTools,
    Reconnect,
)
from mcp_actors.transports import StderrTail, TransportLink, TransportParams, open_transport
from supervisors import (
    Backoff,
    ChildSpec,
    Intensity,
    Mailbox,
    MailboxClosed,
    NoReply,
    Reply,
    Restart,
    RestartIntensityExceeded,
    Shutdown,
    Strategy,
    SupervisorSpec,
    open_mailbox,
    open_supervisor,
)

__all__ = [
    "ConnectionHandle",
    "ConnectionSettings",
    "ConnectionState",
    "ConnectionStatus",
    "open_connection",
    "run_connection_slot",
]

logger = logging.getLogger(__name__)

CLIENT_INFO: Final = mcp_types.Implementation(name="mcp-actors", version="0.1.0")
_MAX_PAGES: Final = 1000
_CLOSE_BOUND: Final = 15.0
_CALL_KEYS: Final = itertools.count(1)
T = TypeVar("T")


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
        call_timeout: Default bound for one tool call, seconds.
        ping_interval: Seconds between health pings while connected; 0 disables.
        ping_timeout: Bound for one ping, seconds.
        intensity: Restarts allowed per period before the circuit opens.
        backoff: Delay policy between restarts.
        mailbox_capacity: Requests that may queue before senders wait.
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


@attrs.frozen(kw_only=True)
class ConnectionStatus:
    """A snapshot of one server's connection.

    Attributes:
        state: The connection state.
        error: Why the last attempt or connection failed, if it did.
        circuit_open: The server exceeded its restart intensity and waits for a reconnect.
        pid: The stdio server's PID while it runs.
        restarts: How many times the actor was restarted since the slot (re)started.
        tools_epoch: Increases whenever the server's tool list may have changed
            (every new connection, every ``tools/list_changed``); caches compare it.
        stderr_tail: The server's last stderr lines (stdio only).
        server_info: The server's name/version from ``initialize``, if connected once.
    """

    server_id: str
    server_name: str
    state: ConnectionState = ConnectionState.DISCONNECTED
    error: str | None = None
    circuit_open: bool = False
    pid: int | None = None
    restarts: int = 0
    tools_epoch: int = 0
    calls_in_flight: int = 0
    stderr_tail: tuple[str, ...] = ()
    server_info: tuple[str, str] | None = None


@attrs.define(eq=False)
class _StatusCell:
    """The server's status, written only by its own actor and slot; others read snapshots."""

    status: ConnectionStatus
    bus: events.EventBus
    live_stderr: StderrTail | None = None
    # The incarnation whose session is connected right now: the handle's fast path for
    # calls (see ConnectionHandle.call_tool). Set and cleared only by that actor.
    fast: _ConnectionActor | None = None
    inflight: int = 0
    # Tool calls in flight by call id, so that a caller who gives up (cancelled, timed
    # out) can stop its own call on the server too (DESIGN §5), not just drop the reply.
    calls_by_id: dict[str, set[_InFlight]] = attrs.field(factory=dict)

    def set(self, **changes: Any) -> None:
        self.status = attrs.evolve(self.status, **changes)

    def transition(self, state: ConnectionState, *, error: str | None = None, **changes: Any) -> None:
        previous = self.status.state
        self.status = attrs.evolve(self.status, state=state, error=error, **changes)
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


@attrs.define(eq=False)
class _Live:
    """One established connection."""

    session: ClientSession
    link: TransportLink
    close_requested: trio.Event = attrs.field(factory=trio.Event)
    closed: trio.Event = attrs.field(factory=trio.Event)
    calls: set[_InFlight] = attrs.field(factory=set)


@attrs.define(eq=False)
class _InFlight:
    tool: str
    reply: Reply[Any] | None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    lost: ConnectionFailed | None = None
    abandoned: bool = False


@attrs.define(eq=False)
class _Attempt:
    done: trio.Event = attrs.field(factory=trio.Event)
    live: _Live | None = None
    error: McpActorsError | None = None
    scope: trio.CancelScope | None = None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _domain_error(exc: BaseException) -> McpActorsError | None:
    """The one error worth reporting inside an exception group, or None to re-raise it.

    Anything that is not an ``Exception`` (Cancelled, KeyboardInterrupt) must propagate.
    """
    leaves = _leaves(exc)
    if any(not isinstance(leaf, Exception) for leaf in leaves):
        return None
    for leaf in leaves:
        if isinstance(leaf, _Park):
            return leaf.error
    for leaf in leaves:
        if isinstance(leaf, McpActorsError):
            return leaf
    return None


class _Park(Exception):
    """Raised inside the actor for errors no restart can fix; the slot parks the server."""

    def __init__(self, error: McpActorsError) -> None:
        super().__init__(str(error))
        self.error = error


@attrs.define(eq=False)
class _SlotState:
    park: McpActorsError | None = None


class _ConnectionActor:
    """One incarnation of a server's actor; restarted by the slot's supervisor."""

    def __init__(
        self,
        settings: ConnectionSettings,
        inbox: trio.MemoryReceiveChannel[ConnectionMessage],
        cell: _StatusCell,
        slot: _SlotState,
        *,
        eager: bool,
        initial: list[ConnectionMessage],
    ) -> None:
        self.settings = settings
        self.inbox = inbox
        self.cell = cell
        self.slot = slot
        self.eager = eager
        self.initial = initial
        self.label = settings.server_name
        self._nursery: trio.Nursery | None = None
        self._attempt: _Attempt | None = None
        self._crash: McpActorsError | None = None
        self._park_error: McpActorsError | None = None
        self._pending: set[Reply[Any]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the mailbox until it closes; raise (crash) when the connection dies."""
        try:
            await self._run(task_status)
        except BaseException as exc:
            error = _domain_error(exc) if self._crash is None else self._crash
            if not isinstance(error, McpActorsError):
                raise
            self._crash = error
            if self._park_error is not None:
                self.slot.park = self._park_error
                return
            raise error from None
        finally:
            reason = ActorStopped(f"server {self.label!r}: its connection actor stopped", server=self.label)
            for reply in list(self._pending):
                reply.fail(self._crash if isinstance(self._crash, McpActorsError) else reason)
            self._pending.clear()

    async def _run(self, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started(None)
            if self.eager and not self.initial:
                nursery.start_soon(self._background_connect)
            for message in self.initial:
                nursery.start_soon(self._serve, message)
            self.initial = []
            async for message in self.inbox:
                nursery.start_soon(self._serve, message)
            # Mailbox closed: the server was removed or the runtime is closing.
            with trio.move_on_after(_CLOSE_BOUND) as scope:
                scope.shield = True
                await self._close_live("the server was removed")
            nursery.cancel_scope.cancel()

    async def _serve(self, message: ConnectionMessage) -> None:
        reply: Reply[Any] = message.reply
        self._pending.add(reply)
        try:
            match message:
                case Connect():
                    await self._ensure_connected()
                    reply.send(None)
                case ListTools():
                    reply.send(await self._list_tools())
                case CallTool():
                    reply.send(await self._call_tool(message))
                case Health():
                    reply.send(await self._health(message.timeout))
                case GetPrompts():
                    reply.send(await self._list_prompts())
                case GetResources():
                    reply.send(await self._list_resources())
                case Disconnect():
                    await self._disconnect()
                    reply.send(None)
                case Reconnect():
                    await self._close_live("reconnecting", state=None)
                    await self._ensure_connected()
                    reply.send(None)
                case _:
                    raise TypeError(f"unknown message for a connection actor: {message!r}")
        except McpActorsError as exc:
            reply.fail(exc)
        except Exception as exc:
            # A bug of ours or the SDK's: answer, then crash this incarnation (state unknown).
            reply.fail(
                McpActorsError(
                    f"server {self.label!r}: internal error: {type(exc).__name__}: {exc}",
                    server=self.label,
                )
            )
            raise
        finally:
            # A request cancelled with this incarnation (it crashed) stays pending: run()
            # answers it with the crash, instead of leaving its caller waiting.
            if reply.answered:
                self._pending.discard(reply)

    async def _background_connect(self) -> None:
        with contextlib.suppress(McpActorsError):
            await self._ensure_connected()

    # ------------------------------------------------------------------ connecting

    async def _ensure_connected(self) -> _Live:
        attempt = self._attempt
        if attempt is not None and attempt.live is not None and not attempt.live.link.dead.is_set():
            return attempt.live
        if attempt is None or attempt.done.is_set():
            attempt = _Attempt()
            self._attempt = attempt
            assert self._nursery is not None
            self._nursery.start_soon(self._run_attempt, attempt)
        await attempt.done.wait()
        if attempt.error is not None:
            raise attempt.error
        assert attempt.live is not None
        return attempt.live

    async def _run_attempt(self, attempt: _Attempt) -> None:
        """Run one session; however it ends, its waiters are woken.

        A waiter may sit outside this incarnation's nursery (a fast-path call runs in the
        caller's task): if the incarnation is torn down while the attempt is under way,
        the waiter must get an error, not wait forever.
        """
        try:
            await self._run_session(attempt)
        finally:
            if not attempt.done.is_set():
                attempt.error = self._crash or ActorStopped(
                    f"server {self.label!r}: the connection attempt was abandoned (its actor stopped); retry",
                    server=self.label,
                )
                attempt.done.set()

    async def _run_session(self, attempt: _Attempt) -> None:
        """Own one connection from spawn to close; crash the actor if it dies on its own."""
        settings = self.settings
        self.cell.transition(ConnectionState.CONNECTING)
        live: _Live | None = None
        connected = False
        link: TransportLink | None = None
        failure: McpActorsError | None = None
        with trio.CancelScope(deadline=trio.current_time() + settings.connect_timeout) as scope:
            attempt.scope = scope
            try:
                async with open_transport(settings.transport, label=self.label) as link:
                    self.cell.set(pid=link.process.pid if link.process else None)
                    self.cell.live_stderr = link.stderr
                    session = ClientSession(
                        link.read_stream,
                        link.write_stream,
                        message_handler=functools.partial(self._on_message),
                        logging_callback=self._on_log,
                        client_info=CLIENT_INFO,
                    )
                    async with session:
                        result = await session.initialize()
                        scope.deadline = math.inf
                        live = _Live(session=session, link=link)
                        connected = True
                        info = result.server_info if hasattr(result, "server_info") else None
                        self.cell.bump_tools_epoch()
                        self.cell.transition(
                            ConnectionState.CONNECTED,
                            server_info=(info.name, info.version) if info is not None else None,
                        )
                        attempt.live = live
                        attempt.done.set()
                        await self._connected_life(live)
            except BaseException as exc:
                failure = self._classify(exc, link)
                if failure is None:
                    raise
            finally:
                if live is not None:
                    live.closed.set()
        if scope.cancelled_caught and failure is None and not connected:
            tail = link.stderr_tail() if link is not None else ()
            note = link.describe_garbage() if link is not None else ""
            failure = ConnectTimeout(
                f"server {self.label!r} did not finish connecting within {settings.connect_timeout:g}s"
                + (f" ({note})" if note else "")
                + "; check that it starts and speaks MCP on stdout, or raise config.connectTimeout",
                server=self.label,
                stderr_tail=tail,
            )
        self.cell.set(pid=None, stderr_tail=link.stderr_tail() if link is not None else ())
        requested = live is not None and live.close_requested.is_set()
        if requested:
            return
        if failure is None and live is not None and not requested:
            failure = self._lost_error(live)
        if failure is None:
            return  # cancelled from outside (the actor is stopping)
        if not attempt.done.is_set():
            attempt.error = failure
            attempt.done.set()
        self.cell.transition(
            ConnectionState.ERROR,
            error=str(failure),
            stderr_tail=failure.stderr_tail if isinstance(failure, ConnectionFailed) else (),
        )
        self._crash = failure
        if isinstance(failure, ServerMisconfigured):
            # No restart can fix the configuration (a missing command, a missing cwd):
            # open the circuit at once.
            self._park_error = failure
            raise _Park(failure)
        raise failure

    def _classify(self, exc: BaseException, link: TransportLink | None) -> McpActorsError | None:
        """Map what escaped a connection to one typed error; None means re-raise it."""
        leaves = _leaves(exc)
        if any(not isinstance(leaf, Exception) for leaf in leaves):
            return None
        domain = _domain_error(exc)
        if domain is not None:
            return domain
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

    def _lost_error(self, live: _Live) -> ServerConnectionLost:
        reason = live.link.death_reason or "the connection closed"
        return ServerConnectionLost(
            f"server {self.label!r}: connection lost: {reason}",
            server=self.label,
            stderr_tail=live.link.stderr_tail(),
        )

    async def _connected_life(self, live: _Live) -> None:
        self.cell.fast = self
        try:
            await self._watch_live(live)
        finally:
            if self.cell.fast is self:
                self.cell.fast = None
        if live.close_requested.is_set():
            error: ConnectionFailed = ServerConnectionLost(
                f"server {self.label!r}: the connection was closed (disconnect or reconnect) during the call",
                server=self.label,
            )
        else:
            error = self._lost_error(live)
        self._fail_in_flight(live, error)

    async def _watch_live(self, live: _Live) -> None:
        async with trio.open_nursery() as nursery:
            if self.settings.ping_interval > 0:
                nursery.start_soon(self._ping_loop, live)

            async def _wait_close() -> None:
                await live.close_requested.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(_wait_close)
            await live.link.dead.wait()
            nursery.cancel_scope.cancel()

    def _fail_in_flight(self, live: _Live, error: ConnectionFailed) -> None:
        for call in list(live.calls):
            call.lost = error
            if call.reply is not None:
                call.reply.fail(error)
            call.scope.cancel()
        live.calls.clear()
        self.cell.inflight = 0

    async def _ping_loop(self, live: _Live) -> None:
        while True:
            await trio.sleep(self.settings.ping_interval)
            with trio.move_on_after(self.settings.ping_timeout) as scope:
                try:
                    await live.session.send_ping()
                except MCPError as exc:
                    logger.debug("server %s: ping failed: %s", self.label, exc)
            if scope.cancelled_caught:
                live.link.die(f"the server did not answer a ping within {self.settings.ping_timeout:g}s")
                return

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.cell.bump_tools_epoch()
            self.cell.bus.emit(events.TOOLS_CHANGED, serverId=self.settings.server_id, serverName=self.label)
        elif isinstance(message, Exception):
            logger.warning("server %s: transport reported %s: %s", self.label, type(message).__name__, message)

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        logger.debug("server %s logged (%s): %s", self.label, params.level, params.data)

    async def _close_live(self, why: str, *, state: ConnectionState | None = ConnectionState.DISCONNECTED) -> None:
        attempt = self._attempt
        if attempt is None:
            if state is not None:
                self.cell.transition(state)
            return
        if attempt.live is not None:
            attempt.live.close_requested.set()
            with trio.move_on_after(_CLOSE_BOUND):
                await attempt.live.closed.wait()
        elif not attempt.done.is_set():
            attempt.error = ConnectionFailed(
                f"server {self.label!r}: connection attempt abandoned: {why}", server=self.label
            )
            attempt.done.set()
            if attempt.scope is not None:
                attempt.scope.cancel()
        self._attempt = None
        if state is not None:
            self.cell.transition(state)

    async def _disconnect(self) -> None:
        await self._close_live("disconnect requested")

    # ------------------------------------------------------------------ requests

    async def _request(
        self,
        what: str,
        op: Callable[[ClientSession], Awaitable[T]],
        *,
        timeout: float,
        tool: str | None = None,
        reply: Reply[Any] | None = None,
        die_on_timeout: bool = False,
        call_id: str | None = None,
    ) -> T:
        live = await self._ensure_connected()
        if reply is not None and not reply.wanted:
            raise ToolCallFailed(
                f"server {self.label!r}: the caller gave up on {what} before it was sent", server=self.label, tool=tool
            )
        call = _InFlight(tool=tool or what, reply=reply)
        live.calls.add(call)
        if call_id is not None:
            self.cell.calls_by_id.setdefault(call_id, set()).add(call)
        self.cell.inflight = len(live.calls)
        try:
            with call.scope:
                with trio.fail_after(timeout):
                    return await op(live.session)
            if call.abandoned and call.lost is None:
                # The caller cancelled: the SDK told the server (notifications/cancelled).
                raise ToolCallFailed(
                    f"server {self.label!r}: the caller gave up on {what}; the server was asked to cancel it",
                    server=self.label,
                    tool=tool,
                )
            # Otherwise only _fail_in_flight cancels call.scope: the connection died under the call.
            raise call.lost or self._lost_error(live)
        except trio.TooSlowError:
            if die_on_timeout:
                live.link.die(f"the server did not answer a {what} within {timeout:g}s")
            if tool is not None:
                raise ToolCallTimeout(
                    f"server {self.label!r}: tool {tool!r} did not finish within {timeout:g}s; the server was asked to"
                    " cancel it (raise the call timeout if the tool is legitimately slow)",
                    server=self.label,
                    tool=tool,
                    timeout=timeout,
                ) from None
            raise ConnectionFailed(
                f"server {self.label!r}: {what} timed out after {timeout:g}s", server=self.label
            ) from None
        except MCPError as exc:
            if exc.error.code == mcp_types.CONNECTION_CLOSED:
                raise call.lost or self._lost_error(live) from None
            if tool is not None:
                raise ToolCallFailed(
                    f"server {self.label!r} rejected the call to {tool!r}: {exc.error.message} (code {exc.error.code})",
                    server=self.label,
                    tool=tool,
                ) from None
            raise ServerProtocolError(
                f"server {self.label!r}: {what} failed: {exc.error.message}", server=self.label
            ) from None
        except (McpActorsError, trio.Cancelled):
            raise
        except Exception as exc:
            # The reply did not parse (pydantic) or the SDK choked: the server's fault, this call only.
            raise ServerProtocolError(
                f"server {self.label!r}: {what} returned something that is not valid MCP: {type(exc).__name__}: {exc}",
                server=self.label,
            ) from exc
        finally:
            live.calls.discard(call)
            if call_id is not None:
                same_id = self.cell.calls_by_id.get(call_id, set())
                same_id.discard(call)
                if not same_id:
                    self.cell.calls_by_id.pop(call_id, None)
            self.cell.inflight = len(live.calls)
            if call.lost is not None:
                raise call.lost

    async def _list_tools(self) -> tuple[mcp_types.Tool, ...]:
        async def op(session: ClientSession) -> tuple[mcp_types.Tool, ...]:
            tools: list[mcp_types.Tool] = []
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            return tuple(tools)

        return await self._request("tools/list", op, timeout=self.settings.call_timeout)

    async def _list_prompts(self) -> tuple[mcp_types.Prompt, ...]:
        async def op(session: ClientSession) -> tuple[mcp_types.Prompt, ...]:
            caps = session.server_capabilities
            if caps is None or caps.prompts is None:
                return ()
            return tuple((await session.list_prompts()).prompts)

        return await self._request("prompts/list", op, timeout=self.settings.call_timeout)

    async def _list_resources(self) -> tuple[mcp_types.Resource, ...]:
        async def op(session: ClientSession) -> tuple[mcp_types.Resource, ...]:
            caps = session.server_capabilities
            if caps is None or caps.resources is None:
                return ()
            return tuple((await session.list_resources()).resources)

        return await self._request("resources/list", op, timeout=self.settings.call_timeout)

    async def call_direct(
        self, name: str, arguments: dict[str, Any], timeout: float | None
    ) -> mcp_types.CallToolResult:
        """A tool call run in the *caller's* task over this actor's live session.

        The session multiplexes calls, so there is nothing for the mailbox to serialise;
        skipping it saves two task switches per call. The call is still registered with
        the actor (fail-fast on death, counted in flight), and cancelling the caller
        cancels the request on the server, exactly as on the mailbox path.
        """
        bound = timeout if timeout is not None else self.settings.call_timeout

        async def op(session: ClientSession) -> mcp_types.CallToolResult:
            return await session.call_tool(name, arguments)

        return await self._request("tools/call", op, timeout=bound, tool=name)

    async def _call_tool(self, message: CallTool) -> mcp_types.CallToolResult:
        timeout = message.timeout if message.timeout is not None else self.settings.call_timeout

        async def op(session: ClientSession) -> mcp_types.CallToolResult:
            return await session.call_tool(message.name, message.arguments)

        return await self._request(
            "tools/call", op, timeout=timeout, tool=message.name, reply=message.reply, call_id=message.call_id
        )

    async def _health(self, timeout: float) -> float:
        async def op(session: ClientSession) -> float:
            start = time.perf_counter()
            await session.send_ping()
            return time.perf_counter() - start

        return await self._request("ping", op, timeout=timeout, die_on_timeout=True)


# ---------------------------------------------------------------------- the slot


async def _park(
    settings: ConnectionSettings,
    inbox: trio.MemoryReceiveChannel[ConnectionMessage],
    cell: _StatusCell,
    cause: BaseException | None,
) -> Reconnect | None:
    """Answer every request with ServerCircuitOpen until a Reconnect (or the mailbox closes)."""
    reason = str(cause) if cause is not None else "too many failures"
    tail = cause.stderr_tail if isinstance(cause, ConnectionFailed) else ()
    cell.transition(ConnectionState.ERROR, error=reason, circuit_open=True, pid=None)
    async for message in inbox:
        match message:
            case Reconnect():
                return message
            case Disconnect():
                message.reply.send(None)
            case _:
                message.reply.fail(
                    ServerCircuitOpen(
                        f"server {settings.server_name!r} is parked in error after repeated failures ({reason}); fix it"
                        " and call reconnect",
                        server=settings.server_name,
                        stderr_tail=tail,
                    )
                )
    return None


async def run_connection_slot(
    settings: ConnectionSettings,
    inbox: trio.MemoryReceiveChannel[ConnectionMessage],
    cell: _StatusCell,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one server's actor under its own supervisor until its mailbox closes.

    The supervisor (one_for_one, the settings' intensity and backoff) restarts the actor
    after every crash; past the intensity the server is parked with its circuit open
    until a :class:`Reconnect` arrives, which starts a fresh supervisor.
    """
    task_status.started(None)
    initial: list[ConnectionMessage] = []
    while True:
        slot = _SlotState()
        finished = trio.Event()
        starts = 0

        async def start_actor(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            nonlocal starts, initial
            eager = starts > 0
            if starts > 0:
                cell.set(restarts=cell.status.restarts + 1)
            starts += 1
            first, initial = initial, []
            # Bound per incarnation of the loop: this closure only runs inside it.
            actor = _ConnectionActor(settings, inbox, cell, slot, eager=eager, initial=first)  # noqa: B023
            await actor.run(task_status=task_status)
            finished.set()  # noqa: B023

        spec = SupervisorSpec(strategy=Strategy.ONE_FOR_ONE, intensity=settings.intensity, backoff=settings.backoff)
        child = ChildSpec(
            id=settings.server_id,
            start=start_actor,
            restart=Restart.TRANSIENT,
            shutdown=Shutdown.after(_CLOSE_BOUND),
        )
        cause: BaseException | None = None
        try:
            async with open_supervisor(spec, children=[child], name=f"server:{settings.server_name}"):
                await finished.wait()
        except RestartIntensityExceeded as exc:
            cause = exc.__cause__
        if slot.park is None and cause is None:
            return
        reconnect = await _park(settings, inbox, cell, slot.park or cause)
        if reconnect is None:
            return
        cell.set(circuit_open=False, restarts=0)
        initial = [reconnect]


# ---------------------------------------------------------------------- the handle


@attrs.define(eq=False)
class ConnectionHandle:
    """The caller's side of one server's actor: typed requests, bounded waits.

    Every method is safe to cancel; cancelling only abandons the reply.
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
        if status.calls_in_flight != self._cell.inflight:
            status = attrs.evolve(status, calls_in_flight=self._cell.inflight)
        return status

    def stderr_tail(self, n: int = 20) -> tuple[str, ...]:
        """The server's last stderr lines, live while it runs (stdio only)."""
        live = self._cell.live_stderr
        return live.lines(n) if live is not None else self._cell.status.stderr_tail[-n:]

    async def wait_for_stderr(self, predicate: Callable[[str], bool]) -> str:
        """Wait until the running server writes a stderr line satisfying ``predicate``.

        Unbounded: wrap it in ``trio.fail_after``. Raises ``RuntimeError`` when the server
        is not running.
        """
        live = self._cell.live_stderr
        if live is None:
            raise RuntimeError(f"server {self.settings.server_name!r} has no running process")
        return await live.wait_for(predicate)

    def _outer_bound(self, call_timeout: float | None = None) -> float:
        s = self.settings
        call = call_timeout if call_timeout is not None else s.call_timeout
        return s.connect_timeout + call + s.backoff.max_delay * 2 + _CLOSE_BOUND * 2

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

    async def connect(self) -> None:
        """Connect if not connected (coalesced with an attempt under way)."""
        await self._ask(lambda r: Connect(reply=r), bound=self._outer_bound(0))

    async def list_tools(self) -> tuple[mcp_types.Tool, ...]:
        """Every tool the server offers (all pages), fetched now."""
        return await self._ask(lambda r: ListTools(reply=r), bound=self._outer_bound())

    async def list_prompts(self) -> tuple[mcp_types.Prompt, ...]:
        """The server's prompts (empty when it has none)."""
        return await self._ask(lambda r: GetPrompts(reply=r), bound=self._outer_bound())

    async def list_resources(self) -> tuple[mcp_types.Resource, ...]:
        """The server's resources (empty when it has none)."""
        return await self._ask(lambda r: GetResources(reply=r), bound=self._outer_bound())

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        call_id: str | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool by its name on the server; a tool-level error is a result, not an exception.

        Cancelling the caller cancels the call on the server too (``notifications/cancelled``).
        """
        actor = self._cell.fast
        if actor is not None:
            return await actor.call_direct(name, dict(arguments or {}), timeout)
        key = call_id if call_id is not None else f"call-{next(_CALL_KEYS)}"
        try:
            return await self._ask(
                lambda r: CallTool(
                    name=name,
                    arguments=dict(arguments or {}),
                    timeout=timeout,
                    call_id=key,
                    reply=r,
                ),
                bound=self._outer_bound(timeout),
            )
        except BaseException:
            # Answered calls are no longer registered; what is left is a call we gave up on.
            for call in list(self._cell.calls_by_id.get(key, ())):
                call.abandoned = True
                call.scope.cancel()
            raise

    async def health(self, *, timeout: float = 10.0) -> float:
        """Ping now; returns the round-trip time in seconds."""
        return await self._ask(lambda r: Health(reply=r, timeout=timeout), bound=self._outer_bound(timeout))

    async def disconnect(self) -> None:
        """Close the connection (and stop a stdio server); it reconnects lazily on the next demand."""
        await self._ask(lambda r: Disconnect(reply=r), bound=_CLOSE_BOUND * 2)

    async def reconnect(self) -> None:
        """Close and connect again; also closes an open circuit."""
        await self._ask(lambda r: Reconnect(reply=r), bound=self._outer_bound(0))

    async def aclose(self) -> None:
        """Close the mailbox: the actor closes its connection and stops."""
        await self._mailbox.aclose()


def open_connection(
    settings: ConnectionSettings, bus: events.EventBus
) -> tuple[ConnectionHandle, Callable[..., Awaitable[None]]]:
    """A handle plus the slot function to run under a supervisor (``await start(task_status=...)``)."""
    mailbox, inbox = open_mailbox(settings.mailbox_capacity)
    cell = _StatusCell(ConnectionStatus(server_id=settings.server_id, server_name=settings.server_name), bus)
    handle = ConnectionHandle(settings, mailbox, cell)
    return handle, functools.partial(run_connection_slot, settings, inbox, cell)
