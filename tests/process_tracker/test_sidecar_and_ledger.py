"""The reaper sidecar's line protocol, and the ledger sweep's rules about whose processes
may be killed (create_time, live hosts, markers, corrupt files)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil
import pytest
from pt_support import LIFETIME, force_kill, spawn_server, wait_gone

from mcp_actors._process.reaper import MARKER_ENV, SIDECAR_TAG
from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker, _sidecar_argv


def start_sidecar(ledger: Path, argv: Sequence[str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv) if argv is not None else _sidecar_argv(ledger, 0.3),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def send(sidecar: subprocess.Popen[bytes], *lines: str) -> None:
    assert sidecar.stdin is not None
    sidecar.stdin.write("".join(lines).encode())
    sidecar.stdin.flush()


def track(identity: ProcessIdentity, *, create_time: float | None = None) -> str:
    ct = identity.create_time if create_time is None else create_time
    return f"track {identity.pid} {ct!r} {identity.pgid}\n"


def close_and_wait(sidecar: subprocess.Popen[bytes]) -> None:
    _, err = sidecar.communicate(timeout=30)
    assert sidecar.returncode == 0, err.decode(errors="replace")


@pytest.fixture
def servers() -> Iterator[list[tuple[ProcessIdentity, ProcessIdentity | None]]]:
    """Two server trees (the first with a SIGTERM-ignoring grandchild), killed after the test."""
    spawned = [spawn_server(grandchild=n == 0, label=f"s{n}") for n in range(2)]
    yield [(identity, grand) for _, identity, grand in spawned]
    for proc, identity, grand in spawned:
        force_kill([identity, grand])
        proc.wait(timeout=10)


# ----------------------------------------------------------------------------- sidecar


@pytest.mark.parametrize("launch", ["script", "module"])
def test_sidecar_kills_tracked_trees_on_eof_and_deletes_the_ledger(
    launch: str, servers: list[tuple[ProcessIdentity, ProcessIdentity | None]], tmp_path: Path
) -> None:
    """End-of-file (the host died) makes the sidecar kill every tracked tree and the ledger."""
    ledger = tmp_path / "host-x.json"
    ledger.write_text("{}")
    argv = None
    if launch == "module":
        argv = [sys.executable, "-m", "mcp_actors._process.reaper", "--ledger", str(ledger), "--term-grace", "0.3"]
    sidecar = start_sidecar(ledger, argv)
    (leader, grandchild), (other, _) = servers
    assert grandchild is not None
    send(sidecar, track(leader), track(other))
    close_and_wait(sidecar)
    assert not any(i.is_alive() for i in (leader, grandchild, other))
    assert not ledger.exists()


def test_sidecar_exit_line_leaves_without_killing(
    servers: list[tuple[ProcessIdentity, ProcessIdentity | None]], tmp_path: Path
) -> None:
    """An `exit` line (a clean host shutdown) makes the sidecar leave and kill nothing."""
    sidecar = start_sidecar(tmp_path / "host-x.json")
    (leader, grandchild), _ = servers
    send(sidecar, track(leader), "exit\n")
    assert sidecar.wait(timeout=30) == 0
    assert leader.is_alive() and grandchild is not None and grandchild.is_alive()
    assert sidecar.stdin is not None
    sidecar.stdin.close()


def test_sidecar_ignores_untracked_forged_and_malformed_lines(
    servers: list[tuple[ProcessIdentity, ProcessIdentity | None]], tmp_path: Path
) -> None:
    """Untracked processes, a wrong create_time and garbage lines are never acted on."""
    sidecar = start_sidecar(tmp_path / "host-x.json")
    (leader, grandchild), (other, _) = servers
    assert grandchild is not None
    send(
        sidecar,
        track(leader),
        f"untrack {leader.pid} {leader.create_time!r}\n",
        track(other, create_time=other.create_time - 7.0),
        "track not-a-pid 1.0 1\n",
        "bogus\n",
    )
    close_and_wait(sidecar)
    assert leader.is_alive() and grandchild.is_alive() and other.is_alive()


def spawn_marked_escapee(value: str) -> tuple[subprocess.Popen[bytes], ProcessIdentity, ProcessIdentity]:
    """A server whose setsid grandchild carries MARKER_ENV=value; return server, its identity, the escapee."""
    env = {**os.environ, MARKER_ENV: value}
    proc, identity, escapee = spawn_server(escapee=True, env=env, label=f"server {value}")
    assert escapee is not None
    return proc, identity, escapee


@pytest.fixture
def marked() -> Iterator[list[tuple[ProcessIdentity, ProcessIdentity]]]:
    """Servers with escaped grandchildren under three markers of this test's own; killed after."""
    unique = f"test-{os.getpid()}-{time.monotonic_ns()}"
    spawned = [spawn_marked_escapee(value) for value in (f"{unique}/1", f"{unique}/2", f"{unique}-other/1")]
    yield [(identity, escapee) for _, identity, escapee in spawned]
    for proc, identity, escapee in spawned:
        force_kill([identity, escapee])
        proc.wait(timeout=10)


