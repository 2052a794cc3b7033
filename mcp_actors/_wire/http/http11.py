"""A small HTTP/1.1 client on trio sockets: what the streamable-HTTP wire sends everything through.

Why our own: an ``httpx`` POST costs ~1 ms of CPU on this machine (``httpcore``'s pool,
``h11``, ``anyio`` and a stack of context managers), ten times the whole rest of a call
(docs/performance.md, "The hot path"). This module does what the MCP wire needs and no
more, in the caller's own task:

* **One pool per origin** (scheme, host, port) of keep-alive connections, at most
  :data:`MAX_CONNECTIONS` (httpx's limit; a request beyond waits for one, bounded). A
  request takes an idle connection or opens one; a response read to its end puts its
  connection back; a response closed early, an error, ``connection: close`` or HTTP/1.0
  closes it. An idle connection the server closed is noticed before use (after a second
  of idleness the socket is asked whether it is readable), and when the server closes one
  anyway under a request, that request is retried once on a fresh connection, but only
  when it is safe: the send failed, or the connection was reused and the end of stream (or
  a reset) came before a single byte of the status line (the server did not answer, so it
  did not process it; a POST is never resent once anything came back).
* **Requests** are written at once: the request line, ``Host``, ``Content-Length``, the
  client's default headers with the request's own over them (each header set validated
  and encoded once, then cached); a header name or value with CR, LF or NUL is refused
  (:class:`InvalidRequest`, naming the header, never its value). No ``accept-encoding``
  is sent; a compressed answer anyway is decoded (gzip, deflate) or refused
  (:class:`DecodingError`).
* **Responses**: the head (bounded, :data:`MAX_HEAD_BYTES`) parsed by hand; 1xx
  informational heads skipped; no body for 204, 304 and HEAD; ``transfer-encoding:
  chunked`` (extensions ignored, trailers read and dropped); ``content-length``; otherwise
  the body runs to the end of the connection. Bodies are streamed
  (:meth:`Response.aiter_bytes`) or read whole up to a limit (:meth:`Response.aread`: a
  larger one, announced or arriving, is refused as it crosses the limit,
  :class:`BodyTooLarge`). A compressed body is inflated piece by piece, never more than
  64 KiB at a time, so a gzip bomb is refused at the limit instead of being inflated whole.
* **Timeouts** are typed (:class:`HttpTimeout`, with the phase): connect, write (both the
  connect timeout) and read (silence on a response, the read timeout). A timeout is not a
  network failure: the caller decides what it means.
* **Cost**: plain TCP goes straight to the socket (one ``os.write`` from the caller's task,
  one park in ``wait_readable`` per read; with other requests to the origin in flight, one
  checkpoint and a read that usually finds the answer in), one cancel scope per exchange:
  about what the hand-written floor client spends (docs/performance.md).
* **TLS** (``https://``) through :class:`trio.SSLStream` with the SSL context httpx would
  build (``httpx2.create_ssl_context()``: ``SSL_CERT_FILE``, ``SSL_CERT_DIR``, the system's
  store), the host as ``server_hostname``, ALPN ``http/1.1``.
* **Proxies** from the environment, with httpx's own rules (``HTTP_PROXY``,
  ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, lower case too): ``http://`` goes to the
  proxy in absolute form, ``https://`` through a ``CONNECT`` tunnel then TLS; the proxy
  URL's user info becomes ``Proxy-Authorization: Basic``.
* Redirects are not followed here: a 3xx is an answer like any other (the wire follows
  those that stay within the endpoint's origin).

Every failure is one of :class:`HttpError`'s subclasses, whose messages say what happened
and where (method, origin), never a header value.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import ssl
import time
import urllib.parse
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Mapping
from typing import Final

import attrs
import trio

__all__ = [
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "BodyTooLarge",
    "ConnectFailed",
    "DecodingError",
    "HttpClient",
    "HttpError",
    "HttpTimeout",
    "InvalidRequest",
    "NetworkError",
    "ProtocolError",
    "Response",
    "Url",
]

MAX_HEAD_BYTES: Final = 64 * 1024
"""Largest response head (status line and headers, or a chunked body's trailers) accepted."""
_CHUNK: Final = 65536
MAX_CONNECTIONS: Final = 100
"""Connections per origin, as httpx's default limit: a request beyond waits for one to come back."""
_MAX_IDLE: Final = MAX_CONNECTIONS
"""Idle keep-alive connections kept per origin."""
_MAX_CHUNK_LINE: Final = 4096
_USER_AGENT: Final = "mcp-actors"
_HEADER_CACHE: Final = 64
"""Encoded header sets kept per client (a wire uses a handful)."""
_FRESH: Final = 1.0
"""Seconds a pooled connection is taken without asking the socket whether the server closed it."""
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_HOPE_MISSES: Final = 8
"""Reads-first in a row that found no answer (a server slower than us) before a pool stops trying them."""
_HOPE_PROBE: Final = 32
"""Requests that park at once after that, before one read-first tries again."""


class HttpError(Exception):
    """Base of this layer's failures; the message names what happened, never a header value."""


class NetworkError(HttpError):
    """Reading from or writing to the server failed (reset, closed mid-answer, ...)."""


class ConnectFailed(NetworkError):
    """No connection could be made (refused, no such host, TLS handshake, proxy refused the tunnel)."""


class HttpTimeout(HttpError):
    """Nothing happened for too long.

    Attributes:
        phase: ``"connect"``, ``"write"``, ``"read"`` or ``"pool"`` (every connection busy).
    """

    def __init__(self, message: str, *, phase: str) -> None:
        super().__init__(message)
        self.phase = phase


class ProtocolError(HttpError):
    """The server's answer is not HTTP/1.1 we can read (a garbage status line, a head too large, ...)."""


class DecodingError(ProtocolError):
    """A body in a ``content-encoding`` we do not decode, or one that does not decode."""


class BodyTooLarge(HttpError):
    """A body (decoded) larger than the reader's limit; refused before it was held whole.

    Attributes:
        limit: The limit, in bytes.
    """

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class InvalidRequest(HttpError, ValueError):
    """The request itself is malformed (a header with a line break); nothing was sent."""


# ---------------------------------------------------------------------- URLs


@attrs.frozen
class Url:
    """A parsed absolute ``http``/``https`` URL: what a request needs of it.

    Attributes:
        scheme: ``"http"`` or ``"https"``.
        host: The host, lower case (an IPv6 address without brackets).
        port: The port (the scheme's default filled in).
        target: The request target: path (``/`` when empty) and ``?query``.
        userinfo: ``user:password`` from the URL, or ``""`` (a proxy's credentials).
    """

    scheme: str
    host: str
    port: int
    target: str = attrs.field(repr=False)
    userinfo: str = attrs.field(default="", repr=False)
    origin: tuple[str, str, int] = attrs.field(init=False, repr=False, eq=False)
    """``(scheme, host, port)``: what one pool of connections serves."""
    authority: str = attrs.field(init=False, repr=False, eq=False)
    """``host[:port]`` as the ``Host`` header says it (the default port left out).

    Both are worked out once here: every request reads them.
    """

    def __attrs_post_init__(self) -> None:
        host = f"[{self.host}]" if ":" in self.host else self.host
        authority = host if _DEFAULT_PORTS[self.scheme] == self.port else f"{host}:{self.port}"
        object.__setattr__(self, "origin", (self.scheme, self.host, self.port))
        object.__setattr__(self, "authority", authority)

    @classmethod
    def parse(cls, text: str) -> Url:
        """Parse ``text``.

        Raises:
            InvalidRequest: Not an absolute http(s) URL with a host, or a bad port.
        """
        try:
            parts = urllib.parse.urlsplit(text)
            port = parts.port
        except ValueError as exc:
            raise InvalidRequest(f"the url is not valid: {exc}") from None
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise InvalidRequest("the url must be absolute, http:// or https://, with a host")
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        if any(c in target for c in " \r\n\0"):
            target = urllib.parse.quote(target, safe="/?&=%:@!$'()*+,;~[]-._")
        userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
        return cls(scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme], target, userinfo)

    def shown(self) -> str:
        """The origin for messages: ``scheme://host:port`` (no user info, no path, no query)."""
        return f"{self.scheme}://{self.authority}"

    def join(self, location: str) -> Url:
        """The URL ``location`` (absolute or relative, as a redirect's ``Location``) names from here."""
        base = f"{self.scheme}://{self.authority}{self.target}"
        return Url.parse(urllib.parse.urljoin(base, location))

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"


