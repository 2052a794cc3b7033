"""Driver: the official SDK's ``ClientSessionGroup``.

Servers are connected one after another with ``connect_to_server``, as the SDK documents
it; identical servers expose identical tool names, so a ``component_name_hook`` prefixes
each with the server's index (``s3_echo``). A call is ``group.call_tool(name, args)``.
A URL (a streamable-HTTP server the harness started) is connected with
``StreamableHttpParameters``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import _harness
from mcp import StdioServerParameters
from mcp.client.session_group import ClientSessionGroup, StreamableHttpParameters


class GroupSession:
    def __init__(self, group: ClientSessionGroup) -> None:
        self.group = group

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        result = await self.group.call_tool(f"s{server}_{tool}", arguments)
        if result.is_error:
            raise RuntimeError(f"tool error from {tool}")

    async def tool_names(self, server: int) -> list[str]:
        # The group lists every server's tools once, on connect; this reads its index.
        prefix = f"s{server}_"
        return [name[len(prefix) :] for name in self.group.tools if name.startswith(prefix)]

    async def all_tool_names(self) -> list[list[str]]:
        """Every server's tools, from the one listing the library already made."""
        count = 1 + max(int(name.partition("_")[0][1:]) for name in self.group.tools)
        return [await self.tool_names(i) for i in range(count)]


class GroupDriver:
    def prepare(self, servers: list[Any]) -> None:
        self.params: list[Any] = [
            StreamableHttpParameters(url=s)
            if isinstance(s, str)
            else StdioServerParameters(command=s[0], args=s[1:], env=_harness.server_env())
            for s in servers
        ]

    @contextlib.asynccontextmanager
    async def open(self, servers: list[Any]) -> AsyncIterator[GroupSession]:
        current = [0]
        group = ClientSessionGroup(component_name_hook=lambda name, _info: f"s{current[0]}_{name}")
        async with group:
            for i, params in enumerate(self.params):
                current[0] = i
                await group.connect_to_server(params)
            yield GroupSession(group)


if __name__ == "__main__":
    _harness.main(GroupDriver())
