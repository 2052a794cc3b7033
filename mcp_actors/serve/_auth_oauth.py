"""The gateway as an OAuth 2.1 protected resource: JWT access tokens checked against the issuer's JWKS.

What the MCP authorization spec asks of a server, and how it is met here:

* **Protected resource metadata** (RFC 9728): :func:`resource_metadata` builds the document
  (the SDK's :class:`~mcp.shared.auth.ProtectedResourceMetadata`) naming the authorization
  server(s) and the scopes; the front serves it at ``/.well-known/oauth-protected-resource``
  plus the endpoint's path (``.../mcp``, ``.../mcp/<profile>``), and the root form too.
* **Access tokens** are JWTs (RFC 9068) signed by the issuer with a key from its JWKS:
  :class:`JwtVerifier` checks the signature (asymmetric algorithms only: ``none`` and HMAC
  are refused), ``iss``, ``aud`` (RFC 8707: the gateway's resource URL, or the profile's),
  ``exp`` and ``nbf`` (with a small leeway), and the required scopes (``scope`` or ``scp``).
  It is an SDK :class:`~mcp.server.auth.provider.TokenVerifier` too.
* **The JWKS** (:class:`JwksCache`) is fetched over HTTP with the SDK's async client, never
  blocking the event loop: at first use, again when it is older than ``max_age``, and at
  once for a token whose ``kid`` it does not know (a rotated key), but at most once every
  ``min_refetch`` seconds so tokens with made-up ``kid`` values cannot make the gateway
  hammer the issuer. Concurrent misses share one fetch. The document is bounded (1 MiB, 100
  keys, ``fetch_timeout``). Without a configured ``jwks_uri`` it is found in the issuer's
  metadata (RFC 8414, then OpenID discovery).

A token is never logged, kept, or put into an error or a repr; an error names the rule broken.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import attrs
import httpx2
import jwt
import trio
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.shared.auth import ProtectedResourceMetadata
from mcp.shared.auth_utils import resource_url_from_server_url

__all__ = [
    "DEFAULT_ALGORITHMS",
    "JwksCache",
    "JwtVerifier",
    "OAuthSettings",
    "TokenRejected",
    "resource_metadata",
]

logger = logging.getLogger("mcp_actors.serve")

DEFAULT_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""Signature algorithms accepted by default: asymmetric only (an HMAC key would have to be shared)."""
_MAX_JWKS: Final = 1024 * 1024
_MAX_KEYS: Final = 100
_VERIFIED_MAX: Final = 1024
"""Tokens a verifier remembers as checked (a client sends the same token with every request)."""
_VERIFIED_TTL: Final = 60.0
"""Seconds a checked token is taken without a new signature check (never past its ``exp``)."""


