"""``mcp_actors._wire.spawn``: a stdio server's spawn in a thread of its own, and the child as trio sees it.

Real processes throughout (this interpreter with ``-c``). What the transport relies on: the
three pipes, the exit status, a cancellable wait, nothing left open by a failed spawn, and
a spawn whose thread starts before its task first yields (the first server of a
start-up does not wait for the others' steps).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from mcp_actors._wire.spawn import SpawnedProcess, spawn_process

BOUND = 30.0
"""Generous bound for anything expected within a second on a busy machine."""

ECHO = (
    "import sys; line = sys.stdin.readline(); "
    "sys.stdout.write(line.upper()); sys.stderr.write('err:' + line); sys.exit(3)"
)
WAIT_FOR_EOF = "import sys; sys.stdin.read()"


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


async def _read_all(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some():
        data += chunk
    return data


async def test_spawn_runs_the_command_with_three_pipes_and_its_exit_status() -> None:
    """stdin, stdout and stderr are the child's; wait() reaps it and returns its status (as returncode does)."""
    with trio.fail_after(BOUND):
        process = await spawn_process([sys.executable, "-c", ECHO], env=None, cwd=None)
        assert process.returncode is None
        await process.stdin.send_all(b"hello\n")
        out, err = await _read_all(process.stdout), await _read_all(process.stderr)
        assert (out, err) == (b"HELLO\n", b"err:hello\n")
        assert await process.wait() == 3
        assert process.returncode == 3
        for stream in (process.stdin, process.stdout, process.stderr):
            await stream.aclose()


async def test_the_child_runs_in_its_own_session_with_the_given_env_and_cwd(tmp_path: Path) -> None:
    """A new session (the kill ladder signals its group), the env and cwd given (a relative command resolves there)."""
    script = tmp_path / "show.sh"
    script.write_text('#!/bin/sh\necho "$MARK $(pwd)"\n')  # a test's set-up
    script.chmod(0o755)
    with trio.fail_after(BOUND):
        process = await spawn_process(["./show.sh"], env={**os.environ, "MARK": "m-4711"}, cwd=str(tmp_path))
        assert os.getsid(process.pid) == process.pid
        assert (await _read_all(process.stdout)).decode().split() == ["m-4711", str(tmp_path)]
        assert await process.wait() == 0


async def test_a_failed_spawn_raises_and_leaves_no_descriptor_open() -> None:
    """A missing command raises the OSError; none of the six pipe ends is left behind."""
    before = _open_fds()
    with trio.fail_after(BOUND), pytest.raises(FileNotFoundError):
        await spawn_process(["/definitely/not/a/command"], env=None, cwd=None)
    assert _open_fds() == before


async def test_the_spawns_thread_starts_before_its_task_first_yields() -> None:
    """No checkpoint comes before the spawn: its thread exists by the end of the task's first step.

    At a start-up of many servers this is what lets the first server's child exist before
    the other servers' steps run (trio's own spawn yields first, and only then starts a thread).
    """
    threads_after_first_step: list[int] = []

    class FirstStep(trio.abc.Instrument):
        task: trio.lowlevel.Task | None = None

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            if task is self.task and not threads_after_first_step:
                threads_after_first_step.append(_threads())

    instrument = FirstStep()
    result: list[SpawnedProcess] = []
    spawned = trio.Event()

    async def spawn() -> None:
        result.append(await spawn_process([sys.executable, "-c", WAIT_FOR_EOF], env=None, cwd=None))
        spawned.set()

    async with trio.open_nursery() as nursery:
        before = _threads()
        trio.lowlevel.add_instrument(instrument)
        try:
            nursery.start_soon(spawn)
            (instrument.task,) = nursery.child_tasks  # before its first step runs
            with trio.fail_after(BOUND):
                await spawned.wait()
        finally:
            trio.lowlevel.remove_instrument(instrument)
    process = result[0]
    await process.stdin.aclose()
    with trio.fail_after(BOUND):
        assert await process.wait() == 0
    assert threads_after_first_step == [before + 1]


async def test_a_cancelled_wait_leaves_the_child_to_a_later_wait() -> None:
    """Cancelling wait() neither kills nor reaps the child; a later wait() gets its status."""
    with trio.fail_after(BOUND):
        process = await spawn_process([sys.executable, "-c", WAIT_FOR_EOF], env=None, cwd=None)
    with trio.move_on_after(0.05) as scope:
        await process.wait()
    assert scope.cancelled_caught and process.returncode is None
    await process.stdin.aclose()
    with trio.fail_after(BOUND):
        assert await process.wait() == 0


async def test_kill_and_wait_without_a_pidfd(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no pidfd can be had (not Linux, an old kernel), wait() waits in a worker thread; kill() is SIGKILL."""

    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    with trio.fail_after(BOUND):
        process = await spawn_process([sys.executable, "-c", WAIT_FOR_EOF], env=None, cwd=None)
        with trio.move_on_after(0.05):
            await process.wait()
        assert process.returncode is None
        process.kill()
        assert await process.wait() == -signal.SIGKILL
        process.kill()  # reaped: a no-op, never a signal to a reused PID
