"""Mailbox messages of the connection actor.

One frozen class per message kind; :data:`ConnectionMessage` is their union and the actor
dispatches on it with ``match``. Every request carries a one-shot :class:`supervisors.Reply`
that the actor answers exactly once (a value or a typed error). A caller that gives up
(cancel, timeout) only abandons its reply; the actor never notices.
"""

from __future__ import annotations

from typing import Any

import attrs
import mcp.types as mcp_types

from supervisors import Reply

__all__ = [
    "CallTool",
    "Connect",
    "ConnectionMessage",
    "Disconnect",
    "GetPrompts",
    "GetResources",
    "Health",
    "ListTools",
    "Reconnect",
]


@attrs.frozen(kw_only=True)
class Connect:
    """Connect now if not connected (coalesced with any attempt under way).

    Replies ``None`` once connected, or a :class:`~mcp_actors.errors.ConnectionFailed`.
    """

    reply: Reply[None]


@attrs.frozen(kw_only=True)
class Health:
    """Ping the server now (connecting first if needed).

    Replies the round-trip time in seconds, or a typed error.
    """

    reply: Reply[float]
    timeout: float = 10.0


@attrs.frozen(kw_only=True)
class ListTools:
    """List every tool of the server (all pages).

    Replies a tuple of the SDK's ``Tool`` models, or a typed error.
    """

    reply: Reply[tuple[mcp_types.Tool, ...]]


@attrs.frozen(kw_only=True)
class GetPrompts:
    """List the server's prompts; replies an empty tuple when it has none."""

    reply: Reply[tuple[mcp_types.Prompt, ...]]


@attrs.frozen(kw_only=True)
class GetResources:
    """List the server's resources; replies an empty tuple when it has none."""

    reply: Reply[tuple[mcp_types.Resource, ...]]


@attrs.frozen(kw_only=True)
class CallTool:
    """Call one tool.

    Attributes:
        name: The tool's own name on the server.
        arguments: The arguments object.
        timeout: Bound for this call in seconds; ``None`` means the server's configured
            call timeout.
        call_id: The caller's id for the call (for logs and events), if any.
        reply: Answered with the SDK's ``CallToolResult`` (a tool-level error is a result
            with ``is_error`` set, not an exception) or a typed error.
    """

    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    timeout: float | None = None
    call_id: str | None = None
    reply: Reply[mcp_types.CallToolResult]


@attrs.frozen(kw_only=True)
class Disconnect:
    """Close the connection (and stop a stdio server); the actor stays and connects lazily again."""

    reply: Reply[None]


@attrs.frozen(kw_only=True)
class Reconnect:
    """Close any connection and connect again; also closes an open circuit."""

    reply: Reply[None]


ConnectionMessage = Connect | Health | ListTools | GetPrompts | GetResources | CallTool | Disconnect | Reconnect
