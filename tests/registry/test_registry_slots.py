"""The registry starts its connection slots while it serves, and never strands a request.

At its start the registry puts a handle for every active server in its view at once and
starts the slots' tasks in the background, all in one scheduler pass
(``_RegistryActor.start_slots``): a request for a server whose slot has not started waits
in the handle's mailbox. These tests pin what that must keep: every slot starts, in config
order and together (so do the slots of servers added together); a request made before
its slot started is served; a slot whose server went away before it started never runs;
and a slot that will never start answers what was queued for it (ActorStopped), so no
caller waits for an answer that cannot come.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing
from testkit import child_spawn_passes, runtime_at

from mcp_actors import events
from mcp_actors._config.codec import record_from_json_dict
from mcp_actors._config.record import McpServerRecord, new_server_id
from mcp_actors._config.store import ConfigStore
from mcp_actors._connection.handle import ConnectionHandle, open_slot
from mcp_actors._registry.actor import RegistryRef, _RegistryActor, settings_for
from mcp_actors.errors import ActorStopped
from mcp_actors.runtime import CONNECTIONS_SPEC
from mcp_actors.testing import demo_server_command
from supervisors import Supervisor, open_supervisor

pytestmark = pytest.mark.usefixtures("servers_in_memory")

COUNT = 12


def demo_records(count: int) -> list[McpServerRecord]:
    command = demo_server_command()
    return [
        record_from_json_dict(
            {
                "id": new_server_id(),
                "name": f"demo{i}",
                "type": "stdio",
                "config": {"command": command[0], "args": command[1:], "pingInterval": 0},
            }
        )
        for i in range(count)
    ]


def slot_owners(connections: object) -> list[str]:
    """The server ids of the connection slots, in the supervisor's start order."""
    children = connections.which_children()  # type: ignore[attr-defined]
    return [info.value.server_id for info in children if isinstance(info.value, ConnectionHandle)]


async def rebuilt_actor(tmp_path: Path, records: list[McpServerRecord], connections: Supervisor) -> _RegistryActor:
    """A registry incarnation after its rebuild: every slot prepared, none started."""
    ref = RegistryRef(store=ConfigStore(tmp_path / "cfg.json"), bus=events.EventBus(), initial_records=records)
    actor = _RegistryActor(ref, connections, connect_on_add=False, poll_interval=0)
    await actor.rebuild()
    return actor


async def expect_stopped(handle: ConnectionHandle, outcomes: list[str]) -> None:
    try:
        await handle.connect()
    except ActorStopped as exc:
        outcomes.append(str(exc))
    else:
        outcomes.append("connected")


async def test_the_runtime_serves_before_its_slots_have_started_and_then_starts_all_in_config_order(
    tmp_path: Path,
) -> None:
    """open_runtime does not wait for every slot; the last server answers at once; all slots start, in order."""
    records = demo_records(COUNT)
    ConfigStore(tmp_path / "cfg.json").save(records)
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        # Every server has its handle in the view before its slot runs ...
        assert set(rt.service._registry.snapshot.handles) == {r.id for r in records}
        # ... and the registry did not wait for the slots: most have not started yet.
        assert len(slot_owners(rt.connections)) < COUNT
        # The last server, whose slot starts last, is served: its request waited in its mailbox.
        with trio.fail_after(60):
            tools = await rt.service.list_server_tools(records[-1].name)
        assert "echo" in {t.name for t in tools}
        await trio.testing.wait_all_tasks_blocked()
        assert slot_owners(rt.connections) == [r.id for r in records]


async def test_start_slots_begins_every_slot_in_one_scheduler_pass(tmp_path: Path) -> None:
    """Every slot's task is spawned in the same pass: their servers' spawns begin together.

    One pass per slot spread a 20-server start's spawns over ~150 ms of the loop's other
    work and cost the loop ~15 ms more CPU (docs/performance.md).
    """
    records = demo_records(COUNT)
    async with open_supervisor(CONNECTIONS_SPEC, children=[], name="connections") as connections:
        actor = await rebuilt_actor(tmp_path, records, connections)
        with child_spawn_passes() as spawns:
            await actor.start_slots()
        assert len(spawns.spawned) == COUNT
        assert len(set(spawns.spawned)) == 1, spawns.spawned
        await trio.testing.wait_all_tasks_blocked()
        assert slot_owners(connections) == [r.id for r in records]
        for handle in actor.handles.values():
            await handle.aclose()


