"""The kill ladder: the one way any part of mcp-actors ends a server's process tree.

Used by the stdio transport (closing one server), the process tracker (closing a
connection, the exit hook, the ledger sweep) and the reaper sidecar (a crashed host). The
ladder is trio-parallel's: close, bounded wait, terminate, bounded wait, kill, always reap.
The close rung (end of stdin, or the connection's own graceful close) belongs to the
caller, who knows what "close" means for its connection; this module does the rest:
snapshot the trees, SIGTERM (and SIGCONT, so a stopped process handles it), wait at most
``term_grace``, SIGKILL what is left, wait at most :data:`KILL_WAIT`, reap our own
children.

The shutdown bounds have one name each, everywhere:

* ``close_grace`` — how long a graceful close may take before the tree is killed;
* ``term_grace`` — how long a tree has between SIGTERM and SIGKILL.

The sidecar imports this module on its own (``python -I -S``, no package import), so it
uses only the standard library and psutil.

Which processes are ours
========================
A PID alone is never trusted: a tracked process is ours only while a process with its
PID *and* its create_time exists. Its process group is killed as a whole only when the
process leads its own group (``pgid == pid``, as after ``start_new_session=True``); a
process that shares somebody else's group only loses its own descendants.

Descendants move: a grandchild may leave the group and the session (``setsid``) and be
reparented to init (a double fork). Where the host placed a server in a cgroup v2 of its
own (``Target.cgroup``, see :mod:`mcp_actors._process.cgroup`), its members are the tree
exactly: nothing leaves a cgroup by itself. Elsewhere, and for what the server forked
before it was placed, the marker is the net. Every tracked server therefore gets the host's
*marker* in its environment (:data:`MARKER_ENV`), which all its descendants inherit, and
which no unrelated process can have: ``<host marker>/<spawn number>`` per server, the
host marker itself naming the host's pid, its start time and the tracker. A target with a
``tag`` also claims every process carrying exactly that tag; a kill with a ``marker``
claims every process carrying the marker or any tag under it.

When a group leader is already gone, its orphans may still sit in its group. The kernel
never hands out a PID that is still in use as a process-group id, so while any member
remains, the group is the one our leader created — unless the group once emptied and a
*new* process with the same PID founded a new one. That takes a full cycle of the PID
space, which cannot happen in the moments between a host's death and its sidecar's
reaction, but can over the days between a crash and the next start. Hence two modes:

* fresh (the host itself, the sidecar): an orphan in the group is ours when it was created
  no earlier than the leader;
* stale (the ledger sweep): an orphan in the group must also carry the dead host's marker.

In both modes a group whose leader's PID is held by a *different* process is never touched.
"""

from __future__ import annotations

import collections
import hashlib
import os
import signal
import threading
import time
from collections.abc import Iterable, Sequence

import psutil

# ``typing`` costs the sidecar more start time than anything but psutil, so it is only
# imported for the type checker (which treats a name TYPE_CHECKING as always true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

    class Target(NamedTuple):
        """One tracked process as the kill ladder sees it.

        ``tag`` is the marker value the process was started with (``None``: unknown); every
        process carrying it belongs to this target's tree, wherever it moved. ``cgroup`` is
        the directory of the cgroup v2 it was placed in (``None``: none); every member
        belongs to the tree, whatever it did to its session and environment.
        """

        pid: int
        create_time: float
        pgid: int
        tag: str | None = None
        cgroup: str | None = None

else:
    Target = collections.namedtuple("Target", "pid create_time pgid tag cgroup", defaults=(None, None))
    Target.__doc__ = "One tracked process as the kill ladder sees it: PID, create_time, process group, tag, cgroup."

__all__ = [
    "CREATE_TIME_TOLERANCE",
    "KILL_WAIT",
    "MARKER_ENV",
    "TERM_GRACE",
    "Target",
    "carries",
    "cgroup_members",
    "cgroup_populated",
    "command_digest",
    "create_time_of",
    "find_process",
    "group_alive",
    "kill_cgroup",
    "kill_trees",
    "marker_carriers",
    "marker_of",
    "remove_cgroup",
    "same_create_time",
    "unexeced_children",
]

