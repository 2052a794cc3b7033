"""The server side of HTTP/1.1 on trio sockets, as small as the gateway needs, every input bounded.

Why our own and not h11 or an ASGI server: the gateway's budget is a fraction of a direct
connection's cost per call (``benchmarks/gateway.py``), and a request here is parsed in the
connection's own task with a few ``bytes`` operations, the way our client
(:mod:`mcp_actors._wire.http.http11`) parses answers. What it does:

* **Requests**: the head (request line and headers) up to :attr:`HttpLimits.max_head`
  bytes and :attr:`HttpLimits.max_headers` lines, CRLF or LF line ends, no obs-fold; a body
  by ``content-length`` or ``transfer-encoding: chunked``, never more than
  :attr:`HttpLimits.max_body` bytes (refused with 413 as it crosses the bound, before it is
  held); ``expect: 100-continue`` answered before the body is read. A head must arrive
  within :attr:`HttpLimits.head_timeout` of its first byte and a body within
  :attr:`HttpLimits.body_timeout`, so a client that trickles bytes holds a connection for a
  bounded time; an idle keep-alive connection is closed after :attr:`HttpLimits.idle_timeout`.
* **Responses**: a whole response in one ``send`` (head and body), or a stream
  (``transfer-encoding: chunked``) for server-sent events, ended with the last chunk so the
  connection stays usable.
* **Keep-alive**: HTTP/1.1 keeps the connection unless ``connection: close``; HTTP/1.0
  closes it unless ``connection: keep-alive``. A malformed request is answered (400, 413,
  431, 501, 505) and the connection closed: its framing can no longer be trusted.

A request is handled in the task that read it (:meth:`HttpConnection.serve`); :meth:`HttpConnection.wait_closed` lets a
handler watch for the client going away (2026-07-28: closing a request's connection is its
cancellation) without a second reader.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

import attrs
import trio

__all__ = ["ConnectionWatch", "HttpConnection", "HttpLimits", "HttpRequest", "ProtocolViolation", "reason_phrase"]

_REASONS: Final = {
    100: "Continue",
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    408: "Request Timeout",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
_READ_SIZE: Final = 65536
_TOKEN: Final = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The characters of an RFC 9110 token (a method, a header name): deleted by ``translate``, nothing may be left."""


def reason_phrase(status: int) -> str:
    """The reason phrase the gateway writes for ``status`` (empty for one it never sends)."""
    return _REASONS.get(status, "")


@attrs.frozen(kw_only=True)
class HttpLimits:
    """Bounds of one connection: sizes in bytes, times in seconds.

    Attributes:
        max_head: Largest request head (request line and headers).
        max_headers: Most header lines in one head.
        max_body: Largest request body (the SDK's default: 4 MiB).
        head_timeout: Time a head may take from its first byte.
        body_timeout: Time a body may take once its head is read.
        idle_timeout: Time a keep-alive connection may wait for its next request.
    """

    max_head: int = attrs.field(default=16 * 1024, validator=attrs.validators.gt(0))
    max_headers: int = attrs.field(default=100, validator=attrs.validators.gt(0))
    max_body: int = attrs.field(default=4 * 1024 * 1024, validator=attrs.validators.gt(0))
    head_timeout: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))
    body_timeout: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
    idle_timeout: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))


