"""The gateway as an OAuth 2.1 protected resource: metadata, challenges, JWTs checked against a real JWKS.

The issuer is the test authorization server (:mod:`mcp_actors.testing._oauth_server`) on
loopback, issuing JWT access tokens and publishing its keys at ``/jwks``; the gateway finds
them through the issuer's metadata and fetches them over HTTP. Tokens are minted here with the
issuer's private keys (every claim under the test's control), and once by the SDK client's own
OAuth flow (discovery from the gateway's 401, registration, authorization code with PKCE,
the RFC 8707 resource). The client's token never travels upstream.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
import trio
from authkit import BOUND, auth_gateway, post_raw, runtime_gateway, sdk_session
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl
from sharedhttp import http_slots, loopback_client, slot
from testkit import serve_in_thread

from mcp_actors.serve import GatewayAuth, MemoryApiKeyTable, OAuthSettings, create_api_key
from mcp_actors.serve._auth_oauth import JwksCache, JwtVerifier, TokenRejected

__all__ = ["http_slots"]  # the module's authorization servers (fixture)


def _pem(key: Any) -> str:
    return str(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
    )


@functools.cache
def rsa_key(kid: str) -> dict[str, str]:
    """An RSA signing key as the test issuer takes it: one per kid for the module (a key costs tens of ms)."""
    return {"kid": kid, "pem": _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "alg": "RS256"}


def ec_key(kid: str) -> dict[str, str]:
    """A fresh P-256 signing key as the test issuer takes it."""
    return {"kid": kid, "pem": _pem(ec.generate_private_key(ec.SECP256R1())), "alg": "ES256"}


class Issuer:
    """The test authorization server on loopback: its URL, its controls, its counters."""

    def __init__(self, url: str) -> None:
        self.base = url.removesuffix("/mcp")

    async def control(self, **options: Any) -> None:
        async with loopback_client(timeout=BOUND) as http:
            (await http.post(self.base + "/_control", json=options)).raise_for_status()

    async def count(self, key: str) -> int:
        async with loopback_client(timeout=BOUND) as http:
            return int((await http.get(self.base + "/_stats")).json()["counts"].get(key, 0))


@contextlib.asynccontextmanager
async def issuer(keys: list[dict[str, str]], **options: Any) -> AsyncIterator[Issuer]:
    """A fresh test authorization server issuing JWTs signed with ``keys[0]``, publishing all of ``keys``.

    On a server of the module's (``sharedhttp.slot``): the authorization server is new, the
    socket and the demo server behind it are shared.
    """
    from mcp_actors.testing._oauth_server import OAuthTestServer

    async with slot(demo=True) as held:
        assert held.demo_apps is not None
        held.app = OAuthTestServer({"jwt": {"keys": keys, "resources": []}, **options}, held.demo_apps[0])
        yield Issuer(held.origin + "/mcp")


def mint(key: dict[str, str], **claims: Any) -> str:
    """A JWT signed with ``key`` (its kid in the header); ``exp`` an hour ahead unless given."""
    now = int(time.time())
    body = {"exp": now + 3600, "iat": now, "sub": "alice", "client_id": "cli", **claims}
    body = {name: value for name, value in body.items() if value is not None}
    return jwt.encode(body, key["pem"], algorithm=key["alg"], headers={"kid": key["kid"]})


def suffixed_headers(response: httpx2.Response) -> bool:
    """Whether the metadata answer is public JSON that browsers may read (any origin)."""
    return (
        response.headers["content-type"] == "application/json"
        and response.headers["access-control-allow-origin"] == "*"
    )


def settings(issuer: Issuer, **more: Any) -> OAuthSettings:
    return OAuthSettings(issuer=issuer.base, scopes=("mcp",), **more)


async def test_the_metadata_names_the_issuer_and_a_401_points_to_it(tmp_path: Path) -> None:
    """RFC 9728 metadata at the path-suffixed and root well-known URLs; 401 says resource_metadata and scope."""
    key = rsa_key("k1")
    async with issuer([key]) as idp, auth_gateway(tmp_path, GatewayAuth(oauth=settings(idp))) as gateway:
        origin = gateway.url.removesuffix("/mcp")
        async with loopback_client(timeout=BOUND) as http:
            suffixed = (await http.get(origin + "/.well-known/oauth-protected-resource/mcp")).json()
            root = (await http.get(origin + "/.well-known/oauth-protected-resource")).json()
            profile = (await http.get(origin + "/.well-known/oauth-protected-resource/mcp/github")).json()
            missing = await http.get(origin + "/.well-known/oauth-protected-resource/other")
            posted = await http.post(origin + "/.well-known/oauth-protected-resource/mcp")
            assert suffixed_headers(await http.get(origin + "/.well-known/oauth-protected-resource/mcp"))
        assert suffixed == root
        assert suffixed["resource"] == gateway.url
        assert [url.rstrip("/") for url in suffixed["authorization_servers"]] == [idp.base]
        assert suffixed["scopes_supported"] == ["mcp"] and suffixed["bearer_methods_supported"] == ["header"]
        assert profile["resource"] == gateway.url + "/github"
        assert missing.status_code == 404
        assert posted.status_code == 405
        response = await post_raw(gateway.url)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert 'scope="mcp"' in challenge
        assert await idp.count("jwks") == 0  # nothing fetched for a request without a token


async def test_a_valid_token_is_served_and_every_broken_rule_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK client with a good token works; expired, early, wrong aud/iss, bad signature, HMAC, no scope: refused.

    No token reaches the logs, the answers or the challenges.
    """
    caplog.set_level(logging.DEBUG)
    key, stranger = ec_key("k1"), ec_key("k1")  # the stranger reuses the kid: only the signature tells
    async with issuer([key]) as idp, auth_gateway(tmp_path, GatewayAuth(oauth=settings(idp))) as gateway:
        good = mint(key, iss=idp.base, aud=gateway.url, scope="mcp other")
        async with sdk_session(gateway.url, token=good) as session:
            with trio.fail_after(BOUND):
                assert "demo__echo" in {tool.name for tool in (await session.list_tools()).tools}
        now = int(time.time())
        cases = {
            "expired": (mint(key, iss=idp.base, aud=gateway.url, scope="mcp", exp=now - 120), 401, "expired"),
            "early": (mint(key, iss=idp.base, aud=gateway.url, scope="mcp", nbf=now + 600), 401, "not valid yet"),
            "audience": (mint(key, iss=idp.base, aud="http://127.0.0.1:1/mcp", scope="mcp"), 401, "another resource"),
            "issuer": (mint(key, iss="http://127.0.0.1:1", aud=gateway.url, scope="mcp"), 401, "another issuer"),
            "signature": (mint(stranger, iss=idp.base, aud=gateway.url, scope="mcp"), 401, "InvalidSignatureError"),
            "hmac": (
                jwt.encode({"iss": idp.base, "aud": gateway.url, "exp": now + 60}, "s" * 32, algorithm="HS256"),
                401,
                "'HS256' is not accepted",
            ),
            "scope": (mint(key, iss=idp.base, aud=gateway.url, scope="other"), 403, "lacks the scope(s) mcp"),
            "garbage": ("not-a-jwt", 401, "not a JWT"),
        }
        for case, (token, status, why) in cases.items():
            response = await post_raw(gateway.url, token=token)
            assert response.status_code == status, case
            assert why in response.json()["error_description"], case
            challenge = response.headers["www-authenticate"]
            error = "insufficient_scope" if status == 403 else "invalid_token"
            assert f'error="{error}"' in challenge and "resource_metadata=" in challenge, case
            assert token not in response.text and token not in challenge
        assert await idp.count("jwks") == 1  # one fetch served every check
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "refused a request" in logged
    for token, _, _ in [*cases.values(), (good, 0, "")]:
        assert token not in logged


