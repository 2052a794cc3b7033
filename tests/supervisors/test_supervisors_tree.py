"""Supervisors on trio: order, strategies, restart types, intensity, backoff, dynamic children.

Every time-dependent test runs on trio's autojump clock and asserts exact virtual times.
Children are run by :class:`Probe`, which records what happens to each incarnation with a
timestamp and lets a test make a child crash, return, or clean up slowly.
"""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing
from testkit import child_spawn_passes

from supervisors import (
    Backoff,
    ChildInfo,
    ChildKind,
    ChildSpec,
    ChildStartFailed,
    Intensity,
    Restart,
    RestartIntensityExceeded,
    Shutdown,
    Strategy,
    Supervisor,
    SupervisorSpec,
    SupervisorStatistics,
    open_supervisor,
    run_supervisor,
)


class Boom(Exception):
    """A child's crash."""


class Fatal(BaseException):
    """Stands in for KeyboardInterrupt/SystemExit: a BaseException that is not an Exception."""


@attrs.define(eq=False)
class _Order:
    event: trio.Event = attrs.field(factory=trio.Event)
    action: str = ""


@attrs.define(eq=False)
class Probe:
    """Runs test children and records their lives as (virtual time, event, child id).

    ``plans[id]`` lists what successive incarnations do (default ``"run"``):
    ``run`` waits for an order (:meth:`crash`, :meth:`finish`, :meth:`fatal`);
    ``crash``/``return`` exit right after ``started()``; ``fail-start`` raises before it,
    ``return-early`` returns before it, ``hang`` never calls it. ``cleanup[id]`` is how
    long a cancelled child spends in shielded cleanup.
    """

    plans: dict[str, list[str]] = attrs.field(factory=dict)
    cleanup: dict[str, float] = attrs.field(factory=dict)
    log: list[tuple[float, str, str]] = attrs.field(factory=list)
    starts: collections.Counter[str] = attrs.field(factory=collections.Counter)
    _orders: dict[str, _Order] = attrs.field(factory=dict)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def spec(self, child_id: str, **options: object) -> ChildSpec:
        return ChildSpec(id=child_id, start=functools.partial(self.run, child_id), **options)  # type: ignore[arg-type]

    def record(self, event: str, child_id: str) -> None:
        self.log.append((trio.current_time(), event, child_id))
        self._changed.set()
        self._changed = trio.Event()

    def events(self) -> list[str]:
        return [f"{event} {child_id}" for _, event, child_id in self.log]

    def times(self, event: str, child_id: str) -> list[float]:
        return [when for when, kind, name in self.log if kind == event and name == child_id]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    async def wait_started(self, child_id: str, count: int) -> None:
        """Wait for the count-th start of a child and for its supervisor to settle."""
        await self.wait_for(lambda: self.starts[child_id] >= count)
        # The start is recorded before started(); let the supervisor register it. This
        # takes no virtual time: trio serves idle waiters before it jumps the clock.
        await trio.testing.wait_all_tasks_blocked()

    def _order(self, child_id: str, action: str) -> None:
        order = self._orders.pop(child_id)
        order.action = action
        order.event.set()

    def crash(self, child_id: str) -> None:
        self._order(child_id, "crash")

    def finish(self, child_id: str) -> None:
        self._order(child_id, "return")

    def fatal(self, child_id: str) -> None:
        self._order(child_id, "fatal")

    async def run(self, child_id: str, *, task_status: trio.TaskStatus[str]) -> None:
        self.starts[child_id] += 1
        number = self.starts[child_id]
        plan = self.plans.get(child_id, [])
        behaviour = plan.pop(0) if plan else "run"
        self.record("start", child_id)
        if behaviour == "fail-start":
            raise Boom(f"{child_id} failed to start ({number})")
        if behaviour == "return-early":
            return
        if behaviour == "hang":
            try:
                await trio.sleep_forever()
            finally:
                self.record("start cancelled", child_id)
        order = self._orders[child_id] = _Order()
        task_status.started(f"{child_id}#{number}")
        if behaviour == "crash":
            self.record("crash", child_id)
            raise Boom(f"{child_id} crashed ({number})")
        if behaviour == "return":
            self.record("return", child_id)
            return
        try:
            await order.event.wait()
        except trio.Cancelled:
            self.record("cancelled", child_id)
            if child_id in self.cleanup:
                with trio.CancelScope(shield=True):
                    await trio.sleep(self.cleanup[child_id])
            self.record("stopped", child_id)
            raise
        self.record(order.action, child_id)
        if order.action == "crash":
            raise Boom(f"{child_id} crashed ({number})")
        if order.action == "fatal":
            raise Fatal(child_id)


