"""The registry actor: expected failures are replies, a crash restarts only the registry,
requests of a dead incarnation are answered, the facade survives restarts, the running
service follows other processes' config changes, and every async method checkpoints.

The demo and fault servers' records are served in memory (``servers_in_memory``): the
registry's rules do not depend on how a server is reached, and its counters of started and
running instances stand in for "the same process" and "the process is gone".
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from pathlib import Path
from typing import Any

import attrs
import filelock
import pytest
import trio
from testkit import drain, runtime_at, text_of

from mcp_actors import events
from mcp_actors._config.codec import record_from_json_dict
from mcp_actors._config.record import McpServerRecord, new_server_id
from mcp_actors._config.store import ConfigStore
from mcp_actors._registry import actor as registry_actor
from mcp_actors.errors import (
    ActorStopped,
    ConfigStoreError,
    McpActorsError,
    ServerNotFound,
    ToolDisabled,
    ToolNotFound,
)
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.service import McpService
from mcp_actors.testing import fault_server_command
from mcp_actors.testing.memory import InMemoryServers

REGISTRY_CLOSED = "the registry stopped while handling this request (the runtime is closing); retry if it is not"
UNWRITABLE = "/proc/self/mcp-actors-test/mcp-config.json"
"""A config path nobody can write, not even root: the lock file cannot be created there."""

pytestmark = pytest.mark.usefixtures("servers_in_memory")


def fault_input(name: str, *flags: str) -> dict[str, object]:
    command = fault_server_command(*flags)
    return {
        "name": name,
        "type": "stdio",
        "config": {"command": command[0], "args": command[1:], "pingInterval": 0},
    }


async def crash_registry(rt: Runtime) -> None:
    """Make the registry crash the way a bug would: an unknown message is a TypeError inside the actor."""
    mailbox = rt.service._registry.mailbox
    assert mailbox is not None
    await mailbox.tell(object())


async def wait_registry_restarts(rt: Runtime, count: int) -> None:
    with trio.fail_after(30):
        # Polls the supervisor's statistics (no event exists for "restarted"), bounded.
        while rt.root.statistics().restarts_total < count or rt.service._registry.mailbox is None:  # noqa: ASYNC110
            await trio.sleep(0.01)


@attrs.frozen
class HeldStarts:
    """The registry's next slot start, held open: ``starting`` is set when it begins, ``release`` lets it run."""

    starting: trio.Event
    release: trio.Event


def hold_next_slot_start(monkeypatch: pytest.MonkeyPatch) -> HeldStarts:
    """Hold the registry's next start of connection slots (an update's, an add's) until released.

    A hook on ``start_prepared``: the mutation stays in progress for as long as the test
    wants, on virtual time, with no sleep.
    """
    held = HeldStarts(trio.Event(), trio.Event())
    start_prepared = registry_actor.start_prepared

    async def held_start(connections: Any, slots: Any) -> None:
        if not held.starting.is_set():
            held.starting.set()
            await held.release.wait()
        await start_prepared(connections, slots)

    monkeypatch.setattr(registry_actor, "start_prepared", held_start)
    return held


async def test_unwritable_config_is_a_reply_and_a_running_call_is_untouched(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """An unwritable config fails add/update/remove with ConfigStoreError; nothing restarts, a call completes."""
    store = ConfigStore(UNWRITABLE, lock_timeout=0.2)
    async with open_runtime(store=store, connect_on_add=False) as rt:
        svc = rt.service
        await svc.connect("demo")
        results: list[str] = []

        async def long_call() -> None:
            results.append(text_of(await svc.call_tool("demo", "sleep", {"seconds": 1.0})))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_call)
            with pytest.raises(ConfigStoreError, match=r"mcp-config\.json"):
                await svc.add(fault_input("x"))
            with pytest.raises(ConfigStoreError):
                await svc.update("demo", is_trusted=False)
            with pytest.raises(ConfigStoreError):
                await svc.remove("demo")
            with pytest.raises(ConfigStoreError):
                await svc.add_json(json.dumps({"mcpServers": {"y": {"command": "y"}}}))
        assert results == ["slept 1 s"]
        assert servers_in_memory.starts["demo"] == 1 and servers_in_memory.running["demo"] == 1
        assert rt.root.statistics().restarts_total == 0
        assert [r.name for r in await svc.list()] == ["demo"]
        assert [r.name for r in await svc.list_server_tools("demo")]


