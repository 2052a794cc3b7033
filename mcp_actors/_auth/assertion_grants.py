"""The assertion grants: enterprise-managed authorization and workload identity federation.

Both end at the MCP server's authorization server with the RFC 7523 JWT-bearer grant
(``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``, a JWT as ``assertion``). They
differ in where that JWT comes from:

* **identity_assertion** (SEP-990, enterprise-managed authorization): the user's ID token
  from single sign-on goes to the enterprise IdP in an RFC 8693 token exchange
  (``requested_token_type`` ID-JAG, ``audience`` the authorization server's issuer,
  ``resource`` the MCP server), and the Identity Assertion JWT Authorization Grant (ID-JAG)
  it answers is the assertion. The IdP's policy decides who may reach which server; nobody is
  asked to consent per server.
* **workload_identity** (SEP-1933, workload identity federation): the workload's own JWT from
  its platform (a Kubernetes projected service-account token, a cloud identity token) is the
  assertion. No secret is provisioned, no client is registered.

The JWT the client starts from (the ID token, or the workload's token) comes from
``config.oauth.assertionFile``, read again for every token request because platforms rotate
the file; from ``assertionEnv``, read at every token request too; or from the host's
``assertion_handler``, asked with an :class:`AssertionRequest`. It is never stored, logged or
quoted: only the access token the grant yields goes to the token store.

:class:`AssertionGrantProvider` is the SDK's :class:`~mcp.client.auth.OAuthClientProvider`
with its authorization step replaced, as the SDK's own client-credentials extensions do: the
discovery (RFC 9728, RFC 8414), the ``resource`` parameter and the token storage stay the
SDK's, and :class:`~mcp_actors._auth.oauth.ServerAuth` drives it like every other grant
(lock-free sends, one renewal for many 401s, typed failures). The SDK's
``IdentityAssertionOAuthProvider`` (``mcp.client.auth.extensions.identity_assertion``) does
the same second leg on another footing: it accepts the authorization server only as
configuration and keeps its tokens outside the provider context that ServerAuth reads. We
send what it sends (the ID-JAG with ``client_id`` and ``resource``; a confidential client's
secret), keep its trust rule as an option (``config.oauth.issuer``), and keep discovery,
which the enterprise-managed authorization spec names as the way to the authorization server.

**Where an assertion may go.** An assertion is a credential. It is sent only to a token
endpoint that the authorization server's metadata publishes, over https (plain http only on
this machine), and only to the configured ``issuer`` when there is one. Without one, a
workload token goes only to an authorization server that its ``aud`` claim names: a server
whose metadata pointed elsewhere would otherwise receive a token it could replay at the real
authorization server. An ID-JAG needs no such check: it is requested for the authorization
server it goes to, and its ``aud`` binds it there.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import attrs
import httpx2
import jwt
import trio
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.utils import handle_token_response_scopes, issuers_match
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata

from mcp_actors._config.files import read_config_file
from mcp_actors._config.record import OAuthConfig, OAuthGrant, is_loopback_host, redact_url
from mcp_actors._config.redact import redact_text
from mcp_actors.errors import (
    AuthorizationFailed,
    AuthorizationRequired,
    AuthorizationServerUnreachable,
    ConfigFileRefused,
    IdentityProviderRefused,
    McpActorsError,
)

__all__ = [
    "ID_JAG_TOKEN_TYPE",
    "ID_TOKEN_TYPE",
    "MAX_ASSERTION_BYTES",
    "TOKEN_EXCHANGE_GRANT",
    "AssertionGrantProvider",
    "AssertionHandler",
    "AssertionKind",
    "AssertionRequest",
    "exchange_id_token",
]

TOKEN_EXCHANGE_GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
"""RFC 8693's grant type, for the exchange at the IdP."""
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
"""The ``subject_token_type`` of an OpenID Connect ID token."""
ID_JAG_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id-jag"
"""The token type of an Identity Assertion JWT Authorization Grant."""

