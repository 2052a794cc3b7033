"""SSE and streamable HTTP, with death and HTTP status seen by us.

The SDK's HTTP client transports absorb failures: a server killed mid-call ends the
call's response stream, and the SDK answers that one request "connection closed" and
carries on, so nothing tells the session the server is gone until the next request
fails; a 401, a redirect or a 500 becomes "Server returned an error response" or a
closed stream. Both our transports report every request, response status and
response-body failure to one watch (:class:`_HttpWatch`), which:

* kills the link at once (``link.die(reason)``) when the network fails under a request
  or a response stream (connection refused or reset, peer closed mid-body, a TLS
  handshake refused), when the server wants authorization (401/403), when it redirects
  somewhere we do not follow, when it forgot our session (404 with a session id), and
  when it answers the handshake with any error status;
* leaves a request's other error statuses (500 on one call) to the transport, which names
  the status in that request's JSON-RPC error instead of the SDK's generic text.

Read timeouts are not deaths: a quiet GET stream times out and is reopened.

**Streamable HTTP** does not use the SDK's transport nor httpx: the link carries an
:class:`~mcp_actors._wire.http.wire.HttpWire` (``link.wire``) for our dispatcher, on our own
HTTP/1.1 client (:mod:`mcp_actors._wire.http.http11`) wrapped by :class:`_WatchedHttp` (the watch,
the record's headers, and the OAuth flow of :class:`~mcp_actors._auth.oauth.ServerAuth` driven
request by request when the server has OAuth); it has no SDK streams.
**SSE** (legacy) runs on the same watched client too (:mod:`mcp_actors._wire.http.sse`: the
GET stream, bounded by ``max_message_bytes``; POSTs only to an endpoint on the URL's origin),
its messages on the link's SDK streams. Only the OAuth side requests to the authorization
server use httpx. An error raised here is built outside the handler of the HTTP failure it
reports: no exception of the HTTP layer (and no URL with its credentials) is chained to it.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs
import httpx2
import mcp.types as mcp_types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from mcp_actors._config.record import ServerType
from mcp_actors._config.redact import install_log_filter, redact_text, redact_url
from mcp_actors._config.variables import expand
from mcp_actors._wire.codec import decode
from mcp_actors._wire.http.http11 import (
    BodyTooLarge,
    DecodingError,
    HttpClient,
    HttpError,
    HttpTimeout,
    InvalidRequest,
    NetworkError,
    ProtocolError,
    Response,
    Url,
)
from mcp_actors._wire.http.sse import LegacySse, SseRefused
from mcp_actors._wire.http.wire import HttpWire, SseTooLarge, _status_text, redirect_within_origin
from mcp_actors._wire.link import STREAM_BUFFER, TransportLink, logger
from mcp_actors.errors import (
    InvalidServerConfig,
    McpActorsError,
    ServerMessageTooLarge,
    ServerMisconfigured,
    ServerProtocolError,
    ServerStartFailed,
    UnresolvedPlaceholder,
)

if TYPE_CHECKING:
    from mcp_actors._auth.oauth import OAuthTarget, ServerAuth
    from mcp_actors._config.record import McpServerRecord

__all__ = ["HttpParams", "open_http_transport"]

_SESSION_HEADER: Final = "mcp-session-id"
_CHALLENGE_BYTES: Final = 64 * 1024
"""Largest body of a 401/403 challenge read (to reuse its connection, and for the OAuth flow)."""


@attrs.frozen(kw_only=True)
class HttpParams:
    """How to reach an SSE or streamable HTTP server.

    Attributes:
        url: The endpoint (``.../sse`` for SSE, ``.../mcp`` for streamable HTTP, usually).
            Shown redacted (no user info, no query) in reprs and messages.
        kind: :attr:`ServerType.SSE` or :attr:`ServerType.HTTP` (streamable HTTP); the
            strings ``"sse"`` and ``"http"`` are accepted.
        headers: Sent with every request (values are secrets).
        connect_timeout: Bound for connecting and for each HTTP write, in seconds.
        read_timeout: Bound for silence on a long-lived stream, in seconds.
        max_message_bytes: Largest single message accepted from the server, as for stdio:
            a JSON answer (announced or arriving, decoded), an SSE event (streamable HTTP's
            streams, legacy SSE's stream). Refused as it crosses the limit, before it is
            held (:class:`~mcp_actors.errors.ServerMessageTooLarge`). The SDK's own SSE
            limit (1 MiB) would fail every larger tool result.
        oauth: Who the server is for OAuth (its tokens' key, ``config.oauth``), or None for no
            OAuth; the token store and the login handler come from the runtime
            (:func:`mcp_actors._auth.oauth.current_auth_settings`) when the transport opens.
    """

    url: str = attrs.field(repr=lambda url: repr(redact_url(url)))
    kind: ServerType = attrs.field(
        default=ServerType.HTTP,
        converter=ServerType,
        validator=attrs.validators.in_((ServerType.SSE, ServerType.HTTP)),
    )
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=lambda h: repr(sorted(h)))
    connect_timeout: float = 30.0
    read_timeout: float = 300.0
    max_message_bytes: int = 256 * 1024 * 1024
    oauth: OAuthTarget | None = None
    substituted: tuple[str, ...] = attrs.field(default=(), repr=False)
    """Values ``${...}`` placeholders were replaced with (set by :meth:`resolved`): secrets."""

    @classmethod
    def from_record(cls, record: McpServerRecord) -> HttpParams:
        """The params a validated ``sse`` or ``http`` record implies."""
        config = record.config
        if config.url is None:
            raise InvalidServerConfig(
                f"server {record.name!r} has no url; set config.url", server=record.name, field="url"
            )
        from mcp_actors._auth.oauth import oauth_target_for

        return cls(
            url=config.url,
            kind=record.type,
            headers=dict(config.headers),
            connect_timeout=config.connect_timeout,
            oauth=oauth_target_for(record),
        )

    def open(self, *, label: str) -> contextlib.AbstractAsyncContextManager[TransportLink]:
        """Connect to the server (see :func:`open_http_transport`)."""
        return open_http_transport(self, label=label)

    def resolved(self, *, label: str) -> HttpParams:
        """These params with the placeholders of ``url`` and ``headers`` expanded (see ``_config.variables``).

        Raises:
            UnresolvedPlaceholder: A placeholder has no value (names it and the field).
        """
        used: list[str] = []
        url, values = expand(self.url, field="config.url", server=label)
        used += values
        headers: dict[str, str] = {}
        for key, value in self.headers.items():
            headers[key], values = expand(value, field=f"config.headers.{key}", server=label)
            used += values
        return attrs.evolve(self, url=url, headers=headers, substituted=(*self.substituted, *used))

    def secret_values(self) -> tuple[str, ...]:
        """Header values, the URL's credentials, the OAuth client secret, and values substituted into them."""
        from urllib.parse import parse_qsl, urlsplit

        # Best effort, field by field: one placeholder without a value (the open that follows
        # fails on it) must not hide the values the others expand to.
        values = [*self.headers.values(), *self.substituted]
        if self.oauth is not None:
            values += self.oauth.config.secret_values()
        url = self.url
        for field, text in [("config.url", self.url), *((f"config.headers.{k}", v) for k, v in self.headers.items())]:
            with contextlib.suppress(UnresolvedPlaceholder):
                expanded, used = expand(text, field=field, server="-")
                if field == "config.url":
                    # The URL itself is not a secret (errors name it, redacted): only what was
                    # substituted into it, plus its credentials and query values below.
                    values += used
                    url = expanded
                elif used:
                    values += [expanded, *used]
        with contextlib.suppress(ValueError):
            parts = urlsplit(url)
            values += [v for v in (parts.username, parts.password) if v]
            values += [v for _, v in parse_qsl(parts.query)]
        return tuple(dict.fromkeys(values))


def _rpc_of(method: str, content: bytes | None) -> tuple[Any, str | None]:
    """The JSON-RPC id and method a POST's body carries, or ``(None, None)``."""
    if method != "POST" or not content:
        return None, None
    try:
        body = decode(content)
    except (ValueError, TypeError):
        return None, None
    if not isinstance(body, dict):
        return None, None
    name = body.get("method")
    return body.get("id"), name if isinstance(name, str) else None


@attrs.define(eq=False)
class _HttpWatch:
    """What our HTTP client saw, and the link it kills when the server is gone.

    ``pending`` is a death reason seen before the link existed (the SSE stream is opened
    before there is a link).
    """

    label: str
    secrets: tuple[str, ...]
    # Streamable HTTP's GET stream is optional (a 405 or a redirect just means none);
    # SSE's GET stream is the connection itself.
    optional_get: bool = True
    link: TransportLink | None = None
    pending: str | None = None

    def attach(self, link: TransportLink) -> None:
        self.link = link
        if self.pending is not None:
            link.die(self.pending)

    def die(self, reason: str) -> None:
        reason = redact_text(reason, self.secrets)
        if self.link is not None:
            self.link.die(reason)
        elif self.pending is None:
            self.pending = reason

    def failed(self, method: str, url: str, exc: Exception, *, streaming: bool) -> None:
        """The network failed under a request (or, ``streaming``, under its response body): a death.

        Timeouts are not: silence on a stream is not death (quiet streams are reopened).
        """
        if isinstance(exc, HttpTimeout):
            return
        where = "the HTTP response stream broke" if streaming else "the HTTP connection failed"
        detail = str(exc) or "no detail"
        self.die(f"{where} ({method} {redact_url(url)}): {type(exc).__name__}: {detail}")

    def answered(
        self,
        method: str,
        headers: Mapping[str, str],
        content: bytes | None,
        code: int,
        reason: str,
        *,
        location: str,
        followed: bool,
    ) -> None:
        """Judge one final answer: a death for the statuses that mean the server is gone for us.

        Args:
            method: The request's method.
            headers: The request's headers (the session header is looked for, any case).
            content: The request's body (a POST's JSON-RPC id and method are read from it).
            code: The status code; ``reason``: its phrase.
            location: The ``Location`` header (redirects).
            followed: Whether the transport follows this redirect (it stays within the origin).
        """
        if code < 300 or method == "DELETE":
            return
        status = f"HTTP {code} {reason}".rstrip()
        request_method = method
        _, method_name = _rpc_of(method, content)
        if code in (401, 403):
            need = "authorization is needed" if code == 401 else "the credentials were refused"
            self.die(
                f"the server answered {status}: {need}; put the credentials in config.headers"
                " (an Authorization header, for example)"
            )
        elif request_method == "GET" and self.optional_get:
            return  # streamable HTTP's GET stream is optional: the SDK carries on without it
        elif 300 <= code < 400:
            if not followed:
                self.die(
                    f"the server answered {status}, a redirect to {redact_url(location)!r} that is not followed;"
                    " set config.url to that address if it is the intended server"
                )
        elif request_method == "GET":
            self.die(f"the server answered the SSE stream's GET with {status}")
        elif request_method != "POST":
            return
        elif code == 404 and any(key.lower() == _SESSION_HEADER for key in headers):
            self.die(f"the server answered {status}: it no longer knows this session (did it restart?)")
        elif method_name == "initialize":
            self.die(f"the server answered the MCP handshake with {status}")


@attrs.define(eq=False)
class _WatchedHttp:
    """The wire's :class:`~mcp_actors._wire.http.wire.HttpSender`: our HTTP/1.1 client, watched and authorized.

    Every final answer goes to the watch (its statuses), every network failure too (a
    death); with OAuth, the ``ServerAuth`` flow is driven here, request by request, and
    only its final answer is judged (a 401 it answers with a fresh token is not a death).
    """

    http: HttpClient
    watch: _HttpWatch
    auth: ServerAuth | None = None

    async def send(
        self, method: str, url: Url, headers: Mapping[str, str], body: bytes = b"", *, bound: float | None = None
    ) -> Response:
        """Send (through the OAuth flow when there is one); tell the watch what happened.

        ``bound`` goes to the HTTP client with the request sent here (not to the flow's own).
        """
        try:
            auth = self.auth
            if auth is None:
                response = await self.http.send(method, url, headers, body, bound=bound)
            else:
                response = await self._send_with_auth(auth, method, url, headers, body, bound=bound)
        except (NetworkError, ProtocolError) as exc:
            self.watch.failed(method, str(url), exc, streaming=False)
            raise
        code = response.status
        if logger.isEnabledFor(logging.DEBUG):  # httpx's request line, at DEBUG (it is one per call)
            shown = redact_text(redact_url(str(url)), self.watch.secrets)
            logger.debug("server %s: HTTP Request: %s %s %s", self.watch.label, method, shown, _status_text(response))
        if code >= 300:
            location = response.headers.get("location")
            followed = redirect_within_origin(method, url, code, location) is not None
            self.watch.answered(method, headers, body, code, response.reason, location=location, followed=followed)
        return response

    def broke(self, response: Response, exc: HttpError) -> None:
        """A response body failed under the wire: a death unless it was silence or an undecodable body."""
        if not isinstance(exc, HttpTimeout | DecodingError):
            self.watch.failed(response.method, str(response.url), exc, streaming=True)

    async def _send_with_auth(
        self, auth: ServerAuth, method: str, url: Url, headers: Mapping[str, str], body: bytes, *, bound: float | None
    ) -> Response:
        """The OAuth flow's own first step without its httpx objects: a fresh token, or bare while nothing is stored.

        Anything else (a token to load or renew), or a challenge to that step, runs the flow.
        """
        ready, token = auth.direct()
        if not ready:
            return await self._send_authorized(method, url, headers, body)
        # A DPoP-bound token adds a fresh proof for this method and URL (one signature); a
        # bearer token costs what it always did.
        sent = headers if token is None else {**headers, **auth.resource_headers(method, url, token)}
        response = await self.http.send(method, url, sent, body, bound=bound)
        auth.observe(url, response.status, response.headers)
        if response.status in (401, 403):
            response = await self._challenged(response, method, url, headers, body)
        return response

    async def _challenged(
        self, response: Response, method: str, url: Url, headers: Mapping[str, str], body: bytes
    ) -> Response:
        """A 401 or 403 to the flow's first step, taken without it: read and drop it, then run the flow.

        ``ServerAuth.async_auth_flow`` starts by sending the request with the fresh token it
        holds (or bare, when the store has none) and stops there unless the server challenges.
        :meth:`send` takes that step with our own values; a challenge runs the flow itself,
        which sends the request again (a challenged request was not processed). A DPoP
        server's ``use_dpop_nonce`` challenge is answered that way too: :meth:`ServerAuth.observe`
        kept its nonce, and the flow's first sending proves with it.
        """
        try:
            with contextlib.suppress(BodyTooLarge):  # a large one costs its connection only
                await response.aread(_CHALLENGE_BYTES)  # small: the connection goes back to the pool
        finally:
            response.close()
        return await self._send_authorized(method, url, headers, body)

    async def _send_authorized(self, method: str, url: Url, headers: Mapping[str, str], body: bytes) -> Response:
        """Drive ``ServerAuth.async_auth_flow``: each request it yields goes out here, its answer goes back."""
        assert self.auth is not None
        request = httpx2.Request(method, str(url), headers=dict(headers), content=body)
        flow = self.auth.async_auth_flow(request)
        response: Response | None = None
        try:
            outgoing = await flow.__anext__()
            while True:
                if response is not None:
                    response.close()
                sent = {k: v for k, v in outgoing.headers.items() if k.lower() not in ("host", "content-length")}
                response = await self.http.send(outgoing.method, Url.parse(str(outgoing.url)), sent, outgoing.content)
                content = b""
                if response.status in (401, 403):
                    with contextlib.suppress(BodyTooLarge):  # a large one costs its connection only
                        content = await response.aread(_CHALLENGE_BYTES)  # small: lets the connection be reused
                answer = httpx2.Response(
                    response.status, headers=response.headers.items, content=content, request=outgoing
                )
                try:
                    outgoing = await flow.asend(answer)
                except StopAsyncIteration:
                    return response
        except BaseException:
            if response is not None:
                response.close()
            raise
        finally:
            await flow.aclose()


def _auth_for(params: HttpParams) -> ServerAuth | None:
    """The OAuth of this connection (a fresh one per connection), or None."""
    if params.oauth is None:
        return None
    from mcp_actors._auth.oauth import build_auth

    return build_auth(params.oauth, timeout=params.connect_timeout)


async def _watch_auth(auth: ServerAuth, link: TransportLink) -> None:
    """An authorization that fails mid-session ends the link, with the reason (and the fix)."""
    await auth.failed.wait()
    link.die(str(auth.failure))


def _http_client(params: HttpParams, *, label: str, secrets: tuple[str, ...]) -> tuple[Url, HttpClient]:
    """The endpoint and the HTTP/1.1 client of one connection (the record's headers; URL credentials as Basic).

    Raises:
        ServerMisconfigured: The URL, a header or the environment's proxy cannot be used.
    """
    problem = None
    try:
        url = Url.parse(params.url)
        headers = dict(params.headers)
        if url.userinfo and not any(key.lower() == "authorization" for key in headers):
            # As httpx: credentials in the URL are sent as Basic authorization.
            user, _, password = (urllib.parse.unquote(part) for part in url.userinfo.partition(":"))
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        http = HttpClient(headers=headers, connect_timeout=params.connect_timeout, read_timeout=params.read_timeout)
        http.prepare(url)
    except InvalidRequest as exc:
        problem = redact_text(str(exc), secrets)
    if problem is not None:
        raise ServerMisconfigured(f"server {label!r}: {problem}; fix config.url or config.headers", server=label)
    return url, http


@contextlib.asynccontextmanager
async def _open_streamable_http(
    params: HttpParams, *, label: str, auth: ServerAuth | None, secrets: tuple[str, ...]
) -> AsyncIterator[TransportLink]:
    """Streamable HTTP on our own wire (see :mod:`mcp_actors._wire.http.wire`): the link carries it as ``link.wire``."""
    watch = _HttpWatch(label=label, secrets=secrets, optional_get=True)
    url, http = _http_client(params, label=label, secrets=secrets)
    client = _WatchedHttp(http, watch, auth)
    link = TransportLink(label=label, secrets=secrets)
    if auth is not None:
        link.principal = auth.principal
    wire = HttpWire(client=client, url=url, link=link, max_message_bytes=params.max_message_bytes)
    link.wire = wire
    watch.attach(link)
    try:
        try:
            yield link
        finally:
            await wire.aclose()
            link.die(link.death_reason or "closed by the client")
    finally:
        http.close()


@contextlib.asynccontextmanager
async def _open_sse(
    params: HttpParams, *, label: str, auth: ServerAuth | None, secrets: tuple[str, ...]
) -> AsyncIterator[TransportLink]:
    """Legacy SSE on our own client (:mod:`mcp_actors._wire.http.sse`): the stream's messages go to
    the link's read stream, the messages written to the link are POSTed to the endpoint."""
    watch = _HttpWatch(label=label, secrets=secrets, optional_get=False)
    url, http = _http_client(params, label=label, secrets=secrets)
    sse = LegacySse(_WatchedHttp(http, watch, auth), url, params.max_message_bytes, post_timeout=params.connect_timeout)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](STREAM_BUFFER)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](STREAM_BUFFER)
    streams = (read_writer, read_stream, write_stream, write_reader)
    try:
        failure = await _sse_connect(sse, watch, params, label=label, auth=auth)
        if failure is not None:
            raise failure  # out of every handler: nothing of the HTTP layer is chained to it
        link = TransportLink(read_stream=read_stream, write_stream=write_stream, label=label, secrets=secrets)
        if auth is not None:
            link.principal = auth.principal
        link._closers.append(read_writer)
        watch.attach(link)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_sse_reader, sse, read_writer, link, params)
            nursery.start_soon(_sse_writer, sse, write_reader, read_writer, link)
            try:
                yield link
            finally:
                link.die(link.death_reason or "closed by the client")
                nursery.cancel_scope.cancel()
    finally:
        await sse.aclose()
        http.close()
        for stream in streams:
            stream.close()