async def test_registry_crash_restarts_only_the_registry(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """A registry crash leaves connections, servers and calls in flight untouched; the old facade works."""
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        await svc.add(fault_input("f"))
        await svc.connect("f")
        started = servers_in_memory.starts["f"]
        assert started == 1
        tools_before = await svc.list_server_tools("f")
        results: list[str] = []

        async def long_call() -> None:
            results.append(text_of(await svc.call_tool("f", "sleep", {"seconds": 1.0})))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_call)
            await trio.sleep(0.1)
            await crash_registry(rt)
            await wait_registry_restarts(rt, 1)
        assert results == ["slept 1 s"]
        assert servers_in_memory.starts["f"] == started, "the server was not restarted"
        assert rt.connections.statistics().restarts_total == 0
        assert [r.name for r in await svc.list()] == ["demo", "f"]
        # The facade taken before the restart still works, for every kind of operation.
        with trio.fail_after(30):
            tools_after = await svc.list_server_tools("f")
            assert [t.id for t in tools_after] == [t.id for t in tools_before]
            assert text_of(await svc.call_tool_by_id(tools_after[0].id, {"text": "hi"})) in {"hi", "slept 0 s", "0"}
            await svc.update("f", is_trusted=True)
            await svc.add(fault_input("g"))
            await svc.remove("g")
        assert servers_in_memory.starts["f"] == started and servers_in_memory.running["f"] == 1
        assert rt.service is svc


async def test_requests_of_a_crashed_incarnation_are_answered_at_once(tmp_path: Path) -> None:
    """Requests sent around a crash never hang; a listing waiting on its connection is not the registry's to fail.

    The listing waits in the server's connection actor (the registry holds no fetch), so the
    crash leaves it waiting there; cancelling it is the caller's call.
    """
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        await svc.add(fault_input("slow", "--slow-start", "3600"))
        outcomes: dict[str, object] = {}

        async def attempt(key: str, fn: Any, *args: Any) -> None:
            try:
                outcomes[key] = await fn(*args)
            except McpActorsError as exc:
                outcomes[key] = exc

        with trio.fail_after(30):  # the listing alone would take an hour
            async with trio.open_nursery() as nursery:
                nursery.start_soon(attempt, "listing", svc.list_server_tools, "slow")
                await trio.testing.wait_all_tasks_blocked()
                mailbox = svc._registry.mailbox
                assert mailbox is not None
                mailbox.tell_nowait(object())  # the crash
                async with trio.open_nursery() as around:
                    for name in ("q1", "q2", "q3"):
                        # Queued behind the crash (answered ActorStopped) or sent after it (served by the next one).
                        around.start_soon(attempt, name, svc.add, fault_input(name))
                assert "listing" not in outcomes
                nursery.cancel_scope.cancel()
        for name in ("q1", "q2", "q3"):
            outcome = outcomes[name]
            assert isinstance(outcome, ActorStopped) or getattr(outcome, "name", None) == name, outcome
        await svc.remove("slow")


