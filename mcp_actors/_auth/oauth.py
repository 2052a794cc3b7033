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
* **DPoP** (RFC 9449, SEP-1932; see ``docs/protocol/dpop.md``): when ``config.oauth.dpop``
  and the servers call for it (:func:`~mcp_actors._auth.dpop.decide_dpop`), every token
  request carries a proof of the server's key, kept in the token store; a DPoP-bound token
  is stored with the key it is bound to and presented only with that key
  (``Authorization: DPoP`` and a fresh proof per request, :meth:`ServerAuth.resource_headers`).
  The servers' ``use_dpop_nonce`` challenges are answered once with their nonce, remembered
  per origin. The SDK knows nothing of DPoP: the token requests go through our client
  (:meth:`ServerAuth._side_send`), the tokens through a storage of ours (:class:`_BoundStorage`),
  and the requests the flow hands out are presented by :meth:`ServerAuth.async_auth_flow`.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
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
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import ValidationError

from mcp_actors._auth.assertion_grants import AssertionGrantProvider, AssertionHandler
from mcp_actors._auth.dpop import (
    DpopKey,
    HeaderLookup,
    Nonces,
    TokenBinding,
    challenge_schemes,
    decide_dpop,
    is_nonce_challenge,
)
from mcp_actors._auth.token_store import DpopTokenStorage, FileTokenStore, TokenStore
from mcp_actors._config.files import read_config_file
from mcp_actors._config.record import ASSERTION_GRANTS, DpopMode, McpServerRecord, OAuthConfig, OAuthGrant, redact_url
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


@attrs.define(eq=False)
class _DpopState:
    """One connection's DPoP: the server's key, what the tokens in use are bound to, the servers' nonces.

    Attributes:
        label: The server's name, for log lines.
        mode: ``config.oauth.dpop``.
        storage: The token storage, when it can keep a key; None for a host's plain one.
        key: The server's key, once loaded or made.
        loaded: Whether the stored key was read (once per connection).
        binding: Which key obtained the tokens in use (None: bearer tokens, or none).
        pending: The binding of the last token response, until the SDK stores its tokens.
        resource_key: The key when the tokens in use are DPoP-bound to it: resource requests
            are then proved with it. One attribute the hot path reads; None costs nothing.
        rs_schemes: The schemes the resource server's last 401 challenge offered.
        as_algorithms: The authorization server metadata's ``dpop_signing_alg_values_supported``
            (the SDK's metadata model drops it), read by :meth:`ServerAuth._check`.
        nonces: The servers' latest nonces, per origin.
    """

    label: str
    mode: DpopMode
    storage: DpopTokenStorage | None
    key: DpopKey | None = None
    loaded: bool = False
    binding: TokenBinding | None = None
    pending: TokenBinding | None = None
    resource_key: DpopKey | None = None
    rs_schemes: frozenset[str] = frozenset()
    as_algorithms: list[str] | None = None
    nonces: Nonces = attrs.Factory(Nonces)

    def bind(self, binding: TokenBinding | None) -> None:
        """The tokens in use are now those ``binding`` describes."""
        self.binding = binding
        key = self.key
        usable = binding is not None and binding.bound and key is not None and key.jkt == binding.jkt
        self.resource_key = key if usable else None

    def accepts(self, binding: TokenBinding | None) -> bool:
        """Whether stored tokens with ``binding`` may be used: bearer ones, or ones obtained with our key."""
        if binding is None:
            return True
        return self.mode is not DpopMode.OFF and self.key is not None and self.key.jkt == binding.jkt

    async def load_key(self) -> DpopKey | None:
        """The stored key, read once (a damaged one reads as none: a new key, a new login)."""
        if not self.loaded and self.storage is not None:
            raw = await self.storage.get_dpop_key()
            if raw is not None:
                try:
                    self.key = DpopKey.from_jwk(raw)
                except ValueError:
                    logger.warning(
                        "server %s: the stored DPoP key is damaged; a new key (and a new login) replaces it", self.label
                    )
            self.loaded = True
        return self.key

    async def ensure_key(self) -> DpopKey | None:
        """The key, made and stored on first need; None when the storage cannot keep one."""
        if self.storage is None:
            return None
        key = await self.load_key()
        if key is None:
            key = DpopKey.generate()
            await self.storage.set_dpop_key(key.private_jwk())
            self.key = key
        return key


