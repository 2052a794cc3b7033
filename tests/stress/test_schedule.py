"""The scheduler and the load engine on trio's virtual clock: exact intended times, no coordinated omission."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from mcp_actors.stress import LoadPlan, RateSchedule, Tally, drive, parse_rate, single_tool
from mcp_actors.stress._engine import OutageTracker
from mcp_actors.stress._scenario import Operation, scenario_from_dict

ECHO = single_tool("echo", {"text": "x"})


def test_constant_rate_times_are_exact() -> None:
    """At 100/s call n is intended at exactly n/100 s, and none at or after the end."""
    schedule = RateSchedule.build(parse_rate("100"), duration=1.0)
    times = list(schedule.times())
    assert len(times) == 100
    assert all(t == pytest.approx(n / 100, abs=1e-12) for n, t in times)


@given(workers=st.integers(1, 7), rate=st.integers(1, 500))
def test_workers_interleave_into_the_whole_schedule(workers: int, rate: int) -> None:
    """The workers' shares are disjoint and together are exactly the one-worker schedule."""
    schedule = RateSchedule.build(parse_rate(str(rate)), duration=2.0)
    whole = list(schedule.times())
    shares = [list(schedule.times(worker=w, workers=workers)) for w in range(workers)]
    assert sorted(x for share in shares for x in share) == whole


def test_step_schedule_counts_each_step() -> None:
    """``100:300:100/1s`` sends 100, then 200, then 300 calls, one second each."""
    schedule = RateSchedule.build(parse_rate("100:300:100/1s"))
    times = [t for _, t in schedule.times()]
    assert schedule.length == 3.0
    counts = [sum(1 for t in times if s <= t < s + 1) for s in range(3)]
    assert counts == [100, 200, 300]
    assert schedule.rate_at(1.5) == 200


def test_ramp_up_then_constant() -> None:
    """A 2 s ramp to 100/s sends 100 calls (the triangle), then 100/s for the duration."""
    schedule = RateSchedule.build(parse_rate("100"), ramp_up=2.0, duration=3.0)
    times = [t for _, t in schedule.times()]
    assert schedule.length == 5.0
    assert sum(1 for t in times if t < 2.0) == 100
    assert sum(1 for t in times if t >= 2.0) == 300
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[10] > gaps[90]  # the rate grows during the ramp


def test_linear_ramp_expected_count() -> None:
    """``100..300/2s`` sends the integral of the rate: (100 + 300) / 2 * 2 = 400 calls."""
    schedule = RateSchedule.build(parse_rate("100..300/2s"))
    assert len(list(schedule.times())) == 400
    assert schedule.expected_count(2.0) == pytest.approx(400)


def test_request_budget_limits_the_schedule() -> None:
    """``--requests`` cuts an open-ended rate after that many calls."""
    schedule = RateSchedule.build(parse_rate("50"))
    assert math.isinf(schedule.length)
    assert len(list(schedule.times(limit=7))) == 7


def _fixed(latency: float) -> Any:
    async def execute(n: int, op: Operation, args: Mapping[str, Any], timeout: float) -> str | None:
        await trio.sleep(latency)
        return None

    return execute


async def test_open_model_latency_is_exact_on_virtual_time(autojump_clock: trio.testing.MockClock) -> None:
    """100/s for 1 s against a 10 ms server: 100 calls, each measured at 10 ms, rate exact."""
    tally = Tally()
    plan = LoadPlan(rate=parse_rate("100"), duration=1.0)
    await drive(plan, ECHO, _fixed(0.010), start=trio.current_time(), tally=tally)
    assert tally.requests == 100
    assert tally.latency.percentile(50) == pytest.approx(0.010, rel=1e-3)
    assert tally.latency.max == pytest.approx(0.010, rel=1e-3)
    assert tally.measured_seconds == pytest.approx(1.0)
    assert tally.send_rate == pytest.approx(100, rel=1e-9)
    assert (tally.late_sends, tally.max_send_lag) == (0, 0.0)


def _stall(at: float, until: float, latency: float, base: float) -> Any:
    """A server that answers in ``latency`` except that nothing is answered in [at, until)."""

    async def execute(n: int, op: Operation, args: Mapping[str, Any], timeout: float) -> str | None:
        await trio.sleep(latency)
        now = trio.current_time() - base
        if at <= now < until:
            await trio.sleep(until - now)
        return None

    return execute


async def test_open_model_shows_a_stall_in_p99(autojump_clock: trio.testing.MockClock) -> None:
    """A 1 s stall under open load puts the queueing into p99 (latency from intended time)."""
    tally = Tally()
    base = trio.current_time()
    plan = LoadPlan(rate=parse_rate("100"), duration=4.0)
    await drive(plan, ECHO, _stall(1.0, 2.0, 0.005, base), start=base, tally=tally)
    assert tally.requests == 400
    # A quarter of the calls were intended during the stall: p90 and p99 see it.
    assert tally.latency.percentile(99) > 0.9
    assert tally.latency.percentile(50) == pytest.approx(0.005, rel=1e-2)
    assert tally.seconds[1].latency.percentile(50) > 0.4