def test_sidecar_kills_tagged_trees_and_every_carrier_of_the_hosts_marker_on_eof(
    marked: list[tuple[ProcessIdentity, ProcessIdentity]], tmp_path: Path
) -> None:
    """At EOF the sidecar kills escaped grandchildren by tag and by marker, and no other host's."""
    (tracked, tracked_escapee), (closed, closed_escapee), (stranger, stranger_escapee) = marked
    marker = str(psutil.Process(tracked.pid).environ()[MARKER_ENV]).split("/")[0]
    ledger = tmp_path / "host-x.json"
    ledger.write_text("{}")
    sidecar = start_sidecar(ledger, _sidecar_argv(ledger, 0.3, marker=marker))
    send(sidecar, track(tracked).replace("\n", f" {marker}/1\n"))
    os.kill(closed.pid, signal.SIGKILL)  # a server closed earlier, its escapee left behind
    wait_gone([closed])
    close_and_wait(sidecar)
    assert not tracked.is_alive() and not tracked_escapee.is_alive()
    assert not closed_escapee.is_alive()
    assert stranger.is_alive() and stranger_escapee.is_alive()  # another host's marker
    assert not ledger.exists()


def test_sidecar_carries_its_tag_on_the_command_line(tmp_path: Path) -> None:
    """The sidecar is recognisable in process listings by the tag mcp_actors._process.reaper."""
    argv = _sidecar_argv(tmp_path / "host-x.json", 1.0)
    assert SIDECAR_TAG == "mcp_actors._process.reaper"
    assert SIDECAR_TAG in argv
    # The interpreter that does the killing is on the command line, isolated (-I -S).
    python = argv.index(sys.executable)
    assert argv[python : python + 3] == [sys.executable, "-I", "-S"]


def test_sidecar_follows_the_host_as_a_shell(tmp_path: Path) -> None:
    """While the host lives the sidecar is a POSIX shell: its start costs a fraction of an
    interpreter's, on the cores where the host's first servers are starting. An exit line
    ends it cleanly."""
    ledger = tmp_path / "host-x.json"
    sidecar = start_sidecar(ledger)
    try:
        send(sidecar, "untrack 1 1.0\n")
        following = psutil.Process(sidecar.pid)
        assert os.path.realpath(following.exe()) == os.path.realpath("/bin/sh")
        assert SIDECAR_TAG in following.cmdline()
        send(sidecar, "exit\n")
        close_and_wait(sidecar)
    finally:
        if sidecar.poll() is None:
            sidecar.kill()
            sidecar.wait()


# ----------------------------------------------------------------------------- ledger