#: Two create_times closer than this are the same process start. psutil derives
#: create_time from the start tick (1/100 s on Linux) plus the boot time, so the same
#: process gives the same float in every reader; the tolerance only absorbs float noise.
CREATE_TIME_TOLERANCE = 0.005

#: Environment variable every tracked server inherits from its host (see
#: ``ProcessTracker.child_env``): ``<host marker>/<spawn number>``.
MARKER_ENV = "MCP_ACTORS_TRACKER"
_MARKER_KEY = MARKER_ENV.encode() + b"="
_MARKER_ENTRY = b"\0" + _MARKER_KEY

#: Default seconds between SIGTERM and SIGKILL.
TERM_GRACE = 1.0

#: After SIGKILL a process is gone within microseconds unless it is stuck in the kernel
#: (uninterruptible I/O). We wait this long for it, then report it and move on.
KILL_WAIT = 2.0

_POLL_FIRST = 0.001
_POLL_MAX = 0.02


def same_create_time(a: float, b: float) -> bool:
    """Whether two create_times denote the same process start (see CREATE_TIME_TOLERANCE)."""
    return abs(a - b) <= CREATE_TIME_TOLERANCE


# --------------------------------------------------------------------- create_time

#: The wall clock less the time since boot may drift this much (seconds) between two
#: readings before the kernel's boot time is read again: NTP slews it by microseconds a
#: second, a step of the wall clock moves it at once (and the kernel's ``btime`` with it).
_BOOT_TIME_RECHECK = 0.001
_boot_time_cache: tuple[float, float] | None = None
"""(psutil's boot time, :func:`_wall_minus_boot` when it was read), or ``None``."""

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_HAS_PROC_STAT = hasattr(time, "CLOCK_BOOTTIME") and os.path.exists(f"/proc/{os.getpid()}/stat")


def _wall_minus_boot() -> float:
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def _clear_of_a_second(offset: float) -> bool:
    """Whether *offset* is far enough from a whole second that a drift within the recheck
    bound cannot change its whole seconds (the kernel's ``btime`` is ``floor(offset)``)."""
    return 2 * _BOOT_TIME_RECHECK < offset % 1.0 < 1.0 - 2 * _BOOT_TIME_RECHECK


def _boot_time() -> float:
    """psutil's boot time (the kernel's ``btime``), read again only when the clocks moved.

    The kept value is used while the wall clock less the boot clock is within
    :data:`_BOOT_TIME_RECHECK` of what it was when read, and clear of a whole second; in
    all other cases (a step of the wall clock, an offset at a second's edge) it is read.
    """
    global _boot_time_cache
    offset = _wall_minus_boot()
    cached = _boot_time_cache
    if cached is not None and abs(offset - cached[1]) < _BOOT_TIME_RECHECK and _clear_of_a_second(offset):
        return cached[0]
    btime = float(psutil.boot_time())
    after = _wall_minus_boot()
    steady = abs(after - offset) < _BOOT_TIME_RECHECK and _clear_of_a_second(after)
    _boot_time_cache = (btime, after) if steady else None
    return btime


def create_time_of(pid: int) -> float:
    """``psutil.Process(pid).create_time()``, the same float, from one ``/proc`` file.

    The host reads it at every spawn, on its event loop, and psutil spends 60-95 µs there
    (it builds a ``Process``, and reads ``/proc/stat`` line by line for the boot time each
    time); this reads ``/proc/<pid>/stat`` once and keeps the boot time while the clocks
    agree with it. The value is psutil's formula on the same fields: start tick ÷
    ``SC_CLK_TCK`` + boot time (tested equal to psutil's). Elsewhere than Linux it is
    psutil's own call.

    Raises:
        psutil.NoSuchProcess: No process has this PID.
        psutil.AccessDenied: The process may not be inspected.
    """
    ticks = _start_ticks(pid) if _HAS_PROC_STAT else None
    if ticks is not None:
        return ticks / _CLOCK_TICKS + _boot_time()
    return float(psutil.Process(pid).create_time())  # not Linux, or a /proc of another shape


