"""A stdio MCP server that lists one tool whose ``inputSchema`` is nested very deep.

``python -m mcp_actors.testing.hostile.deep_schema_tool [DEPTH]`` lists ``echo`` (a
well-formed tool that answers) and ``deep``, whose input schema nests ``DEPTH`` objects
(default 128), each the only property of the one above it. Nothing in the spec bounds
a schema's depth, but a client's JSON model may: the point is that such a tool costs its
client that tool, never the server's other tools.

Plain Python writing raw lines: no SDK, so the bytes are what any server could send.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Final

__all__ = ["DEFAULT_DEPTH", "ECHO_TOOL", "deep_schema", "main"]

DEFAULT_DEPTH: Final = 128
"""The nesting of the ``deep`` tool's schema when no depth is given."""

_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

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


def _answer(message: dict[str, Any], depth: int) -> dict[str, Any] | None:
    """The reply to one request (None for a notification)."""
    if "id" not in message:
        return None
    request_id = message["id"]
    params = message.get("params") or {}
    match message.get("method"):
        case "initialize":
            requested = params.get("protocolVersion")
            result: dict[str, Any] = {
                "protocolVersion": requested if requested in _VERSIONS else _VERSIONS[-1],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "deep-schema-tool", "version": "1.0.0"},
            }
        case "ping":
            result = {}
        case "tools/list":
            deep = {"name": "deep", "description": f"Nested {depth} deep.", "inputSchema": deep_schema(depth)}
            result = {"tools": [ECHO_TOOL, deep]}
        case "tools/call" if params.get("name") == "echo":
            text = str((params.get("arguments") or {}).get("text", ""))
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        case method:
            error = {"code": -32601, "message": f"method not found: {method}"}
            return {"jsonrpc": "2.0", "id": request_id, "error": error}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main(argv: list[str] | None = None) -> None:
    """Serve stdin/stdout until stdin ends."""
    args = sys.argv[1:] if argv is None else argv
    depth = int(args[0]) if args else DEFAULT_DEPTH
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = _answer(message, depth) if isinstance(message, dict) else None
        if reply is not None:
            sys.stdout.buffer.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
