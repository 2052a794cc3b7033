"""The floor for ``stress_ceiling``: a hand-written newline-JSON-RPC stdio client on trio.

No SDK, no validation, no supervision: it spawns the server, does the handshake, and keeps
``concurrency`` ``tools/call`` requests in flight for ``seconds``. What it achieves is what
one process on this machine can get out of the server at all; the stress tool is measured
against it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio


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
    proc = await trio.lowlevel.open_process(argv, stdin=-1, stdout=-1, stderr=-3)  # PIPE, PIPE, DEVNULL
    assert proc.stdin is not None and proc.stdout is not None
    waiting: dict[int, trio.Event] = {}
    next_id = 0
    done = 0
    send_lock = trio.Lock()

    async def send(message: dict[str, Any]) -> None:
        async with send_lock:
            await proc.stdin.send_all(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]

    async def request(method: str, params: dict[str, Any]) -> None:
        nonlocal next_id
        next_id += 1
        waiting[next_id] = event = trio.Event()
        await send({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
        await event.wait()

    async def reader() -> None:
        buffer = b""
        async for chunk in proc.stdout:  # type: ignore[union-attr]
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if "id" in message and message["id"] in waiting:
                    waiting.pop(message["id"]).set()

    async def user(deadline: float) -> None:
        nonlocal done
        while trio.current_time() < deadline:
            sent = trio.current_time()
            await request("tools/call", {"name": tool, "arguments": arguments})
            if latencies is not None:
                latencies.append(trio.current_time() - sent)
            done += 1

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            info = {"name": "floor", "version": "0"}
            await request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info})
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            start = trio.current_time()
            async with trio.open_nursery() as users:
                for _ in range(concurrency):
                    users.start_soon(user, start + seconds)
            elapsed = trio.current_time() - start
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await proc.stdin.aclose()
            with trio.move_on_after(5):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    return done / elapsed


def floor_rate_sync(argv: list[str], tool: str, arguments: dict[str, Any], concurrency: int, seconds: float) -> float:
    """:func:`floor_rate` as a process entry point (for trio-parallel)."""
    return trio.run(lambda: floor_rate(argv, tool=tool, arguments=arguments, concurrency=concurrency, seconds=seconds))


if __name__ == "__main__":
    fault = [sys.executable, "-m", "mcp_actors.testing.fault_server"]
    rate = trio.run(lambda: floor_rate(fault, tool="echo", arguments={"text": "x"}, concurrency=32, seconds=3))
    print(f"{rate:.0f} calls/s")
