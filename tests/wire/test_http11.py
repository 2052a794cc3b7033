"""Our HTTP/1.1 client (``mcp_actors._wire.http.http11``) against small trio servers written here, byte by byte.

Each server is a trio TCP listener on 127.0.0.1 whose handler reads requests and writes raw
answers, counting the connections it accepted (keep-alive reuse is "one accept for two
requests"). TLS servers use ``trustme`` certificates; the proxy is a small forwarding proxy
(absolute form for http://, CONNECT for https://).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import math
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from mcp_actors._wire.http.http11 import (
    _FRESH,
    _HOPE_MISSES,
    _HOPE_PROBE,
    MAX_CONNECTIONS,
    MAX_HEAD_BYTES,
    ConnectFailed,
    DecodingError,
    HttpClient,
    HttpTimeout,
    InvalidRequest,
    NetworkError,
    ProtocolError,
    Url,
    _Connection,
    _Pool,
    _read_head,
)

BOUND = 30  # generous: every exchange here takes milliseconds on an idle machine


@attrs.define(eq=False)
class Request:
    """One request as a test server read it."""

    line: str
    headers: dict[str, str]
    body: bytes
    names: list[str] = attrs.field(factory=list)
    """Every header line's name, lower case, in order (repeats kept)."""


@attrs.define(eq=False)
class Peer:
    """A test server's side of one connection: read requests, write raw bytes."""

    stream: trio.abc.Stream
    buffer: bytearray = attrs.field(factory=bytearray)

    async def read_request(self) -> Request | None:
        """The next request on this connection, or None at its end."""
        while b"\r\n\r\n" not in self.buffer:
            try:
                chunk = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not chunk:
                return None
            self.buffer += chunk
        head, _, rest = bytes(self.buffer).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", 0))
        while len(rest) < length:
            rest += await self.stream.receive_some(65536)
        self.buffer = bytearray(rest[length:])
        names = [line.partition(":")[0].strip().lower() for line in lines[1:]]
        return Request(lines[0], headers, rest[:length], names)

    async def read_response(self) -> bytes:
        """The next content-length response on this connection, as raw bytes (a proxy's upstream side)."""
        while b"\r\n\r\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                raise AssertionError("the upstream server closed the connection")
            self.buffer += chunk
        end = self.buffer.index(b"\r\n\r\n") + 4
        length = 0
        for line in bytes(self.buffer[:end]).split(b"\r\n"):
            key, _, value = line.partition(b":")
            if key.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < end + length:
            self.buffer += await self.stream.receive_some(65536)
        response = bytes(self.buffer[: end + length])
        del self.buffer[: end + length]
        return response

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)


@attrs.define(eq=False)
class Server:
    """A running test server: its URL, its accept count and the requests it read."""

    url: str
    accepts: int = 0
    requests: list[Request] = attrs.field(factory=list)


Handler = Callable[[Peer, Server], Awaitable[None]]