async def test_a_listing_in_flight_across_a_registry_crash_is_stored_by_the_next_incarnation(tmp_path: Path) -> None:
    """A crash of the registry while a server's first listing is on its connection does not fail that listing.

    Nor does it cost a second ``tools/list``: the next incarnation starts with no cache, and
    the connection's own listing answers its first miss.
    """
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        await svc.add(fault_input("srv"))
        tools: list[Any] = []

        async def listing() -> None:
            tools.extend(await svc.list_server_tools("srv"))

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(listing)
                await trio.testing.wait_all_tasks_blocked()  # the server is starting: nothing to do but wait
                mailbox = svc._registry.mailbox
                assert mailbox is not None
                mailbox.tell_nowait(object())  # the crash
        await wait_registry_restarts(rt, 1)
        assert {"echo", "add"} <= {tool.name for tool in tools}
        assert [tool.name for tool in await svc.list_server_tools("srv")] == [tool.name for tool in tools]
        assert svc.tool_list_requests == 1


async def test_requests_in_progress_at_shutdown_are_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    """Closing the runtime answers at once, with ActorStopped saying so, every request still in progress.

    A listing waiting for a server that takes an hour to start (its connect timeout is
    30 s) is answered by its connection actor; an update whose slot start is held open, and
    a remove queued behind it, are answered by the registry. Nothing waits for a timeout:
    no virtual time passes.
    """
    outcomes: dict[str, object] = {}

    async def attempt(key: str, fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            outcomes[key] = await fn(*args, **kwargs)
        except McpActorsError as exc:
            outcomes[key] = exc

    async with trio.open_nursery() as outside:  # the requests outlive the runtime
        async with runtime_at(tmp_path, connect_on_add=False, config_poll_interval=0) as rt:
            svc = rt.service
            await svc.add(fault_input("slow", "--slow-start", "3600"))
            await svc.add(fault_input("a"))
            held = hold_next_slot_start(monkeypatch)
            config = {**fault_input("a")["config"], "callTimeout": 31}  # type: ignore[dict-item]
            outside.start_soon(functools.partial(attempt, "update", svc.update, "a", config=config))
            await held.starting.wait()
            outside.start_soon(attempt, "remove", svc.remove, "a")
            outside.start_soon(attempt, "listing", svc.list_server_tools, "slow")
            await trio.testing.wait_all_tasks_blocked()
            assert outcomes == {}
            closing = trio.current_time()
        answered = trio.current_time()
    assert answered == closing, "nothing waited for a timeout"
    assert {key: (type(error), str(error)) for key, error in outcomes.items()} == {
        "listing": (ActorStopped, "server 'slow': its connection actor stopped (the runtime is closing)"),
        "update": (ActorStopped, REGISTRY_CLOSED),
        "remove": (ActorStopped, REGISTRY_CLOSED),
    }


async def test_a_listing_during_an_update_publishes_the_servers_new_handle(
    tmp_path: Path, servers_in_memory: InMemoryServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing stored while an update's new slot is starting publishes the server with a handle.

    The update's slot start is held open (a hook on ``start_prepared``); meanwhile another
    server's listing makes the registry publish. The updated server, enabled throughout,
    stays callable: the call waits for the new slot and is answered by it. (It was answered
    "server 'a' is disabled": the update had taken the old handle out and not yet put the
    new one in when the listing published.)
    """
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        record = await svc.add(fault_input("a"))
        assert text_of(await svc.call_tool("a", "echo", {"text": "before"})) == "before"
        held = hold_next_slot_start(monkeypatch)
        outcome: list[object] = []

        async def call_a() -> None:
            try:
                outcome.append(text_of(await svc.call_tool("a", "echo", {"text": "after"})))
            except McpActorsError as exc:
                outcome.append(exc)

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                config = {**fault_input("a")["config"], "callTimeout": 31}  # type: ignore[dict-item]
                nursery.start_soon(functools.partial(svc.update, "a", config=config))
                await held.starting.wait()  # the update is starting a's new slot
                await svc.list_server_tools("demo")  # a listing: the registry publishes meanwhile
                published = svc._registry.snapshot
                nursery.start_soon(call_a)
                await trio.testing.wait_all_tasks_blocked()
                held.release.set()
        assert outcome == ["after"]
        assert published.find("a") is not None and record.id in published.handles
        assert servers_in_memory.starts["a"] == 2 and servers_in_memory.running["a"] == 1


async def test_a_slow_mutation_does_not_stall_another_servers_cache_miss(tmp_path: Path) -> None:
    """While a remove waits for the config lock, another server's tool listing (a cache miss) is served."""
    cfg = tmp_path / "cfg.json"
    store = ConfigStore(cfg, lock_timeout=60.0)
    async with open_runtime(store=store, connect_on_add=False) as rt:
        svc = rt.service
        await svc.add(fault_input("a"))
        await svc.add(fault_input("b"))
        await svc.connect("b")
        lock = filelock.FileLock(store.lock_path)
        holding = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with lock:
                holding.set()
                release.wait(60)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            await trio.to_thread.run_sync(holding.wait, 30)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(svc.remove, "a")
                await trio.testing.wait_all_tasks_blocked()
                with trio.fail_after(30):
                    tools = await svc.list_server_tools("b")
                assert {t.name for t in tools} >= {"echo"}
                release.set()
        finally:
            release.set()
            await trio.to_thread.run_sync(thread.join)
        assert [r.name for r in await svc.list()] == ["demo", "b"]


async def test_external_config_changes_reach_the_running_service(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """Another process's add, change and remove are seen by list(), look-ups and add(), with servers:changed events."""
    cfg = tmp_path / "cfg.json"
    async with open_runtime(cfg, connect_on_add=False, config_poll_interval=0) as rt:
        svc = rt.service
        sub = svc.subscribe()
        other = ConfigStore(cfg)
        await trio.to_thread.run_sync(other.modify, lambda rs: rs.append(_record(fault_input("x"))))
        assert [r.name for r in await svc.list()] == ["demo", "x"]
        assert {t.name for t in await svc.list_server_tools("x")} >= {"echo"}
        changed = [e for e in drain(sub) if e.type == events.SERVERS_CHANGED]
        assert [(e.data["action"], e.data["serverName"]) for e in changed] == [("added", "x")]
        # Found on a look-up miss, without list().
        await trio.to_thread.run_sync(other.modify, lambda rs: rs.append(_record(fault_input("y"))))
        assert text_of(await svc.call_tool("y", "echo", {"text": "hi"})) == "hi"

        def disable_x(rs: list[Any]) -> None:
            rs[:] = [r.updated(is_active=False) if r.name == "x" else r for r in rs]

        assert servers_in_memory.running["x"] == 1
        await trio.to_thread.run_sync(other.modify, disable_x)
        records = {r.name: r for r in await svc.list()}
        assert not records["x"].is_active
        assert servers_in_memory.running["x"] == 0, "disabling x stopped its server"
        await trio.to_thread.run_sync(other.modify, lambda rs: rs.__setitem__(slice(None), rs[:1]))
        assert [r.name for r in await svc.list()] == ["demo"]
        with pytest.raises(ServerNotFound):
            await svc.call_tool("y", "echo", {"text": "hi"})
        # A name taken by another process is a duplicate, and the running service then knows it.
        await trio.to_thread.run_sync(other.modify, lambda rs: rs.append(_record(fault_input("z"))))
        with pytest.raises(McpActorsError, match="already exists"):
            await svc.add(fault_input("z"))


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("id", None, "id {id!r} is already used by mcpServers[1]"),
        ("name", "x", "name 'x' is already used by mcpServers[1]"),
    ],
)
async def test_an_external_edit_that_duplicates_a_server_is_reported_and_changes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, key: str, value: str | None, said: str
) -> None:
    """Another process's edit giving two entries one id, or one name, is reported; the running servers stay.

    A duplicate id already worked this way. A duplicate name was applied before: both
    records ran, and a look-up by that name reached whichever came last.
    """
    cfg = tmp_path / "cfg.json"
    async with open_runtime(cfg, connect_on_add=False, config_poll_interval=0) as rt:
        svc = rt.service
        added = await svc.add(fault_input("x"))
        before = await svc.list()
        document = json.loads(cfg.read_text(encoding="utf-8"))
        copy = {**document["mcpServers"][1], "id": new_server_id(), "name": "y"}
        copy[key] = value if value is not None else added.id
        document["mcpServers"].append(copy)
        broken = json.dumps(document)
        cfg.write_text(broken, encoding="utf-8")
        with caplog.at_level("WARNING", logger="mcp_actors"):
            assert await svc.list() == before
        warnings = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
        assert len(warnings) == 1 and f"mcpServers[2]: {said.format(id=added.id)}" in warnings[0]
        assert text_of(await svc.call_tool("x", "echo", {"text": "hi"})) == "hi"
        assert cfg.read_text(encoding="utf-8") == broken, "the file is reported, never rewritten"