class ProtocolViolation(Exception):
    """The client broke HTTP: answered with ``status`` and the connection closed.

    Attributes:
        status: What to answer (400, 408, 413, 431, 501, 505).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class HttpRequest:
    """One request as read: the head parsed, the body whole.

    Attributes:
        method: The method, as sent (``POST``).
        path: The target's path, without the query.
        headers: Header values by lower-case name (the last of repeated ones; the gateway's
            own headers are never repeated by a conforming client, and the routing headers
            of 2026-07-28 are checked for repeats in :attr:`raw_headers`).
        raw_headers: Every header line as ``(lower-case name, value)``, in order.
        body: The body (empty when there is none).
        keep_alive: Whether the connection may carry another request after this one.
        profile: The gateway profile its path selects (set by the front once the path is
            known; ``None`` before), for the checks that depend on it (inbound keys).
    """

    __slots__ = ("body", "headers", "keep_alive", "method", "path", "profile", "raw_headers")

    def __init__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw_headers: list[tuple[str, str]],
        body: bytes,
        keep_alive: bool,
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.raw_headers = raw_headers
        self.body = body
        self.keep_alive = keep_alive
        self.profile: str | None = None


def _header_lines(fields: bytes) -> list[tuple[str, str]]:
    """Every header line as ``(lower-case name, value)``: a token, a colon, the value without the spaces around it.

    No obs-fold: a continuation line has no token before a colon, and a head with a line that
    is not a header is refused. ``split`` and ``partition`` rather than a regular expression:
    a lazy match of the value backtracked at every character and cost a tenth of the
    gateway's instructions per call.

    Raises:
        ProtocolViolation: A line that is not ``token: value`` (400).
    """
    lines = []
    for line in fields.split(b"\n"):
        name, colon, value = line.partition(b":")
        if not colon or not name or name.translate(None, _TOKEN):
            raise ProtocolViolation(400, "malformed header line")
        lines.append((name.lower().decode("ascii"), value.strip(b" \t").decode("latin-1")))
    return lines


def _encode_headers(headers: Iterable[tuple[str, str]]) -> bytes:
    out = []
    for name, value in headers:
        line = f"{name}: {value}\r\n".encode("latin-1")
        if line.count(b"\r") != 1 or line.count(b"\n") != 1 or line.find(b"\x00") >= 0:
            raise ValueError(f"header {name!r} holds CR, LF or NUL")
        out.append(line)
    return b"".join(out)


class HttpConnection:
    """One client connection: read requests, write responses, from the task that owns it.

    Not for use by two tasks at once (a request is handled in the task that read it).
    """

    __slots__ = ("_bound", "_buffer", "_closed", "_fd", "_limits", "_scope", "_since", "_stream")

    def __init__(self, stream: trio.SocketStream, limits: HttpLimits) -> None:
        self._stream = stream
        self._fd = stream.socket.fileno()
        self._limits = limits
        self._scope = trio.CancelScope()
        self._bound: float | None = None
        self._since = 0.0
        self._buffer = bytearray()
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether the client went away (a read saw the end of the stream, or a write failed)."""
        return self._closed

    async def _fill(self) -> bool:
        """Read more into the buffer; False at the end of the stream (or a reset)."""
        try:
            while True:
                await trio.lowlevel.wait_readable(self._fd)
                try:
                    data = os.read(self._fd, _READ_SIZE)
                    break
                except BlockingIOError:
                    continue  # a spurious wake-up: wait again
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self._closed = True
            return False
        self._buffer += data
        return True

    def overdue(self, now: float) -> bool:
        """Whether the connection overran its phase's bound at ``now`` (``time.monotonic()``)."""
        bound = self._bound
        return bound is not None and now - self._since > bound

    def expire(self) -> None:
        """End the connection now (its phase's bound passed): what :meth:`serve` runs is cancelled."""
        self._scope.cancel()

    def _phase(self, bound: float | None) -> None:
        self._bound = bound
        self._since = time.monotonic()

    async def serve(self, handle: Callable[[HttpRequest], Awaitable[None]]) -> None:
        """Read requests and hand each to ``handle`` until the client leaves, breaks HTTP, or idles too long.

        The bounds of :class:`HttpLimits` are phases, each a number and a start time the
        connection keeps: waiting for the next request (``idle_timeout``), its head once a
        byte of it came (``head_timeout``), its body (``body_timeout``), none while
        ``handle`` runs. A :class:`ConnectionWatch` looks at every connection each second and
        ends one past its bound: two attribute writes per phase, where a cancel scope's
        deadline moved three times per request cost a fifth of the gateway's work per call.
        A request that breaks HTTP is answered (:class:`ProtocolViolation`'s status) and the
        connection closed.
        """
        limits = self._limits
        with self._scope:
            while not self._closed:
                self._phase(limits.idle_timeout)
                try:
                    request = await self._next_request()
                except ProtocolViolation as exc:
                    self._phase(limits.body_timeout)
                    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"%s"}}' % str(exc).encode()
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await self.respond(exc.status, (("content-type", "application/json"),), body, close=True)
                    return
                if request is None:
                    return
                self._bound = None
                await handle(request)
                if not request.keep_alive:
                    return

    async def _next_request(self) -> HttpRequest | None:
        """The next request, or ``None`` when the client closed the connection."""
        limits = self._limits
        while not self._buffer:
            if not await self._fill():
                return None
        end = self._head_end()
        if end is None:
            self._phase(limits.head_timeout)
            head = await self._read_head()
            if head is None:
                return None
        else:
            head = bytes(self._buffer[: end[0]])
            del self._buffer[: end[1]]
        request = self._parse_head(head)
        if "content-length" in request.headers or "transfer-encoding" in request.headers:
            self._phase(limits.body_timeout)
            request.body = await self._read_body(request)
        return request

    def _head_end(self, start: int = 0) -> tuple[int, int] | None:
        """``(end of the head, start of the body)`` when the buffer holds a whole head (CRLF or bare LF lines).

        ``start``: where to begin looking (a terminator cannot end before it).
        """
        buffer = self._buffer
        crlf = buffer.find(b"\r\n\r\n", start)
        lf = buffer.find(b"\n\n", start)
        if lf >= 0 and (crlf < 0 or lf < crlf):
            return lf, lf + 2  # a bare-LF head ends first (a CRLF pair after it is the body's)
        if crlf >= 0:
            return crlf, crlf + 4
        if len(buffer) > self._limits.max_head:
            raise ProtocolViolation(431, f"the request head exceeds {self._limits.max_head} bytes")
        return None

    async def _read_head(self) -> bytes | None:
        """Read until the buffer holds a whole head; the head (taken from the buffer), or ``None`` at the end."""
        searched = 0
        while True:
            end = self._head_end(max(0, searched - 3))
            if end is not None:
                head = bytes(self._buffer[: end[0]])
                del self._buffer[: end[1]]
                return head
            searched = len(self._buffer)
            if not await self._fill():
                if self._buffer.strip():
                    raise ProtocolViolation(400, "the connection closed in the middle of a request head")
                return None

    def _parse_head(self, head: bytes) -> HttpRequest:
        limits = self._limits
        if len(head) > limits.max_head:
            raise ProtocolViolation(431, f"the request head exceeds {limits.max_head} bytes")
        # find, not ``in``: ``bytes in bytes`` first tries its operand as an integer and formats
        # the TypeError it then drops (~2,300 instructions each, five a request).
        if head.find(b"\r\n") >= 0:
            head = head.replace(b"\r\n", b"\n")
        head = head.lstrip(b"\n")  # RFC 9112 2.2: empty lines before a request line are ignored
        if head.find(b"\r") >= 0 or head.find(b"\x00") >= 0:
            raise ProtocolViolation(400, "a bare CR or a NUL in the request head")
        request_line, _, fields = head.partition(b"\n")
        parts = request_line.split(b" ")
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise ProtocolViolation(400, "malformed request line")
        method_b, target_b, version_b = parts
        if version_b not in (b"HTTP/1.1", b"HTTP/1.0"):
            if version_b.startswith(b"HTTP/"):
                raise ProtocolViolation(505, "only HTTP/1.1 and HTTP/1.0 are served")
            raise ProtocolViolation(400, "malformed request line")
        if method_b.translate(None, _TOKEN):
            raise ProtocolViolation(400, "malformed method")
        raw = _header_lines(fields) if fields else []
        if len(raw) > limits.max_headers:
            raise ProtocolViolation(431, f"more than {limits.max_headers} header lines")
        headers = dict(raw)
        path = target_b.partition(b"?")[0].decode("latin-1")
        connection = headers.get("connection", "").lower()
        if version_b == b"HTTP/1.1":
            keep_alive = "close" not in connection
        else:
            keep_alive = "keep-alive" in connection
        return HttpRequest(method_b.decode("ascii"), path, headers, raw, b"", keep_alive)

    async def _read_body(self, request: HttpRequest) -> bytes:
        headers = request.headers
        limit = self._limits.max_body
        encoding = headers.get("transfer-encoding")
        if encoding is not None:
            if "content-length" in headers:
                raise ProtocolViolation(400, "both content-length and transfer-encoding")
            if encoding.lower() != "chunked":
                raise ProtocolViolation(501, f"transfer-encoding {encoding!r} is not served")
            await self._continue(request)
            return await self._read_chunked(limit)
        length_text = headers.get("content-length")
        if length_text is None:
            return b""
        if not length_text.isdigit() or len(length_text) > 18:
            raise ProtocolViolation(400, "malformed content-length")
        for name, value in request.raw_headers:
            if name == "content-length" and value != length_text:
                raise ProtocolViolation(400, "conflicting content-length headers")
        length = int(length_text)
        if length > limit:
            raise ProtocolViolation(413, f"the request body exceeds {limit} bytes")
        if length == 0:
            return b""
        await self._continue(request)
        while len(self._buffer) < length:
            if not await self._fill():
                raise ProtocolViolation(400, "the connection closed in the middle of a request body")
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body

    async def _continue(self, request: HttpRequest) -> None:
        if request.headers.get("expect", "").lower() == "100-continue" and not self._buffer:
            await self._send(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def _read_line(self, limit: int) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end]).rstrip(b"\r")
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > limit:
                raise ProtocolViolation(400, "a chunked body line is too long")
            if not await self._fill():
                raise ProtocolViolation(400, "the connection closed in the middle of a chunked body")

    async def _read_chunked(self, limit: int) -> bytes:
        body = bytearray()
        while True:
            size_line = await self._read_line(1024)
            size_text = size_line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolViolation(400, "malformed chunk size") from None
            if size < 0:
                raise ProtocolViolation(400, "malformed chunk size")
            if size == 0:
                trailer_bytes = 0
                while line := await self._read_line(self._limits.max_head):
                    trailer_bytes += len(line)  # trailers: read and dropped, bounded as a head is
                    if trailer_bytes > self._limits.max_head:
                        raise ProtocolViolation(431, "the chunked body's trailers are too large")
                return bytes(body)
            if len(body) + size > limit:
                raise ProtocolViolation(413, f"the request body exceeds {limit} bytes")
            while len(self._buffer) < size + 2:
                if not await self._fill():
                    raise ProtocolViolation(400, "the connection closed in the middle of a chunked body")
            body += self._buffer[:size]
            if self._buffer[size : size + 2] != b"\r\n" and self._buffer[size : size + 1] != b"\n":
                raise ProtocolViolation(400, "a chunk does not end with CRLF")
            del self._buffer[: size + (2 if self._buffer[size : size + 1] == b"\r" else 1)]

    # ------------------------------------------------------------------ writing

    async def _send(self, data: bytes) -> None:
        """Write all of ``data``: at once when the socket has room (the usual case), else as it drains.

        Straight to the descriptor (trio made it non-blocking), as our client writes: trio's
        ``SocketStream`` takes a conflict detector and a scheduler pass per write, and one
        task writes a connection at a time here.
        """
        fd = self._fd
        try:
            sent = os.write(fd, data)
            if sent == len(data):
                return
            view = memoryview(data)
            while sent < len(data):
                await trio.lowlevel.wait_writable(fd)
                with contextlib.suppress(BlockingIOError):
                    sent += os.write(fd, view[sent:])
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            await self._send(data)
        except (OSError, trio.ClosedResourceError) as exc:
            self._closed = True
            raise trio.BrokenResourceError(f"the client went away: {exc}") from exc

    async def respond(
        self, status: int, headers: Iterable[tuple[str, str]] = (), body: bytes = b"", *, close: bool = False
    ) -> None:
        """Write a whole response: status, ``headers`` (plus ``content-length``), ``body``.

        Raises:
            trio.BrokenResourceError: The client went away.
        """
        head = b"HTTP/1.1 %d %s\r\ncontent-length: %d\r\n" % (status, reason_phrase(status).encode(), len(body))
        if close:
            head += b"connection: close\r\n"
        await self._send(head + _encode_headers(headers) + b"\r\n" + body)

    async def start_stream(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """Write the head of a streamed (chunked) response; then :meth:`send_chunk` and :meth:`end_stream`."""
        head = b"HTTP/1.1 %d %s\r\ntransfer-encoding: chunked\r\n" % (status, reason_phrase(status).encode())
        await self._send(head + _encode_headers(headers) + b"\r\n")

    async def send_chunk(self, data: bytes) -> None:
        """Write one piece of a streamed response (nothing for empty ``data``)."""
        if data:
            await self._send(b"%x\r\n%b\r\n" % (len(data), data))

    async def end_stream(self, last: bytes = b"") -> None:
        """Write ``last`` (if any) and the end of a streamed response; the connection stays usable."""
        if last:
            await self._send(b"%x\r\n%b\r\n0\r\n\r\n" % (len(last), last))
        else:
            await self._send(b"0\r\n\r\n")

    async def wait_closed(self) -> None:
        """Return when the client closes the connection (or breaks it).

        For a handler that must notice the client leaving while it works. Bytes that arrive
        meanwhile (a pipelined next request) are kept for :meth:`next_request`, and the wait
        goes on until the end of the stream. Cancelling it loses nothing.
        """
        while not self._closed:
            if len(self._buffer) > self._limits.max_head + self._limits.max_body:
                await trio.sleep_forever()  # a client pipelining that much: stop reading, stay bounded
            await self._fill()

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        self._closed = True
        self._fd = -1  # a read or a wait now fails, never touches a reused descriptor
        await self._stream.aclose()


class ConnectionWatch:
    """Ends the connections that overran their phase's bound (:meth:`HttpConnection.serve`), once a second."""

    def __init__(self) -> None:
        self._connections: set[HttpConnection] = set()

    def add(self, connection: HttpConnection) -> None:
        """Watch ``connection`` until :meth:`discard`."""
        self._connections.add(connection)

    def discard(self, connection: HttpConnection) -> None:
        """Stop watching ``connection``."""
        self._connections.discard(connection)

    async def run(self, period: float = 1.0) -> None:
        """Look every ``period`` seconds, until cancelled."""
        while True:
            await trio.sleep(period)
            now = time.monotonic()
            for connection in list(self._connections):
                if connection.overdue(now):
                    connection.expire()