@contextlib.asynccontextmanager
async def serve(handler: Handler, *, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    """Run ``handler`` per accepted connection on 127.0.0.1 (TLS with ``tls``); yield the server."""
    server = Server(url="")

    async def on_connection(stream: trio.SocketStream) -> None:
        server.accepts += 1
        wrapped: trio.abc.Stream = stream
        if tls is not None:
            wrapped = trio.SSLStream(stream, tls, server_side=True)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await handler(Peer(wrapped), server)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await trio.aclose_forcefully(wrapped)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, on_connection, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        server.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/mcp"
        yield server
        nursery.cancel_scope.cancel()


def answer(body: bytes, *extra: str, status: str = "200 OK") -> bytes:
    """A content-length answer with ``extra`` header lines."""
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def keep_answering(make: Callable[[Request], bytes]) -> Handler:
    """A handler that answers every request on its connection with ``make(request)``."""

    async def handler(peer: Peer, server: Server) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            await peer.send(make(request))

    return handler


async def fetch(client: HttpClient, url: str, method: str = "POST", body: bytes = b"{}", **headers: str) -> Any:
    """Send one request and read its whole body: ``(response, body)``."""
    with trio.fail_after(BOUND):
        response = await client.send(method, Url.parse(url), headers, body)
        return response, await response.aread()


# ---------------------------------------------------------------------- framing


async def test_content_length_body_and_request_head() -> None:
    """A content-length answer is read whole; the request carries Host, Content-Length, the headers and body."""
    async with serve(keep_answering(lambda r: answer(b'{"ok":1}', "Content-Type: application/json"))) as server:
        client = HttpClient(headers={"X-Default": "d"})
        response, body = await fetch(client, server.url, body=b'{"a":1}', x_one="1")
        assert (response.status, response.reason, body) == (200, "OK", b'{"ok":1}')
        assert response.headers.get("content-type") == "application/json"
        [request] = server.requests
        assert request.line == "POST /mcp HTTP/1.1"
        assert request.headers["host"] == server.url.split("/")[2]
        assert request.headers["content-length"] == "7" and request.body == b'{"a":1}'
        assert request.headers["x-default"] == "d" and request.headers["x_one"] == "1"
        assert "accept-encoding" not in request.headers
        client.close()


async def test_a_request_header_replaces_a_default_of_the_same_name() -> None:
    """A request header replaces the client's default of that name (any case), one line each; a default User-Agent."""
    async with serve(keep_answering(lambda r: answer(b""))) as server:
        client = HttpClient(headers={"Accept": "text/plain", "X-Keep": "k"})
        await fetch(client, server.url, accept="application/json")
        await fetch(client, server.url)
        first, second = server.requests
        assert first.headers["accept"] == "application/json" and first.headers["x-keep"] == "k"
        assert first.names.count("accept") == 1 and second.names.count("accept") == 1
        assert second.headers["accept"] == "text/plain"
        assert first.headers["user-agent"] == "mcp-actors"
        client.close()


async def test_chunked_body_with_extensions_and_trailers() -> None:
    """A chunked answer (extensions, trailers) is decoded, and its connection is reused afterwards."""
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: yes\r\nX-More: 1\r\n\r\n"
    )
    async with serve(keep_answering(lambda r: chunked)) as server:
        client = HttpClient()
        first, body = await fetch(client, server.url)
        assert body == b"hello world" and first.is_closed
        _, again = await fetch(client, server.url)
        assert again == b"hello world"
        assert server.accepts == 1 and len(server.requests) == 2
        client.close()


async def test_chunked_body_streams_chunk_by_chunk() -> None:
    """aiter_bytes yields each chunk as it arrives (an SSE stream is read while it is still open)."""
    step = trio.Event()

    async def handler(peer: Peer, server: Server) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\none\r\n")
        await step.wait()
        await peer.send(b"3\r\ntwo\r\n0\r\n\r\n")

    async with serve(handler) as server:
        client = HttpClient()
        with trio.fail_after(BOUND):
            response = await client.send("GET", Url.parse(server.url))
            got = []
            async for chunk in response.aiter_bytes():
                got.append(chunk)
                step.set()
        assert got == [b"one", b"two"]
        client.close()


async def test_body_read_to_close() -> None:
    """Without content-length or chunked framing the body runs to the end of the connection, which is not reused."""

    async def handler(peer: Peer, server: Server) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart one, ")
        await peer.send(b"part two")

    async with serve(handler) as server:
        client = HttpClient()
        _, body = await fetch(client, server.url)
        assert body == b"part one, part two"
        _, body = await fetch(client, server.url)
        assert body == b"part one, part two" and server.accepts == 2
        client.close()


async def test_no_body_for_204_304_and_head() -> None:
    """204, 304 and an answer to HEAD have no body even with a content-length; the connection is reused."""
    replies = iter(
        [
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
            answer(b"last"),
        ]
    )
    async with serve(keep_answering(lambda r: next(replies))) as server:
        client = HttpClient()
        assert (await fetch(client, server.url))[1] == b""
        assert (await fetch(client, server.url, "GET", b""))[1] == b""
        assert (await fetch(client, server.url, "HEAD", b""))[1] == b""
        assert (await fetch(client, server.url))[1] == b"last"
        assert server.accepts == 1
        client.close()


