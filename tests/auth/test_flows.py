"""OAuth flows against a real authorization server guarding the real demo server (loopback)."""

from __future__ import annotations

import json
import socket
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp_actors._auth.oauth import AuthSettings, OAuthTarget, ServerAuth, build_auth, open_authorized_session
from mcp_actors._auth.token_store import FileTokenStore, MemoryTokenStore
from mcp_actors._config.record import OAuthConfig, OAuthGrant
from mcp_actors.errors import AuthorizationFailed, AuthorizationRequired, AuthorizationServerUnreachable
from mcp_actors.testing import serve_http
from tests.auth.conftest import AuthServer, browser, fail_after, oauth_server


def _settings(store: MemoryTokenStore | FileTokenStore | None = None, *, handler: bool = True) -> AuthSettings:
    return AuthSettings(token_store=store or MemoryTokenStore(), authorization_handler=browser if handler else None)


async def _echo(target: OAuthTarget, auth: ServerAuth, text: str = "hi") -> str:
    with fail_after():
        async with open_authorized_session(target, auth) as session:
            result = await session.call_tool("echo", {"text": text})
    return str(result.content[0].text)  # type: ignore[union-attr]


async def _login(server: AuthServer, settings: AuthSettings, oauth: OAuthConfig | None = None) -> OAuthTarget:
    target = server.target(oauth)
    assert await _echo(target, build_auth(target, settings)) == "hi"
    return target


async def test_dynamic_registration_login_then_call(auth_server: AuthServer) -> None:
    """With a handler, a fresh client registers (RFC 7591), logs in with PKCE and calls a tool."""
    store = MemoryTokenStore()
    target = await _login(auth_server, _settings(store))
    assert await auth_server.count("register") == 1
    assert await auth_server.count("token:authorization_code") == 1
    assert await auth_server.count("auth:none") == 1
    status = await store.status(target.server_id)
    assert status.logged_in and status.scopes == ("mcp",) and status.client_id is not None
    stats = await auth_server.stats()
    assert stats["resources"] == [auth_server.url]  # RFC 8707: the resource is the server's URL


async def test_the_server_command_serves_the_flows() -> None:
    """``python -m mcp_actors.testing._oauth_server`` (docs/auth.md) is the server the other tests run in a thread.

    As a process, with its options on the command line: it announces its URL, a fresh client
    registers, logs in and calls a tool, a pre-registered client of ``--options`` gets a
    client_credentials token, and ``_stats`` counts what happened.
    """
    options = {"clients": {"machine": {"secret": "m2m-secret"}}}
    argv = [sys.executable, "-m", "mcp_actors.testing._oauth_server", "--options", json.dumps(options)]
    async with serve_http(argv) as handle:
        server = AuthServer(handle.url)
        store = MemoryTokenStore()
        target = await _login(server, _settings(store))
        assert (await store.status(target.server_id)).logged_in
        oauth = OAuthConfig(grant=OAuthGrant.CLIENT_CREDENTIALS, client_id="machine", client_secret="m2m-secret")
        machine = server.target(oauth, name="machine")
        assert await _echo(machine, build_auth(machine, _settings(handler=False))) == "hi"
        counts = (await server.stats())["counts"]
        assert (counts["register"], counts["token:authorization_code"], counts["token:client_credentials"]) == (1, 1, 1)


@pytest.mark.parametrize(
    ("prm", "asm", "issuer_path"),
    [
        ("header", "oauth", ""),
        ("path", "oauth", "/as"),
        ("root", "oidc", ""),
        ("path", "oidc", "/as"),
        ("none", "oauth", ""),
    ],
)
async def test_each_discovery_path_finds_the_authorization_server(prm: str, asm: str, issuer_path: str) -> None:
    """Metadata is found from the 401 header, each well-known fallback, OIDC, and the 2025-03-26 origin."""
    async with oauth_server(prm=prm, asm=asm, issuerPath=issuer_path) as server:
        await _login(server, _settings())
        assert await server.count("asm") >= 1
        assert await server.count("prm") == (0 if prm == "none" else 1)
        assert await server.count("token:authorization_code") == 1


async def test_pre_registered_client_with_basic_secret_does_not_register() -> None:
    """A configured clientId/clientSecret is used as is, authenticated with client_secret_basic."""
    clients = {"app": {"secret": "s3cret-basic"}}
    async with oauth_server(clients=clients) as server:
        store = MemoryTokenStore()
        target = await _login(server, _settings(store), OAuthConfig(client_id="app", client_secret="s3cret-basic"))
        assert await server.count("register") == 0
        assert await server.count("auth:client_secret_basic") == 1
        assert (await store.status(target.server_id)).logged_in