async def test_periodic_check_applies_external_changes_without_calls(tmp_path: Path) -> None:
    """With nobody calling, the periodic check applies another process's add and emits servers:changed."""
    cfg = tmp_path / "cfg.json"
    async with open_runtime(cfg, connect_on_add=False, config_poll_interval=0.05) as rt:
        sub = rt.service.subscribe()
        other = ConfigStore(cfg)
        await trio.to_thread.run_sync(other.modify, lambda rs: rs.append(_record(fault_input("x"))))
        with trio.fail_after(30):
            async for event in sub:
                if event.type == events.SERVERS_CHANGED:
                    assert event.data["serverName"] == "x" and event.data["action"] == "added"
                    break
        assert "x" in {r.name for r in rt.service._registry.snapshot.records.values()}


async def test_an_untouched_config_is_not_re_read(tmp_path: Path) -> None:
    """Right after start the registry knows the file's version: an untouched file is never re-read."""
    cfg = tmp_path / "cfg.json"
    await trio.to_thread.run_sync(ConfigStore(cfg).modify, lambda rs: rs.append(_record(fault_input("x"))))
    async with open_runtime(cfg, connect_on_add=False, config_poll_interval=0) as rt:
        ref = rt.service._registry
        assert ref.fingerprint == await trio.to_thread.run_sync(ref.store.fingerprint)