def _start_ticks(pid: int) -> float | None:
    """The process's start tick from ``/proc/<pid>/stat``; ``None`` if the line has another shape."""
    try:
        fields = _stat_fields(pid)
    except (FileNotFoundError, ProcessLookupError):
        raise psutil.NoSuchProcess(pid) from None
    except PermissionError:
        raise psutil.AccessDenied(pid) from None
    except ValueError:
        return None
    try:
        return float(fields[19])
    except (IndexError, ValueError):
        return None


def _stat_fields(pid: int | str) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` after the name (the state first), from one bare read.

    The file is a few hundred bytes, written whole in one read; ``open()``'s buffered file
    object would cost more than the read (a kill's table reads it for every process). The
    name (in parentheses) may hold spaces and parentheses: the fields follow the last ")".

    Raises:
        OSError: The file cannot be read (no such process, no permission).
        ValueError: The line has no name in parentheses.
    """
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    return data[data.rindex(b")") + 2 :].split()


def carries(value: str | None, marker: str) -> bool:
    """Whether a :data:`MARKER_ENV` value belongs to *marker* (itself, or a tag under it)."""
    return value is not None and (value == marker or value.startswith(marker + "/"))


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


def is_running(pid: int, create_time: float) -> bool:
    """Whether this very process still runs: the PID exists with the same create_time.

    A zombie (exited, not yet reaped) counts as dead; a process we may not inspect counts
    as running (it exists, and it is not ours to call dead).
    """
    proc = find_process(pid, create_time)
    if proc is None:
        return False
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


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


def _read_environ(pid: int) -> bytes:
    """``/proc/<pid>/environ`` whole, with bare ``os`` calls (it comes a part at a time).

    Raises:
        OSError: It cannot be read (no such process, no permission).
    """
    fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _scan_linux() -> list[tuple[int, int, int]]:
    """(pid, ppid, pgid) of every process, straight from /proc (several times psutil's speed)."""
    rows = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = _stat_fields(name)  # state ppid pgrp ...
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


def marker_of(pid: int) -> str | None:
    """The :data:`MARKER_ENV` value a process was started with; ``None`` if none or unreadable."""
    if _scan is _scan_linux:
        # One read of /proc/<pid>/environ; psutil would parse the whole environment.
        try:
            data = _read_environ(pid)
        except OSError:
            return None
        # One search in C, not a split of the whole environment: "\0KEY=" or KEY= first.
        if data.startswith(_MARKER_KEY):
            start = len(_MARKER_KEY)
        else:
            at = data.find(_MARKER_ENTRY)
            if at < 0:
                return None
            start = at + 1 + len(_MARKER_KEY)
        end = data.find(b"\0", start)
        return data[start : end if end >= 0 else len(data)].decode(errors="replace")
    try:
        return psutil.Process(pid).environ().get(MARKER_ENV)
    except psutil.Error:
        return None


class _ProcessTable:
    """One snapshot of the process table: every process's parent, group and marker.

    Taken once per kill, however many trees, and shared by the kills that run at once
    (:class:`_SharedWalks`): walking the process table is the expensive part. psutil
    objects (which pin a PID to its create_time) are made only for the processes that
    matter, and each kill makes its own (:meth:`view`).
    """

    def __init__(self, *, markers: bool) -> None:
        self._children: dict[int, list[int]] = {}
        self._groups: dict[int, list[int]] = {}
        self._procs: dict[int, psutil.Process | None] = {}
        self.markers: dict[str, list[int]] = {}
        me = os.getpid()
        for pid, ppid, pgid in _scan():
            self._children.setdefault(ppid, []).append(pid)
            self._groups.setdefault(pgid, []).append(pid)
            if markers and pid != me:
                value = marker_of(pid)
                if value is not None:
                    self.markers.setdefault(value, []).append(pid)

    def view(self) -> _ProcessTable:
        """This snapshot for one more kill: the same maps (never changed after the walk), its own psutil objects."""
        view = object.__new__(_ProcessTable)
        view._children, view._groups, view.markers = self._children, self._groups, self.markers
        view._procs = {}
        return view

    def proc(self, pid: int) -> psutil.Process | None:
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
                child = self.proc(pid)
                if child is not None and _born_no_earlier(child, parent):
                    found.append(child)
                    stack.append(child)
        return found

    def group(self, pgid: int) -> list[psutil.Process]:
        """Every process that was in group *pgid*."""
        procs = (self.proc(pid) for pid in self._groups.get(pgid, ()))
        return [proc for proc in procs if proc is not None]

    def carriers(self, marker: str, *, exact: bool) -> list[psutil.Process]:
        """Every process whose marker is *marker* (``exact``), or is it or a tag under it."""
        pids = [
            pid
            for value, members in self.markers.items()
            if (value == marker if exact else carries(value, marker))
            for pid in members
        ]
        procs = (self.proc(pid) for pid in pids)
        return [proc for proc in procs if proc is not None]


class _SharedWalks:
    """Kills that run at once share one walk of the process table (with the markers).

    A host that stops twenty servers together runs twenty kill ladders in twenty worker
    threads, each of which walked the whole table: two /proc reads per process, twenty
    times over, contending for the GIL (45-200 ms of CPU for a 20-server shutdown,
    docs/performance.md). A kill needs a snapshot that began after it asked,
    nothing older: anything it must kill existed by then. So a caller takes the walk
    that starts next: its own if none is running, else the one that starts as the
    running walk ends, which every caller that arrived meanwhile shares. A caller waits
    for at most the running walk and its own.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every walk and make a new lock (a forked child's start)."""
        self._cond = threading.Condition()
        self._running = False
        self._started = 0
        self._latest: tuple[int, _ProcessTable] | None = None  # the last walk done: its number and table
        #: Walks made so far (for tests and benchmarks).
        self.walks = 0

    def table(self) -> _ProcessTable:
        """A snapshot (with markers) whose walk began after this call; this caller's own view of it."""
        with self._cond:
            wanted = self._started + 1
            while True:
                if self._latest is not None and self._latest[0] >= wanted:
                    return self._latest[1].view()
                if not self._running:
                    self._running = True
                    self._started += 1
                    walk = self._started
                    break
                self._cond.wait()
        table = None
        try:
            table = _ProcessTable(markers=True)
            return table.view()
        finally:
            with self._cond:
                self._running = False
                if table is not None:
                    self.walks += 1
                    self._latest = (walk, table)
                self._cond.notify_all()


_walks = _SharedWalks()
if hasattr(os, "register_at_fork"):
    # A child forked while a thread held the walks' lock would wait on it for good.
    os.register_at_fork(after_in_child=_walks.reset)


def command_digest(pid: int | str = "self") -> str | None:
    """A digest of a process's command line (``/proc/<pid>/cmdline``); ``None`` where it cannot be read.

    The host gives its own to its reaper sidecar, which knows by it the children the host
    was spawning as it died (:func:`unexeced_children`).
    """
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return hashlib.sha256(file.read()).hexdigest()
    except OSError:
        return None


_NO_COMMAND = hashlib.sha256(b"").hexdigest()
"""The digest of an empty command line: a process in the middle of its exec (or a zombie)."""


def unexeced_children(digest: str, among: Iterable[int] | None = None) -> set[int]:
    """Live session leaders whose command line has *digest*, or none yet: a dead host's spawns not yet exec'd.

    A spawn's child (``start_new_session``) calls ``setsid`` first and closes its copies of
    the host's descriptors last, just before its exec. Until that exec it runs the host's
    program with the host's command line and environment (a vfork child, the host's very
    memory), so it carries no marker yet; in the middle of the exec its command line and
    environment read empty for a moment. Looks at every process, or only at ``among`` (what
    can only shrink once the host is gone). Linux only: elsewhere, none.
    """
    me = os.getpid()
    if among is None:
        try:
            among = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        except OSError:  # no /proc
            return set()
    found = set()
    for pid in among:
        if pid == me:
            continue
        try:
            fields = _stat_fields(pid)  # state ppid pgrp session ...
            if fields[0] == b"Z" or int(fields[3]) != pid:
                continue
        except (OSError, ValueError, IndexError):
            continue
        if command_digest(pid) in (digest, _NO_COMMAND):
            found.add(pid)
    return found


def marker_carriers(marker: str) -> list[psutil.Process]:
    """Every live process (zombies excluded) that carries *marker* or a tag under it.

    Used to decide whether a host's ledger may go: only once nothing of it is left.
    """
    table = _ProcessTable(markers=True)
    return [proc for proc in table.carriers(marker, exact=False) if not _is_gone(proc)]


# --------------------------------------------------------------------- cgroups


def cgroup_members(path: str) -> list[int]:
    """The PIDs in the cgroup at *path* and in every cgroup below it (none if it cannot be read)."""
    pids: list[int] = []
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                stack.extend(entry.path for entry in entries if entry.is_dir(follow_symlinks=False))
            fd = os.open(os.path.join(current, "cgroup.procs"), os.O_RDONLY | os.O_CLOEXEC)
            try:
                chunks = []
                while chunk := os.read(fd, 65536):
                    chunks.append(chunk)
            finally:
                os.close(fd)
        except OSError:
            continue
        pids.extend(int(pid) for pid in b"".join(chunks).split())
    return pids


def cgroup_populated(path: str) -> bool:
    """Whether a live process is in the cgroup at *path* or below it (a zombie is not); ``False`` if it is gone."""
    try:
        with open(os.path.join(path, "cgroup.events"), "rb") as file:
            return b"populated 1" in file.read()
    except OSError:
        return False


def kill_cgroup(path: str) -> bool:
    """SIGKILL every process in the cgroup at *path* and below, in one write; whether it was written."""
    try:
        fd = os.open(os.path.join(path, "cgroup.kill"), os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, b"1")
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def remove_cgroup(path: str, *, wait: float = 0.0) -> bool:
    """Remove the cgroup at *path* and those below it once nothing runs in them (polling at most *wait* seconds).

    Returns whether the directory is gone. A cgroup that is still populated stays.
    """
    deadline = time.monotonic() + wait
    delay = _POLL_FIRST
    while cgroup_populated(path):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _POLL_MAX)
    for current, dirs, _files in os.walk(path, topdown=False):
        for name in dirs:
            try:
                os.rmdir(os.path.join(current, name))
            except FileNotFoundError:
                pass
            except OSError:
                return False
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _cgroup_procs(table: _ProcessTable, path: str) -> dict[int, psutil.Process]:
    """The members of a cgroup as psutil objects (each pinned to its start, as everywhere)."""
    procs = {pid: table.proc(pid) for pid in cgroup_members(path)}
    return {pid: proc for pid, proc in procs.items() if proc is not None}


def _born_no_earlier(proc: psutil.Process, than: psutil.Process | float) -> bool:
    try:
        reference = than if isinstance(than, float) else than.create_time()
        return bool(proc.create_time() >= reference - CREATE_TIME_TOLERANCE)
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


def _plan(target: Target, marker: str | None, stale: bool, table: _ProcessTable) -> _Plan:
    victims: dict[int, psutil.Process] = {}
    if target.cgroup is not None:
        victims.update(_cgroup_procs(table, target.cgroup))
    if target.tag is not None:
        for proc in table.carriers(target.tag, exact=True):
            if _born_no_earlier(proc, float(target.create_time)):
                victims[proc.pid] = proc
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
    if not owns_group or psutil.pid_exists(target.pid) or (stale and marker is None):
        # Either the group was never the tree's own, or the leader's PID now belongs to an
        # unrelated process: the group id has been recycled since, nothing in it is ours.
        return _Plan(target, victims, False)
    for proc in table.group(target.pgid):
        # Stale: days may have passed and the group id may name a stranger's group now;
        # only a member carrying the dead host's marker is surely ours.
        if _born_no_earlier(proc, float(target.create_time)) and (
            not stale or (marker is not None and carries(marker_of(proc.pid), marker))
        ):
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
    term_grace: float = TERM_GRACE,
    marker: str | None = None,
    stale: bool = False,
    reap: bool = True,
    cgroup: str | None = None,
) -> list[Target]:
    """Kill every target's process tree, all trees at once; return the targets that had any.

    SIGTERM (and SIGCONT) goes to every tree together, then one shared wait of at most
    *term_grace* seconds, then SIGKILL to the survivors and a wait of at most
    :data:`KILL_WAIT`. The whole call takes at most about ``term_grace + KILL_WAIT``
    seconds, however many trees there are. Synchronous: from trio, run it in a thread.

    Args:
        targets: The tracked processes.
        term_grace: Seconds the trees get to exit after SIGTERM.
        marker: A host marker: every process carrying it (or a tag under it) is killed
            too, as one more tree — what escaped every tracked tree (see the module doc).
        stale: The targets were recorded by a host that died long ago (a ledger sweep):
            a dead leader's process group is not trusted, only markers and tags are.
        reap: Collect the exit status of dead children of the calling process.
        cgroup: A host's cgroup directory: every process in it or below it is killed too,
            with the marker's tree.

    Every cgroup involved (a target's, ``cgroup``) gets ``cgroup.kill`` after the grace —
    what forked since the snapshot dies too — and is removed once empty.

    Returns:
        The targets for which at least one live process was found and signalled (the
        marker's own tree, if it had any, as ``Target(0, 0.0, 0, marker, cgroup)``).

    Raises:
        ValueError: ``term_grace`` is negative.
    """
    if not term_grace >= 0:
        raise ValueError(f"term_grace must be >= 0, got {term_grace!r}")
    targets = list(targets)
    if not targets and marker is None and cgroup is None:
        return []
    markers = marker is not None or any(t.tag is not None for t in targets)
    table = _walks.table() if markers else _ProcessTable(markers=False)
    plans = [_plan(target, marker, stale, table) for target in targets]
    if marker is not None or cgroup is not None:
        escaped = {proc.pid: proc for proc in table.carriers(marker, exact=False)} if marker is not None else {}
        if cgroup is not None:
            escaped.update(_cgroup_procs(table, cgroup))
        plans.append(_Plan(Target(0, 0.0, 0, marker, cgroup), escaped, False))
    cgroups = [plan.target.cgroup for plan in plans if plan.target.cgroup is not None]
    try:
        return _kill_plans(plans, term_grace=term_grace, reap=reap)
    finally:
        for path in cgroups:
            # Whatever forked since the snapshot, or survived: the kernel kills all of it at once.
            if cgroup_populated(path):
                kill_cgroup(path)
            remove_cgroup(path, wait=KILL_WAIT)


def _kill_plans(plans: list[_Plan], *, term_grace: float, reap: bool) -> list[Target]:
    live = []
    for plan in plans:
        for pid, proc in list(plan.victims.items()):
            if _is_gone(proc):  # a zombie: nothing to signal, only to reap
                if reap:
                    _reap_if_child(proc)
                del plan.victims[pid]
        if plan.victims:
            live.append(plan)
    if not live:
        return []
    for plan in live:
        _signal(plan, signal.SIGTERM, plan.victims.values())
        _signal(plan, signal.SIGCONT, plan.victims.values())
    everyone = list({proc.pid: proc for plan in live for proc in plan.victims.values()}.values())
    survivors = {proc.pid for proc in _wait_gone(everyone, term_grace, reap=reap)}
    if survivors:
        for plan in live:
            stubborn = [proc for pid, proc in plan.victims.items() if pid in survivors]
            if not stubborn:
                continue
            # Signal the group only while one of our survivors is still in it: a non-empty
            # group cannot have been recycled, so the id still names our tree.
            in_group = any(_in_group(proc, plan.target.pgid) for proc in stubborn)
            _signal(_Plan(plan.target, plan.victims, plan.signal_group and in_group), signal.SIGKILL, stubborn)
        _wait_gone([proc for proc in everyone if proc.pid in survivors], KILL_WAIT, reap=reap)
    return [plan.target for plan in live]


def group_alive(pgid: int) -> bool:
    """Whether any process (a zombie too) is still in process group *pgid*."""
    if not hasattr(os, "killpg"):
        return True
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return proc.is_running() and os.getpgid(proc.pid) == pgid
    except (OSError, psutil.Error):
        return False
