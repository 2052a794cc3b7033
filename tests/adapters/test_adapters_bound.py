"""The adapters' bound when it is handed down as the call's own timeout (no cancel scope of theirs).

A call that goes straight to its request (connected, tool listed, no approval step, no
timeout that progress resets) is bounded by the request's own timeout, set to the
adapter's; every other call keeps the adapter's scope around every step. These tests pin
the line between the two: the bound holds on both sides, the server hears of a call
given up, and the predicate says "straight" only when nothing is awaited before the request.
Virtual time on in-memory servers (exact bounds, no processes) where bounds are measured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.server.mcpserver import Context, MCPServer
from testkit import runtime_at

from mcp_actors import events
from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.adapters import DirectMcpConnection, DirectMcpToolAdapter, McpToolAdapter, load_mcp_tools
from mcp_actors.errors import ToolCallTimeout
from mcp_actors.testing import fault_server_command
from mcp_actors.testing.memory import InMemoryServers


class Cancelled:
    """What the server saw: an event set when a tick was cancelled there."""

    def __init__(self) -> None:
        self.event = trio.Event()


def ticking_server(cancelled: Cancelled) -> MCPServer[Any]:
    """``tick(steps, every)`` reports progress every ``every`` seconds; a cancelled tick sets the event."""
    server: MCPServer[Any] = MCPServer("ticker")

    @server.tool()
    async def tick(steps: int, every: float, ctx: Context) -> str:
        try:
            for done in range(1, steps + 1):
                await trio.sleep(every)
                await ctx.report_progress(done, steps, f"step {done}")
        except trio.Cancelled:
            cancelled.event.set()
            raise
        return f"ticked {steps}"

    return server


@asynccontextmanager
async def direct_tick(cancelled: Cancelled, **overrides: Any) -> AsyncIterator[DirectMcpConnection]:
    """A connected direct connection to the ticking server (its tools not listed yet)."""
    settings = ConnectionSettings(
        server_id="id-tick",
        server_name="ticker",
        transport=MemoryParams(server=lambda: ticking_server(cancelled)),
        ping_interval=0,
        **overrides,
    )
    handle, start = open_connection(settings, events.EventBus())
    record = McpServerRecord(name="ticker", type=ServerType.STDIO, config=ServerConfig(command="unused"))
    connection = DirectMcpConnection(record, handle)
    async with trio.open_nursery() as nursery:
        await nursery.start(connection._host, start)
        await handle.connect()
        try:
            yield connection
        finally:
            await connection.aclose()


async def tool_of(connection: DirectMcpConnection, timeout: float) -> DirectMcpToolAdapter:
    [tick] = await connection.handle.list_tools()
    return DirectMcpToolAdapter("ticker__tick", tick, connection, timeout=timeout)


async def timed_out_after(adapter: DirectMcpToolAdapter) -> tuple[ToolCallTimeout, float]:
    start = trio.current_time()
    with pytest.raises(ToolCallTimeout) as info:
        await adapter.call({"steps": 100, "every": 5.0})
    return info.value, trio.current_time() - start


async def test_a_straight_call_is_bounded_by_the_adapter_and_cancelled_on_the_server(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Connected and listed: the call goes straight; at the adapter's bound it fails typed and the server cancels."""
    cancelled = Cancelled()
    async with direct_tick(cancelled) as connection:
        assert not connection.handle.call_goes_straight("tick")  # not listed on this connection yet
        adapter = await tool_of(connection, timeout=20.0)
        assert connection.handle.call_goes_straight("tick")
        error, took = await timed_out_after(adapter)
        assert took == pytest.approx(20.0)
        assert error.timeout == 20.0 and error.tool == "tick" and error.server == "ticker"
        assert str(error).startswith("tool 'ticker__tick' (tool 'tick' of server 'ticker') did not finish within 20s")
        with trio.fail_after(10):
            await cancelled.event.wait()
        result = await adapter.call({"steps": 1, "every": 0.0})
        assert [item.text for item in result.content if item.type == "text"] == ["ticked 1"]


async def test_progress_that_resets_the_servers_timeout_does_not_stretch_the_adapters_bound(
    autojump_clock: trio.abc.Clock,
) -> None:
    """resetTimeoutOnProgress: the call keeps the adapter's own scope, so the adapter's bound still holds."""
    cancelled = Cancelled()
    async with direct_tick(cancelled, reset_timeout_on_progress=True) as connection:
        adapter = await tool_of(connection, timeout=20.0)
        assert not connection.handle.call_goes_straight("tick")
        error, took = await timed_out_after(adapter)
        assert took == pytest.approx(20.0)
        assert error.timeout == 20.0


async def test_only_a_call_with_no_step_before_its_request_goes_straight(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """The registry's predicate: not before connecting, not under an approver unless trusted, not unknown."""
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        service = rt.service
        await service.add(
            {
                "name": "guarded",
                "type": "stdio",
                "config": {"command": fault_server_command()[0], "args": fault_server_command()[1:], "pingInterval": 0},
            }
        )
        record = service.get("guarded")
        assert not service.call_goes_straight(record.id, "echo")  # not connected
        loaded = await load_mcp_tools(service, ["guarded"])
        echo = next(tool for tool in loaded if tool.mcp_tool.name == "echo")
        assert service.call_goes_straight(record.id, "echo")
        assert not service.call_goes_straight("missing", "echo")

        async def approver(request: Any) -> bool:
            return True

        service.set_approver(approver)
        assert not service.call_goes_straight(record.id, "echo")
        await service.update("guarded", is_trusted=True)
        assert service.call_goes_straight(record.id, "echo")
        service.set_approver(None)
        assert await McpToolAdapter(echo.mcp_tool, service, timeout=5).execute({"text": "x"}) == "x"
