"""Commands and context managers that run the demo and fault servers in tests.

The commands are plain argv lists (``sys.executable -m ...``) so that they work with any
spawner: our stdio transport, the SDK's ``stdio_client``, ``trio.run_process``. For HTTP
servers, :func:`serve_http` starts the process, waits for its announcement line and
tears it down again with the kill ladder. :func:`assert_no_children_left` is the check
behind the "no process left behind" rule of our test suite.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Final

import attrs
import psutil
import trio

from mcp_actors._demo.announce import parse_announce
from mcp_actors.errors import ConnectTimeout, ServerConnectionLost, ServerStartFailed

__all__ = [
    "HttpServerHandle",
    "assert_no_children_left",
    "demo_server_command",
    "fault_server_command",
    "live_descendants",
    "serve_http",
]

_STDERR_LINES_KEPT: Final = 2000
_MAX_LINE_BYTES: Final = 64 * 1024
_TERMINATE_TIMEOUT: Final = 5.0
_KILL_REAP_TIMEOUT: Final = 5.0


def demo_server_command(*extra_args: str) -> list[str]:
    """Return the argv that runs the demo server with this interpreter.

    Args:
        *extra_args: Extra command-line arguments, e.g. ``"--transport", "sse"``.

    Returns:
        ``[sys.executable, "-m", "mcp_actors.demo_server", *extra_args]``.
    """
    return [sys.executable, "-m", "mcp_actors.demo_server", *extra_args]


def fault_server_command(*flags: str) -> list[str]:
    """Return the argv that runs the fault-injection server with this interpreter.

    Args:
        *flags: Fault flags, e.g. ``"--crash-on-call", "2"`` (see ``docs/testing.md``).

    Returns:
        ``[sys.executable, "-m", "mcp_actors.testing.fault_server", *flags]``.
    """
    return [sys.executable, "-m", "mcp_actors.testing.fault_server", *flags]


@attrs.define(eq=False)
class HttpServerHandle:
    """A running HTTP MCP server started by :func:`serve_http`.

    Its stderr is drained for as long as the handle lives (a server blocked on a full
    stderr pipe would look hung); the last lines are kept for assertions.

    Attributes:
        url: The endpoint the server announced (``.../mcp`` or ``.../sse``).
        process: The server process (it runs in a session and process group of its own).
    """

    url: str
    process: trio.Process
    _lines: collections.deque[str] = attrs.field(
        factory=lambda: collections.deque(maxlen=_STDERR_LINES_KEPT), alias="_lines"
    )
    _changed: trio.Event = attrs.field(factory=trio.Event, alias="_changed")
    _stderr_closed: bool = attrs.field(default=False, alias="_stderr_closed")

    @property
    def pid(self) -> int:
        """The server's process id (also its process group id: it runs in its own session)."""
        return self.process.pid

    @property
    def stderr_lines(self) -> tuple[str, ...]:
        """The most recent stderr lines (up to 2000), oldest first, without line endings."""
        return tuple(self._lines)

    async def wait_stderr_line(self, text: str) -> str:
        """Wait until a stderr line containing ``text`` has been seen, and return it.

        Lines seen before the call count. Unbounded: wrap it in ``trio.fail_after``.

        Args:
            text: A substring to look for, e.g. ``"fault: cancelled 3"``.

        Returns:
            The first matching line.

        Raises:
            ServerConnectionLost: The server closed its stderr (it exited) without
                writing such a line.
        """
        while True:
            for line in self._lines:
                if text in line:
                    return line
            if self._stderr_closed:
                raise ServerConnectionLost(
                    f"server closed its stderr without writing a line containing {text!r}",
                    stderr_tail=self.stderr_lines[-20:],
                )
            await self._changed.wait()

    def _add_line(self, line: str) -> None:
        self._lines.append(line)
        self._wake()

    def _close_stderr(self) -> None:
        self._stderr_closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


def _has_port_flag(argv: Sequence[str]) -> bool:
    return any(arg == "--port" or arg.startswith("--port=") for arg in argv)


