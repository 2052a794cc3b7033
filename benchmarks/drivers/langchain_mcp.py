"""Driver: ``langchain-mcp-adapters`` ``MultiServerMCPClient``, its default ``get_tools()`` path.

``get_tools()`` connects to every server concurrently, lists its tools and closes the
session again; each returned LangChain tool opens a *new* session (a new server process
for stdio) on every call. That is the library's documented default, and what these
numbers show. Tool names carry the server prefix (``tool_name_prefix=True``, ``s3_echo``)
because the servers are identical; tool errors raise (``handle_tool_errors=False``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness
from langchain_mcp_adapters.client import MultiServerMCPClient


class LangchainSession:
    def __init__(self, tools: dict[str, Any]) -> None:
        self.tools = tools

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        await self.tools[f"s{server}_{tool}"].ainvoke(arguments)

    async def tool_names(self, server: int) -> list[str]:
        prefix = f"s{server}_"
        return [name[len(prefix) :] for name in self.tools if name.startswith(prefix)]

    async def all_tool_names(self) -> list[list[str]]:
        """Every server's tools, from the one listing the library already made."""
        count = 1 + max(int(name.partition("_")[0][1:]) for name in self.tools)
        return [await self.tool_names(i) for i in range(count)]


class LangchainDriver:
    def prepare(self, servers: list[list[str]]) -> None:
        self.connections: dict[str, Any] = {
            f"s{i}": {"command": argv[0], "args": argv[1:], "transport": "stdio", "env": _harness.server_env()}
            for i, argv in enumerate(servers)
        }

    @contextlib.asynccontextmanager
    async def open(self, servers: list[list[str]]) -> AsyncIterator[LangchainSession]:
        client = MultiServerMCPClient(self.connections, tool_name_prefix=True, handle_tool_errors=False)
        tools = await client.get_tools()
        yield LangchainSession({t.name: t for t in tools})


if __name__ == "__main__":
    _harness.main(LangchainDriver())
