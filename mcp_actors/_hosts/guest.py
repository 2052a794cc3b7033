"""The runtime as a trio *guest* on the host's asyncio loop: one thread, no hop across threads.

``trio.lowlevel.start_guest_run`` runs trio's scheduler as callbacks on a host loop, but
it waits for I/O in a thread of its own and hands each wake-up back with
``call_soon_threadsafe``: two thread switches per wait, the cost a portal pays too. Here
that wait goes to the host's selector instead: trio's I/O multiplexer (an epoll or kqueue
object, itself a pollable file descriptor) is watched with ``loop.add_reader``, its timeout
with ``loop.call_later``, and when either fires the next scheduler batch runs at once, on
the loop's thread. A call from an asyncio task starts its trio task directly (the same
thread holds trio's run context) and asks for a batch with ``loop.call_soon``; its outcome
resolves the asyncio future directly. Nothing crosses a thread on the call path.

That drive reaches into trio's guest machinery (``GuestState``, the run generator, the
I/O manager's multiplexer, all private: :func:`_guest_internals` checks them, and
``tests/hosts/test_guest_trio_private.py`` pins them against the installed trio). Where
they are not what we expect, or the loop cannot watch a descriptor (Windows' proactor),
the guest run is trio's own, threads and all: slower, never wrong.

Rules of a guest runtime: one per thread (trio keeps its run context per thread); its
facade may only be used on its own loop (anything else raises ``RuntimeError`` naming the
thread runtime); host callbacks behave as with a portal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar

import outcome
import sniffio
import trio

from mcp_actors._hosts.closing import wait_through_cancellation
from mcp_actors._hosts.workers import Job, WorkerPool
from mcp_actors.errors import ActorStopped
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.service import McpService

__all__ = ["GuestHop", "open_guest_runtime", "threadless_supported"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_BATCH_BUDGET: Final = 0.0005
"""Seconds of back-to-back scheduler batches before the loop's other callbacks get their turn.

trio.run itself runs a batch after another while tasks are runnable; a guest yields to its
host between them. Doing a few at once while they are quick (a call's answer wakes the
reader task in one batch and the caller in the next) saved a pass of the asyncio loop per
call: 20-35 us of a 140 us sequential call on the light server (docs/asyncio.md); the
budget keeps a busy runtime from holding the loop's other tasks back."""
_BATCHES_AT_ONCE: Final = 16

_START_BOUND: Final = 60.0
"""Seconds the runtime may take to start (the config read and the safety net; nothing is spawned)."""


# ---------------------------------------------------------------------- driving trio from the host's selector


def _guest_internals(tick: Callable[[], object]) -> tuple[Any, Any, int] | None:
    """``(guest state, runner, multiplexer fd)`` of the guest run whose first tick is ``tick``, or ``None``.

    ``None`` when trio's private guest machinery is not what this module drives (a newer
    trio that changed it, or an I/O manager without a pollable multiplexer: Windows).
    """
    state = getattr(tick, "__self__", None)
    runner = getattr(state, "runner", None)
    io_manager = getattr(runner, "io_manager", None)
    if state is None or runner is None or io_manager is None:
        return None
    if not all(hasattr(state, name) for name in ("unrolled_run_gen", "unrolled_run_next_send", "done_callback")):
        return None
    if not all(hasattr(runner, name) for name in ("guest_tick_scheduled", "main_task_outcome")):
        return None
    multiplexer = getattr(io_manager, "_epoll", None) or getattr(io_manager, "_kqueue", None)
    fileno = getattr(multiplexer, "fileno", None)
    if fileno is None or not callable(getattr(io_manager, "get_events", None)):
        return None
    return state, runner, fileno()


def threadless_supported() -> bool:
    """Whether trio's guest machinery here is what :class:`_SelectorDrive` drives (else trio's own guest run)."""
    from trio._core import _run

    guest_state = getattr(_run, "GuestState", None)
    return guest_state is not None and callable(getattr(guest_state, "guest_tick", None))


