"""Process-tree killing, and the reaper sidecar that kills a crashed host's servers.

This module is two things:

* the **kill ladder** shared by the host and the sidecar (:func:`kill_trees`): snapshot
  each tracked process tree while checking every PID against its create_time, SIGTERM,
  a bounded wait, SIGKILL of the survivors, a bounded wait, reap our own children;
* the **reaper sidecar** (:func:`main`), a tiny process the host starts in its own session
  on the first registration. The host keeps the write end of a pipe to the sidecar's
  stdin and sends one line per change::

      track <pid> <create_time> <pgid>
      untrack <pid> <create_time>
      exit

  When the pipe reaches end-of-file without an ``exit`` line — the host died, even by
  SIGKILL, because the kernel closes a dead process's descriptors — the sidecar kills
  every still-tracked tree, deletes the host's ledger file and exits. ``exit`` means a
  clean host shutdown: the sidecar leaves at once and kills nothing.

The sidecar imports only the standard library and psutil, and the host starts it with
``python -I -S <this file>`` (psutil's directory passed with ``--site``), so it never
imports this package's ``__init__`` and starts in tens of milliseconds.

Which processes are ours
========================
A PID alone is never trusted: a tracked process is ours only while a process with its
PID *and* its create_time exists. Its process group is killed as a whole only when the
process leads its own group (``pgid == pid``, as after ``start_new_session=True``); a
process that shares somebody else's group only loses its own descendants.

When the group leader is already gone, its orphans may still sit in its group. The kernel
never hands out a PID that is still in use as a process-group id, so while any member
remains, the group is the one our leader created — unless the group once emptied and a
*new* process with the same PID founded a new one. That takes a full cycle of the PID
space, which cannot happen in the moments between a host's death and its sidecar's
reaction, but can over the days between a crash and the next start. Hence two modes:

* fresh (the host itself, the sidecar): an orphan in the group is ours when it was created
  no earlier than the leader;
* stale (the ledger sweep, see ``ProcessTracker.sweep_ledger``): an orphan must also carry
  the host's marker in its environment (inherited from the server).

In both modes a group whose leader's PID is held by a *different* process is never touched.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # pragma: no cover - the sidecar's start
    # The sidecar runs with -S (no site-packages) for a fast start; the host passes the
    # directory psutil lives in. The only import this module needs beyond the stdlib.
    for _i, _arg in enumerate(sys.argv[:-1]):
        if _arg == "--site":
            sys.path.append(sys.argv[_i + 1])

import collections
import signal
import time
from collections.abc import Iterable, Sequence

import psutil

# ``typing`` costs the sidecar more start time than anything but psutil, so it is only
# imported for the type checker (which treats a name TYPE_CHECKING as always true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

    class Target(NamedTuple):
        """One tracked process as the kill ladder sees it: PID, create_time, process group."""

        pid: int
        create_time: float
        pgid: int

else:
    Target = collections.namedtuple("Target", "pid create_time pgid")
    Target.__doc__ = "One tracked process as the kill ladder sees it: PID, create_time, process group."

__all__ = [
    "CREATE_TIME_TOLERANCE",
    "MARKER_ENV",
    "SIDECAR_TAG",
    "Target",
    "find_process",
    "kill_trees",
    "main",
    "same_create_time",
]

#: Two create_times closer than this are the same process start. psutil derives
#: create_time from the start tick (1/100 s on Linux) plus the boot time, so the same
#: process gives the same float in every reader; the tolerance only absorbs float noise.
CREATE_TIME_TOLERANCE = 0.005

#: Environment variable a tracked server inherits from the host (see
#: ``ProcessTracker.child_env``); its value names the host, so the ledger sweep can prove
#: that an orphan left in a dead server's process group is ours.
MARKER_ENV = "MCP_ACTORS_TRACKER"

#: The sidecar's first argument, so it is recognisable in ``ps`` and by test guards.
SIDECAR_TAG = "mcp_actors._reaper"

# After SIGKILL a process is gone within microseconds unless it is stuck in the kernel
# (uninterruptible I/O). We wait this long for it, then report it and move on.
_KILL_WAIT = 2.0
_POLL_FIRST = 0.001
_POLL_MAX = 0.02


def same_create_time(a: float, b: float) -> bool:
    """Whether two create_times denote the same process start (see CREATE_TIME_TOLERANCE)."""
    return abs(a - b) <= CREATE_TIME_TOLERANCE


def find_process(pid: int, create_time: float) -> psutil.Process | None:
    """The process with this PID *and* create_time, or ``None`` (gone, or PID reused).

    A zombie is returned too (it still holds its PID); callers that mean "running" check
    its status.
    """
    try:
        proc = psutil.Process(pid)
        if same_create_time(proc.create_time(), create_time):
            return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        pass
    return None


def _is_gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def _reap_if_child(proc: psutil.Process) -> None:
    """Collect the exit status of a dead child of ours, so no zombie is left."""
    try:
        if proc.ppid() != os.getpid() or proc.status() != psutil.STATUS_ZOMBIE:
            return
    except psutil.Error:
        return
    try:
        os.waitpid(proc.pid, os.WNOHANG)
    except ChildProcessError:
        pass  # somebody else (a Popen, trio) reaped it first


def _scan_linux() -> list[tuple[int, int, int]]:
    """(pid, ppid, pgid) of every process, straight from /proc (several times psutil's speed)."""
    rows = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
            # "pid (comm) state ppid pgrp ..."; comm may contain spaces and parentheses.
            fields = data[data.rindex(b")") + 2 :].split()
            rows.append((int(name), int(fields[1]), int(fields[2])))
        except (OSError, ValueError, IndexError):
            continue
    return rows


def _scan_portable() -> list[tuple[int, int, int]]:
    rows = []
    for pid in psutil.pids():
        try:
            rows.append((pid, psutil.Process(pid).ppid(), os.getpgid(pid)))
        except (OSError, psutil.Error):
            continue
    return rows


_scan = _scan_linux if os.path.isfile("/proc/self/stat") else _scan_portable


class _ProcessTable:
    """One snapshot of the process table: every process's parent and group.

    Taken once per kill, however many trees: walking the process table is the expensive
    part. psutil objects (which pin a PID to its create_time) are made only for the
    processes that matter.
    """

    def __init__(self) -> None:
        self._children: dict[int, list[int]] = {}
        self._groups: dict[int, list[int]] = {}
        self._procs: dict[int, psutil.Process | None] = {}
        for pid, ppid, pgid in _scan():
            self._children.setdefault(ppid, []).append(pid)
            self._groups.setdefault(pgid, []).append(pid)

    def _proc(self, pid: int) -> psutil.Process | None:
        if pid not in self._procs:
            try:
                self._procs[pid] = psutil.Process(pid)
            except psutil.Error:
                self._procs[pid] = None
        return self._procs[pid]

    def descendants(self, root: psutil.Process) -> list[psutil.Process]:
        """Every descendant of *root*, each born no earlier than its parent (else a reused PID)."""
        found = []
        stack = [root]
        while stack:
            parent = stack.pop()
            for pid in self._children.get(parent.pid, ()):
                child = self._proc(pid)
                if child is not None and _born_no_earlier(child, parent):
                    found.append(child)
                    stack.append(child)
        return found

    def group(self, pgid: int) -> list[psutil.Process]:
        """Every process that was in group *pgid*."""
        procs = (self._proc(pid) for pid in self._groups.get(pgid, ()))
        return [proc for proc in procs if proc is not None]


def _born_no_earlier(proc: psutil.Process, than: psutil.Process | float) -> bool:
    try:
        reference = than if isinstance(than, float) else than.create_time()
        return bool(proc.create_time() >= reference - CREATE_TIME_TOLERANCE)
    except psutil.Error:
        return False


def _carries_marker(proc: psutil.Process, marker: str) -> bool:
    try:
        return bool(proc.environ().get(MARKER_ENV) == marker)
    except psutil.Error:
        return False


class _Plan:
    """What to signal for one target.

    ``signal_group``: the leader holds the group id, so signalling the whole group reaches
    only our tree (and also whatever the tree forks between the snapshot and the signal).
    """

    __slots__ = ("signal_group", "target", "victims")

    def __init__(self, target: Target, victims: dict[int, psutil.Process], signal_group: bool) -> None:
        self.target = target
        self.victims = victims
        self.signal_group = signal_group


def _plan(target: Target, marker: str | None, table: _ProcessTable) -> _Plan:
    victims: dict[int, psutil.Process] = {}
    leader = find_process(target.pid, target.create_time)
    owns_group = target.pgid == target.pid and hasattr(os, "killpg")
    if leader is not None:
        victims[leader.pid] = leader
        for proc in table.descendants(leader):
            victims[proc.pid] = proc
        if owns_group:
            for proc in table.group(target.pgid):
                victims.setdefault(proc.pid, proc)
        return _Plan(target, victims, owns_group)
    if not owns_group or psutil.pid_exists(target.pid):
        # Either the group was never the tree's own, or the leader's PID now belongs to an
        # unrelated process: the group id has been recycled since, nothing in it is ours.
        return _Plan(target, victims, False)
    for proc in table.group(target.pgid):
        if _born_no_earlier(proc, float(target.create_time)) and (marker is None or _carries_marker(proc, marker)):
            victims[proc.pid] = proc
    return _Plan(target, victims, False)


def _signal(plan: _Plan, sig: signal.Signals, procs: Iterable[psutil.Process]) -> None:
    if plan.signal_group:
        try:
            os.killpg(plan.target.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in procs:
        try:
            proc.send_signal(sig)  # psutil refuses if the PID was reused meanwhile
        except psutil.Error:
            pass


def _wait_gone(procs: Sequence[psutil.Process], timeout: float, *, reap: bool) -> list[psutil.Process]:
    """Poll until every process is gone (a zombie counts as gone) or *timeout* passes."""
    deadline = time.monotonic() + timeout
    delay = _POLL_FIRST
    alive = list(procs)
    while True:
        still = []
        for proc in alive:
            if _is_gone(proc):
                if reap:
                    _reap_if_child(proc)
            else:
                still.append(proc)
        alive = still
        remaining = deadline - time.monotonic()
        if not alive or remaining <= 0:
            return alive
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _POLL_MAX)


def kill_trees(
    targets: Iterable[Target],
    *,
    term_timeout: float = 1.0,
    marker: str | None = None,
    reap: bool = True,
) -> list[Target]:
    """Kill every target's process tree, all trees at once; return the targets that had any.

    SIGTERM (and SIGCONT, so a stopped process handles it) goes to every tree together,
    then one shared wait of at most *term_timeout* seconds, then SIGKILL to the survivors
    and a bounded wait for them. The whole call takes at most about
    ``term_timeout + 2`` seconds, however many trees there are.

    Args:
        targets: The tracked processes.
        term_timeout: Seconds the trees get to exit after SIGTERM.
        marker: ``None`` for the fresh mode (the host, or its sidecar right after the host
            died); the dead host's marker for the stale mode of a ledger sweep (see the
            module docstring).
        reap: Collect the exit status of dead children of the calling process.

    Returns:
        The targets for which at least one live process was found and signalled.
    """
    if term_timeout < 0:
        raise ValueError(f"term_timeout must be >= 0, got {term_timeout!r}")
    targets = list(targets)
    if not targets:
        return []
    table = _ProcessTable()
    plans = []
    for target in targets:
        plan = _plan(target, marker, table)
        for pid, proc in list(plan.victims.items()):
            if _is_gone(proc):  # a zombie leader: nothing to signal, only to reap
                if reap:
                    _reap_if_child(proc)
                del plan.victims[pid]
        if plan.victims:
            plans.append(plan)
    if not plans:
        return []
    for plan in plans:
        _signal(plan, signal.SIGTERM, plan.victims.values())
        _signal(plan, signal.SIGCONT, plan.victims.values())
    everyone = [proc for plan in plans for proc in plan.victims.values()]
    survivors = {proc.pid for proc in _wait_gone(everyone, term_timeout, reap=reap)}
    if survivors:
        for plan in plans:
            stubborn = [proc for pid, proc in plan.victims.items() if pid in survivors]
            if not stubborn:
                continue
            # Signal the group only while one of our survivors is still in it: a non-empty
            # group cannot have been recycled, so the id still names our tree.
            in_group = any(_in_group(proc, plan.target.pgid) for proc in stubborn)
            _signal(_Plan(plan.target, plan.victims, plan.signal_group and in_group), signal.SIGKILL, stubborn)
        _wait_gone([proc for proc in everyone if proc.pid in survivors], _KILL_WAIT, reap=reap)
    return [plan.target for plan in plans]


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return proc.is_running() and os.getpgid(proc.pid) == pgid
    except (OSError, psutil.Error):
        return False


# ----------------------------------------------------------------------------- sidecar


def _parse_args(argv: Sequence[str]) -> tuple[str | None, float]:
    ledger: str | None = None
    term_timeout = 1.0
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == SIDECAR_TAG:
            continue
        if arg in ("--site", "--ledger", "--term-timeout") and args:
            value = args.pop(0)
            if arg == "--ledger":
                ledger = value
            elif arg == "--term-timeout":
                term_timeout = float(value)
            continue
        raise SystemExit(f"mcp_actors._reaper: unexpected argument {arg!r}")
    return ledger, term_timeout


def _parse_line(line: bytes) -> tuple[str, Target | None]:
    """One protocol line → (command, target); malformed lines come back as ("", None)."""
    parts = line.split()
    try:
        if len(parts) == 4 and parts[0] == b"track":
            return "track", Target(int(parts[1]), float(parts[2]), int(parts[3]))
        if len(parts) == 3 and parts[0] == b"untrack":
            return "untrack", Target(int(parts[1]), float(parts[2]), 0)
        if parts == [b"exit"]:
            return "exit", None
    except ValueError:
        pass
    return "", None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sidecar: follow the host's lines on stdin; on end-of-file kill what is tracked.

    Args:
        argv: ``[SIDECAR_TAG] [--site DIR] [--ledger PATH] [--term-timeout SECONDS]``.

    Returns:
        The exit status: 0.
    """
    ledger, term_timeout = _parse_args(sys.argv[1:] if argv is None else argv)
    # The sidecar lives in its own session, so terminal signals do not reach it; ignoring
    # SIGINT also covers a host that forwards it to every child.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tracked: dict[tuple[int, float], Target] = {}
    for line in sys.stdin.buffer:
        command, target = _parse_line(line)
        if command == "exit":
            return 0
        if target is None:
            continue
        if command == "track":
            tracked[target.pid, target.create_time] = target
        else:
            tracked.pop((target.pid, target.create_time), None)
    # End of file without "exit": the host is gone.
    kill_trees(tracked.values(), term_timeout=term_timeout, reap=False)
    if ledger is not None:
        try:
            os.unlink(ledger)
        except OSError:
            pass
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through real host processes
    sys.exit(main())
