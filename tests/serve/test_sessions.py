"""Signed session ids: any front that shares the key continues a session; ends and expiry hold everywhere.

In process: several gateways (fronts) over one runtime, as replicas would be, sharing a key
and a store (in memory here; Redis in test_redis_store.py and test_scaleout.py), driven with
plain HTTP requests so that each request goes exactly where the test says.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from mcp_actors.errors import ConfigError
from mcp_actors.runtime import open_runtime
from mcp_actors.serve import HttpGateway, MemoryGatewayStore, SessionBook, SessionKeys, SessionState, serve_http
from mcp_actors.serve._sessions import SESSION_KEY_ENV

BOUND = 30.0
KEY = b"k" * 32
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
        "clientInfo": {"name": "raw-client", "version": "7.1"},
    },
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def test_an_id_carries_its_state_and_verifies_only_under_its_keys() -> None:
    """Signed, read back whole; a changed byte, another key, a foreign string: no state."""
    keys = SessionKeys([KEY])
    state = SessionState.from_initialize("2025-11-25", INIT["params"], lifetime=60)
    sid = keys.sign(state)
    assert sid.isascii() and all(0x21 <= ord(c) <= 0x7E for c in sid)  # a visible-ASCII header value
    assert keys.verify(sid) == state
    assert dict(state.capabilities) == {"roots": {"listChanged": True}, "sampling": {}}
    assert (state.client_name, state.client_version) == ("raw-client", "7.1")
    assert state.expires_at - state.issued_at == 60
    body = sid.split(".")[1]
    forged = sid.replace(body, body[:-2] + ("AA" if body[-2:] != "AA" else "BB"))
    assert keys.verify(forged) is None
    assert SessionKeys([b"x" * 32]).verify(sid) is None
    for junk in ("", "s1.", "s1.a.b", "deadbeef" * 4, "s1." + "A" * 5000):
        assert keys.verify(junk) is None
    # The profile whose path opened the session travels with it.
    on_profile = SessionState.from_initialize("2025-11-25", {}, profile="research")
    assert keys.verify(keys.sign(on_profile)) == on_profile and on_profile.profile == "research"
    # Rotation: a new first key signs; ids signed by the old one still verify.
    rotated = SessionKeys([b"n" * 32, KEY])
    assert rotated.verify(sid) == state
    assert keys.verify(rotated.sign(state)) is None


def test_large_capabilities_keep_only_their_names() -> None:
    """An id stays a small header: capabilities past 1 KiB are kept as names only."""
    params = {"capabilities": {"experimental": {f"x{i}": {"v": "y" * 40} for i in range(60)}, "roots": {}}}
    state = SessionState.from_initialize("2025-11-25", params)
    assert dict(state.capabilities) == {"roots": {}, "experimental": {}}
    assert len(SessionKeys([KEY]).sign(state)) < 400


def test_keys_come_from_a_file_or_the_environment_and_must_be_long_enough(tmp_path: Path) -> None:
    """File first (one key a line, comments skipped), then the environment, else a random unshared key."""
    path = tmp_path / "key"
    path.write_text("# rotated on Monday\n" + "a" * 40 + "\n\n" + "b" * 32 + "\n")
    loaded = SessionKeys.load(path, env={SESSION_KEY_ENV: "c" * 32})
    assert loaded.shared and loaded.keys == (b"a" * 40, b"b" * 32)
    assert SessionKeys.load(None, env={SESSION_KEY_ENV: "c" * 32}).keys == (b"c" * 32,)
    own = SessionKeys.load(None, env={})
    assert not own.shared and len(own.keys[0]) == 32
    assert "a" * 40 not in repr(loaded)
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        SessionKeys.load(None, env={SESSION_KEY_ENV: "short"})
    (tmp_path / "empty").write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no key"):
        SessionKeys.load(tmp_path / "empty")
    with pytest.raises(ConfigError, match="cannot read"):
        SessionKeys.load(tmp_path / "missing")


@asynccontextmanager
async def replicas(
    tmp_path: Path, *books: SessionBook, config: str = '{"mcpServers": []}'
) -> AsyncIterator[list[HttpGateway]]:
    """One gateway per book, over one runtime with no servers: replicas in one process."""
    (tmp_path / "cfg.json").write_text(config)
    async with open_runtime(tmp_path / "cfg.json") as runtime, trio.open_nursery() as nursery:
        gateways = [
            await nursery.start(functools.partial(serve_http, runtime.service, sessions=book, connect=False))
            for book in books
        ]
        yield gateways
        for gateway in gateways:
            await gateway.stop(0.5)


async def _post(http: httpx2.AsyncClient, url: str, message: dict[str, Any], sid: str | None = None) -> Any:
    headers = dict(HEADERS) if sid is None else {**HEADERS, "mcp-session-id": sid}
    with trio.fail_after(BOUND):
        return await http.post(url, content=json.dumps(message), headers=headers)


async def _open(http: httpx2.AsyncClient, url: str) -> str:
    answer = await _post(http, url, INIT)
    assert answer.status_code == 200
    sid: str = answer.headers["mcp-session-id"]
    return sid


async def test_another_replica_continues_a_session_it_never_saw(tmp_path: Path) -> None:
    """Opened on A, used on B and C (they rebuild it from the id): same revision, same client."""
    store = MemoryGatewayStore()
    async with replicas(tmp_path, *(SessionBook(SessionKeys([KEY]), store) for _ in range(3))) as (a, b, c):
        async with httpx2.AsyncClient() as http:
            sid = await _open(http, a.url)
            for gateway in (b, c, a, b):
                answer = await _post(http, gateway.url, PING, sid)
                assert answer.status_code == 200, answer.text
                assert answer.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
            # The rebuilt session holds what the id carries.
            rebuilt = b._front.sessions[sid]
            assert rebuilt.version == "2025-06-18"
            assert rebuilt.state is not None and rebuilt.state.client_name == "raw-client"
            # A real method too, served at the revision the id carries.
            listing = await _post(http, b.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, sid)
            assert listing.status_code == 200 and "result" in listing.json()


async def test_without_a_shared_key_a_session_lives_on_its_own_replica_only(tmp_path: Path) -> None:
    """Each process's own random key (no key given): another replica does not know the id."""
    async with replicas(tmp_path, SessionBook(), SessionBook()) as (a, b):
        async with httpx2.AsyncClient() as http:
            sid = await _open(http, a.url)
            assert (await _post(http, a.url, PING, sid)).status_code == 200
            assert (await _post(http, b.url, PING, sid)).status_code == 404
            # And an id forgotten by its own replica (ended) is not rebuilt there either.
            with trio.fail_after(BOUND):
                assert (await http.delete(a.url, headers={"mcp-session-id": sid})).status_code == 200
            assert (await _post(http, a.url, PING, sid)).status_code == 404