def spec(
    strategy: Strategy = Strategy.ONE_FOR_ONE,
    *,
    max_restarts: int = 10,
    period: float = 100.0,
    min_delay: float = 0.5,
    max_delay: float = 30.0,
    jitter: float = 0.0,
    reset_after: float = 60.0,
) -> SupervisorSpec:
    """A supervisor spec with deterministic backoff unless jitter is given."""
    return SupervisorSpec(
        strategy=strategy,
        intensity=Intensity(max_restarts=max_restarts, period=period),
        backoff=Backoff(min_delay=min_delay, max_delay=max_delay, jitter=jitter, reset_after=reset_after),
    )


# ----------------------------------------------------------------------------- start and stop


async def test_children_start_in_order_and_stop_one_by_one_in_reverse(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Children start in list order; leaving the body stops them in reverse, each awaited in turn."""
    probe = Probe(cleanup={"a": 0.1, "b": 0.1, "c": 0.1})
    async with open_supervisor(spec(), [probe.spec(n) for n in "abc"], name="t") as sup:
        assert probe.events() == ["start a", "start b", "start c"]
        assert [info.value for info in sup.which_children()] == ["a#1", "b#1", "c#1"]
        assert sup.child_value("b") == "b#1"
    assert probe.log[3:] == [
        (0.0, "cancelled", "c"),
        (0.1, "stopped", "c"),
        (0.1, "cancelled", "b"),
        (0.2, "stopped", "b"),
        (0.2, "cancelled", "a"),
        (0.30000000000000004, "stopped", "a"),
    ]


async def test_outside_cancellation_stops_children_in_reverse_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Cancelling the supervisor from outside reaches children only through its ordered stop."""
    probe = Probe(cleanup={"a": 1.0, "b": 1.0, "c": 1.0})
    with trio.move_on_after(5.0) as scope:
        async with open_supervisor(spec(), [probe.spec(n) for n in "abc"]):
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert [(when, f"{event} {name}") for when, event, name in probe.log[3:]] == [
        (5.0, "cancelled c"),
        (6.0, "stopped c"),
        (6.0, "cancelled b"),
        (7.0, "stopped b"),
        (7.0, "cancelled a"),
        (8.0, "stopped a"),
    ]


async def test_failed_initial_start_stops_the_started_ones_and_fails() -> None:
    """A child failing to start stops those already started (reverse order); the body never runs."""
    probe = Probe(plans={"c": ["fail-start"]})
    ran = False
    with pytest.raises(ChildStartFailed) as caught:
        async with open_supervisor(spec(), [probe.spec(n) for n in "abcd"], name="root"):
            ran = True
    assert not ran
    assert caught.value.child_id == "c"
    assert caught.value.supervisor == "root"
    assert isinstance(caught.value.__cause__, Boom)
    assert "child 'c' of supervisor 'root' failed to start" in str(caught.value)
    assert probe.events() == [
        "start a",
        "start b",
        "start c",
        "cancelled b",
        "stopped b",
        "cancelled a",
        "stopped a",
    ]


async def test_start_that_returns_before_started_is_a_failed_start() -> None:
    """Returning without calling task_status.started() fails the start with a clear cause."""
    probe = Probe(plans={"a": ["return-early"]})
    with pytest.raises(ChildStartFailed) as caught:
        async with open_supervisor(spec(), [probe.spec("a")]):
            pass
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "returned before calling task_status.started()" in str(caught.value.__cause__)


async def test_start_timeout_cancels_a_start_that_never_reports(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A start that never calls started() is cancelled after start_timeout and fails."""
    probe = Probe(plans={"a": ["hang"]})
    with pytest.raises(ChildStartFailed, match="within its start_timeout of 2 s") as caught:
        async with open_supervisor(spec(), [probe.spec("a", start_timeout=2.0)]):
            pass
    assert trio.current_time() == 2.0
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert probe.events() == ["start a", "start cancelled a"]


async def test_duplicate_initial_ids_are_refused_before_anything_starts() -> None:
    """Two initial children with one id raise ValueError and start nothing."""
    probe = Probe()
    with pytest.raises(ValueError, match="'a' appears twice"):
        async with open_supervisor(spec(), [probe.spec("a"), probe.spec("a")]):
            pass
    assert probe.log == []


async def test_body_exception_propagates_unwrapped_after_stopping_children() -> None:
    """An error in the body comes out as itself, not inside an exception group."""
    probe = Probe()
    with pytest.raises(KeyError, match="from the body"):
        async with open_supervisor(spec(), [probe.spec("a")]):
            raise KeyError("from the body")
    assert probe.events() == ["start a", "cancelled a", "stopped a"]


# ----------------------------------------------------------------------------- strategies


async def test_one_for_one_restarts_only_the_child_that_crashed(
    autojump_clock: trio.abc.Clock,
) -> None:
    """one_for_one: only the crashed child restarts, after min_delay, with a new value."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec(n) for n in "abc"]) as sup:
        probe.crash("b")
        await probe.wait_started("b", 2)
        assert trio.current_time() == 0.5
        assert probe.events()[3:] == ["crash b", "start b"]
        assert sup.child_value("b") == "b#2"
        assert [(info.id, info.restarts) for info in sup.which_children()] == [
            ("a", 0),
            ("b", 1),
            ("c", 0),
        ]


async def test_one_for_all_stops_the_others_in_reverse_and_restarts_all_in_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    """one_for_all: the others stop in reverse order, then all start again in order."""
    probe = Probe()
    async with open_supervisor(spec(Strategy.ONE_FOR_ALL), [probe.spec(n) for n in "abc"]) as sup:
        probe.crash("b")
        await probe.wait_started("c", 2)
        assert trio.current_time() == 0.5
        assert probe.events()[3:] == [
            "crash b",
            "cancelled c",
            "stopped c",
            "cancelled a",
            "stopped a",
            "start a",
            "start b",
            "start c",
        ]
        assert probe.times("start", "a") == [0.0, 0.5]
        assert [info.value for info in sup.which_children()] == ["a#2", "b#2", "c#2"]


async def test_rest_for_one_restarts_the_child_and_those_started_after_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    """rest_for_one: the crashed child and later ones restart; earlier ones are untouched."""
    probe = Probe()
    async with open_supervisor(spec(Strategy.REST_FOR_ONE), [probe.spec(n) for n in "abcd"]) as sup:
        probe.crash("b")
        await probe.wait_started("d", 2)
        assert probe.events()[4:] == [
            "crash b",
            "cancelled d",
            "stopped d",
            "cancelled c",
            "stopped c",
            "start b",
            "start c",
            "start d",
        ]
        assert sup.child_value("a") == "a#1"
        probe.crash("d")
        await probe.wait_started("d", 3)
        assert probe.events()[12:] == ["crash d", "start d"]


async def test_one_for_all_forgets_temporary_siblings_and_keeps_terminated_ones_stopped(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A strategy restart drops temporary siblings and leaves terminated siblings stopped."""
    probe = Probe()
    children = [probe.spec("a"), probe.spec("t", restart=Restart.TEMPORARY), probe.spec("b")]
    children.append(probe.spec("c"))
    async with open_supervisor(spec(Strategy.ONE_FOR_ALL), children) as sup:
        await sup.terminate_child("a")
        probe.crash("c")
        await probe.wait_started("c", 2)
        await probe.wait_started("b", 2)
        assert [(info.id, info.running) for info in sup.which_children()] == [
            ("a", False),
            ("b", True),
            ("c", True),
        ]
        assert probe.starts == {"a": 1, "t": 1, "b": 2, "c": 2}


async def test_failed_restart_counts_as_a_crash_and_is_retried_with_longer_backoff(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A restart whose start fails is one more restart: siblings stop again, the delay doubles."""
    probe = Probe(plans={"b": ["run", "fail-start"]})
    async with open_supervisor(spec(Strategy.ONE_FOR_ALL), [probe.spec("a"), probe.spec("b")]) as sup:
        probe.crash("b")
        await probe.wait_started("b", 3)
        assert [(when, f"{event} {name}") for when, event, name in probe.log[2:]] == [
            (0.0, "crash b"),
            (0.0, "cancelled a"),
            (0.0, "stopped a"),
            (0.5, "start a"),
            (0.5, "start b"),
            (0.5, "cancelled a"),
            (0.5, "stopped a"),
            (1.5, "start a"),
            (1.5, "start b"),
        ]
        stats = sup.statistics()
        assert stats.restarts_total == 2
        assert [(info.id, info.restarts) for info in sup.which_children()] == [("a", 2), ("b", 1)]


# ----------------------------------------------------------------------------- restart types


@pytest.mark.parametrize(
    ("restart", "action", "restarted"),
    [
        (Restart.PERMANENT, "return", True),
        (Restart.PERMANENT, "crash", True),
        (Restart.TRANSIENT, "return", False),
        (Restart.TRANSIENT, "crash", True),
        (Restart.TEMPORARY, "return", False),
        (Restart.TEMPORARY, "crash", False),
    ],
)
async def test_exit_handling_per_restart_type(
    autojump_clock: trio.abc.Clock, restart: Restart, action: str, restarted: bool
) -> None:
    """Permanent always restarts, transient only after raising, temporary never (and is forgotten)."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec("x", restart=restart), probe.spec("y")]) as sup:
        getattr(probe, "finish" if action == "return" else "crash")("x")
        await trio.sleep(10.0)
        assert probe.starts["x"] == (2 if restarted else 1)
        ids = [info.id for info in sup.which_children()]
        assert ids == (["y"] if restart is Restart.TEMPORARY else ["x", "y"])
        assert sup.statistics().restarts_total == (1 if restarted else 0)
        if restarted:
            assert probe.times("start", "x") == [0.0, 0.5]
        elif restart is Restart.TRANSIENT:
            assert sup.which_children()[0] == ChildInfo(
                id="x", kind=ChildKind.WORKER, running=False, value=None, restarts=0
            )


async def test_transient_normal_exit_leaves_one_for_all_siblings_alone(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A child that is not restarted triggers no strategy restart of its siblings."""
    probe = Probe()
    children = [probe.spec("a"), probe.spec("b", restart=Restart.TRANSIENT), probe.spec("c")]
    async with open_supervisor(spec(Strategy.ONE_FOR_ALL), children) as sup:
        probe.finish("b")
        await trio.sleep(10.0)
        assert probe.starts == {"a": 1, "b": 1, "c": 1}
        assert sup.child_value("a") == "a#1" and sup.child_value("c") == "c#1"


# ----------------------------------------------------------------------------- intensity


async def test_intensity_exceeded_stops_children_and_raises_with_the_last_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The (N+1)th restart within the period gives up: children stopped, body cancelled, cause chained."""
    probe = Probe(plans={"x": ["crash", "crash", "crash"]})
    body_cancelled = False
    with pytest.raises(RestartIntensityExceeded) as caught:
        async with open_supervisor(spec(max_restarts=2, period=10.0), [probe.spec("a"), probe.spec("x")], name="sup"):
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                body_cancelled = True
                raise
    assert trio.current_time() == 1.5
    assert body_cancelled
    error = caught.value
    assert isinstance(error.__cause__, Boom)
    assert str(error.__cause__) == "x crashed (3)"
    assert (error.supervisor, error.child_id, error.restarts, error.max_restarts, error.period) == (
        "sup",
        "x",
        3,
        2,
        10.0,
    )
    assert probe.times("start", "x") == [0.0, 0.5, 1.5]
    assert probe.events()[-2:] == ["cancelled a", "stopped a"]


async def test_restarts_older_than_the_period_are_forgotten(
    autojump_clock: trio.abc.Clock,
) -> None:
    """With intensity 1 per 5 s, crashes 6 s apart never exceed it."""
    probe = Probe()
    async with open_supervisor(spec(max_restarts=1, period=5.0), [probe.spec("x")]) as sup:
        for count in range(2, 5):
            await trio.sleep(6.0)
            probe.crash("x")
            await probe.wait_started("x", count)
        stats = sup.statistics()
        assert stats.restarts_total == 3
        assert stats.restarts_in_period == 1
        await trio.sleep(6.0)
        assert sup.statistics().restarts_in_period == 0


async def test_zero_intensity_gives_up_on_the_first_restart() -> None:
    """max_restarts=0 turns the first crash into RestartIntensityExceeded."""
    probe = Probe(plans={"x": ["crash"]})
    with pytest.raises(RestartIntensityExceeded):
        async with open_supervisor(spec(max_restarts=0), [probe.spec("x")]):
            await trio.sleep_forever()
    assert probe.starts["x"] == 1


# ----------------------------------------------------------------------------- backoff


async def test_backoff_doubles_up_to_its_cap_at_exact_times(autojump_clock: trio.abc.Clock) -> None:
    """A crash loop restarts after 0.5, 1, 2, 2, 2 s (min 0.5, cap 2, no jitter)."""
    probe = Probe(plans={"x": ["crash"] * 5})
    async with open_supervisor(spec(max_delay=2.0), [probe.spec("x")]):
        await probe.wait_started("x", 6)
    assert probe.times("start", "x") == [0.0, 0.5, 1.5, 3.5, 5.5, 7.5]


@pytest.mark.parametrize(("run_for", "restart_at"), [(10.0, 11.0), (9.0, 10.5)])
async def test_backoff_resets_after_running_reset_after(
    autojump_clock: trio.abc.Clock, run_for: float, restart_at: float
) -> None:
    """Running reset_after seconds resets the delay to min_delay; a shorter run keeps doubling."""
    probe = Probe(plans={"x": ["crash"]})
    async with open_supervisor(spec(reset_after=10.0), [probe.spec("x")]):
        await probe.wait_started("x", 2)
        await trio.sleep_until(0.5 + run_for)
        probe.crash("x")
        await probe.wait_started("x", 3)
    assert probe.times("start", "x") == [0.0, 0.5, restart_at]


async def test_jitter_spreads_simultaneous_restarts_within_bounds(
    autojump_clock: trio.abc.Clock,
) -> None:
    """With jitter 0.5 each restart waits between 1 and 1.5 s, and simultaneous ones spread out."""
    names = [f"c{i}" for i in range(6)]
    probe = Probe()
    async with open_supervisor(spec(min_delay=1.0, max_delay=1.0, jitter=0.5), map(probe.spec, names)):
        for name in names:
            probe.crash(name)
        for name in names:
            await probe.wait_started(name, 2)
    restarts = [probe.times("start", name)[1] for name in names]
    assert all(1.0 <= when <= 1.5 for when in restarts)
    assert len(set(restarts)) == len(restarts)


# ----------------------------------------------------------------------------- dynamic children


async def test_dynamic_children_start_terminate_restart_delete() -> None:
    """start_child/terminate_child/restart_child/delete_child follow OTP, with typed misuse errors."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec("a")], name="dyn") as sup:
        assert await sup.start_child(probe.spec("x")) == "x#1"
        with pytest.raises(ValueError, match="'x' already exists"):
            await sup.start_child(probe.spec("x"))
        with pytest.raises(RuntimeError, match="is running; terminate it first"):
            await sup.restart_child("x")
        with pytest.raises(RuntimeError, match="terminate it before deleting"):
            sup.delete_child("x")
        await sup.terminate_child("x")
        assert probe.events()[-2:] == ["cancelled x", "stopped x"]
        assert sup.which_children()[1] == ChildInfo(
            id="x", kind=ChildKind.WORKER, running=False, value=None, restarts=0
        )
        with pytest.raises(RuntimeError, match="not running"):
            sup.child_value("x")
        await sup.terminate_child("x")  # already stopped: nothing happens
        assert await sup.restart_child("x") == "x#2"
        assert sup.child_value("x") == "x#2"
        await sup.terminate_child("x")
        sup.delete_child("x")
        assert [info.id for info in sup.which_children()] == ["a"]
        for operation in (sup.terminate_child, sup.restart_child):
            with pytest.raises(KeyError, match="no child 'x' in supervisor 'dyn'"):
                await operation("x")
        with pytest.raises(KeyError):
            sup.delete_child("x")
        with pytest.raises(KeyError):
            sup.child_value("x")
    assert probe.events()[-2:] == ["cancelled a", "stopped a"]


async def test_dynamic_children_are_supervised_and_stopped_last_first(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A dynamic child restarts like an initial one and stops before the children started earlier."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec("a")]) as sup:
        await sup.start_child(probe.spec("x"))
        probe.crash("x")
        await probe.wait_started("x", 2)
        assert sup.child_value("x") == "x#2"
    assert probe.events()[-4:] == ["cancelled x", "stopped x", "cancelled a", "stopped a"]


async def test_failed_dynamic_start_is_not_added() -> None:
    """start_child raising ChildStartFailed leaves no spec behind, so the id can be reused."""
    probe = Probe(plans={"x": ["fail-start"]})
    async with open_supervisor(spec(), []) as sup:
        with pytest.raises(ChildStartFailed) as caught:
            await sup.start_child(probe.spec("x"))
        assert isinstance(caught.value.__cause__, Boom)
        assert sup.which_children() == []
        assert await sup.start_child(probe.spec("x")) == "x#2"


async def test_a_child_started_at_spawn_is_running_before_its_task_has_run() -> None:
    """started_at_spawn: start_child returns None at once, the child runs later and reports its value."""
    probe = Probe()
    async with open_supervisor(spec(), []) as sup:
        assert await sup.start_child(probe.spec("x", started_at_spawn=True)) is None
        assert probe.starts["x"] == 0  # no round trip: the child has not run yet
        assert sup.which_children() == [ChildInfo(id="x", kind=ChildKind.WORKER, running=True, value=None, restarts=0)]
        await trio.testing.wait_all_tasks_blocked()
        assert sup.child_value("x") == "x#1"
        await sup.terminate_child("x")
        assert probe.events() == ["start x", "cancelled x", "stopped x"]


async def test_start_children_spawns_children_started_at_spawn_in_one_scheduler_pass() -> None:
    """One wait for the lock for all: N children begin together, not one scheduler pass each."""
    probe = Probe()
    ids = [f"c{i}" for i in range(6)]
    async with open_supervisor(spec(), [probe.spec("a")]) as sup:
        with child_spawn_passes() as spawns:
            values = await sup.start_children([probe.spec(i, started_at_spawn=True) for i in ids])
        assert values == [None] * len(ids)
        assert len(spawns.spawned) == len(ids) and len(set(spawns.spawned)) == 1, spawns.spawned
        assert [info.id for info in sup.which_children()] == ["a", *ids]
        await trio.testing.wait_all_tasks_blocked()
        assert [sup.child_value(i) for i in ids] == [f"{i}#1" for i in ids]
    # Stopped last first, like children started one by one.
    assert [e for e in probe.events() if e.startswith("stopped")] == [f"stopped {i}" for i in [*reversed(ids), "a"]]


async def test_start_children_checks_every_id_before_starting_any() -> None:
    """An id that exists, or one given twice, is a ValueError and no child of the call starts."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec("a")]) as sup:
        with pytest.raises(ValueError, match="'a' already exists"):
            await sup.start_children([probe.spec("x"), probe.spec("a")])
        with pytest.raises(ValueError, match="'y' is given twice"):
            await sup.start_children([probe.spec("y"), probe.spec("y", started_at_spawn=True)])
        assert [info.id for info in sup.which_children()] == ["a"]
        assert probe.starts["x"] == 0 and probe.starts["y"] == 0
        assert await sup.start_children([probe.spec("x"), probe.spec("y")]) == ["x#1", "y#1"]


async def test_start_children_stops_at_a_failed_start() -> None:
    """The children before a failed start stay supervised; the failed one and those after are not added."""
    probe = Probe(plans={"b": ["fail-start"]})
    async with open_supervisor(spec(), []) as sup:
        with pytest.raises(ChildStartFailed) as caught:
            await sup.start_children([probe.spec("a"), probe.spec("b"), probe.spec("c")])
        assert isinstance(caught.value.__cause__, Boom)
        assert [(info.id, info.running) for info in sup.which_children()] == [("a", True)]
        assert probe.starts["c"] == 0
        assert await sup.start_children([probe.spec("b"), probe.spec("c")]) == ["b#2", "c#1"]


async def test_start_children_refuses_when_the_supervisor_is_stopping() -> None:
    """RuntimeError, as start_child: a stopped supervisor starts nothing."""
    probe = Probe()
    async with open_supervisor(spec(), []) as sup:
        pass
    with pytest.raises(RuntimeError, match="stopping or stopped"):
        await sup.start_children([probe.spec("x", started_at_spawn=True)])
    assert probe.starts["x"] == 0


async def test_a_child_started_at_spawn_that_raises_before_started_is_restarted_as_a_crash(
    autojump_clock: trio.abc.Clock,
) -> None:
    """No failed start for it: raising first is an exit, restarted after the backoff like any crash."""
    probe = Probe(plans={"x": ["fail-start"], "y": ["return-early"]})
    async with open_supervisor(spec(), []) as sup:
        assert await sup.start_child(probe.spec("x", started_at_spawn=True)) is None
        await sup.start_child(probe.spec("y", started_at_spawn=True, restart=Restart.TRANSIENT))
        await probe.wait_started("x", 2)
        assert probe.times("start", "x") == [0.0, 0.5]
        assert sup.child_value("x") == "x#2"
        assert sup.statistics().restarts_total == 1
        # A transient child that returned before started() exited normally: not restarted.
        assert probe.starts["y"] == 1
        assert [info.running for info in sup.which_children()] == [True, False]


async def test_a_child_started_at_spawn_is_stopped_in_order_even_before_it_ran(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Shielded from its first step: an outside cancellation stops it in reverse start order, bounded."""
    probe = Probe(cleanup={"a": 1.0, "b": 1.0})
    with trio.move_on_after(5.0):
        async with open_supervisor(spec(), [probe.spec("a")]) as sup:
            await sup.start_child(probe.spec("b", started_at_spawn=True))
            await trio.sleep_forever()
    assert probe.log[-4:] == [
        (5.0, "cancelled", "b"),
        (6.0, "stopped", "b"),
        (6.0, "cancelled", "a"),
        (7.0, "stopped", "a"),
    ]

    probe = Probe()
    async with open_supervisor(spec(), []) as sup:
        await sup.start_child(probe.spec("x", started_at_spawn=True))
        await sup.terminate_child("x")  # its task had not run: it runs, is cancelled at once, and stops
        assert not sup.which_children()[0].running
    assert probe.events() == ["start x", "cancelled x", "stopped x"]


async def test_terminate_cancels_a_pending_restart(autojump_clock: trio.abc.Clock) -> None:
    """Terminating a child that waits for its backoff cancels the restart; restart_child starts it."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec("x")]) as sup:
        probe.crash("x")
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == 0.0
        assert sup.which_children()[0].restarting
        assert sup.statistics().restarting == 1
        with pytest.raises(RuntimeError, match="is restarting"):
            sup.delete_child("x")
        await sup.terminate_child("x")
        await trio.sleep(10.0)
        assert probe.starts["x"] == 1
        assert not sup.which_children()[0].restarting
        assert await sup.restart_child("x") == "x#2"


async def test_terminate_temporary_child_forgets_it() -> None:
    """Terminating a temporary child removes its spec, as in OTP."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec("t", restart=Restart.TEMPORARY)]) as sup:
        await sup.terminate_child("t")
        assert sup.which_children() == []


async def test_operations_after_exit_are_refused() -> None:
    """A supervisor that has exited refuses dynamic operations with RuntimeError."""
    probe = Probe()
    async with open_supervisor(spec(), [probe.spec("a")], name="gone") as sup:
        pass
    with pytest.raises(RuntimeError, match="supervisor 'gone' is stopping or stopped"):
        await sup.start_child(probe.spec("b"))
    with pytest.raises(RuntimeError):
        await sup.restart_child("a")
    assert sup.which_children()[0].running is False


async def test_statistics_is_a_frozen_snapshot(autojump_clock: trio.abc.Clock) -> None:
    """statistics() reports children, running, restarts and the intensity, and does not change later."""
    probe = Probe()
    async with open_supervisor(
        spec(Strategy.REST_FOR_ONE, max_restarts=4, period=30.0),
        [probe.spec("a"), probe.spec("b")],
        name="stats",
    ) as sup:
        before = sup.statistics()
        probe.crash("a")
        await probe.wait_started("b", 2)
        after = sup.statistics()
    assert before == SupervisorStatistics(
        name="stats",
        strategy=Strategy.REST_FOR_ONE,
        children=2,
        running=2,
        restarting=0,
        restarts_total=0,
        restarts_in_period=0,
        max_restarts=4,
        period=30.0,
        abandoned=0,
    )
    assert (after.running, after.restarts_total, after.restarts_in_period) == (2, 1, 1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        after.running = 0  # type: ignore[misc]


# ----------------------------------------------------------------------------- shutdown


async def test_shutdown_after_waits_for_shielded_cleanup(autojump_clock: trio.abc.Clock) -> None:
    """Shutdown.after(5) gives a child's 2 s shielded cleanup time before the next child stops."""
    probe = Probe(cleanup={"b": 2.0})
    children = [probe.spec("a"), probe.spec("b", shutdown=Shutdown.after(5.0))]
    async with open_supervisor(spec(), children) as sup:
        pass
    assert [(when, f"{event} {name}") for when, event, name in probe.log[2:]] == [
        (0.0, "cancelled b"),
        (2.0, "stopped b"),
        (2.0, "cancelled a"),
        (2.0, "stopped a"),
    ]
    assert sup.statistics().abandoned == 0


async def test_shutdown_timeout_abandons_a_child_and_moves_on(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A child still cleaning up after its timeout is abandoned: the next stops, the exit waits for it."""
    probe = Probe(cleanup={"b": 2.0})
    children = [probe.spec("a"), probe.spec("b", shutdown=Shutdown.after(1.0))]
    with caplog.at_level(logging.WARNING, logger="supervisors"):
        async with open_supervisor(spec(), children) as sup:
            pass
    assert trio.current_time() == 2.0
    assert [(when, f"{event} {name}") for when, event, name in probe.log[2:]] == [
        (0.0, "cancelled b"),
        (1.0, "cancelled a"),
        (1.0, "stopped a"),
        (2.0, "stopped b"),
    ]
    assert sup.statistics().abandoned == 1
    assert "child 'b' of supervisor '' did not stop within its shutdown spec" in caplog.text


async def test_terminate_child_returns_when_the_timeout_expires(
    autojump_clock: trio.abc.Clock,
) -> None:
    """terminate_child waits at most the shutdown timeout for a slow child."""
    probe = Probe(cleanup={"b": 3.0})
    async with open_supervisor(spec(), [probe.spec("b", shutdown=Shutdown.after(1.0))]) as sup:
        await sup.terminate_child("b")
        assert trio.current_time() == 1.0
        assert not sup.which_children()[0].running
    assert trio.current_time() == 3.0


async def test_brutal_shutdown_gives_no_clock_time(autojump_clock: trio.abc.Clock) -> None:
    """Shutdown.BRUTAL does not wait for shielded cleanup: the next child stops at once."""
    probe = Probe(cleanup={"b": 2.0})
    children = [probe.spec("a"), probe.spec("b", shutdown=Shutdown.BRUTAL)]
    async with open_supervisor(spec(), children) as sup:
        pass
    assert [(when, f"{event} {name}") for when, event, name in probe.log[2:]] == [
        (0.0, "cancelled b"),
        (0.0, "cancelled a"),
        (0.0, "stopped a"),
        (2.0, "stopped b"),
    ]
    assert sup.statistics().abandoned == 1


async def test_brutal_shutdown_still_waits_for_plain_unwinding() -> None:
    """A brutally stopped child that unwinds without blocking finishes before the next one stops."""
    log: list[str] = []

    async def busy(*, task_status: trio.TaskStatus[None]) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(trio.sleep_forever)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                log.append("busy unwound")

    probe = Probe()
    children = [probe.spec("a"), ChildSpec(id="busy", start=busy, shutdown=Shutdown.BRUTAL)]
    async with open_supervisor(spec(), children) as sup:
        pass
    assert log == ["busy unwound"]
    assert probe.events()[1:] == ["cancelled a", "stopped a"]
    assert sup.statistics().abandoned == 0


async def test_error_raised_while_stopping_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A child that raises during its cancellation is reported in the log; shutdown carries on."""

    async def grumpy(*, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            raise Boom("cleanup failed")

    with caplog.at_level(logging.WARNING, logger="supervisors"):
        async with open_supervisor(spec(), [ChildSpec(id="g", start=grumpy)], name="s"):
            pass
    assert "child 'g' of supervisor 's' raised while stopping: Boom: cleanup failed" in caplog.text


# ----------------------------------------------------------------------------- propagation


async def test_base_exceptions_from_children_propagate_after_an_ordered_stop() -> None:
    """A child raising a non-Exception BaseException is never swallowed; siblings stop first."""
    probe = Probe()
    with pytest.raises(Fatal):
        async with open_supervisor(spec(), [probe.spec("a"), probe.spec("b"), probe.spec("c")]):
            probe.fatal("b")
            await trio.sleep_forever()
    assert probe.events()[3:] == ["fatal b", "cancelled c", "stopped c", "cancelled a", "stopped a"]


async def test_run_supervisor_reports_its_supervisor_and_stops_when_cancelled() -> None:
    """run_supervisor hands its Supervisor to nursery.start and stops its children on cancel."""
    probe = Probe()
    async with trio.open_nursery() as nursery:
        sup = await nursery.start(
            functools.partial(run_supervisor, spec(), [probe.spec("a"), probe.spec("b")], name="r")
        )
        assert isinstance(sup, Supervisor)
        assert sup.name == "r"
        assert sup.child_value("a") == "a#1"
        nursery.cancel_scope.cancel()
    assert probe.events()[2:] == ["cancelled b", "stopped b", "cancelled a", "stopped a"]


async def test_nested_supervisor_stops_its_subtree_in_order(autojump_clock: trio.abc.Clock) -> None:
    """A child supervisor stops its own children within the parent's reverse-order stop."""
    probe = Probe(cleanup=dict.fromkeys("axyb", 0.1))
    inner = ChildSpec(
        id="inner",
        start=functools.partial(run_supervisor, spec(), [probe.spec("x"), probe.spec("y")]),
        kind=ChildKind.SUPERVISOR,
    )
    async with open_supervisor(spec(), [probe.spec("a"), inner, probe.spec("b")]) as root:
        assert root.which_children()[1].kind is ChildKind.SUPERVISOR
        assert isinstance(root.child_value("inner"), Supervisor)
    stops = [(round(when, 6), name) for when, event, name in probe.log if event == "stopped"]
    assert stops == [(0.1, "b"), (0.2, "y"), (0.3, "x"), (0.4, "a")]


async def test_child_supervisor_that_gives_up_is_restarted_by_its_parent(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A child supervisor exceeding its intensity exits abnormally; the parent restarts its subtree."""
    probe = Probe()
    inner = ChildSpec(
        id="inner",
        start=functools.partial(run_supervisor, spec(max_restarts=0), [probe.spec("x")], name="in"),
        kind=ChildKind.SUPERVISOR,
    )
    async with open_supervisor(spec(), [probe.spec("a"), inner]) as root:
        first = root.child_value("inner")
        probe.crash("x")
        await probe.wait_started("x", 2)
        assert trio.current_time() == 0.5
        second = root.child_value("inner")
        assert second is not first
        assert second.child_value("x") == "x#2"
        assert root.which_children()[1].restarts == 1
        assert root.child_value("a") == "a#1"


async def test_started_from_a_subtask_still_shields_the_child(autojump_clock: trio.abc.Clock) -> None:
    """A child that reports started() from one of its own subtasks is still stopped only in order."""
    log: list[tuple[float, str]] = []

    async def indirect(name: str, *, task_status: trio.TaskStatus[None]) -> None:
        async def report() -> None:
            task_status.started()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(report)
                await trio.sleep_forever()
        finally:  # only cancellation ends it
            log.append((trio.current_time(), f"cancelled {name}"))
            with trio.CancelScope(shield=True):
                await trio.sleep(1.0)

    children = [ChildSpec(id=name, start=functools.partial(indirect, name)) for name in "ab"]
    with trio.move_on_after(5.0):
        async with open_supervisor(spec(), children):
            await trio.sleep_forever()
    assert log == [(5.0, "cancelled b"), (6.0, "cancelled a")]


async def test_child_that_just_exited_can_be_deleted_before_the_exit_is_handled(
    autojump_clock: trio.abc.Clock,
) -> None:
    """delete_child wins over a not-yet-handled exit: no RuntimeError, and no restart of the deleted child."""
    probe = Probe()
    gate = trio.Event()

    async def slow_start(*, task_status: trio.TaskStatus[str]) -> None:
        await gate.wait()
        task_status.started("slow")
        await trio.sleep_forever()

    async with open_supervisor(spec(Strategy.REST_FOR_ONE), [probe.spec("x")]) as sup:
        async with trio.open_nursery() as nursery:
            # Holding the supervisor busy with a slow start keeps its manager from handling exits.
            nursery.start_soon(sup.start_child, ChildSpec(id="slow", start=slow_start))
            await trio.testing.wait_all_tasks_blocked()
            probe.finish("x")
            await trio.testing.wait_all_tasks_blocked()
            assert not sup.which_children()[0].running
            sup.delete_child("x")
            gate.set()
        await trio.sleep(10.0)
        assert [info.id for info in sup.which_children()] == ["slow"]
        assert probe.starts["x"] == 1
        assert sup.statistics().restarts_total == 0