class _BoundStorage:
    """The SDK's view of a server's token storage: tokens and the DPoP key they were obtained with, together.

    The SDK stores every token response through :meth:`set_tokens`; the binding of that
    response (:attr:`_DpopState.pending`, set by :meth:`ServerAuth._side_send`) is written
    with it in one write. Stored tokens bound to another key than the server's (a replaced
    or damaged key), or any bound tokens when ``dpop`` is off, read as none: a token
    obtained with one key is never presented with another.
    """

    def __init__(self, storage: Any, dpop: _DpopState) -> None:
        self._storage = storage
        self._dpop = dpop

    def __repr__(self) -> str:
        return f"_BoundStorage({self._storage!r})"

    async def get_tokens(self) -> OAuthToken | None:
        tokens: OAuthToken | None = await self._storage.get_tokens()
        dpop = self._dpop
        binding = None
        if tokens is not None and dpop.storage is not None:
            binding = await dpop.storage.get_token_binding()
            if binding is not None:
                await dpop.load_key()
                if not dpop.accepts(binding):
                    logger.info(
                        "server %s: the stored tokens are bound to another DPoP key (or DPoP is off): a new login"
                        " is needed",
                        dpop.label,
                    )
                    tokens, binding = None, None
        dpop.bind(binding)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        dpop = self._dpop
        binding, dpop.pending = dpop.pending, None
        if dpop.storage is not None:
            await dpop.storage.set_tokens(tokens, binding=binding)
        else:
            await self._storage.set_tokens(tokens)
        dpop.bind(binding)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info: OAuthClientInformationFull | None = await self._storage.get_client_info()
        return info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._storage.set_client_info(client_info)


def _grant_of(request: httpx2.Request) -> str | None:
    """The ``grant_type`` of a token request (a form POST, RFC 6749 §3.2), else None."""
    if request.method != "POST" or "x-www-form-urlencoded" not in request.headers.get("content-type", ""):
        return None
    try:
        form = urllib.parse.parse_qs(request.content.decode("ascii"))
    except (UnicodeDecodeError, httpx2.RequestNotRead):
        return None
    values = form.get("grant_type")
    return values[0] if values else None


def _dpop_algorithms(response: httpx2.Response) -> list[str] | None:
    """``dpop_signing_alg_values_supported`` of authorization server metadata (RFC 9449 §5.1), or None."""
    try:
        document = json.loads(response.content)
    except ValueError:
        return None
    algorithms = document.get("dpop_signing_alg_values_supported") if isinstance(document, dict) else None
    if not isinstance(algorithms, list):
        return None
    return [a for a in algorithms if isinstance(a, str)]


