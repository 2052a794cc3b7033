"""OAuth for SSE and streamable-HTTP servers, on the SDK's ``mcp.client.auth``.

The SDK's :class:`~mcp.client.auth.OAuthClientProvider` does discovery (RFC 9728 protected
resource metadata from the 401's ``resource_metadata`` and the well-known fallbacks, RFC 8414
and OpenID discovery with the 2025-03-26 fallbacks), dynamic registration, Client ID Metadata
Documents, PKCE S256 with the RFC 8707 ``resource`` parameter, scope selection and step-up;
its ``client_credentials`` extensions do machine-to-machine grants, and
:mod:`~mcp_actors._auth.assertion_grants` the JWT-bearer grants (an ID-JAG from the
enterprise IdP, a workload's own token). :class:`ServerAuth` wraps one provider per server
and fills what it lacks:

* **Concurrency.** The SDK holds one lock around every request (and its response headers);
  we send with a fresh token without any lock, and only a 401/403 takes the lock. Requests
  that all hit a 401 with the same token make one refresh (single flight): the first to take
  the lock refreshes, the others see the token changed and retry with it.
* **Refresh before expiry, and on 401.** The expiry time is stored with the tokens (the SDK
  keeps it in memory only), a token within ``refresh_margin`` of it is refreshed before use,
  and a token the server refuses is refreshed before anyone is asked to log in again.
* **Pre-registered clients** (``config.oauth.clientId``/``clientSecret``), preferred over a
  metadata-document client id and dynamic registration; the token endpoint auth method is
  ``client_secret_basic`` or ``client_secret_post`` as the server's metadata allows.
* **Interaction stays with the host.** The authorization URL goes to the host's
  ``authorization_handler(server_id, url)``, which returns the redirect URL the server sent
  the browser to; ``code``, ``state`` and ``iss`` are read from it and checked. Without a
  handler the flow stops with :class:`~mcp_actors.errors.AuthorizationRequired` at once.
* **Typed failures.** The authorization server's own requests go through our own HTTP
  client, so an unreachable server is :class:`~mcp_actors.errors.AuthorizationServerUnreachable`;
  malformed metadata, a resource that names another server, a refused token request and a
  step-up that still lacks scope are :class:`~mcp_actors.errors.AuthorizationFailed`.
  :attr:`ServerAuth.failure` keeps the first one for the transport to raise.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import time
import urllib.parse
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import httpx2
import trio
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    ProtectedResourceMetadata,
)
from pydantic import ValidationError

from mcp_actors._auth.assertion_grants import AssertionGrantProvider, AssertionHandler
from mcp_actors._auth.token_store import FileTokenStore, TokenStore
from mcp_actors._config.files import read_config_file
from mcp_actors._config.record import ASSERTION_GRANTS, McpServerRecord, OAuthConfig, OAuthGrant, redact_url
from mcp_actors._config.sdk_logs import sdk_logs_owned
from mcp_actors._sdk import initialize_provider, provider_initialized
from mcp_actors.errors import (
    AuthorizationFailed,
    AuthorizationRequired,
    AuthorizationServerUnreachable,
    ConfigFileRefused,
    McpActorsError,
)

__all__ = [
    "DEFAULT_REDIRECT_PORT",
    "AuthSettings",
    "AuthorizationHandler",
    "OAuthTarget",
    "ServerAuth",
    "build_auth",
    "current_auth_settings",
    "oauth_target_for",
    "open_auth_settings",
    "open_authorized_session",
    "parse_redirect",
    "redirect_uri",
    "use_auth_settings",
]

logger = logging.getLogger(__name__)

AuthorizationHandler = Callable[[str, str], Awaitable[str]]
"""``async (server_id, authorization_url) -> redirect_url``: the host shows the URL to a person
(a browser, a webview) and returns the full URL the authorization server redirected to."""

DEFAULT_REDIRECT_PORT: Final = 33418
"""The loopback redirect port used when neither ``config.oauth.redirectPort`` nor the CLI picks one."""

_REFRESH_MARGIN: Final = 60.0


class _ExpectedAuthFailures(logging.Filter):
    """Drop the SDK's "OAuth flow error" traceback when the failure is one of our typed errors.

    The SDK logs every exception of its flow at ERROR with a traceback; ours (a login nobody
    can give, a refused grant) are expected outcomes, reported once, typed, to the caller.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, McpActorsError)


