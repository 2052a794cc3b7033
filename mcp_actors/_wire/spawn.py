"""Spawning a stdio server: ``subprocess.Popen`` in a thread of its own, and the child as trio sees it.

``trio.lowlevel.open_process`` spawns through ``trio.to_thread.run_sync``, and both of its
steps cost a start-up of many servers time on the event loop (measured with ``benchmarks.startup_layers``):

- it yields to the scheduler before its thread starts, so the first server of a start
  waits for every other server's steps up to their own spawns before its child exists;
- it starts each new worker thread with ``threading.Thread.start``, which blocks the event
  loop until that thread has run: on two cores busy booting servers, a scheduler wait and a
  GIL wait each (13-48 ms of a 20-server start's loop).

:func:`spawn_process` does neither. It checks for a cancellation without yielding, starts a
thread that nobody waits for (``_thread.start_new_thread``: the caller pays only for the
clone), and the task sleeps until the thread hands the ``Popen`` back. The spawn itself
cannot be interrupted, as in trio: a cancellation waits for it, and the caller owns the
child it returns. :class:`SpawnedProcess` is what the transport needs of ``trio.Process``
(its pipes as trio streams, its exit as a wait on a pidfd), built on public APIs only.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence

import attrs
import outcome
import trio

__all__ = ["SpawnedProcess", "spawn_process"]


@attrs.define(eq=False)
class SpawnedProcess:
    """A child we spawned, with its standard streams as trio streams (each owned by this object).

    Attributes:
        popen: The ``subprocess.Popen`` (its ``returncode`` is read through :attr:`returncode`).
        stdin: A pipe to the child's stdin (written directly: non-blocking).
        stdout: A pipe from the child's stdout.
        stderr: A pipe from the child's stderr.
    """

    popen: subprocess.Popen[bytes]
    stdin: trio.lowlevel.FdStream
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream
    _wait_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)

    @property
    def pid(self) -> int:
        """The child's PID (ours to reap: it cannot be reused until :attr:`returncode` is read)."""
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: the signal), ``None`` while it runs; reading it reaps an exited child."""
        return self.popen.poll()

    async def wait(self) -> int:
        """Wait until the child exits, reap it and return its status.

        The wait is on a pidfd (readable once the child exited), where the system has one;
        elsewhere a worker thread waits for the exit without reaping it, so a cancellation
        leaves the child to a later wait or :attr:`returncode`.
        """
        async with self._wait_lock:
            if self.popen.poll() is None:
                try:
                    pidfd = os.pidfd_open(self.pid)
                except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
                    await trio.to_thread.run_sync(_wait_exited, self.pid, abandon_on_cancel=True)
                else:
                    try:
                        await trio.lowlevel.wait_readable(pidfd)
                    finally:
                        trio.lowlevel.notify_closing(pidfd)
                        os.close(pidfd)
                self.popen.wait()
        code = self.popen.returncode
        assert code is not None
        return code

    def kill(self) -> None:
        """SIGKILL the child (a no-op once it was reaped)."""
        self.popen.kill()


def _wait_exited(pid: int) -> None:  # in a worker thread
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


async def spawn_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | Mapping[bytes, bytes] | None,
    cwd: str | None,
    after_spawn: Callable[[int], object] | None = None,
) -> SpawnedProcess:
    """Start ``argv`` in a new session with three pipes; return once it has exec'd.

    The command is looked up as ``subprocess`` does: a bare name on ``env``'s ``PATH``, a
    relative path in ``cwd``. ``after_spawn`` is called with the child's PID in the spawn's
    thread as soon as the child has exec'd (the tracker's cgroup placement); it must not
    raise.

    Raises:
        OSError: The spawn failed (the command is missing, not executable, ...); no pipe is
            left open.
    """
    await trio.lowlevel.checkpoint_if_cancelled()  # no yield unless cancelled (see the module docstring)
    parent_ends: list[trio.lowlevel.FdStream] = []
    child_ends: list[int] = []
    try:
        for to_child in (True, False, False):
            read_end, write_end = os.pipe()  # both non-inheritable; Popen dups the child's onto 0-2
            child_ends.append(read_end if to_child else write_end)
            parent_ends.append(trio.lowlevel.FdStream(write_end if to_child else read_end))

        def popen() -> subprocess.Popen[bytes]:  # in the spawn's own thread
            process = subprocess.Popen(
                list(argv),
                stdin=child_ends[0],
                stdout=child_ends[1],
                stderr=child_ends[2],
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
            if after_spawn is not None:
                after_spawn(process.pid)
            return process

        process = await _in_own_thread(popen)
    except BaseException:
        for stream in parent_ends:
            stream.close()
        raise
    finally:
        for fd in child_ends:
            os.close(fd)
    stdin, stdout, stderr = parent_ends
    return SpawnedProcess(process, stdin=stdin, stdout=stdout, stderr=stderr)


async def _in_own_thread(job: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run ``job`` in a new thread, started without waiting for it to come up; not cancellable."""
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def run() -> None:
        result = outcome.capture(job)
        try:
            token.run_sync_soon(trio.lowlevel.reschedule, task, result)
        except trio.RunFinishedError:  # cannot happen while the task waits; never leave a child behind
            if isinstance(result, outcome.Value):
                _discard(result.value)

    _thread.start_new_thread(run, ())
    popen: subprocess.Popen[bytes] = await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
    return popen


def _discard(popen: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        popen.kill()
        popen.wait()
