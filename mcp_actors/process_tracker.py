"""Track every stdio server process, and make sure none outlives its host.

One :class:`ProcessTracker` per process (:meth:`ProcessTracker.get_instance`) knows every
server it was told about by PID, create_time and process group — a PID is never used
without its create_time, so a recycled PID is never mistaken for ours. It closes
connections gracefully with a bound, then kills the whole process tree
(:meth:`~ProcessTracker.close_connection`, :meth:`~ProcessTracker.close_all`).

The safety net has four layers, each catching what the one before cannot:

1. ``PR_SET_PDEATHSIG`` in the child (:func:`pdeathsig_preexec`, Linux): the kernel kills
   a server the moment its parent dies. It reaches only the direct child, and only when
   the spawning thread lives as long as the host.
2. An :mod:`atexit` hook: on a normal interpreter exit (including an unhandled
   exception) every tracked tree is killed synchronously
   (:meth:`~ProcessTracker.kill_all_sync`).
3. The reaper sidecar (:mod:`mcp_actors._reaper`): a tiny process in its own session that
   holds a pipe from the host. When the host dies in any way — SIGKILL, a segfault, the
   OOM killer — the pipe reaches end-of-file and the sidecar kills every tracked tree.
4. The ledger: one small JSON file per host under the state directory (``processes/``
   below ``MCP_ACTORS_STATE_DIR``, else the user state directory), rewritten atomically
   on every change. If host and sidecar both died, the next start's
   :meth:`~ProcessTracker.sweep_ledger` kills what the dead host left behind.

The ledger is not fsynced: it only has to survive the death of the host, not of the
machine, and after a reboot every process it names is gone anyway.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import platformdirs
import psutil
import trio

from mcp_actors import _reaper
from mcp_actors._reaper import MARKER_ENV, Target, find_process, kill_trees

__all__ = [
    "ProcessIdentity",
    "ProcessTracker",
    "STATE_DIR_ENV",
    "TrackedConnection",
    "kill_process_tree",
    "pdeathsig_preexec",
]

logger = logging.getLogger(__name__)

#: Environment variable naming the state directory (the ledger lives in ``processes/``).
STATE_DIR_ENV = "MCP_ACTORS_STATE_DIR"

_LEDGER_VERSION = 1
_LEDGER_GLOB = "host-*.json"
# A temporary ledger file older than this is debris of a host that died mid-write.
_STALE_TMP_AGE = 60.0
# How long a clean shutdown waits for the sidecar to leave after "exit".
_SIDECAR_EXIT_WAIT = 1.0
_PR_SET_PDEATHSIG = 1

_serials = itertools.count(1)


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
            create_time = psutil.Process(pid).create_time()
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
        proc = find_process(self.pid, self.create_time)
        if proc is None:
            return False
        try:
            return bool(proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True

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


def kill_process_tree(identity: ProcessIdentity, *, term_timeout: float = 1.0) -> None:
    """Kill a tracked process, its descendants and (if it leads one) its process group.

    Synchronous, built on psutil: the descendants are snapshotted first
    (``children(recursive=True)``, each checked against its create_time), then the group
    and every descendant get SIGTERM, then at most *term_timeout* seconds pass, then the
    survivors get SIGKILL. Dead children of the calling process are reaped. Orphans left
    in the group by a leader that already exited are killed too. Nothing is signalled
    unless its PID and create_time match, so a recycled PID is safe.

    Blocks for up to ``term_timeout`` plus about two seconds; from trio, run it with
    ``trio.to_thread.run_sync``.

    Args:
        identity: The process (usually a server's group leader).
        term_timeout: Seconds between SIGTERM and SIGKILL.

    Raises:
        ValueError: ``term_timeout`` is negative.
    """
    kill_trees([identity._target()], term_timeout=term_timeout)


def pdeathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the kernel SIGKILL the child when its parent dies (Linux).

    The first line of defence: it needs no help from the host, not even a last
    instruction. Pass it as ``subprocess.Popen(..., preexec_fn=pdeathsig_preexec())``.
    On other systems it returns ``None`` (no preexec function).

    Caveats:
        * Linux delivers the signal when the *thread* that forked the child exits, not
          the process. A child forked from a worker thread would be killed as soon as
          that thread retires — and ``trio.lowlevel.open_process`` forks in trio's worker
          threads, which retire after a few idle seconds. The function therefore only
          arms the signal when the fork happens on the main thread (which lives as long
          as the interpreter); from any other thread it does nothing, and the reaper
          sidecar is the net instead.
        * It reaches the direct child only; grandchildren are the reaper's and the
          ledger's job.
        * ``preexec_fn`` makes ``subprocess`` fork instead of using ``vfork`` and is not
          safe in a process whose other threads hold locks the child needs; the
          function only calls ``prctl``, ``getppid`` and ``kill``.
        * Create it in the process that spawns the child: it compares the child's
          parent with the creating process to detect a parent that died before the
          ``prctl``.

    Returns:
        The preexec function, or ``None`` where ``prctl`` is unavailable.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    main_thread = threading.main_thread().ident

    def arm_parent_death_signal() -> None:
        # In the child, between fork and exec. threading.get_ident() is still the id of
        # the thread that forked (the child is a copy of it).
        if threading.get_ident() != main_thread:
            return
        if prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return arm_parent_death_signal


def _default_state_dir() -> Path:
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    return Path(platformdirs.user_state_dir("mcp-actors", appauthor=False))


def _sidecar_argv(ledger: Path, term_timeout: float) -> list[str]:
    script = _reaper.__file__
    psutil_home = os.path.dirname(os.path.dirname(os.path.abspath(psutil.__file__)))
    options = ["--site", psutil_home, "--ledger", str(ledger), "--term-timeout", repr(term_timeout)]
    if script and os.path.isfile(script):
        # -I -S: no user site, no site-packages, no PYTHON* variables; the sidecar needs
        # only the stdlib and psutil, and starts in a few tens of milliseconds.
        return [sys.executable, "-I", "-S", script, _reaper.SIDECAR_TAG, *options]
    return [sys.executable, "-I", "-m", "mcp_actors._reaper", *options]


class ProcessTracker:
    """Knows every stdio server process of this host and makes sure none outlives it.

    Use the per-process instance, :meth:`get_instance`. Separate instances (with their own
    state directory) are for tests and embedding; each has its own ledger file and its
    own reaper sidecar.

    Thread safety: :meth:`register`, :meth:`unregister`, :meth:`track`, :meth:`tracked`,
    :meth:`kill_all_sync` and :meth:`sweep_ledger` may be called from any thread; the
    async methods from a trio task.

    Args:
        state_dir: Where the ledger directory ``processes/`` lives. Default:
            ``$MCP_ACTORS_STATE_DIR``, else the platform's user state directory.
        term_timeout: Seconds between SIGTERM and SIGKILL whenever a tree is killed.
    """

    _instance: ClassVar[ProcessTracker | None] = None
    _instance_lock: ClassVar[threading.Lock] = threading.Lock()
    _all: ClassVar[weakref.WeakSet[ProcessTracker]] = weakref.WeakSet()

    def __init__(self, *, state_dir: str | os.PathLike[str] | None = None, term_timeout: float = 1.0) -> None:
        if not (math.isfinite(term_timeout) and term_timeout >= 0):
            raise ValueError(f"term_timeout must be a finite number >= 0, got {term_timeout!r}")
        self._term_timeout = term_timeout
        self._owner = os.getpid()
        self._host = ProcessIdentity.of(self._owner, label="host")
        self._marker = f"{self._owner}.{round(self._host.create_time * 100)}.{next(_serials)}"
        root = Path(state_dir) if state_dir is not None else _default_state_dir()
        self._ledger_dir = root / "processes"
        self._ledger_path = self._ledger_dir / f"host-{self._marker}.json"
        self._lock = threading.Lock()
        self._identities: dict[tuple[int, float], ProcessIdentity] = {}
        self._connections: dict[int, TrackedConnection] = {}
        self._sidecar: subprocess.Popen[bytes] | None = None
        self._sidecar_fd = -1
        self._atexit_armed = False
        self._ledger_warned = False
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
        """This host's ledger file (it exists only while something is tracked)."""
        return self._ledger_path

    @property
    def reaper_pid(self) -> int | None:
        """The PID of the reaper sidecar, or ``None`` before the first registration."""
        sidecar = self._sidecar
        return None if sidecar is None else sidecar.pid

    def child_env(self) -> dict[str, str]:
        """Environment entries to add to every tracked server's environment.

        The value names this host. Descendants inherit it, which lets a later
        :meth:`sweep_ledger` prove that an orphan left behind in a dead server's process
        group is ours even days later (see :mod:`mcp_actors._reaper`). Not a secret.
        """
        return {MARKER_ENV: self._marker}

    # ------------------------------------------------------------------ registration

    def register(self, identity: ProcessIdentity) -> None:
        """Track a process: kill its tree on close, on exit, and if this host crashes.

        Cheap and synchronous — call it right after the spawn, before anything can fail.
        It records the process in memory, rewrites the ledger and tells the sidecar
        (started on the first call). Failures of the ledger or the sidecar are logged, never
        raised: they weaken the safety net but must not stop a server from starting.

        Args:
            identity: The process.

        Raises:
            TypeError: ``identity`` is not a :class:`ProcessIdentity`.
            RuntimeError: Called in a forked child on the parent's tracker.
        """
        if not isinstance(identity, ProcessIdentity):
            raise TypeError(f"register takes a ProcessIdentity, got {type(identity).__name__}")
        with self._lock:
            self._check_owner()
            key = (identity.pid, identity.create_time)
            known = key in self._identities
            self._identities[key] = identity
            if not self._atexit_armed:
                atexit.register(self._at_exit)
                self._atexit_armed = True
            self._write_ledger_locked()
            if not known:
                self._send_locked(_track_line(identity))

    def unregister(self, identity: ProcessIdentity) -> None:
        """Stop tracking a process (after it was reaped normally). Unknown ones are ignored."""
        with self._lock:
            self._check_owner()
            if self._identities.pop((identity.pid, identity.create_time), None) is None:
                return
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

    async def close_connection(self, connection: TrackedConnection, *, grace: float = 3.0) -> None:
        """Close a connection gracefully within *grace* seconds, then kill its process tree.

        The tree is killed after the graceful close in every case: a server that exited
        on its own may still have left children in its group. The connection is untracked
        however this ends. An exception from ``aclose`` is logged, not raised — the
        connection is closed either way. If the caller is cancelled, the kill still runs
        (shielded, bounded by ``term_timeout`` plus about two seconds) before
        ``Cancelled`` propagates.

        Args:
            connection: The connection (it need not have been tracked).
            grace: Seconds the graceful close may take.

        Raises:
            ValueError: ``grace`` is negative or not finite.
        """
        if not (math.isfinite(grace) and grace >= 0):
            raise ValueError(f"grace must be a finite number >= 0, got {grace!r}")
        identity = connection.process
        label = identity.label if identity is not None and identity.label else type(connection).__name__
        try:
            with trio.move_on_after(grace) as scope:
                try:
                    await connection.aclose()
                except Exception as exc:
                    logger.warning(
                        "graceful close of %s failed (%s); killing its process tree", label, type(exc).__name__
                    )
            if scope.cancelled_caught:
                logger.info("%s did not close within %.1f s; killing its process tree", label, grace)
        finally:
            with trio.CancelScope(shield=True):
                if identity is not None:
                    await trio.to_thread.run_sync(partial(kill_process_tree, identity, term_timeout=self._term_timeout))
                self._forget(connection)

    async def close_all(self, *, grace: float = 3.0) -> None:
        """Close every tracked connection concurrently (as :meth:`close_connection`).

        Processes registered without a connection are killed at the same time.

        Args:
            grace: Seconds each graceful close may take.
        """
        with self._lock:
            connections = list(self._connections.values())
            owned = {(c.process.pid, c.process.create_time) for c in connections if c.process is not None}
            bare = [ident for key, ident in self._identities.items() if key not in owned]
        async with trio.open_nursery() as nursery:
            for connection in connections:
                nursery.start_soon(partial(self.close_connection, connection, grace=grace))
            if bare:
                nursery.start_soon(self._kill_bare, bare)

    async def _kill_bare(self, identities: list[ProcessIdentity]) -> None:
        with trio.CancelScope(shield=True):
            targets = [identity._target() for identity in identities]
            await trio.to_thread.run_sync(partial(kill_trees, targets, term_timeout=self._term_timeout))
            for identity in identities:
                self.unregister(identity)

    def kill_all_sync(self) -> None:
        """Kill every tracked tree now, then dismiss the sidecar without it killing anything.

        The :mod:`atexit` path (also usable directly, from any thread). All trees get
        SIGTERM together and share one ``term_timeout``. The ledger file is removed. A
        later :meth:`register` starts over with a new sidecar.

        In a child created by ``os.fork()`` (which inherits the parent's atexit hooks) it
        does nothing: those servers are the parent's.
        """
        if os.getpid() != self._owner:
            return
        with self._lock:
            identities = list(self._identities.values())
        if identities:
            kill_trees([identity._target() for identity in identities], term_timeout=self._term_timeout)
        with self._lock:
            killed = set()
            for identity in identities:
                key = (identity.pid, identity.create_time)
                self._identities.pop(key, None)
                killed.add(key)
            for ref, connection in list(self._connections.items()):
                process = connection.process
                if process is not None and (process.pid, process.create_time) in killed:
                    del self._connections[ref]
            self._write_ledger_locked()
            self._stop_sidecar_locked()

    def _at_exit(self) -> None:
        try:
            self.kill_all_sync()
        except Exception:
            logger.exception("killing the tracked servers at exit failed")

    async def run(self, *, task_status: trio.TaskStatus[ProcessTracker] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve as a supervised child: sweep the ledger, then close everything on stop.

        Sweeps leftovers of crashed earlier runs (in a worker thread), reports itself as
        started, and sleeps until cancelled; then closes every tracked connection
        (shielded, each bounded as in :meth:`close_connection`).
        """
        await trio.to_thread.run_sync(self.sweep_ledger)
        task_status.started(self)
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.close_all()

    # ------------------------------------------------------------------ ledger

    def sweep_ledger(self) -> list[ProcessIdentity]:
        """Kill what crashed earlier hosts left behind; return the processes killed.

        For every ledger of a host that is no longer alive (PID and create_time), each
        recorded process whose PID and create_time still match is killed with its tree;
        orphans in its group are killed only if they carry that host's marker (see
        :meth:`child_env`). Then the stale ledger is deleted. Ledgers of live hosts are
        left alone. Synchronous and possibly slow (up to ``term_timeout`` plus about two
        seconds when it kills); from trio, run it with ``trio.to_thread.run_sync``.

        Returns:
            The recorded processes whose trees had something alive to kill.
        """
        killed: list[ProcessIdentity] = []
        try:
            paths = sorted(self._ledger_dir.glob(_LEDGER_GLOB))
        except OSError:
            return killed
        for path in paths:
            if path == self._ledger_path:
                continue
            ledger = _read_ledger(path)
            if ledger is None:
                continue
            host, marker, identities = ledger
            if host.is_alive():
                continue
            by_target = {identity._target(): identity for identity in identities}
            for target in kill_trees(by_target, term_timeout=self._term_timeout, marker=marker, reap=False):
                killed.append(by_target[target])
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # a concurrent sweep or the dead host's sidecar got there first
            except OSError as exc:
                logger.warning("could not delete the stale ledger %s: %s", path, exc.strerror)
        if killed:
            logger.warning(
                "killed %d server process(es) left behind by crashed earlier runs: %s",
                len(killed),
                ", ".join(f"{i.label or 'unnamed'} (pid {i.pid})" for i in killed),
            )
        self._remove_stale_temporaries()
        return killed

    def _remove_stale_temporaries(self) -> None:
        now = time.time()
        try:
            for tmp in self._ledger_dir.glob(".host-*.tmp"):
                try:
                    if now - tmp.stat().st_mtime > _STALE_TMP_AGE:
                        tmp.unlink()
                except OSError:
                    continue
        except OSError:
            pass

    def _write_ledger_locked(self) -> None:
        try:
            if not self._identities:
                self._ledger_path.unlink(missing_ok=True)
                return
            self._ledger_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            payload = {
                "version": _LEDGER_VERSION,
                "host": {"pid": self._host.pid, "create_time": self._host.create_time, "pgid": self._host.pgid},
                "marker": self._marker,
                "processes": [
                    {"pid": i.pid, "create_time": i.create_time, "pgid": i.pgid, "label": i.label}
                    for i in self._identities.values()
                ],
            }
            data = json.dumps(payload, separators=(",", ":")).encode()
            tmp = self._ledger_path.with_name(f".{self._ledger_path.name}.{threading.get_ident()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, self._ledger_path)
            self._ledger_warned = False
        except OSError as exc:
            if not self._ledger_warned:
                self._ledger_warned = True
                logger.warning(
                    "cannot write the process ledger %s (%s); servers of this run may outlive a "
                    "crash of both this process and its reaper; check that the directory is writable "
                    "or set %s",
                    self._ledger_path,
                    exc.strerror or exc,
                    STATE_DIR_ENV,
                )

    # ------------------------------------------------------------------ sidecar

    def _start_sidecar_locked(self) -> bool:
        read_end, write_end = os.pipe()  # both non-inheritable: no server ever holds them
        try:
            self._sidecar = subprocess.Popen(
                _sidecar_argv(self._ledger_path, self._term_timeout),
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
            return False
        finally:
            os.close(read_end)
        # Never block a registration on a sidecar that stopped reading.
        os.set_blocking(write_end, False)
        self._sidecar_fd = write_end
        return True

    def _send_locked(self, line: str) -> None:
        """Send one line to the sidecar; replace a dead or stuck sidecar and replay all."""
        if self._sidecar_fd >= 0:
            try:
                os.write(self._sidecar_fd, line.encode())  # < PIPE_BUF: all or nothing
                return
            except OSError:  # BrokenPipeError (it died) or BlockingIOError (it is stuck)
                self._discard_sidecar_locked()
        if not self._start_sidecar_locked():
            return
        try:
            for identity in self._identities.values():
                os.write(self._sidecar_fd, _track_line(identity).encode())
        except OSError as exc:
            logger.warning("the reaper sidecar does not accept lines (%s); relying on the ledger", exc)
            self._discard_sidecar_locked()

    def _discard_sidecar_locked(self) -> None:
        """Drop a broken sidecar. SIGKILL first, so that it cannot act on the closed pipe."""
        sidecar, self._sidecar = self._sidecar, None
        if sidecar is not None:
            try:
                sidecar.kill()
                sidecar.wait(_SIDECAR_EXIT_WAIT)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self._sidecar_fd >= 0:
            os.close(self._sidecar_fd)
            self._sidecar_fd = -1

    def _stop_sidecar_locked(self) -> None:
        """Tell the sidecar to leave without killing anything, and reap it."""
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
        if self._sidecar_fd >= 0:
            try:
                os.close(self._sidecar_fd)
            except OSError:
                pass
            self._sidecar_fd = -1
        self._sidecar = None


def _track_line(identity: ProcessIdentity) -> str:
    return f"track {identity.pid} {identity.create_time!r} {identity.pgid}\n"


def _read_ledger(path: Path) -> tuple[ProcessIdentity, str, list[ProcessIdentity]] | None:
    """Parse a ledger file; ``None`` (after a warning, or deleting it if corrupt) if unusable."""
    try:
        raw: Any = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read the process ledger %s: %s", path, exc.strerror or exc)
        return None
    except ValueError:
        raw = None
    if isinstance(raw, dict) and raw.get("version") not in (None, _LEDGER_VERSION):
        logger.warning("process ledger %s has unknown version %r; left alone", path, raw.get("version"))
        return None
    try:
        host = _identity_from(raw["host"], label="host")
        marker = str(raw["marker"])
        identities = [_identity_from(entry) for entry in raw["processes"]]
    except (TypeError, KeyError, ValueError):
        logger.warning("process ledger %s is corrupt; deleting it (nothing in it can be trusted)", path)
        try:
            path.unlink()
        except OSError:
            pass
        return None
    return host, marker, identities


def _identity_from(entry: Any, *, label: str | None = None) -> ProcessIdentity:
    if not isinstance(entry, dict):
        raise TypeError("ledger entry is not an object")
    return ProcessIdentity(
        pid=int(entry["pid"]),
        create_time=float(entry["create_time"]),
        pgid=int(entry["pgid"]),
        label=label if label is not None else str(entry.get("label", "")),
    )


def _reset_after_fork() -> None:
    ProcessTracker._instance = None
    ProcessTracker._instance_lock = threading.Lock()
    for tracker in list(ProcessTracker._all):
        tracker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
