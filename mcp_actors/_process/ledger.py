"""The PID ledger: what a host has started, on disk, for the next start to clean up.

One small JSON file per host (per tracker) under ``<state dir>/processes/``, rewritten
atomically after every change (by :class:`LedgerWriter`, off the event loop): the host's
own identity, its marker, and every tracked
process (PID, create_time, process group, tag, label). If host and reaper sidecar both
die, the next start's :func:`sweep` kills what the dead host left behind — the recorded
trees, and every process carrying the dead host's marker (an escaped grandchild, say) —
and deletes the file only once nothing of that host is left.

The file exists from before a host's first spawn until its clean exit (or its sidecar's
clean-up), even while nothing is tracked: a server that was closed may have left an
escaped grandchild behind, and the marker in the ledger is the only way to find it.

The ledger is not fsynced: it only has to survive the death of the host, not of the
machine, and after a reboot every process it names is gone anyway.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from mcp_actors._config.paths import make_private_dir
from mcp_actors._process import kill as _kill
from mcp_actors._process.kill import Target

if TYPE_CHECKING:
    import outcome

__all__ = ["LEDGER_GLOB", "Contents", "Entry", "Ledger", "LedgerWriter", "read_ledger", "sweep"]

logger = logging.getLogger(__name__)

LEDGER_VERSION = 1
LEDGER_GLOB = "host-*.json"
_LEDGER_PREFIX, _LEDGER_SUFFIX = LEDGER_GLOB.split("*")
_LEDGER_MIN = len(_LEDGER_PREFIX) + len(_LEDGER_SUFFIX)
# A write's temporary file: ``.host-<...>.json.<thread>.tmp`` (see Ledger.write).
_TMP_PREFIX, _TMP_SUFFIX = "." + _LEDGER_PREFIX, ".tmp"
# A temporary ledger file older than this is debris of a host that died mid-write.
_STALE_TMP_AGE = 60.0
SETTLE = 0.25
"""Seconds a change waits for its background write, with every change after it (see :class:`LedgerWriter`).

