"""One POSTed request's answer over HTTP: JSON, or an event stream opened by the first message before it.

Why lazy: most requests say nothing before their answer, and a JSON answer is the cheapest
for both sides; but a call may have to tell its client something first (progress, a server's
log message) or ask it something (an upstream's sampling, elicitation or roots request, at
the 2025 revisions). The first such message turns the answer into ``text/event-stream`` (when
the client accepts it): the head goes out, every message follows as an event, the answer is
the last event. Messages come from other tasks (the runtime's progress and request handlers,
the log relay): they are queued and written by one writer task at a time, started in the
front's nursery, so no producer waits on a slow client and two writes never interleave.
Notifications past :data:`MAX_QUEUED` are dropped (progress and logs are advisory); requests
to the client never are.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, Final

import attrs
import trio

from mcp_actors._wire.codec import encode
from mcp_actors.serve._http import HttpConnection

__all__ = ["MAX_QUEUED", "ResponseStream"]

MAX_QUEUED: Final = 64
"""Notifications queued for a slow client before more are dropped."""
_SSE_HEADERS: Final = (("content-type", "text/event-stream"), ("cache-control", "no-cache, no-transform"))
_JSON: Final = (("content-type", "application/json"),)


def sse(message: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``message``."""
    return b"event: message\ndata: " + encode(message) + b"\n\n"


@attrs.define(eq=False)
class ResponseStream:
    """The answer to one request on ``conn``: JSON unless a message comes first, then events.

    Args:
        conn: The request's connection.
        headers: Extra response headers (``Mcp-Session-Id``).
        nursery: Where the writer task runs (the front's).
        on_broken: Called when the client is gone mid-stream (the request is cancelled).
    """

    conn: HttpConnection
    headers: tuple[tuple[str, str], ...]
    nursery: trio.Nursery
    on_broken: Callable[[], None]
    started: bool = False
    _queue: collections.deque[bytes] = attrs.field(factory=collections.deque)
    _writing: bool = False
    _idle: trio.Event = attrs.field(factory=trio.Event)
    _closed: bool = False

    def notify(self, message: dict[str, Any]) -> None:
        """Queue a notification (dropped when :data:`MAX_QUEUED` wait, or the answer went out)."""
        if len(self._queue) < MAX_QUEUED:
            self._push(sse(message))

    async def send(self, message: dict[str, Any]) -> None:
        """Queue a message that must not be dropped (a request to the client).

        Raises:
            trio.BrokenResourceError: The answer went out already, or the client is gone.
        """
        if self._closed:
            raise trio.BrokenResourceError("the request was answered: its stream is closed")
        self._push(sse(message))

    def _push(self, event: bytes) -> None:
        if self._closed:
            return
        self._queue.append(event)
        if not self._writing:
            self._writing = True
            self._idle = trio.Event()
            self.nursery.start_soon(self._write)

    async def _write(self) -> None:
        try:
            while self._queue:
                if not self.started:
                    self.started = True
                    await self.conn.start_stream(200, (*_SSE_HEADERS, *self.headers))
                await self.conn.send_chunk(self._queue.popleft())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._closed = True
            self._queue.clear()
            self.on_broken()
        finally:
            self._writing = False
            self._idle.set()

    async def finish(self, status: int, answer: dict[str, Any]) -> None:
        """Write the answer: the last event of a started stream, else one JSON response with ``status``."""
        self._closed = True
        if self._writing:
            await self._idle.wait()
        if self.conn.closed:
            return
        if self.started:
            await self.conn.end_stream(sse(answer))
        else:
            await self.conn.respond(status, (*_JSON, *self.headers), encode(answer))
