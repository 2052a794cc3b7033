"""Kill-on-exit with real host processes: normal exit, unhandled exception, SIGKILL, and
SIGKILL of host and sidecar together followed by a sweep from the next host.

Each host (``host_script.py``) starts four servers — one with a grandchild that ignores
SIGTERM, one whose grandchild double-forks into a session of its own (only the host's
marker in its environment ties it to the host) — and also registers an unrelated process
under a wrong create_time, which must survive every scenario.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pt_support import carriers, force_kill, spawn_server, wait_gone, wait_no_carriers

from mcp_actors._process.tracker import ProcessIdentity

HOST_SCRIPT = Path(__file__).with_name("host_script.py")
STARTUP_TIMEOUT = 30.0


class Host:
    """A running host_script.py and the processes it reported."""

    def __init__(self, mode: str, state_dir: Path, *, forge: int | None = None) -> None:
        argv = [sys.executable, str(HOST_SCRIPT), mode]
        if forge is not None:
            argv += ["--forge", str(forge)]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "MCP_ACTORS_STATE_DIR": str(state_dir)},
        )
        self.report: dict[str, Any] = json.loads(self._read_line())
        self.servers = [_identity(pair, f"server{n}") for n, pair in enumerate(self.report["servers"])]
        self.grandchild = _identity(self.report["grandchild"], "grandchild")
        self.escapee = _identity(self.report["escapee"], "escapee")
        self.marker: str = self.report["marker"]
        # Every server and grandchild carries the marker: a wrong one would make the checks vacuous.
        assert len(carriers(self.marker)) >= 6
        self.reaper = _identity(self.report["reaper"], "reaper")
        self.ledger = Path(self.report["ledger"])

    def _read_line(self) -> bytes:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], STARTUP_TIMEOUT)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"host printed no report; stderr:\n{err.decode(errors='replace')}")
        return line

    def finish(self) -> tuple[int, str]:
        """Wait (bounded) for a host that ends by itself; return its status and stderr."""
        _, err = self.proc.communicate(timeout=STARTUP_TIMEOUT)
        return self.proc.returncode, err.decode(errors="replace")

    def sigkill(self) -> float:
        """SIGKILL the host; return the monotonic time of the kill."""
        killed_at = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=10)
        return killed_at

    @property
    def tree(self) -> list[ProcessIdentity]:
        return [*self.servers, self.grandchild, self.escapee]


def _identity(pair: list[float], label: str) -> ProcessIdentity:
    pid, create_time = int(pair[0]), float(pair[1])
    return ProcessIdentity(pid=pid, create_time=create_time, pgid=pid, label=label)


def run_sweep_host(state_dir: Path) -> list[list[float]]:
    """Start a fresh host that only sweeps the ledger; return what it reports killed."""
    done = subprocess.run(
        [sys.executable, str(HOST_SCRIPT), "sweep"],
        capture_output=True,
        timeout=STARTUP_TIMEOUT,
        env={**os.environ, "MCP_ACTORS_STATE_DIR": str(state_dir)},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    result: list[list[float]] = json.loads(done.stdout)
    return result


@pytest.fixture
def unrelated() -> Iterator[ProcessIdentity]:
    """A process that is none of the tracker's business (the hosts forge its create_time)."""
    proc, identity, _ = spawn_server(label="unrelated")
    yield identity
    proc.kill()
    proc.wait(timeout=10)


@pytest.fixture
def hosts() -> Iterator[list[Host]]:
    """Hosts started by the test; anything they leave is killed afterwards (after the asserts)."""
    started: list[Host] = []
    yield started
    for host in started:
        if host.proc.returncode is None:
            host.proc.kill()
            host.proc.communicate(timeout=10)
        force_kill([*host.tree, host.reaper])


@pytest.mark.parametrize(
    ("mode", "status"),
    [("exit", 0), ("raise", 1)],
    ids=["normal-exit", "unhandled-exception"],
)
def test_host_exit_kills_every_tree_and_dismisses_the_sidecar(
    mode: str, status: int, state_dir: Path, unrelated: ProcessIdentity, hosts: list[Host]
) -> None:
    """A host that exits normally or by an unhandled exception kills every tree at exit, escapees too."""
    host = Host(mode, state_dir, forge=unrelated.pid)
    hosts.append(host)
    returncode, stderr = host.finish()
    assert returncode == status, stderr
    if mode == "raise":
        assert "unhandled on purpose" in stderr
    # The atexit hook is synchronous: the trees are dead by the time the host has exited.
    assert not any(identity.is_alive() for identity in host.tree)
    assert not carriers(host.marker)
    wait_gone([host.reaper])
    assert not host.ledger.exists()
    assert unrelated.is_alive()


def test_host_sigkill_the_sidecar_kills_every_tree(
    state_dir: Path, unrelated: ProcessIdentity, hosts: list[Host]
) -> None:
    """A SIGKILLed host's sidecar kills every tree (grandchildren, escaped ones too) and deletes the ledger."""
    host = Host("wait", state_dir, forge=unrelated.pid)
    hosts.append(host)
    assert host.ledger.exists() and all(identity.is_alive() for identity in host.tree)
    killed_at = host.sigkill()
    wait_gone(host.tree)
    elapsed = time.monotonic() - killed_at
    print(f"host SIGKILL -> last server process gone: {elapsed * 1000:.0f} ms")
    wait_no_carriers(host.marker)
    wait_gone([host.reaper])
    assert not host.ledger.exists()
    assert unrelated.is_alive()


def test_host_and_sidecar_sigkill_next_host_sweeps_the_ledger(
    state_dir: Path, unrelated: ProcessIdentity, hosts: list[Host]
) -> None:
    """With host and sidecar both SIGKILLed, the next host's sweep kills the leftovers, escapees too."""
    host = Host("wait", state_dir, forge=unrelated.pid)
    hosts.append(host)
    os.kill(host.reaper.pid, signal.SIGKILL)
    wait_gone([host.reaper])
    host.sigkill()
    # Nobody is left to kill the servers and their descendants but the ledger.
    assert all(server.is_alive() for server in host.servers)
    assert host.grandchild.is_alive() and host.escapee.is_alive()
    assert host.ledger.exists()

    killed = run_sweep_host(state_dir)

    assert not any(server.is_alive() for server in host.servers)
    assert not host.grandchild.is_alive() and not host.escapee.is_alive()
    assert not carriers(host.marker)
    assert killed == [[s.pid, s.create_time] for s in host.servers]
    assert not host.ledger.exists()
    assert unrelated.is_alive()
