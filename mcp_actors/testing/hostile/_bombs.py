"""Streamable-HTTP answers that try to exhaust a client's memory, each bounded on our side.

A bomb answers every POST (a GET gets 405: no stream) with a body a client must refuse at
its message limit, before holding it; with ``session=True`` it first plays a well-behaved
server for the handshake (a session id, 202 for notifications) and then answers the GET
stream with the bomb (an SSE bomb) as well as every other POST. The server counts the body bytes it wrote
(:attr:`BombServer.sent`): a client that stops reading leaves that count near its limit
(plus what the sockets buffer), one that does not runs into the server's cap.
"""

from __future__ import annotations

import contextlib
import enum
import json
import ssl
import zlib
from collections.abc import AsyncIterator, Iterator

import attrs
import trio

from mcp_actors.testing.hostile._common import read_request, serve_loopback

_BLOCK = 64 * 1024
_PAD = b"x" * _BLOCK


class Bomb(enum.StrEnum):
    """What the answer to every POST is."""

    ENDLESS_CHUNKED = "endless-chunked"
    """``application/json``, chunked, a string value whose chunks never end."""
    ENDLESS_TO_CLOSE = "endless-to-close"
    """``application/json``, no length nor chunks: the body runs to a connection end that never comes."""
    HUGE_LENGTH = "huge-content-length"
    """``application/json`` announcing a terabyte (``Content-Length``), then bytes that never end."""
    GZIP_JSON = "gzip-json"
    """``application/json``, ``content-encoding: gzip``: a few KiB that inflate to :attr:`BombServer.inflated` bytes."""
    DEFLATE_JSON = "deflate-json"
    """As :attr:`GZIP_JSON` in ``deflate`` (zlib-wrapped)."""
    GZIP_SSE = "gzip-sse"
    """``text/event-stream``, gzip: one ``data`` line that inflates to :attr:`BombServer.inflated` bytes."""
    ENDLESS_SSE_EVENT = "endless-sse-event"
    """``text/event-stream``, chunked: one ``data`` line that never ends."""


@attrs.define(eq=False)
class BombServer:
    """A running bomb server.

    Attributes:
        url: Its MCP endpoint (``http://127.0.0.1:PORT/mcp``).
        bomb: What it answers.
        cap: Body bytes it writes at most per answer, endless or not (the safety bound).
        inflated: Bytes a compressed bomb inflates to.
        sent: Body bytes written so far (compressed bytes for the compressed bombs).
        capped: Whether an answer ran into :attr:`cap` (the client never stopped reading).
        answered: Set once an answer ended: the client went away, or the cap was reached.
    """

    url: str
    bomb: Bomb
    cap: int
    inflated: int
    session: bool = False
    sent: int = 0
    capped: bool = False
    answered: trio.Event = attrs.field(factory=trio.Event)


def _endless(prefix: bytes) -> Iterator[bytes]:
    yield prefix
    while True:
        yield _PAD