MAX_ASSERTION_BYTES: Final = 64 * 1024
"""The largest token read from a file, a variable or a handler (a JWT is a few KiB)."""
_MAX_RESPONSE_BYTES: Final = 64 * 1024
"""The largest token-exchange answer read from the IdP."""
_MAX_DESCRIPTION: Final = 200
"""Characters of a server's ``error_description`` quoted in our messages."""


class AssertionKind(enum.StrEnum):
    """Which token an :class:`AssertionRequest` asks the host for."""

    ID_TOKEN = "id_token"
    """The user's ID token from the enterprise IdP (identity_assertion): exchanged there for an ID-JAG."""
    WORKLOAD = "workload"
    """The workload's JWT from its platform (workload_identity): the grant's assertion itself."""


@attrs.frozen(kw_only=True)
class AssertionRequest:
    """What the runtime's ``assertion_handler`` is asked for, and for whom.

    Attributes:
        server_name: The server the token is for (its record name).
        kind: The user's ID token, or the workload's token.
        audience: The authorization server's issuer, where the grant ends (for a workload
            token: the ``aud`` a platform that mints tokens per audience should give it).
        resource: The MCP server's resource identifier (RFC 9728).
    """

    server_name: str
    kind: AssertionKind
    audience: str
    resource: str


AssertionHandler = Callable[[str, AssertionRequest], Awaitable[str]]
"""``async (server_id, request) -> token``: the host's source of ID tokens or workload tokens,
asked when the record names neither ``assertionFile`` nor ``assertionEnv``."""


class GrantTarget(Protocol):
    """The server a grant is for (:class:`~mcp_actors._auth.oauth.OAuthTarget` is one)."""

    @property
    def server_id(self) -> str: ...
    @property
    def server_name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def config(self) -> OAuthConfig: ...


SecretMethod = Callable[[OAuthMetadata | None], str]
"""Picks ``client_secret_basic`` or ``client_secret_post`` from the authorization server's metadata."""


# ----------------------------------------------------------------------------- helpers


def _secure(url: str) -> bool:
    """https, or plain http to this machine: the only ways a credential may travel."""
    try:
        parts = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError):
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.host))


def _oauth_error(body: bytes, secrets: tuple[str, ...]) -> tuple[str | None, str]:
    """The ``error`` and a short, redacted ``error_description`` of an OAuth error answer."""
    try:
        document = json.loads(body)
    except ValueError:
        return None, ""
    if not isinstance(document, dict):
        return None, ""
    error = document.get("error")
    description = document.get("error_description")
    text = description if isinstance(description, str) else ""
    text = "".join(ch if ch.isprintable() else " " for ch in text)[:_MAX_DESCRIPTION]
    # An error code is a short ASCII token (RFC 6749 section 5.2); anything else is not one.
    code = (
        error if isinstance(error, str) and 0 < len(error) <= 64 and error.isascii() and error.isprintable() else None
    )
    return code, redact_text(text, secrets)


def _refusal(error: str | None, description: str, status: int) -> str:
    """``invalid_grant: the assertion has expired`` (or ``HTTP 500``) for a message."""
    what = error or f"HTTP {status}"
    return f"{what}: {description}" if description else what


class _TooLarge(Exception):
    """An answer longer than its bound: not read further."""


