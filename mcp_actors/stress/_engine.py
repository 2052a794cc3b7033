"""The load engine: sends the operations of a scenario on time and counts what comes back.

It knows nothing of MCP: it calls an :data:`Executor` (one operation -> ``None`` for a
success or an error kind) and reads ``trio.current_time()``, so its tests run on trio's
virtual clock with a fake executor and assert exact times.

Open model: call ``n`` is started at its intended time (see ``_schedule``), however many
calls are still in flight (up to ``max_in_flight``; beyond that the sender waits, and the
wait shows up in the latency because latency is always measured from the intended time).
Closed model: each virtual user sends, waits for the answer, thinks, and sends again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from mcp_actors.stress._parse import ChaosSpec, RateStep
from mcp_actors.stress._scenario import Operation, Scenario, pick, render
from mcp_actors.stress._schedule import RateSchedule, user_start_times
from mcp_actors.stress._tally import Tally

__all__ = ["Executor", "LoadPlan", "OutageTracker", "drive"]

Executor = Callable[[int, Operation, Mapping[str, Any], float], Awaitable[str | None]]
"""``execute(n, operation, arguments, timeout) -> None | error kind``; never raises for a failed call."""


@attrs.frozen(kw_only=True)
class LoadPlan:
    """One worker's share of the load.

    Attributes:
        worker: This worker's index.
        workers: How many workers share the run.
        rate: Open model: the rate schedule (total over all workers); ``None``: closed model.
        users: Closed model: the run's total virtual users.
        think: Closed model: seconds a user waits between two calls.
        ramp_up: Seconds over which the rate (or the users) ramp up.
        duration: Seconds after the ramp-up (``None``: the rate schedule's own length, or
            until the request budget is used).
        requests: The run's request budget (all workers), or ``None``.
        warmup: Calls intended before this many seconds are not measured.
        timeout: Default seconds a call may take.
        max_in_flight: Open model: most calls in flight at once in this worker.
        seed: Random seed (the worker index is added).
        chaos: Periodic faults.
    """

    worker: int = 0
    workers: int = 1
    rate: tuple[RateStep, ...] | None = None
    users: int = 1
    think: float = 0.0
    ramp_up: float = 0.0
    duration: float | None = None
    requests: int | None = None
    warmup: float = 0.0
    timeout: float = 30.0
    max_in_flight: int = 10_000
    seed: int = 0
    chaos: tuple[ChaosSpec, ...] = ()

    def schedule(self) -> RateSchedule:
        """The open-model schedule (total rate)."""
        assert self.rate is not None
        return RateSchedule.build(self.rate, ramp_up=self.ramp_up, duration=self.duration)

    @property
    def length(self) -> float:
        """Seconds during which calls are started (``inf``: until the request budget is used)."""
        if self.rate is not None:
            return self.schedule().length
        return self.ramp_up + (self.duration if self.duration is not None else math.inf)

    def my_users(self) -> list[int]:
        """The global indices of this worker's virtual users."""
        return list(range(self.worker, self.users, self.workers))

    def my_budget(self) -> int | None:
        """Closed model: this worker's share of the request budget."""
        if self.requests is None:
            return None
        mine = len(self.my_users())
        return self.requests * mine // self.users + (1 if self.worker < self.requests * mine % self.users else 0)


@attrs.define(eq=False)
class _Outage:
    kind: str
    at: float
    worker: int
    pid: int | None
    first_failure: float | None = None
    recovered: float | None = None
    errors: int = 0
    max_latency: float = 0.0
    until: float | None = None  # stop: when SIGCONT was sent

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 6)

        return {
            "kind": self.kind,
            "at": r(self.at),
            "worker": self.worker,
            "pid": self.pid,
            "resumed_at": r(self.until),
            "errors": self.errors,
            "time_to_first_failure": r(None if self.first_failure is None else self.first_failure - self.at),
            "time_to_recovery": r(None if self.recovered is None else self.recovered - self.at),
            "max_latency": r(self.max_latency),
        }


