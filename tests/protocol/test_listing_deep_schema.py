"""A tool whose inputSchema nests as deep as an SDK server can send: the connection and its siblings live."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
import trio
from mcp.server.mcpserver import MCPServer
from testkit import text_of

from mcp_actors import events
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.testing.hostile.deep_schema_tool import deep_schema


@functools.cache
def deepest_sendable() -> int:
    """The deepest schema an SDK server still serializes in its ``tools/list`` result (pydantic's limit)."""
    for depth in range(300, 0, -1):
        tool = types.Tool(name="deep", input_schema=deep_schema(depth))
        try:
            types.ListToolsResult(tools=[tool]).model_dump(by_alias=True, mode="json", exclude_none=True)
        except ValueError:
            continue
        return depth
    raise AssertionError("no depth serializes")


def deep_server() -> MCPServer[Any]:
    """The SDK's high-level server with ``echo``, and ``deep`` added to its listing as deep as it can send."""
    server: MCPServer[Any] = MCPServer("deep")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    plain = server.list_tools

    async def list_tools() -> list[types.Tool]:
        return [*await plain(), types.Tool(name="deep", input_schema=deep_schema(deepest_sendable()))]

    server.list_tools = list_tools  # type: ignore[method-assign]
    return server


@asynccontextmanager
async def connected() -> AsyncIterator[tuple[ConnectionHandle, events.Subscription]]:
    """A connected handle to a fresh deep-schema server, in memory, and the connection's events."""
    settings = ConnectionSettings(
        server_id="id-deep",
        server_name="deep",
        transport=MemoryParams(server=deep_server, raise_exceptions=False),
        ping_interval=0,
    )
    bus = events.EventBus()
    sub = bus.subscribe(buffer=1000)
    handle, start = open_connection(settings, bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        yield handle, sub
        await handle.aclose()


async def test_a_listing_as_deep_as_the_server_can_send_keeps_the_connection() -> None:
    """Both tools are listed, ``echo`` answers, and the connection never went down on the way."""
    async with connected() as (handle, sub):
        with trio.fail_after(10):
            tools = await handle.list_tools()
            assert [tool.name for tool in tools] == ["echo", "deep"]
            assert text_of(await handle.call_tool("echo", {"text": "sibling"})) == "sibling"
        states = []
        while True:
            try:
                event = sub.receive_nowait()
            except trio.WouldBlock:
                break
            states.append(event.data.get("state"))
        assert "error" not in states, states
