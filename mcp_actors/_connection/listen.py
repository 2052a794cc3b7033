"""Server events at 2026-07-28: one ``subscriptions/listen`` stream per connection (SEP-2575).

Up to 2025-11-25 a server pushes ``notifications/*/list_changed`` and
``notifications/resources/updated`` whenever it likes, and ``resources/subscribe`` asks for
the latter. At 2026-07-28 neither exists on its own: the client opens a
``subscriptions/listen`` request whose response *is* the event stream, naming what it wants
(the three list_changed kinds and a set of resource URIs). mcp-actors keeps exactly one such
stream per connection (two for the moment of a filter change), owned by a :class:`Listener`
that the connection actor starts when a 2026-07-28 session connects and that dies with the
session:

* it asks for every list_changed kind the server declares (``listChanged`` in its
  capabilities) and for the URIs subscribed through :meth:`Listener.subscribe`; with nothing
  to ask for, no stream is opened;
* a change of the URI set re-listens: the stream with the new filter is opened *beside* the
  old one, and the old one is closed only once the new one is acknowledged, so an event sent
  during the switch still arrives (on the old stream; at worst twice, never not at all).
  :meth:`Listener.subscribe` returns only once the server acknowledged a filter containing
  the URI, so an update that follows cannot be missed. Should the old stream have dropped
  before the new one was in place, ``on_reopen`` runs as after a loss;
* the events themselves are frames the SDK also hands to the session's ``message_handler``,
  where the connection actor handles them exactly as on the handshake revisions (cache
  epochs, ``tools:changed``, ``resources:changed``, ``resource:updated``); the listener only
  keeps the stream drained;
* a stream that is lost (dropped, or closed by the server) is re-opened after a bounded
  exponential backoff. There is no replay, so the owner's ``on_reopen`` hook then
  invalidates what may have been missed (the actor bumps its caches and emits the change
  events, telling hosts to refetch).

A server that refuses ``subscriptions/listen`` (an error instead of the acknowledgment) is
not asked again until the URI set changes; :meth:`Listener.subscribe` then fails with
:class:`~mcp_actors.errors.ServerProtocolError` naming the server.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable
from typing import Final

import attrs
import trio
from mcp import ClientSession
from mcp.client.subscriptions import SubscriptionLost, listen
from mcp.shared.exceptions import MCPError

from mcp_actors.errors import ServerProtocolError
from supervisors import Backoff, backoff_delay

__all__ = ["LISTEN_ACK_BOUND", "LISTEN_BACKOFF", "Listener"]

logger = logging.getLogger(__name__)

LISTEN_ACK_BOUND: Final = 30.0
"""Seconds a ``subscriptions/listen`` request may wait for the server's acknowledgment."""
LISTEN_BACKOFF: Final = Backoff(min_delay=0.4, max_delay=24.0, jitter=0.25, reset_after=10.0)
"""Re-listening after a loss: 0.4-0.5 s, doubling up to 24-30 s (supervisors' formula); a stream
that lived ``reset_after`` seconds starts the next loss's backoff from its minimum again."""


