"""A sync or asyncio host that ends without ``portal.close()`` (or its runtime's block left) leaves no process.

The host (``tests/process_tracker/portal_host.py``) runs four real stdio servers through a
portal — one with a grandchild that ignores SIGTERM, one whose grandchild escapes with
``setsid`` — and simply returns. Survivors are found by the host's tracker marker, which
every process the host started inherits: only this test's processes are judged.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from mcp_actors._process.reaper import MARKER_ENV

HOST = Path(__file__).parent.parent / "process_tracker" / "portal_host.py"
REPORT_TIMEOUT = 60.0


def carriers(marker: str) -> list[psutil.Process]:
    """Every live process whose environment carries this host's marker."""
    found = []
    for proc in psutil.process_iter():
        try:
            value = proc.environ().get(MARKER_ENV)
            if value is not None and value.split("/")[0] == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def escaped(pidfile: Path) -> list[psutil.Process]:
    """The setsid grandchildren the host's servers wrote down, still running."""
    found = []
    for line in pidfile.read_text().splitlines() if pidfile.exists() else []:
        pid, create_time = line.split()
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(int(pid))
            if abs(proc.create_time() - float(create_time)) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


@pytest.mark.parametrize("mode", ["sync", "asyncio", "guest"])
def test_host_exit_without_close_leaves_no_process(tmp_path: Path, mode: str) -> None:
    """Ending a host without close() kills every server and grandchild, setsid ones too (a guest runtime as well)."""
    pidfile = tmp_path / "escaped.txt"
    host = subprocess.Popen(
        [sys.executable, str(HOST), str(tmp_path / "cfg.json"), str(pidfile), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MCP_ACTORS_STATE_DIR": str(tmp_path / "state")},
    )
    marker = ""
    try:
        assert host.stdout is not None and host.stderr is not None
        ready, _, _ = select.select([host.stdout], [], [], REPORT_TIMEOUT)
        line = host.stdout.readline() if ready else b""
        if not line:
            host.kill()
            pytest.fail(f"the host printed no report; stderr:\n{host.stderr.read().decode(errors='replace')}")
        report = json.loads(line)
        marker = report["marker"]
        assert len(report["servers"]) == 5 and all(report["servers"])
        assert len(carriers(marker)) >= 7  # five servers, two grandchildren at least: the marker is right
        _, err = host.communicate(b"", timeout=REPORT_TIMEOUT)
        assert host.returncode == 0, err.decode(errors="replace")
        assert len(pidfile.read_text().splitlines()) >= 1  # the setsid grandchild did exist
        # The exit hooks are synchronous: nothing may be left once the host is gone. The
        # short poll only covers the kernel finishing a SIGKILL.
        deadline = time.monotonic() + 10.0
        while (left := carriers(marker) + escaped(pidfile)) and time.monotonic() < deadline:
            time.sleep(0.05)
        described = sorted({(p.pid, " ".join(p.cmdline())[-60:]) for p in left if p.is_running()})
        assert not left, f"{len(described)} process(es) outlived the host: {described}"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(timeout=10)
        for proc in (carriers(marker) if marker else []) + escaped(pidfile):
            with contextlib.suppress(psutil.Error):
                proc.kill()
