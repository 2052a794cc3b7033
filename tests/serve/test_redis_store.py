"""The replicas' store in a real ``redis-server``: OAuth tokens, API keys, ended sessions.

Each test starts its own redis-server on a free loopback port (rediskit) and stops it after.
Two store objects on one Redis stand for two replicas.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import trio
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from rediskit import free_port, running_redis

from mcp_actors._auth.redis_store import RedisTokenStore, redacted_url
from mcp_actors.errors import ConfigError, SharedStoreUnavailable
from mcp_actors.runtime import open_runtime
from mcp_actors.serve import RedisGatewayStore, SessionBook, SessionKeys, serve_http
from mcp_actors.serve._auth_keys import FileApiKeyTable, create_api_key, default_key_path, key_digest
from mcp_actors.serve._store import RedisApiKeyTable, open_gateway_store

BOUND = 30.0


@pytest.fixture
async def redis_url(tmp_path: Path) -> AsyncIterator[str]:
    async with running_redis(tmp_path / "redis") as url:
        yield url


async def test_tokens_written_by_one_replica_are_read_by_another(redis_url: str) -> None:
    """A login through one replica is the login of all; a new server URL means a new login."""
    one, two = RedisTokenStore(redis_url, prefix="t1:"), RedisTokenStore(redis_url, prefix="t1:")
    storage = one.storage_for("srv-1", server_url="https://mcp.example/a")
    await storage.set_tokens(OAuthToken(access_token="at-1", refresh_token="rt-1", expires_in=3600, scope="read"))
    await storage.set_client_info(
        OAuthClientInformationFull(client_id="client-9", redirect_uris=["http://127.0.0.1:1/cb"])
    )
    other = two.storage_for("srv-1", server_url="https://mcp.example/a")
    tokens = await other.get_tokens()
    assert tokens is not None and tokens.access_token == "at-1" and tokens.refresh_token == "rt-1"
    client = await other.get_client_info()
    assert client is not None and client.client_id == "client-9"
    status = await two.status("srv-1")
    assert status.logged_in and status.has_refresh_token and status.scopes == ("read",)
    assert status.expires_at is not None and status.expires_at > time.time() + 3000
    assert "at-1" not in repr(status) and "at-1" not in repr(two)
    assert await two.storage_for("srv-1", server_url="https://mcp.example/other").get_tokens() is None
    assert await two.server_ids() == ["srv-1"]
    assert await two.forget("srv-1") and not await one.forget("srv-1")
    assert await other.get_tokens() is None
    # Another prefix is another deployment on the same Redis.
    assert await RedisTokenStore(redis_url, prefix="t2:").server_ids() == []


async def test_concurrent_writes_by_two_replicas_lose_nothing(redis_url: str) -> None:
    """Two replicas writing different parts of one entry at once: every write is in the entry."""
    one, two = RedisTokenStore(redis_url), RedisTokenStore(redis_url)
    url = "https://mcp.example/a"

    async def keys(store: RedisTokenStore, side: str) -> None:
        for i in range(15):
            await store.update("srv", url, lambda entry, i=i: entry.__setitem__(f"{side}{i}", i))

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(keys, one, "a")
            nursery.start_soon(keys, two, "b")
    entry = await one.load("srv")
    assert entry is not None
    assert {k for k in entry if k[0] in "ab"} == {f"{side}{i}" for side in "ab" for i in range(15)}


async def test_api_keys_added_on_one_replica_open_every_replica(redis_url: str) -> None:
    """Made on one table, found on another by digest; names unique; removal reaches the others within a second."""
    import redis

    one, two = RedisApiKeyTable(redis_url), RedisApiKeyTable(redis_url)
    secret, entry = await create_api_key(one, "ci-bot", profile="read-only", expires_at=time.time() + 600)
    found = await two.lookup(key_digest(secret))
    assert found == entry and found.profile == "read-only"
    assert await two.lookup(key_digest("mcpa_not-a-key")) is None
    with pytest.raises(ConfigError, match="exists already"):
        await create_api_key(two, "ci-bot")
    await create_api_key(two, "alice")
    assert [key.name for key in await one.list()] == ["alice", "ci-bot"]
    raw = await trio.to_thread.run_sync(redis.Redis.from_url(redis_url).hgetall, "mcp-actors:api-keys")
    assert secret.encode() not in b"".join(k + v for k, v in raw.items())  # digests only, never a key
    assert await one.remove("ci-bot") and not await one.remove("ci-bot")
    assert await one.lookup(key_digest(secret)) is None  # the remover forgets at once
    await trio.sleep(1.05)  # the other replica's remembered lookup ages out
    assert await two.lookup(key_digest(secret)) is None


async def test_ended_sessions_are_recorded_until_their_expiry_and_heard_by_watchers(redis_url: str) -> None:
    """end_session: another replica finds it ended, a watcher hears it, Redis forgets it at the expiry."""
    import redis

    one, two = RedisGatewayStore(redis_url), RedisGatewayStore(redis_url)
    heard: list[str] = []
    arrived = trio.Event()

    def ended(nonce: str) -> None:
        heard.append(nonce)
        arrived.set()

    async with trio.open_nursery() as nursery:
        with trio.fail_after(BOUND):
            await nursery.start(functools.partial(two.watch_ended, ended))
            assert not await two.session_ended("n-1")
            await one.end_session("n-1", time.time() + 100)
            await arrived.wait()
        assert heard == ["n-1"]
        assert await two.session_ended("n-1")
        ttl = await trio.to_thread.run_sync(redis.Redis.from_url(redis_url).ttl, "mcp-actors:session-ended:n-1")
        assert 90 <= ttl <= 101
        nursery.cancel_scope.cancel()
    await one.aclose()
    await two.aclose()


async def test_replicas_on_redis_continue_and_end_a_session_together(redis_url: str, tmp_path: Path) -> None:
    """Two gateways sharing a key and Redis: B continues A's session; DELETE on A ends it on B."""
    keys = SessionKeys([b"s" * 32])
    (tmp_path / "cfg.json").write_text('{"mcpServers": []}')
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    async with open_runtime(tmp_path / "cfg.json") as runtime, trio.open_nursery() as nursery:
        stores = [await open_gateway_store(redis_url) for _ in range(2)]
        a, b = [
            await nursery.start(
                functools.partial(serve_http, runtime.service, sessions=SessionBook(keys, store), connect=False)
            )
            for store in stores
        ]
        async with httpx2.AsyncClient() as http:
            with trio.fail_after(BOUND):
                sid = (await http.post(a.url, content=json.dumps(init), headers=headers)).headers["mcp-session-id"]
                with_sid = {**headers, "mcp-session-id": sid}
                assert (await http.post(b.url, content=ping, headers=with_sid)).status_code == 200
                on_b = b._front.sessions[sid]
                assert (await http.delete(a.url, headers=with_sid)).status_code == 200
                await on_b.ended.wait()  # B hears the end on the channel
                assert sid not in b._front.sessions
                assert (await http.post(b.url, content=ping, headers=with_sid)).status_code == 404
                assert (await http.post(a.url, content=ping, headers=with_sid)).status_code == 404
        for gateway in (a, b):
            await gateway.stop(0.5)
        for store in stores:
            await store.aclose()


