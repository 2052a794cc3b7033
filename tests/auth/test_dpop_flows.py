"""DPoP through the runtime: the test authorization server checks every proof (RFC 9449 §4.3) and binds its tokens.

The server refuses a bad proof (signature, typ, htm, htu, iat, a replayed jti, ath, another
key), so a test that passes has had every request proved; its counters say which requests
were (``dpop:token:<grant>``, ``dpop:resource:<method>``) and which were refused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import traceback
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from mcp_actors._auth.dpop import DpopKey
from mcp_actors._auth.oauth import AuthSettings, build_auth, open_authorized_session
from mcp_actors._auth.token_store import FileTokenStore, JsonTokenStore, MemoryTokenStore
from mcp_actors.errors import AuthorizationFailed
from mcp_actors.runtime import Runtime, open_runtime
from tests.auth.conftest import AuthServer, browser, fail_after, oauth_server

_DPOP = {"algs": ["ES256"], "challenge": "DPoP"}
"""Both servers take DPoP: ES256 at the authorization server, a DPoP challenge at the resource."""


@contextlib.asynccontextmanager
async def _runtime(tmp_path: Path, store: JsonTokenStore) -> AsyncIterator[Runtime]:
    async with open_runtime(
        tmp_path / "cfg.json",
        sweep_ledger=False,
        connect_on_add=False,
        authorization_handler=browser,
        token_store=store,
    ) as rt:
        yield rt


def _record(
    server: AuthServer, oauth: dict[str, Any] | None = None, *, kind: str = "http", protocol: str = "auto"
) -> dict[str, Any]:
    url = server.url if kind == "http" else server.base + "/sse"
    config: dict[str, Any] = {"url": url, "protocol": protocol}
    if oauth is not None:
        config["oauth"] = oauth
    return {"name": "guarded", "type": kind, "config": config}


async def _counts(server: AuthServer) -> dict[str, int]:
    return dict((await server.stats())["counts"])


def _refusals(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if "refused" in k or "refusal" in k or "bearerForBound" in k}


async def test_auto_binds_the_tokens_and_proves_every_request(tmp_path: Path) -> None:
    """auto, both servers willing: the token request is proved, the token is DPoP, every MCP request is proved.

    On a handshake session, POSTs, the GET stream and the closing DELETE each carry
    ``Authorization: DPoP`` and a fresh proof the server accepts; none is refused; the status
    says DPoP-bound.
    """
    async with oauth_server(dpop=_DPOP) as server:
        store = MemoryTokenStore()
        with fail_after():
            async with _runtime(tmp_path, store) as rt:
                record = await rt.service.add(_record(server, protocol="legacy"))
                for text in ("one", "two", "three"):
                    result = await rt.service.call_tool("guarded", "echo", {"text": text})
                    assert result.content[0].text == text  # type: ignore[union-attr]
                await rt.service.disconnect("guarded")
            assert (await store.status(record.id)).dpop_bound
        counts = await _counts(server)
        assert counts["dpop:token:authorization_code"] == 1
        assert counts["dpop:resource:POST"] >= 5  # initialize, initialized, list, three calls
        assert counts.get("dpop:resource:DELETE") == 1
        assert counts.get("dpop:resource:GET", 0) >= 1
        assert _refusals(counts) == {}
        proofs = (await server.stats())["proofs"]
        assert len({jwt.decode(p, options={"verify_signature": False})["jti"] for p in proofs}) == len(proofs)


async def test_the_authorization_servers_nonce_is_fetched_once(tmp_path: Path) -> None:
    """400 use_dpop_nonce at the token endpoint: the request is repeated once with the server's nonce (RFC 9449 §8)."""
    async with oauth_server(dpop={**_DPOP, "asNonce": "as-nonce-1"}) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
        counts = await _counts(server)
        assert counts["dpop:asNonceChallenge"] == 1
        assert counts["token:authorization_code"] == 2
        assert counts["dpop:token:authorization_code"] == 1
        assert _refusals(counts) == {}


async def test_the_resource_servers_nonce_is_retried_once_then_carried(tmp_path: Path) -> None:
    """401 DPoP error=use_dpop_nonce: retried once with the nonce; later requests carry it; a new one is learned."""
    async with oauth_server(dpop={**_DPOP, "rsNonce": "rs-nonce-1"}) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
                after_login = await server.count("dpop:rsNonceChallenge")
                for _ in range(3):
                    await rt.service.call_tool("guarded", "echo", {"text": "again"})
                assert await server.count("dpop:rsNonceChallenge") == after_login
                await server.control(dpop={**_DPOP, "rsNonce": "rs-nonce-2"})
                result = await rt.service.call_tool("guarded", "echo", {"text": "rotated"})
                assert result.content[0].text == "rotated"  # type: ignore[union-attr]
                assert await server.count("dpop:rsNonceChallenge") == after_login + 1
        assert after_login == 1
        assert _refusals(await _counts(server)) == {}


