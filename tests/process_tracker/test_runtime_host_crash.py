"""Kill-on-exit with the real runtime: a host running four stdio servers through
``open_runtime`` (one with a grandchild that ignores SIGTERM, one whose grandchild escapes
with setsid) raises — and no server process or grandchild survives it. Its normal exit and
its SIGKILL are in ``test_daemons.py`` (the same host with a fifth server)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

HOST = Path(__file__).with_name("runtime_host.py")


def alive(pid: int, create_time: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_all_gone(pairs: list[list[float]], timeout: float) -> float:
    """Seconds until every (pid, create_time) is gone; fails after ``timeout``."""
    start = time.monotonic()
    while any(alive(int(pid), ctime) for pid, ctime in pairs):
        if time.monotonic() - start > timeout:
            left = [int(pid) for pid, ctime in pairs if alive(int(pid), ctime)]
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            pytest.fail(f"processes survived the host: {left}")
        time.sleep(0.01)
    return time.monotonic() - start


def test_no_server_outlives_a_host_that_raises(tmp_path: Path) -> None:
    """An unhandled exception in the host: every server and grandchild (escaped too) is gone in 5 s.

    The host's normal exit and its SIGKILL are ``test_daemons.py``'s
    ``test_an_env_cleared_daemon_dies_with_its_host``: the same host with one server more, and
    every check made here.
    """
    host = subprocess.Popen(
        [sys.executable, str(HOST), str(tmp_path / "cfg.json"), "raise"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MCP_ACTORS_STATE_DIR": str(tmp_path / "state")},
    )
    try:
        ready, _, _ = select.select([host.stdout], [], [], 60)
        line = host.stdout.readline() if ready else b""  # type: ignore[union-attr]
        assert line, host.stderr.read().decode(errors="replace") if host.poll() is not None else "no report"  # type: ignore[union-attr]
        report = json.loads(line)
        pairs = [*report["servers"], report["grandchild"], report["escapee"]]
        assert all(alive(int(pid), ctime) for pid, ctime in pairs)
        host.stdin.close()  # type: ignore[union-attr]
        host.wait(timeout=30)
        elapsed = wait_all_gone(pairs, timeout=5.0)
        assert host.returncode != 0
        assert b"crashed on purpose" in host.stderr.read()  # type: ignore[union-attr]
        print(f"raise: last server gone {elapsed * 1000:.0f} ms after the host ended")
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
