"""The value type for one MCP tool as the rest of the library sees it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import mcp.types as mcp_types

__all__ = ["McpTool"]


@attrs.frozen(kw_only=True)
class McpTool:
    """One tool of one configured server, ready to be offered to an LLM.

    A frozen value, compared and hashed by value (the schema takes part in equality,
    not in the hash). The registry hands out the very same objects while a server's
    tools, record and ids are unchanged; :mod:`mcp_actors.formats` caches each server's
    converted definitions by that identity, so a repeated request converts nothing.
    Never mutate ``input_schema`` in place: build a new tool (``attrs.evolve``).

    Attributes:
        id: The runtime-wide tool id (``mcp__<server>__<tool>``, provider-safe, unique).
            This is the name an LLM sees and calls.
        name: The tool's own name on its server (what ``tools/call`` is sent with).
        description: The server's description (may be empty).
        input_schema: The server's JSON schema for the arguments, as sent (a dict).
        server_id: The id of the server record that offers the tool.
        server_name: That server's name.
        definition: The whole definition the server listed (title, annotations,
            ``outputSchema``, icons, ``_meta``), for a host that serves the tool again as MCP
            (``mcp_actors.serve``); ``None`` for a tool built by hand. It takes no part in
            equality or the hash: the fields above say what a tool is.
    """

    id: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = attrs.field(factory=dict, hash=False)
    server_id: str
    server_name: str
    definition: mcp_types.Tool | None = attrs.field(default=None, eq=False, repr=False)
