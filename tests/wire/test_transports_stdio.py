"""The stdio transport's configuration errors, through a real runtime and real spawns."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from testkit import runtime_at

from mcp_actors import events
from mcp_actors._connection.status import ConnectionState
from mcp_actors.errors import ConnectionFailed, WorkingDirectoryNotFound


def stdio_input(name: str, cwd: str) -> dict[str, object]:
    return {
        "name": name,
        "type": "stdio",
        "config": {
            "command": sys.executable,
            "args": ["-m", "mcp_actors.testing.fault_server"],
            "cwd": cwd,
            "pingInterval": 0,
        },
    }


@pytest.mark.parametrize("kind", ["missing", "a file"])
async def test_bad_cwd_opens_the_circuit_after_one_attempt(tmp_path: Path, kind: str) -> None:
    """A cwd that is missing or not a directory fails once, names the cwd, and opens the circuit (no restarts)."""
    cwd = tmp_path / "no-such-dir"
    if kind == "a file":
        cwd = tmp_path / "plain-file"
        cwd.write_text("not a directory")
    async with runtime_at(tmp_path, sweep_ledger=False, connect_on_add=False) as rt:
        await rt.service.add(stdio_input("badcwd", str(cwd)))
        sub = rt.service.subscribe()
        with trio.fail_after(30), pytest.raises(ConnectionFailed) as info:
            await rt.service.connect("badcwd")
        # The caller may hear of the failure a moment before the slot opens the circuit.
        with trio.fail_after(30):
            async for event in sub:
                if event.type == events.CONNECTION_STATE and event.data.get("circuitOpen"):
                    break
        status = rt.service.status("badcwd")
        assert status.state is ConnectionState.ERROR
        assert status.circuit_open and status.restarts == 0
        assert status.pid is None
        assert str(cwd) in (status.error or "") and "config.cwd" in (status.error or "")
        first = info.value
        assert isinstance(first, WorkingDirectoryNotFound) or isinstance(first.__cause__, WorkingDirectoryNotFound)
        # A second demand meets the open circuit: still one attempt, still no restart.
        with trio.fail_after(30), pytest.raises(ConnectionFailed, match=r"no-such-dir|plain-file"):
            await rt.service.call_tool("badcwd", "echo", {"text": "x"})
        assert rt.service.status("badcwd").restarts == 0


async def test_a_burst_of_spawns_runs_at_once_up_to_the_cap() -> None:
    """Twenty servers started at once spawn at once; a twenty-first waits for a free lane.

    A spawn blocks its thread until the child has run as far as its exec, which on a busy
    machine is a scheduler period (~20 ms here with twenty servers starting): spawned a few
    at a time, the last of twenty started ~150 ms late and the client spent ~15 ms more CPU
    (docs/performance.md). Each spawn here holds its lane until twenty are
    spawning together (or 10 s pass); then all go on. Four more come after them, and no
    more than twenty are ever spawning at once.
    """
    import threading

    from mcp_actors._wire.transports import StdioParams, open_stdio_transport

    cap = 20
    params = StdioParams(command=sys.executable, args=("-c", "import sys; sys.stdin.read()"))
    lock = threading.Lock()
    twenty_together = threading.Event()
    spawning = 0
    most = 0
    real_popen = __import__("subprocess").Popen

    class GatedPopen(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            nonlocal spawning, most
            with lock:
                spawning += 1
                most = max(most, spawning)
                if spawning == cap:
                    twenty_together.set()
            try:
                twenty_together.wait(10.0)  # fewer lanes: each batch waits this out, and the test fails
                super().__init__(*args, **kwargs)
            finally:
                with lock:
                    spawning -= 1

    count = cap + 4
    started = 0
    all_started = trio.Event()

    async def one(i: int) -> None:
        nonlocal started
        async with open_stdio_transport(params, label=f"burst-{i}"):
            started += 1
            if started == count:
                all_started.set()
            await all_started.wait()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("subprocess.Popen", GatedPopen)
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                for i in range(count):
                    nursery.start_soon(one, i)
    assert started == count
    assert twenty_together.is_set()
    assert most == cap, most


async def test_a_server_gets_the_hosts_environment_of_its_spawn_its_env_over_it_and_the_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's environment is the host's as it is at the spawn (a change made after the
    tracker started counts; non-ASCII and undecodable bytes round-trip), ``config.env`` over
    it, and the tracker's marker; nothing else."""
    import json
    import os

    from mcp_actors._process.kill import MARKER_ENV
    from mcp_actors._process.tracker import ProcessTracker
    from mcp_actors._wire.transports import StdioParams, open_stdio_transport

    out = tmp_path / "env.json"
    script = "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))"  # then exits
    monkeypatch.setenv("MCP_ACTORS_TEST_HOST", "caf\u00e9 \udce9")  # \udce9: the byte 0xE9, not UTF-8
    monkeypatch.setenv("MCP_ACTORS_TEST_REPLACED", "host")
    monkeypatch.setenv("MCP_ACTORS_TEST_GONE", "x")
    params = StdioParams(
        command=sys.executable,
        args=("-c", script, str(out)),
        env={"MCP_ACTORS_TEST_REPLACED": "config", "MCP_ACTORS_TEST_NEW": "n\u00e9"},
    )
    tracker = ProcessTracker.get_instance()
    host_marker = tracker.child_env()[MARKER_ENV].rsplit("/", 1)[0]
    monkeypatch.delenv("MCP_ACTORS_TEST_GONE")  # after the host started, before the spawn
    expected = {**os.environ, "MCP_ACTORS_TEST_REPLACED": "config", "MCP_ACTORS_TEST_NEW": "n\u00e9"}
    with trio.fail_after(30):
        async with open_stdio_transport(params, label="envtest", tracker=tracker) as link:
            await link.exited.wait()
    seen = json.loads(out.read_text())
    assert seen.pop(MARKER_ENV).rsplit("/", 1)[0] == host_marker  # <host marker>/<spawn number>
    for key in ("LC_CTYPE", "__CF_USER_TEXT_ENCODING"):  # what an interpreter may add to its own
        if key not in expected:
            seen.pop(key, None)
    assert seen == expected
    assert "MCP_ACTORS_TEST_GONE" not in seen and seen["MCP_ACTORS_TEST_HOST"] == "caf\u00e9 \udce9"


async def test_a_servers_logger_is_made_by_its_first_stderr_line_only(caplog: pytest.LogCaptureFixture) -> None:
    """A server silent on stderr leaves no ``mcp_actors.server.<name>`` logger behind (the
    logging module keeps every logger for good, and a start that made one paid a pass of
    the secrets filter over it); one that writes gets its lines there, as before."""
    import logging

    from mcp_actors._wire.transports import StdioParams, open_stdio_transport

    quiet, loud = f"quiet-{id(caplog)}", f"loud-{id(caplog)}"
    script = "import sys; sys.stderr.write(sys.argv[1]); sys.stderr.flush(); sys.stdin.read()"
    caplog.set_level(logging.DEBUG, logger="mcp_actors.server")
    with trio.fail_after(30):
        async with open_stdio_transport(StdioParams(command=sys.executable, args=("-c", script, "")), label=quiet):
            pass
        async with open_stdio_transport(
            StdioParams(command=sys.executable, args=("-c", script, "first\nsecond\n")), label=loud
        ) as link:
            assert link.stderr is not None
            await link.stderr.wait_for(lambda line: line == "second")
    assert f"mcp_actors.server.{quiet}" not in logging.Logger.manager.loggerDict
    lines = [r.getMessage() for r in caplog.records if r.name == f"mcp_actors.server.{loud}"]
    assert lines == ["first", "second"]
