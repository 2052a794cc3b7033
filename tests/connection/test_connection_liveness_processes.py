"""Liveness against real processes: a server blocked in its only thread, and a SIGSTOPped one.

Both are alive as far as the kernel can tell (the pidfd reports no exit), and both stop
answering pings. The first is busy with a call inside its timeout and must be left alone;
the second owes nothing it will ever answer and must be declared dead, at once when a call
to it times out. The rule itself is tested on virtual time in test_connection_liveness.py.
"""

from __future__ import annotations

import os
import signal
import sys

import attrs
import pytest
import trio
from testkit import drain, running, state_is, text_of, wait_event

from mcp_actors import events
from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._wire.transports import StdioParams
from mcp_actors.errors import ToolCallTimeout
from supervisors import Backoff

FAST_BACKOFF = Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0)
BOUND = 30.0
"""Generous bound for anything expected within a second on a busy machine."""


def blocking_loop_settings(**overrides: object) -> ConnectionSettings:
    base = ConnectionSettings(
        server_id="id-blocking",
        server_name="blocking",
        transport=StdioParams(
            command=sys.executable,
            args=("-m", "mcp_actors.testing.hostile.blocking_loop"),
            close_grace=1.0,
            term_grace=0.5,
        ),
        connect_timeout=20.0,
        call_timeout=30.0,
        backoff=FAST_BACKOFF,
    )
    return attrs.evolve(base, **overrides)


def error_states(sub: events.Subscription) -> list[str]:
    return [e.data["error"] for e in drain(sub) if e.type == events.CONNECTION_STATE and e.data["state"] == "error"]


async def test_a_server_blocked_in_a_call_survives_its_missed_pings() -> None:
    """A tool blocks the server's only thread for 3 s; pings every 0.3 s, bounded by 0.5 s: it answers, same process."""
    settings = blocking_loop_settings(ping_interval=0.3, ping_timeout=0.5)
    async with running(settings) as ([handle], sub):
        await handle.connect()
        pid = handle.status().pid
        result = await handle.call_tool("block", {"seconds": 3})
        assert text_of(result) == "blocked 3 s"
        await trio.sleep(1.0)  # a few more pings, answered
        assert handle.status().state is ConnectionState.CONNECTED
        assert (handle.status().pid, handle.status().restarts, error_states(sub)) == (pid, 0, [])


async def test_a_call_timeout_on_a_stopped_server_declares_it_dead_at_once() -> None:
    """SIGSTOP, then a call times out: error within the ping timeout (pings every 60 s), then restarted."""
    settings = blocking_loop_settings(ping_interval=60.0, ping_timeout=1.0)
    async with running(settings) as ([handle], sub):
        await handle.list_tools()  # the call's own look-up of its tool is not what times out here
        pid = handle.status().pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(ToolCallTimeout):
                await handle.call_tool("echo", {"text": "x"}, timeout=1.0)
            timed_out = trio.current_time()
            event = await wait_event(sub, state_is("error"), timeout=BOUND)
            assert trio.current_time() - timed_out < 1.0 + 5.0  # the ping bound (and a loaded machine), not 60 s
            assert "did not answer a ping within 1s" in event.data["error"]
            await wait_event(sub, state_is("connected"), timeout=BOUND)
            assert handle.status().pid not in (None, pid)
            assert text_of(await handle.call_tool("echo", {"text": "next"})) == "next"
        finally:
            try:
                os.kill(pid, signal.SIGCONT)  # if it outlived the kill ladder somehow; a no-op once reaped
            except ProcessLookupError:
                pass
