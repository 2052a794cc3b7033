"""The public face of mcp_actors.auth, and the token stores' promises (0600, atomic, per URL, logout)."""

from __future__ import annotations

import fcntl
import importlib
import inspect
import json
import os
import sys
import time
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mcp_actors.auth import CallableTokenStore, FileTokenStore, KeyringTokenStore, MemoryTokenStore, default_token_path
from mcp_actors.errors import ConfigFileLocked, ConfigWriteFailed


def test_auth_face_is_sorted_importable_and_documented() -> None:
    """``mcp_actors.auth.__all__`` is sorted, every name resolves, classes and functions have docstrings."""
    module = importlib.import_module("mcp_actors.auth")
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), name


def test_default_token_file_is_in_the_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The default token file sits in MCP_ACTORS_STATE_DIR, beside the process ledger."""
    monkeypatch.setenv("MCP_ACTORS_STATE_DIR", str(tmp_path))
    assert default_token_path() == tmp_path / "oauth-tokens.json"


async def test_file_store_is_0600_atomic_and_keyed_by_server_and_url(tmp_path: Path) -> None:
    """Tokens are written 0600 with no temp file left; another URL's tokens are not handed out."""
    path = tmp_path / "state" / "tokens.json"
    store = FileTokenStore(path)
    storage = store.storage_for("mcp_a", server_url="https://a.example/mcp")
    await storage.set_tokens(OAuthToken(access_token="secret-access", expires_in=60, scope="x y"))
    await storage.set_client_info(OAuthClientInformationFull(client_id="cid", redirect_uris=None))
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir() if p.suffix == ".tmp"] == []
    again = FileTokenStore(path).storage_for("mcp_a", server_url="https://a.example/mcp")
    tokens = await again.get_tokens()
    assert tokens is not None and tokens.access_token == "secret-access"
    moved = FileTokenStore(path).storage_for("mcp_a", server_url="https://moved.example/mcp")
    assert await moved.get_tokens() is None
    status = await store.status("mcp_a")
    assert status.logged_in and status.scopes == ("x", "y") and status.client_id == "cid"
    assert "secret-access" not in repr(status) and "secret-access" not in json.dumps(status.to_json())
    assert "secret-access" not in repr(store) + repr(storage)
    assert await store.forget("mcp_a") is True
    assert await store.forget("mcp_a") is False
    assert not (await store.status("mcp_a")).logged_in


async def test_corrupt_token_file_costs_a_login_not_a_crash(tmp_path: Path) -> None:
    """A token file that is not JSON reads as empty and is replaced by the next write."""
    path = tmp_path / "tokens.json"
    path.write_text("{not json")
    store = FileTokenStore(path)
    storage = store.storage_for("s", server_url="https://a.example/mcp")
    assert await storage.get_tokens() is None
    await storage.set_tokens(OAuthToken(access_token="t"))
    assert json.loads(path.read_text())["servers"]["s"]["tokens"]["access_token"] == "t"


async def test_memory_and_callable_stores() -> None:
    """The memory store keeps copies; a host's own TokenStorage per server plugs in through CallableTokenStore."""
    memory = MemoryTokenStore()
    storage = memory.storage_for("s", server_url="https://a.example/mcp")
    await storage.set_tokens(OAuthToken(access_token="t", refresh_token="r"))
    host = CallableTokenStore(lambda server_id: memory.storage_for(server_id, server_url="https://a.example/mcp"))
    status = await host.status("s")
    assert status.logged_in and status.has_refresh_token
    assert await host.forget("s") is False  # no forget given: nothing deleted


def test_keyring_store_without_the_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the keyring package, KeyringTokenStore fails at construction naming the package."""
    monkeypatch.setitem(sys.modules, "keyring", None)
    with pytest.raises(RuntimeError, match="pip install keyring"):
        KeyringTokenStore()


async def test_keyring_store_keeps_tokens_in_a_real_keyring(tmp_path: Path) -> None:
    """With the keyring package (a file backend from keyrings.alt), tokens round-trip per server and logout forgets."""
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    backend = PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")  # type: ignore[misc]
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        store = KeyringTokenStore(service="mcp-actors-test")
        storage = store.storage_for("mcp_k", server_url="https://k.example/mcp")
        await storage.set_tokens(OAuthToken(access_token="kr-access", expires_in=60, scope="a"))
        again = KeyringTokenStore(service="mcp-actors-test").storage_for("mcp_k", server_url="https://k.example/mcp")
        tokens = await again.get_tokens()
        assert tokens is not None and tokens.access_token == "kr-access"
        assert "kr-access" not in repr(store)
        assert (await store.status("mcp_k")).logged_in
        assert await store.forget("mcp_k") is True
        assert not (await store.status("mcp_k")).logged_in
    finally:
        keyring.set_keyring(previous)


async def test_a_token_lock_file_that_cannot_be_created_fails_at_once_with_the_os_reason() -> None:
    """A directory refusing the lock file is ConfigWriteFailed at once with the OS reason, not a lock timeout."""
    store = FileTokenStore("/proc/self/oauth-tokens.json", lock_timeout=30.0)
    storage = store.storage_for("s", server_url="https://a.example/mcp")
    started = time.monotonic()
    with pytest.raises(ConfigWriteFailed) as caught:
        await storage.set_tokens(OAuthToken(access_token="t"))
    assert time.monotonic() - started < 10.0
    error = caught.value
    assert not isinstance(error, ConfigFileLocked)
    assert error.os_errno is not None and error.reason == os.strerror(error.os_errno)
    assert str(store.path) in str(error)


async def test_a_token_lock_held_too_long_is_config_file_locked(tmp_path: Path) -> None:
    """While another holder keeps the token file's lock, a write gives up after lock_timeout with ConfigFileLocked."""
    path = tmp_path / "tokens.json"
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        store = FileTokenStore(path, lock_timeout=0.1)
        with pytest.raises(ConfigFileLocked) as caught:
            await store.storage_for("s", server_url="https://a.example/mcp").set_tokens(OAuthToken(access_token="t"))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert caught.value.path == str(path)
    assert not path.exists()


async def test_a_symlinked_token_file_stays_a_link_and_its_target_gets_the_tokens(tmp_path: Path) -> None:
    """As the config file: a token file that is a link is written through to its target, 0600, the link kept."""
    target = tmp_path / "dotfiles" / "tokens.json"
    target.parent.mkdir()
    link = tmp_path / "state" / "tokens.json"
    link.parent.mkdir()
    link.symlink_to(target)
    await (
        FileTokenStore(link)
        .storage_for("s", server_url="https://a.example/mcp")
        .set_tokens(OAuthToken(access_token="t"))
    )
    assert link.is_symlink()
    assert json.loads(target.read_text())["servers"]["s"]["tokens"]["access_token"] == "t"
    assert target.stat().st_mode & 0o777 == 0o600