def _error_of(response: httpx2.Response) -> str | None:
    """The OAuth ``error`` of a JSON error response, else None."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, str) else None


def _is_step_up(response: httpx2.Response) -> bool:
    return response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"


def _is_challenge(response: httpx2.Response) -> bool:
    return response.status_code == 401 or _is_step_up(response)


_DPOP_ERRORS: Final = frozenset({"invalid_dpop_proof", "use_dpop_nonce"})
"""Token endpoint errors about a DPoP proof (RFC 9449 §5, §8): a nonce asked for again after one retry is one."""

_REWRITTEN_HEADERS: Final = frozenset({"content-length", "content-encoding", "transfer-encoding"})
"""Headers of a token response that no longer describe it once its body is rewritten (it was read, decoded)."""

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
        self.dpop = _DpopState(
            label=target.server_name,
            mode=target.config.dpop,
            storage=storage if isinstance(storage, DpopTokenStorage) else None,
        )
        bound = _BoundStorage(storage, self.dpop)
        self.provider = _make_provider(
            target,
            bound,
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
        self._principal: tuple[str, str] | None = None
        """The last access token seen by :meth:`principal`, and its digest (hashed once per token)."""

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

    def resource_headers(self, method: str, url: object, token: str) -> dict[str, str]:
        """The headers that present ``token`` on one request to the resource server.

        ``Authorization: Bearer``; for a DPoP-bound token, ``Authorization: DPoP`` and a fresh
        proof for this method and URL (``str(url)``), with the origin's nonce if it gave one.
        Nothing is signed unless the tokens in use are DPoP-bound.
        """
        key = self.dpop.resource_key
        if key is None:
            return {"Authorization": f"Bearer {token}"}
        nonces = self.dpop.nonces
        htu, origin = nonces.target(str(url))
        proof = key.proof(method, htu, access_token=token, nonce=nonces.get(origin))
        return {"Authorization": f"DPoP {token}", "DPoP": proof}

    def observe(self, url: object, status: int, headers: HeaderLookup) -> None:
        """What a resource server's answer says for DPoP: its nonce, and the schemes a 401 offers.

        Called for every answer to a request :meth:`resource_headers` presented; costs an
        attribute check while the tokens are not DPoP-bound and the answer is no 401.
        """
        dpop = self.dpop
        if status == 401:
            dpop.rs_schemes = challenge_schemes(headers.get("www-authenticate") or "")
        elif dpop.resource_key is None:
            return
        dpop.nonces.remember(dpop.nonces.target(str(url))[1], headers)

    def principal(self) -> str | None:
        """Who requests go out as now: a digest of the current access token, or ``None`` before there is one.

        The spec's authorization context ("a different access token requires a different
        cache"): a ``private`` answer cached for one token is never served to another, so a
        refresh, or a login as someone else, lists again. A digest, never the token: it may
        appear in cache keys and reprs.
        """
        if not provider_initialized(self.provider):
            return None
        tokens = self.provider.context.current_tokens
        token = tokens.access_token if tokens is not None else None
        if not token:
            return None
        seen = self._principal
        if seen is None or seen[0] is not token:
            seen = self._principal = (token, hashlib.sha256(token.encode()).hexdigest()[:32])
        return seen[1]

    # ------------------------------------------------------------------ the flow

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """:meth:`_flow`, with each request it hands out presented (:meth:`_present`) and its answer observed.

        A resource server's ``use_dpop_nonce`` challenge to a DPoP request is answered here,
        once per sending, with a proof carrying the nonce it gave; anything else goes back to
        the flow.
        """
        flow = self._flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                before = self._present(outgoing)
                response = yield outgoing
                self.observe(outgoing.url, response.status_code, response.headers)
                if before is not False and self._nonce_renewed(response, before):
                    self._present(outgoing)
                    response = yield outgoing
                    self.observe(outgoing.url, response.status_code, response.headers)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _present(self, request: httpx2.Request) -> str | bool | None:
        """Present the token the flow put in ``request`` (:meth:`resource_headers`).

        Returns the nonce the proof carries (None: none), or False when the request carries no
        proof.
        """
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "dpop") or not token:
            request.headers.pop("DPoP", None)
            return False
        headers = self.resource_headers(request.method, request.url, token)
        request.headers.update(headers)
        if "DPoP" not in headers:
            request.headers.pop("DPoP", None)
            return False
        return self.dpop.nonces.get(self.dpop.nonces.target(str(request.url))[1])

    def _nonce_renewed(self, response: httpx2.Response, sent: str | bool | None) -> bool:
        """A ``use_dpop_nonce`` challenge (RFC 9449 §9) with a nonce other than the one the proof carried."""
        if not is_nonce_challenge(response.status_code, response.headers):
            return False
        return response.headers.get("dpop-nonce") != sent

    async def _flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
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
        """A 401 the OAuth flow should answer: configured for OAuth, or a Bearer or DPoP challenge."""
        challenge = response.headers.get("WWW-Authenticate", "")
        return self.target.oauth is not None or bool({"bearer", "dpop"} & challenge_schemes(challenge))

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
        if isinstance(exc, OAuthTokenError) and self._oauth_error in _DPOP_ERRORS:
            return AuthorizationFailed(
                f"server {name!r}: the authorization server refused the DPoP proof of the token request"
                f" ({self._oauth_error}); if it also gives out bearer tokens, set config.oauth.dpop to false",
                server=name,
                oauth_error=self._oauth_error,
            )
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
        """Send a discovery, registration or token request through our own client.

        A token request is proved when DPoP is on for the server (:meth:`_token_request_key`),
        repeated once when the authorization server answers ``use_dpop_nonce`` with a nonce
        (RFC 9449 §8), and its answer's binding is kept for the tokens (:class:`_BoundStorage`).
        """
        shown = redact_url(str(request.url))
        grant = _grant_of(request)
        if grant is None:
            response = await self._send_once(request, shown)
        else:
            self.dpop.pending = None
            key = await self._token_request_key(grant)
            if key is None:
                response = await self._send_once(request, shown)
            else:
                response = await self._send_proved(request, key, shown)
        self._check(request, response, shown)
        return response

    async def _send_once(self, request: httpx2.Request, shown: str) -> httpx2.Response:
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(self.timeout))
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
        return response

    async def _send_proved(self, request: httpx2.Request, key: DpopKey, shown: str) -> httpx2.Response:
        """A token request with a proof of ``key``; a nonce challenge answered once; the answer's token type kept."""
        nonces = self.dpop.nonces
        htu, origin = nonces.target(str(request.url))
        nonce = nonces.get(origin)
        request.headers["DPoP"] = key.proof("POST", htu, nonce=nonce)
        response = await self._send_once(request, shown)
        fresh = nonces.remember(origin, response.headers)
        if fresh != nonce and is_nonce_challenge(response.status_code, response.headers, _error_of(response)):
            request.headers["DPoP"] = key.proof("POST", htu, nonce=fresh)
            response = await self._send_once(request, shown)
            nonces.remember(origin, response.headers)
        if response.status_code != 200:
            return response
        try:
            body = json.loads(response.content)
        except ValueError:
            return response
        token_type = body.get("token_type") if isinstance(body, dict) else None
        if not isinstance(token_type, str):
            return response
        binding = TokenBinding(jkt=key.jkt, token_type="DPoP" if token_type.lower() == "dpop" else token_type)
        self.dpop.pending = binding
        if not binding.bound:
            return response
        # The SDK's token model knows only Bearer; the binding says how the token is presented.
        body["token_type"] = "Bearer"
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _REWRITTEN_HEADERS]
        return httpx2.Response(200, headers=kept, content=json.dumps(body).encode(), request=request)

    async def _token_request_key(self, grant: str) -> DpopKey | None:
        """The key that proves this token request, or None for none (see :func:`decide_dpop`).

        A refresh of tokens obtained with the key is proved with it whatever the metadata says
        (after a restart the flow refreshes before any discovery, and a public client's
        refresh token is bound to that key, RFC 9449 §5).

        Raises:
            AuthorizationFailed: DPoP is needed (``dpop: true``, or the resource server requires
                it) but the servers accept no ES256 proof, or the token store cannot keep a key.
        """
        dpop = self.dpop
        if dpop.mode is DpopMode.OFF:
            return None
        if grant == "refresh_token" and dpop.binding is not None and dpop.accepts(dpop.binding):
            return dpop.key
        context = self.provider.context
        asm, prm = context.oauth_metadata, context.protected_resource_metadata
        decision = decide_dpop(
            dpop.mode,
            as_algorithms=dpop.as_algorithms if asm is not None else None,
            rs_algorithms=prm.dpop_signing_alg_values_supported if prm is not None else None,
            rs_required=bool(prm is not None and prm.dpop_bound_access_tokens_required),
            rs_challenge_schemes=dpop.rs_schemes,
        )
        name = self.target.server_name
        needed = dpop.mode is DpopMode.ON or (prm is not None and prm.dpop_bound_access_tokens_required)
        if decision.problem is not None:
            fix = (
                'set config.oauth.dpop to "auto" (or false) to go without DPoP where the servers allow it'
                if dpop.mode is DpopMode.ON
                else "the resource server requires DPoP-bound tokens (dpop_bound_access_tokens_required); its"
                " operators must accept ES256 proofs, or config.oauth.dpop cannot help"
            )
            raise AuthorizationFailed(
                f"server {name!r}: DPoP-bound tokens are needed but cannot be had: {decision.problem}; {fix}",
                server=name,
            )
        if not decision.use:
            return None
        key = await dpop.ensure_key()
        if key is None and needed:
            raise AuthorizationFailed(
                f"server {name!r} needs DPoP-bound tokens, but its token store cannot keep a DPoP key (a host's"
                " own TokenStorage); use FileTokenStore, MemoryTokenStore or KeyringTokenStore, or give the"
                " storage get_dpop_key/set_dpop_key/get_token_binding (mcp_actors._auth.token_store.DpopTokenStorage)",
                server=name,
            )
        if key is None:
            logger.debug("server %s: DPoP skipped: the token store cannot keep a key", name)
        return key

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
                    if model is OAuthMetadata:
                        self.dpop.as_algorithms = _dpop_algorithms(response)
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
