"""The safety net off the critical path: the sidecar and the ledger started ahead of the
first spawn, and ledger writes that never hold up an event loop."""

from __future__ import annotations

import json
import os
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from pt_support import force_kill, spawn_server

from mcp_actors._process import ledger as _ledger
from mcp_actors._process.kill import Target
from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker

if TYPE_CHECKING:
    import outcome

BOUND = 30.0


def _host_ledger(tmp_path: Path) -> _ledger.Ledger:
    """A ledger of this process (as its host) in ``tmp_path``."""
    return _ledger.Ledger(path=tmp_path / "host-x.json", host=Target(os.getpid(), 1.0, os.getpid()), marker="x")


def ledger_contents(tracker: ProcessTracker) -> dict[str, object]:
    tracker.flush_ledger()
    contents: dict[str, object] = json.loads(tracker.ledger_path.read_text())
    return contents


def record_net_starts(tracker: ProcessTracker, calls: list[tuple[str, int]]) -> None:
    """Make each ``start_safety_net`` of ``tracker`` add ``("net", <its thread>)`` to ``calls`` first."""
    start = tracker.start_safety_net

    def recorded() -> None:
        calls.append(("net", threading.get_ident()))
        start()

    tracker.start_safety_net = recorded  # type: ignore[method-assign]


def test_start_safety_net_runs_the_sidecar_and_writes_the_marker_before_any_spawn(tracker: ProcessTracker) -> None:
    """start_safety_net: a live sidecar and a ledger naming the marker, with nothing spawned; idempotent."""
    assert tracker.reaper_pid is None and not tracker.ledger_path.exists()
    tracker.start_safety_net()
    reaper = tracker.reaper_pid
    assert reaper is not None and ProcessIdentity.of(reaper).is_alive()
    contents = ledger_contents(tracker)
    assert contents["marker"] == tracker.marker and contents["processes"] == []
    tracker.start_safety_net()
    assert tracker.reaper_pid == reaper
    tracker.kill_all_sync()
    assert tracker.reaper_pid is None and not tracker.ledger_path.exists()
    tracker.start_safety_net()  # a dismissed net starts over
    assert tracker.reaper_pid not in (None, reaper)


async def test_wait_safety_net_starts_the_net_from_trio(tracker: ProcessTracker) -> None:
    """wait_safety_net starts the sidecar (in a worker thread) when nothing started it yet."""
    await tracker.wait_safety_net()
    assert tracker.reaper_pid is not None
    assert ledger_contents(tracker)["processes"] == []


async def test_a_burst_of_spawns_waiting_for_the_net_shares_one_worker_job(tracker: ProcessTracker) -> None:
    """Twenty servers that start while the sidecar is still starting wait for one job, not twenty.

    Each job is a worker thread (a new one, when all are busy) blocked on the net's lock:
    twenty of them cost the host a thread start and a GIL hand-off each in the middle of a
    start-up (docs/performance.md).
    """
    calls: list[tuple[str, int]] = []
    record_net_starts(tracker, calls)
    waiting = 0

    async def wait() -> None:
        nonlocal waiting
        await tracker.wait_safety_net()
        waiting -= 1

    released = False
    tracker._net_lock.acquire()  # the runtime's own start of the net is under way
    try:
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                waiting += 1
                nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            lock_held = waiting == 20
            tracker._net_lock.release()  # the start is done; the nursery waits for the twenty
            released = True
    finally:
        if not released:
            tracker._net_lock.release()
    assert lock_held and waiting == 0
    assert len(calls) == 1
    assert tracker.reaper_pid is not None


async def test_waiters_of_a_net_start_that_failed_each_meet_the_failure(tracker: ProcessTracker) -> None:
    """A shared start that raised (a tracker used in a forked child) leaves no waiter to spawn without a net.

    Each waiter tries the start itself and gets the same refusal, as when each had its own job.
    """

    def refuse() -> None:
        raise RuntimeError("used in a forked child")

    tracker.start_safety_net = refuse  # type: ignore[method-assign]
    outcomes: list[str] = []

    async def wait() -> None:
        try:
            await tracker.wait_safety_net()
        except RuntimeError as exc:
            outcomes.append(str(exc))
        else:
            outcomes.append("returned without a net")

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(wait)
    assert outcomes == ["used in a forked child"] * 3


