"""The gateway's streamable-HTTP front: 2025 sessions and 2026-07-28 single requests, on one endpoint.

The ``MCP-Protocol-Version`` header routes a request, as the SDK's session manager routes
it: absent or a handshake revision (2025-06-18, 2025-11-25, ...) is the session era; any
other value is the 2026-07-28 stateless era, whose ladder (the ``_meta`` envelope, the
``Mcp-*`` routing headers, the supported version) is the SDK's own
(:func:`mcp.shared.inbound.classify_inbound_request`).

**Session era.** ``initialize`` opens a session (its id, in ``Mcp-Session-Id``, carries the
session signed: :mod:`mcp_actors.serve._sessions`, so that with a shared key any replica
continues it); every later request names it (400 without it, 404 for one unknown or ended). A POSTed
request is answered as JSON; as a stream of server-sent events when it asks for progress
(``_meta.progressToken``) and the client accepts them, the progress first, the answer last.
``notifications/cancelled`` ends the named request of its session, and the upstream call
with it. ``GET`` opens the session's stream of list changes (one per session, 409 for a
second); ``DELETE`` ends the session and what runs in it. Sessions idle for
``session_idle_timeout`` end by themselves; at most ``max_sessions`` live at once (503).

**2026-07-28.** Every POST is a request of its own: no session, no ``initialize``;
``server/discover`` says what is served. A request whose client closes its connection is
cancelled, upstream too (the revision's cancellation). ``subscriptions/listen`` is a stream
of list changes that lasts until the client leaves or the gateway stops.

**Every request** is checked before any work: the path, ``Host`` and ``Origin`` (DNS
rebinding: by default only loopback names and origins, 421 and 403 otherwise), the method,
``Content-Type`` (415), ``Accept`` (406), the body's size (:class:`HttpLimits`, 413) and its
JSON-RPC shape (400).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

import attrs
import mcp_types
import mcp_types.methods as methods
import pydantic
import trio
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    decode_header_value,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
    validate_mcp_param_headers,
)
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_actors._wire.codec import decode, encode
from mcp_actors.serve._authn import Authenticator
from mcp_actors.serve._client_requests import PendingAnswers
from mcp_actors.serve._gateway import Gateway, Listener, Request, RpcError
from mcp_actors.serve._http import ConnectionWatch, HttpConnection, HttpLimits, HttpRequest
from mcp_actors.serve._profiles import not_served, profile_of_path
from mcp_actors.serve._response_stream import ResponseStream
from mcp_actors.serve._sessions import SessionBook, SessionState
from mcp_actors.serve._subscriptions import admits
from mcp_actors.serve._tasks import METHODS as TASK_METHODS

__all__ = ["DEFAULT_GRACE", "HttpFront", "LOOPBACK_HOSTS", "LOOPBACK_ORIGINS"]

logger = logging.getLogger("mcp_actors.serve")

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
LOOPBACK_HOSTS: Final = ("127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]")
"""``Host`` values a gateway bound to loopback accepts by default (``:*`` is any port)."""
LOOPBACK_ORIGINS: Final = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
"""``Origin`` values accepted by default (a request without ``Origin`` is not a browser's: accepted)."""
DEFAULT_GRACE: Final = 10.0
"""Seconds a stopping gateway gives the requests in flight to finish."""
_REQUEST_CANCELLED: Final = -32800
"""What a request cancelled by its client is answered with when an answer is owed (the SDK's code)."""
_KEEPALIVE: Final = 15.0
"""Seconds between comment lines on a quiet event stream (a proxy's idle timeout must not end it)."""
_SSE_HEADERS: Final = (("content-type", "text/event-stream"), ("cache-control", "no-cache, no-transform"))
_JSON: Final = (("content-type", "application/json"),)
_LIST_KINDS: Final = frozenset({"tools", "prompts", "resources"})


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + encode(message) + b"\n\n"


def _error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


@functools.lru_cache(maxsize=64)
def _accepts_value(accept: str) -> tuple[bool, bool]:
    kinds = [part.split(";", 1)[0].strip().lower() for part in accept.split(",")]
    anything = "*/*" in kinds
    return (
        anything or "application/json" in kinds or "application/*" in kinds,
        anything or "text/event-stream" in kinds or "text/*" in kinds,
    )


def _accepts(headers: dict[str, str]) -> tuple[bool, bool]:
    """``(json, sse)``: whether the ``Accept`` header takes each (RFC 9110 wildcards; the SDK's rule).

    A client sends the same few values on every request: each is worked out once (a small cache).
    """
    return _accepts_value(headers.get("accept", ""))


def _matches(value: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if value == pattern or (pattern.endswith(":*") and value.startswith(pattern[:-1]) and value != pattern[:-1]):
            return True
    return False


def _request_id_ok(rid: Any) -> bool:
    return (isinstance(rid, str) or isinstance(rid, int)) and not isinstance(rid, bool)


def _modern_envelope(params: Any) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


class _Lines(dict[str, str]):
    """Header lines as the SDK's header check reads them: ``items()`` yields every line, repeats too."""

    def __init__(self, lines: list[tuple[str, str]]) -> None:
        super().__init__(lines)
        self._lines = lines

    def items(self) -> Any:  # the lines, not the folded pairs: a repeated header is seen
        return list(self._lines)


@attrs.define(eq=False)
class _EventQueue(Listener):
    """A stream's queue of list changes; a full queue drops (a list change says the same again)."""

    kinds: frozenset[str]
    meta: dict[str, Any] | None = None
    session: _Session | None = None
    """The 2025 session whose GET stream this is: it also carries log messages and resource updates."""
    send: trio.MemorySendChannel[dict[str, Any]] = attrs.field(init=False)
    receive: trio.MemoryReceiveChannel[dict[str, Any]] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[dict[str, Any]](32)

    def changed(self, kinds: frozenset[str]) -> None:
        for kind in sorted(kinds & self.kinds):
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"}
            if self.meta is not None:
                message["params"] = {"_meta": self.meta}
            self.notify(message)

    def notify(self, message: dict[str, Any]) -> None:
        """Queue any notification (dropped when the queue is full)."""
        try:
            self.send.send_nowait(message)
        except (trio.WouldBlock, trio.ClosedResourceError):
            pass

    def log(self, message: dict[str, Any], level: str) -> None:
        if self.session is not None and admits(self.session.log_level, level):
            self.notify(message)


@attrs.define(eq=False)
class _Session:
    """One 2025 session: its revision, its requests in flight, its GET stream."""

    id: str
    version: str
    last_seen: float
    """``time.monotonic()`` of its last request (the idle timeout counts from it)."""
    profile: str | None = None
    """The profile whose path opened it; a session is named only on that path."""
    state: SessionState | None = None
    """What its id carries (:mod:`mcp_actors.serve._sessions`): any replica continues it from there."""
    expires_at: float = math.inf
    """Unix time it ends, whatever its use (signed into its id)."""
    in_flight: dict[Any, trio.CancelScope] = attrs.field(factory=dict)
    stream: _EventQueue | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)
    capabilities: dict[str, Any] = attrs.field(factory=dict)
    """What the client declared in ``initialize`` (sampling, elicitation, roots)."""
    log_level: str | None = None
    """The client's ``logging/setLevel`` (``None``: every level)."""
    answers: PendingAnswers = attrs.field(factory=PendingAnswers)
    """The gateway's requests to this client (relayed from upstreams) waiting for its answer."""

    def notify(self, message: dict[str, Any]) -> None:
        """A notification outside calls (a resource update): on the GET stream when one is open."""
        if self.stream is not None:
            self.stream.notify(message)

    def end(self) -> None:
        self.ended.set()
        self.answers.abandon()
        for scope in self.in_flight.values():
            scope.cancel()


@attrs.define(eq=False)
class HttpFront:
    """Serves a :class:`Gateway` over streamable HTTP on listeners the caller opened.

    Args:
        gateway: What answers the requests.
        path: The endpoint's path.
        allowed_hosts: ``Host`` values accepted (``name:*`` for any port); ``None``: any.
        allowed_origins: ``Origin`` values accepted; a request without one is accepted.
        limits: The connection bounds.
        max_sessions: Sessions (2025) alive at once.
        session_idle_timeout: Seconds a session may go unused before it ends.
        auth: Who may send requests (:class:`~mcp_actors.serve._authn.Authenticator`);
            ``None``: anyone who can connect.
        session_idle_timeout: Seconds a session may go unused before this front forgets it (it
            ends, unless a shared session key lets any replica, this one too, take it up again).
        sessions_book: How sessions are signed, continued from their id and ended everywhere.
        routes: Other paths answered on the same listener (``/healthz``, ``/readyz``, ``/metrics``),
            after the ``Host`` and ``Origin`` checks, and while the gateway stops too.
    """

    gateway: Gateway
    path: str = "/mcp"
    allowed_hosts: tuple[str, ...] | None = LOOPBACK_HOSTS
    allowed_origins: tuple[str, ...] = LOOPBACK_ORIGINS
    limits: HttpLimits = attrs.field(factory=HttpLimits)
    max_sessions: int = 10_000
    session_idle_timeout: float = 30 * 60.0
    auth: Authenticator | None = None
    sessions_book: SessionBook = attrs.field(factory=SessionBook)
    routes: Mapping[str, Callable[[HttpConnection, HttpRequest], Awaitable[None]]] = attrs.field(factory=dict)
    sessions: dict[str, _Session] = attrs.field(factory=dict, init=False)
    _in_flight: int = attrs.field(default=0, init=False)
    _idle: trio.Event = attrs.field(factory=trio.Event, init=False)
    _stopping: trio.Event = attrs.field(factory=trio.Event, init=False)
    _accepting: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _connections: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _listeners: list[trio.SocketListener] = attrs.field(factory=list, init=False)
    _watch: ConnectionWatch = attrs.field(factory=ConnectionWatch, init=False)
    _hosts_seen: dict[str, bool] = attrs.field(factory=dict, init=False)
    _tasks: trio.Nursery | None = attrs.field(default=None, init=False)
    """Where the writers of streamed answers run."""

    async def serve(
        self, listeners: list[trio.SocketListener], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Accept and serve connections until :meth:`stop` (or cancellation); then return."""
        self._listeners = listeners
        try:
            with self._connections:
                async with trio.open_nursery() as nursery:
                    self._tasks = nursery
                    nursery.start_soon(self._expire_sessions)
                    await nursery.start(self.sessions_book.watch, self._ended_elsewhere)
                    nursery.start_soon(self._watch.run)
                    await nursery.start(self._accept, listeners, nursery)
                    task_status.started()
                    # Runs until stop() cancels _connections, after the requests in flight.
        finally:
            self._done.set()

    async def _accept(
        self,
        listeners: list[trio.SocketListener],
        handlers: trio.Nursery,
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """The accept loop, in a scope of its own: :meth:`stop` ends it, not the connections (in ``handlers``)."""
        with self._accepting:
            await trio.serve_listeners(self._connection, listeners, handler_nursery=handlers, task_status=task_status)

    async def stopped(self) -> None:
        """Wait until :meth:`serve` has returned."""
        await self._done.wait()

    async def stop(self, grace: float = DEFAULT_GRACE) -> None:
        """Stop accepting, end the event streams, let requests in flight finish within ``grace`` seconds.

        What is still running then is cancelled (its upstream calls too); :meth:`serve` returns.
        """
        self._accepting.cancel()
        for listener in self._listeners:
            await listener.aclose()  # a new connection is refused at once, not left in the backlog
        self._stopping.set()
        for session in list(self.sessions.values()):
            session.ended.set()  # its GET stream ends; its requests go on within the grace
        with trio.move_on_after(grace):
            while self._in_flight:
                self._idle = trio.Event()
                await self._idle.wait()
        self._connections.cancel()
        for session in list(self.sessions.values()):
            session.end()
        self.sessions.clear()

    async def _expire_sessions(self) -> None:
        period = max(1.0, min(60.0, self.session_idle_timeout / 4))
        while True:
            await trio.sleep(period)
            deadline, now = time.monotonic() - self.session_idle_timeout, time.time()
            for session in list(self.sessions.values()):
                if session.expires_at <= now:
                    self._end_session(session)
                elif session.last_seen < deadline and not session.in_flight and session.stream is None:
                    logger.info("session %s ended: unused for %gs", session.id[:8], self.session_idle_timeout)
                    self._end_session(session)

    def _end_session(self, session: _Session) -> None:
        self.sessions.pop(session.id, None)
        session.end()
        self.gateway.subscriptions.forget(session)

    def _ended_elsewhere(self, nonce: str) -> None:
        """Another replica ended a session (``DELETE``): end this replica's copy too."""
        for session in list(self.sessions.values()):
            if session.state is not None and session.state.nonce == nonce:
                self._end_session(session)

    # ------------------------------------------------------------------ connections

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = HttpConnection(stream, self.limits)

        async def exchange(request: HttpRequest) -> None:
            if self._stopping.is_set() and request.path not in self.routes:
                # A stopping gateway takes no new work: an answer, not a dropped connection.
                request.keep_alive = False
                await conn.respond(
                    503, _JSON, encode(_error(None, mcp_types.INTERNAL_ERROR, "the gateway is stopping")), close=True
                )
                return
            await self._exchange(conn, request)
            if self._stopping.is_set() and request.path not in self.routes:
                request.keep_alive = False  # a probe's connection stays: it reads /readyz's 503 through the drain

        self._watch.add(conn)
        try:
            await conn.serve(exchange)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        except Exception:
            # A fault of ours in one exchange ends that connection, never the gateway.
            logger.exception("the gateway failed on a connection; it is closed")
        finally:
            self._watch.discard(conn)
            with trio.CancelScope(shield=True):
                await conn.aclose()

    async def _reply(
        self, conn: HttpConnection, status: int, message: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        await conn.respond(status, (*_JSON, *headers), encode(message))

    async def _refuse(self, conn: HttpConnection, status: int, why: str, rid: Any = None) -> None:
        """Answer a request the transport refuses: ``status`` and an ``INVALID_REQUEST`` error saying ``why``."""
        await self._reply(conn, status, _error(rid, mcp_types.INVALID_REQUEST, why))

    async def _exchange(self, conn: HttpConnection, request: HttpRequest) -> None:
        if self.auth is not None and await self.auth.admit(conn, request) is None:
            return  # answered: refused, or the protected-resource metadata
        headers = request.headers
        route = self.routes.get(request.path)
        if route is None:
            request.profile = profile_of_path(request.path, self.path, self.gateway.profiles)
            if request.profile is None:
                await self._refuse(conn, 404, not_served(request.path, self.path, self.gateway.profiles))
                return
        if self.allowed_hosts is not None and not self._host_ok(headers.get("host", "")):
            await self._refuse(conn, 421, "Invalid Host header")
            return
        origin = headers.get("origin")
        if origin is not None and not _matches(origin, self.allowed_origins):
            await self._refuse(conn, 403, "Invalid Origin header")
            return
        if route is not None:
            await route(conn, request)
            return
        version = headers.get(VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._modern(conn, request, version)
        elif request.method == "POST":
            await self._post(conn, request)
        elif request.method == "GET":
            await self._get(conn, request)
        elif request.method == "DELETE":
            await self._delete(conn, request)
        else:
            await conn.respond(405, (("allow", "GET, POST, DELETE"),))

    def _host_ok(self, host: str) -> bool:
        """Whether ``host`` is allowed; the answers for the last few values are kept (a client sends one)."""
        known = self._hosts_seen.get(host)
        if known is None:
            known = _matches(host, self.allowed_hosts or ())
            if len(self._hosts_seen) >= 64:
                self._hosts_seen.clear()
            self._hosts_seen[host] = known
        return known

    async def _decoded(self, conn: HttpConnection, request: HttpRequest) -> Any:
        """The POSTed JSON-RPC message, or ``None`` after answering what was wrong with it."""
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            await self._refuse(conn, 415, "Content-Type must be application/json")
            return None
        if not _accepts(request.headers)[0]:
            await self._refuse(conn, 406, "the client must accept application/json")
            return None
        try:
            message = decode(request.body)
        except (ValueError, RecursionError):
            await self._reply(conn, 400, _error(None, mcp_types.PARSE_ERROR, "Parse error"))
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await self._refuse(conn, 400, "the body must be one JSON-RPC 2.0 message")
            return None
        return message

    # ------------------------------------------------------------------ 2025: sessions

    async def _session(self, conn: HttpConnection, request: HttpRequest) -> _Session | None:
        sid = request.headers.get(SESSION_HEADER)
        if sid is None:
            await self._refuse(conn, 400, "Bad Request: Missing session ID")
            return None
        session = self.sessions.get(sid)
        if session is None:
            session = await self._resumed(sid)
        elif session.expires_at <= time.time():
            self._end_session(session)
            session = None
        if session is None or session.profile != request.profile:
            await self._refuse(conn, 404, "Session not found")
            return None
        session.last_seen = time.monotonic()
        return session

    async def _resumed(self, sid: str) -> _Session | None:
        """A session opened elsewhere (another replica, or this one before it forgot it), rebuilt from its id."""
        if len(self.sessions) >= self.max_sessions:
            return None
        state = await self.sessions_book.resume(sid)
        if state is None:
            return None
        session = self.sessions.get(sid)  # another request may have rebuilt it meanwhile
        if session is None:
            session = _Session(
                id=sid,
                version=state.version,
                last_seen=time.monotonic(),
                profile=state.profile,
                state=state,
                capabilities=dict(state.capabilities),
            )
            session.expires_at = state.expires_at
            self.sessions[sid] = session
        return session

    async def _post(self, conn: HttpConnection, request: HttpRequest) -> None:
        message = await self._decoded(conn, request)
        if message is None:
            return
        method = message.get("method")
        if method == "initialize" and "id" in message:
            await self._initialize(conn, message, request.profile)
            return
        session = await self._session(conn, request)
        if session is None:
            return
        sid_header = ((SESSION_HEADER, session.id),)
        if not isinstance(method, str):
            if "id" in message and ("result" in message or "error" in message):
                session.answers.answered(message)  # an answer to an upstream's request, relayed
                await conn.respond(202, sid_header)
            else:
                await self._refuse(conn, 400, "not a JSON-RPC message")
            return
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            await self._refuse(conn, 400, "params must be an object", message.get("id"))
            return
        if "id" not in message:
            await conn.respond(202, sid_header)
            if method == "notifications/cancelled" and params is not None:
                scope = session.in_flight.get(params.get("requestId"))
                if scope is not None:
                    scope.cancel()
            return
        rid = message["id"]
        if not _request_id_ok(rid):
            await self._refuse(conn, 400, "the id must be a string or an integer")
            return
        if _modern_envelope(params):
            refused = _error(
                rid,
                mcp_types.INVALID_REQUEST,
                "this connection serves the handshake protocol era; requests carrying the 2026-07-28 envelope"
                " are not accepted on it",
            )
            await self._reply(conn, 200, refused, sid_header)
            return
        scope = trio.CancelScope()
        session.in_flight[rid] = scope
        try:
            await self._answer(
                conn,
                Request(
                    method,
                    params or {},
                    session.version,
                    profile=session.profile,
                    client=session,
                    headers=request.headers,
                ),
                rid,
                scope,
                sid_header,
                watch_close=False,
                sse_ok=_accepts(request.headers)[1],
                answers=session.answers,
            )
        finally:
            if session.in_flight.get(rid) is scope:
                del session.in_flight[rid]

    async def _initialize(self, conn: HttpConnection, message: dict[str, Any], profile: str | None = None) -> None:
        rid = message["id"]
        if not _request_id_ok(rid):
            await self._refuse(conn, 400, "the id must be a string or an integer")
            return
        if len(self.sessions) >= self.max_sessions:
            logger.warning("refused a new session: %d are open", len(self.sessions))
            await self._reply(conn, 503, _error(rid, mcp_types.INTERNAL_ERROR, "Too many open sessions"))
            return
        try:
            result, version = self.gateway.initialize(message.get("params"))
        except RpcError as exc:
            await self._reply(conn, 200, {"jsonrpc": "2.0", "id": rid, "error": exc.to_json()})
            return
        sid, state = self.sessions_book.open(version, message.get("params"), profile=profile)
        capabilities = (message.get("params") or {}).get("capabilities")
        self.sessions[sid] = _Session(
            id=sid,
            version=version,
            last_seen=time.monotonic(),
            profile=profile,
            state=state,
            expires_at=state.expires_at,
            capabilities=capabilities if isinstance(capabilities, dict) else {},
        )
        await self._reply(conn, 200, {"jsonrpc": "2.0", "id": rid, "result": result}, ((SESSION_HEADER, sid),))

    async def _get(self, conn: HttpConnection, request: HttpRequest) -> None:
        if not _accepts(request.headers)[1]:
            await self._refuse(conn, 406, "the client must accept text/event-stream")
            return
        session = await self._session(conn, request)
        if session is None:
            return
        if session.stream is not None:
            await self._refuse(conn, 409, "the session's stream is open already")
            return
        queue = session.stream = _EventQueue(kinds=_LIST_KINDS, session=session)
        self.gateway.listeners.add(queue)
        try:
            await conn.start_stream(200, (*_SSE_HEADERS, (SESSION_HEADER, session.id)))
            await self._stream_events(conn, queue, session.ended)
        finally:
            self.gateway.listeners.discard(queue)
            session.stream = None
            session.last_seen = time.monotonic()

    async def _stream_events(
        self, conn: HttpConnection, queue: _EventQueue, ended: trio.Event | None = None, last: bytes = b""
    ) -> None:
        """Write the queue's notifications until the client leaves, ``ended`` is set or the gateway stops.

        A stream the gateway ends (rather than the client) is closed with ``last`` as its last event.
        """
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_close, conn, scope)
                nursery.start_soon(_cancel_on, self._stopping, scope)
                if ended is not None:
                    nursery.start_soon(_cancel_on, ended, scope)
                while True:
                    with trio.move_on_after(_KEEPALIVE):
                        message = await queue.receive.receive()
                        await conn.send_chunk(_sse(message))
                        continue
                    await conn.send_chunk(b": keep-alive\n\n")
        if not conn.closed:
            await conn.end_stream(last)

    async def _delete(self, conn: HttpConnection, request: HttpRequest) -> None:
        session = await self._session(conn, request)
        if session is None:
            return
        self._end_session(session)
        if session.state is not None:
            await self.sessions_book.end(session.state)
        await conn.respond(200)

    # ------------------------------------------------------------------ both eras: one request

    async def _answer(
        self,
        conn: HttpConnection,
        request: Request,
        rid: Any,
        scope: trio.CancelScope,
        headers: tuple[tuple[str, str], ...],
        *,
        watch_close: bool,
        sse_ok: bool,
        modern: bool = False,
        answers: PendingAnswers | None = None,
    ) -> None:
        """Run one request and write its answer: JSON, or events when something comes before it.

        With a client that accepts event streams, the request's notifications (progress, a
        server's log messages) and, at the 2025 revisions, an upstream's requests to the client
        (``answers`` matches the client's answers to them) open a stream; else JSON.
        """
        self._in_flight += 1
        try:
            stream: ResponseStream | None = None
            if sse_ok and self._tasks is not None:
                stream = ResponseStream(conn, headers, self._tasks, scope.cancel)
                request.notify = stream.notify
                if answers is not None:
                    send = stream.send

                    async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
                        return await answers.ask(send, method, params)

                    request.ask = ask
            with scope:
                if watch_close:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(_cancel_on_close, conn, scope)
                        answer = await self._outcome(request, rid)
                        nursery.cancel_scope.cancel()
                else:
                    answer = await self._outcome(request, rid)
            if scope.cancelled_caught:
                if conn.closed:
                    return
                answer = _error(rid, _REQUEST_CANCELLED, "Request cancelled")
            status = 200
            if modern and "error" in answer:
                status = ERROR_CODE_HTTP_STATUS.get(answer["error"]["code"], 200)
            if stream is not None:
                await stream.finish(status, answer)
            else:
                await conn.respond(status, (*_JSON, *headers), encode(answer))
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    async def _outcome(self, request: Request, rid: Any) -> dict[str, Any]:
        try:
            result = await self.gateway.handle(request)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": rid, "error": exc.to_json()}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    # ------------------------------------------------------------------ 2026-07-28

    async def _modern(self, conn: HttpConnection, request: HttpRequest, version: str) -> None:
        if request.method != "POST":
            await conn.respond(405, (("allow", "POST"),))
            return
        message = await self._decoded(conn, request)
        if message is None:
            return
        if "id" not in message:
            if not isinstance(message.get("method"), str):
                await self._refuse(conn, 400, "not a JSON-RPC message")
                return
            rejection = unsupported_protocol_version_rejection(version)
            if rejection is not None:
                await self._rejected(conn, rejection, None)
                return
            await conn.respond(202)  # no client notifications at this revision: acknowledged and dropped
            return
        rid = message["id"]
        method = message.get("method")
        if not isinstance(method, str) or not _request_id_ok(rid) or not isinstance(message.get("params", {}), dict):
            await self._refuse(conn, 400, "the body must be one JSON-RPC request or notification")
            return
        sse_ok = _accepts(request.headers)[1]
        if method == "subscriptions/listen" and not sse_ok:
            await self._refuse(conn, 406, "the client must accept text/event-stream", rid)
            return
        duplicated = find_duplicated_routing_header(request.raw_headers)
        if duplicated is not None:
            rejection = InboundLadderRejection(
                code=mcp_types.HEADER_MISMATCH, message=f"{duplicated} header appears more than once"
            )
            await self._rejected(conn, rejection, rid)
            return
        verdict = classify_inbound_request(message, headers=request.headers)
        if isinstance(verdict, InboundLadderRejection):
            await self._rejected(conn, verdict, rid)
            return
        params = message.get("params") or {}
        if method in TASK_METHODS and decode_header_value(request.headers.get("mcp-name")) != params.get("taskId"):
            # The extension's routing header: the SDK checks Mcp-Name for the core methods only.
            rejection = InboundLadderRejection(
                code=mcp_types.HEADER_MISMATCH, message="Mcp-Name header does not match the request's taskId"
            )
            await self._rejected(conn, rejection, rid)
            return
        if method == "tools/call":
            # The SDK's rung for Mcp-Param-* headers: checked against the tool's own schema, as listed.
            name, arguments = params.get("name"), params.get("arguments")
            schema = None
            if isinstance(name, str):
                profiles = self.gateway.profiles
                schema = (
                    profiles.header_schema(self.gateway, request.profile, name)
                    if profiles is not None and request.profile is not None
                    else self.gateway.header_schemas.get(name)
                )
            if schema is not None and isinstance(arguments, dict):
                rejection = validate_mcp_param_headers(schema, arguments, _Lines(request.raw_headers))
                if rejection is not None:
                    await self._rejected(conn, rejection, rid)
                    return
        if method == "subscriptions/listen":
            await self._listen(conn, Request(method, params, verdict.protocol_version, profile=request.profile), rid)
            return
        await self._answer(
            conn,
            Request(method, params, verdict.protocol_version, profile=request.profile, headers=request.headers),
            rid,
            trio.CancelScope(),
            (),
            watch_close=True,
            modern=True,
            sse_ok=sse_ok,
        )

    async def _rejected(self, conn: HttpConnection, rejection: InboundLadderRejection, rid: Any) -> None:
        status = ERROR_CODE_HTTP_STATUS.get(rejection.code, 400)
        await self._reply(conn, status, _error(rid, rejection.code, rejection.message, rejection.data))

    async def _listen(self, conn: HttpConnection, request: Request, rid: Any) -> None:
        """``subscriptions/listen``: acknowledge what is honoured, then stream those list changes."""
        try:
            methods.validate_client_request(request.method, request.version, request.params)
        except (KeyError, pydantic.ValidationError):
            await self._reply(conn, 400, _error(rid, mcp_types.INVALID_PARAMS, "Invalid request parameters"))
            return
        wanted = request.params.get("notifications") or {}
        kinds = frozenset(kind for kind in _LIST_KINDS if wanted.get(f"{kind}ListChanged") is True)
        meta = {SUBSCRIPTION_ID_META_KEY: rid}
        queue = _EventQueue(kinds=kinds, meta=meta)
        honoured: dict[str, Any] = {f"{kind}ListChanged": True for kind in sorted(kinds)}
        uris = await self.gateway.listen_resources(queue, wanted.get("resourceSubscriptions"), meta)
        if uris:
            honoured["resourceSubscriptions"] = uris
        ack = {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honoured, "_meta": meta},
        }
        # A graceful end (the gateway stops): the listen request's result closes the stream.
        last = _sse({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", "_meta": meta}})
        self.gateway.listeners.add(queue)
        try:
            await conn.start_stream(200, _SSE_HEADERS)
            await conn.send_chunk(_sse(ack))
            await self._stream_events(conn, queue, last=last)
        finally:
            self.gateway.listeners.discard(queue)
            self.gateway.subscriptions.forget(queue)


async def _cancel_on_close(conn: HttpConnection, scope: trio.CancelScope) -> None:
    await conn.wait_closed()
    scope.cancel()


async def _cancel_on(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
