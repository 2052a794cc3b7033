"""A stdio server flooding its stdout with lines that are no JSON: a real process.

Lines that cannot be a message are skipped at read speed (no parse, no log line each),
logged once and then counted, and an answer behind them (a ping's too) still counts.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import attrs
import pytest
import trio
from testkit import running

from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._wire.transports import StdioParams
from supervisors import Backoff, Intensity

GARBAGE = [sys.executable, "-m", "mcp_actors.testing.hostile.wire_garbage"]
BOUND = 120.0


def garbage_settings(*flags: str, **overrides: Any) -> ConnectionSettings:
    settings = ConnectionSettings(
        server_id="id-noisy",
        server_name="noisy",
        transport=StdioParams(command=GARBAGE[0], args=(*GARBAGE[1:], *flags), close_grace=2.0, term_grace=1.0),
        connect_timeout=20.0,
        call_timeout=BOUND,
        ping_interval=0,
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
        intensity=Intensity(max_restarts=0, period=60),
    )
    return attrs.evolve(settings, **overrides)


async def test_garbage_is_skipped_at_read_speed_and_logged_once_then_counted(caplog: pytest.LogCaptureFixture) -> None:
    """300,000 non-JSON lines before an answer: skipped fast (lines/s measured), every one counted, few log lines."""
    caplog.set_level(logging.WARNING, logger="mcp_actors._wire.transports")
    count = 300_000
    async with running(garbage_settings()) as ([handle], _):
        await handle.connect()
        start = time.perf_counter()
        with trio.fail_after(BOUND):
            result = await handle.call_tool("garbage", {"lines": count})
        elapsed = time.perf_counter() - start
        live = handle._cell.live
        assert live is not None and live.link.garbage_lines == count
    assert result.structured_content == {"lines": count}
    rate = count / elapsed
    print(f"skipped {count} garbage lines in {elapsed:.2f}s: {rate:,.0f} lines/s")
    # On an idle machine well over a million a second; the floor leaves room for a loaded one.
    assert rate > 100_000, f"{rate:,.0f} lines/s"
    skipped = [r for r in caplog.records if r.name == "mcp_actors._wire.transports" and "skipped" in r.getMessage()]
    assert 1 <= len(skipped) <= 3, [r.getMessage() for r in skipped]
    assert "more are counted" in skipped[0].getMessage()


async def test_a_ping_answered_behind_a_flood_of_garbage_counts() -> None:
    """A server whose ping answer comes after 500,000 lines of noise is alive: no false death."""
    async with running(garbage_settings("--garbage-before-ping", "500000")) as ([handle], _):
        await handle.connect()
        with trio.fail_after(BOUND):
            rtt = await handle.health(timeout=5.0)
        assert rtt < 5.0
        assert handle.status().state is ConnectionState.CONNECTED and handle.status().error is None