async def test_the_key_is_kept_and_reused_across_restarts(tmp_path: Path) -> None:
    """A second runtime on the same token file proves with the same key: no new login, the bound token works."""
    async with oauth_server(dpop=_DPOP) as server:
        store = FileTokenStore(tmp_path / "tokens.json")
        with fail_after():
            async with _runtime(tmp_path, store) as rt:
                record = await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "first run"})
        entry = await store.load(record.id)
        assert entry is not None
        jkt = DpopKey.from_jwk(entry["dpopKey"]).jkt
        assert entry["tokenBinding"] == {"jkt": jkt, "tokenType": "DPoP"}
        with fail_after():
            async with _runtime(tmp_path, FileTokenStore(tmp_path / "tokens.json")) as rt:
                await rt.service.call_tool("guarded", "echo", {"text": "second run"})
        assert await server.count("authorize") == 1
        after = await store.load(record.id)
        assert after is not None and after["dpopKey"] == entry["dpopKey"]
        assert _refusals(await _counts(server)) == {}


async def test_tokens_are_only_used_with_the_key_that_obtained_them(tmp_path: Path) -> None:
    """A stored key that is not the tokens' key (replaced, damaged): the tokens are never presented; a new login."""
    async with oauth_server(dpop=_DPOP) as server:
        store = MemoryTokenStore()
        with fail_after():
            async with _runtime(tmp_path, store) as rt:
                record = await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
        other = DpopKey.generate()
        await store.storage_for(record.id, server_url=server.url).set_dpop_key(other.private_jwk())
        refused_before = await server.count("dpop:resource:refused")
        with fail_after():
            async with _runtime(tmp_path, store) as rt:
                await rt.service.call_tool("guarded", "echo", {"text": "y"})
        assert await server.count("dpop:resource:refused") == refused_before == 0
        assert await server.count("authorize") == 2
        entry = await store.load(record.id)
        assert entry is not None and entry["tokenBinding"]["jkt"] == other.jkt


async def test_a_refresh_is_proved_with_the_tokens_key(tmp_path: Path) -> None:
    """An access token the server dropped is refreshed with a proof of the same key (a bound refresh token)."""
    async with oauth_server(dpop=_DPOP) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
                await server.control(expireAccess=True)
                await rt.service.call_tool("guarded", "echo", {"text": "refreshed"})
        counts = await _counts(server)
        assert counts["dpop:token:refresh_token"] == 1
        assert counts.get("dpop:refreshWithoutItsKey", 0) == 0
        assert counts["authorize"] == 1
        assert _refusals(counts) == {}


async def test_client_credentials_are_proved_too(tmp_path: Path) -> None:
    """The client_credentials grant's token request carries a proof and gets a bound token."""
    async with oauth_server(dpop=_DPOP, clients={"machine": {"secret": "m2m"}}) as server:
        oauth = {"grant": "client_credentials", "clientId": "machine", "clientSecret": "m2m"}
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server, oauth))
                await rt.service.call_tool("guarded", "echo", {"text": "m2m"})
        counts = await _counts(server)
        assert counts["dpop:token:client_credentials"] == 1
        assert counts["dpop:resource:POST"] >= 3
        assert _refusals(counts) == {}


async def test_a_bearer_answer_is_used_as_bearer_without_proofs(tmp_path: Path) -> None:
    """An authorization server that answers a proved request with a Bearer token: Bearer, no proof to the resource."""
    async with oauth_server(dpop={**_DPOP, "bind": False}) as server:
        store = MemoryTokenStore()
        with fail_after():
            async with _runtime(tmp_path, store) as rt:
                record = await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
        counts = await _counts(server)
        assert counts["dpop:token:authorization_code"] == 1
        assert not [k for k in counts if k.startswith("dpop:resource")]
        assert not (await store.status(record.id)).dpop_bound


@pytest.mark.parametrize(
    ("dpop_setting", "server_dpop"),
    [
        (False, {**_DPOP, "challenge": "both"}),
        ("auto", {"algs": ["ES256"], "challenge": "Bearer"}),
        ("auto", {"algs": None, "challenge": "DPoP"}),
    ],
    ids=["off", "auto-resource-server-says-nothing", "auto-authorization-server-says-nothing"],
)
async def test_no_dpop_no_signature(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dpop_setting: object, server_dpop: dict[str, Any]
) -> None:
    """dpop false, or auto with one side silent: bearer tokens and not one signature, at either server."""

    def no_signing(*args: object, **kwargs: object) -> str:
        raise AssertionError("a proof was signed")

    monkeypatch.setattr(DpopKey, "proof", no_signing)
    async with oauth_server(dpop=server_dpop) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server, {"dpop": dpop_setting}))
                await rt.service.call_tool("guarded", "echo", {"text": "bearer"})
        stats = await server.stats()
        assert stats["proofs"] == []
        assert stats["counts"]["token:authorization_code"] == 1


