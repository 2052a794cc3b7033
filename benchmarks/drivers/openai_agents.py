"""Driver: ``openai-agents`` ``MCPServerStdio`` servers under an ``MCPServerManager``.

One ``MCPServerStdio`` per server (``cache_tools_list=True``), connected in parallel by
the manager (``connect_in_parallel=True``), as an agent's ``mcp_servers`` would be. Two
defaults are raised so that the benchmark measures speed rather than time-outs on a busy
two-core machine: the manager's connect timeout (10 s: twenty demo servers take longer
to import the SDK) and the session read timeout (5 s: a queue of 100 calls can wait
longer). A call is ``server.call_tool(name, args)``. A URL (a streamable-HTTP server the
harness started) gets an ``MCPServerStreamableHttp`` with the same settings.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness
from agents.mcp import MCPServerManager, MCPServerStdio, MCPServerStreamableHttp


class AgentsSession:
    def __init__(self, servers: list[Any]) -> None:
        self.servers = servers

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        result = await self.servers[server].call_tool(tool, arguments)
        if getattr(result, "is_error", getattr(result, "isError", False)):
            raise RuntimeError(f"tool error from {tool}")

    async def tool_names(self, server: int) -> list[str]:
        return [t.name for t in await self.servers[server].list_tools()]


class AgentsDriver:
    def prepare(self, servers: list[Any]) -> None:
        self.servers: list[Any] = [
            MCPServerStreamableHttp({"url": s}, cache_tools_list=True, name=f"s{i}", client_session_timeout_seconds=60)
            if isinstance(s, str)
            else MCPServerStdio(
                {"command": s[0], "args": s[1:], "env": _harness.server_env()},
                cache_tools_list=True,
                name=f"s{i}",
                client_session_timeout_seconds=60,
            )
            for i, s in enumerate(servers)
        ]

    @contextlib.asynccontextmanager
    async def open(self, servers: list[Any]) -> AsyncIterator[AgentsSession]:
        manager = MCPServerManager(
            self.servers,
            connect_in_parallel=True,
            strict=True,
            connect_timeout_seconds=300,
            cleanup_timeout_seconds=60,
        )
        async with manager:
            yield AgentsSession(self.servers)


if __name__ == "__main__":
    _harness.main(AgentsDriver())
