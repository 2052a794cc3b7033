"""The assertion grants over real HTTP on loopback: an enterprise IdP, the authorization server, the demo server.

Enterprise-managed authorization (``grant: identity_assertion``): the ID token goes to the
IdP (:mod:`mcp_actors.testing._idp_server`) in an RFC 8693 exchange, the ID-JAG it answers
to the authorization server (:mod:`mcp_actors.testing._oauth_server`) as an RFC 7523
JWT-bearer grant. Workload identity federation (``grant: workload_identity``): the
workload's own JWT is the grant. Each test checks the exact requests both servers received.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.shared.auth import OAuthMetadata
from sharedhttp import slot

from mcp_actors._auth.assertion_grants import AssertionGrantProvider, AssertionKind, AssertionRequest
from mcp_actors._auth.oauth import AuthSettings, OAuthTarget, ServerAuth, build_auth, open_authorized_session
from mcp_actors._auth.token_store import MemoryTokenStore
from mcp_actors._config.record import OAuthConfig, OAuthGrant
from mcp_actors.errors import (
    AuthorizationFailed,
    AuthorizationRequired,
    AuthorizationServerUnreachable,
    IdentityProviderRefused,
    McpActorsError,
)
from mcp_actors.portal import start_portal
from mcp_actors.runtime import open_runtime
from mcp_actors.testing._idp_server import ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE, IdentityProviderTestServer
from tests.auth.conftest import AuthServer, fail_after, oauth_server

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
PLATFORM = "https://platform.example"


async def _echo(target: OAuthTarget, auth: ServerAuth, text: str = "hi") -> str:
    with fail_after():
        async with open_authorized_session(target, auth) as session:
            result = await session.call_tool("echo", {"text": text})
    return str(result.content[0].text)  # type: ignore[union-attr]


def _settings(store: MemoryTokenStore | None = None, handler: Any = None) -> AuthSettings:
    return AuthSettings(token_store=store or MemoryTokenStore(), assertion_handler=handler)


async def _token_requests(server: AuthServer) -> list[dict[str, Any]]:
    return list((await server.stats())["tokenRequests"])


# ----------------------------------------------------------------------------- enterprise-managed


class Enterprise:
    """A running IdP and authorization server that trusts it; the settings of a record for both."""

    def __init__(self, idp: IdentityProviderTestServer, server: AuthServer) -> None:
        self.idp = idp
        self.server = server

    def oauth(self, **changes: Any) -> OAuthConfig:
        fields: dict[str, Any] = {
            "grant": OAuthGrant.IDENTITY_ASSERTION,
            "client_id": "mcp-client",
            "client_secret": "mcp-client-secret",
            "idp_token_endpoint": self.idp.issuer + "/token",
            "idp_client_id": "idp-client",
            "idp_client_secret": "idp-client-secret",
            "assertion_env": "TEST_ID_TOKEN",
        }
        fields.update(changes)
        return OAuthConfig(**{key: value for key, value in fields.items() if value is not None})

    def id_token(self, **kwargs: Any) -> str:
        return self.idp.id_token(client_id="idp-client", **kwargs)


@contextlib.asynccontextmanager
async def enterprise(idp_options: dict[str, Any] | None = None, **as_options: Any) -> AsyncIterator[Enterprise]:
    """An enterprise IdP, and an authorization server (guarding the demo server) that trusts its ID-JAGs."""
    clients = {"idp-client": {"secret": "idp-client-secret", "asClientId": "mcp-client"}}
    idp = IdentityProviderTestServer({"clients": clients, **(idp_options or {})})
    async with slot(demo=False) as held:
        held.app = idp
        idp.base = held.origin
        options: dict[str, Any] = {
            "clients": {"mcp-client": {"secret": "mcp-client-secret"}, "other-client": {"secret": "other-secret"}},
            "assertionIssuers": {idp.issuer: idp.public_key_pem},
            "refresh": False,
            **as_options,
        }
        async with oauth_server(**options) as server:
            yield Enterprise(idp, server)


async def test_identity_assertion_exchanges_the_id_token_then_presents_the_id_jag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ID token goes to the IdP in an RFC 8693 exchange; the ID-JAG to the AS as a jwt-bearer grant."""
    async with enterprise() as env:
        id_token = env.id_token()
        monkeypatch.setenv("TEST_ID_TOKEN", id_token)
        store = MemoryTokenStore()
        target = env.server.target(env.oauth())
        assert await _echo(target, build_auth(target, _settings(store))) == "hi"
        (exchange,) = env.idp.requests
        assert exchange["basic"] is None
        assert exchange["form"] == {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "subject_token": id_token,
            "subject_token_type": ID_TOKEN_TYPE,
            "audience": env.server.base,  # the authorization server's issuer
            "resource": env.server.url,  # the MCP server's resource identifier
            "scope": "mcp",
            "client_id": "idp-client",
            "client_secret": "idp-client-secret",
        }
        (grant,) = await _token_requests(env.server)
        assert grant["basic"] == ["mcp-client", "mcp-client-secret"]  # client_secret_basic, as the metadata allows
        form = grant["form"]
        assert set(form) == {"grant_type", "assertion", "client_id", "resource", "scope"}
        assert (form["grant_type"], form["client_id"], form["resource"], form["scope"]) == (
            JWT_BEARER,
            "mcp-client",
            env.server.url,
            "mcp",
        )
        assert jwt.get_unverified_header(form["assertion"])["typ"] == "oauth-id-jag+jwt"
        claims = jwt.decode(form["assertion"], options={"verify_signature": False})
        assert (claims["aud"], claims["resource"], claims["client_id"]) == (
            env.server.base,
            env.server.url,
            "mcp-client",
        )
        assert await env.server.count("grant:id-jag") == 1
        assert await env.server.count("token:authorization_code") == 0
        assert (await store.status(target.server_id)).logged_in