def _install_log_filter() -> None:
    sdk_logger = logging.getLogger("mcp.client.auth.oauth2")
    if not any(isinstance(f, _ExpectedAuthFailures) for f in sdk_logger.filters):
        # First, before the routing filter (mcp_actors._config.sdk_logs): an expected
        # failure is dropped, not logged again under our name.
        sdk_logger.filters.insert(0, _ExpectedAuthFailures())


_install_log_filter()


def redirect_uri(port: int) -> str:
    """The loopback redirect URI for ``port`` (RFC 8252: 127.0.0.1, any port)."""
    return f"http://127.0.0.1:{port}/callback"


@attrs.frozen(kw_only=True)
class OAuthTarget:
    """The server an auth flow is for: what identifies its tokens and how it wants to log in.

    Attributes:
        server_id: The record id (the token store's key).
        server_name: The name shown in messages (``mcp-actors auth login NAME``).
        url: The MCP endpoint (the protected resource).
        oauth: Its ``config.oauth``, or None for the spec's defaults.
    """

    server_id: str
    server_name: str
    url: str = attrs.field(repr=lambda url: repr(redact_url(url)))
    oauth: OAuthConfig | None = None

    @property
    def config(self) -> OAuthConfig:
        """The OAuth settings, defaults filled in."""
        return self.oauth if self.oauth is not None else OAuthConfig()


@attrs.frozen(kw_only=True)
class AuthSettings:
    """How a runtime authorizes: where tokens live and who may be asked to log in.

    Attributes:
        token_store: Per-server token storage.
        authorization_handler: The host's login callback, or None: then a server that needs a
            login fails with :class:`AuthorizationRequired` and no call waits on a person.
        redirect_port: Loopback port of the redirect URI when the record names none.
        assertion_handler: The host's source of ID tokens and workload tokens for the
            assertion grants whose record names no file or variable, or None.
    """

    token_store: TokenStore = attrs.field(factory=FileTokenStore)
    authorization_handler: AuthorizationHandler | None = attrs.field(default=None, repr=False)
    redirect_port: int = DEFAULT_REDIRECT_PORT
    assertion_handler: AssertionHandler | None = attrs.field(default=None, repr=False)


_SETTINGS: contextvars.ContextVar[AuthSettings | None] = contextvars.ContextVar("mcp_actors_auth", default=None)


def current_auth_settings() -> AuthSettings:
    """The settings ``open_runtime`` installed for this task tree, else the defaults.

    Defaults: the file token store in the state directory and no handler (what the CLI's
    commands other than ``auth login`` use: tokens from an earlier login, never a prompt).
    """
    settings = _SETTINGS.get()
    return settings if settings is not None else AuthSettings()


@contextlib.contextmanager
def use_auth_settings(settings: AuthSettings) -> Iterator[None]:
    """Install ``settings`` for the tasks started inside the block (they inherit it)."""
    token = _SETTINGS.set(settings)
    try:
        yield
    finally:
        _SETTINGS.reset(token)


@contextlib.asynccontextmanager
async def open_auth_settings(settings: AuthSettings) -> AsyncIterator[None]:
    """:func:`use_auth_settings` as an async context manager (``open_runtime`` nests it)."""
    with use_auth_settings(settings):
        yield