# ---------------------------------------------------------------------- headers


_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name (RFC 9110's ``token``)."""
_BREAK: Final = re.compile(r"[\r\n\0]")


def encode_headers(headers: Iterable[tuple[str, str]]) -> bytes:
    """Validate and encode header lines (``name: value\\r\\n`` each).

    Raises:
        InvalidRequest: A name is not a token, or a value has CR, LF or NUL (names the
            header, never its value).
    """
    lines = []
    token, breaks = _TOKEN.fullmatch, _BREAK.search
    for name, value in headers:
        if token(name) is None:
            raise InvalidRequest(f"header name {name!r} is not valid")
        if breaks(value) is not None:
            raise InvalidRequest(f"header {name!r} has a line break (CR or LF) or NUL in its value; remove it")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode()


@attrs.define(eq=False, slots=True)
class Headers:
    """A response's headers: names lower case, in order, repeats kept."""

    items: list[tuple[str, str]] = attrs.field(factory=list)

    def get(self, name: str, default: str = "") -> str:
        """The first value of ``name`` (lower case), or ``default``."""
        for key, value in self.items:
            if key == name:
                return value
        return default

    def get_list(self, name: str) -> list[str]:
        """Every value of ``name`` (lower case), in order."""
        return [value for key, value in self.items if key == name]

    def __contains__(self, name: object) -> bool:
        return any(key == name for key, _ in self.items)


# ---------------------------------------------------------------------- connections


@attrs.define(eq=False, slots=True)
class _Connection:
    """One keep-alive connection: the socket, the TLS stream over it (https), bytes read but not used yet.

    Plain TCP goes straight to the socket's file descriptor (trio made it non-blocking): a
    write is one ``os.write`` from the caller's task when the socket has room (no scheduler
    pass), a read parks once in ``wait_readable`` and reads what came. trio's ``SocketStream``
    costs a context manager, a conflict detector and two scheduler passes per read; one task
    uses a connection at a time, so none of that is needed.
    """

    socket: trio.socket.SocketType
    tls: trio.SSLStream[trio.SocketStream] | None = None
    pool: _Pool | None = None
    buffer: bytearray = attrs.field(factory=bytearray)
    closed: bool = False
    idle_since: float = 0.0
    """When it went back to the pool, by ``time.monotonic()`` (real time, as a server's keep-alive
    timeout counts; a C call, where ``trio.current_time()`` is three Python calls)."""
    fd: int = attrs.field(init=False, default=-1)
    """The socket's file descriptor, read once (``socket.fileno()`` is two Python calls); -1 once closed."""

    def __attrs_post_init__(self) -> None:
        self.fd = self.socket.fileno()

    def close(self) -> None:
        """Close the socket now, synchronously (safe in ``finally`` and under cancellation)."""
        if not self.closed:
            self.closed = True
            self.fd = -1  # as a closed socket's fileno(): a read or a wait now fails, never touches a reused fd
            self.socket.close()
            if self.pool is not None:
                self.pool.released()

    def stale(self, now: float) -> bool:
        """An idle connection that has something to read was closed by the server (or is out of step).

        Looked at (a ``poll`` system call) only after :data:`_FRESH` seconds of idleness: no
        server closes a keep-alive connection sooner, and one that does anyway is caught by
        the retry rule (the end of stream before any byte of the answer).
        """
        if self.buffer:
            return True
        return now - self.idle_since > _FRESH and self.socket.is_readable()

    def write_now(self, data: bytes) -> int:
        """Write what the socket takes of ``data`` without waiting; the bytes written (0 over TLS)."""
        if self.tls is not None:
            return 0
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0

    async def send_all(self, data: bytes, timeout: float, sent: int = 0) -> bool:
        """Write ``data`` from byte ``sent`` on; False when the socket stayed full for ``timeout`` s."""
        if self.tls is not None:
            with trio.move_on_after(timeout):
                await self.tls.send_all(data)
                return True
            return False
        fd = self.fd
        view = memoryview(data)
        with trio.move_on_after(timeout):
            while sent < len(data):
                await trio.lowlevel.wait_writable(fd)
                with contextlib.suppress(BlockingIOError):
                    sent += os.write(fd, view[sent:])
        return sent == len(data)

    async def receive(self) -> bytes:
        if self.tls is not None:
            return bytes(await self.tls.receive_some(_CHUNK))  # no copy: it is bytes already
        while True:
            await trio.lowlevel.wait_readable(self.fd)
            with contextlib.suppress(BlockingIOError):  # a spurious wake-up: wait again
                return os.read(self.fd, _CHUNK)


@attrs.define(eq=False)
class _Pool:
    """The keep-alive connections to one origin."""

    client: HttpClient
    url: Url
    proxy: Url | None
    idle: list[_Connection] = attrs.field(factory=list)
    open_count: int = 0
    """Connections open or being opened (at most :data:`MAX_CONNECTIONS`)."""
    misses: int = 0
    """Reads-first in a row that found no answer (see :meth:`hopeful`)."""
    _room: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)

    def hopeful(self) -> bool:
        """Whether a request's first read should follow one checkpoint instead of a park.

        Worth it only while other requests to this origin are in flight (their tasks run in
        that checkpoint, and the answer comes in meanwhile) and while it keeps finding the
        answer: after :data:`_HOPE_MISSES` misses in a row (a server slower than us: each
        miss costs the checkpoint and a failed read) requests park at once, and every
        :data:`_HOPE_PROBE`-th of them tries again.
        """
        if self.open_count - len(self.idle) < 2:
            return False
        if self.misses < _HOPE_MISSES:
            return True
        self.misses += 1
        if self.misses < _HOPE_MISSES + _HOPE_PROBE:
            return False
        self.misses = _HOPE_MISSES - 1  # one try: a miss parks the next ones again, a hit resets
        return True

    def released(self) -> None:
        self.open_count -= 1
        if self._room:
            self._room.unpark()

    async def acquire(self) -> tuple[_Connection, bool]:
        """An idle connection (True: reused) or a new one; at the limit, wait (bounded) for one to come back.

        Raises:
            HttpTimeout: No connection came free within the connect timeout (phase ``"pool"``).
        """
        connection = self.take()
        if connection is not None:
            return connection, True
        if self.open_count >= MAX_CONNECTIONS:
            with trio.move_on_after(self.client.connect_timeout):
                while self.open_count >= MAX_CONNECTIONS and not self.idle:
                    await self._room.park()
            connection = self.take()
            if connection is not None:
                return connection, True
            if self.open_count >= MAX_CONNECTIONS:
                raise HttpTimeout(
                    f"all {MAX_CONNECTIONS} connections to {self.url.shown()} stayed busy for"
                    f" {self.client.connect_timeout:g} s",
                    phase="pool",
                )
        self.open_count += 1
        try:
            connection = await self.connect()
        except BaseException:
            self.released()
            raise
        connection.pool = self
        return connection, False

    def take(self) -> _Connection | None:
        idle = self.idle
        if not idle:
            return None
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.stale(now):
                return connection
            connection.close()
        return None

    def put(self, connection: _Connection) -> None:
        if connection.closed or self.client.closed or len(self.idle) >= _MAX_IDLE:
            connection.close()
        else:
            connection.idle_since = time.monotonic()
            self.idle.append(connection)
            if self._room:  # a request waiting at the limit takes this one (unpark costs a generator)
                self._room.unpark()

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()

    async def connect(self) -> _Connection:
        """A new connection (through the proxy, TLS when https), bounded by the connect timeout."""
        client = self.client
        url, proxy = self.url, self.proxy
        hop = proxy or url
        with trio.move_on_after(client.connect_timeout) as scope:
            try:
                tcp = await trio.open_tcp_stream(hop.host, hop.port)
            except OSError as exc:
                where = f"the proxy {hop.shown()}" if proxy is not None else url.shown()
                raise ConnectFailed(f"connecting to {where} failed: {exc.strerror or exc}") from None
            tls = None
            try:
                if proxy is not None and url.scheme == "https":
                    await self._tunnel(tcp)
                if url.scheme == "https":
                    stream = tls = trio.SSLStream(
                        tcp, client.ssl_context(), server_hostname=url.host, https_compatible=True
                    )
                    try:
                        await stream.do_handshake()
                    except trio.BrokenResourceError as exc:
                        cause = exc.__cause__
                        detail = getattr(cause, "reason", None) or str(cause or exc) or type(exc).__name__
                        if isinstance(cause, ssl.SSLCertVerificationError):
                            detail = cause.verify_message or detail
                        raise ConnectFailed(f"the TLS handshake with {url.shown()} failed: {detail}") from None
            except BaseException:
                tcp.socket.close()
                raise
            return _Connection(tcp.socket, tls)
        assert scope.cancelled_caught
        raise HttpTimeout(
            f"connecting to {(proxy or url).shown()} took longer than {client.connect_timeout:g} s", phase="connect"
        )

    async def _tunnel(self, tcp: trio.SocketStream) -> None:
        """``CONNECT host:port`` through the proxy; a 2xx opens the tunnel."""
        assert self.proxy is not None
        host = f"[{self.url.host}]" if ":" in self.url.host else self.url.host
        authority = f"{host}:{self.url.port}"
        head = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n".encode() + _proxy_auth(self.proxy) + b"\r\n"
        connection = _Connection(tcp.socket)
        try:
            if not await connection.send_all(head, self.client.connect_timeout):
                raise ConnectFailed(f"the proxy {self.proxy.shown()} took no request for too long")
            status, reason, _, _ = await _read_head(connection, self.client.read_timeout, "CONNECT", self.proxy)
        except NetworkError as exc:
            raise ConnectFailed(f"the proxy {self.proxy.shown()} failed: {exc}") from None
        except OSError as exc:
            raise ConnectFailed(f"the proxy {self.proxy.shown()} closed the connection: {_why(exc)}") from None
        if not 200 <= status < 300:
            answer = f"HTTP {status} {reason}".rstrip()
            raise ConnectFailed(f"the proxy {self.proxy.shown()} refused the tunnel to {self.url.shown()}: {answer}")
        if connection.buffer:
            raise ProtocolError(f"the proxy {self.proxy.shown()} sent data before the TLS handshake")


