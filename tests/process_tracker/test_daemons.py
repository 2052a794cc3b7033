"""Daemons that escape their server: a setsid grandchild left behind by a server that exits,
and one that also clears its environment (so it carries no marker). Each dies with its
connection — at a restart, at a close, at the host's exit or crash — not only with the host.

Every daemon written down by ``setsid_server.py`` is SIGKILLed (identity-checked) after
each test, pass or fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import trio
from testkit import running

from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker
from mcp_actors._wire.transports import StdioParams, open_stdio_transport
from mcp_actors.errors import ServerConnectionLost
from supervisors import Backoff, Intensity

SETSID_SERVER = Path(__file__).with_name("setsid_server.py")
HOST = Path(__file__).with_name("runtime_host.py")
RESTARTS = 3
BOUND = 5.0
"""Seconds a killed daemon may take to be seen gone (a kill takes milliseconds)."""


def cgroup2_writable() -> bool:
    """Whether this process may create a cgroup v2 beside itself (root, or a delegated subtree)."""
    try:
        with open("/proc/self/cgroup") as file:
            own = next(line.split(":", 2)[2].strip() for line in file if line.startswith("0::"))
        with open("/proc/self/mountinfo") as file:
            mounts = [line.split() for line in file]
    except (OSError, StopIteration):
        return False
    for fields in mounts:
        fstype = fields[fields.index("-") + 1]
        if fstype == "cgroup2" and fields[3] == "/":
            probe = Path(fields[4], own.lstrip("/"), f"probe-{os.getpid()}")
            try:
                probe.mkdir()
            except OSError:
                return False
            probe.rmdir()
            return (probe.parent / "cgroup.procs").exists()
    return False


def require_cgroups() -> None:
    """The project's machines (and CI) have a writable cgroup v2; a daemon without marker needs it."""
    assert cgroup2_writable(), "cgroup v2 is not writable here: a daemon without marker is only caught by its cgroup"


def daemons(pidfile: Path) -> list[ProcessIdentity]:
    """The daemons ``setsid_server.py`` wrote down, oldest first."""
    if not pidfile.exists():
        return []
    result = []
    for line in pidfile.read_text().splitlines():
        pid, create_time = line.split()
        result.append(ProcessIdentity(pid=int(pid), create_time=float(create_time), pgid=int(pid), label="daemon"))
    return result


def alive(identities: list[ProcessIdentity]) -> list[int]:
    return [i.pid for i in identities if i.is_alive()]


async def gone_within(identities: list[ProcessIdentity], what: str) -> None:
    """Poll (bounded) until none of ``identities`` runs."""
    deadline = trio.current_time() + BOUND
    while alive(identities):
        if trio.current_time() > deadline:
            raise AssertionError(f"daemons alive {BOUND} s after {what}: {alive(identities)}")
        await trio.sleep(0.01)


async def lines_at_least(pidfile: Path, count: int) -> None:
    """Wait (bounded) until the servers wrote down ``count`` daemons."""
    with trio.fail_after(30):
        while len(daemons(pidfile)) < count:  # noqa: ASYNC110 - a file written by other processes
            await trio.sleep(0.01)


@contextlib.contextmanager
def killed_after(*pidfiles: Path) -> Iterator[None]:
    """SIGKILL every daemon written to ``pidfiles`` when the block ends (a failed test leaks nothing)."""
    try:
        yield
    finally:
        for pidfile in pidfiles:
            for identity in daemons(pidfile):
                if identity.is_alive():
                    with contextlib.suppress(psutil.Error):
                        psutil.Process(identity.pid).kill()


@pytest.fixture(params=["cgroups", "no-cgroups"])
def own_tracker(
    request: pytest.FixtureRequest, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ProcessTracker]:
    """The process's tracker for the test: with cgroups where this machine has them, and without."""
    if request.param == "cgroups":
        require_cgroups()
    monkeypatch.setenv("MCP_ACTORS_CGROUPS", "on" if request.param == "cgroups" else "off")
    tracker = ProcessTracker(state_dir=state_dir, term_grace=0.3)
    monkeypatch.setattr(ProcessTracker, "_instance", tracker)
    try:
        yield tracker
    finally:
        tracker.kill_all_sync()


def daemon_settings(pidfile: Path, *flags: str, env: dict[str, str] | None = None) -> ConnectionSettings:
    return ConnectionSettings(
        server_id="id-daemon",
        server_name="daemon",
        transport=StdioParams(
            command=sys.executable,
            args=(str(SETSID_SERVER), str(pidfile), *flags),
            env=env or {},
            close_grace=0.5,
            term_grace=0.3,
        ),
        connect_timeout=20.0,
        call_timeout=30.0,
        ping_interval=0,
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
        intensity=Intensity(max_restarts=2 * RESTARTS, period=60),
    )