def parse_redirect(url: str, *, server: str) -> AuthorizationCodeResult:
    """Read ``code``, ``state`` and ``iss`` from the redirect URL a handler returned.

    Raises:
        AuthorizationFailed: The URL carries an OAuth ``error`` (the user refused, ...) or no
            code at all.
    """
    try:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    except ValueError:
        query = {}
    error = query.get("error")
    if error:
        description = query.get("error_description", "")
        raise AuthorizationFailed(
            f"server {server!r}: the authorization server answered {error!r}"
            + (f" ({description})" if description else "")
            + f"; try `mcp-actors auth login {server}` again",
            server=server,
            oauth_error=error,
        )
    code = query.get("code")
    if not code:
        raise AuthorizationFailed(
            f"server {server!r}: the redirect URL carries no authorization code; pass the full URL the"
            " browser was sent to (with ?code=...&state=...)",
            server=server,
        )
    return AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))


def _pick_secret_method(metadata: OAuthMetadata | None) -> str:
    """client_secret_basic unless the server's metadata supports only client_secret_post."""
    supported = metadata.token_endpoint_auth_methods_supported if metadata is not None else None
    if supported and "client_secret_basic" not in supported and "client_secret_post" in supported:
        return "client_secret_post"
    return "client_secret_basic"


class _CodeProvider(OAuthClientProvider):
    """The SDK provider for the authorization-code grant, with our client identity and handler."""

    def __init__(
        self,
        target: OAuthTarget,
        storage: Any,
        handler: AuthorizationHandler | None,
        redirect: str,
    ) -> None:
        config = target.config
        metadata = OAuthClientMetadata(
            redirect_uris=[redirect],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            client_name="mcp-actors",
        )
        super().__init__(
            target.url,
            metadata,
            storage,
            redirect_handler=self._remember_url,
            callback_handler=self._ask_handler,
            client_metadata_url=None if config.client_id else config.client_metadata_url,
        )
        self.target = target
        self.handler = handler
        self.stepping_up = False
        self._authorization_url: str | None = None

    def __repr__(self) -> str:
        return f"_CodeProvider(server={self.target.server_name!r})"

    async def _remember_url(self, url: str) -> None:
        self._authorization_url = url

    async def _ask_handler(self) -> AuthorizationCodeResult:
        name = self.target.server_name
        if self.handler is None:
            raise AuthorizationRequired(
                f"server {name!r} needs an OAuth login; run `mcp-actors auth login {name}` (or give the"
                " runtime an authorization_handler), then reconnect",
                server=name,
            )
        assert self._authorization_url is not None
        redirected = await self.handler(self.target.server_id, self._authorization_url)
        return parse_redirect(redirected, server=name)

    async def _initialize(self) -> None:
        await super()._initialize()
        config = self.target.config
        if config.client_id is not None:
            # A pre-registered client always wins over a stored dynamic registration.
            self.context.client_info = OAuthClientInformationFull(
                client_id=config.client_id,
                client_secret=config.client_secret,
                redirect_uris=self.context.client_metadata.redirect_uris,
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method="client_secret_basic" if config.client_secret else "none",
            )

    def _choose_method(self) -> None:
        info = self.context.client_info
        if info is not None and self.target.config.client_id is not None and info.client_secret:
            method = _pick_secret_method(self.context.oauth_metadata)
            if info.token_endpoint_auth_method != method:
                self.context.client_info = info.model_copy(update={"token_endpoint_auth_method": method})

    async def _perform_authorization(self) -> httpx2.Request:
        configured = " ".join(self.target.config.scopes) or None
        if configured is not None:
            # Configured scopes replace the discovered ones; a step-up adds the challenged ones.
            current = self.context.client_metadata.scope if self.stepping_up else None
            self.context.client_metadata.scope = union_scopes(configured, current)
        self._choose_method()
        return await super()._perform_authorization()

    async def _refresh_token(self) -> httpx2.Request:
        self._choose_method()
        return await super()._refresh_token()


class _SecretCredentialsProvider(ClientCredentialsOAuthProvider):
    """client_credentials with a secret; basic or post as the server's metadata allows."""

    async def _exchange_token_client_credentials(self) -> httpx2.Request:
        info = self.context.client_info
        if info is not None:
            method = _pick_secret_method(self.context.oauth_metadata)
            self.context.client_info = info.model_copy(update={"token_endpoint_auth_method": method})
        return await super()._exchange_token_client_credentials()


