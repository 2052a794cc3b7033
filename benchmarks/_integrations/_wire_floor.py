"""The wire floor on asyncio: a hand-written newline-JSON-RPC stdio client, nothing else.

What any client on the caller's asyncio loop pays per call to the light server at the
least: the pipe both ways, the server's own work and the wake-ups of two processes. No
SDK, no validation, no supervision: spawn the server, shake hands, keep one reader task
and a dict of pending futures (:mod:`benchmarks.stress_floor` is the same client on trio).

A framework module measures it as its ``wire_floor`` contender, through the framework's own
tool layer, so :mod:`benchmarks.integrations` can say whether a goal over the framework's own
client is within reach of any client on this machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

__all__ = ["WireFloorClient", "echo_tool", "open_wire_floor"]


class WireFloorClient:
    """One stdio server driven by hand: ``request`` writes a line and awaits the matching answer."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line (the transport buffers; a line is never split)."""
        self._stdin.write(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and return its ``result``; raise ``RuntimeError`` on an error answer."""
        self._next_id += 1
        request_id = self._next_id
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        try:
            self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            message = await answer
        finally:
            self._pending.pop(request_id, None)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message.get("result")

    async def reader(self) -> None:
        """Route every answer line to its waiting request; fail them all at end of stream."""
        try:
            while line := await self._stdout.readline():
                if not line.strip():
                    continue
                message = json.loads(line)
                answer = self._pending.get(message.get("id"))
                if answer is not None and not answer.done():
                    answer.set_result(message)
        finally:
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(RuntimeError("the server has gone away"))


@contextlib.asynccontextmanager
async def open_wire_floor(argv: list[str]) -> AsyncIterator[WireFloorClient]:
    """Spawn the stdio server ``argv``, shake hands, yield the client; close and reap it on exit."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    client = WireFloorClient(proc)
    reader = asyncio.create_task(client.reader())
    try:
        info = {"name": "wire-floor", "version": "0"}
        await client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info})
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield client
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def echo_tool(client: WireFloorClient) -> Callable[[str], Awaitable[str]]:
    """``echo(text)`` on the light server through ``client``, as the plain function a framework's tool wraps."""

    async def echo(text: str) -> str:
        """Return the given text unchanged."""
        result = await client.request("tools/call", {"name": "echo", "arguments": {"text": text}})
        return str(result["content"][0]["text"])

    return echo