@pytest.mark.parametrize(
    ("own_tracker", "clear_env"),
    [("cgroups", False), ("cgroups", True), ("no-cgroups", False), ("cgroups", "outside")],
    ids=["cgroups-marked", "cgroups-env-cleared", "no-cgroups-marked", "cgroups-marked-outside-its-cgroup"],
    indirect=["own_tracker"],
)
async def test_a_crashing_servers_daemon_dies_at_each_restart(
    own_tracker: ProcessTracker, tmp_path: Path, clear_env: bool | str
) -> None:
    """A server that leaves a setsid daemon and exits, restarted by its slot: each restart ends its daemon.

    Without cgroups only a daemon that keeps its environment (the host's marker) can be found.
    """
    pidfile = tmp_path / "daemons.txt"
    # "outside": a marked daemon that left the server's cgroup (forked before the server was
    # moved in): the server's cgroup is empty once it crashed, and only the marker finds it.
    if clear_env == "outside":
        env: dict[str, str] | None = {"SETSID_SERVER_LEAVE_CGROUP": "1"}
    else:
        env = {"SETSID_SERVER_CLEAR_ENV": "1"} if clear_env else None
    with killed_after(pidfile):
        async with running(daemon_settings(pidfile, "--crash-on-call", "1", env=env)) as ([handle], _):
            await handle.connect()
            for restart in range(1, RESTARTS + 1):
                await lines_at_least(pidfile, restart)
                with pytest.raises(ServerConnectionLost):
                    await handle.call_tool("echo", {"text": "crash"})
                await handle.connect()  # the restarted server
                await lines_at_least(pidfile, restart + 1)
                await gone_within(daemons(pidfile)[:restart], f"restart {restart}")
                assert len(alive(daemons(pidfile))) == 1, "the running server's own daemon lives"
        await gone_within(daemons(pidfile), "the slot closed")
        assert len(daemons(pidfile)) == RESTARTS + 1


async def test_an_env_cleared_daemon_dies_when_its_connection_closes(tracker: ProcessTracker, tmp_path: Path) -> None:
    """Closing the transport kills its server's daemon that carries no marker; another server's lives on."""
    require_cgroups()
    pidfiles = [tmp_path / "a.txt", tmp_path / "b.txt"]
    params = [
        StdioParams(
            command=sys.executable,
            args=[str(SETSID_SERVER), str(pidfile)],
            env={"SETSID_SERVER_CLEAR_ENV": "1"},
            close_grace=0.5,
            term_grace=0.3,
        )
        for pidfile in pidfiles
    ]
    with killed_after(*pidfiles):
        async with open_stdio_transport(params[1], label="b", tracker=tracker):
            await lines_at_least(pidfiles[1], 1)
            async with open_stdio_transport(params[0], label="a", tracker=tracker):
                await lines_at_least(pidfiles[0], 1)
                assert alive(daemons(pidfiles[0]))
                assert psutil.Process(daemons(pidfiles[0])[0].pid).environ() == {}
            await gone_within(daemons(pidfiles[0]), "its connection closed")
            assert alive(daemons(pidfiles[1])), "another server's daemon is not touched"
        await gone_within(daemons(pidfiles[1]), "its connection closed")


def _wait_all_gone(pairs: list[list[float]], timeout: float) -> list[int]:
    """PIDs of ``(pid, create_time)`` pairs still alive after at most ``timeout`` seconds."""
    identities = [ProcessIdentity(pid=int(pid), create_time=ctime, pgid=int(pid)) for pid, ctime in pairs]
    deadline = time.monotonic() + timeout
    while (left := alive(identities)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return left


@pytest.mark.parametrize("mode", ["exit", "sigkill"])
def test_an_env_cleared_daemon_dies_with_its_host(tmp_path: Path, mode: str) -> None:
    """A host running the real runtime exits or is SIGKILLed: the daemon without marker is gone in 5 s too.

    The host (``runtime_host.py``) is the one of ``test_runtime_host_crash.py`` with a fifth
    server, so this is also its exit and SIGKILL case: every server, the grandchild that
    ignores SIGTERM and the setsid escapee run while the host does and are gone within 5 s.
    """
    require_cgroups()
    host = subprocess.Popen(
        [sys.executable, str(HOST), str(tmp_path / "cfg.json"), "wait" if mode == "sigkill" else mode, "cleared"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MCP_ACTORS_STATE_DIR": str(tmp_path / "state")},
    )
    with killed_after(tmp_path / "cleared.txt", tmp_path / "escapee.txt"):
        try:
            assert host.stdout is not None and host.stdin is not None and host.stderr is not None
            ready, _, _ = select.select([host.stdout], [], [], 60)
            line = host.stdout.readline() if ready else b""
            assert line, host.stderr.read().decode(errors="replace") if host.poll() is not None else "no report"
            report = json.loads(line)
            pairs = [*report["servers"], report["grandchild"], report["escapee"], report["cleared"]]
            assert _wait_all_gone([report["cleared"]], 0.0), "the daemon runs while its host does"
            assert len(_wait_all_gone(pairs, 0.0)) == len(pairs), "every server and daemon runs while its host does"
            if mode == "sigkill":
                host.kill()
            else:
                host.stdin.close()
            host.wait(timeout=30)
            assert host.returncode == (0 if mode == "exit" else -signal.SIGKILL)
            left = _wait_all_gone(pairs, BOUND)
            assert not left, f"outlived the host ({mode}): {left} (cleared daemon: {report['cleared'][0]})"
        finally:
            if host.poll() is None:
                host.kill()
                host.wait()