async def test_informational_heads_are_skipped() -> None:
    """A 100 Continue (or 103) before the answer is skipped; the real status and body come through."""
    reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + answer(b"real")
    async with serve(keep_answering(lambda r: reply)) as server:
        client = HttpClient()
        response, body = await fetch(client, server.url)
        assert (response.status, body) == (200, b"real")
        client.close()


async def test_repeated_headers_are_kept_and_names_are_case_insensitive() -> None:
    """Repeated header lines are all kept, in order; names are lower case."""
    reply = answer(b"", "Set-Cookie: a=1", "SET-COOKIE: b=2", "X-Thing:  spaced  ")
    async with serve(keep_answering(lambda r: reply)) as server:
        client = HttpClient()
        response, _ = await fetch(client, server.url)
        assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
        assert response.headers.get("x-thing") == "spaced" and "x-thing" in response.headers
        client.close()


# ---------------------------------------------------------------------- keep-alive


async def test_keep_alive_reuses_one_connection() -> None:
    """Two requests in a row go over one connection: the server accepts once."""
    async with serve(keep_answering(lambda r: answer(b"x"))) as server:
        client = HttpClient()
        await fetch(client, server.url)
        await fetch(client, server.url)
        assert server.accepts == 1 and len(server.requests) == 2
        assert client.statistics() == {server.url.removesuffix("/mcp"): 1}
        client.close()


async def test_requests_beyond_the_connection_limit_wait_for_a_connection() -> None:
    """With MAX_CONNECTIONS requests in flight, one more waits and then reuses a connection: no extra one is opened."""
    release = trio.Event()
    waiting = trio.Event()

    async def handler(peer: Peer, server: Server) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            if len(server.requests) == MAX_CONNECTIONS:
                waiting.set()
            await release.wait()
            await peer.send(answer(b"ok"))

    async with serve(handler) as server:
        client = HttpClient()
        bodies: list[bytes] = []

        async def one() -> None:
            bodies.append((await fetch(client, server.url))[1])

        async with trio.open_nursery() as nursery:
            for _ in range(MAX_CONNECTIONS + 1):
                nursery.start_soon(one)
            with trio.fail_after(BOUND):
                await waiting.wait()
                await trio.testing.wait_all_tasks_blocked()
            assert server.accepts == MAX_CONNECTIONS and len(server.requests) == MAX_CONNECTIONS
            release.set()
        assert bodies == [b"ok"] * (MAX_CONNECTIONS + 1)
        assert server.accepts == MAX_CONNECTIONS
        client.close()


