"""The event bus: typed event kinds, subscriptions that end with their last reference, a bound.

Subscriptions dropped without ``close()`` (``async for ev in svc.subscribe(): …
break``) must not stay on the bus forever, where every emit would pay for them. Event types are
an enum whose values are the wire strings.
"""

from __future__ import annotations

import gc
import json
import time
import weakref
from pathlib import Path

import pytest
import trio
import trio.testing
from testkit import runtime_at

from mcp_actors import events
from mcp_actors.events import Event, EventBus, EventType

# ----------------------------------------------------------------------------- EventType (11.5)


def test_event_types_are_an_enum_with_the_wire_strings() -> None:
    """EventType's values are the documented strings, and the module constants are its members."""
    assert {member.value for member in EventType} == {
        "server:connected",
        "connection:state",
        "servers:changed",
        "tool:called",
        "tools:changed",
        "tool:progress",
        "task:status",
        "resources:changed",
        "prompts:changed",
        "resource:updated",
        "server:log",
        "elicitation:complete",
        "config:invalid",
        "profiles:changed",
    }
    assert events.ELICITATION_COMPLETE is EventType.ELICITATION_COMPLETE
    assert events.CONFIG_INVALID is EventType.CONFIG_INVALID
    assert events.PROFILES_CHANGED is EventType.PROFILES_CHANGED
    assert events.SERVER_CONNECTED is EventType.SERVER_CONNECTED
    assert events.CONNECTION_STATE is EventType.CONNECTION_STATE
    assert events.SERVERS_CHANGED is EventType.SERVERS_CHANGED
    assert events.TOOL_CALLED is EventType.TOOL_CALLED
    assert events.TOOLS_CHANGED is EventType.TOOLS_CHANGED


def test_emitted_type_is_the_enum_and_json_is_unchanged() -> None:
    """emit() with a constant or the plain string gives an EventType; to_json() writes the plain string."""
    bus = EventBus()
    with bus.subscribe() as sub:
        bus.emit(events.TOOL_CALLED, serverId="s", toolName="t", duration=0.5, success=True)
        bus.emit("tools:changed", serverId="s")
        first, second = sub.receive_nowait(), sub.receive_nowait()
    assert type(first.type) is EventType and first.type is EventType.TOOL_CALLED
    assert second.type is EventType.TOOLS_CHANGED
    assert first.type == "tool:called"  # a str enum: old comparisons keep working
    encoded = json.loads(json.dumps(first.to_json()))
    assert encoded["type"] == "tool:called"
    assert type(first.to_json()["type"]) is str
    assert encoded["data"] == {"serverId": "s", "toolName": "t", "duration": 0.5, "success": True}


def test_an_unknown_event_type_is_refused_by_name() -> None:
    """A misspelt type is a ValueError naming it and the valid ones, never a silent new kind."""
    bus = EventBus()
    with pytest.raises(ValueError, match=r"tool:called.*got 'tool:callled'"):
        bus.emit("tool:callled")
    with pytest.raises(ValueError, match="tool:callled"):
        Event(type="tool:callled")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- lifetime (10.10)


async def test_two_thousand_abandoned_iterators_leave_nothing_on_the_bus() -> None:
    """2,000 ``async for ev in bus.subscribe(): break`` loops leave 0 subscribers and free every subscription."""
    bus = EventBus()
    alive: list[weakref.ref[events.Subscription]] = []
    for index in range(2_000):
        sub = bus.subscribe()
        alive.append(weakref.ref(sub))
        bus.emit(events.SERVERS_CHANGED, action="added", serverId=f"s{index}")
        async for event in sub:
            assert event.data["serverId"] == f"s{index}"
            break
        del sub, event
    await trio.testing.wait_all_tasks_blocked()  # trio finalizes abandoned async generators in a system task
    gc.collect()
    assert bus.statistics().subscribers == 0
    assert [ref for ref in alive if ref() is not None] == []


