"""Transports: stdio with our own spawn, SSE and streamable HTTP through the SDK, in-memory.

Every transport kind is a frozen params class (:class:`StdioParams`, :class:`HttpParams`,
:class:`MemoryParams`) satisfying :class:`TransportParams`: its ``open(label=...)`` is an
async context manager yielding a :class:`TransportLink` — the :class:`~mcp_actors._wire.base.Wire`
(stdio: :class:`StdioWire`) or the SDK stream pair the session's dispatcher runs on — plus
what the connection actor needs to fail fast —
:attr:`TransportLink.dead` is set the moment the transport is seen to die (stdout EOF,
process exit, broken stdin, HTTP stream error, HTTP status that no request can get past),
with a human reason and, for stdio, the tail of the server's stderr. A server record maps
to its params through :func:`params_for_record` (a registry keyed by the record's type, see
:func:`register_transport_kind`), so nothing else switches on the kind.

Every text a link produces (death reasons, stderr lines) has the params' secrets and
secret-looking parts redacted (:mod:`mcp_actors._config.redact`), and while a transport is open
through :func:`open_transport` the SDK's and httpx's log records are redacted as well.

Why our own stdio spawn instead of the SDK's ``stdio_client``: we need the PID and its
create_time registered with the process tracker before anything else can fail, the process
in its own process group (so the whole tree can be killed), stderr drained into a bounded
ring buffer (a server that floods stderr must never block on a full pipe, and its last
lines are the best error message there is), garbage on stdout reported rather than
fatal, and death observed directly rather than when a request times out.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import shutil
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final

import attrs
import psutil
import trio

from mcp_actors._config import variables as _variables
from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._config.redact import install_log_filter, registered_secrets
from mcp_actors._config.sdk_logs import sdk_logs_owned
from mcp_actors._process.kill import MARKER_ENV, create_time_of
from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker, stop_process
from mcp_actors._wire.base import Deliver, WireClosed
from mcp_actors._wire.codec import answer_id, decode, encode, unreadable
from mcp_actors._wire.http.transport import HttpParams as HttpParams
from mcp_actors._wire.http.transport import open_http_transport as open_http_transport
from mcp_actors._wire.link import StderrTail as StderrTail
from mcp_actors._wire.link import TransportLink as TransportLink
from mcp_actors._wire.link import TransportParams as TransportParams
from mcp_actors._wire.link import params_for_record as params_for_record
from mcp_actors._wire.link import register_transport_kind as register_transport_kind
from mcp_actors._wire.link import server_logger
from mcp_actors._wire.lograte import LogThrottle
from mcp_actors._wire.memory import MemoryParams as MemoryParams
from mcp_actors._wire.memory import open_memory_transport as open_memory_transport
from mcp_actors._wire.spawn import SpawnedProcess, spawn_process
from mcp_actors.errors import (
    CommandNotFound,
    InvalidServerConfig,
    ServerMisconfigured,
    ServerStartFailed,
    WorkingDirectoryNotFound,
)

__all__ = [
    "HttpParams",
    "MemoryParams",
    "StdioParams",
    "TransportLink",
    "TransportParams",
    "params_for_record",
    "register_transport_kind",
]

_SPAWN_CONCURRENCY: Final = 20
"""Spawns at a time per trio run (each runs in a thread of its own; see open_stdio_transport)."""
_SPAWN_SLOTS: trio.lowlevel.RunVar[trio.Semaphore] = trio.lowlevel.RunVar("mcp_actors_spawn_slots")


def _spawn_slots() -> trio.Semaphore:
    try:
        return _SPAWN_SLOTS.get()
    except LookupError:
        slots = trio.Semaphore(_SPAWN_CONCURRENCY)
        _SPAWN_SLOTS.set(slots)
        return slots


logger = logging.getLogger(__name__)

_READ_CHUNK: Final = 1 << 16
_STDERR_LINE_MAX: Final = 2000
_GARBAGE_SAMPLE_MAX: Final = 200
_EXIT_STATUS_GRACE: Final = 0.2
_LATE_EXIT_WATCH: Final = 2.0
"""Seconds more for the exit watcher when the process already exited (see _die_of_a_broken_pipe)."""


@attrs.frozen(kw_only=True)
class StdioParams:
    """How to start a stdio server.

    Placeholders (``${env:NAME}``, ``${NAME}``, ``${mcpActors:python}``, see
    :mod:`mcp_actors._config.variables`) in ``command``, ``args``, ``env``, ``cwd`` and
    ``env_file`` are kept as written here and expanded by :meth:`resolved` when the
    server is started, from the host environment of that moment.

    Attributes:
        command: Executable name (looked up on PATH) or path.
        args: Its arguments.
        env: Overrides on top of the host's environment (values are secrets).
        cwd: Working directory, or ``None`` for the host's.
        env_file: A dotenv file read at start, under ``env`` (its values are secrets).
        close_grace: Seconds to wait for the server to exit after its stdin closes.
        term_grace: Seconds to wait after SIGTERM before SIGKILL.
        max_message_bytes: Largest single JSON-RPC line accepted from the server.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = attrs.field(factory=dict, repr=lambda env: repr(sorted(env)))
    cwd: str | None = None
    close_grace: float = 2.0
    term_grace: float = 2.0
    max_message_bytes: int = 256 * 1024 * 1024
    env_file: str | None = None
    substituted: tuple[str, ...] = attrs.field(default=(), repr=False)
    """Values placeholders were replaced with (set by :meth:`resolved`): secrets."""

    @classmethod
    def from_record(cls, record: McpServerRecord) -> StdioParams:
        """The params a validated ``stdio`` record implies."""
        config = record.config
        if config.command is None:
            raise InvalidServerConfig(
                f"server {record.name!r} has no command; set config.command", server=record.name, field="command"
            )
        return cls(
            command=config.command,
            args=tuple(config.args),
            env=dict(config.env),
            cwd=config.cwd,
            env_file=config.env_file,
        )

    def resolved(self, *, label: str) -> StdioParams:
        """These params with every placeholder expanded and the env file merged into ``env``.

        Raises:
            UnresolvedPlaceholder: A placeholder has no value (names it and the field).
            ServerMisconfigured: The env file cannot be read.
        """
        used: list[str] = []

        def expand(text: str, field: str) -> str:
            value, values = _variables.expand(text, field=field, server=label)
            used.extend(values)
            return value

        command = expand(self.command, "config.command")
        args = tuple(expand(arg, f"config.args[{i}]") for i, arg in enumerate(self.args))
        cwd = expand(self.cwd, "config.cwd") if self.cwd is not None else None
        env: dict[str, str] = {}
        if self.env_file is not None:
            env_file = expand(self.env_file, "config.envFile")
            env.update(_variables.load_env_file(env_file, server=label, base=cwd))
        env.update({key: expand(value, f"config.env.{key}") for key, value in self.env.items()})
        return attrs.evolve(
            self,
            command=command,
            args=args,
            env=env,
            cwd=cwd,
            env_file=None,
            substituted=(*self.substituted, *used),
        )

    def open(self, *, label: str) -> contextlib.AbstractAsyncContextManager[TransportLink]:
        """Spawn the server (see :func:`open_stdio_transport`), placeholders expanded first."""
        return open_stdio_transport(self, label=label)

    def secret_values(self) -> tuple[str, ...]:
        """The env values (expanded, and the env file's), and every substituted value.

        Best effort when a placeholder cannot be expanded yet: the open that follows
        fails on it before anything runs.
        """
        values = [*self.env.values(), *self.substituted]
        # Field by field: one unresolved placeholder hides no other value. An env value is a
        # secret whole; of an argument only what was substituted into it.
        for key, text in self.env.items():
            with contextlib.suppress(ServerMisconfigured):
                expanded, used = _variables.expand(text, field=f"config.env.{key}", server="-")
                values += [expanded, *used]
        for i, text in enumerate(self.args):
            with contextlib.suppress(ServerMisconfigured):
                values += _variables.expand(text, field=f"config.args[{i}]", server="-")[1]
        if self.env_file is not None:
            with contextlib.suppress(ServerMisconfigured):
                cwd = _variables.expand(self.cwd, field="config.cwd", server="-")[0] if self.cwd else None
                env_file = _variables.expand(self.env_file, field="config.envFile", server="-")[0]
                values += _variables.load_env_file(env_file, server="-", base=cwd).values()
        return tuple(dict.fromkeys(v for v in values if v))


