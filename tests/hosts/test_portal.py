"""The blocking portal: the trio runtime in a thread, used from plain threads and asyncio.

Real runtimes. The portal's rules (threads, loops, typed errors, subscriptions, approvers)
run on the fault server's in-memory twin (``servers_in_memory``); tests that watch the
server's stderr (a call hanging, a cancellation arriving) or its processes at close run the
real stdio fault server. Every test closes its portal; closing must leave no process behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
from testkit import is_infrastructure, text_of

from mcp_actors import events
from mcp_actors._config.store import ConfigStore
from mcp_actors.errors import (
    ActorStopped,
    ConfigFileCorrupt,
    InvalidServerConfig,
    ServerNotFound,
    ToolCallDenied,
    ToolCallTimeout,
)
from mcp_actors.portal import RuntimePortal, start_portal
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import fault_server_command, live_descendants
from mcp_actors.testing.memory import InMemoryServers

# Generous bounds for waits on another thread: they only fire when something is broken.
BOUND = 30.0


def fault_input(name: str, *flags: str, **config: object) -> dict[str, Any]:
    """A config entry running the fault server with ``flags``."""
    argv = fault_server_command(*flags)
    return {
        "name": name,
        "type": "stdio",
        "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0, **config},
        "isTrusted": True,
    }


def _is_infrastructure(proc: psutil.Process) -> bool:
    return is_infrastructure(" ".join(proc.cmdline()))


def server_processes() -> list[psutil.Process]:
    """Our descendants that are not long-lived helpers (the reaper sidecar)."""
    return live_descendants(ignore=_is_infrastructure)


def wait_stderr(portal: RuntimePortal, server: str, text: str, *, count: int = 1) -> list[str]:
    """Block until the server has written ``count`` distinct stderr lines containing ``text``."""
    seen: set[str] = set()

    def enough(line: str) -> bool:
        if text in line:
            seen.add(line)
        return len(seen) >= count

    async def wait() -> None:
        service = portal.service
        handle = service._registry.snapshot.handles[service.get(server).id]
        with trio.fail_after(BOUND):
            await handle.wait_for_stderr(enough)

    portal.run(wait)
    return sorted(seen)


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[RuntimePortal]:
    """A running portal on a fresh config; closed (and checked for processes) after the test."""
    with start_portal(str(tmp_path / "cfg.json")) as running:
        yield running
    assert server_processes() == []


def test_sync_calls_from_many_threads(servers_in_memory: InMemoryServers, portal: RuntimePortal) -> None:
    """Eight plain threads call tools at once through the blocking facade and get their own results."""
    service = portal.sync_service()
    service.add(fault_input("f"))

    def worker(n: int) -> list[str]:
        return [text_of(service.call_tool("f", "echo", {"text": f"{n}-{i}"})) for i in range(25)]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(worker, range(8), timeout=BOUND))
    assert results == [[f"{n}-{i}" for i in range(25)] for n in range(8)]
    assert [r.name for r in service.list()] == ["demo", "f"]
    status = service.status("f")
    assert status.state.value == "connected" and status.calls_in_flight == 0
    tools = service.list_server_tools("f")
    assert {"echo", "sleep"} <= {t.name for t in tools}
    record, name = service.resolve_tool_id(next(t.id for t in tools if t.name == "add"))
    assert (record.name, name) == ("f", "add")
    assert text_of(service.call_tool_by_id("mcp__f__add", {"a": 2, "b": 3})) == "5"
    assert servers_in_memory.starts["f"] == 1


def test_typed_errors_cross_the_thread_boundary_unchanged(portal: RuntimePortal) -> None:
    """ServerNotFound, InvalidServerConfig and ToolCallTimeout reach the caller as themselves."""
    service = portal.sync_service()
    service.add(fault_input("hangs", "--hang-tool", "sleep"))
    with pytest.raises(ServerNotFound, match="nope"):
        service.call_tool("nope", "echo", {"text": "x"})
    with pytest.raises(InvalidServerConfig, match="command"):
        service.add({"name": "broken", "type": "stdio", "config": {}})
    with pytest.raises(ToolCallTimeout) as info:
        service.call_tool("hangs", "sleep", {"seconds": 1}, timeout=0.3)
    assert info.value.tool == "sleep" and info.value.timeout == 0.3
    wait_stderr(portal, "hangs", "fault: cancelled")
    failed = service.call_tool("hangs", "fail", {"message": "tool says no"})
    assert failed.is_error and text_of(failed) == "tool says no"
    assert [r.name for r in service.list()] == ["demo", "hangs"]


def test_asyncio_concurrent_calls_and_cancellation_inside_asyncio_run(portal: RuntimePortal) -> None:
    """In asyncio.run: gathered calls succeed, hung ones overlap, cancelling them cancels them on the server."""
    service = portal.asyncio_service()

    async def main() -> None:
        await service.add(fault_input("f", "--hang-tool", "sleep"))
        texts = await asyncio.gather(*(service.call_tool("f", "echo", {"text": str(i)}) for i in range(200)))
        assert [text_of(r) for r in texts] == [str(i) for i in range(200)]

        hung = [asyncio.create_task(service.call_tool("f", "sleep", {"seconds": 1})) for _ in range(20)]
        # All twenty reach the server while all twenty tasks are still pending.
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: hanging call", count=20)
        assert not any(task.done() for task in hung)
        assert service.status("f").calls_in_flight == 20
        # The loop stays free meanwhile: other calls go through.
        assert text_of(await service.call_tool("f", "add", {"a": 1, "b": 1})) == "2"
        for task in hung:
            task.cancel()
        outcomes = await asyncio.gather(*hung, return_exceptions=True)
        assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: cancelled", count=20)

    asyncio.run(main())
    status = portal.sync_service().status("f")
    assert status.calls_in_flight == 0 and status.state.value == "connected"


def test_two_asyncio_loops_in_two_threads_share_one_portal(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """Two threads, each running its own asyncio loop, call through one portal at the same time."""
    service = portal.asyncio_service()
    portal.sync_service().add(fault_input("f"))

    def run_loop(tag: str) -> list[str]:
        async def main() -> list[str]:
            results = await asyncio.gather(*(service.call_tool("f", "echo", {"text": f"{tag}{i}"}) for i in range(50)))
            return [text_of(r) for r in results]

        return asyncio.run(main())

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        a, b = pool.map(run_loop, ["a", "b"], timeout=BOUND)
    assert a == [f"a{i}" for i in range(50)] and b == [f"b{i}" for i in range(50)]


def test_close_fails_running_calls_and_leaves_no_process(tmp_path: Path) -> None:
    """close() fails a blocked call with ActorStopped and returns only once every process is reaped."""
    portal = start_portal(str(tmp_path / "cfg.json"))
    service = portal.sync_service()
    aservice = portal.asyncio_service()
    service.add(fault_input("hangs", "--hang-tool", "sleep"))
    service.add(fault_input("tree", "--spawn-grandchild"))
    service.connect("hangs")  # adding spawns nothing: its stderr is waited for below
    service.connect("tree")
    [line] = wait_stderr(portal, "tree", "fault: grandchild")
    grandchild = psutil.Process(int(line.rsplit(" ", 1)[1]))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        blocked = pool.submit(service.call_tool, "hangs", "sleep", {"seconds": 1})
        wait_stderr(portal, "hangs", "fault: hanging call")
        assert len(server_processes()) == 3  # two servers and the grandchild
        portal.close()
        # Checked at once, with no grace: close() returned only after reaping everything.
        assert server_processes() == []
        # Killed; possibly not yet reaped by init, which adopted it when its parent died.
        assert not grandchild.is_running() or grandchild.status() == psutil.STATUS_ZOMBIE
        with pytest.raises(ActorStopped, match="closed"):
            blocked.result(timeout=BOUND)
    with pytest.raises(ActorStopped):
        service.call_tool("hangs", "echo", {"text": "x"})
    with pytest.raises(ActorStopped):
        service.list()

    async def after_close() -> None:
        await aservice.call_tool("hangs", "echo", {"text": "x"})

    with pytest.raises(ActorStopped):
        asyncio.run(after_close())
    portal.close()  # idempotent
    assert portal.closed


def test_corrupt_config_fails_start_with_its_typed_error(tmp_path: Path) -> None:
    """start_portal re-raises ConfigFileCorrupt in the caller and leaves no runtime thread behind."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"mcpServers": [')
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(ConfigFileCorrupt) as info:
        start_portal(str(cfg))
    assert str(cfg) in str(info.value)
    assert not [t for t in threading.enumerate() if t.ident not in before and t.name == "mcp-actors-runtime"]
    assert cfg.read_text() == '{"mcpServers": ['


