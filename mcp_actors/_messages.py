"""Mailbox messages of the connection actor.

One frozen class per message kind; :data:`ConnectionMessage` is their union and the actor
dispatches on it with ``match``. Every request carries a one-shot :class:`supervisors.Reply`
that the actor answers exactly once (a value or a typed error). A caller that gives up
(cancel, timeout) only abandons its reply; the actor never notices.

The actor owns the connection's *life* (spawn, initialize, death, restart, close); the
requests themselves (``tools/call``, ``tools/list``, ``ping``, ...) run in the caller's
task over the live session the actor hands out (see :mod:`mcp_actors.connection`). So
the mailbox carries only what changes that life: connect, disconnect, reconnect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from supervisors import Reply

if TYPE_CHECKING:
    from mcp_actors._live import LiveSession

__all__ = [
    "Connect",
    "ConnectionMessage",
    "Disconnect",
    "Reconnect",
]


@attrs.frozen(kw_only=True)
class Connect:
    """Hand out the live session, connecting first if needed (coalesced with any attempt under way).

    Replies the :class:`~mcp_actors._live.LiveSession` once connected, or a
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


ConnectionMessage = Connect | Disconnect | Reconnect
