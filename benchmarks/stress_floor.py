"""The floor: a hand-written newline-JSON-RPC stdio client on trio.

No SDK, no validation, no supervision: it spawns the server, does the handshake, and
keeps requests in flight with one reader task and a dict of pending requests. What it
achieves is what one process on this machine can get out of the server at all; the
stress tool (``stress_ceiling``) and the hot-path benchmark (``hot_path``, through
``drivers/floor.py``) are measured against it.

Standard library + trio only, so a driver script can import it by path.
"""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import trio

__all__ = [
    "FloorClient",
    "FloorError",
    "FloorHttpClient",
    "floor_rate",
    "floor_rate_sync",
    "open_floor",
    "open_floor_http",
]


class FloorError(Exception):
    """The server answered with a JSON-RPC error, or went away with requests pending."""


class FloorClient:
    """One stdio server, driven by hand: ``request`` sends and waits for the matching answer."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._pending: dict[int, list[Any]] = {}
        self._next_id = 0
        self._send_lock = trio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line (a lock keeps concurrent lines whole)."""
        async with self._send_lock:
            await self._stdin.send_all(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and return its ``result`` (raise :class:`FloorError` on an error)."""
        if self._closed:
            raise FloorError("the server has gone away")
        self._next_id += 1
        request_id = self._next_id
        slot: list[Any] = [trio.Event(), None]
        self._pending[request_id] = slot
        try:
            await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            await slot[0].wait()
        finally:
            self._pending.pop(request_id, None)
        message = slot[1]
        if message is None:
            raise FloorError("the server has gone away")
        if "error" in message:
            raise FloorError(str(message["error"]))
        return message.get("result")

    async def reader(self) -> None:
        """Route every answer line to its waiting request; fail them all at end of stream."""
        buffer = b""
        try:
            async for chunk in self._stdout:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    slot = self._pending.get(message.get("id"))
                    if slot is not None:
                        slot[1] = message
                        slot[0].set()
        finally:
            self._closed = True
            for slot in self._pending.values():
                slot[0].set()


@contextlib.asynccontextmanager
async def open_floor(argv: list[str]) -> AsyncIterator[FloorClient]:
    """Spawn the stdio server ``argv``, do the handshake, yield the client; close it on exit."""
    proc = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1, stderr=-3)  # PIPE, PIPE, DEVNULL
    client = FloorClient(proc)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.reader)
            info = {"name": "floor", "version": "0"}
            await client.request(
                "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
            )
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield client
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            assert proc.stdin is not None
            await proc.stdin.aclose()
            with trio.move_on_after(5):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


class FloorHttpClient:
    """One streamable-HTTP server, driven by hand: HTTP/1.1 keep-alive POSTs over a pool of connections.

    A request takes an idle connection (or opens one), writes the POST, reads the status
    line, the headers and a ``Content-Length`` body, and puts the connection back: as many
    connections as calls in flight, no SSE (the reference server answers in JSON).
    """

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._path = parts.path or "/"
        self._idle: list[tuple[trio.SocketStream, bytearray]] = []
        self._session = ""
        self._next_id = 0

    async def _exchange(self, body: bytes) -> tuple[int, bytes]:
        if self._idle:
            stream, buffer = self._idle.pop()
        else:
            stream, buffer = await trio.open_tcp_stream(self._host, self._port), bytearray()
        session = f"Mcp-Session-Id: {self._session}\r\n" if self._session else ""
        head = (
            f"POST {self._path} HTTP/1.1\r\nHost: {self._host}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n{session}Content-Length: {len(body)}\r\n\r\n"
        )
        await stream.send_all(head.encode() + body)
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            chunk = await stream.receive_some()
            if not chunk:
                raise FloorError("the server closed the connection")
            buffer += chunk
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        del buffer[: end + 4]
        status, length = int(lines[0].split()[1]), 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "mcp-session-id":
                self._session = value.strip()
        while len(buffer) < length:
            chunk = await stream.receive_some()
            if not chunk:
                raise FloorError("the server closed the connection")
            buffer += chunk
        payload = bytes(buffer[:length])
        del buffer[:length]
        self._idle.append((stream, buffer))
        return status, payload

    async def send(self, message: dict[str, Any]) -> None:
        """POST a notification (no answer but the status)."""
        await self._exchange(json.dumps(message).encode())

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """POST a request and return its ``result`` (raise :class:`FloorError` on an error)."""
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        status, payload = await self._exchange(json.dumps(message).encode())
        if status != 200:
            raise FloorError(f"http status {status}")
        answer = json.loads(payload)
        if "error" in answer:
            raise FloorError(str(answer["error"]))
        return answer.get("result")

    async def aclose(self) -> None:
        """Close every pooled connection."""
        while self._idle:
            stream, _ = self._idle.pop()
            await stream.aclose()


@contextlib.asynccontextmanager
async def open_floor_http(url: str) -> AsyncIterator[FloorHttpClient]:
    """Handshake with the streamable-HTTP server at ``url`` and yield the client; close on exit."""
    client = FloorHttpClient(url)
    try:
        info = {"name": "floor", "version": "0"}
        await client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info})
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield client
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()


async def floor_rate(
    argv: list[str],
    *,
    tool: str,
    arguments: dict[str, Any],
    concurrency: int,
    seconds: float,
    latencies: list[float] | None = None,
) -> float:
    """Calls/s one raw client completes against the stdio server ``argv`` (latencies into ``latencies``)."""
    done = 0
    params = {"name": tool, "arguments": arguments}
    async with open_floor(argv) as client:

        async def user(deadline: float) -> None:
            nonlocal done
            while trio.current_time() < deadline:
                sent = trio.current_time()
                await client.request("tools/call", params)
                if latencies is not None:
                    latencies.append(trio.current_time() - sent)
                done += 1

        start = trio.current_time()
        async with trio.open_nursery() as users:
            for _ in range(concurrency):
                users.start_soon(user, start + seconds)
        elapsed = trio.current_time() - start
    return done / elapsed


def floor_rate_sync(argv: list[str], tool: str, arguments: dict[str, Any], concurrency: int, seconds: float) -> float:
    """:func:`floor_rate` as a process entry point (for trio-parallel)."""
    return trio.run(lambda: floor_rate(argv, tool=tool, arguments=arguments, concurrency=concurrency, seconds=seconds))


if __name__ == "__main__":
    fault = [sys.executable, "-m", "mcp_actors.testing.fault_server"]
    rate = trio.run(lambda: floor_rate(fault, tool="echo", arguments={"text": "x"}, concurrency=32, seconds=3))
    print(f"{rate:.0f} calls/s")