async def test_connection_close_and_http10_are_honoured() -> None:
    """An answer with connection: close, or an HTTP/1.0 answer, closes its connection: the next request opens one."""
    replies = iter([answer(b"a", "Connection: close"), b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nb", answer(b"c")])
    async with serve(keep_answering(lambda r: next(replies))) as server:
        client = HttpClient()
        assert (await fetch(client, server.url))[1] == b"a"
        assert (await fetch(client, server.url))[1] == b"b"
        assert (await fetch(client, server.url))[1] == b"c"
        assert server.accepts == 3
        client.close()


async def test_a_response_closed_early_closes_its_connection() -> None:
    """A body not read to its end is not left on a pooled connection: the next request opens a new one."""
    async with serve(keep_answering(lambda r: answer(b"0123456789"))) as server:
        client = HttpClient()
        with trio.fail_after(BOUND):
            response = await client.send("POST", Url.parse(server.url), body=b"{}")
        await response.aclose()
        assert (await fetch(client, server.url))[1] == b"0123456789"
        assert server.accepts == 2
        client.close()


async def test_an_idle_connection_the_server_closed_is_not_used() -> None:
    """A pooled connection idle for a while that the server closed is noticed before use; a new one is opened."""
    closed = trio.Event()

    async def handler(peer: Peer, server: Server) -> None:
        request = await peer.read_request()
        assert request is not None
        server.requests.append(request)
        await peer.send(answer(b"once"))  # keep-alive promised, then closed anyway
        await trio.aclose_forcefully(peer.stream)
        closed.set()

    async with serve(handler) as server:
        client = HttpClient()
        await fetch(client, server.url)
        with trio.fail_after(BOUND):
            await closed.wait()
        [pool] = client._pools.values()
        pool.idle[0].idle_since -= _FRESH + 1  # idle long enough to be looked at before use (real time)
        assert pool.idle[0].stale(time.monotonic())
        assert (await fetch(client, server.url))[1] == b"once"
        assert server.accepts == 2 and len(server.requests) == 2
        client.close()


async def test_a_reused_connection_closed_before_any_answer_is_retried_once() -> None:
    """A reused connection that ends before a byte of the answer: the request is retried once on a new connection."""

    async def handler(peer: Peer, server: Server) -> None:
        first = await peer.read_request()
        assert first is not None
        server.requests.append(first)
        await peer.send(answer(b"one"))
        second = await peer.read_request()
        if second is not None:
            server.requests.append(second)  # read, then dropped without a byte of answer

    async with serve(handler) as server:
        client = HttpClient()
        assert (await fetch(client, server.url, body=b"1"))[1] == b"one"
        assert (await fetch(client, server.url, body=b"2"))[1] == b"one"
        assert server.accepts == 2
        assert [r.body for r in server.requests] == [b"1", b"2", b"2"]
        client.close()


async def test_no_retry_once_part_of_the_answer_came() -> None:
    """A reused connection that ends after part of the status line: a network error, never a resend."""

    async def handler(peer: Peer, server: Server) -> None:
        first = await peer.read_request()
        assert first is not None
        server.requests.append(first)
        await peer.send(answer(b"one"))
        second = await peer.read_request()
        if second is not None:
            server.requests.append(second)
            await peer.send(b"HTTP/1.1 2")

    async with serve(handler) as server:
        client = HttpClient()
        await fetch(client, server.url, body=b"1")
        with pytest.raises(NetworkError, match="in the middle of the answer"):
            await fetch(client, server.url, body=b"2")
        assert server.accepts == 1 and [r.body for r in server.requests] == [b"1", b"2"]
        client.close()


async def test_a_new_connection_closed_before_any_answer_is_not_retried() -> None:
    """A fresh connection that ends without an answer is a network error at once (no retry: nothing was stale)."""

    async def handler(peer: Peer, server: Server) -> None:
        request = await peer.read_request()
        if request is not None:
            server.requests.append(request)

    async with serve(handler) as server:
        client = HttpClient()
        with pytest.raises(NetworkError, match="closed the connection without answering POST"):
            await fetch(client, server.url)
        assert server.accepts == 1 and len(server.requests) == 1
        client.close()


# ---------------------------------------------------------------------- failures


async def test_a_server_closing_mid_body_is_a_network_error() -> None:
    """The connection ending before content-length bytes came is a network error naming the request."""

    async def handler(peer: Peer, server: Server) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")

    async with serve(handler) as server:
        client = HttpClient()
        with pytest.raises(NetworkError, match=r"in the middle of the answer to POST http://127\.0\.0\.1"):
            await fetch(client, server.url)
        client.close()


async def test_a_head_larger_than_the_bound_is_a_protocol_error() -> None:
    """An answer head that outgrows MAX_HEAD_BYTES is a protocol error saying the bound."""
    huge = b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n\r\n"
    async with serve(keep_answering(lambda r: huge)) as server:
        client = HttpClient()
        with pytest.raises(ProtocolError, match=f"larger than {MAX_HEAD_BYTES} bytes"):
            await fetch(client, server.url)
        client.close()


@pytest.mark.parametrize(
    "reply",
    [b"SSH-2.0-OpenSSH_9.6\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"],
)
async def test_garbage_answers_are_protocol_errors(reply: bytes) -> None:
    """A status line that is not HTTP/1.x, a bad status code or a header line without a colon: protocol error."""
    async with serve(keep_answering(lambda r: reply)) as server:
        client = HttpClient()
        with pytest.raises(ProtocolError, match="answer to POST"):
            await fetch(client, server.url)
        client.close()


async def test_broken_chunked_framing_is_a_protocol_error() -> None:
    """A chunk size that is not hex is a protocol error."""
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"
    async with serve(keep_answering(lambda r: reply)) as server:
        client = HttpClient()
        with pytest.raises(ProtocolError, match="chunked framing"):
            await fetch(client, server.url)
        client.close()


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "line\nbreak", "nul\0"])
async def test_header_values_with_line_breaks_are_refused(value: str) -> None:
    """A header value with CR, LF or NUL is refused before anything is sent, naming the header, not the value."""
    async with serve(keep_answering(lambda r: answer(b""))) as server:
        client = HttpClient()
        with pytest.raises(InvalidRequest, match="'X-Secret'") as info:
            await fetch(client, server.url, **{"X-Secret": value})
        assert value not in str(info.value)
        assert server.accepts == 0
        with pytest.raises(InvalidRequest, match="'X-Default'"):
            HttpClient(headers={"X-Default": value})
        client.close()


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("deflate", lambda b: zlib.compress(b)[2:-4])],
)
async def test_compressed_bodies_are_decoded(encoding: str, encode: Callable[[bytes], bytes]) -> None:
    """A gzip or deflate (zlib or raw) body is decoded, although we never asked for one."""
    payload = b'{"text": "' + b"squeeze " * 200 + b'"}'
    reply = answer(encode(payload), f"Content-Encoding: {encoding}")
    async with serve(keep_answering(lambda r: reply)) as server:
        client = HttpClient()
        _, body = await fetch(client, server.url)
        assert body == payload
        client.close()


