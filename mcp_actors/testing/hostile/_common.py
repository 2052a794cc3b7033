"""What every hostile server shares: serving loopback for a block, reading one request."""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import trio

_MAX_HEAD = 64 * 1024
_MAX_BODY = 1024 * 1024


async def read_request(stream: trio.abc.Stream, buffer: bytearray) -> tuple[str, str, dict[str, str], bytes] | None:
    """One request from ``stream`` (what is left over stays in ``buffer``): method, target, headers, body.

    None when the client closed the connection (or sent something too large to be a request of ours).
    """
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if len(buffer) > _MAX_HEAD:
            return None
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    method, target, _ = [*head[0].split(" "), "", ""][:3]
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length > _MAX_BODY:
        return None
    while len(buffer) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    body = bytes(buffer[:length])
    del buffer[:length]
    return method, target, headers, body


@contextlib.asynccontextmanager
async def serve_loopback(
    handler: Callable[[trio.abc.Stream], Awaitable[None]], *, tls: ssl.SSLContext | None = None
) -> AsyncIterator[int]:
    """Run ``handler`` for every connection to 127.0.0.1 on a free port (TLS with ``tls``); yield the port.

    A client that goes away (reset, closed, a refused TLS handshake) ends its handler quietly.
    """

    async def on_connection(tcp: trio.SocketStream) -> None:
        stream: trio.abc.Stream = tcp if tls is None else trio.SSLStream(tcp, tls, server_side=True)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            try:
                await handler(stream)
            finally:
                await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, on_connection, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()