async def test_a_registration_on_the_event_loop_starts_no_thread_once_the_net_is_up(tracker: ProcessTracker) -> None:
    """The first registration on the event loop starts no thread: an idle one of trio's cache writes.

    A thread's start waits for the new thread to run; on the event loop, in the middle of a
    server's start, that wait is a GIL hand-off that held the loop for up to 3.8 ms
    (docs/performance.md).
    """
    await tracker.wait_safety_net()
    proc, identity, _ = spawn_server(label="s")
    try:
        before = {thread.ident for thread in threading.enumerate()}
        tracker.register(identity)
        assert {thread.ident for thread in threading.enumerate()} <= before
        contents = await trio.to_thread.run_sync(ledger_contents, tracker)
        assert [p["pid"] for p in contents["processes"]] == [identity.pid]  # type: ignore[attr-defined]
    finally:
        force_kill([identity])
        proc.wait()


async def test_a_stuck_disk_never_holds_up_a_registration_on_the_event_loop(
    tracker: ProcessTracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a trio task, register returns while the ledger write is stuck; the ledger catches up after."""
    release = threading.Event()
    writers: list[int] = []
    write = _ledger.Ledger.write

    def stuck_write(self: _ledger.Ledger, entries: object) -> None:
        writers.append(threading.get_ident())
        release.wait(BOUND)
        write(self, entries)  # type: ignore[arg-type]

    monkeypatch.setattr(_ledger.Ledger, "write", stuck_write)
    spawned = [spawn_server(label=f"s{n}") for n in range(3)]
    identities = [identity for _, identity, _ in spawned]
    try:
        for identity in identities:
            tracker.register(identity)  # returns although the disk is stuck
        assert tracker.tracked() == tuple(identities)
        release.set()
        contents = await trio.to_thread.run_sync(ledger_contents, tracker)
        assert [p["pid"] for p in contents["processes"]] == [i.pid for i in identities]  # type: ignore[attr-defined]
        assert writers and threading.get_ident() not in writers
        assert len(writers) <= 2  # a burst costs the write in flight and one with the newest state
    finally:
        release.set()
        force_kill(identities)
        for proc, _, _ in spawned:
            proc.wait()


def test_a_removed_ledger_is_never_written_again_by_a_late_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change still pending when the ledger is removed (a clean exit) is dropped, not written after."""
    ledger = _host_ledger(tmp_path)
    writer = _ledger.LedgerWriter(ledger)
    started, release = threading.Event(), threading.Event()
    write = _ledger.Ledger.write

    def slow_write(self: _ledger.Ledger, entries: object) -> None:
        started.set()
        release.wait(BOUND)
        write(self, entries)  # type: ignore[arg-type]

    monkeypatch.setattr(_ledger.Ledger, "write", slow_write)

    def entry(pid: int) -> _ledger.Entry:
        return _ledger.Entry(target=Target(pid, 1.0, pid), label="s")

    writer.submit([entry(101)], wait=False)
    assert started.wait(BOUND)
    writer.submit([entry(102)], wait=False)  # pending behind the stuck write
    remover = threading.Thread(target=writer.remove)
    remover.start()
    release.set()
    remover.join(BOUND)
    assert not remover.is_alive()
    writer.flush()
    assert not ledger.path.exists()


def test_a_write_that_raises_is_logged_and_the_next_change_is_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in a background write (not an I/O error: those Ledger.write logs itself) must not
    leave the writer believing a drain still runs: the next change starts a new one."""
    ledger = _host_ledger(tmp_path)
    writer = _ledger.LedgerWriter(ledger)
    write = _ledger.Ledger.write
    calls: list[int] = []
    written, logged = threading.Event(), threading.Event()

    def first_write_raises(self: _ledger.Ledger, entries: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        write(self, entries)  # type: ignore[arg-type]
        written.set()

    log_failure = _ledger._log_failure

    def log_then_tell(result: outcome.Outcome[None]) -> None:
        log_failure(result)
        logged.set()

    monkeypatch.setattr(_ledger.Ledger, "write", first_write_raises)
    monkeypatch.setattr(_ledger, "_log_failure", log_then_tell)
    writer.submit([_ledger.Entry(target=Target(101, 1.0, 101), label="a")], wait=False)
    assert logged.wait(BOUND)
    assert "writing the process ledger failed" in caplog.text
    writer.submit([_ledger.Entry(target=Target(102, 1.0, 102), label="b")], wait=False)
    assert written.wait(BOUND)
    assert [p["pid"] for p in json.loads(ledger.path.read_text())["processes"]] == [102]
    assert "a bug" in caplog.text


def test_without_a_thread_to_start_a_change_is_written_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A registration never raises for want of a thread (the process is at its thread limit):
    the ledger is written in the caller's thread, and the next change tries a worker again."""
    ledger = _host_ledger(tmp_path)
    writer = _ledger.LedgerWriter(ledger)
    start_thread_soon = trio.lowlevel.start_thread_soon
    refusals: list[int] = []

    def no_thread(*args: object, **kwargs: object) -> None:
        refusals.append(1)
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(trio.lowlevel, "start_thread_soon", no_thread)
    writer.submit([_ledger.Entry(target=Target(101, 1.0, 101), label="a")], wait=False)
    assert refusals == [1] and "no thread for the process ledger" in caplog.text
    assert [p["pid"] for p in json.loads(ledger.path.read_text())["processes"]] == [101]
    monkeypatch.setattr(trio.lowlevel, "start_thread_soon", start_thread_soon)
    writer.submit([_ledger.Entry(target=Target(102, 1.0, 102), label="b")], wait=False)
    writer.flush()
    assert [p["pid"] for p in json.loads(ledger.path.read_text())["processes"]] == [102]


async def test_the_runtimes_background_jobs_run_in_order_and_a_failure_spares_the_next(
    tracker: ProcessTracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The runtime's worker reads the config, starts the net, then sweeps: a failing net is
    logged (never raised into the tree), and the sweep after it still runs."""
    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.runtime import open_runtime

    # No stdio server: the runtime does not wait for the net (a spawn would, and meet the failure).
    record = {"id": new_server_id(), "name": "s", "type": "http", "config": {"url": "http://127.0.0.1:9/mcp"}}
    ConfigStore(tmp_path / "cfg.json").save([record_from_json_dict(record)])
    ran: list[str] = []

    def broken() -> None:
        ran.append("net")
        raise OSError("no room on the disk")

    def swept() -> list[ProcessIdentity]:
        ran.append("sweep")
        return []

    tracker.start_safety_net = broken  # type: ignore[method-assign]
    tracker.sweep_ledger = swept  # type: ignore[method-assign]
    monkeypatch.setattr(ProcessTracker, "get_instance", classmethod(lambda cls: tracker))
    with trio.fail_after(BOUND):
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False) as runtime:
            while "sweep" not in ran:  # noqa: ASYNC110 - bounded by fail_after
                await trio.sleep(0.01)
            tracker_child = runtime.root.child_value("process-tracker")
    assert ran == ["net", "sweep"]
    assert tracker_child is tracker  # the tracker's child never restarted
    assert "starting the reaper sidecar failed" in caplog.text and "no room on the disk" in caplog.text


class _HeldClock:
    """A writer's clock and sleep, moved by the test: each sleep waits until the test ends it.

    ``sleeping`` gets the seconds of each sleep the drain begins; :meth:`wake` ends the
    sleep in progress with the clock where it would have ended.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeping: queue.Queue[float] = queue.Queue()
        self._woken = threading.Event()
        self._until = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self._until = self.now + seconds
        self._woken.clear()
        self.sleeping.put(seconds)
        assert self._woken.wait(BOUND)

    def next_sleep(self) -> float:
        return self.sleeping.get(timeout=BOUND)

    def wake(self) -> None:
        self.now = self._until
        self._woken.set()


def _written_pids(monkeypatch: pytest.MonkeyPatch) -> tuple[list[list[int]], threading.Event]:
    """Record every write's PIDs; the event is set after each write."""
    write = _ledger.Ledger.write
    written: list[list[int]] = []
    wrote = threading.Event()

    def counted_write(self: _ledger.Ledger, entries: object) -> None:
        written.append([e.target.pid for e in entries])  # type: ignore[attr-defined]
        write(self, entries)  # type: ignore[arg-type]
        wrote.set()

    monkeypatch.setattr(_ledger.Ledger, "write", counted_write)
    return written, wrote


def _entries(*pids: int) -> list[_ledger.Entry]:
    return [_ledger.Entry(target=Target(pid, 1.0, pid), label="s") for pid in pids]


def test_a_burst_within_the_settle_is_one_write_after_one_sleep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty servers register over ~50-200 ms: their changes share one write, and the worker
    wakes once for it. Each wake in the middle of a start takes the GIL from the busy event
    loop: waking every 50 ms to see whether the burst had gone quiet cost a 20-server start
    ~5 ms of CPU (docs/performance.md). Fails on 68d3010 (a second sleep)."""
    ledger = _host_ledger(tmp_path)
    clock = _HeldClock()
    writer = _ledger.LedgerWriter(ledger, settle=1.0, clock=clock.monotonic, sleep=clock.sleep)
    written, wrote = _written_pids(monkeypatch)
    writer.submit(_entries(101), wait=False)
    assert clock.next_sleep() == 1.0
    for at, pids in ((0.5, (101, 102)), (0.9, (101, 102, 103))):
        clock.now = at
        writer.submit(_entries(*pids), wait=False)
    clock.wake()
    assert wrote.wait(BOUND)
    assert written == [[101, 102, 103]]
    assert clock.sleeping.empty()  # no second sleep: the write came at the first wake
    assert [p["pid"] for p in json.loads(ledger.path.read_text())["processes"]] == [101, 102, 103]


def test_a_change_during_a_write_waits_its_own_settle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change that comes while a write is under way is not written straight after it (two
    writes back to back in the middle of a start) but a settle after it came."""
    ledger = _host_ledger(tmp_path)
    clock = _HeldClock()
    writer = _ledger.LedgerWriter(ledger, settle=1.0, clock=clock.monotonic, sleep=clock.sleep)
    write = _ledger.Ledger.write
    written: list[list[int]] = []
    writing, release, second = threading.Event(), threading.Event(), threading.Event()

    def held_write(self: _ledger.Ledger, entries: object) -> None:
        written.append([e.target.pid for e in entries])  # type: ignore[attr-defined]
        if len(written) == 1:
            writing.set()
            assert release.wait(BOUND)
        write(self, entries)  # type: ignore[arg-type]
        if len(written) == 2:
            second.set()

    monkeypatch.setattr(_ledger.Ledger, "write", held_write)
    writer.submit(_entries(101), wait=False)
    assert clock.next_sleep() == 1.0
    clock.wake()
    assert writing.wait(BOUND)
    clock.now = 1.2
    writer.submit(_entries(101, 102), wait=False)  # while the first write is under way
    release.set()
    assert clock.next_sleep() == pytest.approx(1.0)  # a settle after the change, not at once
    assert written == [[101]]
    clock.wake()
    assert second.wait(BOUND)
    assert written == [[101], [101, 102]]
    assert clock.now == pytest.approx(2.2)


def test_flush_writes_at_once_without_waiting_out_the_settle(tmp_path: Path) -> None:
    """The exit path and ``flush_ledger`` must not wait for a burst to settle."""
    ledger = _host_ledger(tmp_path)
    writer = _ledger.LedgerWriter(ledger, settle=BOUND)
    writer.submit([_ledger.Entry(target=Target(101, 1.0, 101), label="a")], wait=False)
    writer.flush()
    assert [p["pid"] for p in json.loads(ledger.path.read_text())["processes"]] == [101]


async def test_a_registration_on_the_event_loop_builds_no_ledger_entries_there(
    tracker: ProcessTracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each registration used to build an entry per tracked server on the loop: a start of N
    servers built N²/2 of them there. Now the writer builds them, in its own thread."""
    tracker.start_safety_net()
    built_in: list[int] = []
    entry = _ledger.Entry

    def counted_entry(**fields: object) -> _ledger.Entry:
        built_in.append(threading.get_ident())
        return entry(**fields)  # type: ignore[arg-type]

    monkeypatch.setattr(_ledger, "Entry", counted_entry)
    spawned = [spawn_server(label=f"s{n}") for n in range(3)]
    identities = [identity for _, identity, _ in spawned]
    try:
        for identity in identities:
            tracker.register(identity)
        loop_thread = threading.get_ident()
        assert loop_thread not in built_in
        contents = await trio.to_thread.run_sync(ledger_contents, tracker)
        assert [p["pid"] for p in contents["processes"]] == [i.pid for i in identities]  # type: ignore[attr-defined]
        assert loop_thread not in built_in
    finally:
        force_kill(identities)
        for proc, _, _ in spawned:
            proc.wait()


@pytest.mark.parametrize(("server_type", "waits"), [("stdio", True), ("http", False)])
async def test_open_runtime_finishes_the_net_before_building_the_tree_only_for_stdio_servers(
    tracker: ProcessTracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server_type: str, waits: bool
) -> None:
    """With an active stdio server configured, open_runtime returns with the net up (it waits while idle).

    Waiting once the loop is busy cost the first spawn up to ~12 ms (the net's thread waits
    for the GIL after each system call). A config without stdio servers never waits for it.
    """
    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.runtime import open_runtime

    config = {"command": "true"} if server_type == "stdio" else {"url": "http://127.0.0.1:9/mcp"}
    record = {"id": new_server_id(), "name": "s", "type": server_type, "config": config}
    ConfigStore(tmp_path / "cfg.json").save([record_from_json_dict(record)])
    began, release = threading.Event(), threading.Event()
    start = tracker.start_safety_net

    def held() -> None:
        began.set()
        release.wait(BOUND)
        start()

    tracker.start_safety_net = held  # type: ignore[method-assign]
    monkeypatch.setattr(ProcessTracker, "get_instance", classmethod(lambda cls: tracker))
    opened: list[bool] = []

    async def open_it() -> None:
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False):
            opened.append(tracker.reaper_pid is not None)

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(open_it)
            await trio.to_thread.run_sync(began.wait, BOUND)
            if waits:
                await trio.testing.wait_all_tasks_blocked()
                assert opened == []  # waiting for the net
            else:
                while not opened:  # noqa: ASYNC110 - bounded by fail_after
                    await trio.sleep(0.01)
                assert opened == [False]  # returned while the net is still held
            release.set()
    assert opened == [waits]


async def test_open_runtime_waits_for_a_stuck_net_only_for_a_bounded_time(
    tracker: ProcessTracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """A net that does not finish (a stuck disk under the ledger) never holds open_runtime for good.

    The runtime's wait gives up after NET_WAIT_BOUND and serves; a spawn still waits for
    the net itself before it starts a server.
    """
    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.runtime import NET_WAIT_BOUND, open_runtime

    record = {"id": new_server_id(), "name": "s", "type": "stdio", "config": {"command": "true"}}
    ConfigStore(tmp_path / "cfg.json").save([record_from_json_dict(record)])
    release = threading.Event()
    start = tracker.start_safety_net

    def stuck() -> None:
        release.wait(BOUND)
        start()

    tracker.start_safety_net = stuck  # type: ignore[method-assign]
    monkeypatch.setattr(ProcessTracker, "get_instance", classmethod(lambda cls: tracker))
    try:
        began = trio.current_time()
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False):
            waited = trio.current_time() - began
            assert tracker.reaper_pid is None  # still stuck: the runtime serves without it
            release.set()  # the runtime's close waits for its background job: let it end
    finally:
        release.set()
    assert NET_WAIT_BOUND <= waited < NET_WAIT_BOUND + 1.0


async def test_open_runtime_reads_the_config_and_starts_the_net_in_one_worker_job_read_first(
    tracker: ProcessTracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config read and the net's start share one worker thread, the read first, each run once.

    Side by side in two threads they fought for the GIL: the read is Python, the sidecar's
    start a run of system calls that each wait for the GIL on their way back. The sidecar's
    spawn took 1.5-2.1 ms beside the read against 0.25 alone, and the first server waited
    for both (docs/performance.md and 27). Also, the runtime's wait for the net starts no
    job of its own: it joins the one under way.
    """
    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.runtime import open_runtime

    record = {"id": new_server_id(), "name": "s", "type": "stdio", "config": {"command": "true"}}
    ConfigStore(tmp_path / "cfg.json").save([record_from_json_dict(record)])
    ran: list[tuple[str, int]] = []
    load = ConfigStore.load_with_fingerprint

    def recorded_load(self: ConfigStore) -> object:
        ran.append(("read", threading.get_ident()))
        return load(self)

    monkeypatch.setattr(ConfigStore, "load_with_fingerprint", recorded_load)
    record_net_starts(tracker, ran)
    monkeypatch.setattr(ProcessTracker, "get_instance", classmethod(lambda cls: tracker))
    with trio.fail_after(BOUND):
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False):
            assert tracker.reaper_pid is not None
    assert [what for what, _ in ran] == ["read", "net"]
    assert ran[0][1] == ran[1][1] != threading.get_ident()


async def test_start_safety_net_after_runs_its_job_first_and_waiters_join_it(tracker: ProcessTracker) -> None:
    """Waiters that arrive while the job's first part runs start no job: one start of the net in all."""
    calls: list[tuple[str, int]] = []
    record_net_starts(tracker, calls)
    began, release = threading.Event(), threading.Event()

    def first() -> None:
        calls.append(("first", threading.get_ident()))
        began.set()
        release.wait(BOUND)

    returned = 0

    async def wait() -> None:
        nonlocal returned
        await tracker.wait_safety_net()
        returned += 1

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tracker.start_safety_net_after, first)
            await trio.to_thread.run_sync(began.wait, BOUND)
            for _ in range(5):
                nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert returned == 0 and tracker.reaper_pid is None
            release.set()
    assert returned == 5
    assert [what for what, _ in calls] == ["first", "net"]
    assert calls[0][1] == calls[1][1]
    assert tracker.reaper_pid is not None


async def test_start_safety_net_after_a_failing_first_part_still_starts_the_net(tracker: ProcessTracker) -> None:
    """The job's own failure is the caller's to see; the net does not depend on it."""

    def first() -> None:
        raise OSError("no such file")

    with trio.fail_after(BOUND), pytest.raises(OSError, match="no such file"):
        await tracker.start_safety_net_after(first)
    assert tracker.reaper_pid is not None
    ran: list[str] = []
    await tracker.start_safety_net_after(lambda: ran.append("first"))  # the net is up: only the job runs
    assert ran == ["first"]


async def test_a_runtime_start_whose_config_read_never_ran_is_answered(tracker: ProcessTracker, tmp_path: Path) -> None:
    """The tracker child's job cancelled before its thread ran still answers open_runtime's wait."""
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.runtime import _FirstRead, _in_background

    first_read = _FirstRead(ConfigStore(tmp_path / "cfg.json"))
    with trio.CancelScope() as scope:
        scope.cancel()
        await _in_background(tracker, False, first_read)
    with trio.fail_after(BOUND), pytest.raises(RuntimeError, match="stopped before its config was read"):
        await first_read.wait()
    assert first_read.take() is None  # taken once: a restarted tracker child reads nothing
