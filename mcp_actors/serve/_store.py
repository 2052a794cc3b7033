"""What the replicas of one gateway share: ended sessions, OAuth tokens, API keys.

Everything else a replica holds is its own: its runtime and upstream connections, its
sessions' requests in flight and event streams. A session itself needs no shared table (its
id carries it: :mod:`mcp_actors.serve._sessions`); only its **end** must be shared, so that a
``DELETE`` answered by one replica ends the session on all. :class:`GatewayStore` is that
small interface: record an ended session until its signed expiry, ask whether one ended, hear
ends as they happen; and hand out the shared OAuth token store and API key table.

:class:`MemoryGatewayStore` serves fronts in one process (tests, several fronts in one
program). :class:`RedisGatewayStore` is the one for replicas: an ended session is a key
``<prefix>session-ended:<nonce>`` that expires with the session (``SET … EXAT``), and the end
is published on ``<prefix>session-ended`` for replicas that hold the session now. Its client is
redis-py's blocking one in worker threads (``trio.to_thread``; redis-py's asyncio client needs
an asyncio loop); each operation is one round trip plus a thread hand-off, and none is on the
path of a request to a session the replica knows.
"""

from __future__ import annotations

import abc
import functools
import hmac
import json
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import trio

from mcp_actors._auth.redis_store import DEFAULT_PREFIX, RedisTokenStore, in_thread, redacted_url, redis_client
from mcp_actors._auth.token_store import MemoryTokenStore, TokenStore
from mcp_actors.errors import SharedStoreUnavailable
from mcp_actors.serve._auth_keys import ApiKey, ApiKeyTable, MemoryApiKeyTable, _taken

if TYPE_CHECKING:
    import redis

__all__ = [
    "REDIS_URL_ENV",
    "GatewayStore",
    "MemoryGatewayStore",
    "RedisApiKeyTable",
    "RedisGatewayStore",
    "open_gateway_store",
]

logger = logging.getLogger("mcp_actors.serve")

REDIS_URL_ENV: Final = "MCP_ACTORS_REDIS_URL"
"""The environment variable naming the shared Redis (when ``--redis-url`` is not given)."""
_POLL: Final = 1.0
"""Seconds one wait for a published message lasts in its worker thread (a cancelled watch ends within it)."""
_RECONNECT: Final = 1.0
_KEY_CACHE: Final = 1.0
"""Seconds a replica trusts a key lookup (found or not): ``keys rm`` takes effect everywhere within it."""
_KEY_CACHE_SIZE: Final = 1024
_RETRIES: Final = 16


Ended = Callable[[str], None]
"""Called with a session's nonce when any replica ended it."""