async def test_dpop_true_proves_even_when_the_servers_say_nothing(tmp_path: Path) -> None:
    """dpop true: the token request is proved though neither server advertises DPoP."""
    async with oauth_server(dpop={"algs": None, "challenge": "Bearer"}) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server, {"dpop": True}))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
        counts = await _counts(server)
        assert counts["dpop:token:authorization_code"] == 1
        assert counts["dpop:resource:POST"] >= 3
        assert _refusals(counts) == {}


async def test_a_resource_server_requiring_dpop_that_no_one_can_sign_for_is_a_typed_error(tmp_path: Path) -> None:
    """dpop_bound_access_tokens_required with an authorization server that takes only RS256: AuthorizationFailed."""
    async with oauth_server(dpop={"algs": ["RS256"], "challenge": "Bearer", "prmRequired": True}) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server))
                with pytest.raises(AuthorizationFailed, match=r"RS256.*ES256.*config\.oauth\.dpop") as caught:
                    await rt.service.call_tool("guarded", "echo", {"text": "x"})
        assert caught.value.oauth_error is None
        assert await server.count("token:authorization_code") == 0


@pytest.mark.parametrize(
    ("server_dpop", "oauth_error"),
    [({"refuseProofs": True}, "invalid_dpop_proof"), ({"asNonce": "moving", "rotateAsNonce": True}, "use_dpop_nonce")],
    ids=["proof-refused", "nonce-never-accepted"],
)
async def test_a_refused_proof_is_a_typed_error_naming_dpop(
    tmp_path: Path, server_dpop: dict[str, Any], oauth_error: str
) -> None:
    """A token endpoint refusing the proof, or wanting another nonce after one retry: AuthorizationFailed, no loop."""
    async with oauth_server(dpop={**_DPOP, **server_dpop}) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server))
                with pytest.raises(AuthorizationFailed, match=r"DPoP proof.*config\.oauth\.dpop") as caught:
                    await rt.service.call_tool("guarded", "echo", {"text": "x"})
        assert caught.value.oauth_error == oauth_error
        assert await server.count("token:authorization_code") <= 2


async def test_the_sse_transport_proves_its_stream_and_posts(tmp_path: Path) -> None:
    """Legacy SSE: the GET stream and every POST carry a DPoP proof for their own method and URL."""
    async with oauth_server(dpop=_DPOP) as server:
        with fail_after():
            async with _runtime(tmp_path, MemoryTokenStore()) as rt:
                await rt.service.add(_record(server, kind="sse"))
                result = await rt.service.call_tool("guarded", "echo", {"text": "over sse"})
        assert result.content[0].text == "over sse"  # type: ignore[union-attr]
        counts = await _counts(server)
        assert counts["dpop:resource:GET"] >= 1 and counts["dpop:resource:POST"] >= 3
        assert _refusals(counts) == {}


async def test_the_login_session_of_the_cli_proves_too() -> None:
    """open_authorized_session (``auth login``, on the SDK's httpx transport) binds, proves and takes nonces alike."""
    async with oauth_server(dpop={**_DPOP, "asNonce": "a", "rsNonce": "r"}) as server:
        target = server.target()
        auth = build_auth(target, AuthSettings(token_store=MemoryTokenStore(), authorization_handler=browser))
        with fail_after():
            async with open_authorized_session(target, auth) as session:
                result = await session.call_tool("echo", {"text": "cli"})
        assert result.content[0].text == "cli"  # type: ignore[union-attr]
        counts = await _counts(server)
        assert counts["dpop:token:authorization_code"] == 1 and counts["dpop:resource:POST"] >= 3
        assert _refusals(counts) == {}


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "".join(traceback.format_exception(*record.exc_info))
        self.lines.append(text)


@pytest.fixture
def logs() -> Iterator[_Collect]:
    """Every log record of every logger, at DEBUG."""
    handler = _Collect()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def test_a_proof_or_the_key_is_never_logged(logs: _Collect, tmp_path: Path) -> None:
    """A login, nonce challenges at both servers, calls and a refresh, at DEBUG: no proof, no key in any log line."""
    async with oauth_server(dpop={**_DPOP, "asNonce": "a", "rsNonce": "r"}) as server:
        store = MemoryTokenStore()
        with fail_after():
            async with _runtime(tmp_path, store) as rt:
                record = await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
                await server.control(expireAccess=True)
                await rt.service.call_tool("guarded", "echo", {"text": "y"})
        proofs = (await server.stats())["proofs"]
        entry = await store.load(record.id)
    assert entry is not None and len(proofs) >= 6
    secrets = [p.rsplit(".", 1)[1] for p in proofs]  # each proof's signature: unique to it
    secrets.append(entry["dpopKey"]["d"])
    text = "\n".join(logs.lines)
    assert logs.lines
    for secret in secrets:
        assert secret not in text
    assert "dpop+jwt" not in text and json.dumps(entry["dpopKey"]) not in text