def check_command(command: str, *, server: str) -> None:
    """Refuse an empty command before anything runs; the spawn itself resolves the rest.

    ``subprocess`` looks the command up the way a shell would, in the child, off the event
    loop: a bare name on the server's own ``PATH`` (the record's ``env.PATH``, else the
    host's), a relative path in the server's ``cwd``. Only a failed spawn is looked into
    again (:func:`spawn_failure`), to say what is wrong.

    Raises:
        CommandNotFound: The command is empty.
    """
    if not command.strip():
        raise CommandNotFound(
            f"server {server!r} has an empty command; set config.command",
            server=server,
            command=command,
        )


def _locate(command: str, path: str, cwd: str | None) -> str | None:
    """Where the spawn looked for ``command`` and found an executable file, if anywhere."""
    if os.sep not in command:
        return shutil.which(command, path=path)
    candidate = os.path.join(cwd or os.getcwd(), command)  # an absolute command stays as it is
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def spawn_failure(
    exc: OSError, command: str, env: Mapping[str, str] | Mapping[bytes, bytes], cwd: str | None, *, server: str
) -> CommandNotFound | ServerStartFailed:
    """The typed error for a spawn of ``command`` that raised ``exc``, saying what to fix.

    A command that is not there (or not executable) is :class:`CommandNotFound`, worded for
    a bare name (PATH) or a path (relative ones are in the server's ``cwd``). One that is
    there but cannot run names the reason: an exec that fails with ``ENOENT`` on an existing
    file means its interpreter (a script's ``#!`` line, or a binary's loader) is missing.
    Anything else is :class:`ServerStartFailed`.
    """
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno not in (errno.ENOENT, errno.EACCES, errno.ENOTDIR):
        return ServerStartFailed(
            f"server {server!r}: could not start {command!r}: {reason}; check config.command and config.cwd",
            server=server,
        )
    # The PATH the spawn searched: its own environment's, by subprocess's own rule.
    found = _locate(command, os.pathsep.join(os.get_exec_path(env)), cwd)  # type: ignore[arg-type]
    if found is None:
        if os.sep not in command:
            where = "was not found on PATH"
        elif os.path.isabs(command) or cwd is None:
            where = "is not an executable file"
        else:
            where = f"is not an executable file in the server's cwd {cwd!r}"
        message = f"server {server!r}: command {command!r} {where}; install it or fix config.command"
    elif exc.errno == errno.ENOENT:
        message = (
            f"server {server!r}: could not start {command!r} ({found}): its interpreter was not found "
            "(a script's #! line, or a binary's loader); fix that line or install the interpreter"
        )
    else:
        message = f"server {server!r}: could not start {command!r} ({found}): {reason}; check its permissions"
    return CommandNotFound(message, server=server, command=command)