async def test_identity_assertion_takes_the_id_token_from_a_file_and_the_overrides(tmp_path: Path) -> None:
    """assertionFile holds the ID token; audience and resource replace the discovered ones in the exchange."""
    async with enterprise() as env:
        token_file = tmp_path / "id-token"
        token_file.write_text(env.id_token() + "\n")
        oauth = env.oauth(
            assertion_env=None,
            assertion_file=str(token_file),
            audience=env.server.base + "/",
            resource=env.server.url,
            scopes=("mcp", "extra"),
        )
        target = env.server.target(oauth)
        assert await _echo(target, build_auth(target, _settings())) == "hi"
        (exchange,) = env.idp.requests
        assert exchange["form"]["subject_token"] == token_file.read_text().strip()
        assert (exchange["form"]["audience"], exchange["form"]["scope"]) == (env.server.base + "/", "mcp extra")
        (grant,) = await _token_requests(env.server)
        assert grant["form"]["scope"] == "mcp extra"


async def test_identity_assertion_asks_the_host_for_the_id_token() -> None:
    """With no file or variable, the runtime's assertion_handler is asked, with the audience and resource."""
    async with enterprise() as env:
        asked: list[tuple[str, AssertionRequest]] = []

        async def handler(server_id: str, request: AssertionRequest) -> str:
            asked.append((server_id, request))
            return env.id_token()

        target = env.server.target(env.oauth(assertion_env=None))
        assert await _echo(target, build_auth(target, _settings(handler=handler))) == "hi"
        assert asked == [
            (
                target.server_id,
                AssertionRequest(
                    server_name="guarded",
                    kind=AssertionKind.ID_TOKEN,
                    audience=env.server.base,
                    resource=env.server.url,
                ),
            )
        ]


@pytest.mark.parametrize(
    ("idp_options", "ttl", "oauth_error"),
    [({"deny": True}, 3600, "access_denied"), ({}, -60, "invalid_grant")],
)
async def test_an_idp_refusal_is_identity_provider_refused(
    monkeypatch: pytest.MonkeyPatch, idp_options: dict[str, Any], ttl: float, oauth_error: str
) -> None:
    """The IdP's policy saying no, or an expired ID token: IdentityProviderRefused, nothing sent to the AS."""
    async with enterprise(idp_options) as env:
        id_token = env.id_token(ttl=ttl)
        monkeypatch.setenv("TEST_ID_TOKEN", id_token)
        target = env.server.target(env.oauth())
        with pytest.raises(IdentityProviderRefused) as caught:
            await _echo(target, build_auth(target, _settings()))
        assert caught.value.oauth_error == oauth_error
        message = str(caught.value)
        assert "'guarded'" in message and "sign the user in again" in message and "idpClientId" in message
        assert id_token not in message and "idp-client-secret" not in message
        assert await _token_requests(env.server) == []


