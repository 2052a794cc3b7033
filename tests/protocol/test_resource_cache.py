"""The resource-list cache on virtual time: hits, TTL expiry, list_changed and reconnect invalidation.

Its own rule (:data:`RESOURCE_CACHE_TTL`) applies when the server says nothing about its lists'
life: a 2025-11-25 session here. At 2026-07-28 the server's ``ttlMs`` rules instead
(``tests/protocol/test_list_caching.py``).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import trio
from mcp.server.mcpserver import Context, MCPServer

from mcp_actors import events
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import RESOURCE_CACHE_TTL, ConnectionSettings
from mcp_actors._wire.transports import MemoryParams

LISTINGS: list[int] = []


def counting_server() -> MCPServer[Any]:
    """A server that counts resources/list requests and can announce a list change."""
    server: MCPServer[Any] = MCPServer("res")

    @server.resource("mem://one", name="one")
    def one() -> str:
        return "1"

    plain = server.list_resources

    async def list_resources() -> Any:
        LISTINGS.append(1)
        return await plain()

    server.list_resources = list_resources  # type: ignore[method-assign]

    @server.tool()
    async def announce(ctx: Context) -> str:
        await ctx.session.send_notification(
            types.ResourceListChangedNotification(), related_request_id=ctx.request_context.request_id
        )
        return "announced"

    return server


async def test_resource_list_cache(autojump_clock: trio.abc.Clock) -> None:
    """A second listing is a hit; list_changed, the TTL and a reconnect each cause one new request."""
    LISTINGS.clear()
    bus = events.EventBus()
    sub = bus.subscribe()
    settings = ConnectionSettings(
        server_id="id-res",
        server_name="res",
        transport=MemoryParams(server=counting_server),
        ping_interval=0,
        negotiate="legacy",
    )
    handle, start = open_connection(settings, bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        first = await handle.list_resources()
        assert [str(r.uri) for r in first] == ["mem://one"]
        assert await handle.list_resources() == first
        assert len(LISTINGS) == 1
        await handle.call_tool("announce")
        async for event in sub:
            if event.type == events.RESOURCES_CHANGED:
                break
        await handle.list_resources()
        assert len(LISTINGS) == 2
        await trio.sleep(RESOURCE_CACHE_TTL + 1)
        await handle.list_resources()
        await handle.list_resources()
        assert len(LISTINGS) == 3
        await handle.reconnect()
        await handle.list_resources()
        assert len(LISTINGS) == 4
        await handle.aclose()
