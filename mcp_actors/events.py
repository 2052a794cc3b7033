"""The event bus: what happened in the runtime, for hosts, UIs and tests.

Emitting never blocks and never fails: every subscriber has its own bounded buffer, and a
subscriber that does not keep up loses its *oldest* events (counted in
:attr:`Subscription.dropped`). A slow UI can therefore never slow down tool calls.

A subscription lives as long as someone holds it. The bus keeps only a weak reference, so a
subscription that is dropped — forgotten, or abandoned by breaking out of
``async for event in service.subscribe(): ...`` — leaves the bus by itself and costs nothing
afterwards. (trio closes an abandoned ``async for`` iterator in a system task at the next
scheduling point; the subscription goes with it.) :meth:`Subscription.close` and the ``with``
block end one at once, for code that wants that stated. A held subscription survives leaving a
loop: iterating it again continues where the last loop stopped.

The number of live subscriptions is bounded (``max_subscribers``, default
:data:`DEFAULT_MAX_SUBSCRIBERS`): past it, :meth:`EventBus.subscribe` raises a
:class:`RuntimeError` rather than silently ending someone else's stream. Hitting the bound
means a host holds subscriptions it no longer reads; close them.
"""

from __future__ import annotations

import collections
import enum
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Final

import attrs
import trio

__all__ = [
    "CONFIG_INVALID",
    "CONNECTION_STATE",
    "DEFAULT_MAX_SUBSCRIBERS",
    "ELICITATION_COMPLETE",
    "Event",
    "EventBus",
    "EventBusStatistics",
    "EventType",
    "PROFILES_CHANGED",
    "PROMPTS_CHANGED",
    "RESOURCES_CHANGED",
    "RESOURCE_UPDATED",
    "SERVERS_CHANGED",
    "SERVER_CONNECTED",
    "SERVER_LOG",
    "Subscription",
    "TASK_STATUS",
    "TOOLS_CHANGED",
    "TOOL_CALLED",
    "TOOL_PROGRESS",
]


class EventType(enum.StrEnum):
    """The kinds of event; each value is the string written in JSON (``"tool:called"``)."""

    SERVER_CONNECTED = "server:connected"
    """A server reached ``connected`` (``serverId``, ``serverName``)."""
    CONNECTION_STATE = "connection:state"
    """A server's connection state changed (``previous``, ``state``, ``error``, ``circuitOpen``)."""
    SERVERS_CHANGED = "servers:changed"
    """A record was added, updated or removed (``action``, ``serverId``, ``serverName``)."""
    TOOL_CALLED = "tool:called"
    """A tool call finished (``serverId``, ``toolName``, ``duration``, ``success``)."""
    TOOLS_CHANGED = "tools:changed"
    """A server's tool list changed (``notifications/tools/list_changed``)."""
    TOOL_PROGRESS = "tool:progress"
    """A running call reported progress (``toolName``, ``callId``, ``progress``, ``total``, ``message``)."""
    TASK_STATUS = "task:status"
    """A task changed status (``taskId``, ``status``, ``message``; ``toolName``, ``callId`` for our task calls)."""
    RESOURCES_CHANGED = "resources:changed"
    """A server's resource list changed (``notifications/resources/list_changed``)."""
    PROMPTS_CHANGED = "prompts:changed"
    """A server's prompt list changed (``notifications/prompts/list_changed``)."""
    RESOURCE_UPDATED = "resource:updated"
    """A subscribed resource changed (``uri``); read it again for the new contents."""
    SERVER_LOG = "server:log"
    """A server sent a log message (``level``, ``logger``, ``data``)."""
    ELICITATION_COMPLETE = "elicitation:complete"
    """A URL-mode elicitation finished out of band (``elicitationId``; ``notifications/elicitation/complete``)."""
    CONFIG_INVALID = "config:invalid"
    """A changed config file was not applied: it cannot be read (``path``, ``error``, ``field``, ``profile``)."""
    PROFILES_CHANGED = "profiles:changed"
    """The gateway serves changed profiles (``profiles``: the names added, changed or removed)."""


