"""Mailbox messages of the connection actor.

One frozen class per message kind; :data:`ConnectionMessage` is their union and the actor
dispatches on it with ``match``. Every request carries a one-shot :class:`supervisors.Reply`
that the actor answers exactly once (a value or a typed error). A caller that gives up
(cancel, timeout) only abandons its reply; the actor never notices.

The actor owns the connection's *life* (spawn, initialize, death, restart, close); the
requests themselves (``tools/call``, ``tools/list``, ``ping``, ...) run in the caller's
task over the live session the actor hands out (see :mod:`mcp_actors._connection.actor`). So
the mailbox carries only what changes that life: connect, disconnect, reconnect; the
misses of the listings the actor owns (:mod:`mcp_actors._connection.listings`); and the log
level a 2026-07-28 connection stamps on its requests, which the actor keeps in its cell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from supervisors import Reply

if TYPE_CHECKING:
    from mcp_actors._connection.listings import Listing, ListingKind
    from mcp_actors._connection.live import LiveSession

__all__ = [
    "Connect",
    "ConnectionMessage",
    "Disconnect",
    "FillListing",
    "Reconnect",
    "SetLogLevel",
]


@attrs.frozen(kw_only=True)
class Connect:
    """Hand out the live session, connecting first if needed (coalesced with any attempt under way).

    Replies the :class:`~mcp_actors._connection.live.LiveSession` once connected, or a
    :class:`~mcp_actors.errors.ConnectionFailed`. Sent during a restart, it waits in the
    mailbox for the next incarnation, which connects at once.
    """

    reply: Reply[LiveSession]


@attrs.frozen(kw_only=True)
class Disconnect:
    """Close the connection (and stop a stdio server); the actor stays and connects lazily again."""

    reply: Reply[None]


@attrs.frozen(kw_only=True)
class Reconnect:
    """Close any connection and connect again; also closes an open circuit.

    Replies the new live session, or the typed error of the new attempt.
    """

    reply: Reply[LiveSession]


@attrs.frozen(kw_only=True)
class FillListing:
    """A listing the caller found missing or stale: join the one fill under way, or start it.

    Replies the :class:`~mcp_actors._connection.listings.Listing` (every waiter of one fill gets the same
    one), the fill's typed error, or :class:`~mcp_actors._connection.live.SessionEnded` when ``live``
    is no longer the connection (the caller then asks again on the current one).

    Attributes:
        kind: What to list.
        live: The connection the caller looked at (the listing must come from it); ``None``
            when it saw none: the actor connects (or joins the attempt under way) and
            lists on that connection, one round trip for a cold server's first listing
            instead of a connect and then a fill.
        max_age: Seconds a published listing may be old and still answer; ``0`` means the
            caller wants it fetched now (it still joins a fill under way).
    """

    kind: ListingKind
    live: LiveSession | None = attrs.field(eq=False, repr=False)
    max_age: float
    reply: Reply[Listing]


@attrs.frozen(kw_only=True)
class SetLogLevel:
    """Stamp ``level`` on every later request of the connection ``live`` (2026-07-28's per-request logging).

    Replies ``None`` once recorded, or :class:`~mcp_actors._connection.live.SessionEnded` when
    ``live`` is no longer the connection (the caller sets it on the current one).
    """

    live: LiveSession = attrs.field(eq=False, repr=False)
    level: str
    reply: Reply[None]


ConnectionMessage = Connect | Disconnect | Reconnect | FillListing | SetLogLevel