async def test_an_unsupported_content_encoding_is_a_decoding_error() -> None:
    """A body in an encoding we do not decode (br) is a decoding error naming it."""
    async with serve(keep_answering(lambda r: answer(b"\x8b\x00", "Content-Encoding: br"))) as server:
        client = HttpClient()
        with pytest.raises(DecodingError, match="'br'"):
            await fetch(client, server.url)
        client.close()


@pytest.mark.parametrize(
    ("caller_deadline", "bound"),
    [(None, None), (60.0, None), (60.0, 60.0)],
    ids=["no-caller-deadline", "later-caller-deadline", "later-bound-stated"],
)
async def test_read_timeout_is_typed(
    mock_clock: trio.testing.MockClock, caller_deadline: float | None, bound: float | None
) -> None:
    """A server that never answers: HttpTimeout (phase read) after exactly the read timeout of
    silence, also inside a caller's deadline that comes later, found or stated as ``bound``
    (the read timeout stays in charge)."""

    async def handler(peer: Peer, server: Server) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            if len(server.requests) == 1:
                await peer.send(answer(b"first"))
            # the second one is never answered

    async with serve(handler) as server:
        client = HttpClient(read_timeout=7.5)
        await fetch(client, server.url)  # the connection is open before the clock starts jumping
        mock_clock.autojump_threshold = 0
        start = trio.current_time()
        with trio.move_on_after(caller_deadline if caller_deadline is not None else math.inf):
            with pytest.raises(HttpTimeout, match=r"sent nothing for 7\.5 s") as info:
                await client.send("POST", Url.parse(server.url), body=b"{}", bound=bound)
        assert info.value.phase == "read"
        assert trio.current_time() - start == pytest.approx(7.5)
        client.close()


@pytest.mark.parametrize("bound", [None, 2.0], ids=["found", "stated"])
async def test_an_earlier_deadline_of_the_callers_ends_the_exchange_and_its_connection(
    mock_clock: trio.testing.MockClock, bound: float | None
) -> None:
    """A caller's deadline before the read timeout bounds the exchange (the client adds no
    scope of its own then), whether the client finds it or the caller states it as
    ``bound``: the caller is cancelled at its deadline, the connection is not reused, and
    the next request gets a new one."""

    async def handler(peer: Peer, server: Server) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            if len(server.requests) != 2:
                await peer.send(answer(b"ok"))
            # the second one is never answered

    async with serve(handler) as server:
        client = HttpClient(read_timeout=300.0)
        await fetch(client, server.url)
        mock_clock.autojump_threshold = 0
        start = trio.current_time()
        with trio.move_on_after(2.0) as caller:
            await client.send("POST", Url.parse(server.url), body=b"{}", bound=bound)
        assert caller.cancelled_caught
        assert trio.current_time() - start == pytest.approx(2.0)
        assert client.statistics() == {server.url.removesuffix("/mcp"): 0}  # the connection went with it
        _, body = await fetch(client, server.url)
        assert body == b"ok"
        assert server.accepts == 2
        client.close()