def _proxy_auth(proxy: Url) -> bytes:
    if not proxy.userinfo:
        return b""
    user, _, password = proxy.userinfo.partition(":")
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return b"Proxy-Authorization: Basic " + base64.b64encode(token) + b"\r\n"


async def _receive(connection: _Connection, timeout: float | None, method: str, url: Url) -> bytes:
    """One read, bounded by ``timeout`` of silence (None: the caller's scope bounds it); ``b""`` at the end."""
    if timeout is None:
        try:
            return await connection.receive()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise _read_failed(connection, exc, method, url) from None
    with trio.move_on_after(timeout):
        try:
            return await connection.receive()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise _read_failed(connection, exc, method, url) from None
    connection.close()
    raise HttpTimeout(f"the server sent nothing for {timeout:g} s ({method} {url.shown()})", phase="read")


def _read_failed(connection: _Connection, exc: BaseException, method: str, url: Url) -> NetworkError:
    """Close ``connection`` after a failed read; the error to raise."""
    connection.close()
    return NetworkError(f"reading the answer to {method} {url.shown()} failed: {_why(exc)}")


def _why(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, OSError | ssl.SSLError):
        exc = cause
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


_CALLER_BOUNDS: Final = contextlib.nullcontext()
"""The exchange's scope when the caller's deadline comes first: none of its own."""