async def test_wrong_idp_credentials_are_invalid_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong idpClientSecret is the IdP's invalid_client, named as such."""
    async with enterprise() as env:
        monkeypatch.setenv("TEST_ID_TOKEN", env.id_token())
        target = env.server.target(env.oauth(idp_client_secret="not-the-secret"))
        with pytest.raises(IdentityProviderRefused) as caught:
            await _echo(target, build_auth(target, _settings()))
        assert caught.value.oauth_error == "invalid_client"
        assert "not-the-secret" not in str(caught.value)


async def test_an_answer_that_is_not_an_id_jag_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An IdP that answers another token type is an AuthorizationFailed; its token is never presented."""
    async with enterprise({"issuedTokenType": "urn:ietf:params:oauth:token-type:access_token"}) as env:
        monkeypatch.setenv("TEST_ID_TOKEN", env.id_token())
        target = env.server.target(env.oauth())
        with pytest.raises(AuthorizationFailed, match="did not answer with an ID-JAG"):
            await _echo(target, build_auth(target, _settings()))
        assert await _token_requests(env.server) == []


async def test_an_idp_answer_past_its_bound_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """An IdP answer over 64 KiB is refused at the bound, named, and nothing goes to the AS."""
    async with enterprise({"padding": 100_000}) as env:
        monkeypatch.setenv("TEST_ID_TOKEN", env.id_token())
        target = env.server.target(env.oauth())
        with pytest.raises(AuthorizationFailed, match="more than 64 KiB; it was not read"):
            await _echo(target, build_auth(target, _settings()))
        assert await _token_requests(env.server) == []


async def test_an_unreachable_idp_is_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    """An IdP that cannot be reached is AuthorizationServerUnreachable (retried with backoff), naming the field."""
    async with enterprise() as env:
        monkeypatch.setenv("TEST_ID_TOKEN", env.id_token())
        target = env.server.target(env.oauth(idp_token_endpoint="http://127.0.0.1:9/token"))
        with pytest.raises(AuthorizationServerUnreachable, match="idpTokenEndpoint"):
            await _echo(target, build_auth(target, _settings()))


async def test_an_id_jag_for_another_client_is_refused_by_the_authorization_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The AS refuses an ID-JAG naming another client: AuthorizationFailed with its invalid_grant, asked once."""
    async with enterprise() as env:
        monkeypatch.setenv("TEST_ID_TOKEN", env.id_token())
        target = env.server.target(env.oauth(client_id="other-client", client_secret="other-secret"))
        with pytest.raises(AuthorizationFailed) as caught:
            await _echo(target, build_auth(target, _settings()))
        assert caught.value.oauth_error == "invalid_grant"
        assert "identity_assertion grant" in str(caught.value) and "names another client" in str(caught.value)
        assert len(await _token_requests(env.server)) == 1
        assert await env.server.count("token:authorization_code") == 0


async def test_a_configured_issuer_the_server_does_not_name_stops_the_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    """config.oauth.issuer pins the AS: metadata naming another one sends nothing to the IdP or the AS."""
    async with enterprise() as env:
        monkeypatch.setenv("TEST_ID_TOKEN", env.id_token())
        target = env.server.target(env.oauth(issuer="https://as.elsewhere.example"))
        with pytest.raises(AuthorizationFailed, match=r"not config\.oauth\.issuer"):
            await _echo(target, build_auth(target, _settings()))
        assert env.idp.requests == []
        assert await _token_requests(env.server) == []


async def test_no_token_source_and_no_handler_is_authorization_required() -> None:
    """Without a file, a variable or an assertion_handler, the error names all three."""
    async with enterprise() as env:
        target = env.server.target(env.oauth(assertion_env=None))
        with pytest.raises(AuthorizationRequired) as caught:
            await _echo(target, build_auth(target, _settings()))
        for words in ("assertionFile", "assertionEnv", "assertion_handler", "the user's ID token"):
            assert words in str(caught.value)


async def test_the_runtime_passes_its_assertion_handler(tmp_path: Path) -> None:
    """open_runtime(assertion_handler=) reaches a record's identity_assertion grant through the real tree."""
    async with enterprise() as env:
        asked: list[AssertionKind] = []

        async def handler(server_id: str, request: AssertionRequest) -> str:
            asked.append(request.kind)
            return env.id_token()

        oauth = {
            "grant": "identity_assertion",
            "clientId": "mcp-client",
            "clientSecret": "mcp-client-secret",
            "idpTokenEndpoint": env.idp.issuer + "/token",
            "idpClientId": "idp-client",
            "idpClientSecret": "idp-client-secret",
        }
        record = {"name": "guarded", "type": "http", "config": {"url": env.server.url, "oauth": oauth}}
        with fail_after():
            async with open_runtime(
                tmp_path / "cfg.json", sweep_ledger=False, token_store=MemoryTokenStore(), assertion_handler=handler
            ) as rt:
                await rt.service.add(record)
                result = await rt.service.call_tool("guarded", "echo", {"text": "enterprise"})
        assert result.content[0].text == "enterprise"  # type: ignore[union-attr]
        assert asked == [AssertionKind.ID_TOKEN]


