"""A stdio MCP server whose tool blocks its whole loop, as a Node server's synchronous work does.

``python -m mcp_actors.testing.hostile.blocking_loop`` serves two tools on one thread,
one line at a time: ``echo``, and ``block`` (``{"seconds": S}``), which sleeps ``S``
seconds before it answers. Meanwhile nothing is read: a ping (or a cancellation) sent
during the block waits in the pipe and is answered only afterwards, in order. The
process is alive the whole time. Not hostile by intent, only by its single thread; the
point is that a client must tell such a busy server from a hung one.

It writes ``blocking_loop: blocking S s`` to stderr as a block begins. Plain Python
writing raw lines: no SDK, so the bytes are what any server could send.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Final

__all__ = ["main"]

_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

_TOOLS: Final[list[dict[str, Any]]] = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "block",
        "description": "Block the server's only thread for the given seconds, then answer.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    },
]


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The reply to one request (None for a notification); ``block`` blocks right here."""
    if "id" not in message:
        return None
    request_id = message["id"]
    params = message.get("params") or {}
    arguments = params.get("arguments") or {}
    match message.get("method"):
        case "initialize":
            requested = params.get("protocolVersion")
            result: dict[str, Any] = {
                "protocolVersion": requested if requested in _VERSIONS else _VERSIONS[-1],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "blocking-loop", "version": "1.0.0"},
            }
        case "ping":
            result = {}
        case "tools/list":
            result = {"tools": _TOOLS}
        case "tools/call" if params.get("name") == "echo":
            result = _text(str(arguments.get("text", "")))
        case "tools/call" if params.get("name") == "block":
            seconds = float(arguments.get("seconds", 0))
            print(f"blocking_loop: blocking {seconds:g} s", file=sys.stderr, flush=True)
            time.sleep(seconds)
            result = _text(f"blocked {seconds:g} s")
        case method:
            error = {"code": -32601, "message": f"method not found: {method}"}
            return {"jsonrpc": "2.0", "id": request_id, "error": error}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main() -> None:
    """Serve stdin/stdout, one line at a time, until stdin ends."""
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = _answer(message) if isinstance(message, dict) else None
        if reply is not None:
            sys.stdout.buffer.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