class _EmptyReply(NetworkError):
    """The connection ended before a single byte of the answer (a stale keep-alive connection)."""


def _head_end(buffer: bytearray) -> tuple[int, int]:
    """Where the head ends in ``buffer`` and where the body starts, or ``(-1, -1)`` (CRLF, or bare LF lines)."""
    end = buffer.find(b"\r\n\r\n")
    if end >= 0:
        return end, end + 4
    bare = buffer.find(b"\n\n")
    return (bare, bare + 2) if bare >= 0 else (-1, -1)


async def _read_plain(
    connection: _Connection, hope: _Pool | None, method: str, url: Url
) -> tuple[bytes | None, _Pool | None]:
    """One read on plain TCP (None: nothing in yet, look again), with the hope's bookkeeping.

    Its own function, not inlined into the head's read loop: inlined it saved no measurable
    work (``benchmarks.instructions --transports http``: 275.5k instructions a call inlined,
    274.4k with this frame).
    """
    try:
        if hope is None:
            await trio.lowlevel.wait_readable(connection.fd)
        else:
            await trio.lowlevel.checkpoint()
        data = os.read(connection.fd, _CHUNK)
    except BlockingIOError:
        if hope is not None:
            hope.misses += 1
        return None, None
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        raise _read_failed(connection, exc, method, url) from None
    if hope is not None:
        hope.misses = 0
    return data, None


