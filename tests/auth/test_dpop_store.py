"""The DPoP key lives in the token store with the tokens it obtained: 0600, per server and URL, across restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthToken

from mcp_actors._auth.dpop import DpopKey, TokenBinding
from mcp_actors._auth.token_store import DpopTokenStorage, ServerTokenStorage
from mcp_actors.auth import CallableTokenStore, FileTokenStore, KeyringTokenStore, MemoryTokenStore

_URL = "https://a.example/mcp"


async def test_the_key_and_the_binding_survive_a_restart_in_the_0600_file(tmp_path: Path) -> None:
    """A key and the tokens bound to it are in the server's entry of the 0600 file, and read back by a new store."""
    path = tmp_path / "tokens.json"
    key = DpopKey.generate()
    storage = FileTokenStore(path).storage_for("mcp_a", server_url=_URL)
    assert await storage.get_dpop_key() is None
    await storage.set_dpop_key(key.private_jwk())
    await storage.set_tokens(OAuthToken(access_token="bound"), binding=TokenBinding(jkt=key.jkt))
    assert path.stat().st_mode & 0o777 == 0o600
    entry = json.loads(path.read_text())["servers"]["mcp_a"]
    assert entry["dpopKey"]["d"] == key.private_jwk()["d"]
    assert entry["tokenBinding"] == {"jkt": key.jkt, "tokenType": "DPoP"}

    again = FileTokenStore(path).storage_for("mcp_a", server_url=_URL)
    stored = await again.get_dpop_key()
    assert stored is not None and DpopKey.from_jwk(stored).jkt == key.jkt
    assert await again.get_token_binding() == TokenBinding(jkt=key.jkt)
    status = await FileTokenStore(path).status("mcp_a")
    assert status.dpop_bound and status.to_json()["dpopBound"] is True
    assert key.private_jwk()["d"] not in repr(status) + json.dumps(status.to_json()) + repr(again)


async def test_bearer_tokens_clear_the_binding_and_keep_the_key() -> None:
    """Tokens stored without a binding (a login without DPoP) drop the old binding; the key stays for later."""
    storage = MemoryTokenStore().storage_for("s", server_url=_URL)
    key = DpopKey.generate()
    await storage.set_dpop_key(key.private_jwk())
    await storage.set_tokens(OAuthToken(access_token="one"), binding=TokenBinding(jkt=key.jkt))
    await storage.set_tokens(OAuthToken(access_token="two"))
    assert await storage.get_token_binding() is None
    assert await storage.get_dpop_key() == key.private_jwk()


async def test_a_new_url_or_a_logout_forgets_the_key() -> None:
    """The key belongs to the entry: another URL starts without one, and a logout deletes it with the tokens."""
    store = MemoryTokenStore()
    storage = store.storage_for("s", server_url=_URL)
    await storage.set_dpop_key(DpopKey.generate().private_jwk())
    assert await store.storage_for("s", server_url="https://moved.example/mcp").get_dpop_key() is None
    assert await store.forget("s")
    assert await storage.get_dpop_key() is None


async def test_the_keyring_store_keeps_the_key_too(tmp_path: Path) -> None:
    """The keyring store's entries hold the key like the file's (one secret per server)."""
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")  # type: ignore[misc]
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        key = DpopKey.generate()
        await (
            KeyringTokenStore(service="mcp-actors-dpop")
            .storage_for("k", server_url=_URL)
            .set_dpop_key(key.private_jwk())
        )
        stored = await KeyringTokenStore(service="mcp-actors-dpop").storage_for("k", server_url=_URL).get_dpop_key()
        assert stored is not None and DpopKey.from_jwk(stored).jkt == key.jkt
    finally:
        keyring.set_keyring(previous)


def test_which_storages_can_keep_a_key() -> None:
    """Our stores' storages can keep a DPoP key; a host's plain SDK TokenStorage cannot."""
    ours = MemoryTokenStore().storage_for("s", server_url=_URL)
    assert isinstance(ours, ServerTokenStorage) and isinstance(ours, DpopTokenStorage)

    class HostStorage:
        async def get_tokens(self) -> OAuthToken | None:
            return None

        async def set_tokens(self, tokens: OAuthToken) -> None:
            pass

        async def get_client_info(self) -> None:
            return None

        async def set_client_info(self, client_info: object) -> None:
            pass

    host = CallableTokenStore(lambda server_id: HostStorage()).storage_for("s", server_url=_URL)  # type: ignore[arg-type,return-value]
    assert not isinstance(host, DpopTokenStorage)


@pytest.mark.parametrize("damaged", [{"dpopKey": "nope"}, {"tokenBinding": {"jkt": 3}}])
async def test_a_damaged_key_or_binding_reads_as_none(damaged: dict[str, object], tmp_path: Path) -> None:
    """A key or binding that is not what we wrote reads as absent (a new key, a new login), never a crash."""
    path = tmp_path / "tokens.json"
    entry = {"serverUrl": _URL, "tokens": {"access_token": "t", "token_type": "Bearer"}, **damaged}
    path.write_text(json.dumps({"version": 1, "servers": {"s": entry}}))
    storage = FileTokenStore(path).storage_for("s", server_url=_URL)
    assert await storage.get_dpop_key() is None
    assert await storage.get_token_binding() is None
