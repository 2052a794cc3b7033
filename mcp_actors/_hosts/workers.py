"""Trio worker tasks that run the asyncio facade's calls: idle between calls, one cancel scope each.

Why: a trio task spawned per call, with a cancel scope of its own, costs as much as the rest
of a hop together (measured on the project's machine: 40-60 us of a 200-300 us call under
load). A call is instead handed to an idle worker (``reschedule`` with the job); a new worker
is spawned only when none is idle, and at most :data:`MAX_IDLE` wait for the next call.

Each job runs in its caller's context (a copy of the asyncio task's ``contextvars``, set as
the worker task's context for that job), as a task spawned for it would: contextvars of the
host (a tracing span, say) reach the call. Cancelling a job cancels its worker's scope, which
ends that worker; a job cancelled before a worker took it up is never started.

Every method here runs inside the trio run (a task of the run, or, for a guest runtime, the
host loop's thread between batches, where trio's run context is current).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, Final

import outcome
import trio

from mcp_actors.errors import ActorStopped
from mcp_actors.service import McpService

__all__ = ["MAX_IDLE", "Job", "WorkerPool"]

MAX_IDLE: Final = 64
"""Idle workers kept for the next calls; past it a worker that finishes a job ends."""

Settle = Callable[[Any, BaseException | None], None]
"""Where a job's outcome goes: ``settle(value, None)`` or ``settle(None, error)``; called once at most."""


class Job:
    """One call handed to the trio side: what to run, where its outcome goes, who runs it."""

    __slots__ = ("cancelled", "context", "fn", "settle", "worker")

    def __init__(self, fn: Callable[[McpService], Awaitable[Any]], settle: Settle) -> None:
        self.fn = fn
        self.settle = settle
        self.context = contextvars.copy_context()  # the caller's, taken where the call is made
        self.worker: _Worker | None = None
        self.cancelled = False


class _Worker:
    """A trio task that runs jobs one after another, idle between them; its scope cancels the job it runs."""

    __slots__ = ("job", "scope", "task")

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.scope = trio.CancelScope()
        self.job: Job | None = None


class WorkerPool:
    """The workers of one runtime, in its nursery; they end with it (a running job fails ``ActorStopped``)."""

    def __init__(self, nursery: trio.Nursery, service: McpService) -> None:
        self._nursery = nursery
        self._service = service
        self._idle: list[_Worker] = []

    def hand_over(self, job: Job) -> None:
        """Give ``job`` to an idle worker, or to a new one.

        Raises:
            ActorStopped: The runtime's nursery is closed (it is stopping).
        """
        if self._idle:
            worker = self._idle.pop()
            worker.task.context = job.context
            trio.lowlevel.reschedule(worker.task, outcome.Value(job))
            return
        try:
            job.context.run(self._nursery.start_soon, self._work, job)
        except RuntimeError:  # the nursery is closed: the runtime is stopping
            raise ActorStopped("the mcp-actors runtime is closed") from None

    @staticmethod
    def cancel(job: Job) -> None:
        """Cancel ``job``: where it runs (its worker's scope), or before it starts."""
        job.cancelled = True
        worker = job.worker
        if worker is not None and worker.job is job:
            worker.scope.cancel()

    async def _work(self, first: Job) -> None:
        """A worker: run ``first``, then each job it is handed, until cancelled or no longer needed."""
        worker = _Worker(trio.lowlevel.current_task())
        job: Job | None = first
        with worker.scope:
            while job is not None:
                if not job.cancelled:
                    await self._run(worker, job)
                job = await self._next_job(worker)

    async def _run(self, worker: _Worker, job: Job) -> None:
        worker.job = job
        job.worker = worker
        try:
            value = await job.fn(self._service)
        except trio.Cancelled:
            job.settle(None, ActorStopped("the mcp-actors runtime closed while the call was running"))
            raise
        except BaseException as exc:
            job.settle(None, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            job.settle(value, None)
        finally:
            worker.job = None

    async def _next_job(self, worker: _Worker) -> Job | None:
        """Wait, idle, to be handed a job; ``None`` when enough workers idle already, or this one was cancelled."""
        idle = self._idle
        if len(idle) >= MAX_IDLE or worker.scope.cancel_called:
            return None
        idle.append(worker)

        def abort(_: Any) -> trio.lowlevel.Abort:
            idle.remove(worker)  # cancelled while idle (the runtime is stopping): never handed a job
            return trio.lowlevel.Abort.SUCCEEDED

        job: Job = await trio.lowlevel.wait_task_rescheduled(abort)
        return job