async def test_ids_of_tools_that_are_gone_are_dropped(tmp_path: Path) -> None:
    """Once a server's tools change, ids of tools it no longer has stop resolving; the id map does not grow."""
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        sub = svc.subscribe()

        async def toggle() -> None:
            await svc.call_tool("demo", "toggle_extra_tool", {})
            with trio.fail_after(30):
                async for event in sub:
                    if event.type == events.TOOLS_CHANGED:
                        return

        await toggle()
        [extra] = [t for t in await svc.list_server_tools("demo") if t.name == "extra"]
        assert svc.resolve_tool_id(extra.id)[1] == "extra"
        await toggle()
        assert "extra" not in {t.name for t in await svc.list_server_tools("demo")}
        with pytest.raises(ToolNotFound):
            svc.resolve_tool_id(extra.id)
        await svc.update("demo", disabled_tools=("echo",))
        tools = await svc.list_server_tools("demo")
        with pytest.raises(ToolDisabled):
            svc.resolve_tool_id("mcp__demo__echo")
        assert len(svc._registry.snapshot.tool_ids) == len(tools)


async def test_tool_ids_follow_each_servers_listing_and_removal_and_spare_the_others(tmp_path: Path) -> None:
    """The id index is kept per view (no walk of every server's tools per listing): a
    re-listing and a removal change one server's ids and no other's."""
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        await svc.add(fault_input("f"))
        await svc.add(fault_input("g"))
        f_tools = await svc.list_server_tools("f")
        g_tools = await svc.list_server_tools("g")
        demo_tools = await svc.list_server_tools("demo")
        everyone = [*demo_tools, *f_tools, *g_tools]
        assert {svc.resolve_tool_id(t.id)[1] for t in everyone} == {t.name for t in everyone}
        assert set(svc._registry.snapshot.tool_ids) == {t.id for t in everyone}
        await svc.reconnect("f")  # a new connection: f's listing is fetched and its view replaced
        again = await svc.list_server_tools("f")
        assert [t.id for t in again] == [t.id for t in f_tools]
        assert set(svc._registry.snapshot.tool_ids) == {t.id for t in everyone}
        await svc.remove("f")
        for tool in f_tools:
            with pytest.raises(ToolNotFound):
                svc.resolve_tool_id(tool.id)
        assert {svc.resolve_tool_id(t.id)[1] for t in [*demo_tools, *g_tools]} == {
            t.name for t in [*demo_tools, *g_tools]
        }
        assert set(svc._registry.snapshot.tool_ids) == {t.id for t in [*demo_tools, *g_tools]}