async def _read_head(
    connection: _Connection,
    timeout: float,
    method: str,
    url: Url,
    scope: trio.CancelScope | None = None,
    *,
    bounded: bool = False,
) -> tuple[int, str, str, list[tuple[str, str]]]:
    """Read one response head (1xx heads skipped): status, reason, version, headers (names lower case).

    With ``scope`` (the caller's, around the whole exchange), its deadline is moved on by
    ``timeout`` whenever bytes come, instead of a scope per read. ``bounded``: a deadline
    of the caller's comes before ``timeout`` could, so no read needs a bound of its own.
    """
    per_read = None if scope is not None or bounded else timeout
    buffer = connection.buffer
    pool = connection.pool
    # Other requests to this origin in flight: let their tasks run once before the first read,
    # and this answer is usually in by then (as trio's sockets find it after their send's
    # checkpoint): a read, where parking in wait_readable costs an epoll_ctl and an event.
    hope = pool if pool is not None and per_read is None and connection.tls is None and pool.hopeful() else None
    while True:
        end, start = _head_end(buffer) if buffer else (-1, -1)  # (empty, usually: a call less)
        while end < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                connection.close()
                raise ProtocolError(
                    f"the answer to {method} {url.shown()} has a head larger than {MAX_HEAD_BYTES} bytes"
                )
            try:
                if per_read is None and connection.tls is None:
                    data, hope = await _read_plain(connection, hope, method, url)
                    if data is None:
                        continue
                else:
                    data = await _receive(connection, per_read, method, url)
            except NetworkError as exc:
                if not buffer:  # reset before a byte of the answer: as the end of stream there
                    raise _EmptyReply(str(exc)) from None
                raise
            if not data:
                connection.close()
                if not buffer:
                    raise _EmptyReply(f"the server closed the connection without answering {method} {url.shown()}")
                raise NetworkError(
                    f"the server closed the connection in the middle of the answer to {method} {url.shown()}"
                )
            buffer += data
            end = buffer.find(b"\r\n\r\n")  # _head_end's usual case, inline (a call less per answer)
            end, start = (end, end + 4) if end >= 0 else _head_end(buffer)
            if end < 0 and scope is not None:
                scope.deadline = trio.current_time() + timeout  # silence is counted from the last bytes
        if end > MAX_HEAD_BYTES:
            connection.close()
            raise ProtocolError(f"the answer to {method} {url.shown()} has a head larger than {MAX_HEAD_BYTES} bytes")
        head = buffer[:end].decode("latin-1")
        lines = head.split("\r\n") if start - end == 4 else head.splitlines()
        del buffer[:start]
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            connection.close()
            raise ProtocolError(f"the answer to {method} {url.shown()} is not HTTP/1.x: {lines[0][:80]!r}")
        headers = []
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                connection.close()
                raise ProtocolError(f"the answer to {method} {url.shown()} has a malformed header line")
            headers.append((name.lower(), value.strip()))
        status = int(code)
        if 100 <= status < 200 and status != 101:
            continue  # informational (100 Continue, 103 Early Hints): the real answer follows
        return status, reason, version, headers


# ---------------------------------------------------------------------- responses


_NO_BODY: Final = 0
_LENGTH: Final = 1
_CHUNKED: Final = 2
_TO_CLOSE: Final = 3