async def test_tokens_for_a_profile_and_per_profile_issuers(tmp_path: Path) -> None:
    """A gateway-wide token opens a profile; a profile's own issuer takes only tokens for that profile's URL."""
    key, other_key = rsa_key("k1"), rsa_key("k2")
    async with issuer([key]) as idp, issuer([other_key]) as idp2:
        auth = GatewayAuth(oauth=settings(idp), profiles={"github": OAuthSettings(issuer=idp2.base)})
        async with auth_gateway(tmp_path, auth) as gateway:
            wide = mint(key, iss=idp.base, aud=gateway.url, scope="mcp")
            assert (await post_raw(gateway.url + "/slack", token=wide)).status_code == 200
            slack = mint(key, iss=idp.base, aud=gateway.url + "/slack", scope="mcp")
            assert (await post_raw(gateway.url + "/slack", token=slack)).status_code == 200
            assert (await post_raw(gateway.url, token=slack)).status_code == 401  # not the whole gateway's
            # github has its own issuer: the gateway-wide token is not one of its tokens.
            assert (await post_raw(gateway.url + "/github", token=wide)).status_code == 401
            own = mint(other_key, iss=idp2.base, aud=gateway.url + "/github")
            assert (await post_raw(gateway.url + "/github", token=own)).status_code == 200
            assert (await post_raw(gateway.url, token=own)).status_code == 401
            response = await post_raw(gateway.url + "/github")
            assert (
                f'resource_metadata="{gateway.url.removesuffix("/mcp")}/.well-known/oauth-protected-resource/mcp/github"'
                in (response.headers["www-authenticate"])
            )


