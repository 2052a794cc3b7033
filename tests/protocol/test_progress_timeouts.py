"""resetTimeoutOnProgress and maxTotalTimeout on virtual time (in-memory server, exact bounds)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from mcp.server.mcpserver import Context, MCPServer

from mcp_actors import events
from mcp_actors._config.record import McpServerRecord
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.errors import ToolCallTimeout


def ticking_server() -> MCPServer[Any]:
    """A server whose ``tick(steps, every)`` reports progress every ``every`` seconds."""
    server: MCPServer[Any] = MCPServer("ticker")

    @server.tool()
    async def tick(steps: int, every: float, ctx: Context) -> str:
        for done in range(1, steps + 1):
            await trio.sleep(every)
            await ctx.report_progress(done, steps, f"step {done}")
        return f"ticked {steps}"

    return server


async def run_call(settings: ConnectionSettings, **call: Any) -> tuple[Any, float]:
    """Call ``tick`` once; return its outcome (result or exception) and the virtual seconds it took."""
    bus = events.EventBus()
    handle, start = open_connection(settings, bus)
    outcome: Any = None
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        await handle.connect()
        began = trio.current_time()
        try:
            outcome = await handle.call_tool("tick", **call)
        except ToolCallTimeout as exc:
            outcome = exc
        took = trio.current_time() - began
        await handle.aclose()
    return outcome, took


def settings(**overrides: Any) -> ConnectionSettings:
    fields: dict[str, Any] = {
        "server_id": "id-tick",
        "server_name": "ticker",
        "transport": MemoryParams(server=ticking_server),
        "ping_interval": 0,
    }
    fields.update(overrides)
    return ConnectionSettings(**fields)


async def test_without_reset_a_call_longer_than_its_timeout_times_out(autojump_clock: trio.abc.Clock) -> None:
    """Progress does not extend a call's timeout unless the record says so."""
    outcome, took = await run_call(settings(), arguments={"steps": 10, "every": 5.0}, timeout=20.0)
    assert isinstance(outcome, ToolCallTimeout)
    assert took == pytest.approx(20.0)


async def test_progress_resets_the_timeout(autojump_clock: trio.abc.Clock) -> None:
    """With resetTimeoutOnProgress a 50 s call with progress every 5 s finishes under a 20 s timeout."""
    seen: list[float] = []
    outcome, took = await run_call(
        settings(reset_timeout_on_progress=True),
        arguments={"steps": 10, "every": 5.0},
        timeout=20.0,
        on_progress=lambda progress, total, message: seen.append(progress),
    )
    assert "".join(item.text for item in outcome.content) == "ticked 10"
    assert seen == [float(n) for n in range(1, 11)]
    assert took == pytest.approx(50.0)


async def test_silence_after_progress_still_times_out(autojump_clock: trio.abc.Clock) -> None:
    """A reset timeout still fires when the gap between progress reports exceeds it."""
    outcome, took = await run_call(
        settings(reset_timeout_on_progress=True), arguments={"steps": 3, "every": 30.0}, timeout=20.0
    )
    assert isinstance(outcome, ToolCallTimeout)
    assert took == pytest.approx(20.0)


async def test_max_total_timeout_bounds_a_call_that_keeps_reporting(autojump_clock: trio.abc.Clock) -> None:
    """maxTotalTimeout ends a call however much progress it reports, with an error naming the bound."""
    outcome, took = await run_call(
        settings(reset_timeout_on_progress=True, max_total_timeout=60.0),
        arguments={"steps": 100, "every": 5.0},
        timeout=20.0,
    )
    assert isinstance(outcome, ToolCallTimeout)
    assert "maxTotalTimeout" in str(outcome) and outcome.timeout == 60.0
    assert took == pytest.approx(60.0)


def test_record_fields_round_trip_and_validate() -> None:
    """resetTimeoutOnProgress, maxTotalTimeout and logLevel are record config fields, validated by name."""
    from mcp_actors._config.codec import record_from_json_dict, record_to_json_dict
    from mcp_actors.errors import InvalidServerConfig

    entry = {
        "id": "mcp_1_a",
        "name": "s",
        "type": "stdio",
        "config": {"command": "x", "resetTimeoutOnProgress": True, "maxTotalTimeout": 90, "logLevel": "notice"},
    }
    record = record_from_json_dict(entry)
    assert isinstance(record, McpServerRecord)
    assert (record.config.reset_timeout_on_progress, record.config.max_total_timeout) == (True, 90.0)
    assert record.config.log_level == "notice"
    assert record_from_json_dict(record_to_json_dict(record)) == record
    with pytest.raises(InvalidServerConfig, match=r"config\.logLevel must be one of debug"):
        record_from_json_dict({**entry, "config": {"command": "x", "logLevel": "loud"}})
    with pytest.raises(InvalidServerConfig, match=r"config\.maxTotalTimeout"):
        record_from_json_dict({**entry, "config": {"command": "x", "maxTotalTimeout": 0}})
