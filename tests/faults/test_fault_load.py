"""Faults under load: a server killed under 500 concurrent calls, a client cancelling half of its
calls, and many broken servers at once next to healthy ones."""

from __future__ import annotations

import os
import signal

import trio
from fault_bed import FAULT_CONFIG, FaultBed, text_of, wait_state

from mcp_actors.errors import (
    CommandNotFound,
    ConnectionFailed,
    ConnectTimeout,
    ServerConnectionLost,
    ToolCallTimeout,
)

LOAD_BOUND = 60.0
"""Every one of the many calls below must end within this (a restart and its backoff included)."""


async def test_500_concurrent_calls_while_the_server_is_killed_and_restarted(bed: FaultBed) -> None:
    """500 calls around a SIGKILL end typed or are served by the restarted process; none hangs."""
    await bed.add_stdio("busy", "--hang-tool", "sleep", callTimeout=LOAD_BOUND)
    svc = bed.service
    await svc.connect("busy")
    first_pid = svc.status("busy").pid
    assert first_pid is not None
    sub = svc.subscribe()
    hung: list[object] = []
    echoed: dict[int, object] = {}

    async def hung_call() -> None:
        hung.append(await bed.settle(svc.call_tool, "busy", "sleep", {"seconds": 1}, bound=LOAD_BOUND))

    async def echo_call(i: int) -> None:
        echoed[i] = await bed.settle(svc.call_tool, "busy", "echo", {"text": f"n{i}"}, bound=LOAD_BOUND)

    async with trio.open_nursery() as nursery:
        for _ in range(250):
            nursery.start_soon(hung_call)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert svc.status("busy").calls_in_flight == 250
        os.kill(first_pid, signal.SIGKILL)
        for i in range(125):  # racing the death: the runtime has not noticed it yet
            nursery.start_soon(echo_call, i)
        await wait_state(sub, "busy", "error")
        for i in range(125, 250):  # during the restart: queued for the next process
            nursery.start_soon(echo_call, i)
        await bed.sibling_serves("during the restart")
    assert len(hung) == 250 and all(isinstance(o, ServerConnectionLost) for o in hung), {type(o) for o in hung}
    assert "SIGKILL" in str(hung[0])
    assert len(echoed) == 250
    for i in range(125):
        outcome = echoed[i]
        assert isinstance(outcome, ServerConnectionLost) or text_of(outcome) == f"n{i}", (i, outcome)
    for i in range(125, 250):
        outcome = echoed[i]
        assert not isinstance(outcome, Exception) and text_of(outcome) == f"n{i}", (i, outcome)
    status = svc.status("busy")
    assert status.pid not in (None, first_pid) and status.restarts >= 1 and status.calls_in_flight == 0
    # Nothing was replayed: the new process saw no sleep call (it would have said "hanging call").
    assert not [line for line in bed.service.stderr_tail("busy", 200) if "hanging call" in line]
    await bed.survived()


async def test_client_cancels_half_of_its_calls(bed: FaultBed) -> None:
    """Of 100 calls in flight, the 50 cancelled end at once and are cancelled on the server; 50 complete."""
    await bed.add_stdio("patient", callTimeout=LOAD_BOUND)
    svc = bed.service
    await svc.connect("patient")
    scopes = [trio.CancelScope() for _ in range(100)]
    outcomes: dict[int, object] = {}

    async def call(i: int) -> None:
        with scopes[i]:
            outcomes[i] = await bed.settle(svc.call_tool, "patient", "sleep", {"seconds": 3}, bound=LOAD_BOUND)

    async with trio.open_nursery() as nursery:
        for i in range(100):
            nursery.start_soon(call, i)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert svc.status("patient").calls_in_flight == 100 and not outcomes
        for scope in scopes[::2]:
            scope.cancel()
        cancelled_at = trio.current_time()
        # The server hears of every cancelled call, long before the others finish.
        await bed.wait_stderr("patient", "fault: cancelled", count=50)
        assert trio.current_time() - cancelled_at < 3.0
        assert svc.status("patient").calls_in_flight == 50
    assert all(scopes[i].cancelled_caught and i not in outcomes for i in range(0, 100, 2))
    assert sorted(outcomes) == list(range(1, 100, 2))
    assert all(text_of(o) == "slept 3 s" for o in outcomes.values()), outcomes
    assert svc.status("patient").calls_in_flight == 0
    assert text_of(await svc.call_tool("patient", "echo", {"text": "still"})) == "still"
    await bed.survived()


async def test_many_broken_servers_at_once(bed: FaultBed) -> None:
    """Six broken servers at once: each failure is reported by name and typed; the healthy ones serve."""
    await bed.add_stdio("dies", "--exit-at-start", "5")
    await bed.add_stdio("slow", "--slow-start", "60", connectTimeout=0.5)
    await bed.add_stdio("mute", "--close-stdout")
    await bed.add_stdio("hangs", "--hang-tool", "echo")
    await bed.add_stdio("crashy", "--crash-on-call", "1")
    await bed.add({"name": "ghost", "type": "stdio", "config": {"command": "no-such-command-4711", **FAULT_CONFIG}})
    await bed.add_stdio("fine")
    svc = bed.service
    listing = await bed.settle(svc.list_tools_detailed, bound=LOAD_BOUND)
    assert not isinstance(listing, Exception), listing
    assert {"dies", "slow", "mute", "ghost"} <= set(listing.failures) <= {"dies", "slow", "mute", "ghost", "crashy"}
    assert isinstance(listing.failures["slow"], ConnectTimeout | ConnectionFailed)
    assert isinstance(listing.failures["ghost"], CommandNotFound | ConnectionFailed)
    listed = {t.server_name for t in listing.tools}
    assert {"demo", "fine", "hangs"} <= listed

    outcomes: dict[str, object] = {}

    async def call(server: str) -> None:
        outcomes[server] = await bed.settle(
            svc.call_tool, server, "echo", {"text": server}, bound=LOAD_BOUND, timeout=1.0
        )

    async with trio.open_nursery() as nursery:
        for server in ("dies", "slow", "mute", "hangs", "crashy", "ghost", "fine", "demo"):
            nursery.start_soon(call, server)
    for server in ("dies", "slow", "mute", "crashy", "ghost"):
        assert isinstance(outcomes[server], ConnectionFailed), (server, outcomes[server])
    assert isinstance(outcomes["hangs"], ToolCallTimeout), outcomes["hangs"]
    assert text_of(outcomes["fine"]) == "fine" and text_of(outcomes["demo"]) == "demo"
    await bed.survived()