async def test_a_rotated_key_is_fetched_when_its_kid_is_first_seen(tmp_path: Path) -> None:
    """The issuer rotates its key: a token with the new kid makes the gateway fetch the key set again."""
    old, new = rsa_key("old"), rsa_key("new")
    async with issuer([old]) as idp:
        auth = GatewayAuth(oauth=settings(idp, jwks_refetch=0.0))
        async with auth_gateway(tmp_path, auth) as gateway:
            assert (
                await post_raw(gateway.url, token=mint(old, iss=idp.base, aud=gateway.url, scope="mcp"))
            ).status_code == 200
            assert await idp.count("jwks") == 1
            await idp.control(jwt={"keys": [new], "resources": []})
            token = mint(new, iss=idp.base, aud=gateway.url, scope="mcp")
            assert (await post_raw(gateway.url, token=token)).status_code == 200
            assert await idp.count("jwks") == 2
            # The old key is gone from the set: a token of it not seen before no longer verifies.
            stale = mint(old, iss=idp.base, aud=gateway.url, scope="mcp", jti="never-seen")
            assert (await post_raw(gateway.url, token=stale)).status_code == 401


async def test_a_remembered_token_is_refused_once_it_expires(tmp_path: Path) -> None:
    """A token checked once is taken again from memory, but never past its exp.

    The token lives one to two seconds (its ``exp`` is whole seconds of wall time, the clock
    the check reads); when a loaded machine answers its first two requests only after that, a
    new token is tried, so the wait for the expiry stays short.
    """
    key = rsa_key("k1")
    async with issuer([key]) as idp:
        async with auth_gateway(tmp_path, GatewayAuth(oauth=settings(idp, leeway=0.0))) as gateway:
            for attempt in range(10):
                exp = int(time.time()) + 2
                token = mint(key, iss=idp.base, aud=gateway.url, scope="mcp", exp=exp, jti=f"attempt-{attempt}")
                answers = [(await post_raw(gateway.url, token=token)).status_code for _ in range(2)]
                if time.time() < exp:  # both answered while the token was valid
                    break
            else:
                raise AssertionError("ten tokens expired before their first two requests were answered")
            assert answers == [200, 200]
            await trio.sleep(max(0.0, exp - time.time()) + 0.2)  # the token's own clock: wall time
            response = await post_raw(gateway.url, token=token)
            assert response.status_code == 401 and "expired" in response.json()["error_description"]