def write_ledger(
    state_dir: Path, host: ProcessIdentity, entries: Sequence[ProcessIdentity], *, marker: str = "m"
) -> Path:
    directory = state_dir / "processes"
    directory.mkdir(exist_ok=True)
    path = directory / f"host-{host.pid}.{int(host.create_time)}.{marker}.json"
    payload = {
        "version": 1,
        "host": {"pid": host.pid, "create_time": host.create_time, "pgid": host.pgid},
        "marker": marker,
        "processes": [{"pid": e.pid, "create_time": e.create_time, "pgid": e.pgid, "label": e.label} for e in entries],
    }
    path.write_text(json.dumps(payload))
    return path


def dead_host() -> ProcessIdentity:
    """An identity no live process has: this process's PID with another create_time."""
    me = ProcessIdentity.of(os.getpid())
    return ProcessIdentity(pid=me.pid, create_time=me.create_time - 100.0, pgid=me.pgid)


def test_sweep_kills_the_trees_of_a_dead_host_and_deletes_its_ledger(
    tracker: ProcessTracker, state_dir: Path, servers: list[tuple[ProcessIdentity, ProcessIdentity | None]]
) -> None:
    """A dead host's recorded servers (still alive, create_time matching) die with their trees."""
    (leader, grandchild), (other, _) = servers
    assert grandchild is not None
    path = write_ledger(state_dir, dead_host(), [leader, other])
    killed = tracker.sweep_ledger()
    assert sorted(i.pid for i in killed) == sorted([leader.pid, other.pid])
    assert not any(i.is_alive() for i in (leader, grandchild, other))
    assert not path.exists()


def test_sweep_never_kills_a_pid_whose_create_time_differs(
    tracker: ProcessTracker, state_dir: Path, servers: list[tuple[ProcessIdentity, ProcessIdentity | None]]
) -> None:
    """A forged ledger entry (right PID, wrong create_time) leaves the process and its group alone."""
    (leader, grandchild), _ = servers
    assert grandchild is not None
    forged = ProcessIdentity(pid=leader.pid, create_time=leader.create_time - 3.0, pgid=leader.pgid)
    path = write_ledger(state_dir, dead_host(), [forged])
    assert tracker.sweep_ledger() == []
    assert leader.is_alive() and grandchild.is_alive()
    assert not path.exists()


def test_sweep_leaves_ledgers_of_live_hosts_alone(
    tracker: ProcessTracker, state_dir: Path, servers: list[tuple[ProcessIdentity, ProcessIdentity | None]]
) -> None:
    """A ledger whose host still runs (PID and create_time) is neither swept nor deleted."""
    (leader, _), _ = servers
    path = write_ledger(state_dir, ProcessIdentity.of(os.getpid()), [leader])
    assert tracker.sweep_ledger() == []
    assert leader.is_alive()
    assert path.exists()


def test_sweep_kills_carriers_of_a_dead_hosts_marker_and_keeps_the_ledger_of_a_live_host(
    tracker: ProcessTracker, state_dir: Path, marked: list[tuple[ProcessIdentity, ProcessIdentity]]
) -> None:
    """A dead host's escaped grandchildren die by its marker, ledger or not; a live host's stay."""
    (server, escapee), (other_server, other_escapee), (stranger, stranger_escapee) = marked
    marker = str(psutil.Process(server.pid).environ()[MARKER_ENV]).split("/")[0]
    stranger_marker = str(psutil.Process(stranger.pid).environ()[MARKER_ENV]).split("/")[0]
    os.kill(server.pid, signal.SIGKILL)  # closed long ago: nothing recorded but the marker
    wait_gone([server])
    dead = write_ledger(state_dir, dead_host(), [other_server], marker=marker)
    live = write_ledger(state_dir, ProcessIdentity.of(os.getpid()), [stranger], marker=stranger_marker)
    killed = tracker.sweep_ledger()
    assert [i.pid for i in killed] == [other_server.pid]
    assert not any(i.is_alive() for i in (escapee, other_server, other_escapee))
    assert not dead.exists()
    assert stranger.is_alive() and stranger_escapee.is_alive() and live.exists()


