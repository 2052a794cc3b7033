"""Streamable HTTP as a :class:`~mcp_actors._wire.base.Wire`: one POST per message, from the sender's task.

The SDK's streamable-HTTP client moves every message through memory streams and a task
per POST (17 trio task steps, 11 cancel scopes and 49 context managers per call, ~2 ms
CPU; see docs/performance.md, "The hot path"), and ``httpx`` alone costs ~1 ms of CPU per
POST. :class:`HttpWire` does the exchange in the caller's own task instead, on our own
HTTP/1.1 client (:mod:`mcp_actors._wire.http.http11`: keep-alive pool, TLS, proxies), wrapped by the
transport (:class:`HttpSender`, built in :mod:`mcp_actors._wire.http.transport`: its OAuth,
headers, redaction and death detection). :meth:`HttpWire.send` POSTs the JSON body
(:mod:`mcp_actors._wire.codec`, the JSON rule of every wire) and hands every message of
the answer to ``deliver`` as it arrives: a JSON body as one message, an SSE body parsed
incrementally (``event``, ``data``, ``id``, ``retry``) until the response to the request
has come, then the stream is closed. :meth:`HttpWire.run` reads the optional GET stream
for server-initiated messages once the handshake is done.

The rules are the SDK's (``mcp/client/streamable_http.py``), status by status:

* 202 answers a notification or a response; for a request it is an error reply.
* A request's error status fails that one request with a JSON-RPC error naming the status
  (``the server answered HTTP 500 Internal Server Error``), or with the JSON-RPC error the
  body carries; a 404 before any session is METHOD_NOT_FOUND (the ``server/discover``
  probe falls back on it). The connection lives on.
* The deaths are the watch's (:class:`mcp_actors._wire.http.transport._HttpWatch`): the network
  failing under a request or a response stream (the wire reports a body that breaks with
  :meth:`HttpSender.broke`), 401/403, a redirect off the endpoint's origin, 404 for a
  known session, any error status on the handshake. Timeouts are not deaths: a request
  whose answer times out gets an error reply; a quiet GET stream is reopened.
* Every message from the server is bounded by ``max_message_bytes``: a JSON answer (its
  ``content-length``, or its bytes as they come, decoded), an error status's body, an SSE
  event on a POST's or the GET stream. A request whose answer crosses it fails with
  :class:`~mcp_actors.errors.ServerMessageTooLarge` (raised by :meth:`HttpWire.send`, in
  the caller's task) as it crosses, before it is held; the connection lives on. A GET
  stream's event over it drops that stream (reopened later).
* Redirects are followed only within the endpoint's origin (:func:`redirect_within_origin`,
  the SDK's rule), at most five times. The link dies with
  the reason and :meth:`HttpWire.send` raises :class:`~mcp_actors._wire.base.WireClosed`.
* The session id comes from the ``initialize`` response's ``mcp-session-id`` header; the
  ``mcp-protocol-version`` header from the dispatcher's headers (the session stamps every
  request) or, for the messages it does not stamp, the version the handshake's result
  named. ``initialize`` itself goes without one.
* 2026-07-28: no session id; an outbound ``notifications/cancelled`` is not POSTed (the
  2026 HTTP wire has no client notifications: closing the request's POST is the
  cancellation) but aborts that request's POST if it still runs.

* Resumption (SEP-1699, handshake revisions): a request's SSE stream that the server ends
  before the answer, after an event with an ``id``, is resumed: after the stream's
  ``retry`` (else one second), a GET with ``Last-Event-ID`` continues it, as many times as
  each resumed stream brings a new event, and twice in a row when none does; then the
  request fails (CONNECTION_CLOSED). A stream without an event id fails its request at
  once. At 2026-07-28 there is no GET: closing the stream ends the request. The GET stream
  sends ``Last-Event-ID`` too when it is reopened.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import attrs
import trio

from mcp_actors._wire.base import Deliver, WireClosed
from mcp_actors._wire.codec import decode, encode, unreadable
from mcp_actors._wire.http.http11 import (
    BodyTooLarge,
    DecodingError,
    HttpError,
    HttpTimeout,
    InvalidRequest,
    Response,
    Url,
)
from mcp_actors.errors import ServerMessageTooLarge

if TYPE_CHECKING:
    from mcp_actors._wire.link import TransportLink

__all__ = ["HttpSender", "HttpWire", "SseParser", "SseTooLarge", "redirect_within_origin"]

logger = logging.getLogger("mcp_actors._wire.transports")

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
_LAST_EVENT_ID: Final = "last-event-id"
_ACCEPT: Final = "application/json, text/event-stream"
_MODERN: Final = frozenset({"2026-07-28"})
"""Protocol revisions where closing a request's POST is its cancellation (the SDK's MODERN_PROTOCOL_VERSIONS)."""

# JSON-RPC error codes (mcp_types), inlined: the hot path needs nothing else of that module.
_CONNECTION_CLOSED: Final = -32000
_INTERNAL_ERROR: Final = -32603
_INVALID_REQUEST: Final = -32600
_METHOD_NOT_FOUND: Final = -32601

_GET_RETRY_SECONDS: Final = 1.0
"""Wait before reopening a GET stream the server ended, unless it sent ``retry:`` (the SDK's default)."""
_MAX_RESUMPTIONS: Final = 2
"""Resumptions of a request's stream in a row that may bring nothing new before the request fails (the SDK's bound)."""
_DELETE_BOUND: Final = 2.0
_DRAIN_SECONDS: Final = 1.0
"""How long a request's SSE stream may stay open after its answer before we close it."""
_MAX_REDIRECTS: Final = 5


def _error(rpc_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}


def _status_text(response: Response) -> str:
    return f"HTTP {response.status} {response.reason}".rstrip()


_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


def redirect_within_origin(method: str, url: Url, status: int, location: str) -> Url | None:
    """Where a redirect the MCP transports follow leads, or None (the SDK's ``next_request_within_origin``).

    Followed when: the status is a redirect with a ``Location``; the method is kept (307/308,
    or any redirect of a GET: 301/302/303 would turn a POST into a body-less GET and drop the
    message); the target stays within ``url``'s origin (same scheme, host and port, or http to
    https on the same host with the default ports); and the ``Location`` brings no user info
    of its own.
    """
    if status not in _REDIRECTS or not location:
        return None
    if method not in ("GET", "HEAD") and status in (301, 302, 303):
        return None
    try:
        following = url.join(location)
    except InvalidRequest:
        return None
    if following.userinfo and following.userinfo != url.userinfo:
        return None
    if following.origin == url.origin:
        return following
    upgrade = (url.scheme, url.port, following.scheme, following.port) == ("http", 80, "https", 443)
    return following if upgrade and following.host == url.host else None


class HttpSender(Protocol):
    """How the wire sends: our HTTP/1.1 client with the transport's watch, auth and headers around it."""

    async def send(
        self, method: str, url: Url, headers: Mapping[str, str], body: bytes = b"", *, bound: float | None = None
    ) -> Response:
        """Send one request; the response once its head came (its body is read by the caller).

        ``bound``: seconds within which the caller's own cancel scope ends it, if known
        (see :meth:`~mcp_actors._wire.http.http11.HttpClient.send`).
        """
        ...

    def broke(self, response: Response, exc: HttpError) -> None:
        """The body of ``response`` failed to read with ``exc`` (the watch decides whether that is a death)."""
        ...


class SseTooLarge(Exception):
    """An SSE event (or a line still being read) is larger than the wire accepts."""


class SseParser:
    """An incremental ``text/event-stream`` parser: bytes in, ``(event, data)`` pairs out.

    The WHATWG rules MCP uses: lines end with CRLF, LF or CR; ``:`` starts a comment; an
    empty line ends an event; ``data`` lines are joined with LF; ``id`` (without NUL)
    and ``retry`` (digits) are remembered. Works on bytes so a JSON payload goes to
    ``orjson`` without a text copy.

    Args:
        max_event_bytes: Largest event (or unterminated line) accepted; larger raises
            :class:`SseTooLarge`.
    """

    __slots__ = ("_data", "_event", "_limit", "_parts", "_pending", "_size", "last_id", "retry_ms")

    def __init__(self, max_event_bytes: int) -> None:
        self._parts: list[bytes] = []  # an unterminated line, in pieces (a big message comes in many chunks)
        self._pending = 0
        self._data: list[bytes] = []
        self._event = b""
        self._size = 0
        self._limit = max_event_bytes
        self.last_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[tuple[str, bytes]]:
        """Parse ``chunk``; return the events it completed, in order.

        Raises:
            SseTooLarge: An event outgrew ``max_event_bytes``.
        """
        if b"\n" not in chunk and b"\r" not in chunk:
            self._parts.append(chunk)
            self._pending += len(chunk)
            if self._pending + self._size > self._limit:
                raise SseTooLarge(f"an SSE event exceeds {self._limit} bytes")
            return []
        return self._split(b"".join((*self._parts, chunk)) if self._parts else chunk, final=False)

    def close(self) -> list[tuple[str, bytes]]:
        """The end of the stream: a last unterminated line counts; an event without its empty line is dropped."""
        if not self._parts:
            return []
        return self._split(b"".join(self._parts) + b"\n", final=True)

    def _split(self, buffer: bytes, *, final: bool) -> list[tuple[str, bytes]]:
        if b"\r" in buffer:
            # A CR at the very end may be half of a CRLF: keep it for the next chunk.
            hold = not final and buffer.endswith(b"\r")
            if hold:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if hold:
                buffer += b"\r"
        *lines, rest = buffer.split(b"\n")
        self._parts = [rest] if rest else []
        self._pending = len(rest)
        events: list[tuple[str, bytes]] = []
        for line in lines:
            self._line(line, events)
        if self._pending + self._size > self._limit:
            raise SseTooLarge(f"an SSE event exceeds {self._limit} bytes")
        return events

    def _line(self, line: bytes, events: list[tuple[str, bytes]]) -> None:
        if not line:
            if self._data:
                data = b"\n".join(self._data) if len(self._data) > 1 else self._data[0]
                events.append((self._event.decode("utf-8", "replace") or "message", data))
            self._data = []
            self._event = b""
            self._size = 0
            return
        if line[0] == 0x3A:  # ":" comment (keep-alive)
            return
        self._size += len(line)
        if self._size > self._limit:
            raise SseTooLarge(f"an SSE event exceeds {self._limit} bytes")
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id":
            if b"\0" not in value:
                self.last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self.retry_ms = int(value)


@attrs.define(eq=False)
class HttpWire:
    """The streamable-HTTP :class:`~mcp_actors._wire.base.Wire` of one connection (see the module docstring).

    Attributes:
        client: The connection's pooled, watched HTTP/1.1 client (owned by the transport).
        url: The MCP endpoint.
        link: The transport link: its death ends :meth:`run` and fails :meth:`send`.
        max_message_bytes: Largest message accepted from the server.
        session_id: The server's session id, once the handshake answered with one.
        protocol_version: The negotiated revision, once known (sent as ``mcp-protocol-version``).
        get_stream_open: Set once the GET stream is open (diagnostics and tests: the server
            may send on it from then on).
    """

    exchange_in_send: ClassVar[bool] = True
    """``send`` returns only once a request's answer was delivered: a dispatcher must run the
    request's timeout (the SDK's request clock) around ``send``, not only after it."""

    client: HttpSender = attrs.field(repr=False)
    url: Url = attrs.field(repr=False)
    link: TransportLink = attrs.field(repr=False)
    max_message_bytes: int = 256 * 1024 * 1024
    session_id: str | None = attrs.field(default=None, repr=False)
    protocol_version: str | None = None
    get_stream_open: trio.Event = attrs.field(factory=trio.Event, repr=False)
    _deliver: Deliver | None = attrs.field(default=None, repr=False)
    _initialized: trio.Event = attrs.field(factory=trio.Event, repr=False)
    _in_flight: dict[Any, trio.CancelScope] = attrs.field(factory=dict, repr=False)
    _streaming: dict[Any, trio.CancelScope] = attrs.field(factory=dict, repr=False)
    """Requests whose answer is awaited on an SSE stream (their own, or its resumption), by id:
    an answer that comes another way (the GET stream) ends that wait."""

    # ------------------------------------------------------------------ Wire

    async def send(
        self, message: dict[str, Any], *, headers: Mapping[str, str] | None = None, bound: float | None = None
    ) -> None:
        """POST one message; deliver every message of the answer before returning.

        A request returns once its response (or an error reply standing for it) has been
        delivered; a notification or a response returns once the server accepted it.
        Cancelling the caller closes the POST (at 2026-07-28, that is the cancellation).

        Args:
            message: The JSON-RPC message.
            headers: The dispatcher's HTTP headers for this message (protocol version,
                method, name); merged over the wire's own.
            bound: Seconds within which the caller's own cancel scope ends this send, if
                known: the HTTP client then needs no read timeout of its own for the POST.

        Raises:
            WireClosed: The server is gone (the link's death reason says why).
            RuntimeError: :meth:`run` was not started.
        """
        deliver = self._deliver
        if deliver is None:
            raise RuntimeError("HttpWire.run() must be started before send()")
        link = self.link
        if link.death_reason is not None:
            raise WireClosed(link.death_reason)
        method = message.get("method")
        rpc_id = message.get("id")
        if method is not None and rpc_id is not None:
            version = self.protocol_version
            if version is not None and version not in _MODERN:
                # A handshake revision: a cancellation is a notification, never an aborted POST,
                # and the dispatcher never has two requests with one id in flight. No scope to keep.
                await self._exchange(message, method, rpc_id, headers, deliver, bound)
                return
            scope = trio.CancelScope()
            superseded = self._in_flight.get(rpc_id)
            if superseded is not None:
                superseded.cancel()  # a reused id: the old POST must not answer the new request
            self._in_flight[rpc_id] = scope
            try:
                with scope:
                    await self._exchange(message, method, rpc_id, headers, deliver, bound)
            finally:
                if self._in_flight.get(rpc_id) is scope:
                    del self._in_flight[rpc_id]
            return
        if method == "notifications/cancelled" and self._cancel_modern(message):
            return
        await self._exchange(message, method, None, headers, deliver, bound)
        if method == "notifications/initialized":
            self._initialized.set()

    async def run(self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Take ``deliver``; read the GET stream (once the handshake is done) until the link dies.

        A server without a GET stream (405, any other non-success, or no session id) is
        fine: server-initiated messages then come only on POST streams. A quiet GET stream
        that times out, or one the server ends, is reopened (with ``Last-Event-ID``).
        """
        if self._deliver is not None:
            raise RuntimeError("HttpWire.run() was already started")
        self._deliver = deliver
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._get_stream, deliver)
            await self.link.dead.wait()
            nursery.cancel_scope.cancel()

    async def aclose(self) -> None:
        """End the session on the server (DELETE), best effort and bounded; nothing when the server is gone."""
        if self.session_id is None or self.link.death_reason is not None:
            return
        with trio.move_on_after(_DELETE_BOUND, shield=True):
            headers = self._headers(None)
            del headers["content-type"]
            try:
                response = await self.client.send("DELETE", self.url, headers)
            except HttpError as exc:
                logger.debug("server %s: session DELETE failed: %s", self.link.label, type(exc).__name__)
            else:
                response.close()
                logger.debug("server %s: session DELETE answered %s", self.link.label, response.status)

    # ------------------------------------------------------------------ the exchange

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"accept": _ACCEPT, "content-type": "application/json"}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[VERSION_HEADER] = self.protocol_version
        if extra:
            headers.update(extra)
        return headers

    def _learn_version(self, method: Any, headers: Mapping[str, str] | None) -> None:
        if method == "initialize":
            # The handshake negotiates the version: a probe's stamp must not leak onto it.
            self.protocol_version = None
            return
        if headers:
            for key, value in headers.items():
                if key.lower() == VERSION_HEADER:
                    self.protocol_version = value
                    return

    def _cancel_modern(self, message: dict[str, Any]) -> bool:
        """At 2026-07-28, abort the named request's POST instead of POSTing the notification; True = swallowed."""
        if self.protocol_version not in _MODERN:
            return False
        params = message.get("params")
        target = params.get("requestId") if isinstance(params, dict) else None
        scope = self._in_flight.get(target)
        if scope is not None:
            scope.cancel()
        return True

    async def _follow(self, response: Response, body: bytes, headers: dict[str, str]) -> Response:
        """Follow a POST's redirects only within the endpoint's origin (as the SDK); the final answer.

        ``response`` answers the first of at most :data:`_MAX_REDIRECTS` POSTs.
        """
        url = self.url
        for _ in range(_MAX_REDIRECTS - 1):
            if response.status not in _REDIRECTS:
                return response
            following = redirect_within_origin("POST", url, response.status, response.headers.get("location"))
            if following is None:
                return response  # the watch saw it: the link is dead with the location named
            try:
                await response.aread(self.max_message_bytes)
            finally:
                response.close()
            url = following
            response = await self.client.send("POST", url, headers, body)  # (no bound: rare, and exact)
        return response

    def _closed(self, fallback: str) -> WireClosed:
        return WireClosed(self.link.death_reason or fallback)

    def _too_large(self, what: str) -> ServerMessageTooLarge:
        label, limit = self.link.label, self.max_message_bytes
        return ServerMessageTooLarge(
            f"server {label!r} sent {what} larger than the message limit of {limit} bytes; it was refused"
            " before it was read whole (the connection lives on). If its answers are legitimately that"
            " large, raise max_message_bytes (the transport's message limit); otherwise the server is at fault",
            server=label,
            limit=limit,
        )

    async def _exchange(
        self,
        message: dict[str, Any],
        method: Any,
        rpc_id: Any,
        extra: Mapping[str, str] | None,
        deliver: Deliver,
        bound: float | None,
    ) -> None:
        if method == "initialize" or (extra and extra.get(VERSION_HEADER) != self.protocol_version):
            self._learn_version(method, extra)  # (most requests carry the version it has already)
        try:
            body, headers = encode(message), self._headers(extra)
            response = await self.client.send("POST", self.url, headers, body, bound=bound)
            if response.status in _REDIRECTS:
                response = await self._follow(response, body, headers)
        except HttpTimeout as exc:
            # Not a death (the watch says why): this one message failed.
            if rpc_id is not None:
                deliver(_error(rpc_id, _INTERNAL_ERROR, f"the HTTP request timed out ({exc.phase})"))
            return
        except InvalidRequest as exc:  # a header the dispatcher passed: nothing was sent
            if rpc_id is not None:
                deliver(_error(rpc_id, _INTERNAL_ERROR, f"the HTTP request could not be sent: {exc}"))
            return
        except HttpError as exc:  # the network or an unreadable head: the watch killed the link
            raise self._closed(f"the HTTP connection failed: {type(exc).__name__}") from exc
        too_large = None
        try:
            await self._answer(response, method, rpc_id, deliver)
        except (BodyTooLarge, SseTooLarge) as exc:
            what = "an SSE event" if isinstance(exc, SseTooLarge) else "an answer"
            too_large = self._too_large(f"{what} to {method}")
        except HttpTimeout:
            if rpc_id is not None:
                deliver(_error(rpc_id, _INTERNAL_ERROR, "the server sent nothing on the response stream for too long"))
        except DecodingError as exc:  # a body that does not decode (content-encoding): this answer only
            if rpc_id is not None:
                deliver(_error(rpc_id, _INTERNAL_ERROR, f"the server's answer could not be read: {exc}"))
        except HttpError as exc:
            self.client.broke(response, exc)
            raise self._closed(f"the HTTP response stream broke: {type(exc).__name__}") from exc
        finally:
            response.close()
        if too_large is not None:
            raise too_large  # out of the handler: nothing of the HTTP layer is chained to it

    async def _answer(self, response: Response, method: Any, rpc_id: Any, deliver: Deliver) -> None:
        status = response.status
        if status >= 300:
            if self.link.death_reason is not None:
                raise self._closed("the server refused the request")
            if rpc_id is not None:
                deliver(await self._error_reply(response, rpc_id))
            else:
                logger.debug("server %s: %s answered %s", self.link.label, method, _status_text(response))
            return
        if rpc_id is None:
            return  # 202 (or any success) for a notification or a response: nothing follows
        if method == "initialize":
            session = response.headers.get(SESSION_HEADER)
            if session:
                self.session_id = session
        if status == 202:
            deliver(_error(rpc_id, _INVALID_REQUEST, "the server answered a request with 202 Accepted"))
            return
        kind = response.headers.get("content-type").partition(";")[0].strip().lower()
        if kind == "application/json":
            body = response.read_now()
            if body is None:
                body = await response.aread(self.max_message_bytes)
            elif len(body) > self.max_message_bytes:
                raise BodyTooLarge("the answer is too large", limit=self.max_message_bytes)
            self._deliver_json(body, method, rpc_id, deliver)
        elif kind == "text/event-stream":
            await self._read_sse_answer(response, method, rpc_id, deliver)
        else:
            deliver(_error(rpc_id, _INVALID_REQUEST, f"the server answered with content type {kind or 'none'!r}"))

    async def _error_reply(self, response: Response, rpc_id: Any) -> dict[str, Any]:
        """The JSON-RPC error a request's error status stands for (the body's own, when it carries one)."""
        if response.headers.get("content-type").lower().startswith("application/json"):
            try:
                body = decode(await response.aread(self.max_message_bytes))
            except ValueError:
                body = None
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                return {"jsonrpc": "2.0", "id": rpc_id, "error": body["error"]}
        if response.status == 404 and self.session_id is None:
            return _error(rpc_id, _METHOD_NOT_FOUND, f"the server answered {_status_text(response)}")
        return _error(rpc_id, _INTERNAL_ERROR, f"the server answered {_status_text(response)}")

    def _deliver_json(self, body: bytes, method: Any, rpc_id: Any, deliver: Deliver) -> None:
        try:
            decoded = decode(body)
        except ValueError as exc:
            deliver(unreadable(rpc_id, f"the server's JSON answer does not parse: {exc}"))
            return
        answered = False
        for item in decoded if isinstance(decoded, list) else (decoded,):
            if isinstance(item, dict):
                answered = self._deliver_one(item, method, rpc_id, deliver) or answered
        if not answered:
            deliver(unreadable(rpc_id, "the server's JSON answer holds no JSON-RPC response"))

    def _deliver_one(self, item: dict[str, Any], method: Any, rpc_id: Any, deliver: Deliver) -> bool:
        """Deliver one message of a request's answer; True when it is the response."""
        if "method" in item or ("result" not in item and "error" not in item):
            deliver(item)
            return False
        if item.get("id") != rpc_id:
            item["id"] = rpc_id  # a response on a request's own POST answers that request (the SDK's rule)
        if method == "initialize":
            result = item.get("result")
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str):
                self.protocol_version = version
        deliver(item)
        return True

    async def _read_sse_answer(self, response: Response, method: Any, rpc_id: Any, deliver: Deliver) -> None:
        """Read a request's SSE answer (resumed if the server ends it early) until the answer comes, by any stream."""
        scope = self._streaming[rpc_id] = trio.CancelScope()  # (a reused id's old POST is cancelled by send)
        try:
            with scope:
                async with contextlib.aclosing(response.aiter_bytes()) as chunks:
                    ended = await self._read_sse_chunks(chunks, response, method, rpc_id, deliver)
                if ended is None:
                    return
                if self.link.death_reason is not None:
                    raise self._closed("the HTTP response stream broke")
                if ended.last_id is not None and self.protocol_version not in _MODERN:
                    await self._resume(ended.last_id, ended.retry_ms, method, rpc_id, deliver)
                    return
                deliver(_error(rpc_id, _CONNECTION_CLOSED, "the server ended the response stream without an answer"))
        finally:
            if self._streaming.get(rpc_id) is scope:
                del self._streaming[rpc_id]

    async def _read_sse_chunks(
        self, chunks: AsyncGenerator[bytes], response: Response, method: Any, rpc_id: Any, deliver: Deliver
    ) -> SseParser | None:
        """Deliver a request's SSE stream until its answer; None once answered, else the parser of the ended stream."""
        parser = SseParser(self.max_message_bytes)
        answered = False
        async for chunk in chunks:  # an event over the limit raises SseTooLarge: the request fails with it
            for event, data in parser.feed(chunk):
                answered = self._sse_message(event, data, method, rpc_id, deliver) or answered
            if answered:
                break
        else:
            for event, data in parser.close():
                answered = self._sse_message(event, data, method, rpc_id, deliver) or answered
            if answered:
                return None
        if answered:
            # The server ends the stream right after the answer: reading that end (usually
            # already received) lets the keep-alive connection go back to the pool instead of
            # being closed. Bounded: a server that keeps the stream open loses its connection.
            with trio.move_on_after(_DRAIN_SECONDS):
                try:
                    async for chunk in chunks:
                        for event, data in parser.feed(chunk):
                            self._sse_message(event, data, None, None, deliver)
                except SseTooLarge:
                    pass
                except HttpError as exc:  # not this request's failure (it is answered); the watch judges it
                    self.client.broke(response, exc)
            return None
        return parser

    async def _resume(self, last_id: str, retry_ms: int | None, method: Any, rpc_id: Any, deliver: Deliver) -> None:
        """Resume a request's stream the server ended before its answer (SEP-1699), until the answer comes.

        Each time: wait the stream's ``retry`` (else :data:`_GET_RETRY_SECONDS`), then GET with
        ``Last-Event-ID`` and read what follows as the rest of the request's stream. A resumed
        stream that brings a new event id made progress and may be resumed again; one that
        brings none (or a refusal) counts, and after :data:`_MAX_RESUMPTIONS` of those in a row
        the request fails as a stream ended without its answer. The request's own timeout
        bounds the whole (the dispatcher runs it around :meth:`send`).
        """
        fruitless = 0
        while fruitless < _MAX_RESUMPTIONS:
            await trio.sleep(retry_ms / 1000 if retry_ms is not None else _GET_RETRY_SECONDS)
            headers = self._headers(None)
            headers["accept"] = "text/event-stream"
            headers.pop("content-type")
            headers[_LAST_EVENT_ID] = last_id
            try:
                response = await self.client.send("GET", self.url, headers)
            except HttpTimeout:
                fruitless += 1
                continue
            except HttpError as exc:  # the network: the watch killed the link
                raise self._closed(f"the HTTP connection failed: {type(exc).__name__}") from exc
            try:
                kind = response.headers.get("content-type").partition(";")[0].strip().lower()
                if response.status != 200 or kind != "text/event-stream":
                    if self.link.death_reason is not None:
                        raise self._closed("the server refused to resume the response stream")
                    logger.debug("server %s: stream not resumed (%s)", self.link.label, _status_text(response))
                    fruitless += 1
                    continue
                try:
                    async with contextlib.aclosing(response.aiter_bytes()) as chunks:
                        ended = await self._read_sse_chunks(chunks, response, method, rpc_id, deliver)
                except HttpError as exc:
                    if isinstance(exc, HttpTimeout | DecodingError):
                        raise
                    self.client.broke(response, exc)
                    raise self._closed(f"the resumed response stream broke: {type(exc).__name__}") from exc
            finally:
                response.close()
            if ended is None:
                return
            if self.link.death_reason is not None:
                raise self._closed("the HTTP response stream broke")
            if ended.last_id is not None and ended.last_id != last_id:
                last_id, fruitless = ended.last_id, 0
            else:
                fruitless += 1
            if ended.retry_ms is not None:
                retry_ms = ended.retry_ms
        deliver(_error(rpc_id, _CONNECTION_CLOSED, "the server ended the response stream without an answer"))

    def _sse_message(self, event: str, data: bytes, method: Any, rpc_id: Any, deliver: Deliver) -> bool:
        """Deliver one SSE event's message; True when it answered the request."""
        if event != "message" or not data:
            return False  # a priming event (an id, no data) or an event MCP does not define
        try:
            item = decode(data)
        except ValueError as exc:
            if rpc_id is None:
                logger.warning("server %s: an SSE message does not parse: %s", self.link.label, exc)
                return False
            deliver(unreadable(rpc_id, f"an SSE message from the server does not parse: {exc}"))
            return True
        if not isinstance(item, dict):
            return False
        if rpc_id is None:
            deliver(item)
            if "method" not in item and ("result" in item or "error" in item):
                waiting = self._streaming.get(item.get("id"))
                if waiting is not None:
                    waiting.cancel()  # answered here (a GET stream): its own stream need not be read on
            return False
        return self._deliver_one(item, method, rpc_id, deliver)

    # ------------------------------------------------------------------ the GET stream

    async def _get_stream(self, deliver: Deliver) -> None:
        await self._initialized.wait()
        last_id: str | None = None
        while self.session_id is not None and self.link.death_reason is None:
            headers = self._headers(None)
            headers["accept"] = "text/event-stream"
            headers.pop("content-type")
            if last_id is not None:
                headers[_LAST_EVENT_ID] = last_id
            parser = SseParser(self.max_message_bytes)
            try:
                response = await self.client.send("GET", self.url, headers)
            except HttpTimeout:
                continue  # silence: reopen at once, as the SDK does
            except HttpError as exc:  # the watch killed the link if the network failed under the stream
                logger.debug("server %s: GET stream not opened: %s", self.link.label, type(exc).__name__)
                return
            try:
                kind = response.headers.get("content-type").partition(";")[0].strip().lower()
                if response.status != 200 or kind != "text/event-stream":
                    # 405: the server has no GET stream; anything else: we go without one (the watch
                    # already killed the link for the statuses that mean death).
                    logger.debug("server %s: no GET stream (%s)", self.link.label, _status_text(response))
                    return
                self.get_stream_open.set()
                async with contextlib.aclosing(response.aiter_bytes()) as chunks:
                    async for chunk in chunks:
                        for event, data in parser.feed(chunk):
                            self._sse_message(event, data, None, None, deliver)
            except HttpTimeout:
                last_id = parser.last_id or last_id
                continue  # silence: reopen at once, as the SDK does
            except DecodingError as exc:
                logger.warning("server %s: GET stream dropped: %s", self.link.label, exc)
                return
            except HttpError as exc:
                self.client.broke(response, exc)  # the network failed under the stream: the watch kills the link
                return
            except SseTooLarge as exc:
                logger.warning("server %s: GET stream dropped: %s", self.link.label, exc)
            finally:
                response.close()
            last_id = parser.last_id or last_id
            delay = parser.retry_ms / 1000 if parser.retry_ms is not None else _GET_RETRY_SECONDS
            await trio.sleep(delay)