async def _read_bounded(response: httpx2.Response, limit: int) -> bytes:
    """The body, decoded, of at most ``limit`` bytes (a compressed bomb stops at the bound too)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise _TooLarge(f"more than {limit // 1024} KiB")
    return bytes(body)


def _audiences(token: str) -> list[str]:
    """The ``aud`` values of a JWT, read without verifying it (only to decide where it may go)."""
    try:
        aud = jwt.decode(token, options={"verify_signature": False}).get("aud")
    except jwt.PyJWTError:
        return []
    if isinstance(aud, str):
        return [aud]
    return [item for item in aud if isinstance(item, str)] if isinstance(aud, list) else []


# ----------------------------------------------------------------------------- the token exchange


async def exchange_id_token(
    *,
    server: str,
    config: OAuthConfig,
    id_token: str,
    audience: str,
    resource: str,
    scope: str | None,
    timeout: float,
) -> str:
    """Exchange the user's ID token at the enterprise IdP for an ID-JAG (RFC 8693, SEP-990 section 4).

    The client authenticates with ``client_secret_post`` (``client_id`` always in the form,
    ``client_secret`` when ``idpClientSecret`` is set), as the spec's example does. Redirects
    are not followed: the form carries the ID token and the secret.

    Args:
        server: The server's name, for messages.
        config: Its ``config.oauth`` (``idpTokenEndpoint``, ``idpClientId``, ``idpClientSecret``).
        id_token: The subject token.
        audience: The authorization server's issuer (the ID-JAG's ``aud``).
        resource: The MCP server's resource identifier (the ID-JAG's ``resource``).
        scope: The scopes to ask for, or None.
        timeout: Bound, in seconds, for the request.

    Returns:
        The ID-JAG.

    Raises:
        IdentityProviderRefused: The IdP answered an error.
        AuthorizationFailed: Its answer is not an ID-JAG.
        AuthorizationServerUnreachable: The IdP could not be reached.
    """
    assert config.idp_token_endpoint is not None and config.idp_client_id is not None
    form = {
        "grant_type": TOKEN_EXCHANGE_GRANT,
        "requested_token_type": ID_JAG_TOKEN_TYPE,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN_TYPE,
        "audience": audience,
        "resource": resource,
        "client_id": config.idp_client_id,
    }
    if scope:
        form["scope"] = scope
    if config.idp_client_secret:
        form["client_secret"] = config.idp_client_secret
    shown = redact_url(config.idp_token_endpoint)
    secrets = (id_token, *config.secret_values())
    try:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(timeout), follow_redirects=False) as client,
            client.stream(
                "POST", config.idp_token_endpoint, data=form, headers={"Accept": "application/json"}
            ) as answer,
        ):
            body = await _read_bounded(answer, _MAX_RESPONSE_BYTES)
    except httpx2.TransportError as exc:
        raise AuthorizationServerUnreachable(
            f"server {server!r}: the identity provider could not be reached (POST {shown}: {type(exc).__name__});"
            " check the network and config.oauth.idpTokenEndpoint, then reconnect",
            server=server,
        ) from None
    except _TooLarge as exc:
        raise AuthorizationFailed(
            f"server {server!r}: the identity provider at {shown} answered {exc}; it was not read; check"
            " config.oauth.idpTokenEndpoint",
            server=server,
        ) from None
    if answer.status_code != 200:
        error, description = _oauth_error(body, secrets)
        raise IdentityProviderRefused(
            f"server {server!r}: the identity provider refused to exchange the ID token for an ID-JAG"
            f" ({_refusal(error, description, answer.status_code)}); sign the user in again for a fresh ID"
            " token, or check config.oauth.idpClientId and idpClientSecret and the IdP's policy for this"
            " server, then reconnect",
            server=server,
            oauth_error=error,
        )
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    jag = document.get("access_token") if isinstance(document, dict) else None
    issued = document.get("issued_token_type") if isinstance(document, dict) else None
    if not isinstance(jag, str) or not jag or issued != ID_JAG_TOKEN_TYPE:
        got = "no access_token" if not isinstance(jag, str) or not jag else f"issued_token_type {issued!r}"
        raise AuthorizationFailed(
            f"server {server!r}: the identity provider at {shown} did not answer with an ID-JAG ({got}); it must"
            f" support the token exchange for {ID_JAG_TOKEN_TYPE}",
            server=server,
        )
    return jag


# ----------------------------------------------------------------------------- the provider


class AssertionGrantProvider(OAuthClientProvider):
    """The SDK's OAuth provider for the JWT-bearer grant, with the assertion from the record's source.

    Args:
        target: The server.
        storage: Its SDK ``TokenStorage``.
        handler: The host's ``assertion_handler``, or None.
        secret_method: Picks the client-secret method from the server's metadata (one rule,
            kept in :mod:`mcp_actors._auth.oauth`).
        timeout: Bound, in seconds, for the request to the IdP.
    """

    def __init__(
        self,
        target: GrantTarget,
        storage: TokenStorage,
        *,
        handler: AssertionHandler | None,
        secret_method: SecretMethod,
        timeout: float = 30.0,
    ) -> None:
        config = target.config
        assert config.grant in (OAuthGrant.IDENTITY_ASSERTION, OAuthGrant.WORKLOAD_IDENTITY)
        metadata = OAuthClientMetadata(
            redirect_uris=None,
            grant_types=[JWT_BEARER_GRANT_TYPE],
            token_endpoint_auth_method="client_secret_basic" if config.client_secret else "none",
            scope=" ".join(config.scopes) or None,
        )
        super().__init__(target.url, metadata, storage)
        self.target = target
        self.handler = handler
        self.secret_method = secret_method
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"AssertionGrantProvider(server={self.target.server_name!r}, grant={self.target.config.grant.value!r})"

    @property
    def _name(self) -> str:
        return self.target.server_name

    @property
    def _grant(self) -> OAuthGrant:
        return self.target.config.grant

    # ------------------------------------------------------------------ the SDK's hooks

    async def _initialize(self) -> None:
        """Stored tokens, and the configured client: never a registration.

        The SDK registers a client when it holds none. This grant needs no registration, and a
        workload may have no client id at all (the assertion names it, RFC 7523 section 3.1):
        then a client with an empty id stands in, and no ``client_id`` is sent.
        """
        config = self.target.config
        self.context.current_tokens = await self.context.storage.get_tokens()
        fields: dict[str, Any] = {
            "client_id": config.client_id or "",
            "client_secret": config.client_secret,
            "redirect_uris": None,
            "grant_types": [JWT_BEARER_GRANT_TYPE],
            "token_endpoint_auth_method": "client_secret_basic" if config.client_secret else "none",
        }
        # Validation would refuse the empty id that stands for "none" (it reads "" as absent).
        make = OAuthClientInformationFull if config.client_id else OAuthClientInformationFull.model_construct
        self.context.client_info = make(**fields)
        self._initialized = True

    def _select_authorization_server(self, advertised: list[str]) -> str:
        """The configured issuer when the server advertises it; any other choice is refused."""
        issuer = self.target.config.issuer
        if issuer is None:
            return advertised[0]
        for server in advertised:
            if issuers_match(server, issuer):
                return server
        shown = ", ".join(repr(redact_url(server)) for server in advertised)
        raise AuthorizationFailed(
            f"server {self._name!r}: its protected-resource metadata names {shown} as authorization server, not"
            f" config.oauth.issuer {redact_url(issuer)!r}; the assertion goes only to the configured issuer;"
            " fix config.oauth.issuer or the server",
            server=self._name,
        )

    async def _perform_authorization(self) -> httpx2.Request:
        """The JWT-bearer token request, its assertion fetched (and, for an ID-JAG, exchanged) now."""
        metadata = self._checked_metadata()
        config = self.target.config
        scope = " ".join(config.scopes) or self.context.client_metadata.scope
        self.context.client_metadata.scope = scope
        resource = self.context.get_resource_url()
        issuer = str(metadata.issuer)
        if self._grant is OAuthGrant.IDENTITY_ASSERTION:
            audience, exchange_resource = config.audience or issuer, config.resource or resource
            id_token, _ = await self._read_token(AssertionKind.ID_TOKEN, audience, exchange_resource)
            assertion = await exchange_id_token(
                server=self._name,
                config=config,
                id_token=id_token,
                audience=audience,
                resource=exchange_resource,
                scope=scope,
                timeout=self.timeout,
            )
        else:
            assertion, source = await self._read_token(AssertionKind.WORKLOAD, issuer, resource)
            self._check_audience(assertion, metadata, source)
        data = {"grant_type": JWT_BEARER_GRANT_TYPE, "assertion": assertion}
        info = self.context.client_info
        assert info is not None
        if info.client_secret:
            method = self.secret_method(metadata)
            if info.token_endpoint_auth_method != method:
                info = self.context.client_info = info.model_copy(update={"token_endpoint_auth_method": method})
        if info.client_id:
            data["client_id"] = info.client_id
        if self.context.should_include_resource_param(self.context.protocol_version):
            data["resource"] = resource
        if scope:
            data["scope"] = scope
        data, headers = self.context.prepare_token_auth(data, {"Content-Type": "application/x-www-form-urlencoded"})
        self._sent = (assertion,)
        return httpx2.Request("POST", str(metadata.token_endpoint), data=data, headers=headers)

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        """Store the tokens; a refusal is one typed error, never a retry or another grant.

        A client without an id cannot refresh (RFC 6749 section 6 needs one): its refresh
        token is dropped, and a new assertion serves instead.
        """
        if response.status_code not in (200, 201):
            body = await response.aread()
            error, description = _oauth_error(body, (*self._sent, *self.target.config.secret_values()))
            raise AuthorizationFailed(
                f"server {self._name!r}: the authorization server refused the {self._grant.value} grant"
                f" ({_refusal(error, description, response.status_code)}); {self._hint(error)}",
                server=self._name,
                oauth_error=error,
            )
        tokens = await handle_token_response_scopes(response)
        if tokens.scope is None:
            tokens.scope = self.context.client_metadata.scope
        info = self.context.client_info
        if info is None or not info.client_id:
            tokens.refresh_token = None
        self.context.current_tokens = tokens
        self.context.update_token_expiry(tokens)
        await self.context.storage.set_tokens(tokens)

    async def _refresh_token(self) -> httpx2.Request:
        info = self.context.client_info
        if info is not None and info.client_secret:
            method = self.secret_method(self.context.oauth_metadata)
            self.context.client_info = info.model_copy(update={"token_endpoint_auth_method": method})
        return await super()._refresh_token()

    # ------------------------------------------------------------------ ours

    _sent: tuple[str, ...] = ()

    def _checked_metadata(self) -> OAuthMetadata:
        """The authorization server's metadata, if an assertion may go to its token endpoint."""
        metadata = self.context.oauth_metadata
        issuer = self.target.config.issuer
        if metadata is None:
            raise AuthorizationFailed(
                f"server {self._name!r}: no authorization server metadata was found (RFC 8414); the"
                f" {self._grant.value} grant sends its assertion only to a token endpoint the authorization server"
                " publishes; the server or its authorization server must publish metadata",
                server=self._name,
            )
        if issuer is not None and not issuers_match(str(metadata.issuer), issuer):
            raise AuthorizationFailed(
                f"server {self._name!r}: the authorization server's metadata names the issuer"
                f" {redact_url(str(metadata.issuer))!r}, not config.oauth.issuer {redact_url(issuer)!r}; the"
                " assertion goes only to the configured issuer; fix config.oauth.issuer or the server",
                server=self._name,
            )
        endpoint = str(metadata.token_endpoint)
        if not _secure(endpoint):
            raise AuthorizationFailed(
                f"server {self._name!r}: the authorization server's token endpoint {redact_url(endpoint)!r} is not"
                " https; an assertion is a credential and travels only over https (plain http only on this"
                " machine); the authorization server must publish an https endpoint",
                server=self._name,
            )
        return metadata

    def _check_audience(self, token: str, metadata: OAuthMetadata, source: str) -> None:
        """A workload token goes only to an authorization server its ``aud`` names (or the configured issuer)."""
        if self.target.config.issuer is not None:
            return  # the metadata was checked against it
        issuer, endpoint = str(metadata.issuer), str(metadata.token_endpoint)
        audiences = _audiences(token)
        if any(issuers_match(aud, issuer) or aud == endpoint for aud in audiences):
            return
        named = ", ".join(repr(redact_url(aud)) for aud in audiences) or "no audience it names"
        raise AuthorizationFailed(
            f"server {self._name!r}: the workload token from {source} is for {named}, not for the authorization"
            f" server {redact_url(issuer)!r} that the server's metadata names; it was not sent; set"
            " config.oauth.issuer to the authorization server the token is for (then it goes only there), or"
            f" have the platform issue it for {redact_url(issuer)!r}",
            server=self._name,
        )

    def _hint(self, error: str | None) -> str:
        """What to do about a refused grant, by its OAuth error."""
        if error == "invalid_grant":
            if self._grant is OAuthGrant.WORKLOAD_IDENTITY:
                return (
                    "the workload token was not accepted (expired, issued for another audience, or its issuer is"
                    " not trusted there); check the token the platform provides and the authorization server's"
                    " trust in its issuer"
                )
            return (
                "the ID-JAG was not accepted (the IdP is not trusted there, or the ID-JAG names another client"
                " or resource); check config.oauth.clientId and the IdP's configuration for this server"
            )
        if error in ("invalid_client", "unauthorized_client"):
            return "check config.oauth.clientId and clientSecret: this client may not use the jwt-bearer grant there"
        if error == "invalid_scope":
            return "the grant does not allow the scopes asked for; change config.oauth.scopes"
        if error == "unsupported_grant_type":
            return "the authorization server does not take the jwt-bearer grant; this grant cannot reach the server"
        return "fix config.oauth or the authorization server, then reconnect"

    async def _read_token(self, kind: AssertionKind, audience: str, resource: str) -> tuple[str, str]:
        """The token to start from, and where it came from (for messages): the file, the variable or the host."""
        config = self.target.config
        what = "the user's ID token" if kind is AssertionKind.ID_TOKEN else "the workload's token"
        if config.assertion_file is not None:
            source = f"config.oauth.assertionFile {config.assertion_file!r}"
            text = await self._read_file(config.assertion_file, source)
        elif config.assertion_env is not None:
            source = f"config.oauth.assertionEnv {config.assertion_env}"
            text = os.environ.get(config.assertion_env, "")
            if not text.strip():
                state = "not set" if config.assertion_env not in os.environ else "empty"
                raise AuthorizationFailed(
                    f"server {self._name!r}: {source} is {state} in this process's environment; set it to"
                    f" {what}, or point config.oauth.assertionFile at a file that holds it",
                    server=self._name,
                )
        elif self.handler is not None:
            source = "the runtime's assertion_handler"
            request = AssertionRequest(server_name=self._name, kind=kind, audience=audience, resource=resource)
            text = await self._ask_handler(self.handler, request)
        else:
            raise AuthorizationRequired(
                f"server {self._name!r} needs {what} for its {self._grant.value} grant: set"
                " config.oauth.assertionFile or assertionEnv, or give the runtime an assertion_handler, then"
                " reconnect",
                server=self._name,
            )
        token = text.strip()
        if not token or len(token) > MAX_ASSERTION_BYTES or any(ch.isspace() for ch in token):
            raise AuthorizationFailed(
                f"server {self._name!r}: {source} does not hold one token (it is empty, longer than"
                f" {MAX_ASSERTION_BYTES // 1024} KiB, or has spaces inside); it must hold {what}, nothing else",
                server=self._name,
            )
        return token, source

    async def _read_file(self, path: str, source: str) -> str:
        def read() -> bytes:
            expanded = os.path.expanduser(path)
            return read_config_file(expanded, what="token file", fix="point it at the file", limit=MAX_ASSERTION_BYTES)

        try:
            # A worker thread: a token on a network file system must not stall the event loop.
            return (await trio.to_thread.run_sync(read)).decode("utf-8")
        except ConfigFileRefused as exc:
            problem = f"{exc.reason}; it was not read"
        except FileNotFoundError:
            problem = "does not exist"
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"cannot be read ({exc.strerror if isinstance(exc, OSError) and exc.strerror else 'not text'})"
        raise AuthorizationFailed(
            f"server {self._name!r}: {source} {problem}; point it at the file the token is written to, readable by"
            " this process",
            server=self._name,
        )

    async def _ask_handler(self, handler: AssertionHandler, request: AssertionRequest) -> str:
        try:
            text: Any = await handler(self.target.server_id, request)
        except McpActorsError:
            raise
        except Exception as exc:
            raise AuthorizationFailed(
                f"server {self._name!r}: the runtime's assertion_handler failed ({type(exc).__name__}) when asked"
                f" for the {request.kind.value} token; fix the host's handler, then reconnect",
                server=self._name,
            ) from exc
        if not isinstance(text, str):
            raise AuthorizationFailed(
                f"server {self._name!r}: the runtime's assertion_handler returned {type(text).__name__}, not the"
                " token as a string",
                server=self._name,
            )
        return text
