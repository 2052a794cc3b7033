"""The connection actor against real processes: spawn, kill, stderr, stdout framing, pipes.

What only a real stdio server can show: a SIGKILL seen with the server's last stderr
lines, a missing command, a process tree killed at shutdown, stderr floods and garbage on
stdout, a 50 MB message, a server-side cancellation written to stderr, and ping-deaf or
notification-flooding servers. The actor's behaviour (laziness, coalescing, restarts,
circuit, timeouts) is tested in memory on virtual time in tests/test_connection.py.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
from collections.abc import Sequence
from pathlib import Path

import attrs
import psutil
import pytest
import trio
from testkit import drain, running, state_is, text_of, wait_event

from mcp_actors import events
from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._process.tracker import ProcessIdentity
from mcp_actors._wire.transports import StdioParams
from mcp_actors.errors import (
    CommandNotFound,
    ConnectionFailed,
    ConnectTimeout,
    ServerConnectionLost,
    ToolCallTimeout,
)
from mcp_actors.testing import fault_server_command
from supervisors import Backoff, Intensity

FAST_BACKOFF = Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0)
NO_RESTART = Intensity(max_restarts=0, period=60)
BOUND = 30.0
"""Generous bound for anything expected within a second on a busy machine."""


def stdio_settings(argv: Sequence[str], name: str = "srv", **overrides: object) -> ConnectionSettings:
    """Settings for a stdio server ``argv``: no pings, a fast backoff, generous timeouts."""
    base = ConnectionSettings(
        server_id=f"id-{name}",
        server_name=name,
        transport=StdioParams(command=argv[0], args=tuple(argv[1:]), close_grace=2.0, term_grace=1.0),
        connect_timeout=20.0,
        call_timeout=30.0,
        ping_interval=0,
        backoff=FAST_BACKOFF,
    )
    return attrs.evolve(base, **overrides)


def states(sub: events.Subscription) -> list[str]:
    """The states of the connection:state events buffered in ``sub``."""
    return [e.data["state"] for e in drain(sub) if e.type == events.CONNECTION_STATE]


async def test_kill_mid_call_fails_fast_with_stderr_tail() -> None:
    """SIGKILL of the server fails in-flight calls at once (not at the 30 s call timeout) with its last stderr line.

    The fault server hangs every ``echo`` and writes ``fault: hanging call <id>`` for each: the
    last of those lines is the server's last words.
    """
    settings = stdio_settings(fault_server_command("--hang-tool", "echo"), intensity=NO_RESTART)
    async with running(settings) as ([handle], _):
        await handle.connect()
        failures: list[BaseException] = []

        async def doomed() -> None:
            try:
                await handle.call_tool("echo", {"text": "x"})
            except ServerConnectionLost as exc:
                failures.append(exc)

        hanging: set[str] = set()

        def five_hanging(line: str) -> bool:
            if "fault: hanging call" in line:
                hanging.add(line)
            return len(hanging) == 5

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(doomed)
            with trio.fail_after(BOUND):
                last_words = await handle.wait_for_stderr(five_hanging)
            assert handle.status().calls_in_flight == 5
            os.kill(handle.status().pid, signal.SIGKILL)
            start = trio.current_time()
        elapsed = trio.current_time() - start
        assert len(failures) == 5
        assert elapsed < 10.0, elapsed  # expected ~0.05 s; generous for a loaded machine
        assert all("SIGKILL" in str(f) for f in failures)
        assert any(last_words in line for line in failures[0].stderr_tail)


async def test_missing_command_opens_circuit_at_once() -> None:
    """A command that does not exist is reported by name and not retried."""
    settings = stdio_settings(["definitely-not-a-command-xyz"], name="ghost")
    async with running(settings) as ([handle], sub):
        with pytest.raises(CommandNotFound, match="definitely-not-a-command-xyz"):
            await handle.connect()
        await wait_event(sub, state_is("error", circuitOpen=True))
        assert handle.status().restarts == 0


def _with_transport(settings: ConnectionSettings, **changes: object) -> ConnectionSettings:
    """``settings`` with its stdio params changed (``cwd``, ``env``, ...)."""
    return attrs.evolve(settings, transport=attrs.evolve(settings.transport, **changes))


def _launcher(directory: Path, name: str = "server.sh") -> Path:
    """An executable script in ``directory`` that runs a stdio server (as a project's own launcher would).

    The fault server without flags: it answers ``initialize`` in a fraction of the demo server's start-up.
    """
    script = directory / name
    script.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in fault_server_command()) + "\n")
    script.chmod(0o755)
    return script


async def test_relative_command_runs_from_the_servers_cwd(tmp_path: Path) -> None:
    """``./server.sh`` with ``cwd`` set is the script in that cwd, as a shell, Node and ``subprocess`` run it.

    The host's own working directory plays no part: a config written for a project's
    folder (VS Code's ``"command": "./run.sh", "cwd": "${workspaceFolder}"``) must work
    from wherever the host was started.
    """
    project = tmp_path / "project"
    project.mkdir()
    _launcher(project)
    assert not (Path.cwd() / "server.sh").exists()
    settings = _with_transport(stdio_settings(["./server.sh"], name="local"), cwd=str(project))
    async with running(settings) as ([handle], _):
        tools = await handle.list_tools()
        assert "echo" in {tool.name for tool in tools}


async def test_missing_relative_command_is_named_with_its_cwd(tmp_path: Path) -> None:
    """A relative command that is not in the server's cwd fails as CommandNotFound naming both, not retried."""
    settings = _with_transport(stdio_settings(["./no-such-server.sh"], name="ghost"), cwd=str(tmp_path))
    async with running(settings) as ([handle], sub):
        with pytest.raises(CommandNotFound) as info:
            await handle.connect()
        assert "./no-such-server.sh" in str(info.value) and str(tmp_path) in str(info.value)
        await wait_event(sub, state_is("error", circuitOpen=True))
        assert handle.status().restarts == 0


async def test_command_found_on_the_records_own_path(tmp_path: Path) -> None:
    """A bare command is looked up on the record's ``env.PATH`` when it sets one (else on the host's)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _launcher(bin_dir, "my-mcp-server")
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    settings = _with_transport(stdio_settings(["my-mcp-server"], name="onpath"), env={"PATH": path})
    async with running(settings) as ([handle], _):
        assert "echo" in {tool.name for tool in await handle.list_tools()}


async def test_a_script_whose_interpreter_is_missing_is_not_called_missing_itself(tmp_path: Path) -> None:
    """The command exists but its ``#!`` interpreter does not: the error says so, not "not found on PATH"."""
    script = tmp_path / "broken-shebang"
    script.write_text("#!/definitely/not/an/interpreter\n")
    script.chmod(0o755)
    async with running(stdio_settings([str(script)], name="shebang")) as ([handle], _):
        with pytest.raises(CommandNotFound) as info:
            await handle.connect()
        message = str(info.value)
        assert str(script) in message and "interpreter" in message, message
        assert "not found on PATH" not in message and "not an executable file" not in message, message


async def test_hung_call_times_out_and_server_sees_cancellation() -> None:
    """A call past its timeout raises ToolCallTimeout and the server receives notifications/cancelled."""
    async with running(stdio_settings(fault_server_command("--hang-tool", "echo"))) as ([handle], _):
        with pytest.raises(ToolCallTimeout, match="echo"):
            await handle.call_tool("echo", {"text": "x"}, timeout=0.5)
        with trio.fail_after(10):
            await handle.wait_for_stderr(lambda line: "fault: cancelled" in line)
        # The connection survives a timed-out call.
        assert handle.status().state is ConnectionState.CONNECTED


async def test_grandchild_ignoring_sigterm_is_gone_after_shutdown() -> None:
    """Disconnect kills the whole tree, including a grandchild that ignores SIGTERM (SIGKILL after term_grace)."""
    settings = _with_transport(stdio_settings(fault_server_command("--spawn-grandchild")), term_grace=0.2)
    async with running(settings) as ([handle], _):
        await handle.connect()
        with trio.fail_after(10):
            line = await handle.wait_for_stderr(lambda line: "fault: grandchild" in line)
        pid = int(re.search(r"fault: grandchild (\d+)", line).group(1))
        grandchild = psutil.Process(pid)
        await handle.disconnect()
        assert not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE


async def test_full_stderr_pipe_does_not_deadlock() -> None:
    """A server writing megabytes to stderr keeps answering (we drain stderr continuously)."""
    async with running(stdio_settings(fault_server_command("--flood-stderr", "2000000"))) as ([handle], _):
        for i in range(3):
            assert text_of(await handle.call_tool("echo", {"text": str(i)})) == str(i)


async def test_slow_start_beyond_connect_timeout() -> None:
    """A server slower than the connect timeout fails with ConnectTimeout, leaving no process."""
    settings = stdio_settings(
        fault_server_command("--slow-start", "30"), connect_timeout=0.5, intensity=Intensity(max_restarts=0, period=60)
    )
    async with running(settings) as ([handle], _):
        with pytest.raises(ConnectTimeout, match=r"0\.5s"):
            await handle.connect()


async def test_a_connect_timeout_is_declared_at_its_bound_not_after_a_graceful_close() -> None:
    """A server that never finished connecting is killed at once: the error comes at the bound.

    Before: the transport's graceful close ran first (stdin closed, ``close_grace`` for the
    server to exit, SIGTERM, ``term_grace``), so ConnectTimeout and every call waiting on
    the connect came that much after the bound it names (2 s later by default; here the
    graces are 60 s each, so the old code overruns the test's bound).
    """
    argv = fault_server_command("--slow-start", "300")
    transport = StdioParams(command=argv[0], args=tuple(argv[1:]), close_grace=60.0, term_grace=60.0)
    settings = stdio_settings(
        argv, transport=transport, connect_timeout=0.5, intensity=Intensity(max_restarts=0, period=60)
    )
    async with running(settings) as ([handle], _):
        with trio.fail_after(30), pytest.raises(ConnectTimeout, match=r"0\.5s"):
            await handle.connect()
        assert handle.status().pid is None


async def test_garbage_on_stdout_is_skipped_and_reported() -> None:
    """Non-JSON (and non-UTF-8) lines on stdout are skipped; the session still works."""
    async with running(stdio_settings(fault_server_command("--garbage-stdout=interleave"))) as ([handle], _):
        for i in range(3):
            assert text_of(await handle.call_tool("echo", {"text": f"g{i}"})) == f"g{i}"


async def test_close_stdout_is_death() -> None:
    """A server that closes stdout but stays alive is treated as dead and killed.

    It stops reading too, so the close waits out ``close_grace`` before its SIGTERM: a short one here.
    """
    settings = _with_transport(
        stdio_settings(fault_server_command("--close-stdout"), intensity=NO_RESTART), close_grace=0.2
    )
    async with running(settings) as ([handle], _):
        with pytest.raises(ConnectionFailed):
            await handle.connect()
            await handle.call_tool("echo", {"text": "x"})


async def test_crash_on_nth_call() -> None:
    """The call that crashes the server fails with ServerConnectionLost; earlier calls succeeded."""
    async with running(
        stdio_settings(fault_server_command("--crash-on-call", "2"), intensity=Intensity(max_restarts=0, period=60))
    ) as ([handle], _):
        assert text_of(await handle.call_tool("echo", {"text": "one"})) == "one"
        with pytest.raises(ServerConnectionLost, match="exited") as info:
            await handle.call_tool("echo", {"text": "two"})
        assert any("crash" in line for line in info.value.stderr_tail)


async def test_huge_output_arrives_whole() -> None:
    """A 50 MB tool result is received intact (the fault server's ``big``, as the demo server's)."""
    size = 50 * 1024 * 1024
    async with running(stdio_settings(fault_server_command())) as ([handle], _):
        result = await handle.call_tool("big", {"n": size})
        assert len(text_of(result)) == size


async def test_unanswered_pings_mark_the_server_dead() -> None:
    """With periodic pings on, a server that stops answering them is declared dead."""
    settings = stdio_settings(
        fault_server_command("--no-ping"),
        ping_interval=0.2,
        ping_timeout=0.3,
        intensity=Intensity(max_restarts=0, period=60),
    )
    async with running(settings) as ([handle], sub):
        await handle.connect()
        await wait_event(sub, state_is("error"))
        assert "ping" in (handle.status().error or "")


async def test_notification_flood_does_not_block_calls() -> None:
    """Thousands of notifications per call do not stall the session."""
    async with running(stdio_settings(fault_server_command("--flood-notifications", "2000"))) as ([handle], _):
        for i in range(3):
            assert text_of(await handle.call_tool("echo", {"text": str(i)})) == str(i)


async def test_status_carries_the_process_identity() -> None:
    """status().process is the stdio server's PID with its create time; pid is its convenience view."""
    async with running(stdio_settings(fault_server_command())) as ([handle], _sub):
        assert handle.status().process is None
        await handle.connect()
        identity = handle.status().process
        assert isinstance(identity, ProcessIdentity)
        assert identity.pid == handle.status().pid
        assert identity.create_time == pytest.approx(psutil.Process(identity.pid).create_time())
        await handle.disconnect()
        assert handle.status().process is None and handle.status().pid is None


async def test_cancelled_caller_cancels_the_call_on_the_server() -> None:
    """A caller that is cancelled mid-call makes the server receive notifications/cancelled; the session lives."""
    async with running(stdio_settings(fault_server_command("--hang-tool", "echo"))) as ([handle], _sub):
        await handle.connect()
        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(handle.call_tool, "echo", {"text": "x"})
                line = await handle.wait_for_stderr(lambda line: "fault: hanging call" in line)
                nursery.cancel_scope.cancel()
            request_id = line.rsplit(" ", 1)[1]
            await handle.wait_for_stderr(lambda line: f"fault: cancelled {request_id}" in line)
        assert handle.status().calls_in_flight == 0
        assert text_of(await handle.call_tool("add", {"a": 1, "b": 2})) == "3"
        assert handle.status().state is ConnectionState.CONNECTED


async def test_unanswered_health_ping_publishes_the_death_before_failing() -> None:
    """health() on a server that ignores pings fails only after the state is error, naming the ping."""
    async with running(stdio_settings(fault_server_command("--no-ping"), intensity=NO_RESTART)) as ([handle], sub):
        await handle.connect()
        drain(sub)
        with pytest.raises(ServerConnectionLost, match="did not answer a ping") as info:
            await handle.health(timeout=0.5)
        assert handle.status().state is ConnectionState.ERROR
        assert "error" in states(sub)
        assert info.value.server == "srv"


async def test_a_tool_with_a_schema_against_the_spec_costs_only_itself(caplog: pytest.LogCaptureFixture) -> None:
    """A listing with a tool whose inputSchema has no root ``"type": "object"`` still lists, with a warning naming it.

    Before: the SDK's check of the whole ``tools/list`` result failed on that one tool, so
    every tool of the server was unavailable (a ServerProtocolError for the listing). The
    SDK's ``Tool`` type takes the tool on its own, so it is kept (the formats repair a root
    ``anyOf``), and the warning tells the user the server breaks the spec.
    """
    async with running(stdio_settings(fault_server_command("--untyped-tool"))) as ([handle], _):
        tools = await handle.list_tools()
        assert [tool.name for tool in tools] == ["echo", "add", "sleep", "big", "fail", "untyped"]
        assert text_of(await handle.call_tool("echo", {"text": "siblings work"})) == "siblings work"
    warnings = [
        r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "breaks the MCP spec" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "server 'srv'" in warnings[0] and "tools['untyped'].inputSchema" in warnings[0]
