"""ProcessTracker in this process: identities, registration and the ledger, closing
connections (graceful, hanging, failing, cancelled), close_all, kill_all_sync, fork."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import attrs
import pytest
import trio
from pt_support import SERVER_WITH_GRANDCHILD_CODE, force_kill, spawn_server, wait_gone

from mcp_actors._process import tracker as process_tracker
from mcp_actors._process.tracker import (
    ProcessIdentity,
    ProcessTracker,
    TrackedConnection,
    kill_process_tree,
)
from mcp_actors.errors import ServerStartFailed


@attrs.define(eq=False)
class HangingConnection:
    """A connection whose graceful close never finishes."""

    process: ProcessIdentity | None
    close_started: bool = False
    close_cancelled: bool = False

    async def aclose(self) -> None:
        self.close_started = True
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.close_cancelled = True
            raise


@attrs.define(eq=False)
class FailingConnection:
    """A connection whose graceful close raises."""

    process: ProcessIdentity | None

    async def aclose(self) -> None:
        raise OSError("the pipe is gone")


@attrs.define(eq=False)
class StdinConnection:
    """A real stdio-style connection: closing stdin makes the server exit by itself."""

    proc: trio.Process
    process: ProcessIdentity | None

    async def aclose(self) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()
        await self.proc.wait()


def ledger_pids(tracker: ProcessTracker) -> list[int]:
    tracker.flush_ledger()  # from a trio task the ledger is written in the background
    data = json.loads(tracker.ledger_path.read_text())
    return [entry["pid"] for entry in data["processes"]]


# ----------------------------------------------------------------------------- identity


def test_identity_of_a_live_process_is_alive_until_it_is_reaped() -> None:
    """ProcessIdentity.of reads pid, create_time and group; a zombie or reaped process is dead."""
    proc, identity, _ = spawn_server()
    assert identity.pid == proc.pid and identity.pgid == proc.pid and identity.create_time > 0
    assert identity.is_alive()
    proc.kill()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    assert not identity.is_alive()
    proc.wait()
    assert not identity.is_alive()


def test_identity_with_another_create_time_is_not_the_process() -> None:
    """A PID with a different create_time (a recycled PID) is never taken for the process."""
    proc, identity, _ = spawn_server()
    try:
        impostor = attrs.evolve(identity, create_time=identity.create_time - 1.0)
        assert not impostor.is_alive()
        kill_process_tree(impostor, term_grace=0.1)
        assert identity.is_alive()
    finally:
        proc.kill()
        proc.wait()


def test_identity_of_a_missing_pid_and_bad_fields_are_rejected() -> None:
    """of() of a vanished PID raises ProcessLookupError; invalid fields raise ValueError."""
    proc, identity, _ = spawn_server()
    proc.kill()
    proc.wait()
    with pytest.raises(ProcessLookupError, match=f"no process with pid {identity.pid}"):
        ProcessIdentity.of(identity.pid)
    with pytest.raises(ValueError, match="pid must be > 0"):
        ProcessIdentity(pid=0, create_time=1.0, pgid=1)
    with pytest.raises(ValueError, match="create_time must be a finite number"):
        ProcessIdentity(pid=1, create_time=float("nan"), pgid=1)


# ----------------------------------------------------------------------------- registration


def test_register_records_the_ledger_and_unregister_removes_the_entry(tracker: ProcessTracker) -> None:
    """register/unregister keep memory and the on-disk ledger (mode 0600) in step; the file stays."""
    procs = [spawn_server(label=f"s{n}") for n in range(2)]
    try:
        a, b = (identity for _, identity, _ in procs)
        tracker.register(a)
        tracker.register(b)
        tracker.register(a)  # idempotent
        assert tracker.tracked() == (a, b)
        assert ledger_pids(tracker) == [a.pid, b.pid]
        assert tracker.ledger_path.stat().st_mode & 0o777 == 0o600
        assert not list(tracker.ledger_path.parent.glob("*.tmp"))
        tracker.unregister(a)
        tracker.unregister(a)  # unknown now: ignored
        assert tracker.tracked() == (b,)
        assert ledger_pids(tracker) == [b.pid]
        tracker.unregister(b)
        assert tracker.tracked() == ()
        # The ledger outlives the last registration: its marker is what a later sweep
        # needs to find an escaped grandchild of a server closed long ago.
        assert ledger_pids(tracker) == []
        assert all(identity.is_alive() for identity in (a, b))
    finally:
        for proc, _, _ in procs:
            proc.kill()
            proc.wait()


def test_register_survives_an_unwritable_ledger(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A ledger that cannot be written is reported once; registration and the sidecar still work."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    tracker = ProcessTracker(state_dir=blocker, term_grace=0.3)
    proc, identity, _ = spawn_server()
    try:
        with caplog.at_level("WARNING", logger="mcp_actors._process.tracker"):
            tracker.register(identity)
            tracker.unregister(identity)
            tracker.register(identity)
        warnings = [r for r in caplog.records if "cannot write the process ledger" in r.getMessage()]
        assert len(warnings) == 1
        assert tracker.tracked() == (identity,)
        assert tracker.reaper_pid is not None
        tracker.kill_all_sync()
        assert not identity.is_alive()
    finally:
        force_kill([identity])
        proc.wait()


def test_register_rejects_anything_but_an_identity(tracker: ProcessTracker) -> None:
    """register() of a bare PID is a TypeError: a PID is never tracked without its create_time."""
    with pytest.raises(TypeError, match="register takes a ProcessIdentity, got int"):
        tracker.register(os.getpid())  # type: ignore[arg-type]


def test_kill_all_sync_kills_every_tree_and_dismisses_the_sidecar(tracker: ProcessTracker) -> None:
    """kill_all_sync kills all trees (grandchild too), removes the ledger and stops the sidecar."""
    proc, leader, grandchild = spawn_server(grandchild=True)
    other_proc, other, _ = spawn_server()
    assert grandchild is not None
    try:
        tracker.register(leader)
        tracker.register(other)
        reaper = ProcessIdentity.of(tracker.reaper_pid or 0)
        tracker.kill_all_sync()
        assert not any(i.is_alive() for i in (leader, grandchild, other))
        assert not reaper.is_alive()
        assert tracker.tracked() == ()
        assert not tracker.ledger_path.exists()
        assert tracker.reaper_pid is None
    finally:
        force_kill([leader, grandchild, other])
        proc.wait()
        other_proc.wait()


def test_a_dead_sidecar_is_replaced_and_told_everything(tracker: ProcessTracker) -> None:
    """If the sidecar dies, the next registration starts a new one that knows every tree."""
    procs = [spawn_server(label=f"s{n}") for n in range(2)]
    (_, a, _), (_, b, _) = procs
    try:
        tracker.register(a)
        first = ProcessIdentity.of(tracker.reaper_pid or 0)
        os.kill(first.pid, 9)
        wait_gone([first])
        tracker.register(b)
        assert tracker.reaper_pid not in (None, first.pid)
        assert not first.is_alive()
        # Closing our end is what a host crash looks like to the new sidecar.
        sidecar = tracker._sidecar
        assert sidecar is not None
        os.close(tracker._sidecar_fd)
        tracker._sidecar_fd = -1
        sidecar.wait(timeout=10)
        assert not a.is_alive() and not b.is_alive()
    finally:
        for proc, _, _ in procs:
            proc.kill()
            proc.wait()


def test_a_registration_after_the_exit_hook_began_is_killed_and_refused(tracker: ProcessTracker) -> None:
    """Once close_sync (the exit hook) began, a newly spawned server is killed with its tree and refused."""
    tracker.close_sync()
    assert tracker.closing
    proc, leader, grandchild = spawn_server(grandchild=True, env={**os.environ, **tracker.child_env()})
    assert grandchild is not None
    try:
        with pytest.raises(ServerStartFailed, match="not started because the host is exiting"):
            tracker.register(leader)
        proc.wait(timeout=10)
        wait_gone([leader, grandchild])
        assert tracker.tracked() == ()
    finally:
        force_kill([leader, grandchild])


def test_kill_all_sync_kills_a_grandchild_that_escaped_into_its_own_session(tracker: ProcessTracker) -> None:
    """A double-forked setsid grandchild is found by the marker it inherited and killed."""
    proc, leader, escapee = spawn_server(escapee=True, env={**os.environ, **tracker.child_env()})
    assert escapee is not None
    try:
        assert os.getsid(escapee.pid) != os.getsid(leader.pid) and os.getpgid(escapee.pid) != leader.pid
        tracker.register(leader)
        tracker.kill_all_sync()
        assert not leader.is_alive() and not escapee.is_alive()
        assert not tracker.ledger_path.exists()
        assert tracker.reaper_pid is None
    finally:
        force_kill([leader, escapee])
        proc.wait(timeout=10)


def test_a_registration_records_the_tag_its_spawner_gives_without_reading_the_process(
    tracker: ProcessTracker,
) -> None:
    """The spawner knows the tag it put in the environment: given, it is the one recorded.

    The server here was started without any tag, so a tag read back from
    ``/proc/<pid>/environ`` would be ``None``: the given one is used, and nothing is read.
    """
    proc, leader, _ = spawn_server()
    try:
        tracker.register(leader, tag="given/1")
        assert tracker.target_of(leader).tag == "given/1"
        tracker.register(leader)  # no tag given: read from the process, which has none
        assert tracker.target_of(leader).tag is None
    finally:
        force_kill([leader])
        proc.wait(timeout=10)


async def test_close_connection_kills_only_its_own_servers_escaped_grandchild(tracker: ProcessTracker) -> None:
    """Closing one connection kills its server's setsid grandchild (by tag), not another server's."""
    spawned = [spawn_server(escapee=True, env={**os.environ, **tracker.child_env()}, label=f"s{n}") for n in range(2)]
    (proc_a, a, escapee_a), (proc_b, b, escapee_b) = spawned
    assert escapee_a is not None and escapee_b is not None
    try:
        for identity in (a, b):
            tracker.register(identity)
        await tracker.close_connection(FailingConnection(a), close_grace=1)
        assert not a.is_alive() and not escapee_a.is_alive()
        assert b.is_alive() and escapee_b.is_alive()
    finally:
        force_kill([a, escapee_a, b, escapee_b])
        proc_a.wait(timeout=10)
        proc_b.wait(timeout=10)


# ----------------------------------------------------------------------------- closing


async def test_close_connection_kills_the_tree_after_grace_when_aclose_hangs(
    tracker: ProcessTracker, autojump_clock: trio.testing.MockClock
) -> None:
    """A hanging graceful close is cut off after exactly `grace`, then the whole tree is killed."""
    proc, leader, grandchild = spawn_server(grandchild=True)
    assert grandchild is not None
    connection = HangingConnection(leader)
    try:
        tracker.track(connection)
        assert tracker.tracked() == (leader,)
        start = trio.current_time()
        await tracker.close_connection(connection, close_grace=0.5)
        assert trio.current_time() - start == pytest.approx(0.5)
        assert connection.close_started and connection.close_cancelled
        assert not leader.is_alive() and not grandchild.is_alive()
        assert tracker.tracked() == ()
        assert ledger_pids(tracker) == []
    finally:
        force_kill([leader, grandchild])
        proc.wait()


async def test_close_connection_after_a_graceful_close_still_kills_orphans(
    tracker: ProcessTracker,
) -> None:
    """A server that exits on stdin EOF is not killed, but the orphan it left in its group is."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", SERVER_WITH_GRANDCHILD_CODE, "stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    leader = ProcessIdentity.of(proc.pid, label="graceful")
    grandchild = None
    try:
        assert proc.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                line += await proc.stdout.receive_some(64)
        grandchild = ProcessIdentity.of(int(line))
        connection = StdinConnection(proc, leader)
        tracker.track(connection)
        await tracker.close_connection(connection, close_grace=30)
        assert proc.returncode == 0  # it left by itself; nothing signalled it
        assert not grandchild.is_alive()
        assert tracker.tracked() == ()
    finally:
        force_kill([leader, grandchild])
        with trio.move_on_after(10):
            await proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                await pipe.aclose()


