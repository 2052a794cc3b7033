"""The event bus: what happened in the runtime, for hosts, UIs and tests.

Emitting never blocks and never fails: every subscriber has its own bounded buffer, and a
subscriber that does not keep up loses its *oldest* events (counted in
:attr:`Subscription.dropped`). A slow UI can therefore never slow down tool calls.
"""

from __future__ import annotations

import collections
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import attrs
import trio

__all__ = [
    "CONNECTION_STATE",
    "Event",
    "EventBus",
    "SERVERS_CHANGED",
    "SERVER_CONNECTED",
    "Subscription",
    "TOOLS_CHANGED",
    "TOOL_CALLED",
]

SERVER_CONNECTED: Final = "server:connected"
CONNECTION_STATE: Final = "connection:state"
SERVERS_CHANGED: Final = "servers:changed"
TOOL_CALLED: Final = "tool:called"
TOOLS_CHANGED: Final = "tools:changed"


@attrs.frozen(kw_only=True)
class Event:
    """One event.

    Attributes:
        type: One of the event type constants of this module.
        data: The payload (camelCase keys, JSON-serialisable, never secrets).
        seq: Emission order across the whole bus, starting at 1.
        timestamp: Wall-clock time of emission (``time.time()``).
    """

    type: str
    data: Mapping[str, Any] = attrs.field(factory=dict)
    seq: int = 0
    timestamp: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON-ready dict."""
        return {
            "type": self.type,
            "seq": self.seq,
            "timestamp": self.timestamp,
            "data": dict(self.data),
        }


@attrs.define(eq=False)
class Subscription:
    """One subscriber's bounded view of the bus; iterate it with ``async for``.

    Close it (or leave its ``with`` block) to stop receiving.
    """

    _bus: EventBus
    _buffer: collections.deque[Event]
    _wakeup: trio.Event = attrs.field(factory=trio.Event)
    closed: bool = False
    dropped: int = 0
    """How many events were discarded because this subscriber fell behind."""

    def _push(self, event: Event) -> None:
        if len(self._buffer) == self._buffer.maxlen:
            self.dropped += 1
        self._buffer.append(event)
        self._wakeup.set()

    def receive_nowait(self) -> Event:
        """The oldest buffered event.

        Raises:
            trio.WouldBlock: Nothing is buffered.
            trio.EndOfChannel: The subscription is closed and drained.
        """
        if self._buffer:
            return self._buffer.popleft()
        if self.closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> Event:
        """Wait for the next event.

        Raises:
            trio.EndOfChannel: The subscription (or the bus) is closed and drained.
        """
        while True:
            try:
                event = self.receive_nowait()
            except trio.WouldBlock:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
                continue
            await trio.lowlevel.checkpoint()
            return event

    def close(self) -> None:
        """Stop receiving; buffered events can still be read."""
        if not self.closed:
            self.closed = True
            self._bus._unsubscribe(self)
            self._wakeup.set()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            try:
                yield await self.receive()
            except trio.EndOfChannel:
                return

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@attrs.define(eq=False)
class EventBus:
    """Fan-out of events to any number of subscribers; emitting is synchronous and O(subscribers)."""

    _subscribers: list[Subscription] = attrs.field(factory=list)
    _seq: int = 0

    def subscribe(self, *, buffer: int = 1024) -> Subscription:
        """A new subscription that sees every event emitted from now on.

        Args:
            buffer: How many unread events it keeps before dropping the oldest.
        """
        if buffer < 1:
            raise ValueError(f"buffer must be >= 1, got {buffer}")
        sub = Subscription(self, collections.deque(maxlen=buffer))
        self._subscribers.append(sub)
        return sub

    def emit(self, type: str, **data: Any) -> Event:
        """Deliver an event to every subscriber without blocking."""
        self._seq += 1
        event = Event(type=type, data=data, seq=self._seq, timestamp=time.time())
        for sub in self._subscribers:
            sub._push(event)
        return event

    def close(self) -> None:
        """End every subscription (their iterators finish after draining)."""
        for sub in list(self._subscribers):
            sub.close()

    def _unsubscribe(self, sub: Subscription) -> None:
        try:
            self._subscribers.remove(sub)
        except ValueError:
            pass