def check_cwd(cwd: str | None, *, server: str) -> None:
    """Refuse a working directory that cannot work, before anything is spawned.

    A missing cwd is a configuration error no retry can fix: raising the
    :class:`ServerMisconfigured` kind lets the connection actor open the circuit at once
    instead of spending its restarts on it.

    Raises:
        WorkingDirectoryNotFound: ``cwd`` does not exist or is not a directory.
    """
    if cwd is None or os.path.isdir(cwd):
        return
    what = "is not a directory" if os.path.exists(cwd) else "does not exist"
    raise WorkingDirectoryNotFound(
        f"server {server!r}: working directory {cwd!r} {what}; create it or fix config.cwd",
        server=server,
        cwd=cwd,
    )


def _spawn_env(*layers: Mapping[str, str]) -> dict[bytes, bytes] | dict[str, str]:
    """A server's environment: the host's as it is now, then each of ``layers`` over it.

    On POSIX it is made from ``os.environ``'s own bytes (one copy in C; ``subprocess`` takes
    bytes as they are), the layers encoded as ``os.environ`` encodes them. Copying
    ``os.environ`` itself decodes every name and value in Python: for a usual environment
    ~200 calls and ~30 us of the event loop per spawn (docs/performance.md).
    """
    data = getattr(os.environ, "_data", None)
    if os.name != "posix" or not isinstance(data, dict):
        merged = dict(os.environ)
        for layer in layers:
            merged.update(layer)
        return merged
    env: dict[bytes, bytes] = dict(data)
    for layer in layers:
        for key, value in layer.items():
            env[os.fsencode(key)] = os.fsencode(value)
    return env