def _read_private_key(target: OAuthTarget) -> str:
    config = target.config
    assert config.private_key_file is not None
    path = Path(config.private_key_file).expanduser()
    try:
        return read_config_file(path, what="privateKeyFile", fix="fix config.oauth.privateKeyFile").decode("utf-8")
    except ConfigFileRefused as exc:
        raise AuthorizationFailed(
            f"server {target.server_name!r}: config.oauth.privateKeyFile {str(path)!r} {exc.reason}; it was not"
            " read; point it at a regular PEM file",
            server=target.server_name,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise AuthorizationFailed(
            f"server {target.server_name!r}: config.oauth.privateKeyFile {str(path)!r} cannot be read"
            f" ({reason}); fix the path or its permissions",
            server=target.server_name,
        ) from None


def _make_provider(
    target: OAuthTarget,
    storage: Any,
    handler: AuthorizationHandler | None,
    redirect: str,
    *,
    assertion_handler: AssertionHandler | None = None,
    timeout: float = 30.0,
) -> OAuthClientProvider:
    config = target.config
    scope = " ".join(config.scopes) or None
    if config.grant in ASSERTION_GRANTS:
        return AssertionGrantProvider(
            target, storage, handler=assertion_handler, secret_method=_pick_secret_method, timeout=timeout
        )
    if config.grant is OAuthGrant.CLIENT_CREDENTIALS:
        assert config.client_id is not None
        with warnings.catch_warnings():
            # The SDK warns when no issuer is pinned; the record has no issuer field (yet).
            warnings.simplefilter("ignore")
            if config.private_key_file is not None:
                params = SignedJWTParameters(
                    issuer=config.client_id,
                    subject=config.client_id,
                    signing_key=_read_private_key(target),
                    signing_algorithm=config.signing_algorithm or "RS256",
                )
                return PrivateKeyJWTOAuthProvider(
                    target.url,
                    storage,
                    config.client_id,
                    params.create_assertion_provider(),
                    scope=scope,
                )
            assert config.client_secret is not None
            return _SecretCredentialsProvider(target.url, storage, config.client_id, config.client_secret, scope=scope)
    return _CodeProvider(target, storage, handler, redirect)


def _is_step_up(response: httpx2.Response) -> bool:
    return response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"


def _is_challenge(response: httpx2.Response) -> bool:
    return response.status_code == 401 or _is_step_up(response)


_WELL_KNOWN_MODELS: Final = (
    ("/.well-known/oauth-protected-resource", ProtectedResourceMetadata),
    ("/.well-known/oauth-authorization-server", OAuthMetadata),
    ("/.well-known/openid-configuration", OAuthMetadata),
)


class ServerAuth(httpx2.Auth):
    """The ``httpx2.Auth`` of one OAuth-protected server (see the module docstring).

    Args:
        target: The server.
        storage: Its SDK ``TokenStorage`` (from a :class:`TokenStore`).
        handler: The host's login callback, or None.
        redirect: The redirect URI registered for the authorization-code grant.
        timeout: Bound, in seconds, for each request to the authorization server.
        refresh_margin: A token this close to its expiry is refreshed before use.
        assertion_handler: The host's source of tokens for the assertion grants, or None.
    """

    requires_request_body = False
    requires_response_body = False

    def __init__(
        self,
        target: OAuthTarget,
        storage: Any,
        *,
        handler: AuthorizationHandler | None = None,
        redirect: str | None = None,
        timeout: float = 30.0,
        refresh_margin: float = _REFRESH_MARGIN,
        assertion_handler: AssertionHandler | None = None,
    ) -> None:
        port = target.config.redirect_port or DEFAULT_REDIRECT_PORT
        self.target = target
        self.storage = storage
        self.provider = _make_provider(
            target,
            storage,
            handler,
            redirect or redirect_uri(port),
            assertion_handler=assertion_handler,
            timeout=timeout,
        )
        self.timeout = timeout
        self.refresh_margin = refresh_margin
        self.failure: McpActorsError | None = None
        self.failed = trio.Event()
        self._lock = trio.Lock()
        self._client: httpx2.AsyncClient | None = None
        self._oauth_error: str | None = None
        self._secrets = target.config.secret_values()

    def __repr__(self) -> str:
        return f"ServerAuth(server={self.target.server_name!r})"

    # ------------------------------------------------------------------ public

    async def aclose(self) -> None:
        """Close the HTTP client used for the authorization server."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def direct(self) -> tuple[bool, str | None]:
        """What a sender may do without the flow: ``(True, token)`` or ``(True, None)`` (bare), else ``(False, None)``.

        The flow's own first step, as a sender takes it per request: a fresh token is sent;
        loaded with nothing stored, the request goes out bare until the server challenges;
        anything else (not loaded yet, a token due for renewal) needs the flow.
        """
        if not provider_initialized(self.provider):
            return False, None
        tokens = self.provider.context.current_tokens
        if tokens is None:
            return True, None
        if not tokens.access_token or self._due(tokens.expires_in):
            return False, None
        return True, tokens.access_token

    # ------------------------------------------------------------------ the flow

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Send with a fresh token lock-free; on a challenge, renew once (single flight) and retry.

        A server that never challenges costs nothing but the first request's look at the store.
        """
        sent = self._fresh_token()
        response: httpx2.Response | None = None
        if sent is not None or self._without_tokens():
            if sent is not None:
                request.headers["Authorization"] = f"Bearer {sent}"
            response = yield request
            if not _is_challenge(response):
                return
        async with self._lock:
            try:
                if not provider_initialized(self.provider):
                    await self._load()
                if response is None:
                    self._expire_if_due()
                    sent = self._fresh_token()
                    if sent is not None or self._without_tokens():
                        if sent is not None:
                            request.headers["Authorization"] = f"Bearer {sent}"
                        response = yield request
                        if not _is_challenge(response):
                            return
                elif response.status_code == 401:
                    current = self._fresh_token()
                    if current is not None and current != sent:
                        # Another request renewed the token while this one was in flight.
                        request.headers["Authorization"] = f"Bearer {current}"
                        response = yield request
                        if not _is_challenge(response):
                            return
                if response is not None and response.status_code == 401:
                    if self._without_tokens() and not self._wants_oauth(response):
                        return  # not an OAuth server: the transport reports the 401 as it is
                    self._expire()  # refused: refresh it before anyone is asked to log in
                stepping = response is not None and _is_step_up(response)
                if isinstance(self.provider, _CodeProvider):
                    self.provider.stepping_up = stepping
                final: httpx2.Response | None = None
                # A step-up, or a first login, starts from the response in hand (the SDK would
                # send the very same request first); a refresh must come before a resend.
                cached = response if stepping or self._without_tokens() else None
                relay = _relay(self, request, cached)
                try:
                    outgoing = await relay.__anext__()
                    while True:
                        final = yield outgoing
                        outgoing = await relay.asend(final)
                except StopAsyncIteration:
                    pass
                finally:
                    await relay.aclose()
                if stepping and final is not None and _is_step_up(final):
                    scope = extract_field_from_www_auth(final, "scope") or "?"
                    raise AuthorizationFailed(
                        f"server {self.target.server_name!r} still refuses the request after re-authorization"
                        f" for more scope (it wants {scope!r}); grant that scope or add it to config.oauth.scopes",
                        server=self.target.server_name,
                        oauth_error="insufficient_scope",
                    )
            except McpActorsError as exc:
                self._fail(exc)
                raise
            except (OAuthFlowError, ValidationError, ValueError) as exc:
                error = self._translate(exc)
                self._fail(error)
                raise error from None

    # ------------------------------------------------------------------ helpers

    def _without_tokens(self) -> bool:
        """Loaded, and nothing stored: requests go out bare until the server challenges."""
        return self.direct() == (True, None)

    def _wants_oauth(self, response: httpx2.Response) -> bool:
        """A 401 the OAuth flow should answer: configured for OAuth, or a Bearer challenge."""
        challenge = response.headers.get("WWW-Authenticate", "")
        return self.target.oauth is not None or challenge.lower().startswith("bearer")

    def _fresh_token(self) -> str | None:
        """The access token a request would carry now, if it is fresh."""
        return self.direct()[1]

    async def _load(self) -> None:
        await initialize_provider(self.provider)
        get_expiry = getattr(self.storage, "get_expires_at", None)
        if get_expiry is not None and self.provider.context.current_tokens is not None:
            self.provider.context.token_expiry_time = await get_expiry()

    def _expire(self) -> None:
        if self.provider.context.current_tokens is not None:
            self.provider.context.token_expiry_time = 1.0  # long past: the SDK refreshes first

    def _due(self, lifetime: int | None) -> bool:
        """Whether the token expires within the margin (at most half its lifetime)."""
        expiry = self.provider.context.token_expiry_time
        if not expiry:
            return False
        margin = min(self.refresh_margin, lifetime / 2) if lifetime else self.refresh_margin
        return expiry - time.time() < margin

    def _expire_if_due(self) -> None:
        tokens = self.provider.context.current_tokens
        if tokens is not None and self._due(tokens.expires_in):
            self._expire()

    def _fail(self, error: McpActorsError) -> None:
        if self.failure is None:
            self.failure = error
        self.failed.set()

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _translate(self, exc: Exception) -> McpActorsError:
        name = self.target.server_name
        detail = self._redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        if isinstance(exc, OAuthTokenError):
            return AuthorizationFailed(
                f"server {name!r}: the authorization server refused the token request"
                f" ({self._oauth_error or detail}); check config.oauth (clientId, clientSecret,"
                f" privateKeyFile) or run `mcp-actors auth login {name}`",
                server=name,
                oauth_error=self._oauth_error,
            )
        if isinstance(exc, OAuthRegistrationError):
            return AuthorizationFailed(
                f"server {name!r}: dynamic client registration failed ({detail}); register a client"
                " with the authorization server and set config.oauth.clientId",
                server=name,
            )
        if detail.startswith("State parameter mismatch"):
            return AuthorizationFailed(
                f"server {name!r}: the redirect's state does not match the login's (a stale or forged"
                f" redirect); run `mcp-actors auth login {name}` again",
                server=name,
            )
        if "does not match" in detail and "resource" in detail.lower():
            return AuthorizationFailed(
                f"server {name!r}: its protected-resource metadata names another resource ({detail});"
                " the server is misconfigured or config.url is not the server's own URL",
                server=name,
            )
        return AuthorizationFailed(
            f"server {name!r}: authorization failed: {detail}; fix config.oauth or the authorization"
            f" server, then run `mcp-actors auth login {name}`",
            server=name,
        )

    async def _side_send(self, request: httpx2.Request) -> httpx2.Response:
        """Send a discovery, registration or token request through our own client."""
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(self.timeout))
        shown = redact_url(str(request.url))
        try:
            response = await self._client.send(request)
            await response.aread()
        except httpx2.TransportError as exc:
            raise AuthorizationServerUnreachable(
                f"server {self.target.server_name!r}: the authorization server could not be reached"
                f" ({request.method} {shown}: {type(exc).__name__}); check the network and the"
                " authorization server, then reconnect",
                server=self.target.server_name,
            ) from None
        self._check(request, response, shown)
        return response

    def _check(self, request: httpx2.Request, response: httpx2.Response, shown: str) -> None:
        path = request.url.path
        if response.status_code == 200 and request.method == "GET":
            for prefix, model in _WELL_KNOWN_MODELS:
                if prefix in path:
                    try:
                        model.model_validate_json(response.content)
                    except ValidationError as exc:
                        errors = exc.errors()
                        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
                        problem = errors[0]["msg"] if errors else "invalid"
                        raise AuthorizationFailed(
                            f"server {self.target.server_name!r}: malformed OAuth metadata at {shown}"
                            f" ({where or 'the document'}: {problem}); the authorization server must"
                            " publish valid metadata",
                            server=self.target.server_name,
                        ) from None
        if request.method == "POST" and response.status_code >= 400:
            with contextlib.suppress(ValueError, AttributeError):
                error = json.loads(response.content).get("error")
                self._oauth_error = error if isinstance(error, str) else None