async def test_unknown_kids_do_not_make_the_gateway_hammer_the_issuer() -> None:
    """Within min_refetch an unknown kid is refused from the cache; concurrent misses share one fetch."""
    key = rsa_key("k1")
    async with issuer([key]) as idp:
        cache = JwksCache(OAuthSettings(issuer=idp.base), min_refetch=60.0)
        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(cache.key, "k1")
            assert cache.fetches == 1
            for kid in ("made-up-1", "made-up-2", "made-up-3"):
                assert await cache.key(kid) is None
            assert cache.fetches == 1 and await idp.count("jwks") == 1
            assert (await cache.key("k1")) is not None
        unreachable = JwksCache(OAuthSettings(issuer="http://127.0.0.1:1"), fetch_timeout=5.0)
        with pytest.raises(TokenRejected) as refused:
            await unreachable.key("k1")
        assert refused.value.error == "temporarily_unavailable"


async def test_the_sdk_clients_own_oauth_flow_reaches_the_gateway(tmp_path: Path) -> None:
    """The SDK's OAuthClientProvider: 401 → gateway metadata → issuer → register → authorize → token → served."""
    key = rsa_key("k1")
    async with issuer([key]) as idp, auth_gateway(tmp_path, GatewayAuth(oauth=settings(idp))) as gateway:
        await idp.control(jwt={"keys": [key], "resources": [gateway.url]})
        redirected: list[str] = []

        async def follow(authorization_url: str) -> None:
            async with loopback_client(timeout=BOUND) as http:
                response = await http.get(authorization_url)
            assert response.status_code == 302
            redirected.append(response.headers["location"])

        async def callback() -> AuthorizationCodeResult:
            query = dict(httpx2.URL(redirected[-1]).params)
            return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

        class Storage:
            def __init__(self) -> None:
                self.tokens: OAuthToken | None = None
                self.client: OAuthClientInformationFull | None = None

            async def get_tokens(self) -> OAuthToken | None:
                return self.tokens

            async def set_tokens(self, tokens: OAuthToken) -> None:
                self.tokens = tokens

            async def get_client_info(self) -> OAuthClientInformationFull | None:
                return self.client

            async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
                self.client = client_info

        storage = Storage()
        provider = OAuthClientProvider(
            server_url=gateway.url,
            client_metadata=OAuthClientMetadata(
                client_name="sdk-client",
                redirect_uris=[AnyUrl("http://127.0.0.1:3000/callback")],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
            ),
            storage=storage,
            redirect_handler=follow,
            callback_handler=callback,
        )
        async with sdk_session(gateway.url, auth=provider) as session:
            with trio.fail_after(BOUND):
                result = await session.call_tool("demo__echo", {"text": "via oauth"})
                assert "via oauth" in str(result.content)
        assert storage.tokens is not None
        claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
        assert claims["aud"] == gateway.url and claims["iss"] == idp.base and "mcp" in claims["scope"].split()
        assert await idp.count("register") == 1 and await idp.count("token:authorization_code") == 1


class Recorder:
    """ASGI middleware that records the ``Authorization`` header of every request it passes on."""

    def __init__(self, app: Any, seen: list[str | None]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            value = dict(scope["headers"]).get(b"authorization")
            self.seen.append(value.decode() if value is not None else None)
        await self.app(scope, receive, send)


async def test_the_clients_token_never_goes_upstream(tmp_path: Path) -> None:
    """An upstream over HTTP sees the gateway's own credential on every request, never the client's key or token."""
    key = rsa_key("k1")
    seen: list[str | None] = []

    def upstream() -> Any:
        from mcp_actors.demo_server import create_demo_server

        return Recorder(create_demo_server().streamable_http_app(host="127.0.0.1"), seen)

    table = MemoryApiKeyTable()
    api_key, _ = await create_api_key(table, "ci")
    async with issuer([key]) as idp, serve_in_thread(upstream) as upstream_url:
        auth = GatewayAuth(api_keys=table, oauth=settings(idp))
        async with runtime_gateway(tmp_path, auth) as (runtime, gateway):
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)
            entry = {"type": "http", "url": upstream_url, "headers": {"Authorization": "Bearer upstream-credential"}}
            await runtime.service.add_json(json.dumps({"mcpServers": {"up": entry}}))
            token = mint(key, iss=idp.base, aud=gateway.url, scope="mcp")
            for credential in (api_key, token):
                async with sdk_session(gateway.url, token=credential) as session:
                    with trio.fail_after(BOUND):
                        result = await session.call_tool("up__echo", {"text": "hi"})
                        assert "hi" in str(result.content)
    assert seen and set(seen) == {"Bearer upstream-credential"}