class GatewayStore(abc.ABC):
    """What the replicas of a gateway share. Every method may be called from the trio loop."""

    @abc.abstractmethod
    async def end_session(self, nonce: str, expires_at: float) -> None:
        """Record that the session ``nonce`` ended (kept until ``expires_at``, Unix time) and tell the replicas.

        Raises:
            SharedStoreUnavailable: The store did not answer.
        """

    @abc.abstractmethod
    async def session_ended(self, nonce: str) -> bool:
        """Whether any replica ended the session ``nonce``.

        Raises:
            SharedStoreUnavailable: The store did not answer.
        """

    @abc.abstractmethod
    async def watch_ended(self, ended: Ended, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Call ``ended(nonce)`` for every session any replica ends from now on; runs until cancelled."""

    @abc.abstractmethod
    def token_store(self) -> TokenStore:
        """The OAuth token store the replicas share (give it to ``open_runtime(token_store=...)``)."""

    @abc.abstractmethod
    def api_key_table(self) -> ApiKeyTable:
        """The gateway API keys the replicas share."""

    async def aclose(self) -> None:  # noqa: B027 - most stores hold no connection
        """Let go of connections (the store's data stays)."""


class MemoryGatewayStore(GatewayStore):
    """A store in this process's memory: for several fronts in one process, and tests."""

    def __init__(self) -> None:
        self._ended: dict[str, float] = {}
        self._watchers: set[Ended] = set()
        self._tokens = MemoryTokenStore()
        self._keys = MemoryApiKeyTable()

    def __repr__(self) -> str:
        return f"MemoryGatewayStore({len(self._ended)} ended sessions)"

    async def end_session(self, nonce: str, expires_at: float) -> None:
        now = time.time()
        for known, until in list(self._ended.items()):
            if until <= now:
                del self._ended[known]
        self._ended[nonce] = expires_at
        for watcher in list(self._watchers):
            watcher(nonce)

    async def session_ended(self, nonce: str) -> bool:
        until = self._ended.get(nonce)
        return until is not None and until > time.time()

    async def watch_ended(self, ended: Ended, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._watchers.add(ended)
        try:
            task_status.started()
            await trio.sleep_forever()
        finally:
            self._watchers.discard(ended)

    def token_store(self) -> TokenStore:
        return self._tokens

    def api_key_table(self) -> ApiKeyTable:
        return self._keys


class RedisGatewayStore(GatewayStore):
    """The replicas' store in Redis.

    Args:
        url: The Redis URL (``redis://[:password@]host:port/db``; ``rediss://`` for TLS).
        prefix: What its keys and its channel start with (one Redis may serve several gateways).
    """

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX) -> None:
        self.url = url
        self.prefix = prefix
        self._client: redis.Redis = redis_client(url)
        self._channel = f"{prefix}session-ended"

    def __repr__(self) -> str:
        return f"RedisGatewayStore(url={redacted_url(self.url)!r}, prefix={self.prefix!r})"

    async def check(self) -> None:
        """Fail now, with a clear error, when Redis does not answer (a gateway checks at start).

        Raises:
            SharedStoreUnavailable: Redis did not answer ``PING``.
        """
        await self._run(self._client.ping)

    async def _run(self, operation: Callable[[], Any]) -> Any:
        return await in_thread(self.url, operation)

    async def end_session(self, nonce: str, expires_at: float) -> None:
        key = f"{self.prefix}session-ended:{nonce}"

        def write() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.set(key, b"1", exat=max(math.ceil(expires_at), int(time.time()) + 1))
            pipe.publish(self._channel, nonce)
            pipe.execute()

        await self._run(write)

    async def session_ended(self, nonce: str) -> bool:
        return bool(await self._run(lambda: self._client.exists(f"{self.prefix}session-ended:{nonce}")))

    async def watch_ended(self, ended: Ended, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await self._run(functools.partial(pubsub.subscribe, self._channel))
                if not started:
                    started = True
                    task_status.started()
                while True:
                    message = await trio.to_thread.run_sync(
                        functools.partial(pubsub.get_message, timeout=_POLL), abandon_on_cancel=True
                    )
                    if message is not None and message.get("type") == "message":
                        data = message.get("data")
                        ended(data.decode() if isinstance(data, bytes) else str(data))
            except SharedStoreUnavailable as exc:
                if not started:
                    raise
                logger.warning("not hearing ended sessions from Redis (%s); retrying in %gs", exc, _RECONNECT)
            except Exception as exc:  # redis-py's errors from get_message, outside in_thread
                if not started:
                    raise SharedStoreUnavailable(
                        f"cannot subscribe to Redis at {redacted_url(self.url)}: {exc}", url=redacted_url(self.url)
                    ) from None
                logger.warning("not hearing ended sessions from Redis (%s); retrying in %gs", exc, _RECONNECT)
            finally:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(pubsub.close, abandon_on_cancel=True)
            await trio.sleep(_RECONNECT)

    def token_store(self) -> TokenStore:
        return RedisTokenStore(self.url, prefix=self.prefix, client=self._client)

    def api_key_table(self) -> ApiKeyTable:
        return RedisApiKeyTable(self.url, prefix=self.prefix, client=self._client)

    async def aclose(self) -> None:
        await trio.to_thread.run_sync(self._client.close)


class RedisApiKeyTable(ApiKeyTable):
    """The gateway's API keys in Redis: ``mcp-actors serve keys add`` on one replica opens them all.

    Two hashes: ``<prefix>api-keys`` (digest to the stored key, JSON) and
    ``<prefix>api-key-names`` (name to digest; names are unique). ``add`` and ``remove`` change
    both in one optimistic transaction. A lookup is remembered for a second (found or not, at
    most 1,024 of them), so a request costs a Redis round trip at most once a second per key.

    Args:
        url: The Redis URL.
        prefix: What its keys start with.
        client: A client to share (default: one made from ``url``).
    """

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, client: redis.Redis | None = None) -> None:
        self.url = url
        self._client = client if client is not None else redis_client(url)
        self._by_digest = f"{prefix}api-keys"
        self._names = f"{prefix}api-key-names"
        self._seen: dict[str, tuple[float, ApiKey | None]] = {}

    def __repr__(self) -> str:
        return f"RedisApiKeyTable(url={redacted_url(self.url)!r})"

    async def lookup(self, digest: str) -> ApiKey | None:
        now = time.monotonic()
        seen = self._seen.get(digest)
        if seen is not None and now - seen[0] < _KEY_CACHE:
            found = seen[1]
        else:
            raw = await in_thread(self.url, lambda: self._client.hget(self._by_digest, digest))
            found = _api_key(raw)
            if len(self._seen) >= _KEY_CACHE_SIZE:
                self._seen.clear()
            self._seen[digest] = (now, found)
        return found if found is not None and hmac.compare_digest(found.digest, digest) else None

    async def add(self, key: ApiKey) -> None:
        def transaction(pipe: Any) -> None:
            if pipe.hexists(self._names, key.name):
                raise _taken(key.name)
            pipe.multi()
            pipe.hset(self._names, key.name, key.digest)
            pipe.hset(self._by_digest, key.digest, json.dumps(key.to_json(), sort_keys=True))

        await self._transaction(transaction)
        self._seen.pop(key.digest, None)

    async def remove(self, name: str) -> bool:
        removed: list[str] = []

        def transaction(pipe: Any) -> None:
            removed.clear()
            digest = pipe.hget(self._names, name)
            if digest is None:
                return
            pipe.multi()
            pipe.hdel(self._names, name)
            pipe.hdel(self._by_digest, digest)
            removed.append(digest.decode() if isinstance(digest, bytes) else str(digest))

        await self._transaction(transaction)
        for digest in removed:
            self._seen.pop(digest, None)
        return bool(removed)

    async def list(self) -> list[ApiKey]:
        raw = await in_thread(self.url, lambda: self._client.hvals(self._by_digest))
        keys = [key for key in map(_api_key, raw) if key is not None]
        return sorted(keys, key=lambda key: key.name)

    async def _transaction(self, transaction: Callable[[Any], None]) -> None:
        def run() -> None:
            import redis

            for _ in range(_RETRIES):
                try:
                    self._client.transaction(transaction, self._names)
                    return
                except redis.WatchError:
                    continue
            raise redis.RedisError(f"{_RETRIES} writers in a row changed {self._names} first")

        await in_thread(self.url, run)


def _api_key(raw: Any) -> ApiKey | None:
    if raw is None:
        return None
    try:
        return ApiKey.from_json(json.loads(raw))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None  # an entry this version cannot read opens nothing


async def open_gateway_store(url: str, *, prefix: str = DEFAULT_PREFIX) -> RedisGatewayStore:
    """A :class:`RedisGatewayStore` for ``url``, checked: Redis answered.

    Raises:
        SharedStoreUnavailable: Redis did not answer, or the URL is not a Redis URL.
    """
    store = RedisGatewayStore(url, prefix=prefix)
    await store.check()
    return store