class Response:
    """One response; its body is read from the connection as it is asked for.

    Read the body to its end (:meth:`aread`, or :meth:`aiter_bytes` to the end) and the
    connection goes back to the pool; :meth:`aclose` before that closes the connection.

    Attributes:
        status: The status code.
        reason: The reason phrase (``"OK"``), possibly empty.
        http_version: ``"HTTP/1.1"`` or ``"HTTP/1.0"``.
        headers: The headers, names lower case.
        method: The request's method; ``url``: the request's URL.
    """

    __slots__ = (
        "_connection",
        "_encodings",
        "_framing",
        "_keep",
        "_pool",
        "_remaining",
        "_timeout",
        "headers",
        "http_version",
        "method",
        "reason",
        "status",
        "url",
    )

    def __init__(
        self,
        pool: _Pool,
        connection: _Connection,
        method: str,
        url: Url,
        status: int,
        reason: str,
        version: str,
        headers: list[tuple[str, str]],
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._timeout = pool.client.read_timeout
        self.method = method
        self.url = url
        self.status = status
        self.reason = reason
        self.http_version = version
        self.headers = Headers(headers)
        keep = version == "HTTP/1.1"
        length = -1
        chunked = False
        encodings: list[str] = []
        for name, value in headers:
            if name == "content-length":
                if not value.isdigit() or (length >= 0 and int(value) != length):
                    connection.close()
                    raise ProtocolError(f"the answer to {method} {url.shown()} has a bad content-length")
                length = int(value)
            elif name == "transfer-encoding":
                chunked = value.lower().rsplit(",", 1)[-1].strip() == "chunked"
            elif name == "connection":
                keep = keep and "close" not in value.lower()
            elif name == "content-encoding":
                encodings += [e.strip().lower() for e in value.split(",") if e.strip().lower() not in ("", "identity")]
        self._keep = keep
        self._remaining = 0
        if method == "HEAD" or status in (204, 304) or status < 200:
            self._framing = _NO_BODY
        elif chunked:
            self._framing = _CHUNKED
        elif length >= 0:
            self._framing = _LENGTH
            self._remaining = length
        else:
            self._framing = _TO_CLOSE
            self._keep = False
        self._encodings = encodings or None
        if self._framing == _NO_BODY or (self._framing == _LENGTH and length == 0):
            self._finish()

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.method} {self.url.shown()}>"

    @property
    def is_closed(self) -> bool:
        """Whether the body was read to its end or the response closed."""
        return self._connection is None

    def _finish(self) -> None:
        connection = self._connection
        if connection is None:
            return
        self._connection = None
        if self._keep and not connection.buffer:
            self._pool.put(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        """Done with this response: a body not read to its end closes the connection."""
        connection = self._connection
        if connection is not None:
            self._connection = None
            connection.close()

    def close(self) -> None:
        """:meth:`aclose`, synchronously (it never waits)."""
        connection = self._connection
        if connection is not None:
            self._connection = None
            connection.close()

    def read_now(self) -> bytes | None:
        """The whole body if it has all arrived (with the head, usually), else ``None`` (then :meth:`aread`).

        The usual small JSON answer: no copy loop, no checkpoint, and no coroutine.
        """
        connection = self._connection
        if (
            connection is not None
            and self._framing == _LENGTH
            and self._encodings is None
            and len(connection.buffer) >= self._remaining
        ):
            buffer = connection.buffer
            size = self._remaining
            body = bytes(buffer[:size])
            del buffer[:size]
            self._remaining = 0
            self._finish()
            return body
        return None

    async def aread(self, limit: int | None = None) -> bytes:
        """The whole (decoded) body, refused once it is larger than ``limit`` bytes.

        A ``content-length`` beyond the limit is refused before a byte of the body is read;
        any other body (chunked, to the end of the connection, compressed) as its decoded
        size crosses the limit. A refused body closes the connection.

        Args:
            limit: Largest body accepted, in bytes; None for no limit (small bodies we asked
                for only: an answer of the server's must have one).

        Raises:
            BodyTooLarge: The body is larger than ``limit``.
            NetworkError, HttpTimeout, ProtocolError, DecodingError: As :meth:`aiter_bytes`.
        """
        if limit is not None and self._framing == _LENGTH and self._encodings is None and self._remaining > limit:
            self.close()
            raise self._too_large(limit)
        body = self.read_now()
        if body is not None:
            if limit is not None and len(body) > limit:
                raise self._too_large(limit)
            return body
        parts = []
        size = 0
        async with contextlib.aclosing(self.aiter_bytes()) as chunks:
            async for chunk in chunks:
                size += len(chunk)
                if limit is not None and size > limit:
                    self.close()
                    raise self._too_large(limit)
                parts.append(chunk)
        return b"".join(parts)

    def _too_large(self, limit: int) -> BodyTooLarge:
        return BodyTooLarge(f"the answer to {self.method} {self.url.shown()} is larger than {limit} bytes", limit=limit)

    async def aiter_bytes(self) -> AsyncGenerator[bytes]:
        """The body, decoded, chunk by chunk as it arrives (transfer framing removed).

        Raises:
            NetworkError: The connection failed or ended in the middle of the body.
            HttpTimeout: Nothing came for the read timeout.
            ProtocolError: The chunked framing is broken.
            DecodingError: The content-encoding is not gzip/deflate, or does not decode.
        """
        try:
            decoders = None
            if self._encodings is not None:
                decoders = [_decoder(e, self.method, self.url) for e in reversed(self._encodings)]
            async for raw in self._raw():
                if decoders is None:
                    if raw:
                        yield raw
                    continue
                pieces = _inflated(decoders, 0, raw)
                while (piece := self._decoded(pieces)) is not None:
                    yield piece
            if decoders is not None:
                for index, decoder in enumerate(decoders):
                    pieces = _inflated(decoders, index + 1, decoder.flush())
                    while (piece := self._decoded(pieces)) is not None:
                        yield piece
        except BaseException:
            self.close()
            raise

    def _decoded(self, pieces: Iterator[bytes]) -> bytes | None:
        """The next decoded piece, or None at the end; a body that does not decode raises DecodingError."""
        try:
            return next(pieces, None)
        except zlib.error as exc:
            raise DecodingError(f"the answer to {self.method} {self.url.shown()} does not decode: {exc}") from None

    async def _raw(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        framing = self._framing
        if framing == _LENGTH:
            async for chunk in self._read_length(connection):
                yield chunk
        elif framing == _CHUNKED:
            async for chunk in self._read_chunked(connection):
                yield chunk
        elif framing == _TO_CLOSE:
            if connection.buffer:
                chunk = bytes(connection.buffer)
                connection.buffer.clear()
                yield chunk
            while data := await _receive(connection, self._timeout, self.method, self.url):
                yield data
        self._finish()

    async def _more(self, connection: _Connection) -> None:
        data = await _receive(connection, self._timeout, self.method, self.url)
        if not data:
            connection.close()
            raise NetworkError(
                f"the server closed the connection in the middle of the answer to {self.method} {self.url.shown()}"
            )
        connection.buffer += data

    async def _read_length(self, connection: _Connection) -> AsyncIterator[bytes]:
        buffer = connection.buffer
        while self._remaining:
            if not buffer:
                await self._more(connection)
            take = min(len(buffer), self._remaining)
            chunk = bytes(buffer[:take])
            del buffer[:take]
            self._remaining -= take
            yield chunk

    async def _line(self, connection: _Connection) -> bytes:
        buffer = connection.buffer
        while (end := buffer.find(b"\n")) < 0:
            if len(buffer) > _MAX_CHUNK_LINE:
                connection.close()
                raise ProtocolError(f"the answer to {self.method} {self.url.shown()} has a broken chunked framing")
            await self._more(connection)
        line = bytes(buffer[:end]).rstrip(b"\r")
        del buffer[: end + 1]
        return line

    async def _read_chunked(self, connection: _Connection) -> AsyncIterator[bytes]:
        buffer = connection.buffer
        while True:
            line = await self._line(connection)
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                size = -1
            if size < 0 or not size_text or len(size_text) > 16:
                connection.close()
                raise ProtocolError(f"the answer to {self.method} {self.url.shown()} has a broken chunked framing")
            if size == 0:
                break
            while size:
                if not buffer:
                    await self._more(connection)
                take = min(len(buffer), size)
                chunk = bytes(buffer[:take])
                del buffer[:take]
                size -= take
                yield chunk
            if await self._line(connection):
                connection.close()
                raise ProtocolError(f"the answer to {self.method} {self.url.shown()} has a broken chunked framing")
        trailers = 0
        while line := await self._line(connection):  # trailers, read and dropped
            trailers += len(line)
            if trailers > MAX_HEAD_BYTES:
                connection.close()
                raise ProtocolError(
                    f"the answer to {self.method} {self.url.shown()} has trailers larger than {MAX_HEAD_BYTES} bytes"
                )


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped (the standard) or raw (common); tried in that order."""

    def __init__(self) -> None:
        self._inner = zlib.decompressobj()
        self._first = True

    @property
    def unconsumed_tail(self) -> bytes:
        return self._inner.unconsumed_tail

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        if self._first:
            self._first = False
            try:
                return self._inner.decompress(data, max_length)
            except zlib.error:
                self._inner = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._inner.decompress(data, max_length)

    def flush(self) -> bytes:
        return self._inner.flush()


def _inflated(decoders: list[zlib._Decompress | _Deflate], index: int, data: bytes) -> Iterator[bytes]:
    """``data`` through ``decoders[index:]``, in pieces of at most :data:`_CHUNK` bytes each.

    Each decoder is asked for at most a piece at a time (``max_length``), what it has not
    consumed yet kept for the next ask: a bomb's few KiB that inflate to gigabytes come out
    a piece at a time, and the reader stops when it has had enough.
    """
    if index == len(decoders):
        if data:
            yield data
        return
    decoder = decoders[index]
    while True:
        out = decoder.decompress(data, _CHUNK)
        data = decoder.unconsumed_tail
        if out:
            yield from _inflated(decoders, index + 1, out)
        if not data and len(out) < _CHUNK:
            return


def _decoder(encoding: str, method: str, url: Url) -> zlib._Decompress | _Deflate:
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if encoding == "deflate":
        return _Deflate()
    raise DecodingError(
        f"the answer to {method} {url.shown()} is in content-encoding {encoding!r}, which is not supported"
        " (gzip and deflate are)"
    )


# ---------------------------------------------------------------------- the client


def _proxy_for(url: Url) -> Url | None:
    """The proxy the environment names for ``url`` (httpx's rules, its helpers), or None."""
    import httpx2
    from httpx2._utils import URLPattern, get_environment_proxies

    proxies = get_environment_proxies()
    if not proxies:
        return None
    target = httpx2.URL(str(url))
    for pattern, proxy in sorted((URLPattern(key), value) for key, value in proxies.items()):
        if pattern.matches(target):
            if proxy is None:
                return None
            found = Url.parse(proxy)
            if found.scheme != "http":
                raise InvalidRequest(f"proxy scheme {found.scheme!r} is not supported; use an http:// proxy")
            return found
    return None


@attrs.define(eq=False)
class HttpClient:
    """The connections of one MCP link: a pool per origin, default headers, timeouts, TLS, proxies.

    Args:
        headers: Sent with every request (validated here, once); a request's own header of
            the same name (any case) replaces one. ``User-Agent: mcp-actors`` unless given.
        connect_timeout: Bound for opening a connection (and a TLS handshake, a proxy tunnel)
            and for writing one request, in seconds.
        read_timeout: Bound for silence while a response is read, in seconds.
        trust_env: Read proxies, ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` from the environment.
        verify: An SSL context to use instead of the default one (tests).

    Raises:
        InvalidRequest: A default header is not allowed (names it, not its value).
    """

    headers: Mapping[str, str] = attrs.field(factory=dict, repr=lambda h: repr(sorted(h)))
    connect_timeout: float = 30.0
    read_timeout: float = 300.0
    trust_env: bool = True
    verify: ssl.SSLContext | None = attrs.field(default=None, repr=False)
    closed: bool = False
    _defaults: dict[str, tuple[str, str]] = attrs.field(init=False, repr=False)
    _pools: dict[tuple[str, str, int], _Pool] = attrs.field(init=False, factory=dict, repr=False)
    _ssl: ssl.SSLContext | None = attrs.field(init=False, default=None, repr=False)
    _header_cache: dict[tuple[tuple[str, str], ...], bytes] = attrs.field(init=False, factory=dict, repr=False)

    def __attrs_post_init__(self) -> None:
        encode_headers(self.headers.items())  # refused at once when a default header is not allowed
        defaults = {"user-agent": ("User-Agent", _USER_AGENT)}
        defaults.update((name.lower(), (name, value)) for name, value in self.headers.items())
        self._defaults = defaults

    def _header_block(self, headers: Mapping[str, str] | None) -> bytes:
        """The encoded header lines of one request: the defaults, each replaced by a request header of its name.

        A wire sends the same few header sets again and again: each is merged, validated and
        encoded once, then taken from a small cache.
        """
        key = tuple(headers.items()) if headers else ()
        block = self._header_cache.get(key)
        if block is None:
            given = {name.lower() for name, _ in key}
            kept = [pair for lower, pair in self._defaults.items() if lower not in given]
            block = encode_headers([*kept, *key])
            if len(self._header_cache) >= _HEADER_CACHE:
                self._header_cache.clear()
            self._header_cache[key] = block
        return block

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context (httpx's default, built once on first use, ALPN http/1.1)."""
        if self._ssl is None:
            if self.verify is not None:
                context = self.verify
            else:
                import httpx2

                context = httpx2.create_ssl_context(trust_env=self.trust_env)
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    def _pool(self, url: Url) -> _Pool:
        pool = self._pools.get(url.origin)
        if pool is None:
            proxy = _proxy_for(url) if self.trust_env else None
            pool = self._pools[url.origin] = _Pool(self, Url(url.scheme, url.host, url.port, "/"), proxy)
        return pool

    def prepare(self, url: Url) -> None:
        """Set up ``url``'s pool now (its proxy read from the environment), so a bad proxy fails early.

        Raises:
            InvalidRequest: The environment names a proxy this client cannot use (not http://).
        """
        self._pool(url)

    async def send(
        self,
        method: str,
        url: Url,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        bound: float | None = None,
    ) -> Response:
        """Send one request; return the response once its head has arrived (the body is read later).

        The caller must read the body or close the response (:meth:`Response.aclose`). A
        cancellation in the middle closes the connection (its state is unknown).

        Args:
            method: ``"GET"``, ``"POST"``, ``"DELETE"``, ...
            url: Where (its origin picks the pool).
            headers: This request's headers, over the client's (a repeated name is sent twice).
            body: The body; ``Content-Length`` is set from it for every method but GET/HEAD
                without a body.
            bound: Seconds within which a cancel scope of the caller's, around this call and
                not shielded from it, ends the request; ``None`` when the caller does not
                know. A bound no longer than the read timeout spares the exchange a scope of
                its own; without one the client looks the effective deadline up itself
                (``trio.current_effective_deadline()``: a walk up every enclosing scope, a
                sixth of the client's own cost of a request on a typical call path).

        Raises:
            InvalidRequest: A header is not allowed; nothing was sent.
            ConnectFailed: No connection could be opened.
            NetworkError: The connection failed while sending or before the head was read.
            HttpTimeout: Connecting, writing or waiting for the head took too long.
            ProtocolError: The head is not HTTP/1.x we can read.
        """
        if self.closed:
            raise NetworkError("the HTTP client is closed")
        pool = self._pools.get(url.origin) or self._pool(url)
        target = str(url) if pool.proxy is not None and url.scheme == "http" else url.target
        head = f"{method} {target} HTTP/1.1\r\nHost: {url.authority}\r\n"
        if body or method not in ("GET", "HEAD"):
            head += f"Content-Length: {len(body)}\r\n"
        block = self._header_block(headers)
        proxy_auth = _proxy_auth(pool.proxy) if pool.proxy is not None and url.scheme == "http" else b""
        data = b"".join((head.encode(), block, proxy_auth, b"\r\n", body))
        for attempt in (0, 1):
            connection, reused = await pool.acquire()
            # One scope for the exchange, set once: the wait for the head, bounded by the read
            # timeout (moved on only when a head comes in pieces). The write is bounded by the
            # connect timeout only when it has to wait for room (it almost never does). None
            # when the caller's deadline (a request's timeout, usually) comes first: it bounds
            # the exchange already, and a scope costs several microseconds per request.
            if bound is not None and bound <= self.read_timeout:
                bounded, scope = True, None
            else:
                deadline = trio.current_time() + self.read_timeout
                bounded = trio.current_effective_deadline() <= deadline
                scope = None if bounded else trio.CancelScope(deadline=deadline)
            try:
                with scope or _CALLER_BOUNDS:
                    try:
                        # One os.write from this task when the socket has room (a request fits, usually).
                        sent = connection.write_now(data)
                        written = sent == len(data) or await connection.send_all(data, self.connect_timeout, sent)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                        connection.close()
                        if reused and attempt == 0:
                            continue  # a keep-alive connection the server had closed: nothing was processed
                        raise NetworkError(f"sending {method} {url.shown()} failed: {_why(exc)}") from None
                    if not written:
                        raise HttpTimeout(
                            f"writing {method} {url.shown()} took longer than {self.connect_timeout:g} s",
                            phase="write",
                        )
                    try:
                        status, reason, version, fields = await _read_head(
                            connection, self.read_timeout, method, url, scope, bounded=bounded
                        )
                    except _EmptyReply:
                        if reused and attempt == 0:
                            continue  # the end came before any byte of an answer: the server dropped it unread
                        raise
                    return Response(pool, connection, method, url, status, reason, version, fields)
            except BaseException:
                connection.close()
                raise
            connection.close()  # the scope ran out
            raise HttpTimeout(
                f"the server sent nothing for {self.read_timeout:g} s ({method} {url.shown()})", phase="read"
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close every pooled connection; later requests fail. Never waits."""
        self.close()

    def close(self) -> None:
        """:meth:`aclose`, synchronously."""
        self.closed = True
        for pool in self._pools.values():
            pool.close()

    def statistics(self) -> dict[str, int]:
        """Idle connections per origin (``"scheme://host:port"``), for tests and diagnostics."""
        return {pool.url.shown(): len(pool.idle) for pool in self._pools.values()}