async def test_a_redis_that_does_not_answer_is_a_clear_error_within_seconds() -> None:
    """Nothing listens: SharedStoreUnavailable naming the URL without its password."""
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    with trio.fail_after(BOUND), pytest.raises(SharedStoreUnavailable) as caught:
        await open_gateway_store(url)
    assert "hunter2" not in str(caught.value) and "hunter2" not in caught.value.url
    assert caught.value.url == redacted_url(url) and "127.0.0.1" in str(caught.value)


async def test_serve_keys_with_a_redis_url_writes_the_keys_every_replica_reads(redis_url: str, tmp_path: Path) -> None:
    """`serve keys add` with MCP_ACTORS_REDIS_URL: the key is in Redis (not the key file); `serve` reads it there."""
    import os
    import sys

    from mcp_actors.cli._run import _Options
    from mcp_actors.cli._serve import _gateway_auth

    script = Path(sys.executable).with_name("mcp-actors")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "mcp_actors"]
    config = tmp_path / "cfg.json"
    config.write_text('{"mcpServers": []}')
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(config), "MCP_ACTORS_REDIS_URL": redis_url}
    with trio.fail_after(BOUND * 2):
        made = await trio.run_process([*cli, "serve", "keys", "add", "bot"], env=env, capture_stdout=True)
    secret = made.stdout.decode().strip()
    assert secret.startswith("mcpa_")
    found = await RedisApiKeyTable(redis_url).lookup(key_digest(secret))
    assert found is not None and found.name == "bot"
    with trio.fail_after(BOUND):
        assert await FileApiKeyTable(default_key_path(config)).list() == []  # not the key file
    # And `serve --api-keys --redis-url` admits with that table.
    auth = _gateway_auth(_Options(config=config, debug=False, no_input=False), True, {}, redis_url)
    assert auth is not None and isinstance(auth.api_keys, RedisApiKeyTable)
    assert await auth.api_keys.lookup(key_digest(secret)) == found
