"""Every fault of the fault server, under stdio and (where meaningful) streamable HTTP.

Not every fault has an HTTP variant: the stdout faults (garbage, a closed stdout) need a
pipe; a flooded stderr or a grandchild of an HTTP server belong to whoever started that
server (here ``serve_http``), not to the runtime; and a server that exits at start (or is
slow to start) is, seen over HTTP, nothing listening at its URL — that variant is here.
Variants of one fault share a runtime (one test), so the suite stays fast.
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import psutil
import pytest
import trio
from fault_bed import CALL_BOUND, FaultBed, Faulty, closed_port_url, faulty, text_of, wait_state

from mcp_actors._connection.status import ConnectionState
from mcp_actors.errors import ConnectionFailed, ConnectTimeout, ServerConnectionLost, ToolCallTimeout

FIFTY_MB = 50 * 1024 * 1024

BOTH = pytest.mark.parametrize("transport", ["stdio", "http"])


# ---------------------------------------------------------------------- start-up faults


async def test_exit_at_start_stdio(bed: FaultBed) -> None:
    """A server exiting at start fails each call with a typed error quoting its last words."""
    server = await bed.add_stdio("dies", "--exit-at-start", "7")
    for _ in range(2):
        outcome = await bed.settle(bed.service.call_tool, server.id, "echo", {"text": "x"}, bound=CALL_BOUND)
        assert isinstance(outcome, ConnectionFailed), outcome
        assert "fault: exiting at start with code 7" in outcome.stderr_tail, outcome
        await bed.sibling_serves()
    await bed.survived()


async def test_exit_at_start_http_nothing_listening(bed: FaultBed) -> None:
    """An HTTP server that is not listening fails each call with a typed error naming the address."""
    url = closed_port_url()
    await bed.add_http("absent", url)
    port = url.rsplit(":", 1)[1].split("/")[0]
    for _ in range(2):
        outcome = await bed.settle(bed.service.call_tool, "absent", "echo", {"text": "x"}, bound=CALL_BOUND)
        assert isinstance(outcome, ConnectionFailed), outcome
        # The reason names the address that refused, not our own clean-up.
        assert port in str(outcome) and "closed by the client" not in str(outcome), outcome
        await bed.sibling_serves()
    await bed.survived()


async def test_slow_start_beyond_connect_timeout(bed: FaultBed) -> None:
    """A server slower than connectTimeout fails with ConnectTimeout naming the bound, and is killed."""
    await bed.add_stdio("slow", "--slow-start", "60", connectTimeout=0.5)
    outcome = await bed.settle(bed.service.call_tool, "slow", "echo", {"text": "x"}, bound=CALL_BOUND)
    assert isinstance(outcome, ConnectTimeout), outcome
    assert "0.5s" in str(outcome)
    await bed.survived()


# ---------------------------------------------------------------------- faults during calls


async def test_crash_on_call_stdio(bed: FaultBed) -> None:
    """A crash mid-call (exit code 3 or 0) fails all calls in flight at once; the next call restarts it."""
    for exit_code in ("3", "0"):
        await crash_mid_call(bed, f"crashy-{exit_code}", exit_code)
    await bed.survived()


async def crash_mid_call(bed: FaultBed, name: str, exit_code: str) -> None:
    """Call 2 in flight when call 3 crashes the server: both fail at once; call 4 restarts it."""
    await bed.add_stdio(name, "--crash-on-call", "3", "--crash-exit-code", exit_code)
    svc = bed.service
    assert text_of(await svc.call_tool(name, "echo", {"text": "one"})) == "one"
    first_pid = svc.status(name).pid
    outcomes: list[object] = []

    async def call(tool: str, arguments: dict[str, Any]) -> None:
        outcomes.append(await bed.settle(svc.call_tool, name, tool, arguments, bound=CALL_BOUND))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "sleep", {"seconds": 60})
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        nursery.start_soon(call, "echo", {"text": "three"})
    assert len(outcomes) == 2 and all(isinstance(o, ServerConnectionLost) for o in outcomes), outcomes
    assert all("fault: crashing on call 3" in o.stderr_tail for o in outcomes)  # type: ignore[attr-defined]
    await bed.sibling_serves()
    again = await bed.settle(svc.call_tool, name, "echo", {"text": "again"}, bound=CALL_BOUND)
    assert not isinstance(again, Exception) and text_of(again) == "again", again
    status = svc.status(name)
    assert status.pid not in (None, first_pid) and status.restarts == 1


async def test_crash_on_call_http(bed: FaultBed) -> None:
    """An HTTP server dying mid-call fails that call typed, and later calls fail typed too."""
    async with faulty(bed, "http", "crashy", "--crash-on-call", "2") as server:
        assert text_of(await server.call("echo", {"text": "one"})) == "one"
        second = await server.call("echo", {"text": "two"})
        assert isinstance(second, ConnectionFailed), second
        await server.wait_line("fault: crashing on call 2")
        await bed.sibling_serves()
        third = await server.call("echo", {"text": "three"})
        assert isinstance(third, ConnectionFailed), third
        await bed.survived()


@BOTH
async def test_hung_calls_time_out_and_are_cancelled_on_the_server(bed: FaultBed, transport: str) -> None:
    """Unanswered calls end with ToolCallTimeout and are cancelled on the server, which keeps serving."""
    async with (
        faulty(bed, transport, "hangs-nth", "--hang-on-call", "1") as nth,
        faulty(bed, transport, "hangs-tool", "--hang-tool", "sleep") as tool,
    ):
        for server, hung_tool in ((nth, "echo"), (tool, "sleep")):
            outcome = await server.call(hung_tool, {"text": "x", "seconds": 1}, timeout=0.5)
            assert isinstance(outcome, ToolCallTimeout) and outcome.timeout == 0.5, outcome
            hanging = await server.wait_line("fault: hanging call")
            request_id = hanging.rsplit(" ", 1)[1]
            await server.wait_line(f"fault: cancelled {request_id}")
            assert text_of(await server.call("add", {"a": 2, "b": 2})) == "4"
            assert bed.service.status(server.name).calls_in_flight == 0
            await bed.sibling_serves()
        await bed.survived()


# ---------------------------------------------------------------------- stdio-only output faults


async def test_garbage_on_stdout_is_skipped(bed: FaultBed) -> None:
    """Non-JSON and non-UTF-8 stdout lines (every --garbage-stdout mode) are skipped; calls succeed."""
    modes = ["start", "interleave", "binary", "start,interleave,binary"]
    for index, mode in enumerate(modes):
        await bed.add_stdio(f"noisy-{index}", f"--garbage-stdout={mode}")
    for i in range(3):
        for index in range(len(modes)):
            text = f"{index}/{i}"
            result = await bed.settle(bed.service.call_tool, f"noisy-{index}", "echo", {"text": text}, bound=CALL_BOUND)
            assert not isinstance(result, Exception) and text_of(result) == text, (modes[index], result)
    assert all(bed.service.status(f"noisy-{i}").state is ConnectionState.CONNECTED for i in range(len(modes)))
    await bed.survived()


async def test_flooded_stderr_is_drained(bed: FaultBed) -> None:
    """A server writing megabytes to stderr (at start and on every call) never stalls."""
    await bed.add_stdio("chatty", "--flood-stderr", "2000000")
    for i in range(3):
        result = await bed.settle(bed.service.call_tool, "chatty", "echo", {"text": str(i)}, bound=CALL_BOUND)
        assert not isinstance(result, Exception) and text_of(result) == str(i), result
    assert bed.service.stderr_tail("chatty", 1) == ("fault: flood " + "#" * 50,)
    await bed.survived()


async def test_closed_stdout_is_death_and_the_process_is_killed(bed: FaultBed) -> None:
    """A server that closes stdout but stays alive fails calls typed, is declared dead and is killed."""
    sub = bed.service.subscribe()
    await bed.add_stdio("mute", "--close-stdout")
    for _ in range(2):
        outcome = await bed.settle(bed.service.call_tool, "mute", "echo", {"text": "x"}, bound=CALL_BOUND)
        assert isinstance(outcome, ConnectionFailed), outcome
    event = await wait_state(sub, "mute", "error")
    assert "stdout" in (event.data["error"] or "")
    await bed.survived()


async def test_grandchild_ignoring_sigterm_is_killed_with_its_server(bed: FaultBed) -> None:
    """Disconnecting a server kills its whole tree, a SIGTERM-proof grandchild included."""
    await bed.add_stdio("tree", "--spawn-grandchild")
    assert text_of(await bed.service.call_tool("tree", "echo", {"text": "x"})) == "x"
    line = min(await bed.wait_stderr("tree", "fault: grandchild"))
    match = re.search(r"fault: grandchild (\d+)", line)
    assert match is not None
    grandchild = psutil.Process(int(match.group(1)))
    await bed.settle(bed.service.disconnect, "tree", bound=CALL_BOUND)
    # Killed; possibly not yet reaped by init, which adopted it when its parent died.
    assert not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE
    # It comes back on demand, with a new tree (which the runtime's exit reaps).
    assert text_of(await bed.service.call_tool("tree", "echo", {"text": "y"})) == "y"
    await bed.survived()


# ---------------------------------------------------------------------- big and busy


@BOTH
async def test_fifty_megabyte_result(bed: FaultBed, transport: str) -> None:
    """A 50 MB tool result (--huge-output) arrives whole, while the sibling keeps answering."""
    async with faulty(bed, transport, "huge", "--huge-output", str(FIFTY_MB), callTimeout=60) as server:
        results: list[object] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bed.sibling_serves, "during the big result")
            results.append(await server.call("echo", {"text": "x"}))
        [result] = results
        assert not isinstance(result, Exception), result
        text = text_of(result)
        assert len(text) == FIFTY_MB and text.startswith("0123456789abcdef")
        await bed.survived()


@BOTH
async def test_notification_flood(bed: FaultBed, transport: str) -> None:
    """A thousand notifications before each result (--flood-notifications) neither lose nor mix up results."""
    async with faulty(bed, transport, "flood", "--flood-notifications", "1000", callTimeout=30) as server:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bed.sibling_serves, "during the flood")
            for i in range(2):
                result = await server.call("echo", {"text": f"after the flood {i}"})
                assert not isinstance(result, Exception) and text_of(result) == f"after the flood {i}", result
        await bed.survived()


async def test_unanswered_pings_mark_the_server_dead(bed: FaultBed) -> None:
    """A server ignoring pings (stdio, HTTP) is declared dead by a ping, restarts by itself, serves once pings are off.

    Deterministic on a loaded machine: every step waits for an event or a reply, never for
    a call to beat the next ping. (A call to a server that keeps ignoring pings may
    legitimately lose that race, so calls are made only after pings are switched off.)
    """
    async with (
        faulty(bed, "stdio", "deaf-stdio", "--no-ping", pingInterval=0.2, connectTimeout=30) as deaf_stdio,
        faulty(bed, "http", "deaf-http", "--no-ping", pingInterval=0.2, connectTimeout=30) as deaf_http,
    ):
        deaf = (deaf_stdio, deaf_http)
        errors: dict[str, str] = {}

        async def dies_by_ping_and_comes_back(server: Faulty) -> None:
            sub = bed.service.subscribe()
            outcome = await bed.settle(bed.service.connect, server.name, bound=CALL_BOUND)
            assert outcome is None, outcome
            event = await wait_state(sub, server.name, "error")
            errors[server.name] = event.data["error"] or ""
            await wait_state(sub, server.name, "connected")  # restarted by its slot, nobody asked

        async with trio.open_nursery() as nursery:
            for server in deaf:
                nursery.start_soon(dies_by_ping_and_comes_back, server)
        assert len(errors) == 2 and all("did not answer a ping" in error for error in errors.values()), errors
        await deaf_http.wait_line("fault: ignoring ping")
        await bed.sibling_serves()
        for server in deaf:
            record = bed.service.get(server.name)
            await bed.service.update(server.name, config=attrs.evolve(record.config, ping_interval=0))
            again = await server.call("echo", {"text": "after"})
            assert not isinstance(again, Exception) and text_of(again) == "after", again
        await bed.survived()