async def _relay(
    auth: ServerAuth, request: httpx2.Request, cached: httpx2.Response | None = None
) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
    """The SDK's flow, with every request but ``request`` itself sent through ``auth``'s own client.

    Yields ``request`` each time it is to be sent (the caller sends it and passes the response);
    the first time, ``cached`` (the response the request already got) is passed instead.
    """
    inner = auth.provider.async_auth_flow(request)
    try:
        with sdk_logs_owned():  # each step of the SDK's flow runs here, between our yields
            outgoing = await inner.__anext__()
        while True:
            if outgoing is request and cached is not None:
                response, cached = cached, None
            elif outgoing is request:
                response = yield outgoing
            else:
                response = await auth._side_send(outgoing)
            try:
                with sdk_logs_owned():
                    outgoing = await inner.asend(response)
            except StopAsyncIteration:
                return
    finally:
        with sdk_logs_owned():
            await inner.aclose()


def oauth_target_for(record: McpServerRecord) -> OAuthTarget | None:
    """The OAuth target of an sse/http record, or None when OAuth is off for it.

    Off for stdio records, and for records that send their own ``Authorization`` header and
    have no ``config.oauth`` (static credentials: a 401 then means the header is wrong).
    """
    config = record.config
    if config.url is None:
        return None
    if config.oauth is None and any(key.lower() == "authorization" for key in config.headers):
        return None
    return OAuthTarget(server_id=record.id, server_name=record.name, url=config.url, oauth=config.oauth)


