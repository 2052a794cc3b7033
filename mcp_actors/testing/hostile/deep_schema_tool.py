"""A stdio MCP server that lists one tool whose ``inputSchema`` is nested very deep.

``python -m mcp_actors.testing.hostile.deep_schema_tool [DEPTH]`` lists ``echo`` (a
well-formed tool that answers) and ``deep``, whose input schema nests ``DEPTH`` objects
(default 128), each the only property of the one above it. Nothing in the spec bounds
a schema's depth, but a client's JSON model may: the point is that such a tool costs its
client that tool, never the server's other tools.

Plain Python writing raw lines: no SDK, so the bytes are what any server could send.
"""

from __future__ import annotations

import sys
from typing import Any, Final

from mcp_actors.testing.hostile._wire_base import RawServer, tool_result

__all__ = ["DEFAULT_DEPTH", "ECHO_TOOL", "deep_schema", "main"]

DEFAULT_DEPTH: Final = 128
"""The nesting of the ``deep`` tool's schema when no depth is given."""

ECHO_TOOL: Final[dict[str, Any]] = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def deep_schema(depth: int) -> dict[str, Any]:
    """An object schema nesting ``depth`` objects, each the property ``next`` of the one above."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"next": schema}}
    return schema


def main(argv: list[str] | None = None) -> None:
    """Serve stdin/stdout until stdin ends."""
    args = sys.argv[1:] if argv is None else argv
    depth = int(args[0]) if args else DEFAULT_DEPTH
    deep = {"name": "deep", "description": f"Nested {depth} deep.", "inputSchema": deep_schema(depth)}

    def echo(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        return tool_result(str(arguments.get("text", "")))

    RawServer({"echo": echo}, listing=[ECHO_TOOL, deep], name="deep-schema-tool").serve()


if __name__ == "__main__":
    main()
