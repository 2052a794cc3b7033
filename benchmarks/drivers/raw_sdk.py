"""Driver: the official SDK's ``mcp.Client``, by hand: the floor.

One ``mcp.Client(StdioServerParameters(...))`` per server, each held open by a task of its
own (anyio cancel scopes must be entered and exited by the same task), all connected
concurrently; a call is ``client.call_tool``. This is what a careful hand-written client
costs, with no registry, cache or supervision: the number every other contender is
compared to. Runs on trio or asyncio (the job says which). The handshake is the classic
``initialize`` (``mode="legacy"``), the one every other contender uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness
import anyio
from mcp import Client, StdioServerParameters


class RawSession:
    def __init__(self, clients: list[Client]) -> None:
        self.clients = clients

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        result = await self.clients[server].call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(f"tool error from {tool}")

    async def tool_names(self, server: int) -> list[str]:
        return [t.name for t in (await self.clients[server].list_tools()).tools]


class RawDriver:
    mode = "legacy"

    def prepare(self, servers: list[Any]) -> None:
        # A URL (the harness started an HTTP server) is passed as is: streamable HTTP.
        self.params: list[Any] = [
            s if isinstance(s, str) else StdioServerParameters(command=s[0], args=s[1:], env=_harness.server_env())
            for s in servers
        ]

    @contextlib.asynccontextmanager
    async def open(self, servers: list[Any]) -> AsyncIterator[RawSession]:
        count = len(servers)
        clients: list[Any] = [None] * count
        ready = anyio.Event()
        stop = anyio.Event()
        connected = [0]

        async def hold(i: int) -> None:
            async with Client(self.params[i], mode=self.mode) as client:
                clients[i] = client
                connected[0] += 1
                if connected[0] == count:
                    ready.set()
                await stop.wait()

        async with anyio.create_task_group() as tg:
            for i in range(count):
                tg.start_soon(hold, i)
            await ready.wait()
            try:
                yield RawSession(clients)
            finally:
                stop.set()


if __name__ == "__main__":
    _harness.main(RawDriver())