async def test_no_id_token_id_jag_or_secret_reaches_logs_events_or_errors(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """A login through the IdP, a call, then its refusal: no token or secret shows up anywhere, even at DEBUG."""
    caplog.set_level(logging.DEBUG)
    async with enterprise() as env:
        id_token = env.id_token()

        async def handler(server_id: str, request: AssertionRequest) -> str:
            return id_token

        oauth = {
            "grant": "identity_assertion",
            "clientId": "mcp-client",
            "clientSecret": "mcp-client-secret",
            "idpTokenEndpoint": env.idp.issuer + "/token",
            "idpClientId": "idp-client",
            "idpClientSecret": "idp-client-secret",
        }
        store = MemoryTokenStore()
        texts: list[str] = []
        with fail_after():
            async with open_runtime(
                tmp_path / "cfg.json", sweep_ledger=False, token_store=store, assertion_handler=handler
            ) as rt:
                events = rt.service.subscribe()
                record = await rt.service.add(
                    {"name": "guarded", "type": "http", "config": {"url": env.server.url, "oauth": oauth}}
                )
                await rt.service.call_tool("guarded", "echo", {"text": "one"})
                entry = await store.load(record.id)
                assert entry is not None
                access_token = entry["tokens"]["access_token"]
                env.idp.options["deny"] = True
                await env.server.control(expireAccess=True)
                with pytest.raises(McpActorsError) as caught:
                    await rt.service.call_tool("guarded", "echo", {"text": "two"})
                texts += [str(caught.value), repr(caught.value), repr(record), repr(rt.service.status("guarded"))]
                while True:
                    try:
                        texts.append(json.dumps(events.receive_nowait().data, default=str))
                    except trio.WouldBlock:
                        break
        assert "access_denied" in str(caught.value)
        (grant,) = await _token_requests(env.server)
        texts += [record.getMessage() + (record.exc_text or "") for record in caplog.records]
        secrets = [id_token, grant["form"]["assertion"], access_token, "mcp-client-secret", "idp-client-secret"]
        for text in texts:
            for secret in secrets:
                assert secret not in text, text


# ----------------------------------------------------------------------------- workload identity


class Platform:
    """A workload platform's signing key: it mints the workload's JWTs."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.public_pem = (
            self.key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )

    def token(self, audience: str, *, ttl: float = 600, subject: str = "system:serviceaccount:ns:agent") -> str:
        now = int(time.time())
        claims = {"iss": PLATFORM, "sub": subject, "aud": audience, "iat": now, "exp": now + int(ttl)}
        return jwt.encode({**claims, "jti": str(uuid.uuid4())}, self.key, algorithm="ES256")


@contextlib.asynccontextmanager
async def workload(**as_options: Any) -> AsyncIterator[tuple[Platform, AuthServer]]:
    """A platform, and an authorization server (guarding the demo server) that trusts its tokens."""
    platform = Platform()
    options: dict[str, Any] = {
        "clients": {"workload": {"secret": None}, "confidential": {"secret": "workload-secret"}},
        "assertionIssuers": {PLATFORM: platform.public_pem},
        **as_options,
    }
    async with oauth_server(**options) as server:
        yield platform, server


def _workload_oauth(**changes: Any) -> OAuthConfig:
    fields: dict[str, Any] = {"grant": OAuthGrant.WORKLOAD_IDENTITY, "client_id": "workload"}
    fields.update(changes)
    return OAuthConfig(**{key: value for key, value in fields.items() if value is not None})


async def test_the_workload_token_from_a_file_is_the_assertion(tmp_path: Path) -> None:
    """The file's JWT is the jwt-bearer assertion, with client_id, resource and scope; no secret, no other grant."""
    async with workload() as (platform, server):
        token_file = tmp_path / "token"
        token_file.write_text(platform.token(server.base))
        target = server.target(_workload_oauth(assertion_file=str(token_file)))
        assert await _echo(target, build_auth(target, _settings())) == "hi"
        (grant,) = await _token_requests(server)
        assert grant["basic"] is None
        assert grant["form"] == {
            "grant_type": JWT_BEARER,
            "assertion": token_file.read_text(),
            "client_id": "workload",
            "resource": server.url,
            "scope": "mcp",
        }
        assert await server.count("grant:workload") == 1
        assert await server.count("register") == 0
        assert await server.count("token:authorization_code") == 0


async def test_the_file_is_read_again_for_every_token_request(tmp_path: Path) -> None:
    """A rotated token file is followed: the next token request carries the new token."""
    async with workload(refresh=False) as (platform, server):
        issuer = server.base
        token_file = tmp_path / "token"
        token_file.write_text(platform.token(issuer))
        target = server.target(_workload_oauth(assertion_file=str(token_file)))
        settings = _settings()
        assert await _echo(target, build_auth(target, settings)) == "hi"
        token_file.write_text(platform.token(issuer))  # the platform rotates it
        await server.control(expireAccess=True)
        assert await _echo(target, build_auth(target, settings), "again") == "again"
        first, second = await _token_requests(server)
        assert first["form"]["assertion"] != second["form"]["assertion"]
        assert second["form"]["assertion"] == token_file.read_text()


async def test_a_workload_without_client_id_sends_none_and_keeps_no_refresh_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No clientId: the assertion alone identifies the workload; a refresh token (unusable) is not kept."""
    async with workload() as (platform, server):
        monkeypatch.setenv("TEST_WORKLOAD_TOKEN", platform.token(server.base))
        store = MemoryTokenStore()
        target = server.target(_workload_oauth(client_id=None, assertion_env="TEST_WORKLOAD_TOKEN"))
        assert await _echo(target, build_auth(target, _settings(store))) == "hi"
        (grant,) = await _token_requests(server)
        assert set(grant["form"]) == {"grant_type", "assertion", "resource", "scope"}
        status = await store.status(target.server_id)
        assert status.logged_in and not status.has_refresh_token


async def test_a_confidential_workload_authenticates_with_its_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """clientId and clientSecret: client_secret_basic beside the assertion."""
    async with workload() as (platform, server):
        monkeypatch.setenv("TEST_WORKLOAD_TOKEN", platform.token(server.base))
        oauth = _workload_oauth(
            client_id="confidential", client_secret="workload-secret", assertion_env="TEST_WORKLOAD_TOKEN"
        )
        target = server.target(oauth)
        assert await _echo(target, build_auth(target, _settings())) == "hi"
        (grant,) = await _token_requests(server)
        assert grant["basic"] == ["confidential", "workload-secret"]
        assert "client_secret" not in grant["form"]


async def test_the_host_handler_gets_the_audience_to_mint_for() -> None:
    """A platform that mints per audience: the handler is asked with the authorization server's issuer."""
    async with workload() as (platform, server):
        asked: list[AssertionRequest] = []

        async def handler(server_id: str, request: AssertionRequest) -> str:
            asked.append(request)
            return platform.token(request.audience)

        target = server.target(_workload_oauth())
        assert await _echo(target, build_auth(target, _settings(handler=handler))) == "hi"
        assert asked == [
            AssertionRequest(
                server_name="guarded", kind=AssertionKind.WORKLOAD, audience=server.base, resource=server.url
            )
        ]


async def test_a_token_for_another_audience_is_never_sent(tmp_path: Path) -> None:
    """Without config.oauth.issuer, a token whose aud names another server stays here: a typed error, no request."""
    async with workload() as (platform, server):
        token = platform.token("https://as.real.example")
        token_file = tmp_path / "token"
        token_file.write_text(token)
        target = server.target(_workload_oauth(assertion_file=str(token_file)))
        with pytest.raises(AuthorizationFailed) as caught:
            await _echo(target, build_auth(target, _settings()))
        message = str(caught.value)
        assert "https://as.real.example" in message and "config.oauth.issuer" in message and "not sent" in message
        assert token not in message
        assert await _token_requests(server) == []


@pytest.mark.parametrize(
    ("audience", "ttl", "words"),
    [("https://as.real.example", 600, "(aud)"), (None, -120, "expired")],
)
async def test_a_refused_workload_token_fails_once_without_retry_or_fallback(
    monkeypatch: pytest.MonkeyPatch, audience: str | None, ttl: float, words: str
) -> None:
    """The AS's invalid_grant is one AuthorizationFailed: one token request, no retry, no other grant."""
    async with workload() as (platform, server):
        issuer = server.base
        token = platform.token(audience or issuer, ttl=ttl)
        monkeypatch.setenv("TEST_WORKLOAD_TOKEN", token)
        # The configured issuer vouches for the destination, so even a token for another audience is sent.
        target = server.target(_workload_oauth(assertion_env="TEST_WORKLOAD_TOKEN", issuer=issuer))
        with pytest.raises(AuthorizationFailed) as caught:
            await _echo(target, build_auth(target, _settings()))
        assert caught.value.oauth_error == "invalid_grant"
        message = str(caught.value)
        assert words in message and "workload_identity grant" in message and token not in message
        assert len(await _token_requests(server)) == 1
        assert await server.count("token:authorization_code") == 0
        assert await server.count("register") == 0


async def test_an_asyncio_hosts_assertion_handler_runs_on_its_loop(tmp_path: Path) -> None:
    """Through start_portal, an asyncio host's coroutine assertion_handler runs on the host's own loop."""
    async with workload() as (platform, server):

        def host() -> tuple[list[bool], str]:
            async def main() -> tuple[list[bool], str]:
                loop = asyncio.get_running_loop()
                seen: list[bool] = []

                async def assertion(server_id: str, request: AssertionRequest) -> str:
                    seen.append(asyncio.get_running_loop() is loop)
                    await asyncio.sleep(0)
                    return platform.token(request.audience)

                oauth = {"grant": "workload_identity", "clientId": "workload"}
                record = {"name": "guarded", "type": "http", "config": {"url": server.url, "oauth": oauth}}
                portal = start_portal(
                    str(tmp_path / "cfg.json"),
                    sweep_ledger=False,
                    token_store=MemoryTokenStore(),
                    assertion_handler=assertion,
                )
                try:
                    svc = portal.asyncio_service()
                    await svc.add(record)
                    result = await svc.call_tool("guarded", "echo", {"text": "from asyncio"})
                    return seen, str(result.content[0].text)  # type: ignore[union-attr]
                finally:
                    await asyncio.to_thread(portal.close)

            return asyncio.run(main())

        with fail_after():
            seen, text = await trio.to_thread.run_sync(host)
        assert (seen, text) == ([True], "from asyncio")


@pytest.mark.parametrize("value", [None, "", "two tokens"])
async def test_a_missing_or_malformed_variable_is_named(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    """An unset or empty assertionEnv, or one holding more than a token: AuthorizationFailed naming the variable."""
    async with workload() as (_, server):
        if value is None:
            monkeypatch.delenv("TEST_WORKLOAD_TOKEN", raising=False)
        else:
            monkeypatch.setenv("TEST_WORKLOAD_TOKEN", value)
        target = server.target(_workload_oauth(assertion_env="TEST_WORKLOAD_TOKEN"))
        with pytest.raises(AuthorizationFailed, match=r"config\.oauth\.assertionEnv TEST_WORKLOAD_TOKEN"):
            await _echo(target, build_auth(target, _settings()))
        assert await _token_requests(server) == []


async def test_a_missing_token_file_is_named(tmp_path: Path) -> None:
    """A token file that does not exist is an AuthorizationFailed naming the field and the path."""
    async with workload() as (_, server):
        target = server.target(_workload_oauth(assertion_file=str(tmp_path / "absent")))
        with pytest.raises(AuthorizationFailed, match=r"config\.oauth\.assertionFile .*absent.* does not exist"):
            await _echo(target, build_auth(target, _settings()))


def test_an_assertion_never_travels_over_plain_http_off_this_machine() -> None:
    """A token endpoint on plain http elsewhere than loopback is refused before any assertion is read."""
    target = OAuthTarget(
        server_id="mcp_1_a", server_name="remote", url="https://mcp.example/mcp", oauth=_workload_oauth()
    )
    provider = AssertionGrantProvider(
        target, MemoryTokenStore().storage_for("x", server_url=target.url), handler=None, secret_method=str
    )
    provider.context.oauth_metadata = OAuthMetadata.model_validate(
        {
            "issuer": "http://as.example",
            "authorization_endpoint": "http://as.example/authorize",
            "token_endpoint": "http://as.example/token",
        }
    )
    with pytest.raises(AuthorizationFailed, match="is not https"):
        provider._checked_metadata()