# Aliases of the members, so that emitters and readers written against the constants keep working.
SERVER_CONNECTED: Final = EventType.SERVER_CONNECTED
CONNECTION_STATE: Final = EventType.CONNECTION_STATE
SERVERS_CHANGED: Final = EventType.SERVERS_CHANGED
TOOL_CALLED: Final = EventType.TOOL_CALLED
TOOLS_CHANGED: Final = EventType.TOOLS_CHANGED
TOOL_PROGRESS: Final = EventType.TOOL_PROGRESS
TASK_STATUS: Final = EventType.TASK_STATUS
RESOURCES_CHANGED: Final = EventType.RESOURCES_CHANGED
PROMPTS_CHANGED: Final = EventType.PROMPTS_CHANGED
RESOURCE_UPDATED: Final = EventType.RESOURCE_UPDATED
SERVER_LOG: Final = EventType.SERVER_LOG
ELICITATION_COMPLETE: Final = EventType.ELICITATION_COMPLETE
CONFIG_INVALID: Final = EventType.CONFIG_INVALID
PROFILES_CHANGED: Final = EventType.PROFILES_CHANGED

_CALL_EVENTS: Final = frozenset({EventType.TOOL_CALLED, EventType.TOOL_PROGRESS})
"""The kinds emitted on every tool call (see :attr:`EventBus.watches_calls`)."""

DEFAULT_MAX_SUBSCRIBERS: Final = 1024
"""Live subscriptions one bus allows by default: far more than any host reads at once."""


def _to_event_type(value: EventType | str) -> EventType:
    """An attrs converter: the wire string becomes the member; anything else is refused by name."""
    try:
        return EventType(value)
    except ValueError:
        allowed = ", ".join(member.value for member in EventType)
        raise ValueError(f"event type must be one of {allowed}, got {value!r}") from None