async def test_a_stated_bound_is_taken_at_its_word(mock_clock: trio.testing.MockClock) -> None:
    """``bound`` is the caller's promise, not looked up: one within the read timeout makes the
    client add no read timeout of its own, so a caller that breaks the promise (no scope of
    its own ends the request) waits past the read timeout. Why a caller must state it only
    for a send its own unshielded scope ends (the request's timeout)."""

    async def handler(peer: Peer, server: Server) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)  # never answered

    async with serve(handler) as server:
        client = HttpClient(read_timeout=7.5)
        mock_clock.autojump_threshold = 0
        start = trio.current_time()
        with trio.move_on_after(100.0) as net:  # the test's own net, far past the read timeout
            await client.send("POST", Url.parse(server.url), body=b"{}", bound=1.0)
        assert net.cancelled_caught
        assert trio.current_time() - start == pytest.approx(100.0)
        client.close()


@contextlib.contextmanager
def counting_socket_waits(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Count the parks in ``trio.lowlevel.wait_readable`` (the client looks it up at each read)."""
    parks: list[int] = []
    wait_readable = trio.lowlevel.wait_readable

    async def counted(fd: Any) -> None:
        parks.append(fd)
        await wait_readable(fd)

    monkeypatch.setattr(trio.lowlevel, "wait_readable", counted)
    yield parks


def connection_in_flight(busy: int) -> tuple[_Connection, trio.socket.SocketType]:
    """A connection (the client's end of a socket pair) of a pool with ``busy`` requests in flight; the peer's end."""
    ours, peer = trio.socket.socketpair()
    pool = _Pool(HttpClient(), Url.parse("http://127.0.0.1:1/"), None, open_count=busy)
    connection = _Connection(ours, pool=pool)
    return connection, peer


@pytest.mark.parametrize(("busy", "parks"), [(2, 0), (1, 1)], ids=["others-in-flight", "alone"])
async def test_an_answer_already_in_is_read_without_a_park_when_others_are_in_flight(
    monkeypatch: pytest.MonkeyPatch, busy: int, parks: int
) -> None:
    """With other requests to the origin in flight, the first read of an answer follows a
    checkpoint and finds the answer there: no park in wait_readable (its epoll_ctl and event).
    A request alone parks at once, as its answer cannot be in yet."""
    connection, peer = connection_in_flight(busy)
    assert connection.pool is not None
    connection.pool.misses = 3  # a hit forgets earlier misses
    await peer.send(answer(b"ok"))
    with counting_socket_waits(monkeypatch) as waits, trio.fail_after(BOUND):
        status, _, _, headers = await _read_head(
            connection, 5.0, "POST", Url.parse("http://127.0.0.1:1/"), bounded=True
        )
    assert (status, headers) == (200, [("content-length", "2")])
    assert bytes(connection.buffer) == b"ok"
    assert len(waits) == parks
    assert connection.pool.misses == (0 if busy > 1 else 3)
    connection.close()
    peer.close()


async def test_an_answer_not_in_yet_after_the_checkpoint_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Others in flight, but this answer not in after the checkpoint: the read finds nothing
    and the request parks until the answer comes, then reads it whole."""
    connection, peer = connection_in_flight(3)
    got: list[int] = []

    async def read() -> None:
        got.append((await _read_head(connection, 5.0, "POST", Url.parse("http://127.0.0.1:1/"), bounded=True))[0])

    with counting_socket_waits(monkeypatch) as waits, trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            assert waits == [connection.fd] and not got  # parked, after a read that found nothing
            await peer.send(answer(b"late"))
    assert got == [200] and bytes(connection.buffer) == b"late"
    assert connection.pool is not None and connection.pool.misses == 1
    connection.close()
    peer.close()


def test_a_pool_whose_reads_first_keep_missing_parks_at_once_and_probes_now_and_then() -> None:
    """Against a server slower than us every read-first misses (a checkpoint and a failed
    read for nothing): after _HOPE_MISSES misses in a row requests park at once, and every
    _HOPE_PROBE-th tries again; a hit makes the pool hopeful again. Alone, never."""
    pool = _Pool(HttpClient(), Url.parse("http://127.0.0.1:1/"), None, open_count=1)
    assert not pool.hopeful() and pool.misses == 0
    pool.open_count = 5
    assert all(pool.hopeful() for _ in range(50))  # no misses: always
    pool.misses = _HOPE_MISSES  # that many misses in a row
    tries = []
    for _ in range(3 * _HOPE_PROBE):
        tries.append(pool.hopeful())
        if tries[-1]:
            pool.misses += 1  # the probe's read-first missed too
    assert [i for i, hoped in enumerate(tries) if hoped] == [_HOPE_PROBE - 1, 2 * _HOPE_PROBE - 1, 3 * _HOPE_PROBE - 1]
    pool.misses = 0  # a probe's read-first found its answer
    assert pool.hopeful()


async def test_connect_refused_is_connect_failed() -> None:
    """Nothing listening: ConnectFailed naming the origin."""
    with trio.socket.socket() as probe:
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        client = HttpClient()
        with pytest.raises(ConnectFailed, match=f"connecting to http://127.0.0.1:{port} failed"):
            await fetch(client, f"http://127.0.0.1:{port}/mcp")
        client.close()


# ---------------------------------------------------------------------- TLS


# The certificate authority and the server's TLS context: fixtures ca, server_tls, ca_file (tests/conftest.py).


async def test_https_verifies_with_ssl_cert_file(
    server_tls: ssl.SSLContext, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """https:// with SSL_CERT_FILE naming the CA: the handshake verifies, ALPN is http/1.1, keep-alive works."""
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    async with serve(keep_answering(lambda r: answer(b"secure")), tls=server_tls) as server:
        client = HttpClient()
        assert (await fetch(client, server.url))[1] == b"secure"
        assert (await fetch(client, server.url))[1] == b"secure"
        assert server.accepts == 1
        assert client.ssl_context().verify_mode is ssl.CERT_REQUIRED
        client.close()


async def test_https_with_an_untrusted_certificate_fails_clearly(
    server_tls: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate no trusted CA signed: ConnectFailed saying the TLS handshake failed and why."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with serve(keep_answering(lambda r: answer(b"")), tls=server_tls) as server:
        client = HttpClient()
        with pytest.raises(ConnectFailed, match=r"TLS handshake with https://127\.0\.0\.1:\d+ failed: .*certificate"):
            await fetch(client, server.url)
        client.close()


# ---------------------------------------------------------------------- proxies


@attrs.define(eq=False)
class ProxySeen:
    """What the test proxy was asked: request lines (absolute form) and CONNECT targets."""

    lines: list[str] = attrs.field(factory=list)
    authorization: list[str] = attrs.field(factory=list)


async def _pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await sink.send_eof() if isinstance(sink, trio.SocketStream) else None


def proxy_handler(seen: ProxySeen) -> Handler:
    """A forwarding proxy: absolute-form requests are forwarded in origin form, one by one; CONNECT opens a tunnel."""

    async def handler(peer: Peer, server: Server) -> None:
        request = await peer.read_request()
        if request is None:
            return
        method, target, _ = request.line.split(" ")
        if method == "CONNECT":
            seen.lines.append(request.line)
            seen.authorization.append(request.headers.get("proxy-authorization", ""))
            host, _, port = target.rpartition(":")
            upstream = await trio.open_tcp_stream(host, int(port))
            await peer.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
            async with upstream, trio.open_nursery() as nursery:
                if peer.buffer:
                    await upstream.send_all(bytes(peer.buffer))
                nursery.start_soon(_pipe, peer.stream, upstream)
                await _pipe(upstream, peer.stream)
                nursery.cancel_scope.cancel()
            return
        url = Url.parse(target)
        async with await trio.open_tcp_stream(url.host, url.port) as upstream:
            origin = Peer(upstream)
            while request is not None:
                seen.lines.append(request.line)
                seen.authorization.append(request.headers.get("proxy-authorization", ""))
                method, target, _ = request.line.split(" ")
                head = [f"{method} {Url.parse(target).target} HTTP/1.1"]
                head += [f"{k}: {v}" for k, v in request.headers.items() if k != "proxy-authorization"]
                await origin.send(("\r\n".join(head) + "\r\n\r\n").encode() + request.body)
                await peer.send(await origin.read_response())
                request = await peer.read_request()

    return handler


def clear_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


async def test_http_through_the_environment_proxy_in_absolute_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY: the request goes to the proxy in absolute form, with Proxy-Authorization from its user info."""
    clear_proxies(monkeypatch)
    seen = ProxySeen()
    async with serve(keep_answering(lambda r: answer(b"via proxy", "Connection: close"))) as origin:
        async with serve(proxy_handler(seen)) as proxy:
            monkeypatch.setenv(
                "HTTP_PROXY", proxy.url.replace("http://", "http://us%40er:p%3Ass@").removesuffix("/mcp")
            )
            client = HttpClient()
            assert (await fetch(client, origin.url))[1] == b"via proxy"
            client.close()
    assert seen.lines == [f"POST {origin.url} HTTP/1.1"]
    assert seen.authorization == ["Basic dXNAZXI6cDpzcw=="]  # base64("us@er:p:ss")
    assert origin.requests[0].line == "POST /mcp HTTP/1.1"


async def test_https_through_the_environment_proxy_with_connect(
    server_tls: ssl.SSLContext, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTPS_PROXY: a CONNECT tunnel to the origin, then TLS through it (verified with SSL_CERT_FILE)."""
    clear_proxies(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    seen = ProxySeen()
    async with serve(keep_answering(lambda r: answer(b"tunnelled")), tls=server_tls) as origin:
        async with serve(proxy_handler(seen)) as proxy:
            monkeypatch.setenv("HTTPS_PROXY", proxy.url.removesuffix("/mcp"))
            client = HttpClient()
            assert (await fetch(client, origin.url))[1] == b"tunnelled"
            assert (await fetch(client, origin.url))[1] == b"tunnelled"
            client.close()
    authority = origin.url.removeprefix("https://").removesuffix("/mcp")
    assert seen.lines == [f"CONNECT {authority} HTTP/1.1"]  # one tunnel, kept alive for both requests
    assert origin.accepts == 1


async def test_no_proxy_bypasses_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_PROXY naming the host: the request goes straight to the origin; the proxy sees nothing."""
    clear_proxies(monkeypatch)
    seen = ProxySeen()
    async with serve(keep_answering(lambda r: answer(b"direct"))) as origin, serve(proxy_handler(seen)) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/mcp"))
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        client = HttpClient()
        assert (await fetch(client, origin.url))[1] == b"direct"
        client.close()
        assert seen.lines == [] and proxy.accepts == 0


async def test_a_proxy_refusing_the_tunnel_is_connect_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy answering CONNECT with 407: ConnectFailed naming the proxy and its answer."""
    clear_proxies(monkeypatch)

    async def refuse(peer: Peer, server: Server) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")

    async with serve(refuse) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.removesuffix("/mcp"))
        client = HttpClient()
        with pytest.raises(
            ConnectFailed, match=r"refused the tunnel to https://127\.0\.0\.1:1: HTTP 407 Proxy Authentication Required"
        ):
            await fetch(client, "https://127.0.0.1:1/mcp")
        client.close()


async def test_connect_timeout_is_typed(mock_clock: trio.testing.MockClock) -> None:
    """A server that accepts but never completes the TLS handshake: HttpTimeout (phase connect) at the bound."""
    mock_clock.autojump_threshold = 0.1  # real seconds of idleness: the loopback connect itself is never cut short
    hold = trio.Event()

    async def silent(peer: Peer, server: Server) -> None:
        await hold.wait()

    async with serve(silent) as server:
        client = HttpClient(connect_timeout=12.0)
        start = trio.current_time()
        with pytest.raises(HttpTimeout, match=r"connecting to https://127\.0\.0\.1:\d+ took longer than 12 s") as info:
            await client.send("GET", Url.parse(server.url.replace("http://", "https://")))
        assert info.value.phase == "connect"
        assert trio.current_time() - start == pytest.approx(12.0)
        hold.set()
        client.close()
