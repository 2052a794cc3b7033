"""Driver: the floor, a hand-written newline-JSON-RPC client (``benchmarks/stress_floor.py``).

One :class:`~benchmarks.stress_floor.FloorClient` per stdio server (a
:class:`~benchmarks.stress_floor.FloorHttpClient` per streamable-HTTP URL): stdlib ``json``, trio, one
reader task, a dict of pending requests. No SDK, no validation, no supervision: the
least a Python client on trio can spend per call, the line every other contender is
read against in ``hot_path``. Runs with our interpreter on trio.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _harness

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stress_floor import FloorClient, FloorHttpClient, open_floor, open_floor_http


class FloorSession:
    def __init__(self, clients: list[FloorClient | FloorHttpClient]) -> None:
        self.clients = clients

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        result = await self.clients[server].request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"tool error from {tool}")

    async def tool_names(self, server: int) -> list[str]:
        result = await self.clients[server].request("tools/list", {})
        return [t["name"] for t in result["tools"]]


class FloorDriver:
    def prepare(self, servers: list[list[str]]) -> None:
        pass

    @contextlib.asynccontextmanager
    async def open(self, servers: list[Any]) -> AsyncIterator[FloorSession]:
        async with contextlib.AsyncExitStack() as stack:
            clients: list[FloorClient | FloorHttpClient] = [
                await stack.enter_async_context(open_floor_http(s) if isinstance(s, str) else open_floor(s))
                for s in servers
            ]
            yield FloorSession(clients)


if __name__ == "__main__":
    _harness.main(FloorDriver())