async def test_the_key_set_is_found_by_openid_discovery_or_taken_from_jwks_uri() -> None:
    """An issuer with OpenID metadata only is discovered; a configured jwksUri skips discovery."""
    key = ec_key("k1")
    async with issuer([key], asm="oidc", issuerPath="/realm") as idp:
        discovered = JwksCache(OAuthSettings(issuer=idp.base + "/realm"))
        with trio.fail_after(BOUND):
            assert await discovered.key("k1") is not None
            assert await idp.count("asm") == 1
            direct = JwksCache(OAuthSettings(issuer=idp.base + "/realm", jwks_uri=idp.base + "/jwks"))
            assert await direct.key("k1") is not None
            assert await idp.count("asm") == 1 and await idp.count("jwks") == 2


async def test_the_verifier_is_the_sdks_token_verifier() -> None:
    """verify_token answers an AccessToken (resource = the audience matched) or None, as the SDK's protocol says."""
    key = rsa_key("k1")
    async with issuer([key]) as idp:
        gateway = "http://127.0.0.1:9/mcp"
        verifier = JwtVerifier(settings(idp), [gateway], JwksCache(settings(idp)))
        with trio.fail_after(BOUND):
            access = await verifier.verify_token(mint(key, iss=idp.base, aud=[gateway, "x"], scope="mcp a"))
            assert access is not None
            assert (access.resource, access.client_id, access.subject) == (gateway, "cli", "alice")
            assert access.scopes == ["mcp", "a"]
            assert await verifier.verify_token(mint(key, iss=idp.base, aud=gateway)) is None  # no scope
        assert "eyJ" not in repr(verifier)


def test_settings_refuse_what_would_weaken_the_check() -> None:
    """HMAC or none algorithms, a non-http issuer, unknown fields: refused, naming what is wrong."""
    with pytest.raises(ValueError, match="asymmetric"):
        OAuthSettings(issuer="https://idp.example", algorithms=("HS256",))
    with pytest.raises(ValueError, match="asymmetric"):
        OAuthSettings(issuer="https://idp.example", algorithms=("none",))
    with pytest.raises(ValueError, match="issuer must be an http"):
        OAuthSettings(issuer="idp.example")
    with pytest.raises(ValueError, match=r"unknown oauth setting\(s\) \['audiance'\]"):
        OAuthSettings.from_json({"issuer": "https://idp.example", "audiance": "https://gw/mcp"})
    with pytest.raises(ValueError, match=r"gateway\.auth\.profiles\.github"):
        GatewayAuth.from_json({"profiles": {"github": {"issuer": "https://idp.example"}}}, api_keys=None)
    with pytest.raises(ValueError, match="needs api_keys, oauth or profiles"):
        GatewayAuth.from_json({"apiKeys": False}, api_keys=MemoryApiKeyTable())
    parsed = GatewayAuth.from_json(
        {"oauth": {"issuer": "https://idp.example", "scopes": ["mcp"], "jwksRefetch": 1}}, api_keys=None
    )
    assert parsed.oauth == OAuthSettings(issuer="https://idp.example", scopes=("mcp",), jwks_refetch=1.0)
