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
* names the HTTP status in the JSON-RPC error a later failing request gets (500 on one
  call), instead of the SDK's generic text.

Read timeouts are not deaths: a quiet GET stream times out and is reopened.

**Streamable HTTP** does not use the SDK's transport nor httpx: the link carries an
:class:`~mcp_actors._wire.http.wire.HttpWire` (``link.wire``) for our dispatcher, on our own
HTTP/1.1 client (:mod:`mcp_actors._wire.http.http11`) wrapped by :class:`_WatchedHttp` (the watch,
the record's headers, and the OAuth flow of :class:`~mcp_actors._auth.oauth.ServerAuth` driven
request by request when the server has OAuth); it has no SDK streams.
**SSE** (legacy) keeps the SDK's transport on an httpx client of ours
(:class:`_WatchedClient`) that reports to the same watch.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import attrs
import httpx2
import mcp.types as mcp_types
import trio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from mcp_actors._config.record import ServerType
from mcp_actors._config.redact import install_log_filter, redact_text, redact_url
from mcp_actors._config.variables import expand
from mcp_actors._sdk import next_request_within_origin
from mcp_actors._wire.http.http11 import (
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
from mcp_actors._wire.http.wire import HttpWire, _status_text, redirect_within_origin
from mcp_actors._wire.link import STREAM_BUFFER, TransportLink, logger
from mcp_actors.errors import (
    InvalidServerConfig,
    ServerMisconfigured,
    ServerStartFailed,
    UnresolvedPlaceholder,
)

if TYPE_CHECKING:
    from mcp_actors._auth.oauth import OAuthTarget, ServerAuth
    from mcp_actors._config.record import McpServerRecord

__all__ = ["HttpParams", "open_http_transport"]

_SESSION_HEADER: Final = "mcp-session-id"
_SDK_GENERIC_ERRORS: Final = frozenset({"Server returned an error response", "Session terminated", "Not Found"})


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
        max_message_bytes: Largest single message (SSE event) accepted from a streamable
            HTTP server; as for stdio. The SDK's own default (1 MiB) would fail every
            larger tool result.
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
        body = json.loads(content)
    except (ValueError, TypeError):
        return None, None
    if not isinstance(body, dict):
        return None, None
    name = body.get("method")
    return body.get("id"), name if isinstance(name, str) else None


@attrs.define(eq=False)
class _HttpWatch:
    """What our HTTP client saw, and the link it kills when the server is gone.

    ``statuses`` maps a JSON-RPC request id to the error status its POST got, for the relay
    to name; ``pending`` is a death reason seen before the link existed (the SSE stream is
    opened while the SDK's transport starts).
    """

    label: str
    secrets: tuple[str, ...]
    # Streamable HTTP's GET stream is optional (a 405 or a redirect just means none);
    # SSE's GET stream is the connection itself.
    optional_get: bool = True
    # The SDK transport's relay names the status in the SDK's generic error; a wire names it itself.
    keep_statuses: bool = True
    link: TransportLink | None = None
    statuses: dict[Any, str] = attrs.field(factory=dict)
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
        if isinstance(exc, httpx2.TimeoutException | HttpTimeout):
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
        rpc_id, method_name = _rpc_of(method, content)
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
        elif rpc_id is not None and self.keep_statuses:
            self.statuses[rpc_id] = status


class _WatchedStream(httpx2.AsyncByteStream):
    """A response body that reports a network failure mid-body to the watch (SSE, on httpx)."""

    def __init__(self, inner: Any, watch: _HttpWatch, request: httpx2.Request) -> None:
        self._inner = inner
        self._watch = watch
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx2.TransportError as exc:
            self._watch.failed(self._request.method, str(self._request.url), exc, streaming=True)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedClient(httpx2.AsyncClient):
    """The SDK's httpx client for SSE, watched: every send and every streamed body."""

    def __init__(self, watch: _HttpWatch, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._watch = watch

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        """Send as httpx does; report a network failure or an error status to the watch."""
        try:
            response = await super().send(request, **kwargs)
        except httpx2.TransportError as exc:
            self._watch.failed(request.method, str(request.url), exc, streaming=False)
            raise
        self._watch.answered(
            request.method,
            request.headers,
            request.content if isinstance(request.stream, httpx2.ByteStream) else None,
            response.status_code,
            response.reason_phrase,
            location=response.headers.get("location", ""),
            followed=_httpx_follows(response),
        )
        if kwargs.get("stream"):
            response.stream = _WatchedStream(response.stream, self._watch, request)
        return response


def _httpx_follows(response: httpx2.Response) -> bool:
    if not response.is_redirect:
        return False
    return next_request_within_origin(response) is not None


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
        sent = headers if token is None else {**headers, "Authorization": f"Bearer {token}"}
        response = await self.http.send(method, url, sent, body, bound=bound)
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
        which sends the request again (a challenged request was not processed).
        """
        try:
            await response.aread()  # small: the connection goes back to the pool
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
                    content = await response.aread()  # small: lets the connection be reused
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


def _client_factory(watch: _HttpWatch) -> Any:
    """An ``McpHttpClientFactory`` (for ``sse_client``) building watched clients."""

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        kwargs: dict[str, Any] = {"timeout": timeout or httpx2.Timeout(30.0, read=300.0)}
        if headers is not None:
            kwargs["headers"] = headers
        if auth is not None:
            kwargs["auth"] = auth
        return _WatchedClient(watch, **kwargs)

    return factory


def _with_status(item: SessionMessage | Exception, watch: _HttpWatch) -> SessionMessage | Exception:
    """Name the HTTP status in the SDK's generic error reply to a request that got one."""
    if not isinstance(item, SessionMessage) or not isinstance(item.message, mcp_types.JSONRPCError):
        return item
    status = watch.statuses.pop(item.message.id, None)
    error = item.message.error
    if status is None or error.message not in _SDK_GENERIC_ERRORS:
        return item
    better = error.model_copy(update={"message": f"the server answered {status}"})
    return SessionMessage(item.message.model_copy(update={"error": better}), metadata=item.metadata)


async def _relay_http(
    source: Any, sink: MemoryObjectSendStream[SessionMessage | Exception], link: TransportLink, watch: _HttpWatch
) -> None:
    """Forward the SDK transport's items; a network-level failure means the server is gone."""
    try:
        async for item in source:
            if isinstance(item, Exception):
                if isinstance(item, httpx2.TransportError | OSError):
                    watch.die(f"the HTTP connection failed: {type(item).__name__}: {item}")
                    return
                logger.warning(
                    "server %s: transport reported %s: %s",
                    link.label,
                    type(item).__name__,
                    redact_text(str(item), watch.secrets),
                )
            await sink.send(_with_status(item, watch))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    link.die("the HTTP stream closed")


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


@contextlib.asynccontextmanager
async def _open_streamable_http(
    params: HttpParams, *, label: str, auth: ServerAuth | None, secrets: tuple[str, ...]
) -> AsyncIterator[TransportLink]:
    """Streamable HTTP on our own wire (see :mod:`mcp_actors._wire.http.wire`): the link carries it as ``link.wire``."""
    watch = _HttpWatch(label=label, secrets=secrets, optional_get=True, keep_statuses=False)
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
        raise ServerMisconfigured(
            f"server {label!r}: {redact_text(str(exc), secrets)}; fix config.url or config.headers", server=label
        ) from None
    client = _WatchedHttp(http, watch, auth)
    link = TransportLink(label=label, secrets=secrets)
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
    """SSE through the SDK's transport, its items relayed to the link's read stream."""
    from mcp.client.sse import sse_client

    watch = _HttpWatch(label=label, secrets=secrets, optional_get=False)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](STREAM_BUFFER)
    try:
        async with contextlib.AsyncExitStack() as stack:
            try:
                sdk_read, sdk_write = await stack.enter_async_context(
                    sse_client(
                        params.url,
                        headers=dict(params.headers),
                        timeout=params.connect_timeout,
                        sse_read_timeout=params.read_timeout,
                        httpx_client_factory=_client_factory(watch),
                        auth=auth,
                    )
                )
            except Exception as exc:
                if auth is not None and auth.failure is not None:
                    raise auth.failure from None
                # The SSE stream is opened before there is a link: say what our client saw.
                if watch.pending is None:
                    raise
                raise ServerStartFailed(f"server {label!r} failed to connect: {watch.pending}", server=label) from exc
            link = TransportLink(read_stream=read_stream, write_stream=sdk_write, label=label, secrets=secrets)
            link._closers.append(read_writer)
            watch.attach(link)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_relay_http, sdk_read, read_writer, link, watch)
                try:
                    yield link
                finally:
                    link.die(link.death_reason or "closed by the client")
                    nursery.cancel_scope.cancel()
    finally:
        read_writer.close()
        read_stream.close()


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
