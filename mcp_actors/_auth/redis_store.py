"""OAuth tokens in Redis: one store for every replica of a gateway (or every runtime of a fleet).

:class:`RedisTokenStore` is a :class:`~mcp_actors._auth.token_store.JsonTokenStore` whose
entries are Redis strings, one JSON object per server under ``<prefix>oauth:<server id>``:
a login made through one replica (or refreshed by one) is the login of all. Every
read-modify-write is one optimistic transaction (``WATCH`` / ``MULTI`` / ``EXEC``, retried
when another writer got there first), so two replicas refreshing at once never lose an entry.

The client is redis-py's blocking one, run in worker threads (``anyio.to_thread``): redis-py's
own asyncio client needs an asyncio loop, and the runtime runs on trio. Each operation is one
round trip to Redis plus a thread hand-off; the measured cost is in docs/gateway.md
(Scale-out). Tokens are secrets: give Redis a password and TLS (``rediss://``) off loopback.

:func:`redis_client` makes the client every Redis store of the project uses: bounded connect
and read timeouts, so a Redis that is gone is a :class:`~mcp_actors.errors.SharedStoreUnavailable`
within seconds, never a hang.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio.to_thread

from mcp_actors._auth.token_store import JsonTokenStore, _fresh_entry
from mcp_actors.errors import SharedStoreUnavailable

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_PREFIX", "RedisTokenStore", "redis_client", "redacted_url"]

DEFAULT_PREFIX: Final = "mcp-actors:"
"""What every key the project writes in Redis starts with (several deployments may share one Redis)."""
_TIMEOUT: Final = 5.0
"""Seconds to connect to Redis, and to wait for one answer."""
_RETRIES: Final = 16
"""Optimistic transactions tried before a write gives up (another writer won every time)."""

T = TypeVar("T")


def redacted_url(url: str) -> str:
    """``url`` without its password (what errors and logs may show)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urllib.parse.urlunsplit(parts._replace(netloc=user + host))


def redis_client(url: str) -> redis.Redis:
    """A blocking Redis client for ``url`` (``redis://``, ``rediss://``, ``unix://``), with bounded timeouts.

    Raises:
        SharedStoreUnavailable: The ``redis`` package is not installed, or the URL is not a Redis URL.
    """
    try:
        import redis
    except ImportError:
        raise SharedStoreUnavailable(
            "a Redis store needs the redis package: pip install 'mcp-actors[gateway]'", url=redacted_url(url)
        ) from None
    try:
        return redis.Redis.from_url(
            url, socket_timeout=_TIMEOUT, socket_connect_timeout=_TIMEOUT, health_check_interval=30
        )
    except ValueError as exc:
        raise SharedStoreUnavailable(f"not a Redis URL: {exc}", url=redacted_url(url)) from None


async def in_thread(url: str, operation: Callable[[], T]) -> T:
    """Run one blocking Redis ``operation`` in a worker thread; its Redis errors become typed ones."""
    import redis

    def run() -> T:
        try:
            return operation()
        except redis.RedisError as exc:
            raise SharedStoreUnavailable(
                f"Redis at {redacted_url(url)} failed: {exc}; check that it is up and reachable, then retry",
                url=redacted_url(url),
            ) from None

    return await anyio.to_thread.run_sync(run)


class RedisTokenStore(JsonTokenStore):
    """Every server's OAuth tokens in Redis, shared by every process that names the same Redis.

    Args:
        url: The Redis URL (``redis://[:password@]host:port/db``, ``rediss://`` for TLS).
        prefix: What its keys start with.
        client: A client to use instead of one made from ``url`` (its pool is shared).
    """

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, client: redis.Redis | None = None) -> None:
        self.url = url
        self.prefix = prefix
        self._client = client if client is not None else redis_client(url)

    def __repr__(self) -> str:
        return f"RedisTokenStore(url={redacted_url(self.url)!r}, prefix={self.prefix!r})"

    def _key(self, server_id: str) -> str:
        return f"{self.prefix}oauth:{server_id}"

    async def load(self, server_id: str) -> dict[str, Any] | None:
        raw = await in_thread(self.url, lambda: self._client.get(self._key(server_id)))
        return _entry_of(raw)

    async def update(self, server_id: str, server_url: str, change: Callable[[dict[str, Any]], None]) -> None:
        key = self._key(server_id)

        def transaction(pipe: Any) -> None:
            entry = _fresh_entry(_entry_of(pipe.get(key)), server_url)
            change(entry)
            pipe.multi()
            pipe.set(key, json.dumps(entry, sort_keys=True))

        def run() -> None:
            import redis

            for _ in range(_RETRIES):
                try:
                    self._client.transaction(transaction, key)
                    return
                except redis.WatchError:
                    continue
            raise redis.RedisError(f"{_RETRIES} writers in a row changed {key} first")

        await in_thread(self.url, run)

    async def forget(self, server_id: str) -> bool:
        return bool(await in_thread(self.url, lambda: self._client.delete(self._key(server_id))))

    async def server_ids(self) -> list[str]:
        """The ids of every server with an entry."""
        pattern = f"{self.prefix}oauth:*"
        keys = await in_thread(self.url, lambda: list(self._client.scan_iter(match=pattern, count=500)))
        start = len(self.prefix) + len("oauth:")
        return sorted((key.decode() if isinstance(key, bytes) else str(key))[start:] for key in keys)


def _entry_of(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None  # a broken entry costs a login, never a crash; the next write replaces it
    return entry if isinstance(entry, dict) else None