class _SelectorDrive:
    """Runs a trio guest run's scheduler batches on ``loop``, its I/O waits on the loop's own selector.

    Trio's own :meth:`GuestState.guest_tick`, with the one branch that waits in a thread
    replaced by a wait on ``loop``: trio's multiplexer stays registered as a reader of the
    loop for the whole run (no ``epoll_ctl`` per wait), and one timer stands for trio's
    next deadline, kept while it is not later than that deadline (one that fires early
    only costs a batch that finds nothing to do). Quick batches run back to back within
    :data:`_BATCH_BUDGET`. Invariant: ``_waiting`` is true exactly while no batch is
    scheduled, as ``runner.guest_tick_scheduled`` is false in trio.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, state: Any, runner: Any, fd: int) -> None:
        self._loop = loop
        self._state = state
        self._runner = runner
        self._fd = fd
        self._waiting = False
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._loop.add_reader(self._fd, self._on_readable)
        self._loop.call_soon(self._tick)

    def kick(self) -> None:
        """Run a batch soon, without the wake-up socket round trip; call it before scheduling trio work."""
        if self._waiting:
            self._waiting = False
            self._runner.guest_tick_scheduled = True  # trio's own wake-up is then a no-op
            self._loop.call_soon(self._poll_and_tick)

    def hold(self) -> bool:
        """Before scheduling trio work from an asyncio task: whether the caller should run :meth:`release` after.

        True when trio waits: the work is then run by :meth:`release` at once, in the
        caller's step, instead of one pass of the loop later.
        """
        if self._waiting:
            self._waiting = False
            self._runner.guest_tick_scheduled = True  # trio's own wake-up is then a no-op
            return True
        self.kick()
        return False

    def release(self) -> None:
        """Run the batch :meth:`hold` held back, now."""
        self._poll_and_tick()

    def _on_readable(self) -> None:
        if self._waiting:
            self._waiting = False
            self._poll_and_tick()

    def _on_timer(self) -> None:
        self._timer = None
        if self._waiting:
            self._waiting = False
            self._poll_and_tick()

    def _poll_and_tick(self) -> None:
        self._state.unrolled_run_next_send = outcome.capture(self._runner.io_manager.get_events, 0)
        self._runner.guest_tick_scheduled = True
        self._tick()

    def _finish(self, result: outcome.Outcome[Any]) -> None:
        self._loop.remove_reader(self._fd)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._state.done_callback(result)

    def _tick(self) -> None:
        state, runner = self._state, self._runner
        previous, sniffio.thread_local.name = sniffio.thread_local.name, "trio"
        until = time.perf_counter() + _BATCH_BUDGET
        try:
            for _ in range(_BATCHES_AT_ONCE):
                try:
                    timeout = state.unrolled_run_next_send.send(state.unrolled_run_gen)
                except StopIteration:
                    self._finish(runner.main_task_outcome)
                    return
                except trio.TrioInternalError as exc:
                    self._finish(outcome.Error(exc))
                    return
                if timeout > 0:
                    # Nothing to run until I/O or the deadline: wait. Unlike trio's guest tick, no
                    # poll first: the loop's selector reports anything already pending at once
                    # (the multiplexer stays registered), so the poll would be a system call for nothing.
                    break
                # Runnable tasks left: the next batch, with whatever I/O is ready now.
                state.unrolled_run_next_send = outcome.capture(runner.io_manager.get_events, 0)
                if time.perf_counter() > until:
                    runner.guest_tick_scheduled = True
                    self._loop.call_soon(self._tick)
                    return
            else:
                # More to run at once: the rest in the loop's next pass, after its other callbacks.
                runner.guest_tick_scheduled = True
                self._loop.call_soon(self._tick)
                return
        finally:
            sniffio.thread_local.name = previous
        runner.guest_tick_scheduled = False
        self._waiting = True
        if timeout != math.inf:
            deadline = self._loop.time() + timeout
            timer = self._timer
            if timer is None or timer.cancelled() or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self._timer = self._loop.call_at(deadline, self._on_timer)


def _start_guest(
    loop: asyncio.AbstractEventLoop,
    main: Callable[[], Awaitable[None]],
    done: Callable[[outcome.Outcome[None]], object],
) -> _SelectorDrive | None:
    """Start ``main`` as a trio guest run on ``loop``; the selector drive, or ``None`` when trio's own runs it."""
    first: list[Callable[[], object]] = []
    trio.lowlevel.start_guest_run(
        main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=first.append,  # captures the first tick: the guest state is its owner
        done_callback=done,
        # asyncio owns signal.set_wakeup_fd (and SIGINT: asyncio.run cancels its main task).
        host_uses_signal_set_wakeup_fd=True,
    )
    # Each later tick is scheduled by the drive (or by trio's own guest_tick with the loop's call_soon).
    [tick] = first
    internals = _guest_internals(tick) if threadless_supported() else None
    if internals is not None:
        drive = _SelectorDrive(loop, *internals)
        try:
            drive.start()
        except (NotImplementedError, RuntimeError):
            pass  # the loop cannot watch a descriptor (Windows' proactor): trio's own guest run
        else:
            return drive
    state = getattr(tick, "__self__", None)
    if state is not None and hasattr(state, "run_sync_soon_not_threadsafe"):
        state.run_sync_soon_not_threadsafe = loop.call_soon
    loop.call_soon(tick)
    return None


