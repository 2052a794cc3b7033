"""Legacy SSE (the 2024-11-05 HTTP+SSE transport) on our own HTTP/1.1 client.

The client GETs the SSE URL and keeps that stream open; the server's first event,
``endpoint``, names the URL to POST messages to, and every message from the server comes
back as a ``message`` event on the stream. The SDK's ``sse_client`` does this on httpx;
this module does it on :mod:`mcp_actors._wire.http.http11` (through the transport's
watched, authorized sender), for three rules the SDK's cannot keep:

* **One message limit.** Every event is bounded by ``max_message_bytes``, as on stdio and
  streamable HTTP (the SDK's event source stops at 1 MiB, and its error never reaches the
  caller). An event over it ends the connection (the stream is the connection: a message
  cut off leaves it unusable) with that reason, named in the error every caller gets.
* **The endpoint stays on the origin.** An ``endpoint`` event naming another origin
  (scheme, host, port) is refused at once with the reason; nothing is sent there, so the
  record's credentials never leave for it.
* **Errors we can show.** Failures are our HTTP layer's, whose messages name the origin
  only: no URL with its password or query, and no request object, is reachable from them.

A POST answered with an error status fails that request at once with a JSON-RPC error
naming the status (the SDK's writer stopped, leaving every later request unanswered);
401/403, a redirect off the origin and network failures are the watch's deaths.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final

import attrs
import trio

from mcp_actors._wire.codec import encode
from mcp_actors._wire.http.http11 import BodyTooLarge, HttpError, HttpTimeout, InvalidRequest, Response, Url
from mcp_actors._wire.http.wire import HttpSender, SseParser, redirect_within_origin

__all__ = ["LegacySse", "SseRefused"]

logger = logging.getLogger("mcp_actors._wire.transports")

_MAX_REDIRECTS: Final = 5
_SMALL_BODY: Final = 64 * 1024
"""Largest body of a POST's answer read (the message's answer comes on the stream; this is ``Accepted``)."""


class SseRefused(Exception):
    """The SSE stream cannot be used (no endpoint, another origin, not an event stream); the message says why."""


@attrs.define(eq=False)
class LegacySse:
    """One legacy SSE connection: its GET stream, and the endpoint it POSTs to.

    Attributes:
        client: The transport's sender (our HTTP/1.1 client, watched, authorized).
        url: The SSE URL.
        max_message_bytes: Largest event accepted on the stream.
        post_timeout: Bound for one POST, in seconds.
        endpoint: Where messages go, once the ``endpoint`` event named it (on ``url``'s origin).
    """

    client: HttpSender = attrs.field(repr=False)
    url: Url = attrs.field(repr=False)
    max_message_bytes: int
    post_timeout: float = 30.0
    endpoint: Url | None = attrs.field(default=None, repr=False)
    _response: Response | None = attrs.field(default=None, repr=False)
    _chunks: AsyncGenerator[bytes] | None = attrs.field(default=None, repr=False)
    _parser: SseParser | None = attrs.field(default=None, repr=False)
    _early: list[tuple[str, bytes]] = attrs.field(factory=list, repr=False)

    async def connect(self) -> None:
        """Open the stream (following redirects within the origin) and read it up to the ``endpoint`` event.

        Raises:
            SseRefused: Not a 200 event stream, no endpoint before the stream ended, or an
                endpoint on another origin.
            SseTooLarge: An event outgrew ``max_message_bytes``.
            HttpError: The network failed (the watch has the reason).
        """
        headers = {"accept": "text/event-stream", "cache-control": "no-store"}
        url = self.url
        response = await self.client.send("GET", url, headers)
        for _ in range(_MAX_REDIRECTS):
            following = redirect_within_origin("GET", url, response.status, response.headers.get("location"))
            if following is None:
                break
            response.close()
            url = following
            response = await self.client.send("GET", url, headers)
        self._response = response
        kind = response.headers.get("content-type").partition(";")[0].strip().lower()
        if response.status != 200 or kind != "text/event-stream":
            raise SseRefused(
                f"the SSE GET was answered HTTP {response.status} {response.reason}".rstrip()
                + ("" if kind == "text/event-stream" else f" with content type {kind or 'none'!r}, not an event stream")
            )
        self._chunks = response.aiter_bytes()
        self._parser = parser = SseParser(self.max_message_bytes)
        async for chunk in self._chunks:
            events = parser.feed(chunk)
            for index, (event, data) in enumerate(events):
                if event == "endpoint":
                    self.endpoint = self._endpoint(data)
                    self._early = events[index + 1 :]
                    return
        raise SseRefused("the server ended the SSE stream before its endpoint event")

    def _endpoint(self, data: bytes) -> Url:
        text = data.decode("utf-8", "replace").strip()
        try:
            endpoint = self.url.join(text)
        except InvalidRequest:
            raise SseRefused("the SSE endpoint event does not name a usable http(s) URL") from None
        if endpoint.origin != self.url.origin:
            raise SseRefused(
                f"the SSE endpoint event names another origin, {endpoint.shown()}, than the server's"
                f" {self.url.shown()}; refused (nothing is sent there, credentials included)"
            )
        return endpoint

    async def events(self) -> AsyncGenerator[tuple[str, bytes]]:
        """The stream's events after the endpoint, until the server ends it.

        Raises:
            SseTooLarge: An event outgrew ``max_message_bytes``.
            HttpError: The stream failed (silence: :class:`HttpTimeout`).
        """
        assert self._chunks is not None and self._parser is not None
        for item in self._early:
            yield item
        self._early = []
        async for chunk in self._chunks:
            for item in self._parser.feed(chunk):
                yield item
        for item in self._parser.close():
            yield item

    def broke(self, exc: HttpError) -> None:
        """Tell the watch the stream failed under us (it judges whether that is a death)."""
        if self._response is not None:
            self.client.broke(self._response, exc)

    async def aclose(self) -> None:
        """Close the stream (never waits: the body's reader has nothing to await when it ends)."""
        chunks, self._chunks = self._chunks, None
        if chunks is not None:
            await chunks.aclose()
        if self._response is not None:
            self._response.close()

    async def post(self, message: Mapping[str, Any]) -> str | None:
        """POST one message to the endpoint; None once accepted, else what went wrong (for a request's error reply).

        Raises:
            HttpError: The network failed (the watch kills the link).
        """
        assert self.endpoint is not None
        body = encode(message)
        headers = {"content-type": "application/json"}
        url = self.endpoint
        with trio.move_on_after(self.post_timeout):
            try:
                response = await self.client.send("POST", url, headers, body)
                for _ in range(_MAX_REDIRECTS):
                    following = redirect_within_origin("POST", url, response.status, response.headers.get("location"))
                    if following is None:
                        break
                    response.close()
                    url = following
                    response = await self.client.send("POST", url, headers, body)
            except HttpTimeout as exc:
                return f"the HTTP request timed out ({exc.phase})"
            try:
                with contextlib.suppress(BodyTooLarge):  # a large one costs its connection only
                    await response.aread(_SMALL_BODY)
            except HttpError:
                pass  # the message was answered already (its status); the body does not matter
            finally:
                response.close()
            if response.status >= 300:
                return f"the server answered HTTP {response.status} {response.reason}".rstrip()
            return None
        return f"the HTTP request took longer than {self.post_timeout:g} s"