async def test_pre_registered_client_uses_post_when_basic_is_not_supported() -> None:
    """The token endpoint auth method follows the server's metadata: client_secret_post if basic is absent."""
    clients = {"app": {"secret": "s3cret-post"}}
    async with oauth_server(clients=clients, authMethods=["client_secret_post"]) as server:
        await _login(server, _settings(), OAuthConfig(client_id="app", client_secret="s3cret-post"))
        assert await server.count("auth:client_secret_post") == 1
        assert await server.count("auth:client_secret_basic") == 0


async def test_public_pre_registered_client_uses_none() -> None:
    """A pre-registered client without a secret authenticates with 'none' (PKCE only)."""
    async with oauth_server(clients={"public-app": {"secret": None}}) as server:
        await _login(server, _settings(), OAuthConfig(client_id="public-app"))
        assert await server.count("auth:none") == 1
        assert await server.count("register") == 0


async def test_client_id_metadata_document_is_used_where_supported() -> None:
    """With clientMetadataUrl and a server that supports CIMD, the URL is the client id: no registration."""
    url = "https://client.example/mcp-actors.json"
    async with oauth_server(cimd=True) as server:
        store = MemoryTokenStore()
        target = await _login(server, _settings(store), OAuthConfig(client_metadata_url=url))
        assert await server.count("register") == 0
        assert (await store.status(target.server_id)).client_id == url


async def test_client_id_metadata_document_falls_back_to_registration() -> None:
    """A server without CIMD support gets a dynamic registration instead."""
    async with oauth_server(cimd=False) as server:
        await _login(server, _settings(), OAuthConfig(client_metadata_url="https://client.example/c.json"))
        assert await server.count("register") == 1


@pytest.mark.parametrize(
    ("options", "oauth", "expected"),
    [
        ({"challengeScope": "mcp read"}, None, "mcp read"),
        ({"scopesSupported": ["mcp", "tools"]}, None, "mcp tools"),
        ({"scopesSupported": None}, None, ""),
        ({"challengeScope": "mcp read"}, OAuthConfig(scopes=("custom",)), "custom"),
    ],
)
async def test_scope_selection(options: dict[str, object], oauth: OAuthConfig | None, expected: str) -> None:
    """Scopes: configured, else the challenge's, else scopes_supported, else none."""
    async with oauth_server(**options) as server:
        await _login(server, _settings(), oauth)
        assert (await server.stats())["scopes"] == [expected]


async def test_step_up_on_insufficient_scope_reauthorizes_with_the_union() -> None:
    """A 403 insufficient_scope makes one re-authorization with the old and the new scopes."""
    async with oauth_server(stepUp={"tool": "add", "scope": "math"}) as server:
        settings = _settings()
        target = await _login(server, settings)
        auth = build_auth(target, settings)
        with fail_after():
            async with open_authorized_session(target, auth) as session:
                result = await session.call_tool("add", {"a": 1, "b": 2})
        assert not result.is_error
        stats = await server.stats()
        assert stats["scopes"] == ["mcp", "mcp math"]
        assert stats["counts"]["mcp403"] == 1


async def test_step_up_that_cannot_get_the_scope_fails_typed() -> None:
    """When re-authorization still lacks the scope, the request fails with AuthorizationFailed (no loop)."""
    async with oauth_server(stepUp={"tool": "add", "scope": "math"}, grantableScopes=["mcp"]) as server:
        settings = _settings()
        target = await _login(server, settings)
        auth = build_auth(target, settings)
        with fail_after(), pytest.raises(AuthorizationFailed, match="more scope"):
            async with open_authorized_session(target, auth) as session:
                await session.call_tool("add", {"a": 1, "b": 2})
        assert await server.count("authorize") == 2  # the login and one step-up, never more


async def test_token_near_expiry_is_refreshed_before_use() -> None:
    """A stored token within the refresh margin is refreshed before the request: no 401 is seen."""
    async with oauth_server() as server:
        store = MemoryTokenStore()
        target = await _login(server, _settings(store))
        await store.update(target.server_id, target.url, lambda entry: entry.update(expiresAt=time.time() + 5))
        unauthorized = await server.count("mcp401")
        assert await _echo(target, build_auth(target, _settings(store, handler=False))) == "hi"
        assert await server.count("token:refresh_token") == 1
        assert await server.count("mcp401") == unauthorized