async def test_delete_ends_the_session_on_every_replica(tmp_path: Path) -> None:
    """DELETE on B: A (which holds the session) hears of it; C (which never saw it) asks the store."""
    store = MemoryGatewayStore()
    async with replicas(tmp_path, *(SessionBook(SessionKeys([KEY]), store) for _ in range(3))) as (a, b, c):
        async with httpx2.AsyncClient() as http:
            sid = await _open(http, a.url)
            assert (await _post(http, b.url, PING, sid)).status_code == 200
            with trio.fail_after(BOUND):
                assert (await http.delete(b.url, headers={"mcp-session-id": sid})).status_code == 200
            assert sid not in a._front.sessions
            for gateway in (a, b, c):
                assert (await _post(http, gateway.url, PING, sid)).status_code == 404
            # Another session is untouched.
            other = await _open(http, c.url)
            assert (await _post(http, a.url, PING, other)).status_code == 200


async def test_a_session_past_its_signed_expiry_ends_everywhere(tmp_path: Path) -> None:
    """The expiry travels in the id: the replica that holds it and one that never saw it both refuse."""
    keys = SessionKeys([KEY])
    async with replicas(tmp_path, SessionBook(keys, lifetime=2), SessionBook(keys, lifetime=2)) as (a, b):
        async with httpx2.AsyncClient() as http:
            sid = await _open(http, a.url)
            assert (await _post(http, a.url, PING, sid)).status_code == 200
            state = keys.verify(sid)
            assert state is not None
            await trio.sleep(max(0.0, state.expires_at - time.time()) + 0.1)
            assert (await _post(http, a.url, PING, sid)).status_code == 404
            assert (await _post(http, b.url, PING, sid)).status_code == 404


async def test_a_session_opened_on_a_profile_path_is_continued_on_that_path_only(tmp_path: Path) -> None:
    """The profile travels in the id: B continues it at /mcp/research, and not at /mcp."""
    config = '{"mcpServers": [], "profiles": {"research": {"servers": {}}}}'
    books = [SessionBook(SessionKeys([KEY]), MemoryGatewayStore()) for _ in range(2)]
    async with replicas(tmp_path, *books, config=config) as (a, b):
        async with httpx2.AsyncClient() as http:
            sid = await _open(http, f"{a.url}/research")
            assert (await _post(http, f"{b.url}/research", PING, sid)).status_code == 200
            assert (await _post(http, b.url, PING, sid)).status_code == 404
