"""Kill-on-exit during start-up: a host SIGKILLed at the first server's spawn, while the
runtime is still starting (the reaper sidecar and the ledger sweep run concurrently with
the first connections), leaves no server process behind."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from pt_support import wait_gone, wait_no_carriers

from mcp_actors._process.tracker import ProcessIdentity

HOST = Path(__file__).with_name("startup_crash_host.py")
LATE_EXEC_HOST = Path(__file__).with_name("late_exec_host.py")
STARTUP_TIMEOUT = 60.0
SERVERS = 4


def _report_of_a_host_that_kills_itself(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run a host script (its own state directory) until it SIGKILLs itself; its one JSON line."""
    host = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MCP_ACTORS_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        assert host.stdout is not None
        ready, _, _ = select.select([host.stdout], [], [], STARTUP_TIMEOUT)
        line = host.stdout.readline() if ready else b""
        host.wait(timeout=STARTUP_TIMEOUT)
        assert line, host.stderr.read().decode(errors="replace") if host.stderr else "no report"
        assert host.returncode == -signal.SIGKILL
        report: dict[str, Any] = json.loads(line)
        return report
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


@pytest.mark.parametrize("mode", ["in-register", "after-register"])
def test_a_host_killed_at_its_first_spawn_leaves_no_server(tmp_path: Path, mode: str) -> None:
    """SIGKILL right after the first spawn (before or after it is registered): every server is gone in 20 s."""
    report = _report_of_a_host_that_kills_itself(tmp_path, str(HOST), str(tmp_path / "cfg.json"), mode, str(SERVERS))
    pid, create_time = report["spawned"]
    spawned = ProcessIdentity(pid=pid, create_time=create_time, pgid=pid, label="first server")
    # Every server carries the host's marker: none may outlive the host (leftovers are
    # killed by wait_no_carriers when it fails, so a failing test leaks nothing).
    wait_no_carriers(report["marker"], timeout=20.0)
    wait_gone([spawned], timeout=1.0)


def test_a_server_that_execs_after_its_host_died_is_killed_too(tmp_path: Path) -> None:
    """A spawn's child that closed its descriptors but had not exec'd when its host died (so the
    sidecar's first look found no marker on it) is killed once it execs: its server is gone."""
    report = _report_of_a_host_that_kills_itself(tmp_path, str(LATE_EXEC_HOST), "1.0")
    # The child execs the server a second after the host's death: it must be gone within
    # 20 s, and nothing else of the host left (what is left when this fails is killed, so
    # a failing run leaks nothing).
    child = psutil.Process(report["child"])
    _, alive = psutil.wait_procs([child], timeout=20.0)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    assert not alive, f"the late server outlived its host: {[p.cmdline() for p in alive]}"
    wait_no_carriers(report["marker"], timeout=5.0)