async def _sse_connect(
    sse: LegacySse, watch: _HttpWatch, params: HttpParams, *, label: str, auth: ServerAuth | None
) -> McpActorsError | None:
    """Open the SSE stream up to its endpoint; the typed error to raise when that failed, else None.

    Returned, not raised, so the caller raises it outside this handler: no exception of the
    HTTP layer is chained to it.
    """
    try:
        await sse.connect()
    except SseRefused as exc:
        # The watch's reason first (a 401, a redirect off the origin, an error status): it says more.
        if watch.pending is not None:
            return ServerStartFailed(f"server {label!r} failed to connect: {watch.pending}", server=label)
        return ServerProtocolError(f"server {label!r} failed to connect: {exc}", server=label)
    except SseTooLarge:
        return _sse_too_large(label, params.max_message_bytes)
    except HttpError as exc:
        if auth is not None and auth.failure is not None:
            return auth.failure
        reason = watch.pending or redact_text(str(exc), watch.secrets)
        return ServerStartFailed(f"server {label!r} failed to connect: {reason}", server=label)
    return None


def _sse_too_large(label: str, limit: int) -> ServerMessageTooLarge:
    return ServerMessageTooLarge(
        f"server {label!r} sent an SSE event larger than the message limit of {limit} bytes"
        " (max_message_bytes); the connection is closed, as its stream cannot go on. If its messages"
        " are legitimately that large, raise max_message_bytes; otherwise the server is at fault",
        server=label,
        limit=limit,
    )


