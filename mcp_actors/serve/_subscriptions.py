"""Resource subscriptions through the gateway, and the servers' log messages to their clients.

Why one upstream subscription per resource: the runtime holds one connection per server, and
a subscription belongs to that connection (``service.subscribe_resource``). Many clients may
subscribe to one resource; the gateway subscribes upstream once, when the first client does,
tells every subscribed client of each ``notifications/resources/updated`` (under the URI the
client knows, see :class:`~mcp_actors.serve._names.UriTable`), and unsubscribes upstream when
the last subscriber goes: its ``resources/unsubscribe``, the end of its session, the end of
its ``subscriptions/listen`` stream.

A server's ``notifications/message`` goes to the client whose call to that server is running
(on that call's stream; the runtime says which server sent it, not which call, so when calls
of several clients to that server run it goes where a message outside a call goes), else to
every client that listens outside calls (a 2025 session's GET stream, the stdio client),
each filtered by its own ``logging/setLevel``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, Protocol

import attrs
import trio

from mcp_actors import events
from mcp_actors.errors import McpActorsError
from mcp_actors.serve._client_requests import ClientRequests

__all__ = ["LOG_LEVELS", "Client", "LogRelay", "Subscriptions", "admits"]

logger = logging.getLogger("mcp_actors.serve")

LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels (RFC 5424's), least severe first."""
_RANK: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}
_SETTLE_BOUND: Final = 1.0
"""Seconds a finished call waits at most for its server's earlier notifications to be handled."""
_SETTLE_CHECKPOINTS: Final = 3
"""Scheduler passes after that, for a session whose notifications the SDK hands over in tasks of their own."""


def admits(threshold: str | None, level: Any) -> bool:
    """Whether a client that asked for ``threshold`` gets a message of ``level``.

    ``None``: every level (a 2025 client that set none hears everything, as from the server
    itself); ``"off"``: none (a 2026-07-28 request that did not opt in).
    """
    if threshold is None:
        return True
    return _RANK.get(str(level), 0) >= _RANK.get(threshold, len(LOG_LEVELS))


class Client(Protocol):
    """A client as the relays see it outside its calls: its capabilities, its log level, its stream."""

    log_level: str | None

    @property
    def capabilities(self) -> Mapping[str, Any]:
        """What the client declared (``sampling``, ``elicitation``, ``roots``)."""

    def notify(self, message: dict[str, Any]) -> None:
        """Send a notification outside any call (a 2025 session's GET stream, stdio); dropped when nowhere."""


Notify = Callable[[dict[str, Any]], None]