# ---------------------------------------------------------------------- the hop


def _settler(future: asyncio.Future[Any]) -> Callable[[Any, BaseException | None], None]:
    """A job's outcome straight into the caller's future (same thread), unless its awaiter cancelled it."""

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    return settle


class GuestHop:
    """The asyncio facade's way into a guest runtime: the call runs in a trio worker on the same thread.

    The calling task hands its job to the runtime's :class:`~mcp_actors._hosts.workers.WorkerPool`
    directly (trio's run context is this thread's) and, when trio is waiting, runs the
    scheduler batch that starts it at once, in its own step; the outcome resolves its future
    directly. Only from the runtime's own loop and thread: elsewhere ``RuntimeError``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.get_ident()
        self._runtime: Runtime | None = None
        self._pool: WorkerPool | None = None
        self._drive: _SelectorDrive | None = None
        self._closed = False
        self._token: trio.lowlevel.TrioToken | None = None

    @property
    def portal(self) -> None:
        """A guest runtime has no portal."""
        return None

    @property
    def closed(self) -> bool:
        """Whether the runtime is closing or closed."""
        return self._closed

    def _check(self) -> McpService:
        if threading.get_ident() != self._thread:
            raise RuntimeError(
                "this mcp-actors runtime is a trio guest on another thread's asyncio loop and may only be used"
                " there; open it with mcp_actors.asyncio.open_runtime(mode='thread') to call it from any thread"
                " or loop"
            )
        if self._closed or self._runtime is None:
            raise ActorStopped("the mcp-actors runtime is closed; open a new one with mcp_actors.asyncio.open_runtime")
        return self._runtime.service

    def read(self, fn: Callable[[McpService], T], /) -> T:
        """A quick read of the runtime's published state, here and now (same thread)."""
        return fn(self._check())

    async def run(self, fn: Callable[[McpService], Awaitable[T]], /) -> T:
        """Run ``fn(service)`` in a trio worker on this thread; its outcome resolves this task's future.

        Raises:
            ActorStopped: The runtime is closed, or closed while ``fn`` ran.
            RuntimeError: Called from another thread or loop than the runtime's.
        """
        self._check()
        loop = self._loop
        if asyncio.get_running_loop() is not loop:
            raise RuntimeError(
                "this mcp-actors runtime is a trio guest on another asyncio loop and may only be awaited there;"
                " open it with mcp_actors.asyncio.open_runtime(mode='thread') to use it from several loops"
            )
        pool = self._pool
        assert pool is not None
        future: asyncio.Future[T] = loop.create_future()
        job = Job(fn, _settler(future))
        drive = self._drive
        held = drive.hold() if drive is not None else False
        try:
            pool.hand_over(job)
        finally:
            if held:
                drive.release()  # type: ignore[union-attr]
        try:
            return await future
        except asyncio.CancelledError:
            # Inside the run (its token's queue), not from this callback: a cancellation runs
            # the abort code of whatever the job waits in, which may expect a trio task.
            _run_soon(self._token, lambda: WorkerPool.cancel(job))
            raise