async def test_servers_added_together_get_their_slots_in_one_scheduler_pass(tmp_path: Path) -> None:
    """add_json of several servers: one write, and every new slot spawned in the same pass."""
    command = demo_server_command()
    entry = {"command": command[0], "args": command[1:], "pingInterval": 0}
    document = json.dumps({"mcpServers": {f"demo{i}": entry for i in range(COUNT)}})
    ConfigStore(tmp_path / "cfg.json").save([])  # not the built-in demo server of a new config
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        with child_spawn_passes() as spawns:
            results = await rt.service.add_json(document)
        assert [r.error for r in results] == [None] * COUNT
        assert len(spawns.spawned) == COUNT
        assert len(set(spawns.spawned)) == 1, spawns.spawned
        await trio.testing.wait_all_tasks_blocked()
        assert len(slot_owners(rt.connections)) == COUNT


async def test_a_slot_that_never_runs_answers_its_queued_requests() -> None:
    """SlotRunner.abandon: a request waiting in the mailbox gets ActorStopped naming the server; later ones too."""
    record = demo_records(1)[0]
    handle, runner = open_slot(settings_for(record), events.EventBus())
    outcomes: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(expect_stopped, handle, outcomes)
        await trio.testing.wait_all_tasks_blocked()
        assert outcomes == []  # queued: nothing serves the mailbox yet
        runner.abandon()
    assert len(outcomes) == 1 and "demo0" in outcomes[0] and "stopped" in outcomes[0]
    await expect_stopped(handle, outcomes)  # after the abandon: refused at once, not queued
    assert len(outcomes) == 2 and "demo0" in outcomes[1]


async def test_a_server_removed_before_its_slot_started_never_gets_one(tmp_path: Path) -> None:
    """start_slots skips a handle the view no longer holds (what a removal does) and answers its queued request."""
    records = demo_records(3)
    outcomes: list[str] = []
    async with open_supervisor(CONNECTIONS_SPEC, children=[], name="connections") as connections:
        actor = await rebuilt_actor(tmp_path, records, connections)
        assert slot_owners(connections) == []  # prepared, not started
        removed = records[1].id
        actor.slots.pop(removed)
        gone = actor.handles.pop(removed)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(expect_stopped, gone, outcomes)
            await trio.testing.wait_all_tasks_blocked()
            await actor.start_slots()
        # A slot is running once spawned (started_at_spawn); its task reports its handle
        # when it first runs, which may be after start_slots returned.
        await trio.testing.wait_all_tasks_blocked()
        assert slot_owners(connections) == [records[0].id, records[2].id]
        assert actor.unstarted == []
        assert len(outcomes) == 1 and "demo1" in outcomes[0]
        for handle in actor.handles.values():
            await handle.aclose()


async def test_slots_left_unstarted_when_the_runtime_closes_answer_their_requests(tmp_path: Path) -> None:
    """The connections supervisor is stopping: start_slots starts nothing and every queued request is answered."""
    records = demo_records(3)
    outcomes: list[str] = []
    async with open_supervisor(CONNECTIONS_SPEC, children=[], name="connections") as connections:
        actor = await rebuilt_actor(tmp_path, records, connections)
    # The supervisor has stopped: a start now raises RuntimeError, as at the runtime's close.
    async with trio.open_nursery() as nursery:
        for handle in actor.handles.values():
            nursery.start_soon(expect_stopped, handle, outcomes)
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(10):
            await actor.start_slots()
    assert actor.unstarted == []
    assert sorted(o.split("'")[1] for o in outcomes) == ["demo0", "demo1", "demo2"]


async def test_an_incarnation_cancelled_before_its_slots_started_answers_their_requests(tmp_path: Path) -> None:
    """Cancelled while starting (the registry crashed or stopped): the rest are abandoned, nothing hangs."""
    records = demo_records(4)
    outcomes: list[str] = []
    async with open_supervisor(CONNECTIONS_SPEC, children=[], name="connections") as connections:
        actor = await rebuilt_actor(tmp_path, records, connections)
        last = actor.handles[records[-1].id]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(expect_stopped, last, outcomes)
            await trio.testing.wait_all_tasks_blocked()
            with trio.CancelScope() as scope:
                scope.cancel()
                await actor.start_slots()
        assert slot_owners(connections) == []
        assert actor.unstarted == []
        assert len(outcomes) == 1 and "demo3" in outcomes[0]