def build_auth(
    target: OAuthTarget,
    settings: AuthSettings | None = None,
    *,
    redirect: str | None = None,
    handler: AuthorizationHandler | None = None,
    timeout: float = 30.0,
) -> ServerAuth:
    """The ``httpx2.Auth`` for one server under ``settings`` (default: the current ones).

    Args:
        target: The server.
        settings: Token store and handler; :func:`current_auth_settings` when None.
        redirect: The redirect URI; default from ``config.oauth.redirectPort`` or the settings.
        handler: Overrides the settings' handler (the CLI's login).
        timeout: Bound for each request to the authorization server.
    """
    settings = settings or current_auth_settings()
    storage = settings.token_store.storage_for(target.server_id, server_url=target.url)
    port = target.config.redirect_port or settings.redirect_port
    return ServerAuth(
        target,
        storage,
        handler=handler or settings.authorization_handler,
        redirect=redirect or redirect_uri(port),
        timeout=timeout,
        assertion_handler=settings.assertion_handler,
    )


@contextlib.asynccontextmanager
async def open_authorized_session(
    target: OAuthTarget, auth: ServerAuth, *, kind: str = "http", timeout: float = 30.0
) -> AsyncIterator[Any]:
    """An initialized SDK ``ClientSession`` to the server, authorized by ``auth``.

    Used by ``mcp-actors auth login`` (the login happens during the handshake) and by tests;
    the runtime's connections go through the transports instead.

    Raises:
        AuthorizationRequired, AuthorizationFailed, AuthorizationServerUnreachable: The
            authorization failed (``auth.failure``), whatever the SDK made of it.
    """
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    try:
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(sdk_logs_owned())
            if kind == "sse":
                read, write = await stack.enter_async_context(sse_client(target.url, timeout=timeout, auth=auth))
            else:
                client = await stack.enter_async_context(
                    httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(timeout, read=300.0))
                )
                read, write = await stack.enter_async_context(streamable_http_client(target.url, http_client=client))
            session = await stack.enter_async_context(ClientSession(read, write))
            with trio.fail_after(timeout):
                await session.initialize()
            yield session
    except BaseException as exc:
        if auth.failure is not None and not isinstance(exc, trio.Cancelled | KeyboardInterrupt):
            raise auth.failure from None
        raise
    finally:
        await auth.aclose()
