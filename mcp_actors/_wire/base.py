"""The seam between a connection's dispatcher and its transport (the hot path).

The SDK's stream dispatcher moves every message through three memory streams and two
extra tasks (caller → writer task → pipe; pipe → reader task → dispatcher task → caller)
and validates every envelope with pydantic. A :class:`Wire` is what a transport offers
instead: it sends one JSON-RPC message (a plain ``dict``) from the caller's own task and
hands every message the peer sends to one synchronous ``deliver`` callback, so the
dispatcher (``mcp_actors._wire.dispatch``) can answer a waiting caller with no task hop.

Stdio: ``send`` writes one encoded line to the server's stdin; ``run`` reads stdout lines.
Streamable HTTP: ``send`` POSTs the message and delivers every message of the response
(a JSON body or an SSE stream) before it returns; ``run`` reads the optional GET stream.
Such a wire says so with a class attribute ``exchange_in_send = True``, so the dispatcher
runs a request's timeout around ``send`` too, not only after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import trio

__all__ = ["Deliver", "Wire", "WireClosed"]

Deliver = Callable[[dict[str, Any]], None]
"""Takes one decoded JSON-RPC message from the peer; synchronous, must not block."""


class WireClosed(Exception):
    """The peer is gone: nothing more can be sent on this wire."""


class Wire(Protocol):
    """One connection's message carrier (see the module docstring)."""

    async def send(
        self, message: dict[str, Any], *, headers: Mapping[str, str] | None = None, bound: float | None = None
    ) -> None:
        """Send one JSON-RPC message; an exchange-style wire delivers its replies before returning.

        Args:
            message: The JSON-RPC message, ready to encode.
            headers: Transport hints (HTTP headers: protocol version, method, name); others ignore them.
            bound: Seconds within which a cancel scope of the caller's, around this send and
                not shielded from it, ends it (``None``: not known). An exchange-style wire
                may then skip a timeout of its own that could only come later.

        Raises:
            WireClosed: The peer is gone.
        """
        ...

    async def run(self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver every message the peer sends outside an exchange, in order, until it closes.

        ``task_status.started()`` is called once :meth:`send` may be used; ``deliver`` is
        also the callback :meth:`send` uses for an exchange's replies.
        """
        ...
