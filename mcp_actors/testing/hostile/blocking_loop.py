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

import sys
import time
from typing import Any, Final

from mcp_actors.testing.hostile._wire_base import RawServer, tool_result

__all__ = ["main"]

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


def _echo(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    return tool_result(str(arguments.get("text", "")))


def _block(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    seconds = float(arguments.get("seconds", 0))
    print(f"blocking_loop: blocking {seconds:g} s", file=sys.stderr, flush=True)
    time.sleep(seconds)  # the only thread: nothing is read meanwhile
    return tool_result(f"blocked {seconds:g} s")


def main() -> None:
    """Serve stdin/stdout, one line at a time, until stdin ends."""
    RawServer({"echo": _echo, "block": _block}, listing=_TOOLS, name="blocking-loop").serve()


if __name__ == "__main__":
    main()