async def test_update_accepts_the_records_camel_case_keys(tmp_path: Path) -> None:
    """update() takes the config file's camelCase keys (as add() does), as a mapping or keywords."""
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        rec = await svc.update("demo", {"isTrusted": False, "disabledTools": ["fail"]})
        assert not rec.is_trusted and rec.disabled_tools == ("fail",)
        rec = await svc.update("demo", isActive=False)
        assert not rec.is_active
        rec = await svc.update("demo", is_active=True, disabledAutoApproveTools=["echo"])
        assert rec.is_active and rec.disabled_auto_approve_tools == ("echo",)
        with pytest.raises(McpActorsError, match="id"):
            await svc.update("demo", {"id": "other"})


async def test_health_on_demand(tmp_path: Path) -> None:
    """health() pings the server (connecting first) and returns the round-trip seconds; a disabled one says so."""
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        await svc.add(fault_input("f"))
        rtt = await svc.health("f")
        assert 0 <= rtt < 30
        await svc.update("f", is_active=False)
        with pytest.raises(McpActorsError, match="disabled"):
            await svc.health("f")


def _async_methods() -> list[str]:
    return sorted(
        name for name, fn in inspect.getmembers(McpService, inspect.iscoroutinefunction) if not name.startswith("_")
    )


async def test_every_async_method_checkpoints(tmp_path: Path) -> None:
    """Every async public method of McpService is a checkpoint: cancelled before it starts, it raises Cancelled."""
    calls: dict[str, tuple[Any, ...]] = {
        "add": (fault_input("n"),),
        "add_json": (json.dumps({"mcpServers": {}}),),
        "call_tool": ("demo", "echo", {"text": "x"}),
        "call_tool_by_id": ("mcp__demo__echo", {"text": "x"}),
        "cleanup": (),
        "connect": ("demo",),
        "disconnect": ("demo",),
        "discover": ("demo",),
        "health": ("demo",),
        "initialize_result": ("demo",),
        "notifications_delivered": ("demo",),
        "list": (),
        "list_all_active_server_tools": (),
        "list_server_tools": ("demo",),
        "list_tool_definitions": ("demo",),
        "list_tools_detailed": (),
        "reconnect": ("demo",),
        "remove": ("nope",),
        "set_roots": (["file:///x"],),
        "test": ("demo",),
        "update": ("demo",),
        "wait_for_stderr": ("demo", lambda line: True),
        # protocol features
        "complete": ("demo", {"type": "ref/prompt", "name": "compose"}, ("tone", "f")),
        "get_prompt": ("demo", "greeting", {"name": "x"}),
        "list_prompts": ("demo",),
        "list_resource_templates": ("demo",),
        "list_resources": ("demo",),
        "list_tasks": ("demo",),
        "read_resource": ("demo", "demo://readme"),
        "set_log_level": ("demo", "info"),
        "subscribe_resource": ("demo", "demo://counter"),
        "unsubscribe_resource": ("demo", "demo://counter"),
    }
    assert sorted(calls) == _async_methods()
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        await svc.list_server_tools("demo")  # warm: the cache-hit paths are the ones at risk
        for name, args in calls.items():
            with trio.CancelScope() as scope:
                scope.cancel()
                try:
                    await getattr(svc, name)(*args)
                except McpActorsError:
                    pass
            assert scope.cancelled_caught, f"{name} returned without a checkpoint"