async def test_close_connection_kills_and_untracks_when_aclose_raises(tracker: ProcessTracker) -> None:
    """An error from the graceful close is logged, not raised; the tree is killed anyway."""
    proc, leader, _ = spawn_server()
    connection = FailingConnection(leader)
    try:
        tracker.track(connection)
        await tracker.close_connection(connection)
        assert not leader.is_alive()
        assert tracker.tracked() == ()
    finally:
        force_kill([leader])
        proc.wait()


async def test_close_connection_cancelled_still_kills_the_tree(
    tracker: ProcessTracker, autojump_clock: trio.testing.MockClock
) -> None:
    """A caller cancelled during the graceful close still gets the tree killed before Cancelled."""
    proc, leader, grandchild = spawn_server(grandchild=True)
    assert grandchild is not None
    connection = HangingConnection(leader)
    try:
        tracker.track(connection)
        with trio.move_on_after(0.2) as scope:
            await tracker.close_connection(connection, close_grace=60)
        assert scope.cancelled_caught
        assert trio.current_time() == pytest.approx(0.2)
        assert not leader.is_alive() and not grandchild.is_alive()
        assert tracker.tracked() == ()
    finally:
        force_kill([leader, grandchild])
        proc.wait()


async def test_close_connection_without_a_process_only_closes(tracker: ProcessTracker) -> None:
    """An HTTP connection (no process) is closed gracefully and untracked; grace must be >= 0."""
    closed = trio.Event()

    @attrs.define(eq=False)
    class HttpConnection:
        process: ProcessIdentity | None = None

        async def aclose(self) -> None:
            closed.set()

    connection = HttpConnection()
    assert isinstance(connection, TrackedConnection)
    tracker.track(connection)
    with pytest.raises(ValueError, match="close_grace must be a finite number >= 0, got -1"):
        await tracker.close_connection(connection, close_grace=-1)
    await tracker.close_connection(connection)
    assert closed.is_set()
    assert tracker._connections == {}


