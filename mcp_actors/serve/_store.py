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
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import trio

from mcp_actors._auth.redis_store import DEFAULT_PREFIX, RedisTokenStore, in_thread, redacted_url, redis_client
from mcp_actors._auth.token_store import MemoryTokenStore, TokenStore
from mcp_actors.errors import SharedStoreUnavailable

if TYPE_CHECKING:
    import redis

__all__ = ["GatewayStore", "MemoryGatewayStore", "REDIS_URL_ENV", "RedisGatewayStore", "open_gateway_store"]

logger = logging.getLogger("mcp_actors.serve")

REDIS_URL_ENV: Final = "MCP_ACTORS_REDIS_URL"
"""The environment variable naming the shared Redis (when ``--redis-url`` is not given)."""
_POLL: Final = 1.0
"""Seconds one wait for a published message lasts in its worker thread (a cancelled watch ends within it)."""
_RECONNECT: Final = 1.0


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

    async def aclose(self) -> None:  # noqa: B027 - most stores hold no connection
        """Let go of connections (the store's data stays)."""


class MemoryGatewayStore(GatewayStore):
    """A store in this process's memory: for several fronts in one process, and tests."""

    def __init__(self) -> None:
        self._ended: dict[str, float] = {}
        self._watchers: set[Ended] = set()
        self._tokens = MemoryTokenStore()

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

    async def aclose(self) -> None:
        await trio.to_thread.run_sync(self._client.close)


async def open_gateway_store(url: str, *, prefix: str = DEFAULT_PREFIX) -> RedisGatewayStore:
    """A :class:`RedisGatewayStore` for ``url``, checked: Redis answered.

    Raises:
        SharedStoreUnavailable: Redis did not answer, or the URL is not a Redis URL.
    """
    store = RedisGatewayStore(url, prefix=prefix)
    await store.check()
    return store
