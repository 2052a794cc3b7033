"""What a caller holds of one server's actor: typed requests with bounded waits, and the slot to run.

Every request runs in the caller's task over the live session; only getting that session
(connecting, waiting through a restart) goes through the actor's mailbox.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import attrs
import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.shared.dispatcher import ProgressFnT

from mcp_actors import events
from mcp_actors._connection.actor import _is_modern, _probe, _Slot, _stop_mailbox, run_connection_slot
from mcp_actors._connection.callbacks import INPUT_REQUIRED_MAX_ROUNDS, answer_input_requests, fulfil_input_required
from mcp_actors._connection.listen import Listener
from mcp_actors._connection.listings import FETCH_NOW, MAX_PAGES, Listing, ListingKind
from mcp_actors._connection.live import LiveSession, ProgressDeadline, SessionEnded
from mcp_actors._connection.messages import (
    Connect,
    ConnectionMessage,
    Disconnect,
    FillListing,
    Reconnect,
    SetLogLevel,
)
from mcp_actors._connection.status import (
    RESOURCE_CACHE_TTL,
    STOP_BOUND,
    ConnectionSettings,
    ConnectionState,
    ConnectionStatus,
    ProgressCallback,
    _StatusCell,
)
from mcp_actors._connection.tasks import TASK_STARTED, TASKS_EXTENSION, TERMINAL, ExtensionTask
from mcp_actors._sdk import InputRequiredRoundsExceededError
from mcp_actors.errors import (
    ActorStopped,
    ConnectionFailed,
    ServerConnectionLost,
    ServerProtocolError,
    ServerRequestFailed,
    ToolCallFailed,
    ToolOutputInvalid,
    ToolTaskFailed,
)
from supervisors import (
    Mailbox,
    MailboxClosed,
    NoReply,
    Reply,
    open_mailbox,
)

__all__ = ["ConnectionHandle", "SlotRunner", "open_connection", "open_slot"]

logger = logging.getLogger(__name__)

_TASK_POLL_MS: Final = 50
_TASK_CANCEL_BOUND: Final = 5.0
T = TypeVar("T")


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
    _stops: trio.MemorySendChannel[str]
    """Where :meth:`aclose` says why it closed the mailbox: the slot records it."""

    @property
    def server_id(self) -> str:
        """The server record's id."""
        return self.settings.server_id

    @property
    def state(self) -> ConnectionState:
        """The connection's state now, as :meth:`status` reports it, without building a snapshot.

        For the call path: :meth:`status` copies the snapshot whenever the calls in flight
        changed, which at 50 calls in flight is every call.
        """
        return self._cell.status.state

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

    async def notifications_delivered(self) -> None:
        """Wait until the live session's notifications received so far are handled; at once when not connected."""
        live = self._cell.live
        if live is not None:
            await live.notifications_delivered()

    async def initialize_result(self) -> mcp_types.InitializeResult:
        """The live connection's handshake answer (connecting first if needed); no request is sent.

        Up to 2025-11-25 it is the server's own ``InitializeResult``. A 2026-07-28 connection has
        no handshake: its ``DiscoverResult`` is given in the same shape (negotiated version,
        capabilities, server info, instructions), so a caller that wants what ``initialize()``
        returns gets it on every revision.
        """
        session = (await self._live()).session
        result = session.initialize_result
        if result is not None:
            return result
        capabilities = session.server_capabilities or mcp_types.ServerCapabilities()
        info = session.server_info or mcp_types.Implementation(name=self.settings.server_name, version="")
        return mcp_types.InitializeResult(
            protocol_version=session.protocol_version or "",
            capabilities=capabilities,
            server_info=info,
            instructions=session.instructions,
        )

    def principal(self) -> str | None:
        """Who the live connection's requests go out as now (:attr:`~mcp_actors._wire.link.TransportLink.principal`).

        ``None`` when not connected, or when the link's identity is fixed for its life.
        """
        live = self._cell.live
        return live.link.principal() if live is not None else None

    async def _listing(self, kind: ListingKind, *, max_age: float) -> Listing:
        """A current listing of ``kind``: the published one, else the actor's one fill of it.

        ``max_age`` is the caller's rule for a server that gave no word on the list's life;
        a 2026-07-28 server's ``ttlMs`` (and ``cacheScope``) replaces it
        (:meth:`~mcp_actors._connection.listings.Listing.current`).

        A hit costs no round trip. A miss asks the actor, which joins every concurrent miss
        into one request (see :mod:`mcp_actors._connection.listings`); giving up here never cancels it.
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
        """Every tool the server offers (all pages), fetched now (concurrent calls share one request).

        Fetched even while the server's ``ttlMs`` says the last list is fresh: this is the
        request ``mcp-actors test`` times. The cached lists are :meth:`tools_listing`'s.
        """
        listing = await self._listing(ListingKind.TOOLS, max_age=FETCH_NOW)
        return listing.items

    async def list_tools_at_epoch(self) -> tuple[tuple[mcp_types.Tool, ...], int]:
        """:meth:`list_tools`, with the ``tools_epoch`` the list belongs to (caches key on it).

        A ``notifications/tools/list_changed`` moves the status's ``tools_epoch`` on; a cache
        entry stamped with this epoch is stale from then on. Connects first when not
        connected, in the same request to the actor.
        """
        listing = await self._listing(ListingKind.TOOLS, max_age=FETCH_NOW)
        return listing.items, listing.epoch

    async def tools_listing(self, *, max_age: float) -> Listing:
        """The connection's tool listing, no older than ``max_age`` seconds: the registry's cache fills from it.

        Like :meth:`list_tools_at_epoch`, with the whole :class:`~mcp_actors._connection.listings.Listing`
        (its epoch and when it arrived); a listing a caller who gave up left behind answers
        the next caller while it is current. A 2026-07-28 server's ``ttlMs`` replaces
        ``max_age``; ``max_age`` 0 or less is a cache turned off (the host's ``tool_cache_ttl``
        of 0): fetched now, whatever the server said.
        """
        return await self._listing(ListingKind.TOOLS, max_age=max_age if max_age > 0 else FETCH_NOW)

    async def list_prompts(self) -> tuple[mcp_types.Prompt, ...]:
        """The server's prompts, all pages (empty when it has none); concurrent calls share one request.

        Fetched each time, unless the server's ``ttlMs`` says the last list is still fresh
        (then it is answered from the connection's cache until then, or a ``list_changed``).
        """
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

        Cached per connection for :data:`RESOURCE_CACHE_TTL` seconds, or for as long as the
        server's ``ttlMs`` says; a new connection or ``notifications/resources/list_changed``
        invalidates the cache at once. Concurrent misses share one request, whose outcome (a
        failure too) each of them gets.
        """
        listing = await self._listing(ListingKind.RESOURCES, max_age=RESOURCE_CACHE_TTL)
        return listing.items

    async def list_resource_templates(self) -> tuple[mcp_types.ResourceTemplate, ...]:
        """The server's resource templates, all pages (empty when it has none); concurrent calls share one request.

        Fetched each time, unless the server's ``ttlMs`` says the last list is still fresh.
        """
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
        :data:`~mcp_actors._connection.callbacks.INPUT_REQUIRED_MAX_ROUNDS` rounds is a protocol error
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

        async def op(live: LiveSession) -> None:
            session = live.session
            if _is_modern(session):
                # The connection's state: the actor records it (SessionEnded if live was replaced).
                await self._ask(
                    lambda r: SetLogLevel(live=live, level=level, reply=r), bound=self.settings.call_timeout
                )
                return
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MCPDeprecationWarning: deprecated only in 2026-07-28
                await session.set_logging_level(level)  # type: ignore[arg-type]

        await self._request("logging/setLevel", live_op=op)

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

    def call_goes_straight(self, name: str) -> bool:
        """Whether :meth:`call_tool` of ``name``, awaited now, awaits nothing before its bounded request.

        True when a live session is published and not ended, this connection's listing
        answers for the tool (no ``tools/list`` first), the tool does not need a 2025-11-25
        task, and progress cannot push the deadline back (no ``resetTimeoutOnProgress``):
        then the call's ``timeout`` bounds it from its first step to its answer, and a
        caller with a bound of its own may hand it down as the timeout instead of opening
        a cancel scope around the call (the tool adapters do).
        """
        live = self._cell.live
        if live is None or live.lost is not None or self.settings.reset_timeout_on_progress:
            return False
        found, known = self._listed_tool(name)
        if not found:
            return False
        execution = known.execution if known is not None else None
        return (
            execution is None or execution.task_support != "required" or (live.stamp is not None and live.stamp.modern)
        )

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
        meta: Mapping[str, Any] | None = None,
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
            as_task: Run it as a task. At 2025-11-25: ``None`` does so exactly when the tool's
                ``execution.taskSupport`` is ``required``. At 2026-07-28, where the server
                decides (the ``io.modelcontextprotocol/tasks`` extension): ``None`` and
                ``True`` let it answer with a task, which is then driven to its result;
                ``False`` declares no support for tasks on this request, so it answers plainly;
                ``True`` to a server that does not offer the extension raises
                :class:`~mcp_actors.errors.ToolCallFailed`.
            meta: The caller's ``_meta`` of the request (what the SDK's ``call_tool(meta=)``
                sends); the revision's own keys are added to it. Not sent with a call run as a 2025-11-25 task.

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
        caller_meta = dict(meta) if meta else None
        if call_id is not None:
            logger.debug("server %s: call %s of %s", settings.server_name, call_id, name)
        live = self._cell.live or await self._live()
        stamp = live.stamp
        modern = stamp.modern if stamp is not None else _is_modern(live.session)
        declare_tasks = True
        if modern:
            # 2026-07-28: tasks are the io.modelcontextprotocol/tasks extension, and the server
            # decides. The client cannot ask for a task; it can only not declare the extension on
            # this one request (as_task=False), and then the server may not answer with one.
            if as_task and not live.tasks_extension:
                raise ToolCallFailed(
                    f"server {settings.server_name!r}: tool {name!r} cannot run as a task: this connection speaks"
                    f" protocol 2026-07-28, where tasks are the {TASKS_EXTENSION} extension, and the server does not"
                    " offer it; call it without as_task, or, if the server has 2025-11-25 tasks, set its"
                    " config.protocol to 'legacy'",
                    server=settings.server_name,
                    tool=name,
                )
            declare_tasks = as_task is not False
            as_task = False  # the 2025-11-25 task path (a `task` param, tasks/result) does not exist here
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
        if on_progress is not None or deadline is not None or bus.watches_calls or as_task:
            # The event fields: built only when an event can be emitted (not per plain call).
            ids: dict[str, Any] = {
                "serverId": settings.server_id,
                "serverName": settings.server_name,
                "toolName": name,
                "callId": call_id,
            }
        if on_progress is not None or deadline is not None or bus.watches_calls:

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
            log_meta = self._log_meta(session) if live.stamp is None or live.stamp.modern else None
            meta = log_meta if caller_meta is None else {**caller_meta, **(log_meta or {})}
            try:
                # _fulfilled's first step, inline: two coroutine frames less on the hot path (with the
                # inline _request below, ~7 % of a stdio call's instructions, benchmarks.instructions).
                first = await live.call_tool(
                    name, args, on_progress=progressed, meta=meta, bound=bound, tasks=declare_tasks
                )
                if isinstance(first, mcp_types.CallToolResult):
                    return first
                if isinstance(first, ExtensionTask):
                    return await self._run_extension_task(live, name, first, call_id)

                async def send(
                    responses: mcp_types.InputResponses | None, state: str | None
                ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult | ExtensionTask:
                    return await live.call_tool(
                        name,
                        args,
                        on_progress=progressed,
                        input_responses=responses,
                        request_state=state,
                        meta=meta,
                        bound=bound,
                        tasks=declare_tasks,
                    )

                # 2026-07-28 (SEP-2322): an InputRequiredResult is fulfilled by the host callbacks and retried;
                # its final answer may be a task (the extension: input first, then the work, asynchronously).
                final: mcp_types.CallToolResult | ExtensionTask = await self._fulfil_rest(
                    session, f"tool {name!r}", first, send, tool=name
                )
                if isinstance(final, ExtensionTask):
                    return await self._run_extension_task(live, name, final, call_id)
                return final
            except RuntimeError as exc:
                raise self._invalid_output(name, exc) from None

        if as_task:

            async def task_op(live: LiveSession) -> mcp_types.CallToolResult:
                return await self._run_task(live, name, args, progressed, ids)

            return await self._request("tools/call", live_op=task_op, timeout=timeout, tool=name, progress=deadline)
        try:
            # _request's first pass, inline (a coroutine frame less per call; see op above): the session in hand.
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
                        received = await pushed.receive()
                        if isinstance(received, mcp_types.Task):
                            seen = received
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

    async def _run_extension_task(
        self, live: LiveSession, name: str, created: ExtensionTask, call_id: str | None
    ) -> mcp_types.CallToolResult:
        """Drive a task the server made of a ``tools/call`` (2026-07-28, the tasks extension) to its result.

        Poll ``tasks/get`` at the server's ``pollIntervalMs`` (a pushed ``notifications/tasks``
        ends a wait early); answer each new input request of an ``input_required`` task
        through the host callbacks and send the answers with ``tasks/update`` (a key is
        answered once, however many polls repeat it); return the ``result`` a ``completed``
        task carries. Runs inside the call's request, so its timeout and its cancellation cover
        the whole task; a task left unfinished (a timeout, a cancel, a refused input request,
        an error) gets a ``tasks/cancel``, shielded and bounded. Every change of status is a
        ``task:status`` event.

        Raises:
            ToolCallFailed: The server answered with a task though it did not offer the extension
                (no ``tasks/*`` is sent to it then).
            ToolTaskFailed: The task ended ``failed`` (with the server's error) or ``cancelled``.
        """
        label = self.settings.server_name
        if not live.tasks_extension:
            raise ToolCallFailed(
                f"server {label!r}: tool {name!r} was answered with a task ({created.task_id}), but the server did not"
                f" offer the {TASKS_EXTENSION} extension; the server is at fault: report it to its authors",
                server=label,
                tool=name,
            )
        bus = self._cell.bus
        ids = {"serverId": self.settings.server_id, "serverName": label, "toolName": name, "callId": call_id}

        def publish(seen: ExtensionTask) -> None:
            bus.emit(events.TASK_STATUS, **ids, taskId=seen.task_id, status=seen.status, message=seen.status_message)

        async def get(task_id: str) -> ExtensionTask:
            return ExtensionTask.model_validate(await live.send_raw("tasks/get", {"taskId": task_id}), by_name=False)

        task = created
        publish(task)
        started = TASK_STARTED.get()
        if started is not None:
            started(created)
        detailed = False  # a CreateTaskResult carries no payload: even a terminal one is fetched once
        answered: set[str] = set()
        finished = False
        try:
            with self._cell.tasks.watch(task.task_id) as pushed:
                while not (detailed and task.status in TERMINAL):
                    if detailed and task.status == "input_required" and task.input_requests:
                        fresh = {k: r for k, r in task.input_requests.items() if k not in answered}
                        if fresh:
                            answered.update(fresh)
                            responses = await answer_input_requests(live.session, fresh)
                            await live.send_raw("tasks/update", {"taskId": task.task_id, "inputResponses": responses})
                    seen: ExtensionTask | None = None
                    if task.status not in TERMINAL:
                        interval = max(task.poll_interval_ms or _TASK_POLL_MS, _TASK_POLL_MS) / 1000
                        with trio.move_on_after(interval):
                            received = await pushed.receive()
                            if isinstance(received, ExtensionTask):
                                seen = received
                    if seen is None:
                        seen = await get(task.task_id)
                    if (seen.status, seen.status_message) != (task.status, task.status_message):
                        publish(seen)
                    task, detailed = seen, True
            finished = True
        finally:
            if not finished:
                await self._cancel_extension_task(live, task, publish)
        if task.status == "completed":
            result = mcp_types.CallToolResult.model_validate(task.result or {}, by_name=False)
            if not result.is_error:
                try:
                    live.check_output(name, result)
                except RuntimeError as exc:
                    raise self._invalid_output(name, exc) from None
            return result
        detail = task.error.message if task.error is not None else task.status_message
        raise ToolTaskFailed(
            f"server {label!r}: tool {name!r} ran as task {task.task_id} and ended {task.status}"
            + (f": {detail}" if detail else ""),
            server=label,
            tool=name,
            task_id=task.task_id,
            status=task.status,
        )

    async def _cancel_extension_task(
        self, live: LiveSession, task: ExtensionTask, publish: Callable[[ExtensionTask], None]
    ) -> None:
        """Ask the server to cancel a task the call abandons (an acknowledgement; best effort, bounded)."""
        with trio.CancelScope(shield=True), trio.move_on_after(_TASK_CANCEL_BOUND):
            try:
                await live.send_raw("tasks/cancel", {"taskId": task.task_id})
                publish(task.model_copy(update={"status": "cancelled"}))
            except Exception as exc:  # the call already failed; this is best effort
                logger.info("server %s: cancelling task %s failed: %s", self.settings.server_name, task.task_id, exc)

    async def list_tasks(self) -> tuple[mcp_types.Task, ...]:
        """The server's tasks (``tasks/list``, 2025-11-25), all pages.

        At 2026-07-28 there is no such method (the tasks extension has no listing: a task id
        is its only handle), so nothing is sent and the answer is the one a server without it
        gives, "method not found".

        Raises:
            ServerRequestFailed: The server refused (one without tasks answers "method not found").
        """
        live = self._cell.live or await self._live()
        if _is_modern(live.session):
            name = self.settings.server_name
            raise ServerRequestFailed(
                f"server {name!r}: tasks/list failed: it does not exist at protocol 2026-07-28 (the"
                f" {TASKS_EXTENSION} extension lists no tasks; a task id is its only handle) (code"
                f" {mcp_types.METHOD_NOT_FOUND}); set the server's config.protocol to 'legacy' for 2025-11-25 tasks",
                server=name,
                method="tasks/list",
                code=mcp_types.METHOD_NOT_FOUND,
            )

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

        Unless it is busy: when a request sent before the ping is still within its own
        timeout, the server may be blocked in it, and the unanswered ping fails with
        :class:`~mcp_actors.errors.ConnectionFailed` (not ``ServerConnectionLost``) and
        leaves the server alone. At 2026-07-28, which has no ``ping``, the probe is a
        ``server/discover``.
        """

        async def op(session: ClientSession) -> float:
            start = time.perf_counter()
            await _probe(session)
            return time.perf_counter() - start

        return await self._request("ping", op, timeout=timeout, die_on_timeout=True)

    # -- host callbacks

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
        if why is not None:
            # A channel of its own, of one place, that only closers send on: never full, never
            # waited on (the mailbox may be full, or its slot waiting out a restart's backoff).
            with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
                self._stops.send_nowait(why)
        self._stops.close()  # the first reason given is the one
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
    stops: trio.MemoryReceiveChannel[str]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the slot until its mailbox closes (see :func:`run_connection_slot`)."""
        await run_connection_slot(self.settings, self.inbox, self.cell, self.stops, task_status=task_status)

    def abandon(self) -> None:
        """Answer every queued request with ActorStopped and close the mailbox; the slot never runs."""
        _stop_mailbox(_Slot(settings=self.settings, inbox=self.inbox, cell=self.cell, stops=self.stops))


def open_slot(settings: ConnectionSettings, bus: events.EventBus) -> tuple[ConnectionHandle, SlotRunner]:
    """A handle plus its slot, to run (:meth:`SlotRunner.run`) or abandon (:meth:`SlotRunner.abandon`)."""
    mailbox, inbox = open_mailbox[ConnectionMessage](settings.mailbox_capacity)
    stops_send, stops = trio.open_memory_channel[str](1)
    cell = _StatusCell(ConnectionStatus(server_id=settings.server_id, server_name=settings.server_name), bus)
    return ConnectionHandle(settings, mailbox, cell, stops_send), SlotRunner(settings, inbox, cell, stops)


def open_connection(
    settings: ConnectionSettings, bus: events.EventBus
) -> tuple[ConnectionHandle, Callable[..., Awaitable[None]]]:
    """A handle plus the slot function to run under a supervisor (``await start(task_status=...)``)."""
    handle, runner = open_slot(settings, bus)
    return handle, runner.run