async def _sse_reader(
    sse: LegacySse,
    read_writer: MemoryObjectSendStream[SessionMessage | Exception],
    link: TransportLink,
    params: HttpParams,
) -> None:
    """Hand every message of the SSE stream to the link's read stream; its end, however it comes, kills the link."""
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    reason = "the server ended the SSE stream"
    try:
        async with contextlib.aclosing(sse.events()) as events:
            async for event, data in events:
                if event != "message" or not data:
                    continue  # keep-alives, a repeated endpoint, events MCP does not define
                item: SessionMessage | Exception
                try:  # the JSON rule of every wire (mcp_actors._wire.codec), then the SDK's envelope
                    item = SessionMessage(jsonrpc_message_adapter.validate_python(decode(data), by_name=False))
                except (ValidationError, ValueError) as exc:
                    item = exc
                await read_writer.send(item)
    except SseTooLarge:
        reason = str(_sse_too_large(link.label, params.max_message_bytes))
    except HttpTimeout:
        reason = f"the server sent nothing on the SSE stream for {params.read_timeout:g} s"
    except HttpError as exc:
        sse.broke(exc)  # the watch names the failure (a death)
        reason = f"the SSE stream broke: {type(exc).__name__}"
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    link.die(reason)


async def _sse_writer(
    sse: LegacySse,
    write_reader: MemoryObjectReceiveStream[SessionMessage],
    read_writer: MemoryObjectSendStream[SessionMessage | Exception],
    link: TransportLink,
) -> None:
    """POST every message written to the link: requests each in a task of its own, the others in order.

    A request the server refused (an error status, a timeout) gets an error reply at once
    naming why; a network failure or a typed authorization failure ends the link.
    """

    async def post(item: SessionMessage) -> None:
        message = item.message
        try:
            problem = await sse.post(message.model_dump(by_alias=True, mode="json", exclude_unset=True))
        except McpActorsError as exc:  # an OAuth failure, typed: its message is the reason
            link.die(str(exc))
            return
        except HttpError as exc:  # the watch has named the failure already, usually
            link.die(f"the HTTP connection failed: {type(exc).__name__}")
            return
        if problem is None or link.death_reason is not None:
            return
        if isinstance(message, mcp_types.JSONRPCRequest):
            error = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=problem)
            reply = mcp_types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await read_writer.send(SessionMessage(reply))
        else:
            logger.debug("server %s: a message was refused: %s", link.label, problem)

    async with trio.open_nursery() as nursery:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.EndOfStream):
            async for item in write_reader:
                if isinstance(item.message, mcp_types.JSONRPCRequest):
                    nursery.start_soon(post, item)
                else:
                    await post(item)