async def test_abandoned_iterators_over_a_bare_subscribe_call_are_dropped() -> None:
    """The iterator was the only reference: breaking out of it drops the subscription (the issue's exact shape)."""
    bus = EventBus()

    async def first_event() -> Event:
        async for event in bus.subscribe():
            return event
        raise AssertionError("the subscription ended")

    for index in range(200):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first_event)
            await trio.testing.wait_all_tasks_blocked()
            assert bus.statistics().subscribers == 1
            bus.emit(events.TOOLS_CHANGED, serverId=f"s{index}")
    await trio.testing.wait_all_tasks_blocked()
    gc.collect()
    assert bus.statistics().subscribers == 0


def _emit_seconds(bus: EventBus, count: int = 2_000, rounds: int = 7) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(count):
            bus.emit(events.TOOL_CALLED, serverId="s", toolName="t", duration=0.0, success=True)
        best = min(best, time.perf_counter() - start)
    return best


async def test_emit_cost_stays_flat_after_many_abandoned_subscriptions() -> None:
    """With one live reader, emitting after 2,000 abandoned subscriptions costs what it did before (not 2,000 times)."""
    bus = EventBus()
    reader = bus.subscribe(buffer=1)
    before = _emit_seconds(bus)
    for _ in range(2_000):
        abandoned = bus.subscribe()
        bus.emit(events.SERVERS_CHANGED, action="added")
        async for _event in abandoned:
            break
        del abandoned
    await trio.testing.wait_all_tasks_blocked()
    gc.collect()
    assert bus.statistics().subscribers == 1
    after = _emit_seconds(bus)
    # Leaked, each emit would push to 2,001 buffers (~2,000 times the work); a generous bound.
    assert after < 10 * before, (before, after)
    assert reader.dropped > 0  # the live reader was still being fed


async def test_a_held_subscription_survives_leaving_a_loop_and_can_iterate_again() -> None:
    """Only a dropped subscription ends: a held one keeps its place and its buffer after ``break``."""
    bus = EventBus()
    sub = bus.subscribe()
    for step in range(3):
        bus.emit(events.TOOLS_CHANGED, step=step)
    async for event in sub:
        assert event.data["step"] == 0
        break
    await trio.testing.wait_all_tasks_blocked()
    gc.collect()
    assert bus.statistics().subscribers == 1
    assert [sub.receive_nowait().data["step"] for _ in range(2)] == [1, 2]
    bus.emit(events.TOOLS_CHANGED, step=3)
    async for event in sub:
        assert event.data["step"] == 3
        break


def test_close_and_with_still_unsubscribe_at_once() -> None:
    """close() and leaving a ``with`` block remove the subscription immediately."""
    bus = EventBus()
    with bus.subscribe():
        assert bus.statistics().subscribers == 1
    assert bus.statistics().subscribers == 0
    sub = bus.subscribe()
    sub.close()
    assert bus.statistics().subscribers == 0
    bus.emit(events.TOOLS_CHANGED)
    with pytest.raises(trio.EndOfChannel):
        sub.receive_nowait()


# ----------------------------------------------------------------------------- the bound (10.10)


def test_live_subscribers_are_bounded_with_a_clear_error() -> None:
    """Past max_subscribers, subscribe() raises a RuntimeError naming the bound; closing one frees a place."""
    bus = EventBus(max_subscribers=3)
    held = [bus.subscribe() for _ in range(3)]
    with pytest.raises(RuntimeError, match=r"3 live event subscriptions.*max_subscribers.*close"):
        bus.subscribe()
    held[0].close()
    held.append(bus.subscribe())
    assert bus.statistics() == events.EventBusStatistics(subscribers=3, max_subscribers=3, emitted=0)


def test_dropped_subscriptions_do_not_count_toward_the_bound() -> None:
    """Subscriptions that were simply forgotten free their places without close()."""
    bus = EventBus(max_subscribers=2)
    for _ in range(100):
        bus.subscribe()  # the result is dropped at once
    gc.collect()
    assert bus.statistics().subscribers == 0
    held = [bus.subscribe(), bus.subscribe()]
    assert bus.statistics().subscribers == len(held)


