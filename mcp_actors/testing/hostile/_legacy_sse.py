"""A legacy SSE MCP server (the 2024-11-05 transport) that can misbehave on purpose.

The client opens ``GET /sse``; the server's first event, ``endpoint``, names where to POST
messages; every answer comes back as a ``message`` event on the GET stream. This one
answers ``initialize``, ``ping``, ``tools/list`` (one tool, ``big``) and ``tools/call``
(a text result of :attr:`LegacySseServer.result_bytes` bytes), and can name a POST
endpoint on another origin. Every request it gets is recorded, headers included, so a
test can check that credentials never went somewhere they should not.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

from mcp_actors.testing.hostile._common import read_request, serve_loopback


@attrs.define(eq=False)
class LegacySseServer:
    """A running legacy SSE server.

    Attributes:
        url: Its SSE endpoint (``http://127.0.0.1:PORT/sse``).
        origin: ``http://127.0.0.1:PORT``.
        endpoint: What its ``endpoint`` event says (relative, or absolute on another origin).
        result_bytes: Size of the text a ``tools/call`` answers with.
        fail_call: The ``tools/call`` (1-based) whose POST is answered with ``fail_status``
            instead of ``202`` (its answer never comes), or 0 for none.
        fail_status: That status line (``"500 Internal Server Error"``).
        requests: Every request received: ``(method, target, headers)``.
    """

    url: str = ""
    origin: str = ""
    endpoint: str = "/messages"
    result_bytes: int = 16
    fail_call: int = 0
    fail_status: str = "500 Internal Server Error"
    calls: int = 0
    requests: list[tuple[str, str, dict[str, str]]] = attrs.field(factory=list)
    _sessions: dict[str, trio.MemorySendChannel[bytes]] = attrs.field(factory=dict, repr=False)

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to one client message, or None (a notification)."""
        method, rpc_id = message.get("method"), message.get("id")
        if rpc_id is None or method is None:
            return None
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": message.get("params", {}).get("protocolVersion", "2024-11-05"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-legacy-sse", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "big", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "x" * self.result_bytes}]}
        elif method == "ping":
            result = {}
        else:
            return {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32601, "message": f"no {method}"}}
        return {"jsonrpc": "2.0", "id": rpc_id, "result": result}

    async def handle(self, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        while (request := await read_request(stream, buffer)) is not None:
            method, target, headers, body = request
            self.requests.append((method, target, headers))
            path, _, query = target.partition("?")
            if method == "GET" and path == "/sse":
                await self._stream(stream)
                return
            session = self._sessions.get(query.removeprefix("session_id="))
            if method != "POST" or session is None:
                await stream.send_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            message = json.loads(body)
            if message.get("method") == "tools/call":
                self.calls += 1
                if self.calls == self.fail_call:
                    await stream.send_all(f"HTTP/1.1 {self.fail_status}\r\nContent-Length: 0\r\n\r\n".encode())
                    continue
            await stream.send_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
            answer = self.answer(message)
            if answer is not None:
                data = json.dumps(answer).encode()
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await session.send(b"event: message\r\ndata: " + data + b"\r\n\r\n")

    async def _stream(self, stream: trio.abc.Stream) -> None:
        session_id = str(len(self._sessions) + 1)
        sender, receiver = trio.open_memory_channel[bytes](16)
        self._sessions[session_id] = sender
        endpoint = f"{self.endpoint}?session_id={session_id}"
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\r\n"
            + f"event: endpoint\r\ndata: {endpoint}\r\n\r\n".encode()
        )
        try:
            async for event in receiver:
                await stream.send_all(event)
        finally:
            del self._sessions[session_id]
            sender.close()


@contextlib.asynccontextmanager
async def serve_legacy_sse(
    *, endpoint: str = "/messages", result_bytes: int = 16, fail_call: int = 0
) -> AsyncIterator[LegacySseServer]:
    """Serve legacy SSE MCP on 127.0.0.1 for the length of the block.

    Args:
        endpoint: The ``endpoint`` event's URL (a ``session_id`` query is added).
        result_bytes: Size of the text every ``tools/call`` answers with.
        fail_call: Answer the POST of this ``tools/call`` (1-based) with HTTP 500; 0 for none.
    """
    server = LegacySseServer(endpoint=endpoint, result_bytes=result_bytes, fail_call=fail_call)
    async with serve_loopback(server.handle) as port:
        server.origin = f"http://127.0.0.1:{port}"
        server.url = f"{server.origin}/sse"
        yield server
