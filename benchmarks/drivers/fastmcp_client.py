"""Driver: ``fastmcp.Client`` with an ``mcpServers`` configuration.

One client for all servers, as fastmcp documents multi-server use: with two or more
servers it mounts them on an in-process proxy and prefixes tool names with the server's
key (``s3_echo``); with one server it talks to it directly. A call is
``client.call_tool(name, args)`` (a tool error raises). A URL (a streamable-HTTP server
the harness started) is configured as ``{"url": ..., "transport": "http"}``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness
from fastmcp import Client


class FastmcpSession:
    def __init__(self, client: Client[Any], count: int) -> None:
        self.client = client
        self.count = count

    def _name(self, server: int, tool: str) -> str:
        return tool if self.count == 1 else f"s{server}_{tool}"

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        await self.client.call_tool(self._name(server, tool), arguments)

    async def tool_names(self, server: int) -> list[str]:
        return (await self.all_tool_names())[server]

    async def all_tool_names(self) -> list[list[str]]:
        """One ``list_tools()`` covers every server (the proxy fans it out)."""
        tools = await self.client.list_tools()
        if self.count == 1:
            return [[t.name for t in tools]]
        found: list[list[str]] = [[] for _ in range(self.count)]
        for tool in tools:
            server, _, name = tool.name.partition("_")
            found[int(server[1:])].append(name)
        return found


class FastmcpDriver:
    def prepare(self, servers: list[Any]) -> None:
        self.config = {
            "mcpServers": {
                f"s{i}": {"url": s, "transport": "http"}
                if isinstance(s, str)
                else {"command": s[0], "args": s[1:], "env": _harness.server_env()}
                for i, s in enumerate(servers)
            }
        }

    @contextlib.asynccontextmanager
    async def open(self, servers: list[Any]) -> AsyncIterator[FastmcpSession]:
        async with Client(self.config) as client:
            yield FastmcpSession(client, len(servers))


if __name__ == "__main__":
    _harness.main(FastmcpDriver())