@attrs.define(eq=False)
class StdioWire:
    """A stdio server's :class:`~mcp_actors._wire.base.Wire`: newline-delimited JSON-RPC on its pipes.

    ``send`` writes one JSON line (:func:`~mcp_actors._wire.codec.encode`) from the caller's
    task: straight into the pipe when nobody else is writing and the pipe has room (the usual
    case: no scheduler pass at all), else in turn, waiting for the pipe. A line is never cut:
    a caller cancelled half-way through its line hands the rest to the wire's own task, so
    the next message still starts on a line of its own. ``run`` reads stdout, splits lines
    and delivers each decoded message (:func:`mcp_actors._wire.codec.decode`, the rule of
    every wire). A line that does not start with ``{`` is skipped before any parse and
    counted (:attr:`TransportLink.garbage_lines`), never fatal, and so is a line that is no
    JSON, except that an answer whose id can still be read fails that request at once
    (:func:`mcp_actors._wire.codec.unreadable`). Skipped lines are logged once, then counted
    in one line per 10 s (:class:`~mcp_actors._wire.lograte.LogThrottle`). Death is the
    link's: stdout EOF, a broken stdin or a message over ``limit`` bytes calls
    :meth:`TransportLink.die`, and ``run`` returns as soon as the link is dead for any
    reason (process exit, an unanswered ping), so the dispatcher answers every waiter at once.
    """

    stdin: trio.lowlevel.FdStream
    stdout: trio.abc.ReceiveStream
    link: TransportLink
    limit: int
    _turn: trio.Semaphore = attrs.field(factory=lambda: trio.Semaphore(1), init=False)
    """Whose turn it is to write (a semaphore, not a lock: a cut line's rest is finished by another task)."""
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _skipped: LogThrottle = attrs.field(factory=LogThrottle, init=False)
    """The skipped lines' log lines: the first, then a count per interval."""

    async def send(
        self, message: dict[str, Any], *, headers: Mapping[str, str] | None = None, bound: float | None = None
    ) -> None:
        """Write ``message`` as one line; ``headers`` and ``bound`` mean nothing on stdio.

        Raises:
            WireClosed: The link is dead, or the server stopped reading its stdin (the link
                then dies, naming the exit status when the process is exiting).
        """
        data = encode(message, newline=True)
        link = self.link
        if link.dead.is_set():
            raise WireClosed(link.death_reason)
        try:
            if self._turn.value:
                # Nobody is writing: no checkpoint between this check and the write.
                sent = self._write_some(data)
                if sent == len(data):
                    return
                self._turn.acquire_nowait()
            else:
                await self._turn.acquire()
                sent = 0
            await self._finish(memoryview(data)[sent:], started=sent > 0)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await _die_of_a_broken_pipe(link, "the server stopped reading its stdin")
            raise WireClosed(link.death_reason) from None

    def _write_some(self, data: bytes | memoryview) -> int:
        if self.link.dead.is_set():  # the pipe may be closed (and its fd number reused) once dead
            raise trio.ClosedResourceError("the link is dead")
        try:
            return os.write(self.stdin.fileno(), data)
        except BlockingIOError:
            return 0

    async def _finish(self, rest: memoryview, *, started: bool) -> None:
        """Write the rest of a line, holding the turn; a cancelled caller leaves it to :meth:`_complete`."""
        handed_off = False
        try:
            while rest:
                try:
                    await trio.lowlevel.wait_writable(self.stdin.fileno())
                except trio.Cancelled:
                    if started and self._nursery is not None:
                        self._nursery.start_soon(self._complete, rest)
                        handed_off = True
                    elif started:
                        self.link.die("a message to the server was cut short; the stream is no longer framed")
                    raise
                written = self._write_some(rest)
                started = started or written > 0
                rest = rest[written:]
        finally:
            if not handed_off:
                self._turn.release()

    async def _complete(self, rest: memoryview) -> None:
        """Finish a cut line for a caller that gave up (the turn passes on once it is written)."""
        try:
            while rest:
                await trio.lowlevel.wait_writable(self.stdin.fileno())
                rest = rest[self._write_some(rest) :]
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await _die_of_a_broken_pipe(self.link, "the server stopped reading its stdin")
        finally:
            self._turn.release()

    async def run(self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read stdout and deliver every message until the link dies.

        The reading happens in this task; the link's death (for any reason: EOF, the
        process's exit, an unanswered ping) cancels it. The nursery only finishes a line a
        cancelled caller left half-written.
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            with trio.CancelScope() as reading:
                self.link.cancel_on_death(reading)
                task_status.started()
                await self._read(deliver)
            self._nursery = None
            nursery.cancel_scope.cancel()

    async def _read(self, deliver: Deliver) -> None:
        link, stream, limit = self.link, self.stdout, self.limit
        buffer = bytearray()
        try:
            while True:
                chunk = await stream.receive_some(_READ_CHUNK)
                if not chunk:
                    await _die_of_a_broken_pipe(link, "the server closed its stdout")
                    return
                end = chunk.rfind(b"\n")
                if end < 0:
                    buffer += chunk
                else:
                    if buffer:
                        buffer += chunk[:end]
                        lines: list[bytes] | list[bytearray] = buffer.split(b"\n")
                    else:
                        lines = chunk[:end].split(b"\n")
                    buffer = bytearray(chunk[end + 1 :])
                    for line in lines:
                        # A message starts with "{": anything else is skipped before any parse (read speed).
                        if line and line[0] == 0x7B:
                            self._deliver_line(line, deliver)
                        elif line and not line.isspace():
                            if line.lstrip()[0] == 0x7B:
                                self._deliver_line(line, deliver)
                            else:
                                self._skip(line, None)
                if len(buffer) > limit:
                    link.die(f"the server sent a message larger than {limit} bytes")
                    return
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            link.die("the server's stdout closed")
        finally:
            unlogged = self._skipped.flush()
            if unlogged:
                logger.warning("server %s: skipped %d more non-JSON line(s) on stdout", link.label, unlogged)

    def _deliver_line(self, line: bytes | bytearray, deliver: Deliver) -> None:
        """Decode one stdout line and deliver it; anything but a JSON-RPC 2.0 object is skipped."""
        try:
            message = decode(line)
        except ValueError as exc:
            rpc_id = answer_id(line)
            if rpc_id is not None:
                deliver(unreadable(rpc_id, f"the server's answer to request {rpc_id!r} is not valid JSON: {exc}"))
            self._skip(line, exc)
            return
        if type(message) is not dict or message.get("jsonrpc") != "2.0":
            self._skip(line, None)
            return
        deliver(message)

    def _skip(self, line: bytes | bytearray, error: ValueError | None) -> None:
        """Count a line that is no message; log the first, then a count once per interval."""
        link = self.link
        link.garbage_lines += 1
        if link.garbage_sample is None:
            link.garbage_sample = link.redact(bytes(line[:_GARBAGE_SAMPLE_MAX]).decode("utf-8", "replace"))
        count = self._skipped.hit()
        if count:
            why = f"no JSON ({error})" if error is not None else "no JSON-RPC message"
            logger.warning(
                "server %s: skipped %d line(s) on stdout, the last %d bytes, %s; more are counted, one line per %gs",
                link.label,
                count,
                len(line),
                why,
                self._skipped.interval,
            )


def _stderr_chunk(chunk: bytes | bytearray, pending: bytes, tail: StderrTail, label: str) -> bytes:
    """Split one stderr chunk into lines kept in ``tail`` (and logged); return the unfinished rest."""
    tail.total_bytes += len(chunk)
    pending += chunk
    *lines, pending = pending.split(b"\n")
    if lines:
        server_log = server_logger(label)
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            server_log.debug("%s", tail.add(text))
    if len(pending) > _STDERR_LINE_MAX * 4:
        tail.add(pending.decode("utf-8", "replace"))
        pending = b""
    return pending


async def _drain_stderr(stream: trio.abc.ReceiveStream, link: TransportLink, tail: StderrTail) -> None:
    """Read stderr continuously so the server can never block on a full pipe (where :class:`_Pumps` cannot)."""
    pending = b""
    with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
        while chunk := await stream.receive_some(_READ_CHUNK):
            pending = _stderr_chunk(chunk, pending, tail, link.label)
    if pending:
        tail.add(pending.decode("utf-8", "replace"))


def _on_exit(code: int, link: TransportLink) -> None:
    """The server process exited: say so on the link, naming a killing signal."""
    link.exited.set()
    link.die(_exit_reason(code))


def _exit_reason(code: int) -> str:
    """A death reason from a return code (negative: the killing signal)."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"the server process was killed by {signal.Signals(-code).name}"
    return f"the server process exited with code {code}"


def _exited_code(link: TransportLink) -> int | None:
    """The return code of the link's process if it already exited (a zombie), without reaping it.

    The pumps reap it and report the exit, but on a loaded machine that one task may come
    to it well after the pipes broke; the kernel has the status as soon as the process is
    gone. ``None`` while it runs, or when it is not ours to ask about (reaped already).
    """
    if link.process is None or not hasattr(os, "waitid"):
        return None
    try:
        info = os.waitid(os.P_PID, link.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except OSError:  # ChildProcessError: reaped already (the pumps reported it) or not our child
        return None
    if info is None:
        return None
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return -info.si_status
    return info.si_status if info.si_code == os.CLD_EXITED else None


async def _die_of_a_broken_pipe(link: TransportLink, reason: str) -> None:
    """End the link after a pipe to the server broke, naming the process's exit when there is one.

    A broken pipe usually means the process is exiting, and its exit status ("killed by
    SIGKILL") says more than the pipe. The exit watcher reports it, with the server's last
    stderr lines in the tail first; it gets :data:`_EXIT_STATUS_GRACE`. When the process has
    exited (a zombie) but the watcher is late (one task for every server, on a loaded
    machine), it gets :data:`_LATE_EXIT_WATCH` more, and then the status is read from the
    zombie itself.
    """
    try:
        with trio.move_on_after(_EXIT_STATUS_GRACE):
            await link.exited.wait()
        if not link.exited.is_set() and _exited_code(link) is not None:
            with trio.move_on_after(_LATE_EXIT_WATCH):
                await link.exited.wait()
            code = _exited_code(link)
            if not link.exited.is_set() and code is not None:
                link.die(_exit_reason(code))
    finally:
        link.die(reason)  # the first reason stands; this one only when there was none (or a cancellation)


async def _watch_exit(process: SpawnedProcess, link: TransportLink) -> None:
    _on_exit(await process.wait(), link)


@attrs.define(eq=False, slots=True)
class _Pumped:
    """One server's stderr pipe and exit, watched by :class:`_Pumps`."""

    process: SpawnedProcess
    link: TransportLink
    tail: StderrTail
    stderr_fd: int
    """The stderr pipe's fd; -1 once it reached EOF or was let go."""
    pidfd: int
    """Our own pidfd of the process (readable once it exited); -1 once it exited or was let go."""
    pending: bytes = b""


_PUMPS: trio.lowlevel.RunVar[_Pumps | None] = trio.lowlevel.RunVar("mcp_actors_stdio_pumps")


@attrs.define(eq=False)
class _Pumps:
    """Every stdio server's stderr and exit in one trio run, served by one system task.

    An idle server needs two waits from us: its stderr may become readable, and its
    process may exit. A task per wait per server (coroutine frames, cancel statuses, a
    nursery: ~5 KiB and two tasks per idle server) is what one epoll instance does for
    all of them: the kernel watches every stderr pipe and every pidfd, and this one task
    wakes only when one is ready. It reads at most one chunk per ready pipe per pass
    (a flooding server cannot starve the others), and in each pass it reads stderr before
    it reports an exit, so a dead server's last lines are in its tail before its death
    is declared. Linux only (``epoll`` and ``pidfd_open``); elsewhere, or when a pidfd
    cannot be had, a server gets its own two tasks (:func:`_drain_stderr`, :func:`_watch_exit`).
    """

    _epoll: select.epoll
    _by_fd: dict[int, tuple[_Pumped, bool]] = attrs.field(factory=dict)
    """fd -> (the server, whether the fd is its pidfd)."""

    @staticmethod
    def current() -> _Pumps | None:
        """This run's pumps (started on first use), or ``None`` where the platform has none."""
        try:
            return _PUMPS.get()
        except LookupError:
            pass
        pumps = None
        if hasattr(select, "epoll") and hasattr(os, "pidfd_open"):
            pumps = _Pumps(select.epoll())
            trio.lowlevel.spawn_system_task(pumps._run, name="mcp_actors._wire.transports stdio pumps")
        _PUMPS.set(pumps)
        return pumps

    def add(self, process: SpawnedProcess, link: TransportLink, tail: StderrTail) -> _Pumped | None:
        """Watch a server's stderr and exit; ``None`` (nothing watched) when no pidfd can be had."""
        try:
            pidfd = os.pidfd_open(process.pid)
        except OSError:
            return None
        stderr_fd = process.stderr.fileno()  # an FdStream: non-blocking
        entry = _Pumped(
            process=process,
            link=link,
            tail=tail,
            stderr_fd=stderr_fd,
            pidfd=pidfd,
        )
        try:
            self._epoll.register(stderr_fd, select.EPOLLIN)
            self._by_fd[stderr_fd] = (entry, False)
            self._epoll.register(pidfd, select.EPOLLIN)
            self._by_fd[pidfd] = (entry, True)
        except OSError:
            self.discard(entry)
            return None
        return entry

    def discard(self, entry: _Pumped) -> None:
        """Stop watching a server: keep what is left in its stderr pipe, let go of its fds."""
        for _ in range(4):
            if entry.stderr_fd < 0 or not self._read_stderr(entry):
                break
        self._close_stderr(entry)
        self._close_pidfd(entry)

    async def _run(self) -> None:
        try:
            while True:
                await trio.lowlevel.wait_readable(self._epoll.fileno())
                ready = [self._by_fd[fd] for fd, _ in self._epoll.poll(0) if fd in self._by_fd]
                for entry, is_exit in sorted(ready, key=lambda item: item[1]):  # stderr first, then exits
                    try:
                        if is_exit:
                            self._exited(entry)
                        elif entry.stderr_fd >= 0:
                            self._read_stderr(entry)
                    except Exception:  # a bug here must cost one server's watch, never the whole run
                        logger.exception("server %s: watching its stderr and exit failed", entry.link.label)
                        self._close_stderr(entry)
                        self._close_pidfd(entry)
        finally:
            self._epoll.close()

    def _read_stderr(self, entry: _Pumped) -> bool:
        """Read one chunk of stderr into the tail; return whether there may be more."""
        try:
            chunk = os.read(entry.stderr_fd, _READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self._close_stderr(entry)
            return False
        entry.pending = _stderr_chunk(chunk, entry.pending, entry.tail, entry.link.label)
        return True

    def _exited(self, entry: _Pumped) -> None:
        for _ in range(4):  # its last words first
            if entry.stderr_fd < 0 or not self._read_stderr(entry):
                break
        self._close_pidfd(entry)
        code = entry.process.returncode  # reaps it
        if code is not None:
            _on_exit(code, entry.link)

    def _close_stderr(self, entry: _Pumped) -> None:
        """Stop reading stderr (the pipe itself belongs to the process and is closed with it)."""
        fd, entry.stderr_fd = entry.stderr_fd, -1
        if fd >= 0 and self._by_fd.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)
        if entry.pending:
            entry.tail.add(entry.pending.decode("utf-8", "replace"))
            entry.pending = b""

    def _close_pidfd(self, entry: _Pumped) -> None:
        fd, entry.pidfd = entry.pidfd, -1
        if fd < 0:
            return
        if self._by_fd.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)
        os.close(fd)


@contextlib.asynccontextmanager
async def _pumping(process: SpawnedProcess, link: TransportLink, tail: StderrTail) -> AsyncIterator[None]:
    """Drain the server's stderr and watch its exit for the block: shared pumps, or two tasks of its own."""
    pumps = _Pumps.current()
    entry = pumps.add(process, link, tail) if pumps is not None else None
    if pumps is not None and entry is not None:
        try:
            yield
        finally:
            pumps.discard(entry)
        return
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_drain_stderr, process.stderr, link, tail)
        nursery.start_soon(_watch_exit, process, link)
        try:
            yield
        finally:
            nursery.cancel_scope.cancel()