async def test_close_all_closes_everything_concurrently(
    tracker: ProcessTracker, autojump_clock: trio.testing.MockClock
) -> None:
    """close_all cuts every hanging close at the same `grace` and kills bare registrations too."""
    spawned = [spawn_server(grandchild=n == 0, label=f"s{n}") for n in range(4)]
    identities = [identity for _, identity, _ in spawned]
    grandchild = spawned[0][2]
    assert grandchild is not None
    connections = [HangingConnection(identity) for identity in identities[:3]]
    try:
        for connection in connections:
            tracker.track(connection)
        tracker.register(identities[3])  # tracked without a connection
        start = trio.current_time()
        await tracker.close_all(close_grace=0.5)
        assert trio.current_time() - start == pytest.approx(0.5)  # not 3 x 0.5
        assert all(connection.close_cancelled for connection in connections)
        assert not any(identity.is_alive() for identity in [*identities, grandchild])
        assert tracker.tracked() == ()
        assert ledger_pids(tracker) == []
    finally:
        force_kill([*identities, grandchild])
        for proc, _, _ in spawned:
            proc.wait()


# ----------------------------------------------------------------------------- fork


def test_a_forked_child_never_acts_on_the_parents_tracker(tracker: ProcessTracker) -> None:
    """After os.fork the child drops its copy of the sidecar pipe and cannot kill or register."""
    proc, leader, _ = spawn_server()
    try:
        tracker.register(leader)
        fd = tracker._sidecar_fd
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.close(read_end)
                try:
                    os.fstat(fd)
                    pipe_closed = False
                except OSError:
                    pipe_closed = True
                tracker.kill_all_sync()
                try:
                    tracker.register(leader)
                    refused = False
                except RuntimeError:
                    refused = True
                fresh = ProcessTracker._instance is None
                os.write(write_end, json.dumps([pipe_closed, refused, fresh]).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            answer = json.loads(reader.read())
        os.waitpid(pid, 0)
        assert answer == [True, True, True]
        assert leader.is_alive()
        assert tracker.tracked() == (leader,)
    finally:
        proc.kill()
        proc.wait()


# ----------------------------------------------------------------------------- exports


def test_public_names_are_exported_and_sorted() -> None:
    """__all__ is sorted and every name in it exists."""
    assert process_tracker.__all__ == sorted(process_tracker.__all__)
    for name in process_tracker.__all__:
        assert hasattr(process_tracker, name)


def test_get_instance_is_one_per_process() -> None:
    """get_instance returns the same tracker from every thread."""
    seen: list[ProcessTracker] = []
    threads = [threading.Thread(target=lambda: seen.append(ProcessTracker.get_instance())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(seen) == 4 and all(t is seen[0] for t in seen)
    assert seen[0] is ProcessTracker.get_instance()
