"""Track every stdio server process, and make sure none outlives its host.

One :class:`ProcessTracker` per process (:meth:`ProcessTracker.get_instance`) knows every
server it was told about by PID, create_time and process group — a PID is never used
without its create_time, so a recycled PID is never mistaken for ours — and by the tag in
its environment (:meth:`~ProcessTracker.child_env`), which every descendant inherits, so
a grandchild that escaped into a session of its own is still known. It closes
connections gracefully with a bound, then kills the whole process tree with the one kill
ladder (:mod:`mcp_actors._process.kill`; :meth:`~ProcessTracker.close_connection`,
:meth:`~ProcessTracker.close_all`, :func:`stop_process` for the stdio transport).

The safety net has three layers, each catching what the one before cannot (no
``PR_SET_PDEATHSIG``: servers are spawned from worker threads, and Linux sends that signal when
the forking *thread* exits, so it would kill them early or never be armed):

1. An :mod:`atexit` hook (:meth:`~ProcessTracker.close_sync`): on a normal interpreter
   exit (including an unhandled exception) it first refuses every later registration —
   a server spawned after it began is killed on the spot — then kills every tracked tree
   and everything carrying the host's marker, and dismisses the sidecar only once all of
   it is gone. A portal (:mod:`mcp_actors.portal`) closes its runtime gracefully in an
   exit hook that runs before this one.
2. The reaper sidecar (:mod:`mcp_actors._process.reaper`): a tiny process in its own session that
   holds a pipe from the host (a POSIX shell while the host lives; the Python reaper only
   once there is something to kill). When the host dies in any way — SIGKILL, a
   segfault, the OOM killer — the pipe reaches end-of-file and the sidecar kills every
   tracked tree and everything carrying the host's marker. It runs before the first server is spawned
   (:meth:`~ProcessTracker.start_safety_net`, which the runtime calls as it starts, off
   the critical path), so a host that dies even between a spawn and its registration
   leaves nothing behind: the server already carries the marker.
3. The ledger (:mod:`mcp_actors._process.ledger`): one small JSON file per host under the state
   directory (``processes/`` below :func:`mcp_actors._config.paths.state_dir`:
   ``MCP_ACTORS_STATE_DIR``, else next to ``MCP_ACTORS_CONFIG``, else the user state
   directory), written before the first spawn with the host's marker, then updated on
   every registration (from an event loop, by a worker thread: a stalled disk never
   stalls the loop). If host and sidecar both died, the next start's
   :meth:`~ProcessTracker.sweep_ledger` kills what the dead host left behind.

Daemons. A server may leave a daemon behind in a session of its own and exit: the kill at
its connection's close (a restart too) runs even for a server that already exited, and
finds the daemon by its tag. A daemon that also empties its environment carries no tag:
only a cgroup holds it. Where this host may create cgroups v2 (:mod:`mcp_actors._process.cgroup`:
Linux 5.14+, root or a delegated subtree, not ``MCP_ACTORS_CGROUPS=off``), every server is
moved into one of its own right after its exec (:meth:`~ProcessTracker.placement`, in the
spawn's thread); its members are then its tree exactly, ``cgroup.kill`` ends them, and the
exit hook, the sidecar and the next start's sweep kill the host's whole cgroup. Limits:
what a server forks before the move (microseconds; 10-35 ms for the first move after an
idle spell) is found by tag, group and descendants only; without cgroups an environment-less
daemon escapes. A child subreaper on the host was considered and not used: orphans would
be the host's children with nothing that ties them to a server, lost again when the host
dies, and a library host would have to reap every orphan of its application's own
children without stealing the application's exit statuses.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import math
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

import attrs
import psutil
import trio

from mcp_actors._config.paths import state_dir
from mcp_actors._process import cgroup as _cgroup
from mcp_actors._process import kill as _kill
from mcp_actors._process import ledger as _ledger
from mcp_actors._process import reaper as _reaper
from mcp_actors._process.kill import KILL_WAIT, MARKER_ENV, TERM_GRACE, Target, is_running, kill_trees
from mcp_actors.errors import ServerStartFailed

__all__ = [
    "ProcessIdentity",
    "ProcessTracker",
    "STATE_DIR_ENV",
    "TrackedConnection",
    "kill_process_tree",
]

logger = logging.getLogger(__name__)

#: Environment variable naming the state directory (the ledger lives in ``processes/``).
STATE_DIR_ENV = "MCP_ACTORS_STATE_DIR"

#: Default seconds a graceful close may take before the tree is killed.
CLOSE_GRACE = 3.0
# How long a clean shutdown waits for the sidecar to leave after "exit".
_SIDECAR_EXIT_WAIT = 1.0

_serials = itertools.count(1)
_NET_STARTS: trio.lowlevel.RunVar[dict[int, trio.Event]] = trio.lowlevel.RunVar("mcp_actors_net_starts")
"""Per trio run: the tracker (by id) whose net a task of this run is starting, and its event."""


def _net_starts() -> dict[int, trio.Event]:
    try:
        return _NET_STARTS.get()
    except LookupError:
        starts: dict[int, trio.Event] = {}
        _NET_STARTS.set(starts)
        return starts


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be > 0, got {value!r}")


def _valid_create_time(_instance: object, _attribute: attrs.Attribute[float], value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"create_time must be a finite number >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class ProcessIdentity:
    """A process as the tracker knows it: a PID that only counts together with its start time.

    PIDs are recycled; ``(pid, create_time)`` is not. Every check and every signal goes
    through this pair, so a process that merely inherited a dead server's PID is never
    touched.

    Attributes:
        pid: The process id.
        create_time: ``psutil.Process(pid).create_time()`` when it was tracked.
        pgid: Its process group; equal to ``pid`` for a server started with
            ``start_new_session=True`` — only then is the whole group killed with it.
        label: A name for logs (usually the server's name). Never a secret.
    """

    pid: int = attrs.field(validator=[attrs.validators.instance_of(int), _positive])
    create_time: float = attrs.field(converter=float, validator=_valid_create_time)
    pgid: int = attrs.field(validator=[attrs.validators.instance_of(int), _positive])
    label: str = attrs.field(default="", validator=attrs.validators.instance_of(str))

    @classmethod
    def of(cls, pid: int, *, label: str = "") -> ProcessIdentity:
        """Read the identity of a running process (its create_time and process group).

        Call it right after spawning, before the process can exit and be reaped.

        Args:
            pid: The process id.
            label: A name for logs.

        Raises:
            ValueError: ``pid`` is not positive.
            ProcessLookupError: No process has that PID (any more).
            PermissionError: The process belongs to another user.
        """
        if pid <= 0:
            raise ValueError(f"pid must be > 0, got {pid!r}")
        try:
            create_time = _kill.create_time_of(pid)
            pgid = os.getpgid(pid) if hasattr(os, "getpgid") else pid
        except (psutil.NoSuchProcess, ProcessLookupError) as exc:
            raise ProcessLookupError(f"no process with pid {pid}; it exited before it could be tracked") from exc
        except psutil.AccessDenied as exc:
            raise PermissionError(f"cannot inspect pid {pid}: it belongs to another user") from exc
        return cls(pid=pid, create_time=create_time, pgid=pgid, label=label)

    def is_alive(self) -> bool:
        """Whether this very process still runs: the PID exists with the same create_time.

        A zombie (exited, not yet reaped) counts as dead.
        """
        return is_running(self.pid, self.create_time)

    def _target(self) -> Target:
        return Target(self.pid, self.create_time, self.pgid)


@runtime_checkable
class TrackedConnection(Protocol):
    """What :meth:`ProcessTracker.track` and :meth:`~ProcessTracker.close_connection` take."""

    @property
    def process(self) -> ProcessIdentity | None:
        """The server process behind the connection; ``None`` for HTTP connections."""
        ...

    async def aclose(self) -> None:
        """Close the connection gracefully (the tracker bounds how long this may take)."""
        ...


def kill_process_tree(identity: ProcessIdentity, *, term_grace: float = TERM_GRACE) -> None:
    """Kill a tracked process, its descendants and (if it leads one) its process group.

    The kill ladder of :mod:`mcp_actors._process.kill` for one tree: snapshot, SIGTERM, at most
    *term_grace* seconds, SIGKILL to the survivors, reap our own children. Orphans left in
    the group by a leader that already exited are killed too. Nothing is signalled unless
    its PID and create_time match, so a recycled PID is safe.

    Blocks for up to ``term_grace`` plus about two seconds; from trio, run it with
    ``trio.to_thread.run_sync``.

    Args:
        identity: The process (usually a server's group leader).
        term_grace: Seconds between SIGTERM and SIGKILL.

    Raises:
        ValueError: ``term_grace`` is negative.
    """
    kill_trees([identity._target()], term_grace=term_grace)


class ChildProcess(Protocol):
    """What :func:`stop_process` needs of a child: ``trio.Process`` is one, so is the stdio transport's."""

    @property
    def pid(self) -> int:
        """The child's PID."""

    @property
    def returncode(self) -> int | None:
        """Its exit status once it exited (reading it reaps it), else ``None``."""

    @property
    def stdin(self) -> trio.abc.SendStream | None:
        """The pipe to its stdin, if it has one."""

    async def wait(self) -> int:
        """Wait until it exits; reap it; its exit status."""


async def stop_process(
    process: ChildProcess,
    target: Target,
    *,
    close_grace: float,
    term_grace: float,
    label: str = "",
) -> None:
    """The kill ladder for a stdio server we spawned: close, wait, terminate, wait, kill, reap.

    Closes the server's stdin (the MCP way to ask a stdio server to leave) and waits at
    most *close_grace* seconds for it to exit; then kills whatever is left of its tree —
    the server if it lingers, its group, its descendants, and every process carrying its
    tag (a grandchild that escaped with ``setsid``) — with SIGTERM, at most *term_grace*
    seconds, SIGKILL; then waits (bounded) until trio has reaped the server. Even a server
    that exited on its own within the grace gets the kill: it may have left children.

    Call it shielded (it is a cleanup); every wait in it is bounded, the whole takes at
    most about ``close_grace + term_grace + 7`` seconds.

    Args:
        process: The server process.
        target: Its identity for the ladder (with its tag, see :meth:`ProcessTracker.target_of`).
        close_grace: Seconds the server gets to exit after its stdin closes.
        term_grace: Seconds between SIGTERM and SIGKILL.
        label: A name for logs (usually the server's name).
    """
    if target.tag is None and process.returncode is None:
        # Not registered with this tracker: read the tag while the PID is surely the server's
        # (an unreaped child's PID cannot be reused).
        target = target._replace(tag=_kill.marker_of(process.pid))
    if process.stdin is not None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            await process.stdin.aclose()
    if process.returncode is None:
        with trio.move_on_after(close_grace):
            await process.wait()
    elif target.cgroup is not None and target.tag is None and not _kill.cgroup_populated(target.cgroup):
        # The server had already exited (a crash), nothing is left in its cgroup and it has
        # no tag that a process outside the cgroup could carry: return at once. With a tag
        # the walk below still runs: what the server forked before it was moved into its
        # cgroup is outside it, and only the tag finds it.
        _kill.remove_cgroup(target.cgroup)  # an rmdir or two
        return
    elif target.cgroup is None and target.tag is None and not _kill.group_alive(target.pgid):
        # Exited and nothing left in its group; without a tag there is nothing else to look for.
        return
    # Otherwise the kill runs even for a server that exited: a daemon it left in a session
    # of its own is found by its cgroup or its tag (a walk of the process table, 1-5 ms).
    # reap=False: the server is trio's child and trio reaps it (its exit status intact).
    await trio.to_thread.run_sync(partial(kill_trees, [target], term_grace=term_grace, reap=False))
    if process.returncode is None:
        with trio.move_on_after(KILL_WAIT + 5.0):
            await process.wait()
        if process.returncode is None:
            logger.error("server %s: pid %d survived SIGKILL; abandoning it", label or "?", process.pid)


def _default_state_dir() -> Path:
    # The one rule (mcp_actors._config.paths.state_dir): $MCP_ACTORS_STATE_DIR, else next to
    # $MCP_ACTORS_CONFIG, else the user state directory.
    return state_dir()


_SHELL = "/bin/sh"
"""The POSIX shell that fronts the reaper sidecar (see :data:`mcp_actors._process.reaper.SHELL_FRONT`)."""


def _sidecar_argv(
    ledger: Path, term_grace: float, *, marker: str | None = None, cgroup: str | None = None
) -> list[str]:
    script = _reaper.__file__
    psutil_home = os.path.dirname(os.path.dirname(os.path.abspath(psutil.__file__)))
    options = ["--site", psutil_home, "--ledger", str(ledger), "--term-grace", repr(term_grace)]
    if cgroup is not None:
        options += ["--cgroup", cgroup]
    if marker is not None:
        options += ["--marker", marker]
        command = _kill.command_digest()
        if command is not None:  # its spawns that had not exec'd as it died are known by it
            options += ["--host-command", command]
    if script and os.path.isfile(script):
        # -I -S: no user site, no site-packages, no PYTHON* variables; the sidecar needs
        # only the stdlib, psutil and _kill, and starts in a few tens of milliseconds.
        python = [sys.executable, "-I", "-S", script, _reaper.SIDECAR_TAG, *options]
    else:
        python = [sys.executable, "-I", "-m", "mcp_actors._process.reaper", *options]
    if os.access(_SHELL, os.X_OK):
        # A shell follows the host and starts the interpreter only when there is something to kill.
        return [_SHELL, "-c", _reaper.SHELL_FRONT, _reaper.SIDECAR_TAG, *python]
    return python


@attrs.frozen(eq=False)  # holds a dict: compared and hashed by identity
class _LedgerSnapshot:
    """The tracked processes at one registration, made into ledger entries only when written.

    Copying the two tables is a C-level copy; the entries (two objects per server) are
    built by the ledger's writer, in its thread, and only for the snapshot it writes. Built
    at every registration, they cost a 200-server start ~20,000 objects on the event loop.
    """

    identities: tuple[tuple[tuple[int, float], ProcessIdentity], ...]
    tags: dict[tuple[int, float], str | None]

    def __iter__(self) -> Iterator[_ledger.Entry]:
        for key, i in self.identities:
            yield _ledger.Entry(target=Target(i.pid, i.create_time, i.pgid, self.tags.get(key)), label=i.label)


class ProcessTracker:
    """Knows every stdio server process of this host and makes sure none outlives it.

    Use the per-process instance, :meth:`get_instance`. Separate instances (with their own
    state directory) are for tests and embedding; each has its own marker, ledger file
    and reaper sidecar.

    Thread safety: :meth:`register`, :meth:`unregister`, :meth:`track`, :meth:`tracked`,
    :meth:`kill_all_sync`, :meth:`close_sync` and :meth:`sweep_ledger` may be called from
    any thread; the async methods from a trio task.

    Args:
        state_dir: Where the ledger directory ``processes/`` lives. Default:
            :func:`mcp_actors._config.paths.state_dir` (``$MCP_ACTORS_STATE_DIR``, else next to
            ``$MCP_ACTORS_CONFIG``, else the platform's user state directory).
        term_grace: Seconds between SIGTERM and SIGKILL whenever a tree is killed.
    """

    _instance: ClassVar[ProcessTracker | None] = None
    _instance_lock: ClassVar[threading.Lock] = threading.Lock()
    _all: ClassVar[weakref.WeakSet[ProcessTracker]] = weakref.WeakSet()

    def __init__(self, *, state_dir: str | os.PathLike[str] | None = None, term_grace: float = TERM_GRACE) -> None:
        if not (math.isfinite(term_grace) and term_grace >= 0):
            raise ValueError(f"term_grace must be a finite number >= 0, got {term_grace!r}")
        self._term_grace = term_grace
        self._owner = os.getpid()
        host = ProcessIdentity.of(self._owner, label="host")
        self._marker = f"{self._owner}.{round(host.create_time * 100)}.{next(_serials)}"
        root = Path(state_dir) if state_dir is not None else _default_state_dir()
        self._ledger = _ledger.Ledger(
            path=root / "processes" / f"host-{self._marker}.json", host=host._target(), marker=self._marker
        )
        self._ledger_writer = _ledger.LedgerWriter(self._ledger)
        self._spawns = itertools.count(1)
        self._lock = threading.Lock()
        self._identities: dict[tuple[int, float], ProcessIdentity] = {}
        self._tags: dict[tuple[int, float], str | None] = {}
        self._cgroups: dict[tuple[int, float], str] = {}
        self._host_cgroups: _cgroup.HostCgroups | None = None
        self._cgroups_tried = False
        self._cgroups_lock = threading.Lock()
        self._connections: dict[int, TrackedConnection] = {}
        self._sidecar: subprocess.Popen[bytes] | None = None
        self._sidecar_fd = -1
        self._atexit_armed = False
        self._closing = False
        # Serialises start_safety_net callers without holding _lock across the sidecar's spawn.
        self._net_lock = threading.Lock()
        self._net_ready = False
        ProcessTracker._all.add(self)

    # ------------------------------------------------------------------ instance

    @classmethod
    def get_instance(cls) -> ProcessTracker:
        """The tracker of this process, created on first use (thread-safe).

        A child created by ``os.fork()`` gets its own, fresh instance: the parent's
        servers are not the child's to kill.
        """
        instance = ProcessTracker._instance
        if instance is None:
            with ProcessTracker._instance_lock:
                instance = ProcessTracker._instance
                if instance is None:
                    instance = ProcessTracker._instance = cls()
        return instance

    @property
    def ledger_path(self) -> Path:
        """This host's ledger file (it exists from the first registration to a clean exit)."""
        return self._ledger.path

    @property
    def reaper_pid(self) -> int | None:
        """The PID of the reaper sidecar; ``None`` before the safety net starts (see :meth:`start_safety_net`)."""
        sidecar = self._sidecar
        return None if sidecar is None else sidecar.pid

    @property
    def marker(self) -> str:
        """This host's marker: every tag :meth:`child_env` hands out is ``<marker>/<n>``. Not a secret."""
        return self._marker

    @property
    def closing(self) -> bool:
        """Whether the exit hook (:meth:`close_sync`) has begun: registrations are refused."""
        return self._closing

    def child_env(self) -> dict[str, str]:
        """Environment entries to add to a tracked server's environment; call once per spawn.

        The value is this host's marker plus a spawn number, a *tag*. Descendants inherit
        it wherever they move — another process group, another session, reparented to
        init — so the kill ladder finds a server's whole tree by it, the exit hook and the
        sidecar everything of this host, and a later :meth:`sweep_ledger` everything a
        dead host left behind, even days later (see :mod:`mcp_actors._process.kill`). Not a secret.
        """
        return {MARKER_ENV: f"{self._marker}/{next(self._spawns)}"}

    def arm_exit_hook(self) -> None:
        """Register the :mod:`atexit` hook now (it is otherwise armed by the first registration).

        Exit hooks run last-registered first: code that must run before the tracker kills
        everything at exit (a portal closing its runtime gracefully) arms the tracker's
        hook first, then registers its own.
        """
        with self._lock:
            self._arm_locked()

    def _arm_locked(self) -> None:
        if not self._atexit_armed:
            atexit.register(self._at_exit)
            self._atexit_armed = True

    def target_of(self, identity: ProcessIdentity) -> Target:
        """The kill ladder's view of a tracked process: its identity, its tag and its cgroup."""
        key = (identity.pid, identity.create_time)
        with self._lock:
            tag = self._tags.get(key)
            cgroup = self._cgroups.get(key)
        return Target(identity.pid, identity.create_time, identity.pgid, tag, cgroup)

    def placement(self, tag: str) -> _cgroup.Placement | None:
        """What puts the server with this tag (from :meth:`child_env`) into a cgroup of its own.

        ``None`` where there are no cgroups for this host (see :mod:`mcp_actors._process.cgroup`).
        Call the placement with the server's PID right after its spawn (in the spawning
        thread), and pass its ``path`` to :meth:`register`. The host's cgroup is made as the
        safety net starts, so this does no system call.
        """
        host = self._host_cgroups
        return None if host is None else host.placement(tag)

    def _cgroups_dir(self) -> str | None:
        """This host's cgroup directory, made on first use (``None`` where there is none)."""
        if not self._cgroups_tried:
            with self._cgroups_lock:
                if not self._cgroups_tried:
                    self._host_cgroups = _cgroup.HostCgroups.create(self._marker)
                    self._cgroups_tried = True
        host = self._host_cgroups
        return None if host is None else host.path

    # ------------------------------------------------------------------ safety net

    def start_safety_net(self) -> None:
        """Start the reaper sidecar and write the ledger now, before the first server is spawned.

        With the sidecar running and the ledger (with this host's marker) on disk before a
        server exists, a host that dies at any instant after a spawn — even before the
        spawn is registered — leaves nothing behind: every server carries the marker in
        its environment, and the sidecar kills every carrier when the host's pipe closes.
        :func:`open_runtime <mcp_actors.runtime.open_runtime>` calls it in a worker thread
        as the runtime starts, concurrently with the first connections; the stdio
        transport waits for it (:meth:`wait_safety_net`) only if it is not done yet.

        Blocking (a fork and exec, a small file write) and idempotent; callable from any
        thread. Failures are logged, never raised: they weaken the net but must not stop
        a server from starting. After :meth:`kill_all_sync` dismissed the sidecar, a new
        call starts a new one.
        """
        with self._net_lock:
            with self._lock:
                self._check_owner()
                if self._closing or self._net_ready:
                    return
                self._arm_locked()
                needed = self._sidecar_fd < 0
            # Spawned outside _lock: a registration from another thread never waits for a fork.
            spawned = self._spawn_sidecar() if needed else None
            with self._lock:
                if spawned is not None:
                    if self._sidecar_fd >= 0 or self._closing:
                        _dismiss(*spawned)  # a registration started one meanwhile, or the exit hook began
                    else:
                        self._sidecar, self._sidecar_fd = spawned
                        self._replay_locked()
                if not self._ledger.written and not self._closing:
                    self._write_ledger_locked(wait=True)  # the marker is on disk before any spawn
                self._net_ready = not self._closing

    async def wait_safety_net(self, *, abandon_on_cancel: bool = False) -> None:
        """Return once :meth:`start_safety_net` has run (at once, without a checkpoint, if it has).

        The stdio transport calls it before every spawn: no server may exist before the
        sidecar does. Usually the runtime started the net in the background long before.

        Args:
            abandon_on_cancel: A cancellation ends the wait even while this call's own worker
                job runs (the job finishes on its own). For a caller that only prefers the
                net up, as :func:`~mcp_actors.runtime.open_runtime` does; a spawn must not
                use it.
        """
        if self._net_ready:
            return
        # The servers of a start-up all arrive here while the runtime's own start of the net
        # runs: they share one worker job (each job would be a thread blocked on the lock).
        # A job that ended without a net (the host is exiting, or this is a forked child)
        # leaves each waiter to try itself, and meet the same refusal, as before any spawn.
        starts = _net_starts()
        while (started := starts.get(id(self))) is not None:
            await started.wait()
            if self._net_ready:
                return
        started = starts[id(self)] = trio.Event()
        try:
            # Not cancellable unless asked: it finishes.
            await trio.to_thread.run_sync(self.start_safety_net, abandon_on_cancel=abandon_on_cancel)
        finally:
            del starts[id(self)]
            started.set()

    async def start_safety_net_after(self, first: Callable[[], object]) -> None:
        """Run ``first``, then :meth:`start_safety_net`, in one worker job; waiters join it.

        For a caller with blocking work of its own ahead of the first spawn (the runtime's
        config read). Two jobs side by side fight for the GIL: the sidecar's start is a
        run of system calls, and each waits for the GIL on its way back while the other
        job runs Python (1.5-2.1 ms for the sidecar's spawn beside the runtime's config
        read, 0.25 ms alone: docs/performance.md and 27). :meth:`wait_safety_net`
        callers of this trio run wait for this job from the moment this call begins, with
        no job of their own. ``first`` always runs; its exceptions propagate and the net
        is then still started. Returns once both ran, or once ``first`` ran if another task's
        start of the net was under way already. Not cancellable: it finishes.
        """
        starts = _net_starts()
        if self._net_ready or id(self) in starts:
            # The net is up, or another task of this run is starting it: its waiters wait for that.
            await trio.to_thread.run_sync(first)
            return
        started = starts[id(self)] = trio.Event()

        def job() -> None:
            try:
                first()
            finally:
                self.start_safety_net()

        try:
            await trio.to_thread.run_sync(job)
        finally:
            del starts[id(self)]
            started.set()

    # ------------------------------------------------------------------ registration

    def register(self, identity: ProcessIdentity, *, tag: str | None = None, cgroup: str | None = None) -> None:
        """Track a process: kill its tree on close, on exit, and if this host crashes.

        Cheap and synchronous — call it right after the spawn, before anything can fail.
        It records the process and its tag (read from its environment, see
        :meth:`child_env`) in memory, tells the sidecar (started here unless
        :meth:`start_safety_net` did it before) and updates the ledger: before it returns,
        or — called from a trio task — in a worker thread (see
        :meth:`flush_ledger`). Failures of the ledger or the sidecar are logged, never raised:
        they weaken the safety net but must not stop a server from starting.

        Once the exit hook has begun (:attr:`closing`) nothing new may live: the process
        is killed at once, tree and all, and the registration fails.

        Args:
            identity: The process.
            tag: The tag it was started with (its :meth:`child_env` value), when the caller
                knows it; otherwise it is read from the process's environment (a /proc read
                of ~40 µs, on the event loop in the middle of a server's start).
            cgroup: The cgroup it was placed in (:meth:`placement`), if any: its tree is
                then every member, and the cgroup is removed when the tree is killed.

        Raises:
            TypeError: ``identity`` is not a :class:`ProcessIdentity`.
            RuntimeError: Called in a forked child on the parent's tracker.
            ServerStartFailed: The host is exiting; the process was killed.
        """
        if not isinstance(identity, ProcessIdentity):
            raise TypeError(f"register takes a ProcessIdentity, got {type(identity).__name__}")
        if tag is None:
            tag = _kill.marker_of(identity.pid)
        key = (identity.pid, identity.create_time)
        with self._lock:
            self._check_owner()
            closing = self._closing
            if not closing:
                known = key in self._identities
                self._identities[key] = identity
                self._tags[key] = tag
                if cgroup is not None:
                    self._cgroups[key] = cgroup
                self._arm_locked()
                self._write_ledger_locked()
                if not known:
                    self._send_locked(_track_line(identity, tag))
        if closing:
            target = Target(identity.pid, identity.create_time, identity.pgid, tag, cgroup)
            kill_trees([target], term_grace=0.0, reap=False)
            name = identity.label or f"pid {identity.pid}"
            raise ServerStartFailed(
                f"server {name!r}: not started because the host is exiting; start it again in a new run",
                server=identity.label or None,
            )

    def unregister(self, identity: ProcessIdentity) -> None:
        """Stop tracking a process (after it was reaped normally). Unknown ones are ignored."""
        with self._lock:
            self._check_owner()
            key = (identity.pid, identity.create_time)
            if self._identities.pop(key, None) is None:
                return
            self._tags.pop(key, None)
            self._cgroups.pop(key, None)
            self._write_ledger_locked()
            self._send_locked(f"untrack {identity.pid} {identity.create_time!r}\n")

    def tracked(self) -> tuple[ProcessIdentity, ...]:
        """The tracked processes, oldest registration first."""
        with self._lock:
            return tuple(self._identities.values())

    def track(self, connection: TrackedConnection) -> None:
        """Track a connection, and its server process if it has one (see :meth:`register`)."""
        with self._lock:
            self._check_owner()
            self._connections[id(connection)] = connection
        process = connection.process
        if process is not None:
            self.register(process)

    def _forget(self, connection: TrackedConnection) -> None:
        with self._lock:
            self._connections.pop(id(connection), None)
        process = connection.process
        if process is not None:
            self.unregister(process)

    # ------------------------------------------------------------------ closing

    async def close_connection(self, connection: TrackedConnection, *, close_grace: float = CLOSE_GRACE) -> None:
        """Close a connection gracefully within *close_grace* seconds, then kill its process tree.

        The tree is killed after the graceful close in every case: a server that exited
        on its own may still have left children in its group. The connection is untracked
        however this ends. An exception from ``aclose`` is logged, not raised — the
        connection is closed either way. If the caller is cancelled, the kill still runs
        (shielded, bounded by ``term_grace`` plus about two seconds) before
        ``Cancelled`` propagates.

        Args:
            connection: The connection (it need not have been tracked).
            close_grace: Seconds the graceful close may take.

        Raises:
            ValueError: ``close_grace`` is negative or not finite.
        """
        if not (math.isfinite(close_grace) and close_grace >= 0):
            raise ValueError(f"close_grace must be a finite number >= 0, got {close_grace!r}")
        identity = connection.process
        label = identity.label if identity is not None and identity.label else type(connection).__name__
        try:
            with trio.move_on_after(close_grace) as scope:
                try:
                    await connection.aclose()
                except Exception as exc:
                    logger.warning(
                        "graceful close of %s failed (%s); killing its process tree", label, type(exc).__name__
                    )
            if scope.cancelled_caught:
                logger.info("%s did not close within %.1f s; killing its process tree", label, close_grace)
        finally:
            with trio.CancelScope(shield=True):
                if identity is not None:
                    target = self.target_of(identity)
                    await trio.to_thread.run_sync(partial(kill_trees, [target], term_grace=self._term_grace))
                self._forget(connection)

    async def close_all(self, *, close_grace: float = CLOSE_GRACE) -> None:
        """Close every tracked connection concurrently (as :meth:`close_connection`).

        Processes registered without a connection are killed at the same time.

        Args:
            close_grace: Seconds each graceful close may take.
        """
        with self._lock:
            connections = list(self._connections.values())
            owned = {(c.process.pid, c.process.create_time) for c in connections if c.process is not None}
            bare = [ident for key, ident in self._identities.items() if key not in owned]
        async with trio.open_nursery() as nursery:
            for connection in connections:
                nursery.start_soon(partial(self.close_connection, connection, close_grace=close_grace))
            if bare:
                nursery.start_soon(self._kill_bare, bare)

    async def _kill_bare(self, identities: list[ProcessIdentity]) -> None:
        with trio.CancelScope(shield=True):
            targets = [self.target_of(identity) for identity in identities]
            await trio.to_thread.run_sync(partial(kill_trees, targets, term_grace=self._term_grace))
            for identity in identities:
                self.unregister(identity)

    def kill_all_sync(self) -> None:
        """Kill everything of this host now; once all of it is gone, dismiss the sidecar.

        Every tracked tree, and every process that carries this host's marker (what
        escaped the trees), gets SIGTERM together and shares one ``term_grace``. Only when
        nothing of the host is left is the sidecar told to leave without killing and the
        ledger removed; otherwise the sidecar keeps its list (it acts when this process
        ends) and the ledger stays for the next start. A later :meth:`register` starts
        over. Usable from any thread.

        In a child created by ``os.fork()`` (which inherits the parent's atexit hooks) it
        does nothing: those servers are the parent's.
        """
        if os.getpid() != self._owner:
            return
        with self._lock:
            identities = list(self._identities.values())
            keys = [(i.pid, i.create_time) for i in identities]
            targets = [
                Target(i.pid, i.create_time, i.pgid, self._tags.get(key), self._cgroups.get(key))
                for i, key in zip(identities, keys, strict=True)
            ]
        host_cgroup = self._host_cgroups.path if self._host_cgroups is not None else None
        kill_trees(targets, term_grace=self._term_grace, marker=self._marker, cgroup=host_cgroup)
        left = [identity for identity in identities if identity.is_alive()]
        escaped = {proc.pid for proc in _kill.marker_carriers(self._marker)}
        if host_cgroup is not None:
            escaped.update(_kill.cgroup_members(host_cgroup))  # live ones only: a zombie leaves its cgroup
        with self._lock:
            for identity in identities:
                if identity not in left:
                    key = (identity.pid, identity.create_time)
                    self._identities.pop(key, None)
                    self._tags.pop(key, None)
                    self._cgroups.pop(key, None)
            for ref, connection in list(self._connections.items()):
                process = connection.process
                if process is not None and (process.pid, process.create_time) not in self._identities:
                    del self._connections[ref]
            survivors = sorted({i.pid for i in left} | escaped)
            if survivors:
                logger.error(
                    "%d process(es) of this host survived SIGKILL (pids %s); the reaper and the ledger keep them",
                    len(survivors),
                    ", ".join(map(str, survivors)),
                )
            if survivors or self._identities:  # stuck in the kernel, or registered meanwhile
                self._write_ledger_locked(wait=True)
                return
            self._ledger_writer.remove()
            self._stop_sidecar_locked()

    def close_sync(self) -> None:
        """The exit hook: refuse every later registration, then kill everything of this host.

        First the tracker turns :attr:`closing` — from then on a process registered
        (spawned by a runtime still running in another thread, say) is killed on the spot —
        then :meth:`kill_all_sync` runs. Runs by itself at interpreter exit; a tracker that
        is closing stays closing.
        """
        with self._lock:
            self._closing = True
        self.kill_all_sync()

    def _at_exit(self) -> None:
        try:
            self.close_sync()
        except Exception:
            logger.exception("killing the tracked servers at exit failed")

    # ------------------------------------------------------------------ ledger

    def sweep_ledger(self) -> list[ProcessIdentity]:
        """Kill what crashed earlier hosts left behind; return the processes killed.

        For every ledger of a host that is no longer alive (PID and create_time), each
        recorded process whose PID and create_time still match is killed with its tree,
        and so is every process carrying that host's marker (see :meth:`child_env`); the
        ledger is deleted once nothing of that host is left. Ledgers of live hosts (another
        copy of the program, another test run) are left alone. Synchronous and possibly
        slow (up to ``term_grace`` plus about two seconds when it kills); from trio, run it
        with ``trio.to_thread.run_sync``.

        Returns:
            The recorded processes whose trees had something alive to kill.
        """
        entries = _ledger.sweep(self._ledger.path.parent, own=self._ledger.path, term_grace=self._term_grace)
        _cgroup.sweep()  # the cgroups of dead hosts beside this one (nothing where there are none)
        killed = [
            ProcessIdentity(pid=e.target.pid, create_time=e.target.create_time, pgid=e.target.pgid, label=e.label)
            for e in entries
        ]
        if killed:
            logger.warning(
                "killed %d server process(es) left behind by crashed earlier runs: %s",
                len(killed),
                ", ".join(f"{i.label or 'unnamed'} (pid {i.pid})" for i in killed),
            )
        return killed

    def flush_ledger(self) -> None:
        """Return once the ledger on disk shows every registration made so far.

        Registrations made from a trio task write the ledger in a background thread (a
        slow disk must not stall the event loop); from any other thread they write it
        before they return. Usable from any thread; blocks on file I/O.
        """
        self._ledger_writer.flush()

    def _write_ledger_locked(self, *, wait: bool | None = None) -> None:
        snapshot = _LedgerSnapshot(tuple(self._identities.items()), self._tags.copy())
        # On an event loop the write goes to a worker thread; elsewhere it is done here.
        self._ledger_writer.submit(snapshot, wait=not trio.lowlevel.in_trio_run() if wait is None else wait)

    # ------------------------------------------------------------------ sidecar

    def _spawn_sidecar(self) -> tuple[subprocess.Popen[bytes], int] | None:
        """Start a sidecar; return it and the write end of its pipe (``None``, logged, on failure)."""
        read_end, write_end = os.pipe()  # both non-inheritable: no server ever holds them
        try:
            argv = _sidecar_argv(self._ledger.path, self._term_grace, marker=self._marker, cgroup=self._cgroups_dir())
            sidecar = subprocess.Popen(
                argv,
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a kill of the host's group must not take it along
                cwd=os.path.abspath(os.sep),
            )
        except OSError as exc:
            os.close(write_end)
            logger.warning(
                "cannot start the reaper sidecar (%s); servers may outlive a crash of this process",
                exc.strerror or exc,
            )
            return None
        finally:
            os.close(read_end)
        # Never block a registration on a sidecar that stopped reading.
        os.set_blocking(write_end, False)
        return sidecar, write_end

    def _start_sidecar_locked(self) -> bool:
        spawned = self._spawn_sidecar()
        if spawned is None:
            return False
        self._sidecar, self._sidecar_fd = spawned
        return True

    def _send_locked(self, line: str) -> None:
        """Send one line to the sidecar; replace a dead or stuck sidecar and replay all."""
        if self._sidecar_fd >= 0:
            try:
                os.write(self._sidecar_fd, line.encode())  # < PIPE_BUF: all or nothing
                return
            except OSError:  # BrokenPipeError (it died) or BlockingIOError (it is stuck)
                self._discard_sidecar_locked()
        if self._start_sidecar_locked():
            self._replay_locked()

    def _replay_locked(self) -> None:
        """Tell a new sidecar every tracked process."""
        try:
            for key, identity in self._identities.items():
                os.write(self._sidecar_fd, _track_line(identity, self._tags.get(key)).encode())
        except OSError as exc:
            logger.warning("the reaper sidecar does not accept lines (%s); relying on the ledger", exc)
            self._discard_sidecar_locked()

    def _discard_sidecar_locked(self) -> None:
        """Drop a broken sidecar. SIGKILL first, so that it cannot act on the closed pipe."""
        sidecar, self._sidecar = self._sidecar, None
        fd, self._sidecar_fd = self._sidecar_fd, -1
        _dismiss(sidecar, fd)

    def _stop_sidecar_locked(self) -> None:
        """Tell the sidecar to leave without killing anything, and reap it."""
        self._net_ready = False  # a later registration starts the net over
        sidecar, self._sidecar = self._sidecar, None
        if self._sidecar_fd >= 0:
            try:
                os.write(self._sidecar_fd, b"exit\n")
            except OSError:
                pass
            os.close(self._sidecar_fd)
            self._sidecar_fd = -1
        if sidecar is not None:
            try:
                sidecar.wait(_SIDECAR_EXIT_WAIT)
            except subprocess.TimeoutExpired:
                logger.warning("the reaper sidecar (pid %d) did not leave; killing it", sidecar.pid)
                sidecar.kill()
                try:
                    sidecar.wait(_SIDECAR_EXIT_WAIT)
                except subprocess.TimeoutExpired:
                    pass

    # ------------------------------------------------------------------ fork

    def _check_owner(self) -> None:
        if os.getpid() != self._owner:
            raise RuntimeError(
                f"this process tracker belongs to pid {self._owner}, not to this forked child "
                f"(pid {os.getpid()}); use ProcessTracker.get_instance() in the child"
            )

    def _after_fork_in_child(self) -> None:
        # Runs between fork and exec too (subprocess with a preexec_fn): no locks, no I/O
        # beyond closing our own descriptor. Closing it matters for a fork without exec
        # (multiprocessing): a child holding the write end would keep the sidecar from
        # ever seeing the host die.
        self._lock = threading.Lock()
        self._ledger_writer = _ledger.LedgerWriter(self._ledger)  # a drain of the parent's never ends here
        self._net_lock = threading.Lock()
        self._net_ready = False
        if self._sidecar_fd >= 0:
            try:
                os.close(self._sidecar_fd)
            except OSError:
                pass
            self._sidecar_fd = -1
        self._sidecar = None


def _dismiss(sidecar: subprocess.Popen[bytes] | None, fd: int) -> None:
    """End a sidecar that must not act: SIGKILL it before closing its pipe, then reap it."""
    if sidecar is not None:
        try:
            sidecar.kill()
            sidecar.wait(_SIDECAR_EXIT_WAIT)
        except (OSError, subprocess.TimeoutExpired):
            pass
    if fd >= 0:
        os.close(fd)


def _track_line(identity: ProcessIdentity, tag: str | None) -> str:
    suffix = f" {tag}" if tag is not None and tag.isprintable() and " " not in tag else ""
    return f"track {identity.pid} {identity.create_time!r} {identity.pgid}{suffix}\n"


def _reset_after_fork() -> None:
    ProcessTracker._instance = None
    ProcessTracker._instance_lock = threading.Lock()
    for tracker in list(ProcessTracker._all):
        tracker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