@contextlib.asynccontextmanager
async def open_http_transport(params: HttpParams, *, label: str) -> AsyncIterator[TransportLink]:
    """Open an SSE or streamable HTTP transport and yield its link.

    Streamable HTTP runs on our own wire (``link.wire``, for ``WireDispatcher``; no SDK streams);
    SSE through the SDK's transport. Proxy settings come from the environment
    (``HTTP_PROXY``, ``NO_PROXY``, ...). The link dies as soon as our HTTP client sees the
    server go (see the module docstring).
    """
    install_log_filter()  # again: the SDK's loggers exist only once its modules are imported
    params = params.resolved(label=label)
    auth = _auth_for(params)
    secrets = params.secret_values()
    opener = _open_streamable_http if params.kind is ServerType.HTTP else _open_sse
    try:
        async with opener(params, label=label, auth=auth, secrets=secrets) as link, trio.open_nursery() as nursery:
            if auth is not None:
                nursery.start_soon(_watch_auth, auth, link)
            try:
                yield link
            finally:
                nursery.cancel_scope.cancel()
    finally:
        if auth is not None:
            with trio.CancelScope(shield=True):
                await auth.aclose()
            if auth.failure is not None:
                # The SDK swallows what its HTTP client raised; the typed reason is ours.
                raise auth.failure