async def test_cache_hits_let_other_tasks_run(tmp_path: Path) -> None:
    """Cached listings yield to the scheduler: another task gets turns while 2,000 of them run."""
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        await svc.list_server_tools("demo")
        turns = 0
        done = False

        async def other() -> None:
            nonlocal turns
            while not done:
                turns += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            for _ in range(2000):
                tools = await svc.list_server_tools("demo")
            done = True
        assert turns >= 1000
        again = await svc.list_server_tools("demo")
        assert all(a is b for a, b in zip(tools, again, strict=True)), "a cache hit returns the same McpTool objects"


def _record(data: dict[str, object]) -> McpServerRecord:
    stamp = "2026-01-01T00:00:00Z"
    return record_from_json_dict({"id": new_server_id(), "createdAt": stamp, "updatedAt": stamp, **data})


async def test_a_restarted_registry_rebuilds_from_the_store_and_the_live_slots(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """After a crash the registry adopts live slots of configured servers and stops those the file no longer has."""
    cfg = tmp_path / "cfg.json"
    async with open_runtime(cfg, connect_on_add=False, config_poll_interval=0) as rt:
        svc = rt.service
        await svc.add(fault_input("keep"))
        await svc.add(fault_input("gone"))
        await svc.connect("keep")
        await svc.connect("gone")
        assert servers_in_memory.running["keep"] == 1 and servers_in_memory.running["gone"] == 1
        other = ConfigStore(cfg)
        await trio.to_thread.run_sync(other.modify, lambda rs: rs.__setitem__(slice(None), rs[:2]))
        await crash_registry(rt)
        await wait_registry_restarts(rt, 1)
        assert [r.name for r in svc._registry.snapshot.records.values()] == ["demo", "keep"]
        assert servers_in_memory.starts["keep"] == 1 and servers_in_memory.running["keep"] == 1
        with trio.fail_after(30):
            while len(rt.connections.which_children()) > 2:  # noqa: ASYNC110 - bounded poll of another tree
                await trio.sleep(0.05)
        assert servers_in_memory.running["gone"] == 0


def _task_names(task: trio.lowlevel.Task) -> list[str]:
    names = [task.name]
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            names += _task_names(child)
    return names


async def test_concurrent_listings_wait_on_one_fetch_without_a_task_each(tmp_path: Path) -> None:
    """Five listings waiting for one server's tools cost no task of the registry's, nor one each in its actor.

    The registry does not fetch (the facade lists on the connection and hands it the
    list); the connection actor keeps the five as replies waiting for its one attempt.
    """
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        svc = rt.service
        await svc.add(fault_input("slow", "--slow-start", "3600"))
        with trio.fail_after(30):  # the listings alone would take an hour
            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(svc.list_server_tools, "slow")
                await trio.testing.wait_all_tasks_blocked()
                names = _task_names(trio.lowlevel.current_root_task())
                nursery.cancel_scope.cancel()
        registry_tasks = [name for name in names if name.startswith("mcp_actors._registry.actor._RegistryActor.")]
        assert sorted(registry_tasks) == [
            "mcp_actors._registry.actor._RegistryActor.mutation_worker",
            "mcp_actors._registry.actor._RegistryActor.poll_config",
        ], registry_tasks
        actor_tasks = [name for name in names if name.startswith("mcp_actors._connection.actor._ConnectionActor.")]
        assert actor_tasks == ["mcp_actors._connection.actor._ConnectionActor._run_session"], actor_tasks
        assert names.count("mcp_actors.service.McpService.list_server_tools") == 5
        await svc.remove("slow")
