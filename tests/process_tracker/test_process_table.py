"""The kill ladder's process-table snapshot: read straight from /proc, as the kernel sees it.

Every stop of a stdio server walks the whole table (parents, groups, the tag in each
process's environment), so the reads are lean; these tests pin that the lean reads say
what psutil says about real processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import psutil
import pytest

from mcp_actors._process import kill as _kill


def _spawn(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A child in its own session, returned once it runs: ``Popen`` returns while the kernel
    may still be laying out the new program's environment (its /proc file reads empty)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    assert child.stdout is not None
    child.stdout.readline()
    return child


def _stop(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait()
    for pipe in (child.stdin, child.stdout):
        if pipe is not None:
            pipe.close()


def test_the_scan_gives_each_process_its_parent_and_group() -> None:
    """A child in its own session, the host and PID 1 are in the scan with psutil's parent and group."""
    child = _spawn(dict(os.environ))
    try:
        rows = {pid: (ppid, pgid) for pid, ppid, pgid in _kill._scan()}
        for pid in (child.pid, os.getpid(), 1):
            assert rows[pid] == (psutil.Process(pid).ppid(), os.getpgid(pid))
        assert rows[child.pid] == (os.getpid(), child.pid)
    finally:
        _stop(child)


def test_the_marker_is_read_wherever_it_sits_in_the_environment() -> None:
    """First, last or alone in the environment, the marker's whole value; none, or a gone PID: ``None``."""
    value = "host-1/tag (x=y)"
    first = {_kill.MARKER_ENV: value, **os.environ}
    last = {**{k: v for k, v in os.environ.items() if k != _kill.MARKER_ENV}, _kill.MARKER_ENV: value}
    alone = {_kill.MARKER_ENV: value}
    # A variable whose name ends with the marker's is not the marker.
    lookalike = {f"X{_kill.MARKER_ENV}": "not-ours", "PATH": os.environ.get("PATH", "")}
    children = {name: _spawn(env) for name, env in (("first", first), ("last", last), ("alone", alone))}
    stranger = _spawn(lookalike)
    try:
        for name, child in children.items():
            assert _kill.marker_of(child.pid) == value, name
        assert _kill.marker_of(stranger.pid) is None
    finally:
        for child in [*children.values(), stranger]:
            _stop(child)
    assert _kill.marker_of(stranger.pid) is None  # reaped: no such process


def test_a_long_environment_is_read_to_its_end() -> None:
    """A marker behind 300 KiB of other variables is found (one read would stop at a page)."""
    env = {f"FILLER_{n}": "x" * 1000 for n in range(300)}
    env[_kill.MARKER_ENV] = "deep"
    child = _spawn(env)
    try:
        assert _kill.marker_of(child.pid) == "deep"
        table = _kill._ProcessTable(markers=True)
        assert [proc.pid for proc in table.carriers("deep", exact=True)] == [child.pid]
    finally:
        _stop(child)


def test_kills_at_once_share_walks_and_each_sees_what_existed_when_it_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sixteen threads released together, each with a fresh child: each snapshot holds its
    child's marker (no walk older than the ask), and they took fewer walks than callers.

    The first walk lasts until every caller has asked (as a walk of a busy machine's table
    does), so the sharing does not depend on how the threads happen to be scheduled.
    """
    walks = _kill._SharedWalks()
    count = 16
    barrier = threading.Barrier(count)
    children: list[subprocess.Popen[bytes]] = []
    missing: list[str] = []
    lock = threading.Lock()
    asked = threading.Semaphore(0)
    first_walk = threading.Lock()
    real_table = _kill._ProcessTable

    class SlowFirstWalk(real_table):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if first_walk.acquire(blocking=False):  # the first walk waits for every caller to ask
                for _ in range(count):
                    assert asked.acquire(timeout=60), "a caller never asked for a walk"
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_kill, "_ProcessTable", SlowFirstWalk)

    def kill_like(n: int) -> None:
        child = _spawn({_kill.MARKER_ENV: f"walk-test-{os.getpid()}/{n}"})
        with lock:
            children.append(child)
        barrier.wait(timeout=60)
        asked.release()
        try:
            table = walks.table()
        except Exception as exc:  # a thread's failure fails the test, not only a warning
            with lock:
                missing.append(f"child {n}: {exc!r}")
            return
        if [proc.pid for proc in table.carriers(f"walk-test-{os.getpid()}/{n}", exact=True)] != [child.pid]:
            with lock:
                missing.append(f"child {n} (pid {child.pid}) not in its snapshot")

    threads = [threading.Thread(target=kill_like, args=(n,)) for n in range(count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        for child in children:
            _stop(child)
    assert missing == []
    assert 1 <= walks.walks < count


def test_a_kill_never_takes_a_walk_begun_before_it_asked() -> None:
    """After a walk, a child spawned and then asked about is in the next snapshot (a new walk)."""
    walks = _kill._SharedWalks()
    walks.table()
    child = _spawn({_kill.MARKER_ENV: "after-the-walk"})
    try:
        table = walks.table()
        assert [proc.pid for proc in table.carriers("after-the-walk", exact=True)] == [child.pid]
        assert walks.walks == 2
    finally:
        _stop(child)


def test_a_forked_child_walks_even_if_the_parent_was_mid_walk() -> None:
    """A child forked while another thread held the walks' lock still gets a table (its own lock)."""
    import multiprocessing

    ready = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with _kill._walks._cond:
            ready.set()
            release.wait(timeout=60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert ready.wait(timeout=60)
        context = multiprocessing.get_context("fork")
        with context.Pool(1) as pool:
            walks = pool.apply_async(_walks_in_child).get(timeout=60)
        assert walks == 1
    finally:
        release.set()
        holder.join(timeout=60)


def _walks_in_child() -> int:
    _kill._walks.table()
    return _kill._walks.walks


def test_unexeced_children_are_session_leaders_running_the_hosts_command_until_they_exec() -> None:
    """A forked child that called ``setsid`` runs this process's command line until it execs:
    found by this process's digest, and no longer once it has exec'd; a child that is no
    session leader is not one of a spawn's children."""
    digest = _kill.command_digest()
    assert digest is not None and digest == _kill.command_digest(os.getpid())
    read_end, write_end = os.pipe()
    leader = os.fork()
    if leader == 0:  # only system calls until the exec
        os.setsid()
        os.read(read_end, 1)
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(30)"])
    other = os.fork()
    if other == 0:
        os.read(read_end, 1)
        os._exit(0)
    try:
        deadline = time.monotonic() + 10.0  # until the leader's setsid has run
        while leader not in _kill.unexeced_children(digest) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert leader in _kill.unexeced_children(digest)
        assert other not in _kill.unexeced_children(digest)
        os.write(write_end, b"xx")  # both go on: the leader execs, the other exits
        assert os.waitpid(other, 0)[1] == 0
        deadline = time.monotonic() + 10.0
        while _kill.unexeced_children(digest, among=[leader]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _kill.unexeced_children(digest, among=[leader]) == set()
        assert psutil.Process(leader).cmdline()[1:] == ["-c", "import time; time.sleep(30)"]
    finally:
        os.kill(leader, 9)
        os.waitpid(leader, 0)
        os.close(read_end)
        os.close(write_end)