async def test_the_principal_is_a_digest_that_a_new_token_changes() -> None:
    """ServerAuth.principal names the access token requests carry (never the token itself); a refresh changes it."""
    async with oauth_server() as server:
        store = MemoryTokenStore()
        target = await _login(server, _settings(store))
        auth = build_auth(target, _settings(store, handler=False))
        assert auth.principal() is None  # nothing loaded yet
        assert await _echo(target, auth) == "hi"
        first = auth.principal()
        assert first is not None and len(first) == 32
        token = auth.provider.context.current_tokens.access_token  # type: ignore[union-attr]
        assert token not in first and first == auth.principal()
        await server.control(expireAccess=True)
        assert await _echo(target, auth) == "hi"
        assert await server.count("token:refresh_token") == 1
        assert auth.principal() not in (None, first)


async def test_refused_token_is_refreshed_on_401() -> None:
    """An access token the server refuses is refreshed with the refresh token; nobody is asked to log in."""
    async with oauth_server() as server:
        store = MemoryTokenStore()
        target = await _login(server, _settings(store))
        await server.control(expireAccess=True)
        assert await _echo(target, build_auth(target, _settings(store, handler=False))) == "hi"
        assert await server.count("token:refresh_token") == 1
        assert await server.count("authorize") == 1


async def test_concurrent_401s_make_one_refresh() -> None:
    """Many concurrent calls that all hit a 401 with the same token cause exactly one refresh."""
    async with oauth_server() as server:
        store = MemoryTokenStore()
        settings = _settings(store, handler=False)
        target = await _login(server, _settings(store))
        auth = build_auth(target, settings)
        with fail_after():
            async with open_authorized_session(target, auth) as session:
                await server.control(expireAccess=True)
                results: list[str] = []

                async def call(i: int) -> None:
                    result = await session.call_tool("echo", {"text": str(i)})
                    results.append(result.content[0].text)  # type: ignore[union-attr]

                async with trio.open_nursery() as nursery:
                    for i in range(10):
                        nursery.start_soon(call, i)
        assert sorted(results, key=int) == [str(i) for i in range(10)]
        assert await server.count("token:refresh_token") == 1


async def test_revoked_grant_without_handler_is_authorization_required() -> None:
    """A revoked grant (refresh refused) with no handler fails at once, naming `mcp-actors auth login`."""
    async with oauth_server() as server:
        store = MemoryTokenStore()
        target = await _login(server, _settings(store))
        await server.control(revoke=True)
        auth = build_auth(target, _settings(store, handler=False))
        with fail_after(), pytest.raises(AuthorizationRequired, match="mcp-actors auth login guarded"):
            await _echo(target, auth)
        assert await server.count("token:refresh_token") == 1
        assert auth.failure is not None


async def test_revoked_grant_with_handler_logs_in_again() -> None:
    """With a handler, a revoked grant leads to a new login through the handler."""
    async with oauth_server() as server:
        store = MemoryTokenStore()
        target = await _login(server, _settings(store))
        await server.control(revoke=True)
        assert await _echo(target, build_auth(target, _settings(store))) == "hi"
        assert await server.count("token:authorization_code") == 2


async def test_never_logged_in_without_handler_is_authorization_required(auth_server: AuthServer) -> None:
    """No tokens and no handler: AuthorizationRequired, and no authorization request is ever made."""
    target = auth_server.target()
    with fail_after(), pytest.raises(AuthorizationRequired, match="auth login guarded"):
        await _echo(target, build_auth(target, _settings(handler=False)))
    assert await auth_server.count("authorize") == 0


async def test_user_denial_is_authorization_failed() -> None:
    """An error redirect (access_denied) is AuthorizationFailed carrying the OAuth error code."""
    async with oauth_server(deny=True) as server:
        target = server.target()
        with fail_after(), pytest.raises(AuthorizationFailed) as caught:
            await _echo(target, build_auth(target, _settings()))
        assert caught.value.oauth_error == "access_denied"


async def test_resource_mismatch_is_authorization_failed() -> None:
    """Protected-resource metadata naming another server stops the flow before any token request."""
    async with oauth_server(prmResource="http://127.0.0.1:9/elsewhere") as server:
        target = server.target()
        with fail_after(), pytest.raises(AuthorizationFailed, match="another resource"):
            await _echo(target, build_auth(target, _settings()))
        assert await server.count("authorize") == 0