A server's PID reaches the disk up to this much later; the file already names the host's
marker, by which a sweep finds the server anyway."""


@attrs.frozen(kw_only=True)
class Entry:
    """One process as the ledger records it."""

    target: Target
    label: str = ""


@attrs.frozen(kw_only=True)
class Contents:
    """A parsed ledger file."""

    host: Target
    marker: str
    entries: tuple[Entry, ...]


@attrs.define(eq=False)
class Ledger:
    """This host's ledger file; written by the tracker (under its lock), read by sweeps.

    Args:
        path: The file.
        host: The host process.
        marker: The host's marker (see :mod:`mcp_actors._process.kill`).
    """

    path: Path
    host: Target
    marker: str
    _warned: bool = attrs.field(default=False, init=False)
    _written: bool = attrs.field(default=False, init=False)

    def write(self, entries: Iterable[Entry]) -> None:
        """Replace the file atomically (temp file, rename); log once if it cannot be written.

        A failure never raises: it only weakens the last of three safety nets.
        """
        payload = {
            "version": LEDGER_VERSION,
            "host": {"pid": self.host.pid, "create_time": self.host.create_time, "pgid": self.host.pgid},
            "marker": self.marker,
            "processes": [
                {
                    "pid": e.target.pid,
                    "create_time": e.target.create_time,
                    "pgid": e.target.pgid,
                    "tag": e.target.tag,
                    "label": e.label,
                }
                for e in entries
            ],
        }
        data = json.dumps(payload, separators=(",", ":")).encode()
        try:
            make_private_dir(self.path.parent)
            tmp = self.path.with_name(f".{self.path.name}.{threading.get_ident()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            self._warned = False
            self._written = True
        except OSError as exc:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "cannot write the process ledger %s (%s); servers of this run may outlive a "
                    "crash of both this process and its reaper; check that the directory is writable "
                    "or set MCP_ACTORS_STATE_DIR",
                    self.path,
                    exc.strerror or exc,
                )

    @property
    def written(self) -> bool:
        """Whether the file was written since it was created or last removed."""
        return self._written

    def remove(self) -> None:
        """Delete the file (a clean exit that left nothing behind), if it was ever written."""
        if not self._written:
            return
        self._written = False
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("could not delete the process ledger %s: %s", self.path, exc.strerror or exc)


@attrs.define(eq=False)
class LedgerWriter:
    """Writes a :class:`Ledger` off the event loop, newest state only.

    A ledger write is a handful of file-system calls that usually take a fraction of a
    millisecond, but an ``ext4`` rename over an existing file starts a write-back and can
    stall for tens of milliseconds on a busy disk: the event loop of a host starting
    twenty servers must not wait for that twenty times. :meth:`submit` with
    ``wait=False`` hands the new state to a worker of trio's thread cache (a burst of
    changes costs one or two writes: only the newest state is written); ``wait=True``
    writes it at once in the caller's thread. Writes and :meth:`remove` are serialised, so
    a stale state is never written after a newer one or after the removal.

    The worker is an idle thread of the cache when there is one (at start-up there is: the
    config was read in one), not a thread of our own: a thread's start waits for the new
    thread to run, and on the event loop, in the middle of a server's start, that wait is a
    GIL hand-off: the first registration held the loop for up to 3.8 ms (measured with
    ``benchmarks.startup_layers --by-task``).

    The file already names the host's marker from before the first spawn (see
    ``ProcessTracker.start_safety_net``), which is what a sweep kills by; an entry that
    reaches the disk a moment after its spawn only adds the PID and group.

    A write waits *settle* seconds after the oldest change it carries, and carries every
    change made meanwhile: twenty servers starting register one by one over 50-200 ms on a
    busy machine, and their registrations reach the disk in one write or two. The worker
    wakes once per write: each wake in the middle of a start takes the GIL from the busy
    event loop, and waking to see whether a burst had gone quiet (every 50 ms) cost a
    20-server start ~5 ms of CPU more than one late write (docs/performance.md).
    With no wait a start cost 23-25 writes, with one of 20 ms 5-15.
    :meth:`flush` does not wait.

    Args:
        ledger: The file to write.
        settle: Seconds a change waits for its write.
        clock: Monotonic seconds (for tests).
        sleep: Blocks for seconds, in the drain's thread (for tests).
    """

    ledger: Ledger
    settle: float = attrs.field(default=SETTLE, kw_only=True)
    _clock: Callable[[], float] = attrs.field(default=time.monotonic, kw_only=True, alias="clock")
    _sleep: Callable[[float], None] = attrs.field(default=time.sleep, kw_only=True, alias="sleep")
    _state: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _io: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _pending: Iterable[Entry] | None = attrs.field(default=None, init=False)
    _oldest: float = attrs.field(default=0.0, init=False)
    """When the oldest unwritten change came (the clock's seconds)."""
    _draining: bool = attrs.field(default=False, init=False)

    def submit(self, entries: Iterable[Entry], *, wait: bool) -> None:
        """Make *entries* the ledger's content: now (``wait``), or soon in a worker thread.

        *entries* is iterated when it is written, in the worker's thread: pass something
        nobody changes afterwards. The tracker passes a snapshot whose entries are made only
        then, so that a registration does not build one entry per tracked server on the
        event loop (the newest of a burst's snapshots is the only one built).

        Never raises for want of a thread: when none can be started, the state is written
        here, as with ``wait``.
        """
        with self._state:
            if self._pending is None:
                self._oldest = self._clock()
            self._pending = entries
            if not wait:
                if self._draining:
                    return  # the drain in flight writes the newest state
                self._draining = True
                try:
                    trio.lowlevel.start_thread_soon(self._drain, _log_failure, name="mcp-actors ledger")
                except RuntimeError as exc:  # "can't start new thread"
                    self._draining = False
                    logger.warning("no thread for the process ledger (%s); writing it here", exc)
                else:
                    return
        self.flush()

    def flush(self) -> None:
        """Return once everything submitted so far is on disk (written here if still pending)."""
        with self._io:
            with self._state:
                entries, self._pending = self._pending, None
            if entries is not None:
                self.ledger.write(entries)

    def remove(self) -> None:
        """Drop any pending state and delete the file (see :meth:`Ledger.remove`)."""
        with self._io:
            with self._state:
                self._pending = None
            self.ledger.remove()

    def _drain(self) -> None:
        """The worker's job: write until nothing is pending (a submit meanwhile is picked up here).

        Each write waits until *settle* after the oldest change it carries: one sleep per
        write. A :meth:`flush` meanwhile writes at once.
        """
        try:
            while True:
                with self._state:
                    if self._pending is None:
                        self._draining = False
                        return
                    wait = self._oldest + self.settle - self._clock()
                if wait > 0:
                    self._sleep(wait)
                    continue
                self.flush()
        except BaseException:
            with self._state:
                self._draining = False  # the next submit starts a new drain
            raise


def _log_failure(result: outcome.Outcome[None]) -> None:
    """A drain's outcome (:meth:`Ledger.write` logs its own I/O failures; this is anything else)."""
    try:
        result.unwrap()
    except Exception:
        logger.exception("writing the process ledger failed")


def read_ledger(path: Path) -> Contents | None:
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
    if isinstance(raw, dict) and raw.get("version") not in (None, LEDGER_VERSION):
        logger.warning("process ledger %s has unknown version %r; left alone", path, raw.get("version"))
        return None
    try:
        host = _target_from(raw["host"])
        marker = str(raw["marker"])
        entries = tuple(Entry(target=_target_from(e), label=str(e.get("label", ""))) for e in raw["processes"])
    except (TypeError, KeyError, ValueError, AttributeError):
        logger.warning("process ledger %s is corrupt; deleting it (nothing in it can be trusted)", path)
        try:
            path.unlink()
        except OSError:
            pass
        return None
    return Contents(host=host, marker=marker, entries=entries)


def _target_from(entry: Any) -> Target:
    if not isinstance(entry, dict):
        raise TypeError("ledger entry is not an object")
    pid, create_time, pgid = int(entry["pid"]), float(entry["create_time"]), int(entry["pgid"])
    if pid <= 0 or pgid <= 0 or not create_time >= 0:
        raise ValueError("ledger entry has a bad pid, pgid or create_time")
    tag = entry.get("tag")
    return Target(pid, create_time, pgid, None if tag is None else str(tag))


def _alive(target: Target) -> bool:
    return _kill.is_running(target.pid, target.create_time)


def sweep(directory: Path, *, own: Path | None, term_grace: float) -> list[Entry]:
    """Kill what dead hosts left behind; return the recorded processes whose trees were killed.

    For every ledger of a host that is no longer alive (PID and create_time), each recorded
    process whose PID and create_time still match is killed with its tree, and so is every
    process that carries the dead host's marker. A dead leader's process group is not
    trusted (days may have passed). The file is deleted once nothing of that host is left.
    Ledgers of live hosts — another copy of the program, another test run — are never
    touched. Synchronous and possibly slow (up to ``term_grace`` plus a few seconds when
    it kills).

    Args:
        directory: The ledger directory.
        own: This host's own ledger, skipped.
        term_grace: Seconds between SIGTERM and SIGKILL.
    """
    killed: list[Entry] = []
    try:
        paths, temporaries = _listing(directory)
    except OSError:
        return killed
    for path in paths:
        if path == own:
            continue
        contents = read_ledger(path)
        if contents is None or _alive(contents.host):
            continue
        by_target = {entry.target: entry for entry in contents.entries}
        marker = contents.marker
        for target in _kill.kill_trees(by_target, term_grace=term_grace, marker=marker, stale=True, reap=False):
            if target in by_target:
                killed.append(by_target[target])
        left = _kill.marker_carriers(contents.marker)
        if left:
            logger.warning(
                "%d process(es) of a dead host survived SIGKILL (pids %s); keeping its ledger %s for the next start",
                len(left),
                ", ".join(str(p.pid) for p in left),
                path,
            )
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass  # a concurrent sweep or the dead host's sidecar got there first
        except OSError as exc:
            logger.warning("could not delete the stale ledger %s: %s", path, exc.strerror)
    _remove_stale_temporaries(temporaries)
    return killed


def _listing(directory: Path) -> tuple[list[Path], list[Path]]:
    """The ledgers (:data:`LEDGER_GLOB`) and the temporary files in *directory*, sorted.

    One ``scandir`` and plain string tests: a glob pattern compiles a regular expression on
    its first use in a process, and the sweep is in every runtime's start (two patterns:
    ~0.4 ms of a worker thread's CPU, against ~0.04 ms for the whole sweep after them).
    """
    ledgers: list[Path] = []
    temporaries: list[Path] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(_LEDGER_PREFIX) and name.endswith(_LEDGER_SUFFIX) and len(name) >= _LEDGER_MIN:
                ledgers.append(directory / name)
            elif name.startswith(_TMP_PREFIX) and name.endswith(_TMP_SUFFIX):
                temporaries.append(directory / name)
    return sorted(ledgers), temporaries


def _remove_stale_temporaries(temporaries: Iterable[Path]) -> None:
    now = time.time()
    for tmp in temporaries:
        try:
            if now - tmp.stat().st_mtime > _STALE_TMP_AGE:
                tmp.unlink()
        except OSError:
            continue