def _http_url(instance: Any, attribute: Any, value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        raise ValueError(f"{attribute.name} must be an http(s) URL without a fragment, got {value!r}")


def _strs(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _urls(instance: Any, attribute: Any, value: tuple[str, ...]) -> None:
    for url in value:
        _http_url(instance, attribute, url)


@attrs.frozen(kw_only=True)
class OAuthSettings:
    """How tokens for the gateway (or one profile) are checked.

    Attributes:
        issuer: The authorization server's issuer identifier (the tokens' ``iss``).
        audience: The resource URL tokens must be issued for (their ``aud``, RFC 8707): the
            public URL clients use (``https://gw.example/mcp``). ``None``: the gateway's own
            URL (right when clients reach it directly, wrong behind a proxy). For a profile,
            ``None`` means the gateway's resource URL plus ``/<profile>``.
        scopes: Scopes every token must carry (all of them); also advertised.
        jwks_uri: Where the issuer's keys are; ``None``: found in the issuer's metadata.
        authorization_servers: What the metadata names; default ``(issuer,)``.
        algorithms: Signature algorithms accepted.
        leeway: Seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
        jwks_refetch: Least seconds between two fetches of the issuer's keys: a token with an
            unknown ``kid`` within that time is refused from the cache.
        jwks_max_age: Seconds a fetched key set is used before it is fetched again.
    """

    issuer: str = attrs.field(validator=_http_url)
    audience: str | None = attrs.field(default=None, validator=attrs.validators.optional(_http_url))
    scopes: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    jwks_uri: str | None = attrs.field(default=None, validator=attrs.validators.optional(_http_url))
    authorization_servers: tuple[str, ...] = attrs.field(default=(), converter=_strs, validator=_urls)
    algorithms: tuple[str, ...] = attrs.field(default=DEFAULT_ALGORITHMS, converter=_strs)
    leeway: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    jwks_refetch: float = attrs.field(default=10.0, validator=attrs.validators.ge(0))
    jwks_max_age: float = attrs.field(default=300.0, validator=attrs.validators.gt(0))

    def __attrs_post_init__(self) -> None:
        weak = [alg for alg in self.algorithms if alg == "none" or alg.startswith("HS")]
        if weak or not self.algorithms:
            raise ValueError(f"algorithms must be asymmetric signature algorithms, got {list(self.algorithms)!r}")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OAuthSettings:
        """Read the config file's form (camelCase: ``issuer``, ``audience``, ``scopes``, ``jwksUri``, ...)."""
        known = {
            "issuer",
            "audience",
            "scopes",
            "jwksUri",
            "authorizationServers",
            "algorithms",
            "leeway",
            "jwksRefetch",
            "jwksMaxAge",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown oauth setting(s) {unknown}; known: {sorted(known)}")
        if not isinstance(data.get("issuer"), str):
            raise ValueError("oauth.issuer must be the issuer's URL (a string)")
        return cls(
            issuer=data["issuer"],
            audience=data.get("audience"),
            scopes=tuple(_strings(data.get("scopes", []), "scopes")),
            jwks_uri=data.get("jwksUri"),
            authorization_servers=tuple(_strings(data.get("authorizationServers", []), "authorizationServers")),
            algorithms=tuple(_strings(data.get("algorithms", list(DEFAULT_ALGORITHMS)), "algorithms")),
            leeway=float(data.get("leeway", 30.0)),
            jwks_refetch=float(data.get("jwksRefetch", 10.0)),
            jwks_max_age=float(data.get("jwksMaxAge", 300.0)),
        )


def _strings(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"oauth.{name} must be a list of strings")
    return value


def resource_metadata(settings: OAuthSettings, resource: str) -> ProtectedResourceMetadata:
    """The RFC 9728 document of ``resource`` (a URL) protected by ``settings``' issuer."""
    servers = settings.authorization_servers or (settings.issuer,)
    return ProtectedResourceMetadata.model_validate(
        {
            "resource": resource,
            "authorization_servers": list(servers),
            "scopes_supported": list(settings.scopes) or None,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-actors gateway",
        }
    )


def metadata_url(resource: str) -> str:
    """Where the metadata of ``resource`` is served (RFC 9728 §3.1: the well-known path before the resource's)."""
    return str(build_resource_metadata_url(resource))  # type: ignore[arg-type]  # a str URL validates


class TokenRejected(Exception):
    """A bearer token the gateway does not take.

    Attributes:
        error: The RFC 6750 error code: ``invalid_token`` (401) or ``insufficient_scope`` (403),
            or ``temporarily_unavailable`` when the issuer's keys could not be had (503).
        description: What rule the token broke (never the token).
    """

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


class JwksCache:
    """The issuer's signing keys, fetched over HTTP and kept for ``max_age`` seconds.

    Args:
        settings: The issuer, and the JWKS URL if configured.
        max_age: Seconds a fetched key set is used before it is fetched again (default:
            ``settings.jwks_max_age``).
        min_refetch: Least seconds between two fetches (an unknown ``kid`` waits for the next;
            default: ``settings.jwks_refetch``).
        fetch_timeout: Seconds one fetch (discovery and keys) may take.
        http: The client to fetch with (tests); default: one of the SDK's, made on first use.
    """

    def __init__(
        self,
        settings: OAuthSettings,
        *,
        max_age: float | None = None,
        min_refetch: float | None = None,
        fetch_timeout: float = 10.0,
        http: httpx2.AsyncClient | None = None,
    ) -> None:
        self.settings = settings
        self.max_age = settings.jwks_max_age if max_age is None else max_age
        self.min_refetch = settings.jwks_refetch if min_refetch is None else min_refetch
        self.fetch_timeout = fetch_timeout
        self.fetches = 0
        """How many times the key set was fetched (a figure to watch, and for tests)."""
        self._http = http
        self._jwks_uri = settings.jwks_uri
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = trio.Lock()

    def __repr__(self) -> str:
        return f"JwksCache(issuer={self.settings.issuer!r}, keys={len(self._keys)}, fetches={self.fetches})"

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key ``kid`` names (``None``: the only key), fetching the set when it is stale or lacks it.

        Raises:
            TokenRejected: ``temporarily_unavailable``: the key set could not be fetched.
        """
        now = time.monotonic()
        fresh = self._fetched_at is not None and now - self._fetched_at < self.max_age
        found = self._pick(kid)
        if fresh and found is not None:
            return found
        async with self._lock:
            # Another task may have fetched while this one waited for the lock.
            found = self._pick(kid)
            now = time.monotonic()
            fetched = self._fetched_at
            if fetched is not None and now - fetched < self.max_age and found is not None:
                return found
            if fetched is not None and now - fetched < self.min_refetch:
                return found  # an unknown kid waits for the next allowed fetch
            await self._fetch()
            return self._pick(kid)

    def _pick(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def _fetch(self) -> None:
        try:
            with trio.fail_after(self.fetch_timeout):
                http = self._http or httpx2.AsyncClient(timeout=self.fetch_timeout, follow_redirects=False)
                try:
                    if self._jwks_uri is None:
                        self._jwks_uri = await self._discover(http)
                    document = await _get_json(http, self._jwks_uri)
                finally:
                    if self._http is None:
                        await http.aclose()
        except (trio.TooSlowError, httpx2.HTTPError, ValueError, OSError) as exc:
            logger.warning("could not fetch the signing keys of %s: %s", self.settings.issuer, exc)
            raise TokenRejected(
                "temporarily_unavailable", "the issuer's signing keys could not be fetched; retry later"
            ) from None
        finally:
            self.fetches += 1
        self._fetched_at = time.monotonic()
        self._keys = _parse_jwks(document)
        logger.info("fetched %d signing key(s) of %s", len(self._keys), self.settings.issuer)

    async def _discover(self, http: httpx2.AsyncClient) -> str:
        issuer = self.settings.issuer.rstrip("/")
        parts = urlsplit(issuer)
        origin = f"{parts.scheme}://{parts.netloc}"
        candidates = [
            f"{origin}/.well-known/oauth-authorization-server{parts.path}",
            f"{issuer}/.well-known/openid-configuration",
        ]
        for url in candidates:
            try:
                document = await _get_json(http, url)
            except (httpx2.HTTPError, ValueError):
                continue
            if str(document.get("issuer", "")).rstrip("/") != issuer:
                raise ValueError(f"the metadata at {url} names issuer {document.get('issuer')!r}, not {issuer!r}")
            jwks_uri = document.get("jwks_uri")
            if isinstance(jwks_uri, str) and jwks_uri.startswith(("http://", "https://")):
                return jwks_uri
            raise ValueError(f"the metadata at {url} has no jwks_uri; set jwksUri")
        raise ValueError(f"no authorization server metadata found for {issuer}; set jwksUri")


async def _get_json(http: httpx2.AsyncClient, url: str) -> dict[str, Any]:
    async with http.stream("GET", url, headers={"accept": "application/json"}) as response:
        if response.status_code != 200:
            raise ValueError(f"GET {url} answered {response.status_code}")
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > _MAX_JWKS:
                raise ValueError(f"GET {url}: the document is over {_MAX_JWKS} bytes")
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError(f"GET {url}: not a JSON object")
    return document


def _parse_jwks(document: dict[str, Any]) -> dict[str | None, jwt.PyJWK]:
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise ValueError("the JWKS has no 'keys' list")
    keys: dict[str | None, jwt.PyJWK] = {}
    for entry in entries[:_MAX_KEYS]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
            continue  # encryption keys and shared secrets never verify an access token
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError):
            continue
        keys[entry.get("kid")] = key
    return keys


def _aud_ok(audiences: Sequence[str], accepted: Sequence[str]) -> bool:
    def canonical(url: str) -> str:
        return resource_url_from_server_url(url).rstrip("/")

    wanted = {canonical(url) for url in accepted}
    return any(isinstance(aud, str) and canonical(aud) in wanted for aud in audiences)


def _scopes_of(claims: Mapping[str, Any]) -> list[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        return [str(item) for item in scp]
    return []


class JwtVerifier:
    """Checks JWT access tokens for one set of :class:`OAuthSettings` (an SDK ``TokenVerifier``).

    A token that passed is remembered (by its SHA-256, at most 1,024, each for at most a
    minute and never past its ``exp``): a client sends the same token with every request, and a
    signature check costs far more than the rest of the gateway's work on a call.

    Args:
        settings: Issuer, scopes, algorithms.
        audiences: The resource URLs a token may be issued for (its ``aud`` must name one).
        keys: The issuer's key cache (shared by verifiers of one issuer).
    """

    def __init__(self, settings: OAuthSettings, audiences: Sequence[str], keys: JwksCache) -> None:
        self.settings = settings
        self.audiences = tuple(audiences)
        self.keys = keys
        self._verified: collections.OrderedDict[str, tuple[AccessToken, float]] = collections.OrderedDict()

    def __repr__(self) -> str:
        return f"JwtVerifier(issuer={self.settings.issuer!r}, audiences={list(self.audiences)!r})"

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's verifier protocol: the token's access info, or ``None`` when it is not taken."""
        try:
            return await self.check(token)
        except TokenRejected:
            return None

    async def check(self, token: str) -> AccessToken:
        """The token's access info (``resource`` is the audience it matched).

        Raises:
            TokenRejected: ``invalid_token`` (bad signature, issuer, audience, times, shape),
                ``insufficient_scope`` (a required scope missing) or
                ``temporarily_unavailable`` (the keys could not be fetched).
        """
        digest = hashlib.sha256(token.encode()).hexdigest()
        remembered = self._verified.get(digest)
        if remembered is not None:
            if time.time() < remembered[1]:
                return remembered[0]
            del self._verified[digest]
        access = await self._check(token)
        until = min(time.time() + _VERIFIED_TTL, float(access.expires_at or 0))
        self._verified[digest] = (access, until)
        if len(self._verified) > _VERIFIED_MAX:
            self._verified.popitem(last=False)
        return access

    async def _check(self, token: str) -> AccessToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("invalid_token", "the token is not a JWT") from None
        alg = header.get("alg")
        if alg not in self.settings.algorithms:
            raise TokenRejected("invalid_token", f"the token's algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        key = await self.keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise TokenRejected("invalid_token", "the token's signing key is not in the issuer's key set")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                issuer=self.settings.issuer,
                leeway=self.settings.leeway,
                options={"require": ["exp", "iss", "aud"], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("invalid_token", "the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected("invalid_token", "the token is not valid yet") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("invalid_token", "the token is from another issuer") from None
        except jwt.PyJWTError as exc:
            raise TokenRejected("invalid_token", f"the token is invalid: {type(exc).__name__}") from None
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not _aud_ok(audiences, self.audiences):
            raise TokenRejected("invalid_token", "the token was issued for another resource (aud)")
        scopes = _scopes_of(claims)
        missing = [scope for scope in self.settings.scopes if scope not in scopes]
        if missing:
            raise TokenRejected("insufficient_scope", f"the token lacks the scope(s) {' '.join(missing)}")
        matched = next(a for a in audiences if _aud_ok([a], self.audiences))
        client_id = claims.get("client_id") or claims.get("azp") or claims.get("sub") or ""
        return AccessToken(
            token=token,
            client_id=str(client_id),
            scopes=scopes,
            expires_at=int(claims["exp"]),
            resource=matched,
            subject=str(claims["sub"]) if "sub" in claims else None,
            claims={"iss": claims.get("iss")},
        )
