"""Inbound authentication of the gateway's HTTP front: who is asking, and may they open this profile.

One hook, :meth:`Authenticator.admit`, called by the front before any dispatch when the
gateway is configured with :class:`GatewayAuth`; a gateway without it pays one attribute test
per request. A request is admitted on a bearer token in ``Authorization``:

* an **API key** (``mcpa_...``, :mod:`._auth_keys`), looked up by its digest; it opens its
  profile, or everything when it has none;
* an **OAuth access token** (a JWT, :mod:`._auth_oauth`) for the gateway's resource URL, or
  for the profile's (``<resource>/<profile>``), checked against the issuer configured for that
  profile or for the whole gateway.

A request without a token, or with one that is unknown, expired or invalid, is answered 401
with ``WWW-Authenticate: Bearer`` (with ``resource_metadata`` and ``scope`` when OAuth is on,
as the MCP authorization spec says); a valid key of another profile, or a token lacking a
required scope, 403. The protected-resource metadata (RFC 9728) is served to anyone, before
the check. The profile a request opens is the path segment after the endpoint's path
(``/mcp/<profile>``; ``/mcp`` itself is the plain endpoint, which a key of the ``default``
profile opens too); the check runs before the front looks the profile up, so an unknown
profile costs an unauthenticated client a 401, never the list of profiles in a 404.

The client's token ends here: the gateway calls its servers with its own credentials (the
runtime's config), never with what a client sent. Tokens and keys never reach a log, an
error, a repr or an event; a refusal is logged with its reason only. stdio needs none of this:
its one client is the process that started the gateway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from mcp_actors._config.profiles import DEFAULT_PROFILE
from mcp_actors._wire.codec import encode
from mcp_actors.serve._auth_keys import KEY_PREFIX, ApiKeyTable, key_digest
from mcp_actors.serve._auth_oauth import (
    JwksCache,
    JwtVerifier,
    OAuthSettings,
    TokenRejected,
    metadata_url,
    resource_metadata,
)
from mcp_actors.serve._http import HttpConnection, HttpRequest

__all__ = ["ANONYMOUS", "AuthRefused", "Authenticator", "GatewayAuth", "Principal"]

logger = logging.getLogger("mcp_actors.serve")

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
_VERIFIERS_MAX: Final = 256
"""Profiles whose token verifier (and the tokens it checked) is kept."""
_JSON: Final = (("content-type", "application/json"),)
_STATUS: Final = {
    "invalid_token": 401,
    "invalid_request": 400,
    "insufficient_scope": 403,
    "temporarily_unavailable": 503,
}


@attrs.frozen(kw_only=True)
class Principal:
    """Who a request was admitted as: never their secret.

    Attributes:
        kind: ``"api_key"``, ``"oauth"``, or ``"anonymous"`` (a gateway without auth).
        name: The key's name, or the token's client (``client_id``, ``azp`` or ``sub``).
        profile: The one profile it opens; ``None``: every profile.
        scopes: The token's scopes (empty for a key).
        subject: The token's ``sub``, if any.
    """

    kind: Literal["api_key", "oauth", "anonymous"]
    name: str
    profile: str | None = None
    scopes: tuple[str, ...] = ()
    subject: str | None = None


ANONYMOUS: Final = Principal(kind="anonymous", name="anonymous")
"""The principal of every request to a gateway without inbound authentication."""


class AuthRefused(Exception):
    """A request the gateway does not admit.

    Attributes:
        status: 401 (no or bad credentials), 400 (a malformed request: two ``Authorization``
            headers), 403 (valid, but not for this), 503 (the issuer's keys could not be had).
        error: The RFC 6750 error code (``invalid_token``, ``insufficient_scope``), or ``None``
            when no credentials were sent.
        description: Why, for the client (never a secret).
        scopes: Scopes that would be enough (the challenge's ``scope``).
    """

    def __init__(self, status: int, error: str | None, description: str, scopes: tuple[str, ...] = ()) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.scopes = scopes


def _oauth_field(value: Any, where: str) -> OAuthSettings:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be an object with at least an issuer")
    try:
        return OAuthSettings.from_json(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def _profiles(value: Mapping[str, OAuthSettings]) -> dict[str, OAuthSettings]:
    return dict(value)


@attrs.frozen(kw_only=True)
class GatewayAuth:
    """How a gateway's HTTP clients authenticate (``serve_http(auth=...)``).

    At least one of ``api_keys``, ``oauth`` or ``profiles`` must be given; a bearer token that
    starts with ``mcpa_`` is taken as an API key, any other as an OAuth access token.

    Attributes:
        api_keys: The key table (``FileApiKeyTable()`` for the ``serve keys`` commands' file);
            ``None``: keys are not accepted.
        oauth: The issuer whose tokens open the whole gateway (and every profile without its
            own issuer); ``None``: no OAuth but per profile.
        profiles: An issuer per profile, for tokens of that profile's resource only.
    """

    api_keys: ApiKeyTable | None = None
    oauth: OAuthSettings | None = None
    profiles: Mapping[str, OAuthSettings] = attrs.field(factory=dict, converter=_profiles)

    def __attrs_post_init__(self) -> None:
        if self.api_keys is None and self.oauth is None and not self.profiles:
            raise ValueError("GatewayAuth needs api_keys, oauth or profiles: else every request would be refused")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, api_keys: ApiKeyTable | None) -> GatewayAuth:
        """The config file's ``gateway.auth`` object.

        ``{"apiKeys": true, "oauth": {...}, "profiles": {"<name>": {"oauth": {...}}}}``; the
        table used when ``apiKeys`` is true is ``api_keys``.

        Raises:
            ValueError: A field is missing, unknown or malformed (the message names it).
        """
        unknown = sorted(set(data) - {"apiKeys", "oauth", "profiles"})
        if unknown:
            raise ValueError(f"gateway.auth: unknown field(s) {unknown}; known: apiKeys, oauth, profiles")
        use_keys = data.get("apiKeys", False)
        if not isinstance(use_keys, bool):
            raise ValueError("gateway.auth.apiKeys must be true or false")
        oauth = _oauth_field(data["oauth"], "gateway.auth.oauth") if data.get("oauth") is not None else None
        profiles: dict[str, OAuthSettings] = {}
        raw_profiles = data.get("profiles", {})
        if not isinstance(raw_profiles, Mapping):
            raise ValueError("gateway.auth.profiles must be an object: {profile name: {oauth: {...}}}")
        for name, entry in raw_profiles.items():
            if not isinstance(entry, Mapping) or set(entry) != {"oauth"}:
                raise ValueError(f"gateway.auth.profiles.{name} must be {{'oauth': {{...}}}}")
            profiles[name] = _oauth_field(entry["oauth"], f"gateway.auth.profiles.{name}.oauth")
        return cls(api_keys=api_keys if use_keys else None, oauth=oauth, profiles=profiles)


@attrs.define(eq=False)
class Authenticator:
    """Admits the requests of one HTTP front, as :class:`GatewayAuth` says.

    Args:
        settings: What is accepted.
        url: The gateway's endpoint URL as bound (``http://127.0.0.1:8000/mcp``): the default
            resource URL when ``settings.oauth.audience`` is not set.
        path: The endpoint's path (``/mcp``).
    """

    settings: GatewayAuth
    url: str
    path: str = "/mcp"
    _caches: dict[tuple[str, str | None], JwksCache] = attrs.field(factory=dict, init=False)
    _verifiers: dict[str | None, JwtVerifier | None] = attrs.field(factory=dict, init=False)

    @property
    def resource(self) -> str:
        """The whole gateway's resource URL (tokens' ``aud``)."""
        oauth = self.settings.oauth
        return oauth.audience if oauth is not None and oauth.audience else self.url

    def profile_resource(self, profile: str | None) -> str:
        """The resource URL of ``profile`` (``None``: the whole gateway's)."""
        if profile is None:
            return self.resource
        own = self.settings.profiles.get(profile)
        if own is not None and own.audience:
            return own.audience
        return self.resource.rstrip("/") + "/" + profile

    def profile_of(self, path: str) -> str | None:
        """The profile a request path opens: the segment after the endpoint's path (``None``: all)."""
        if path.startswith(self.path + "/"):
            rest = path[len(self.path) + 1 :]
            return rest.split("/", 1)[0] or None
        return None

    def _settings_for(self, profile: str | None) -> OAuthSettings | None:
        if profile is not None and profile in self.settings.profiles:
            return self.settings.profiles[profile]
        return self.settings.oauth

    def _keys_for(self, settings: OAuthSettings) -> JwksCache:
        ident = (settings.issuer, settings.jwks_uri)
        cache = self._caches.get(ident)
        if cache is None:
            cache = self._caches[ident] = JwksCache(settings)
        return cache

    def verifier(self, profile: str | None) -> JwtVerifier | None:
        """The verifier of tokens for ``profile`` (``None``: no OAuth there)."""
        if profile in self._verifiers:
            return self._verifiers[profile]
        settings = self._settings_for(profile)
        verifier = None
        if settings is not None:
            audiences = [self.profile_resource(profile)]
            if profile is not None and settings is self.settings.oauth:
                audiences.append(self.resource)  # a token for the whole gateway opens each profile
            verifier = JwtVerifier(settings, audiences, self._keys_for(settings))
        if len(self._verifiers) >= _VERIFIERS_MAX:
            self._verifiers.pop(next(iter(self._verifiers)))  # path names are the client's: bounded
        self._verifiers[profile] = verifier
        return verifier

    # ------------------------------------------------------------------ the hook

    async def authenticate(self, request: HttpRequest, profile: str | None) -> Principal:
        """Who sent ``request``, for ``profile``.

        Raises:
            AuthRefused: Not admitted (the status and challenge to answer with).
        """
        authorization = request.headers.get("authorization")
        if authorization is None:
            raise AuthRefused(401, None, "authentication required: send Authorization: Bearer <token>")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            # RFC 6750 §3.1: credentials of another scheme are no credentials here (no error code).
            raise AuthRefused(401, None, "authentication required: send Authorization: Bearer <token>")
        if sum(1 for name, _ in request.raw_headers if name == "authorization") > 1:
            raise AuthRefused(400, "invalid_request", "send one Authorization header")
        keys = self.settings.api_keys
        if keys is not None and token.startswith(KEY_PREFIX):
            return await self._key(keys, token, profile)
        verifier = self.verifier(profile)
        if verifier is None:
            raise AuthRefused(401, "invalid_token", "unknown API key")
        try:
            access = await verifier.check(token)
        except TokenRejected as exc:
            raise AuthRefused(_STATUS.get(exc.error, 401), exc.error, exc.description) from None
        matched_profile = profile if access.resource == self.profile_resource(profile) else None
        return Principal(
            kind="oauth",
            name=access.client_id,
            profile=matched_profile,
            scopes=tuple(access.scopes),
            subject=access.subject,
        )

    async def _key(self, keys: ApiKeyTable, token: str, profile: str | None) -> Principal:
        entry = await keys.lookup(key_digest(token))
        if entry is None:
            raise AuthRefused(401, "invalid_token", "unknown API key")
        if entry.expired(time.time()):
            raise AuthRefused(401, "invalid_token", f"the API key {entry.name!r} has expired")
        if not _opens(entry.profile, profile):
            opened = "the whole gateway" if profile is None else f"profile {profile!r}"
            raise AuthRefused(
                403, "insufficient_scope", f"the API key {entry.name!r} opens profile {entry.profile!r}, not {opened}"
            )
        return Principal(kind="api_key", name=entry.name, profile=entry.profile)

    async def admit(self, conn: HttpConnection, request: HttpRequest) -> Principal | None:
        """The front's hook: the principal of an admitted request; ``None`` when this answered it.

        Serves the protected-resource metadata; answers a refusal with its status and challenge.
        """
        if request.path.startswith(WELL_KNOWN):
            await self._metadata(conn, request)
            return None
        profile = self.profile_of(request.path)
        try:
            return await self.authenticate(request, profile)
        except AuthRefused as refused:
            logger.info("refused a request to %s: %s", request.path, refused.description)
            await self._refuse(conn, refused, profile)
            return None

    def challenge(self, refused: AuthRefused, profile: str | None) -> str:
        """The ``WWW-Authenticate`` value for ``refused`` (RFC 6750 §3; RFC 9728 §5.1)."""
        parts: list[str] = []
        settings = self._settings_for(profile)
        if settings is not None:
            parts.append(f'resource_metadata="{metadata_url(self.profile_resource(profile))}"')
            if settings.scopes:
                parts.append(f'scope="{" ".join(settings.scopes)}"')
        else:
            parts.append('realm="mcp-actors"')
        if refused.error is not None:
            parts.append(f'error="{refused.error}"')
            parts.append(f'error_description="{_quoted(refused.description)}"')
        return "Bearer " + ", ".join(parts)

    async def _refuse(self, conn: HttpConnection, refused: AuthRefused, profile: str | None) -> None:
        body: dict[str, Any] = {"error": refused.error or "invalid_token", "error_description": refused.description}
        headers: tuple[tuple[str, str], ...] = _JSON
        if refused.status in (400, 401, 403):
            headers = (*_JSON, ("www-authenticate", self.challenge(refused, profile)))
        await conn.respond(refused.status, headers, encode(body))

    async def _metadata(self, conn: HttpConnection, request: HttpRequest) -> None:
        if request.method != "GET":
            await conn.respond(405, (("allow", "GET"),))
            return
        rest = request.path[len(WELL_KNOWN) :]
        profile: str | None = None
        if rest in ("", self.path):
            profile = None
        elif rest.startswith(self.path + "/") and "/" not in rest[len(self.path) + 1 :]:
            profile = rest[len(self.path) + 1 :] or None
        else:
            await conn.respond(404, _JSON, encode({"error": "not_found"}))
            return
        settings = self._settings_for(profile)
        if settings is None:
            await conn.respond(404, _JSON, encode({"error": "not_found", "error_description": "no OAuth here"}))
            return
        document = resource_metadata(settings, self.profile_resource(profile))
        payload = document.model_dump_json(exclude_none=True).encode()
        # Public, and read by browser-based clients too (the SDK's metadata route allows any origin).
        headers = (*_JSON, ("cache-control", "max-age=300"), ("access-control-allow-origin", "*"))
        await conn.respond(200, headers, payload)


def _opens(key_profile: str | None, profile: str | None) -> bool:
    """Whether a key of ``key_profile`` opens the path of ``profile`` (``None``: the plain endpoint).

    A key without a profile opens every path; a key of profile P opens ``<path>/P``, and the plain
    endpoint too when P is the ``default`` profile (which the plain endpoint serves).
    """
    if key_profile is None or key_profile == profile:
        return True
    return key_profile == DEFAULT_PROFILE and profile is None


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', "'")