def _compressed(prefix: bytes, size: int, wbits: int) -> bytes:
    """``prefix`` then ``size`` bytes of padding, compressed (gzip: wbits 31; zlib: 15)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    parts = [packer.compress(prefix)]
    for _ in range(size // _BLOCK):
        parts.append(packer.compress(_PAD))
    parts.append(packer.flush())
    return b"".join(parts)


def _prefix(body: bytes, sse: bool) -> bytes:
    try:
        rpc_id = json.loads(body).get("id")
    except (ValueError, AttributeError):
        rpc_id = None
    start = b'{"jsonrpc":"2.0","id":' + json.dumps(rpc_id).encode() + b',"result":{"text":"'
    return b"event: message\ndata: " + start if sse else start


async def _write_capped(stream: trio.abc.Stream, server: BombServer, parts: Iterator[bytes], *, chunked: bool) -> None:
    written = 0
    for part in parts:
        if written >= server.cap:
            server.capped = True
            return
        data = f"{len(part):x}\r\n".encode() + part + b"\r\n" if chunked else part
        await stream.send_all(data)
        written += len(part)
        server.sent += len(part)
    if chunked:
        await stream.send_all(b"0\r\n\r\n")


async def _answer(stream: trio.abc.Stream, server: BombServer, body: bytes) -> None:
    bomb = server.bomb
    sse = bomb in (Bomb.GZIP_SSE, Bomb.ENDLESS_SSE_EVENT)
    kind = "text/event-stream" if sse else "application/json"
    prefix = _prefix(body, sse)
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\n"
    if bomb in (Bomb.GZIP_JSON, Bomb.DEFLATE_JSON, Bomb.GZIP_SSE):
        packed = _compressed(prefix, server.inflated, 15 if bomb is Bomb.DEFLATE_JSON else 31)
        encoding = "deflate" if bomb is Bomb.DEFLATE_JSON else "gzip"
        head += f"Content-Encoding: {encoding}\r\nContent-Length: {len(packed)}\r\n\r\n"
        await stream.send_all(head.encode())
        await _write_capped(stream, server, iter([packed]), chunked=False)
    elif bomb is Bomb.HUGE_LENGTH:
        await stream.send_all(f"{head}Content-Length: {1 << 40}\r\n\r\n".encode())
        await _write_capped(stream, server, _endless(prefix), chunked=False)
    elif bomb is Bomb.ENDLESS_TO_CLOSE:
        await stream.send_all(f"{head}Connection: close\r\n\r\n".encode())
        await _write_capped(stream, server, _endless(prefix), chunked=False)
    else:  # ENDLESS_CHUNKED, ENDLESS_SSE_EVENT
        await stream.send_all(f"{head}Transfer-Encoding: chunked\r\n\r\n".encode())
        await _write_capped(stream, server, _endless(prefix), chunked=True)


_SESSION = "hostile-session"


def _handshake(body: bytes) -> bytes | None:
    """A well-behaved answer to ``initialize`` or a notification; None for anything else."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    if "id" not in message:
        return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    if message.get("method") != "initialize":
        return None
    result = {
        "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-11-25"),
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "hostile-bomb", "version": "0"},
    }
    data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: {_SESSION}\r\n"
    return f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data


@contextlib.asynccontextmanager
async def serve_bomb(
    bomb: Bomb | str, *, cap: int = 64 * 1024 * 1024, inflated: int = 32 * 1024 * 1024, session: bool = False
) -> AsyncIterator[BombServer]:
    """Serve ``bomb`` to every POST on 127.0.0.1 for the length of the block.

    Args:
        bomb: What to answer (a :class:`Bomb` or its value).
        cap: Body bytes written at most per answer (keep it far above the client's limit).
        inflated: What a compressed bomb inflates to.
        session: Answer the handshake well (with a session id) and the GET stream with the
            bomb (an SSE one: :attr:`Bomb.GZIP_SSE`, :attr:`Bomb.ENDLESS_SSE_EVENT`).
    """
    server = BombServer(url="", bomb=Bomb(bomb), cap=cap, inflated=inflated, session=session)
    sse = server.bomb in (Bomb.GZIP_SSE, Bomb.ENDLESS_SSE_EVENT)

    async def handle(stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while (request := await read_request(stream, buffer)) is not None:
            method, _, _, body = request
            if method == "POST" and session and (answer := _handshake(body)) is not None:
                await stream.send_all(answer)
                continue
            if method != "POST" and not (method == "GET" and session and sse):
                await stream.send_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                continue
            try:
                await _answer(stream, server, body)
            finally:
                server.answered.set()
            return  # one answer per connection: the client closed it, or it is cut off at the cap

    async with serve_loopback(handle) as port:
        server.url = f"http://127.0.0.1:{port}/mcp"
        yield server


@contextlib.asynccontextmanager
async def serve_status(
    status: str, *, headers: dict[str, str] | None = None, tls: ssl.SSLContext | None = None
) -> AsyncIterator[str]:
    """Answer every request with ``status`` (``"401 Unauthorized"``) and a short text body; yield the URL.

    With ``tls``, over TLS (``https://``) with that server context.
    """
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    payload = b"refused"
    answer = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(payload)}\r\n{extra}\r\n"
    ).encode() + payload

    async def handle(stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while await read_request(stream, buffer) is not None:
            await stream.send_all(answer)

    async with serve_loopback(handle, tls=tls) as port:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}/mcp"