@pytest.mark.parametrize("kind", ["prm", "asm"])
async def test_malformed_metadata_is_authorization_failed(kind: str) -> None:
    """Malformed protected-resource or authorization-server metadata is a typed error naming the URL."""
    async with oauth_server(malformed=kind) as server:
        target = server.target()
        with fail_after(), pytest.raises(AuthorizationFailed, match="malformed OAuth metadata at http"):
            await _echo(target, build_auth(target, _settings()))


async def test_unreachable_authorization_server_is_typed() -> None:
    """Metadata naming an authorization server nobody listens on: AuthorizationServerUnreachable."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with oauth_server(authServers=[dead]) as server:
        target = server.target()
        with fail_after(), pytest.raises(AuthorizationServerUnreachable, match="could not be reached"):
            await _echo(target, build_auth(target, _settings()))


async def test_client_credentials_with_secret() -> None:
    """The client_credentials grant with a secret gets a token with no person involved."""
    clients = {"machine": {"secret": "m2m-secret"}}
    async with oauth_server(clients=clients) as server:
        oauth = OAuthConfig(grant=OAuthGrant.CLIENT_CREDENTIALS, client_id="machine", client_secret="m2m-secret")
        target = server.target(oauth)
        assert await _echo(target, build_auth(target, _settings(handler=False))) == "hi"
        assert await server.count("token:client_credentials") == 1
        assert await server.count("authorize") == 0


async def test_client_credentials_with_private_key_jwt(tmp_path: Path) -> None:
    """The client_credentials grant with private_key_jwt signs an assertion the server verifies."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    key_file = tmp_path / "client.pem"
    key_file.write_bytes(private_pem)
    async with oauth_server(clients={"signer": {"secret": None, "publicKey": public_pem}}) as server:
        oauth = OAuthConfig(
            grant=OAuthGrant.CLIENT_CREDENTIALS,
            client_id="signer",
            private_key_file=str(key_file),
            signing_algorithm="RS256",
        )
        target = server.target(oauth)
        assert await _echo(target, build_auth(target, _settings(handler=False))) == "hi"
        assert await server.count("auth:private_key_jwt") == 1


async def test_wrong_client_secret_is_authorization_failed() -> None:
    """A client_credentials secret the server refuses is AuthorizationFailed with the OAuth error."""
    async with oauth_server(clients={"machine": {"secret": "right"}}) as server:
        oauth = OAuthConfig(grant=OAuthGrant.CLIENT_CREDENTIALS, client_id="machine", client_secret="wrong-secret")
        target = server.target(oauth)
        with fail_after(), pytest.raises(AuthorizationFailed) as caught:
            await _echo(target, build_auth(target, _settings(handler=False)))
        assert caught.value.oauth_error == "invalid_client"
        assert "wrong-secret" not in str(caught.value)


async def test_tokens_survive_a_restart_in_the_file_store(auth_server: AuthServer, tmp_path: Path) -> None:
    """A new runtime with the same file store uses the stored tokens: no second login."""
    path = tmp_path / "tokens.json"
    target = await _login(auth_server, _settings(FileTokenStore(path)))
    assert await _echo(target, build_auth(target, _settings(FileTokenStore(path), handler=False))) == "hi"
    assert await auth_server.count("authorize") == 1
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("param", "value", "words"),
    [("state", "forged-state", "state does not match"), ("iss", "http://127.0.0.1:9/evil", "iss")],
)
async def test_tampered_redirect_is_authorization_failed(
    auth_server: AuthServer, param: str, value: str, words: str
) -> None:
    """A redirect URL whose state or iss was changed (RFC 9207) is refused: no token request is made."""

    async def tampering(server_id: str, url: str) -> str:
        redirect = await browser(server_id, url)
        parts = urllib.parse.urlsplit(redirect)
        query = dict(urllib.parse.parse_qsl(parts.query))
        query[param] = value
        return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))

    target = auth_server.target()
    settings = AuthSettings(token_store=MemoryTokenStore(), authorization_handler=tampering)
    with fail_after(), pytest.raises(AuthorizationFailed, match=words):
        await _echo(target, build_auth(target, settings))
    assert await auth_server.count("token:authorization_code") == 0


async def test_handler_returning_no_code_is_authorization_failed(auth_server: AuthServer) -> None:
    """A handler that returns a URL without a code gets a typed error saying what to pass."""

    async def careless(server_id: str, url: str) -> str:
        return "http://127.0.0.1:1/callback"

    target = auth_server.target()
    settings = AuthSettings(token_store=MemoryTokenStore(), authorization_handler=careless)
    with fail_after(), pytest.raises(AuthorizationFailed, match="no authorization code"):
        await _echo(target, build_auth(target, settings))