@attrs.frozen(kw_only=True)
class Event:
    """One event.

    Attributes:
        type: Its kind; a str enum, so ``event.type == "tool:called"`` also works.
        data: The payload (camelCase keys, JSON-serialisable, never secrets).
        seq: Emission order across the whole bus, starting at 1.
        timestamp: Wall-clock time of emission (``time.time()``).

    Raises:
        ValueError: ``type`` is not an :class:`EventType` (or its string).
    """

    type: EventType = attrs.field(converter=_to_event_type)
    data: Mapping[str, Any] = attrs.field(factory=dict)
    seq: int = 0
    timestamp: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON-ready dict (``type`` is the plain string)."""
        return {
            "type": self.type.value,
            "seq": self.seq,
            "timestamp": self.timestamp,
            "data": dict(self.data),
        }


@attrs.frozen(kw_only=True)
class EventBusStatistics:
    """A snapshot of an :class:`EventBus` (see :meth:`EventBus.statistics`).

    Attributes:
        subscribers: Live subscriptions; each emit costs one buffer append per subscriber.
        max_subscribers: The bound on live subscriptions.
        emitted: Events emitted so far (not those an emitter skipped because nobody
            listened, see :attr:`EventBus.has_subscribers`).
    """

    subscribers: int
    max_subscribers: int
    emitted: int


@attrs.define(eq=False, weakref_slot=True)
class Subscription:
    """One subscriber's bounded view of the bus; iterate it with ``async for``.

    It receives events for as long as it is referenced (by you, or by a running ``async
    for``); drop it, or close it (or leave its ``with`` block), to stop receiving.
    """

    _bus: EventBus
    _buffer: collections.deque[Event]
    types: frozenset[EventType] | None = None
    """The kinds it receives (``None``: every kind)."""
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
        # Trio's rule for a receive: a cancellation point before anything is taken (a
        # receive cancelled by its deadline leaves the event buffered), a schedule point after.
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                event = self.receive_nowait()
            except trio.WouldBlock:
                # Readers sharing the subscription share the wake-up: a new one only once the
                # last was used, or an earlier reader would wait on one nobody sets.
                if self._wakeup.is_set():
                    self._wakeup = trio.Event()
                await self._wakeup.wait()
                continue
            await trio.lowlevel.cancel_shielded_checkpoint()
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
    """Fan-out of events to any number of subscribers; emitting is synchronous and O(subscribers).

    Args:
        max_subscribers: The bound on live subscriptions (>= 1).

    Raises:
        ValueError: ``max_subscribers`` < 1.
    """

    max_subscribers: int = attrs.field(default=DEFAULT_MAX_SUBSCRIBERS, kw_only=True)
    # Weak references only: a subscription nobody holds any more must not be fed forever.
    # The dict is the membership; the tuple is what emit iterates (rebuilt on every change, so
    # a reference dying during an emit never mutates what is being iterated).
    _refs: dict[int, weakref.ref[Subscription]] = attrs.field(factory=dict, init=False)
    _fanout: tuple[weakref.ref[Subscription], ...] = attrs.field(default=(), init=False)
    has_subscribers: bool = attrs.field(default=False, init=False)
    """Whether an event emitted now would reach anyone (kept with the subscriptions; read-only).

    An emitter on a hot path (one ``tool:called`` per tool call) tests this first and
    builds nothing when nobody listens: an event no subscriber can see costs an attrs
    value, a clock read and a payload dict for nothing. Such a skipped event takes no
    ``seq`` and is not counted in :attr:`EventBusStatistics.emitted`. A plain attribute, not
    a property: a call reads it up to four times, and a property is a function call each.
    """
    watches_calls: bool = attrs.field(default=False, init=False)
    """Whether a subscription takes the events of every tool call (``tool:called``, ``tool:progress``).

    What the call path tests (a plain attribute, as :attr:`has_subscribers`): a host that
    subscribed to list changes only (a gateway) costs its calls nothing.
    """
    _seq: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        if self.max_subscribers < 1:
            raise ValueError(f"max_subscribers must be >= 1, got {self.max_subscribers}")

    def subscribe(self, *, buffer: int = 1024, types: Iterable[EventType | str] | None = None) -> Subscription:
        """A new subscription that sees every event emitted from now on, while it is held.

        Args:
            buffer: How many unread events it keeps before dropping the oldest.
            types: Only these kinds of event (default: every kind). A subscription that
                leaves out ``tool:called`` and ``tool:progress`` costs tool calls nothing.

        Raises:
            ValueError: ``buffer`` < 1, or a type that is no :class:`EventType`.
            RuntimeError: ``max_subscribers`` subscriptions are live already; close some.
        """
        if buffer < 1:
            raise ValueError(f"buffer must be >= 1, got {buffer}")
        if len(self._refs) >= self.max_subscribers:
            raise RuntimeError(
                f"{len(self._refs)} live event subscriptions already (max_subscribers={self.max_subscribers}); "
                "close subscriptions you no longer read (close() or a with block)"
            )
        kinds = None if types is None else frozenset(_to_event_type(t) for t in types)
        sub = Subscription(self, collections.deque(maxlen=buffer), kinds)
        key = id(sub)
        self._refs[key] = weakref.ref(sub, lambda _ref: self._forget(key))
        self._changed()
        return sub

    def _changed(self) -> None:
        """Recompute what emitters test, after a subscription came or went."""
        self._fanout = tuple(self._refs.values())
        self.has_subscribers = bool(self._fanout)
        subs = [sub for sub in (ref() for ref in self._fanout) if sub is not None]
        self.watches_calls = any(sub.types is None or not sub.types.isdisjoint(_CALL_EVENTS) for sub in subs)

    def emit(self, type: EventType | str, **data: Any) -> Event:
        """Deliver an event to every live subscriber without blocking.

        Raises:
            ValueError: ``type`` is not an :class:`EventType` (a programming error).
        """
        event = Event(type=type, data=data, seq=self._seq + 1, timestamp=time.time())
        self._seq += 1
        kind = event.type
        for ref in self._fanout:
            sub = ref()
            if sub is not None and (sub.types is None or kind in sub.types):
                sub._push(event)
        return event

    def statistics(self) -> EventBusStatistics:
        """A snapshot: live subscribers, the bound, events emitted."""
        return EventBusStatistics(subscribers=len(self._refs), max_subscribers=self.max_subscribers, emitted=self._seq)

    def close(self) -> None:
        """End every subscription (their iterators finish after draining)."""
        for ref in self._fanout:
            sub = ref()
            if sub is not None:
                sub.close()

    def _unsubscribe(self, sub: Subscription) -> None:
        self._forget(id(sub))

    def _forget(self, key: int) -> None:
        if self._refs.pop(key, None) is not None:
            self._changed()