def _run_soon(token: trio.lowlevel.TrioToken | None, fn: Callable[[], object]) -> None:
    """``fn()`` in the guest run, soon (nothing when the run has ended)."""
    if token is None:
        return
    try:
        token.run_sync_soon(fn)
    except trio.RunFinishedError:
        pass


# ---------------------------------------------------------------------- start and stop


@contextlib.asynccontextmanager
async def open_guest_runtime(**runtime_options: Any) -> AsyncIterator[GuestHop]:
    """Run :func:`~mcp_actors.runtime.open_runtime` as a trio guest on the running asyncio loop.

    Starting and stopping are awaited, never blocking the loop. Leaving the block (normally,
    by an exception, or by cancellation of the task) cancels the calls still running and
    closes every server, reaping every process, before it returns; a cancellation that
    arrives meanwhile is re-raised once the runtime has stopped.

    Raises:
        RuntimeError: This thread already runs trio (a guest runtime or ``trio.run``).
        ConfigFileCorrupt: The config file cannot be parsed.
        TimeoutError: The runtime did not start within 60 s.
    """
    loop = asyncio.get_running_loop()
    if trio.lowlevel.in_trio_run():
        raise RuntimeError(
            "this thread already runs trio (another guest runtime, or trio.run): a thread holds one trio run;"
            " share that runtime, or open this one with mcp_actors.asyncio.open_runtime(mode='thread')"
        )
    hop = GuestHop(loop)
    ready: asyncio.Future[None] = loop.create_future()
    done: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
    stop = trio.Event()
    outer = trio.CancelScope()

    async def main() -> None:
        with outer:
            async with open_runtime(**runtime_options) as runtime, trio.open_nursery() as nursery:
                hop._runtime = runtime
                hop._pool = WorkerPool(nursery, runtime.service)
                if not ready.done():
                    ready.set_result(None)
                await stop.wait()
                # Calls still running fail with ActorStopped; then the runtime closes every server.
                hop._closed = True
                nursery.cancel_scope.cancel()

    def on_done(result: outcome.Outcome[None]) -> None:
        hop._closed = True
        if not done.done():
            done.set_result(result)

    hop._drive = _start_guest(loop, main, on_done)
    hop._token = trio.lowlevel.current_trio_token()  # the guest run's, in this thread from now on

    def request_stop() -> None:
        hop._closed = True
        # Still starting: cancel the start itself; else wake the main task to close the tree.
        _run_soon(hop._token, stop.set if ready.done() else outer.cancel)

    body_failed = False
    try:
        try:
            async with asyncio.timeout(_START_BOUND):
                waits: list[asyncio.Future[Any]] = [ready, done]
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise TimeoutError(f"the mcp-actors runtime did not start within {_START_BOUND:g}s") from None
        if not ready.done():
            done.result().unwrap()  # the start failed: its error, as open_runtime raised it
            raise ActorStopped("the mcp-actors runtime stopped while it started")
        yield hop
    except BaseException:
        body_failed = True  # the start's own failure too: raised already, not raised again
        raise
    finally:
        request_stop()
        cancelled = await wait_through_cancellation(done)
        result = done.result()
        if isinstance(result, outcome.Error):
            if cancelled is None and not body_failed:
                result.unwrap()  # the runtime's own failure, where nothing else is being raised
            elif ready.done():
                logger.error("the mcp-actors runtime stopped with an error", exc_info=result.error)
        if cancelled is not None:
            raise cancelled