ORPHAN_MAKER = (
    "import subprocess, sys\n"
    f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({LIFETIME})'],"
    " stdout=subprocess.DEVNULL)\n"
    "print(child.pid, flush=True)\n"
)


def test_sweep_kills_orphans_in_a_dead_leaders_group_only_with_the_hosts_marker(
    tracker: ProcessTracker, state_dir: Path
) -> None:
    """Orphans of a dead leader are killed by a sweep only if they carry the dead host's marker."""
    # A marker of this run only: a sweep kills every process carrying its dead host's marker,
    # so a literal one shared with a second copy of the suite running at the same time let
    # that copy's sweep kill this test's leader before it printed (seen in a double CI run).
    ours = f"ours-{os.getpid()}-{time.monotonic_ns()}"
    orphans = []
    leaders = []
    try:
        for marker in (ours, None):
            env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
            if marker is not None:
                env[MARKER_ENV] = marker
            leader = subprocess.Popen(
                [sys.executable, "-c", ORPHAN_MAKER], stdout=subprocess.PIPE, start_new_session=True, env=env
            )
            leaders.append(ProcessIdentity.of(leader.pid, label=f"leader-{marker}"))
            out, _ = leader.communicate(timeout=30)  # the leader exits; its child stays in the group
            orphans.append(ProcessIdentity.of(int(out), label=f"orphan-{marker}"))
            assert orphans[-1].is_alive() and os.getpgid(orphans[-1].pid) == leader.pid
        write_ledger(state_dir, dead_host(), leaders, marker=ours)
        marked, unmarked = orphans
        killed = tracker.sweep_ledger()
        assert [i.label for i in killed] == [f"leader-{ours}"]
        assert not marked.is_alive()
        assert unmarked.is_alive()  # could be a stranger in a recycled group: left alone
    finally:
        force_kill(orphans)


def test_sweep_deletes_a_corrupt_ledger_and_ignores_an_unknown_version(
    tracker: ProcessTracker, state_dir: Path
) -> None:
    """A corrupt ledger is deleted with a warning; one of an unknown version is left alone."""
    directory = state_dir / "processes"
    directory.mkdir()
    corrupt = directory / "host-1.2.3.json"
    corrupt.write_text('{"version": 1, "host": ')
    future = directory / "host-4.5.6.json"
    future.write_text(json.dumps({"version": 99}))
    assert tracker.sweep_ledger() == []
    assert not corrupt.exists()
    assert future.exists()


def test_sweep_removes_only_stale_temporary_files(tracker: ProcessTracker, state_dir: Path) -> None:
    """Temporary ledger files older than a minute (a host died mid-write) are removed."""
    directory = state_dir / "processes"
    directory.mkdir()
    old = directory / ".host-1.2.3.json.7.tmp"
    fresh = directory / ".host-4.5.6.json.7.tmp"
    old.write_text("{")
    fresh.write_text("{")
    os.utime(old, (time.time() - 120, time.time() - 120))
    tracker.sweep_ledger()
    assert not old.exists()
    assert fresh.exists()


def test_sweep_reads_only_files_named_as_ledgers(tracker: ProcessTracker, state_dir: Path) -> None:
    """Only ``host-*.json`` is a ledger: other names in the directory are never read or deleted."""
    directory = state_dir / "processes"
    directory.mkdir()
    bystanders = [directory / name for name in ("host-1.2.3.json.bak", "other.json", ".host-1.2.3.json", "host-.jso")]
    for path in bystanders:
        path.write_text('{"version": 1, "host": ')  # corrupt: a ledger like it would be deleted
    corrupt = directory / "host-.json"  # the glob's * may be empty
    corrupt.write_text('{"version": 1, "host": ')
    assert tracker.sweep_ledger() == []
    assert all(path.exists() for path in bystanders)
    assert not corrupt.exists()
