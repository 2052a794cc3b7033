"""The safety net off the critical path: the sidecar and the ledger started ahead of the
first spawn, and ledger writes that never hold up an event loop."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import trio
from pt_support import force_kill, spawn_server

from mcp_actors import _ledger
from mcp_actors._kill import Target
from mcp_actors.process_tracker import ProcessIdentity, ProcessTracker

BOUND = 30.0


def ledger_contents(tracker: ProcessTracker) -> dict[str, object]:
    tracker.flush_ledger()
    contents: dict[str, object] = json.loads(tracker.ledger_path.read_text())
    return contents


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
    ledger = _ledger.Ledger(path=tmp_path / "host-x.json", host=Target(os.getpid(), 1.0, os.getpid()), marker="x")
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


def test_the_runtimes_background_jobs_run_in_order_and_a_failure_spares_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The runtime starts the net, then sweeps, in one worker thread: a failing job is
    logged (never raised into the tree) and the job after it still runs."""
    from mcp_actors.runtime import _run_jobs

    ran: list[str] = []

    def broken() -> None:
        ran.append("net")
        raise OSError("no room on the disk")

    _run_jobs([(broken, "starting the reaper sidecar"), (lambda: ran.append("sweep"), "sweeping the process ledger")])
    assert ran == ["net", "sweep"]
    assert "starting the reaper sidecar failed" in caplog.text and "no room on the disk" in caplog.text