@attrs.define(eq=False)
class Listener:
    """The one ``subscriptions/listen`` stream of a 2026-07-28 connection, and the URIs it carries.

    Created by the connection actor for a 2026-07-28 session and run (:meth:`run`) in that
    session's nursery; callers reach it through the connection handle
    (``subscribe_resource`` / ``unsubscribe_resource``). All its waits are bounded by the
    caller's request timeout (subscribe) or by :data:`LISTEN_ACK_BOUND` (opening a stream).

    Attributes:
        session: The SDK session the stream runs on (its negotiated version is 2026-07-28).
        label: The server's name, for messages and logs.
        on_reopen: Called after a lost stream was opened again: whatever changed meanwhile
            was not delivered (no replay), so the owner invalidates its caches.
        backoff: The delays before re-opening a lost stream (:func:`supervisors.backoff_delay`).
    """

    session: ClientSession
    label: str
    on_reopen: Callable[[], None]
    backoff: Backoff = LISTEN_BACKOFF
    _uris: dict[str, None] = attrs.field(factory=dict, init=False)
    _wanted: int = attrs.field(default=0, init=False)
    _acked: int = attrs.field(default=-1, init=False)
    _honored: frozenset[str] = attrs.field(default=frozenset(), init=False)
    _refused: str | None = attrs.field(default=None, init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)
    _settled: trio.Event = attrs.field(factory=trio.Event, init=False)
    opened: int = attrs.field(default=0, init=False)
    """How many streams were acknowledged on this connection (statistics for tests and logs)."""

    @property
    def uris(self) -> tuple[str, ...]:
        """The resource URIs subscribed on this connection, in subscription order."""
        return tuple(self._uris)

    async def subscribe(self, uri: str) -> None:
        """Add ``uri`` to the stream's filter; return once the server acknowledged it.

        Unbounded on its own: the connection handle runs it inside the request's timeout.

        Raises:
            ServerProtocolError: The server refused the stream, or acknowledged a filter
                without ``uri`` (it does not offer updates of that resource).
        """
        if uri not in self._uris:
            self._uris[uri] = None
            self._want_new_filter()
        await self._wait_acked()
        if uri not in self._honored:
            if self._uris.pop(uri, 0) is None:
                self._want_new_filter()
            raise ServerProtocolError(
                f"server {self.label!r} did not accept a subscription to {uri!r} (subscriptions/listen);"
                " it does not offer updates of that resource",
                server=self.label,
            )

    async def unsubscribe(self, uri: str) -> None:
        """Remove ``uri`` from the stream's filter; return once the new filter is in place."""
        if self._uris.pop(uri, 0) is None:
            self._want_new_filter()
            await self._wait_acked()
        else:
            await trio.lowlevel.checkpoint()

    def _want_new_filter(self) -> None:
        self._wanted += 1
        self._refused = None
        self._changed.set()

    def _settle(self) -> None:
        self._settled.set()
        self._settled = trio.Event()

    async def _wait_acked(self) -> None:
        target = self._wanted
        while self._acked < target:
            if self._refused is not None:
                raise ServerProtocolError(
                    f"server {self.label!r} refused subscriptions/listen: {self._refused}", server=self.label
                )
            await self._settled.wait()

    def _flags(self) -> dict[str, bool]:
        caps = self.session.server_capabilities
        tools = caps.tools if caps is not None else None
        resources = caps.resources if caps is not None else None
        prompts = caps.prompts if caps is not None else None
        return {
            "tools": bool(tools is not None and tools.list_changed),
            "resources": bool(resources is not None and resources.list_changed),
            "prompts": bool(prompts is not None and prompts.list_changed),
        }

    async def run(self) -> None:
        """Keep one stream open for the session's life (cancelled with it); never raises on a loss.

        A new filter is opened *beside* the old stream, which is closed only once the new one
        is acknowledged: an event sent in between still arrives on the old one (both reach
        the session's message handler, so at worst an event is seen twice, never missed).
        """
        async with trio.open_nursery() as nursery:
            await self._run(nursery)

    async def _run(self, nursery: trio.Nursery) -> None:
        failures = 0
        lost = False
        current: _Stream | None = None
        flags = self._flags()
        while True:
            self._changed = trio.Event()
            generation = self._wanted
            uris = tuple(self._uris)
            if not any(flags.values()) and not uris:
                # Nothing to listen for: the (empty) filter is trivially in place.
                if current is not None:
                    current.close()
                    current = None
                self._acked = generation
                self._settle()
                await self._changed.wait()
                continue
            started = trio.current_time()
            stream = _Stream(listener=self, flags=flags, uris=uris)
            outcome = await nursery.start(stream.run)
            if outcome is None:
                # The new filter is in place: only now may the old stream go.
                gap = current is not None and current.ended.is_set()
                if current is not None:
                    current.close()
                current = stream
                self.opened += 1
                self._honored = stream.honored
                self._acked = generation
                self._settle()
                if lost or gap:
                    self.on_reopen()  # the old stream ended before this one was in place: no replay
                lost = False
                await _wait_any(self._changed, stream.ended)
                if not stream.ended.is_set():
                    failures = 0
                    continue  # a new filter is wanted; this stream stays open until it is acknowledged
                outcome = stream.outcome
            elif outcome == "refused":
                if self._acked < generation:
                    self._refused = stream.refused
                    self._settle()
                if current is not None:
                    current.close()
                    current = None
                await self._changed.wait()
                failures, lost = 0, False
                continue
            # Lost or closed by the server: open it again after a backoff, then invalidate. An
            # older stream still open (the new filter's stream failed to open) keeps delivering.
            if current is not None and current.ended.is_set():
                current = None
            lost = True
            if trio.current_time() - started >= self.backoff.reset_after:
                failures = 0
            delay = backoff_delay(self.backoff, failures, random.random())
            failures += 1
            logger.info("server %s: subscriptions/listen stream %s; re-listening in %.1fs", self.label, outcome, delay)
            with trio.move_on_after(delay):
                await self._changed.wait()  # a new filter is wanted: no reason to wait longer