async def _stop_process(
    process: SpawnedProcess,
    identity: ProcessIdentity,
    params: StdioParams,
    link: TransportLink,
    tracker: ProcessTracker,
) -> None:
    """The one kill ladder (:func:`mcp_actors._process.tracker.stop_process`) for this server.

    Close stdin → at most ``close_grace`` → SIGTERM the whole tree (group, descendants, and
    every process carrying the server's tag, so a grandchild that escaped with setsid too)
    → at most ``term_grace`` → SIGKILL → reap. Runs shielded with every wait bounded.
    """
    await stop_process(
        process,
        tracker.target_of(identity),
        close_grace=params.close_grace,
        term_grace=params.term_grace,
        label=link.label,
    )


@contextlib.asynccontextmanager
async def open_stdio_transport(
    params: StdioParams, *, label: str, tracker: ProcessTracker | None = None
) -> AsyncIterator[TransportLink]:
    """Spawn a stdio server in its own process group and yield its :class:`TransportLink`.

    The PID and create_time are registered with the process tracker immediately after the
    spawn. Leaving the context (normally, by error or by cancellation) runs the kill ladder
    shielded and bounded, so no process is ever left behind.

    Raises:
        CommandNotFound: The command does not resolve.
        ServerStartFailed: The process could not be started (permissions, bad cwd, ...).
    """
    tracker = tracker or ProcessTracker.get_instance()
    params = params.resolved(label=label)
    # The host's marker lets a later ledger sweep prove an orphan in this server's group is ours.
    marker = tracker.child_env()
    env = _spawn_env(params.env, marker)
    check_command(params.command, server=label)
    check_cwd(params.cwd, server=label)
    # No server may exist before the reaper sidecar does (the runtime started it long ago).
    await tracker.wait_safety_net()
    # A cgroup of its own where the host may make one: the server's whole tree, daemons too.
    placement = tracker.placement(marker[MARKER_ENV])
    # A spawn runs in a thread of its own, which waits until the child has run as far as its exec:
    # on a busy machine a scheduler period each (~20 ms with twenty servers starting on two
    # cores). Twenty at once hide that wait for a usual config, and cost the client less CPU
    # than four at a time (~15 ms less for twenty servers: docs/performance.md). The
    # cap bounds the threads of a larger burst: each thread that allocates keeps a malloc
    # arena for good (with its stack, ~0.5 MiB of RSS in all at 50 servers, ~1 MiB at 200).
    spawn_slots = _spawn_slots()
    try:
        spawn_slots.acquire_nowait()  # no checkpoint on the way to a spawn (see mcp_actors._wire.spawn)
    except trio.WouldBlock:
        await spawn_slots.acquire()
    try:
        # No preexec_fn (a parent-death signal): the spawn runs in a thread of its own, where
        # Linux would fire it when that thread retires, and a preexec_fn costs a full
        # fork of the host (tens of ms, under the GIL) instead of a vfork.
        # The command as written: the spawn resolves it (check_command), in the child.
        process = await spawn_process([params.command, *params.args], env=env, cwd=params.cwd, after_spawn=placement)
    except OSError as exc:
        raise spawn_failure(exc, params.command, env, params.cwd, server=label) from exc
    finally:
        spawn_slots.release()  # synchronous: no checkpoint between the spawn and the registration
        # This frame lives as long as the server: keep no copy of the host's environment (~4 KiB).
        del env
    # No await between the spawn and the registration: a cancellation cannot slip in.
    try:
        create_time = create_time_of(process.pid)  # psutil's value, a fifth of its cost
    except psutil.Error:
        create_time = 0.0
    identity = ProcessIdentity(pid=process.pid, create_time=create_time, pgid=process.pid, label=label)
    cgroup = placement.path if placement is not None else None
    tracker.register(identity, tag=marker[MARKER_ENV], cgroup=cgroup)  # the tag we set: no /proc read
    secrets = params.secret_values()
    tail = StderrTail(secrets=secrets)
    link = TransportLink(secrets=secrets, label=label, process=identity, stderr=tail)
    # The session's dispatcher runs the wire (its reader is stdout; stdin, a pipe, is written to
    # directly by StdioWire.send); the transport drains stderr and watches the exit (the run's
    # shared pumps), so a death is seen even between sessions.
    link.wire = StdioWire(stdin=process.stdin, stdout=process.stdout, link=link, limit=params.max_message_bytes)
    try:
        async with _pumping(process, link, tail):
            try:
                yield link
            finally:
                with trio.CancelScope(shield=True):
                    link.die(link.death_reason or "closed by the client")
                    ladder = attrs.evolve(params, close_grace=0.0, term_grace=0.0) if link.abandoned else params
                    await _stop_process(process, identity, ladder, link, tracker)
    finally:
        with trio.CancelScope(shield=True):
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    with contextlib.suppress(Exception):
                        await pipe.aclose()
            if process.returncode is None:
                process.kill()
                with trio.move_on_after(5.0):
                    await process.wait()
            tracker.unregister(identity)


@contextlib.asynccontextmanager
async def open_transport(params: TransportParams, *, label: str) -> AsyncIterator[TransportLink]:
    """Open whichever transport ``params`` describes (each kind knows how to open itself).

    While it is open, the params' secrets are redacted from the log records of the SDK,
    the HTTP stack and our own loggers (see :mod:`mcp_actors._config.redact`), and the
    SDK's records logged for it (by this task and the tasks it starts) go to our loggers
    (see :mod:`mcp_actors._config.sdk_logs`).
    """
    install_log_filter()
    with registered_secrets(params.secret_values()), sdk_logs_owned():
        async with params.open(label=label) as link:
            yield link


register_transport_kind(ServerType.STDIO, StdioParams.from_record)
register_transport_kind(ServerType.SSE, HttpParams.from_record)
register_transport_kind(ServerType.HTTP, HttpParams.from_record)