def test_sync_subscription_sees_events_and_ends_with_the_portal(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """A blocking subscription yields events, times out honestly, and its iteration ends with the portal."""
    portal = start_portal(str(tmp_path / "cfg.json"))
    service = portal.sync_service()
    sub = service.subscribe()
    with pytest.raises(TimeoutError):
        sub.get(timeout=0.05)
    service.add(fault_input("f"))
    service.call_tool("f", "echo", {"text": "x"})
    seen: list[events.Event] = []
    both_calls_seen = threading.Event()

    def read() -> None:
        for event in sub:
            seen.append(event)
            if [e.type for e in seen].count(events.TOOL_CALLED) == 2:
                both_calls_seen.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        service.call_tool("f", "echo", {"text": "y"})
        assert both_calls_seen.wait(BOUND)
    finally:
        portal.close()
    reader.join(BOUND)
    assert not reader.is_alive(), "iteration did not end when the portal closed"
    types = [e.type for e in seen]
    assert types[0] == events.SERVERS_CHANGED and types.count(events.TOOL_CALLED) == 2
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)


def test_asyncio_subscription_inside_asyncio_run(servers_in_memory: InMemoryServers, portal: RuntimePortal) -> None:
    """An asyncio subscription made before a call yields that call's tool:called event."""
    service = portal.asyncio_service()

    async def main() -> list[str]:
        await service.add(fault_input("f"))
        sub = service.subscribe()
        async with sub:
            await service.call_tool("f", "echo", {"text": "x"})
            async for event in sub:
                if event.type == events.TOOL_CALLED:
                    return [event.data["serverName"], event.data["toolName"], str(event.data["success"])]
        raise AssertionError("subscription ended early")

    assert asyncio.run(main()) == ["f", "echo", "True"]