async def _wait_any(*waits: trio.Event) -> None:
    """Return as soon as one of ``waits`` is set."""
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        for event in waits:
            nursery.start_soon(wait, event)


@attrs.define(eq=False)
class _Stream:
    """One ``subscriptions/listen`` stream, run as its own task until it ends or :meth:`close`.

    :meth:`run` reports through ``task_status.started`` how the opening went: ``None`` once
    acknowledged (the stream then keeps being drained), or why it failed (``"refused"``,
    with the server's words in :attr:`refused`, or ``"lost"``). After an acknowledgment,
    :attr:`ended` is set when it ends on its own, with the reason in :attr:`outcome`.
    """

    listener: Listener
    flags: dict[str, bool]
    uris: tuple[str, ...]
    honored: frozenset[str] = attrs.field(default=frozenset(), init=False)
    refused: str | None = attrs.field(default=None, init=False)
    outcome: str = attrs.field(default="closed by the server", init=False)
    ended: trio.Event = attrs.field(factory=trio.Event, init=False)
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)

    def close(self) -> None:
        """End the stream (its request is cancelled; the server sees the client go)."""
        self._scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[str | None] = trio.TASK_STATUS_IGNORED) -> None:
        label = self.listener.label
        acked = False
        with self._scope:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    with trio.fail_after(LISTEN_ACK_BOUND):
                        sub = await stack.enter_async_context(
                            listen(
                                self.listener.session,
                                tools_list_changed=self.flags["tools"],
                                resources_list_changed=self.flags["resources"],
                                prompts_list_changed=self.flags["prompts"],
                                resource_subscriptions=self.uris,
                            )
                        )
                    self.honored = frozenset(sub.honored.resource_subscriptions or ())
                    acked = True
                    task_status.started(None)
                    async for _ in sub:
                        pass  # the session's message handler sees the events; this keeps the stream drained
            except MCPError as exc:
                logger.info("server %s: subscriptions/listen refused: %s", label, exc.error.message)
                self.outcome = "lost" if acked else "refused"
                if not acked:
                    self.refused = exc.error.message
            except (SubscriptionLost, trio.TooSlowError) as exc:
                logger.debug("server %s: subscriptions/listen stream lost: %s", label, exc)
                self.outcome = "lost"
            except Exception as exc:  # the SDK or the transport choked: never let it take the connection down
                logger.warning("server %s: subscriptions/listen failed: %s: %s", label, type(exc).__name__, exc)
                self.outcome = "lost"
        if self._scope.cancelled_caught:
            self.outcome = "closed"
        self.ended.set()
        if not acked:
            task_status.started(self.outcome)