async def test_closed_model_hides_the_same_stall(autojump_clock: trio.testing.MockClock) -> None:
    """The same stall seen by one closed-loop user is one slow call: p99 stays at the service time."""
    tally = Tally()
    base = trio.current_time()
    plan = LoadPlan(users=1, duration=4.0)
    await drive(plan, ECHO, _stall(1.0, 2.0, 0.005, base), start=base, tally=tally)
    assert tally.latency.percentile(99) == pytest.approx(0.005, rel=1e-2)
    assert tally.latency.max > 0.9


async def test_max_in_flight_queues_but_latency_counts_from_intended(autojump_clock: trio.testing.MockClock) -> None:
    """With one slot and 100 ms calls at 20/s, calls queue: the measured latency grows with the queue."""
    tally = Tally()
    plan = LoadPlan(rate=parse_rate("20"), requests=10, max_in_flight=1)
    await drive(plan, ECHO, _fixed(0.100), start=trio.current_time(), tally=tally)
    assert tally.requests == 10
    assert tally.service.max == pytest.approx(0.100, rel=1e-3)
    # Call 9 was intended at 0.45 s, sent at 0.9 s, done at 1.0 s.
    assert tally.latency.max == pytest.approx(0.55, rel=1e-3)
    # The schedule could not be kept, and the tally says so.
    assert tally.max_send_lag == pytest.approx(0.45)
    assert tally.late_sends == 9


async def test_warmup_is_excluded(autojump_clock: trio.testing.MockClock) -> None:
    """Calls intended during the warmup are counted apart and kept out of the histograms."""
    tally = Tally()
    plan = LoadPlan(rate=parse_rate("10"), duration=2.0, warmup=1.0)
    await drive(plan, ECHO, _fixed(0.001), start=trio.current_time(), tally=tally)
    assert tally.warmup_calls == 10
    assert tally.requests == 10
    assert tally.measured_seconds == pytest.approx(1.0)


async def test_closed_users_ramp_up_and_think(autojump_clock: trio.testing.MockClock) -> None:
    """Two users ramped over 1 s, 100 ms calls + 100 ms think, 2 s: user 0 makes 10 calls, user 1 (from 0.5 s) 8."""
    tally = Tally()
    plan = LoadPlan(users=2, ramp_up=1.0, duration=1.0, think=0.1)
    await drive(plan, ECHO, _fixed(0.1), start=trio.current_time(), tally=tally)
    assert tally.requests == 18
    assert tally.first_sent == 0.0
    assert tally.last_sent == pytest.approx(1.9)


async def test_closed_request_budget_is_shared(autojump_clock: trio.testing.MockClock) -> None:
    """``--requests 7`` with 3 users (one worker) makes exactly 7 calls."""
    tally = Tally()
    plan = LoadPlan(users=3, requests=7)
    await drive(plan, ECHO, _fixed(0.01), start=trio.current_time(), tally=tally)
    assert tally.requests == 7


def test_budget_shares_add_up() -> None:
    """The closed-model budget split over workers adds up to the whole budget."""
    for users, workers, requests in [(3, 2, 7), (10, 3, 100), (5, 5, 4), (1, 1, 9)]:
        shares = [
            LoadPlan(users=users, workers=workers, worker=w, requests=requests).my_budget() for w in range(workers)
        ]
        assert sum(s or 0 for s in shares) == requests


async def test_stop_finishes_calls_in_flight(autojump_clock: trio.testing.MockClock) -> None:
    """Setting ``stop`` ends the sending; calls in flight still complete and are counted."""
    tally = Tally()
    stop = trio.Event()
    plan = LoadPlan(rate=parse_rate("10"), duration=10.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: drive(plan, ECHO, _fixed(0.5), start=trio.current_time(), tally=tally, stop=stop))
        await trio.sleep(1.05)
        stop.set()
    assert tally.requests == 11  # intended at 0.0 .. 1.0
    assert tally.measured_seconds == pytest.approx(1.05)


async def test_outage_tracker_times_failure_and_recovery(autojump_clock: trio.testing.MockClock) -> None:
    """Errors after a fault count until the first success sent after it; both delays are measured."""
    tracker = OutageTracker()
    outage = tracker.begin("kill", 1.0, 42)
    tracker.observe(sent=0.9, end=0.95, error=None)  # before: ignored
    tracker.observe(sent=0.95, end=1.01, error="server_connection_lost")
    tracker.observe(sent=0.99, end=1.3, error=None)  # sent before the fault: not a recovery
    tracker.observe(sent=1.1, end=1.12, error="server_connection_lost")
    tracker.observe(sent=1.2, end=1.5, error=None)
    tracker.observe(sent=1.6, end=1.7, error="timeout")  # after recovery: not this outage's
    doc = outage.to_json()
    assert doc["errors"] == 2
    assert doc["time_to_first_failure"] == pytest.approx(0.01)
    assert doc["time_to_recovery"] == pytest.approx(0.5)


async def test_mix_follows_weights(autojump_clock: trio.testing.MockClock) -> None:
    """A 3:1 mix sends about three times as many of the first operation (seeded, reproducible)."""
    mix = scenario_from_dict({"operations": [{"tool": "a", "weight": 3}, {"tool": "b", "weight": 1}]})
    tally = Tally()
    plan = LoadPlan(rate=parse_rate("1000"), duration=2.0)
    await drive(plan, mix, _fixed(0.001), start=trio.current_time(), tally=tally)
    a, b = tally.ops["a"].requests, tally.ops["b"].requests
    assert a + b == 2000
    assert 2.5 < a / b < 3.5