def test_max_subscribers_must_be_positive() -> None:
    """max_subscribers < 1 is a ValueError naming the value."""
    with pytest.raises(ValueError, match="max_subscribers must be >= 1, got 0"):
        EventBus(max_subscribers=0)


def test_the_default_bound_is_documented_and_generous() -> None:
    """The default bound is the module constant, far above any real host's readers."""
    assert EventBus().statistics().max_subscribers == events.DEFAULT_MAX_SUBSCRIBERS >= 1_000


# ----------------------------------------------------------------------------- through a runtime


async def test_abandoned_service_subscriptions_leave_the_runtime_bus(tmp_path: Path) -> None:
    """``async for ev in svc.subscribe(): break`` on a real runtime leaves no subscriber behind."""
    async with runtime_at(tmp_path, sweep_ledger=False, connect_on_add=False) as rt:
        svc = rt.service
        for index in range(30):
            async with trio.open_nursery() as nursery:

                async def first_change() -> None:
                    async for event in svc.subscribe():
                        assert event.type is EventType.SERVERS_CHANGED
                        return

                nursery.start_soon(first_change)
                await trio.testing.wait_all_tasks_blocked()
                await svc.add({"name": f"s{index}", "type": "stdio", "config": {"command": "true"}})
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        assert rt.bus.statistics().subscribers == 0


# ----------------------------------------------------------------------------- readers and deadlines


async def test_two_readers_of_one_subscription_both_see_events_and_its_close() -> None:
    """Readers sharing a subscription each wake for events and each end at its close.

    Each waiting reader used to replace the one wake-up event, so an earlier reader waited on
    one nobody would set: it saw no later event and outlived the close.
    """
    bus = EventBus()
    sub = bus.subscribe()
    got: dict[str, int] = {"A": 0, "B": 0}
    ended: set[str] = set()

    async def reader(name: str) -> None:
        async for _event in sub:
            got[name] += 1
        ended.add(name)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader, "A")
            nursery.start_soon(reader, "B")
            await trio.testing.wait_all_tasks_blocked()
            for _ in range(6):
                bus.emit(EventType.TOOL_CALLED)
                await trio.testing.wait_all_tasks_blocked()
            assert got["A"] > 0 and got["B"] > 0 and got["A"] + got["B"] == 6
            sub.close()
    assert ended == {"A", "B"}


async def test_a_receive_cancelled_by_its_deadline_takes_no_event() -> None:
    """A receive whose deadline has passed raises Cancelled and leaves the event buffered.

    It used to take the event off the buffer and then raise at its closing checkpoint: a poll
    with an expired deadline lost one event each time, uncounted in ``dropped``.
    """
    bus = EventBus()
    sub = bus.subscribe()
    for _ in range(3):
        bus.emit(EventType.TOOL_CALLED)
    for _ in range(5):
        with trio.move_on_after(0) as scope:
            await sub.receive()
        assert scope.cancelled_caught
    assert [sub.receive_nowait().seq for _ in range(3)] == [1, 2, 3]
    assert sub.dropped == 0


def test_a_typed_subscription_gets_only_its_kinds_and_leaves_tool_calls_unwatched() -> None:
    """``subscribe(types=...)`` receives those kinds only; without tool:called/tool:progress calls are not watched."""
    bus = EventBus()
    changes = bus.subscribe(types=["tools:changed", EventType.SERVERS_CHANGED])
    assert bus.has_subscribers and not bus.watches_calls
    bus.emit(EventType.TOOL_CALLED, toolName="echo")
    bus.emit(EventType.TOOLS_CHANGED, serverId="s")
    assert [event.type for event in (changes.receive_nowait(),)] == [EventType.TOOLS_CHANGED]
    with pytest.raises(trio.WouldBlock):
        changes.receive_nowait()
    everything = bus.subscribe()
    assert bus.watches_calls
    everything.close()
    assert not bus.watches_calls
    with pytest.raises(ValueError, match="event type must be one of"):
        bus.subscribe(types=["nope"])
