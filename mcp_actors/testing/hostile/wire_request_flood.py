"""A server that floods its client with requests: sampling, elicitation, roots and pings.

``python -m mcp_actors.testing.hostile.wire_request_flood``. Its tool ``flood`` (arguments
``count``, and ``kinds``: a list of ``sampling``, ``elicitation``, ``roots``, ``ping``, by
default all four in turn) writes ``count`` requests to the client as fast as the pipe
takes them, without waiting for a single answer, then answers the call once every request
was answered, with ``{"sent", "answered", "results", "errors", "messages"}`` as its
structured content (``messages``: the distinct error messages, at most ten).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from mcp_actors.testing.hostile._wire_base import RawServer, tool_result

_REQUESTS = {
    "sampling": (
        "sampling/createMessage",
        {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5},
    ),
    "elicitation": (
        "elicitation/create",
        {"message": "name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
    ),
    "roots": ("roots/list", None),
    "ping": ("ping", None),
}


class _Flood:
    def __init__(self, server: RawServer) -> None:
        self.server = server
        self.call_id: Any = None
        self.expected = 0
        self.answered = 0
        self.results = 0
        self.errors = 0
        self.messages: set[str] = set()
        server.on_response = self.on_response

    def start(self, server: RawServer, call_id: Any, arguments: dict[str, Any]) -> None:
        count = int(arguments.get("count", 1000))
        kinds = list(arguments.get("kinds") or _REQUESTS)
        self.call_id, self.expected = call_id, count
        self.answered = self.results = self.errors = 0
        self.messages = set()
        threading.Thread(target=self._write, args=(count, kinds), daemon=True).start()

    def _write(self, count: int, kinds: list[str]) -> None:
        block: list[bytes] = []
        for n in range(count):
            method, params = _REQUESTS[kinds[n % len(kinds)]]
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": f"flood-{n}", "method": method}
            if params is not None:
                message["params"] = params
            block.append(json.dumps(message).encode() + b"\n")
            if len(block) == 500:
                self.server.write_many(b"".join(block))
                block = []
        if block:
            self.server.write_many(b"".join(block))

    def on_response(self, message: dict[str, Any]) -> None:
        rpc_id = message.get("id")
        if not (isinstance(rpc_id, str) and rpc_id.startswith("flood-")):
            return
        self.answered += 1
        if "error" in message:
            self.errors += 1
            if len(self.messages) < 10:
                self.messages.add(str(message["error"].get("message")))
        else:
            self.results += 1
        if self.answered == self.expected:
            report = {
                "sent": self.expected,
                "answered": self.answered,
                "results": self.results,
                "errors": self.errors,
                "messages": sorted(self.messages),
            }
            self.server.answer(self.call_id, tool_result(json.dumps(report), report))


def main() -> None:
    server = RawServer({})
    flood = _Flood(server)

    def start(server: RawServer, call_id: Any, arguments: dict[str, Any]) -> None:
        flood.start(server, call_id, arguments)

    server.tools["flood"] = start
    server.serve()


if __name__ == "__main__":
    main()