async def _drain_stderr(
    stream: trio.abc.ReceiveStream,
    handle: HttpServerHandle,
    announced: Callable[[str], None],
) -> None:
    """Read stderr to EOF into the handle's lines; report the first announcement."""
    buffer = b""
    url_seen = False
    try:
        while chunk := await stream.receive_some(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > _MAX_LINE_BYTES:  # a line with no end: keep memory bounded
                lines.append(buffer)
                buffer = b""
            for raw in lines:
                line = raw.decode("utf-8", errors="replace").rstrip("\r")
                handle._add_line(line)
                if not url_seen and (url := parse_announce(line)) is not None:
                    url_seen = True
                    announced(url)
        if buffer:
            handle._add_line(buffer.decode("utf-8", errors="replace"))
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass
    finally:
        handle._close_stderr()


def _kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group; the group may already be gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _stop(process: trio.Process) -> None:
    """Terminate, wait (bounded), kill the whole group, wait (bounded). Shielded."""
    with trio.CancelScope(shield=True):
        if process.returncode is None:
            process.terminate()
            with trio.move_on_after(_TERMINATE_TIMEOUT):
                await process.wait()
        # Kill what is left of the group: the server if it ignored SIGTERM, and any
        # grandchild it started (those are the processes tests must not leave behind).
        _kill_group(process.pid)
        with trio.move_on_after(_KILL_REAP_TIMEOUT):
            await process.wait()


@asynccontextmanager
async def serve_http(argv: Sequence[str], *, startup_timeout: float = 20.0) -> AsyncIterator[HttpServerHandle]:
    """Run an HTTP MCP server for the duration of the block.

    Starts ``argv`` (with ``--port 0`` appended unless it already has ``--port``) in its
    own session, waits for its ``mcp-actors: listening on <url>`` line on stderr, and
    yields a handle. Stderr keeps being drained. On exit the server gets SIGTERM, a
    bounded wait, then SIGKILL to its whole process group, and is always reaped; the
    exit is shielded from cancellation and bounded.

    Args:
        argv: The server command, e.g.
            ``demo_server_command("--transport", "streamable-http")``.
        startup_timeout: Seconds to wait for the announcement.

    Yields:
        The running server's handle.

    Raises:
        ValueError: ``startup_timeout`` is not positive.
        ConnectTimeout: No announcement within ``startup_timeout``.
        ServerStartFailed: The server closed stderr (exited) before announcing.
    """
    if startup_timeout <= 0:
        raise ValueError(f"startup_timeout must be > 0, got {startup_timeout}")
    command = list(argv)
    if not _has_port_flag(command):
        command += ["--port", "0"]
    name = _command_name(command)
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        handle = HttpServerHandle(url="", process=process)
        settled = trio.Event()  # announced, or stderr closed first
        failure: ServerStartFailed | None = None

        def announced(url: str) -> None:
            handle.url = url
            settled.set()

        async def drain(stream: trio.abc.ReceiveStream) -> None:
            try:
                await _drain_stderr(stream, handle, announced)
            finally:
                settled.set()

        # The drain task needs a nursery that spans the caller's block; an exception
        # from the block then leaves the nursery wrapped in a group of one, which is
        # unwrapped below so that callers see their own exception.
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain, process.stderr)
                with trio.move_on_after(startup_timeout):
                    await settled.wait()
                if handle.url:
                    try:
                        yield handle
                    finally:
                        # Stop the server while its stderr is still drained, then the drain.
                        await _stop(process)
                        nursery.cancel_scope.cancel()
                else:
                    failure = await _start_failure(process, handle, name, startup_timeout, settled)
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            if len(group.exceptions) != 1:
                raise
            inner = group.exceptions[0]
            raise inner from inner.__cause__
        if failure is not None:
            raise failure
    finally:
        await _stop(process)


def _command_name(command: Sequence[str]) -> str:
    """A short name of the server for messages: ``python -m module`` or the program."""
    if len(command) >= 3 and command[0] == sys.executable and command[1] == "-m":
        return f"python -m {command[2]}"
    return os.path.basename(command[0]) if command else "server"


async def _start_failure(
    process: trio.Process,
    handle: HttpServerHandle,
    name: str,
    startup_timeout: float,
    settled: trio.Event,
) -> ServerStartFailed:
    """Build the error for a server that did not announce its URL."""
    if not settled.is_set():
        return ConnectTimeout(
            f"{name}: no 'mcp-actors: listening on' line on stderr within "
            f"{startup_timeout:g} s; check that the server supports --port 0",
            stderr_tail=handle.stderr_lines[-20:],
        )
    with trio.move_on_after(_TERMINATE_TIMEOUT):
        await process.wait()
    code = "unknown" if process.returncode is None else str(process.returncode)
    return ServerStartFailed(
        f"{name}: closed stderr (exit code {code}) before announcing its url",
        stderr_tail=handle.stderr_lines[-20:],
    )


def live_descendants(*, ignore: Callable[[psutil.Process], bool] | None = None) -> list[psutil.Process]:
    """Return the descendant processes of this process that still exist (zombies too).

    Args:
        ignore: Processes for which this returns true are left out (e.g. a worker pool
            that outlives tests on purpose).
    """
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if ignore is not None and ignore(proc):
                continue
            if proc.is_running():
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def _describe(proc: psutil.Process) -> str:
    try:
        status = proc.status()
    except psutil.NoSuchProcess:
        return f"pid {proc.pid} (gone)"
    try:
        command = " ".join(proc.cmdline())
    except psutil.ZombieProcess:
        command = f"{proc.name()} (exited, never reaped)"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        command = "(command line unavailable)"
    if len(command) > 200:
        command = command[:197] + "..."
    return f"pid {proc.pid} [{status}] {command}"


def assert_no_children_left(*, grace: float = 5.0, ignore: Callable[[psutil.Process], bool] | None = None) -> None:
    """Fail if any descendant process of this process is still around.

    Call it after the trio run of a test has finished (a sync fixture's teardown):
    processes that are already exiting get ``grace`` seconds to go; a zombie (exited
    but never reaped by whoever started it) counts as left behind. Whatever is left is
    SIGKILLed and reaped before the assertion fails, so one leaking test does not make
    every later test fail too.

    Args:
        grace: Seconds to wait for exiting processes to disappear.
        ignore: Processes for which this returns true are not checked.

    Raises:
        AssertionError: Naming each process left behind (pid, status, command line).
    """
    if grace < 0:
        raise ValueError(f"grace must be >= 0, got {grace}")
    procs = live_descendants(ignore=ignore)
    if not procs:
        return
    zombies = [p for p in procs if _is_zombie(p)]
    alive = [p for p in procs if p not in zombies]
    _, still_alive = psutil.wait_procs(alive, timeout=grace)
    leftovers = zombies + [p for p in still_alive if p.is_running()]
    if not leftovers:
        return
    description = "; ".join(_describe(p) for p in leftovers)
    for proc in leftovers:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(leftovers, timeout=grace)  # reaps our own children, waits for others
    raise AssertionError(f"{len(leftovers)} process(es) left behind: {description}")


def _is_zombie(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