def test_sync_approver_runs_in_a_worker_thread(servers_in_memory: InMemoryServers, portal: RuntimePortal) -> None:
    """A blocking approver runs off the runtime's thread (it may block); its 'no' is ToolCallDenied."""
    service = portal.sync_service()
    service.add({**fault_input("f"), "isTrusted": False})
    runtime_thread = portal.run_sync(threading.current_thread)
    asked: list[tuple[str, str]] = []
    threads: list[threading.Thread] = []

    def approver(request: ApprovalRequest) -> bool:
        threads.append(threading.current_thread())
        asked.append((request.server_name, request.tool_name))
        return request.tool_name == "echo"

    service.set_approver(approver)
    assert not service.is_auto_approved("f", "echo")
    assert text_of(service.call_tool("f", "echo", {"text": "ok"})) == "ok"
    with pytest.raises(ToolCallDenied, match="not approved"):
        service.call_tool("f", "add", {"a": 1, "b": 2})
    assert asked == [("f", "echo"), ("f", "add")]
    assert all(t is not runtime_thread and t is not threading.current_thread() for t in threads)
    service.set_approver(None)
    assert text_of(service.call_tool("f", "add", {"a": 1, "b": 2})) == "3"


def test_asyncio_approver_runs_on_the_host_loop(servers_in_memory: InMemoryServers, portal: RuntimePortal) -> None:
    """An asyncio approver coroutine runs on the loop that installed it and can deny a call."""
    service = portal.asyncio_service()

    async def main() -> list[bool]:
        loop = asyncio.get_running_loop()
        on_loop: list[bool] = []
        await service.add({**fault_input("f"), "isTrusted": False})

        async def approver(request: ApprovalRequest) -> bool:
            on_loop.append(asyncio.get_running_loop() is loop)
            await asyncio.sleep(0)
            return request.tool_name != "add"

        service.set_approver(approver)
        assert text_of(await service.call_tool("f", "echo", {"text": "ok"})) == "ok"
        with pytest.raises(ToolCallDenied):
            await service.call_tool("f", "add", {"a": 1, "b": 2})
        return on_loop

    assert asyncio.run(main()) == [True, True]


def test_blocking_calls_from_the_runtime_thread_are_refused(portal: RuntimePortal) -> None:
    """A blocking portal call made on the portal's own thread raises RuntimeError instead of deadlocking."""
    service = portal.sync_service()
    with pytest.raises(RuntimeError, match="that loop's thread"):
        portal.run_sync(service.list)
    assert [r.name for r in service.list()] == ["demo"]


def test_facades_offer_health_current_list_and_camel_case_update(
    servers_in_memory: InMemoryServers, portal: RuntimePortal, tmp_path: Path
) -> None:
    """Both facades have health(), a list() current with the file, and update() with camelCase keys."""
    sync = portal.sync_service()
    sync.add(fault_input("f"))
    assert 0 <= sync.health("f") < BOUND
    assert not sync.update("f", {"isTrusted": False}).is_trusted
    assert sync.update("f", isTrusted=True).is_trusted
    other = ConfigStore(tmp_path / "cfg.json")
    other.modify(lambda records: records.__setitem__(slice(None), [r for r in records if r.name != "f"]))
    assert [r.name for r in sync.list()] == ["demo"]

    async def from_asyncio() -> tuple[float, list[str], bool]:
        service = portal.asyncio_service()
        rtt = await service.health("demo")
        names = [r.name for r in await service.list()]
        record = await service.update("demo", {"disabledTools": ["fail"]})
        return rtt, names, record.disabled_tools == ("fail",)

    rtt, names, updated = asyncio.run(from_asyncio())
    assert 0 <= rtt < BOUND and names == ["demo"] and updated


def test_sync_subscription_polls_with_a_zero_timeout_and_loses_nothing(portal: RuntimePortal) -> None:
    """``get(timeout=0)`` returns a buffered event, and a timed-out ``get`` takes none.

    Each ``get(timeout=0)`` used to time out *and* take an event off the buffer.
    """
    service = portal.sync_service()
    sub = service.subscribe()
    service.add({**fault_input("f"), "isActive": False})  # one servers:changed, nothing connects
    assert sub.get(timeout=0).type == events.SERVERS_CHANGED
    for _ in range(3):
        with pytest.raises(TimeoutError):
            sub.get(timeout=0)
    assert sub.dropped == 0
