"""The raw stdio server the ``wire_*`` hostile servers share: the handshake and a tool table, by hand.

No SDK and no ``json.dumps`` on the way out where the bytes matter: a tool returns the raw
line it wants written (``bytes``), or a dict that the stdlib encodes (exact integers,
``NaN`` as the stdlib writes it). Lines from the client are decoded with the stdlib, so
whatever we send arrives as the bytes say.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["RawServer", "Tool", "tool_result"]

Tool = Callable[["RawServer", Any, dict[str, Any]], "bytes | dict[str, Any] | None"]
"""``(server, request id, arguments) -> the raw line, a result dict, or None (answered later)``."""


def tool_result(text: str, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``CallToolResult`` as a dict."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    return result


class RawServer:
    """Reads JSON-RPC lines on stdin, answers the handshake and ``tools/*``, writes raw lines on stdout."""

    def __init__(
        self,
        tools: dict[str, Tool],
        *,
        on_ping: Callable[[RawServer, Any], None] | None = None,
        listing: list[dict[str, Any]] | None = None,
        name: str = "hostile",
    ) -> None:
        self.tools = tools
        self.on_ping = on_ping
        self.listing = listing
        """What ``tools/list`` answers (default: each tool by name with an open object schema)."""
        self.name = name
        self.on_response: Callable[[dict[str, Any]], None] | None = None
        self._out = sys.stdout.buffer
        self._lock = threading.Lock()

    def write(self, line: bytes) -> None:
        """Write one line (the newline added) and flush; safe from any thread."""
        with self._lock:
            self._out.write(line + b"\n")
            self._out.flush()

    def write_many(self, lines: bytes) -> None:
        """Write a block of ready lines at once (each already ends with a newline)."""
        with self._lock:
            self._out.write(lines)
            self._out.flush()

    def answer(self, rpc_id: Any, result: dict[str, Any]) -> None:
        self.write(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result}).encode())

    def error(self, rpc_id: Any, code: int, message: str) -> None:
        self.write(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}).encode())

    def serve(self) -> None:
        """Serve until stdin closes."""
        for raw in sys.stdin.buffer:
            if not raw.strip():
                continue
            message = json.loads(raw)
            method = message.get("method")
            rpc_id = message.get("id")
            if method is None:
                if self.on_response is not None:
                    self.on_response(message)
                continue
            if rpc_id is None:
                continue  # a notification: nothing to answer
            self._request(rpc_id, method, message.get("params") or {})

    def _request(self, rpc_id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "initialize":
            self.answer(
                rpc_id,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": self.name, "version": "0"},
                },
            )
        elif method == "ping":
            if self.on_ping is not None:
                self.on_ping(self, rpc_id)
            else:
                self.answer(rpc_id, {})
        elif method == "tools/list":
            tools = self.listing
            if tools is None:
                tools = [{"name": name, "inputSchema": {"type": "object"}} for name in self.tools]
            self.answer(rpc_id, {"tools": tools})
        elif method == "tools/call" and params.get("name") in self.tools:
            out = self.tools[params["name"]](self, rpc_id, params.get("arguments") or {})
            if isinstance(out, bytes):
                self.write(out)
            elif out is not None:
                self.answer(rpc_id, out)
        else:  # server/discover among them: the client falls back to the handshake
            self.error(rpc_id, -32601, f"method not found: {method}")