@attrs.define(eq=False)
class OutageTracker:
    """Watches every finished call against the chaos events: errors, first failure, recovery."""

    worker: int = 0
    events: list[_Outage] = attrs.Factory(list)

    def begin(self, kind: str, at: float, pid: int | None) -> _Outage:
        """A fault was injected at ``at`` (seconds since the run's start)."""
        outage = _Outage(kind=kind, at=at, worker=self.worker, pid=pid)
        self.events.append(outage)
        return outage

    def observe(self, *, sent: float, end: float, error: str | None) -> None:
        """A call sent at ``sent`` finished at ``end`` (both seconds since the start)."""
        for outage in self.events:
            if outage.recovered is not None or end < outage.at:
                continue
            outage.max_latency = max(outage.max_latency, end - max(sent, outage.at))
            if error is not None:
                outage.errors += 1
                if outage.first_failure is None:
                    outage.first_failure = end
            elif sent >= outage.at:
                outage.recovered = end


@attrs.define(eq=False)
class Progress:
    """Live counters of a worker, read by the progress writer (one owner: the engine)."""

    started: int = 0
    finished: int = 0
    in_flight: int = 0
    stopping: bool = False


async def drive(
    plan: LoadPlan,
    scenario: Scenario,
    execute: Executor,
    *,
    start: float,
    tally: Tally,
    progress: Progress | None = None,
    outages: OutageTracker | None = None,
    stop: trio.Event | None = None,
    slack: float = 1.0,
) -> None:
    """Run ``plan`` from the trio time ``start`` and count every call into ``tally``.

    Returns when every call has been started and has finished (each is bounded by its
    timeout plus ``slack``, in the executor). Setting ``stop`` stops starting calls; calls
    in flight still finish and are counted.
    """
    progress = progress or Progress()
    stop = stop if stop is not None else trio.Event()
    rng = random.Random(plan.seed * 1_000_003 + plan.worker)
    ops = scenario.operations
    end_time = start + plan.length

    async def one(n: int, intended: float, op: Operation, args: Mapping[str, Any]) -> None:
        timeout = op.timeout if op.timeout is not None else plan.timeout
        sent = trio.current_time()
        progress.in_flight += 1
        try:
            error = await execute(n, op, args, timeout)
        finally:
            progress.in_flight -= 1
            progress.finished += 1
        end = trio.current_time()
        service = end - sent
        if service > timeout + slack:
            tally.over_timeout += 1
        tally.record(
            op=op.name,
            intended=intended - start,
            latency=end - intended,
            service=service,
            error=error,
            measured=intended - start >= plan.warmup,
            sent=sent - start,
        )
        if outages is not None:
            outages.observe(sent=sent - start, end=end - start, error=error)

    sending_ended = [end_time]
    async with trio.open_nursery() as nursery:
        if plan.rate is not None:
            slots = trio.Semaphore(plan.max_in_flight)

            async def open_call(n: int, intended: float, op: Operation, args: Mapping[str, Any]) -> None:
                try:
                    await one(n, intended, op, args)
                finally:
                    slots.release()

            for n, t in plan.schedule().times(worker=plan.worker, workers=plan.workers, limit=plan.requests):
                intended = start + t
                with trio.move_on_at(intended):
                    await stop.wait()
                if stop.is_set():
                    break
                op = pick(ops, rng)
                args = render(op.arguments, n, rng)
                await slots.acquire()
                progress.started += 1
                nursery.start_soon(open_call, n, intended, op, args)
            if stop.is_set():
                sending_ended[0] = min(trio.current_time(), end_time)
            elif math.isinf(plan.length) and plan.requests is not None:
                # Ended by the budget: the span is up to the first call that was not sent.
                after = plan.schedule().time_of(plan.requests)
                sending_ended[0] = start + (after if after is not None else trio.current_time() - start)
        else:
            budget = [plan.my_budget()]
            counter = [0]

            async def user(offset: float) -> None:
                with trio.move_on_at(start + offset):
                    await stop.wait()
                while not stop.is_set() and trio.current_time() < end_time:
                    if budget[0] is not None:
                        if budget[0] <= 0:
                            return
                        budget[0] -= 1
                    n = counter[0] * plan.workers + plan.worker
                    counter[0] += 1
                    op = pick(ops, rng)
                    args = render(op.arguments, n, rng)
                    progress.started += 1
                    await one(n, trio.current_time(), op, args)
                    if plan.think > 0:
                        with trio.move_on_after(plan.think):
                            await stop.wait()

            offsets = user_start_times(plan.users, plan.ramp_up)
            for u in plan.my_users():
                nursery.start_soon(user, offsets[u])
    if plan.rate is None:
        sending_ended[0] = min(trio.current_time(), end_time)
    progress.stopping = True
    tally.measured_seconds = max(0.0, sending_ended[0] - start - plan.warmup)