@attrs.define(eq=False)
class Subscriptions:
    """Who is subscribed to which resource, and the upstream subscriptions that serve them.

    Args:
        subscribe: ``async (server id, uri)``, the runtime's ``subscribe_resource``.
        unsubscribe: ``async (server id, uri)``, the runtime's ``unsubscribe_resource``.
    """

    subscribe_upstream: Callable[[str, str], Awaitable[None]]
    unsubscribe_upstream: Callable[[str, str], Awaitable[None]]
    subscribers: dict[tuple[str, str], dict[object, tuple[Notify, str]]] = attrs.field(factory=dict)
    """``(server id, its URI)`` -> subscriber -> (where its updates go, the URI it subscribed to)."""
    _nursery: trio.Nursery | None = None
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery in which subscriptions of clients that left are ended, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def add(self, subscriber: object, notify: Notify, server_id: str, uri: str, public: str) -> None:
        """Subscribe ``subscriber`` to ``uri`` of ``server_id`` (subscribing upstream for the first one).

        Raises:
            McpActorsError: The server refused the subscription, or could not be reached.
        """
        key = (server_id, uri)
        async with self._lock:
            current = self.subscribers.get(key)
            if not current:
                await self.subscribe_upstream(server_id, uri)
                current = self.subscribers[key] = {}
            current[subscriber] = (notify, public)

    async def remove(self, subscriber: object, server_id: str, uri: str) -> None:
        """End ``subscriber``'s subscription (unsubscribing upstream when it was the last one)."""
        key = (server_id, uri)
        async with self._lock:
            current = self.subscribers.get(key)
            if current is None or current.pop(subscriber, None) is None or current:
                return
            del self.subscribers[key]
            try:
                await self.unsubscribe_upstream(server_id, uri)
            except McpActorsError as exc:
                logger.info("resources/unsubscribe of %s failed (the subscription ends anyway): %s", uri, exc)

    def forget(self, subscriber: object) -> None:
        """The subscriber is gone (its session ended): end its subscriptions, in the background."""
        keys = [key for key, current in self.subscribers.items() if subscriber in current]
        if keys and self._nursery is not None:
            for server_id, uri in keys:
                self._nursery.start_soon(self.remove, subscriber, server_id, uri)

    def updated(self, server_id: str, uri: str) -> int:
        """Tell each subscriber of ``uri`` that it changed; how many were told."""
        current = self.subscribers.get((server_id, uri))
        if not current:
            return 0
        for notify, public in list(current.values()):
            notify({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": public}})
        return len(current)


class LogListener(Protocol):
    """A listener outside calls (a 2025 GET stream, the stdio client) that takes log messages."""

    def log(self, message: dict[str, Any], level: str) -> None:
        """Send a log message when the listener's client admits ``level``."""


@attrs.define(eq=False)
class LogRelay:
    """The servers' ``notifications/message`` and ``notifications/resources/updated``, to the clients.

    Args:
        service_subscribe: The runtime's event subscription (``service.subscribe``).
        calls: The calls in flight (who to send a server's log message to during a call).
        listeners: The gateway's listeners (outside calls).
        subscriptions: The resource subscriptions (who hears of an update).
    """

    service_subscribe: Callable[..., events.Subscription]
    initialize_result: Callable[[str], Awaitable[Any]]
    """The runtime's ``initialize_result``: whether a server declares ``logging`` (it may log during a call)."""
    notifications_delivered: Callable[[str], Awaitable[None]]
    """The runtime's ``notifications_delivered``: a server's messages sent before an answer are handled."""
    calls: ClientRequests
    listeners: Iterable[Any]
    subscriptions: Subscriptions
    _events: events.Subscription | None = None
    _logging: dict[str, bool] = attrs.field(factory=dict)
    """Whether each server may log (it declared ``logging``, or sent a message): a call to it settles."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Relay log messages and resource updates until cancelled."""
        with self.service_subscribe(types=(events.SERVER_LOG, events.RESOURCE_UPDATED)) as subscription:
            self._events = subscription
            task_status.started()
            try:
                while True:
                    self._route(await subscription.receive())
            finally:
                self._events = None

    async def settle(self, server_id: str, log_level: str | None) -> None:
        """Before a call to ``server_id`` answers: its log messages sent before its answer go on its stream.

        The runtime hands a server's notifications to the event bus from a task of its own, so
        a message the server sent just before its answer may not be on the bus yet when the
        answer is: the call waits (bounded) until the runtime has handled what the server sent
        before its answer, then what is queued is routed now.
        Paid by a call whose client takes log messages (not ``"off"``) to a server that may
        send them (it declared ``logging``, or sent one before).
        """
        if log_level == "off" or self._events is None:
            return
        may_log = self._logging.get(server_id)
        if may_log is None:
            try:
                result = await self.initialize_result(server_id)  # the connection's own: nothing is sent
            except McpActorsError:
                return
            capabilities = getattr(result, "capabilities", None)
            may_log = self._logging[server_id] = getattr(capabilities, "logging", None) is not None
        if not may_log:
            return
        with trio.move_on_after(_SETTLE_BOUND):
            await self.notifications_delivered(server_id)
        for _ in range(_SETTLE_CHECKPOINTS):
            await trio.lowlevel.checkpoint()  # a session without our dispatcher hands them over in tasks of its own
        while True:
            try:
                self._route(self._events.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return

    def _route(self, event: events.Event) -> None:
        data = event.data
        server_id = str(data.get("serverId"))
        if event.type == events.RESOURCE_UPDATED:
            self.subscriptions.updated(server_id, str(data.get("uri")))
            return
        self._logging[server_id] = True
        level = str(data.get("level") or "info")
        params: dict[str, Any] = {"level": level, "data": data.get("data")}
        if data.get("logger") is not None:
            params["logger"] = data["logger"]
        message = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        caller = self.calls.unique_caller(server_id)
        if caller is not None:
            if caller.notify is not None and admits(caller.log_level, level):
                caller.notify(message)
            return
        for listener in list(self.listeners):
            log = getattr(listener, "log", None)
            if log is not None:
                log(message, level)
