"""``mcp_actors.asyncio.open_runtime``: the runtime for asyncio hosts, as a trio guest on their loop or on a thread.

Real runtimes and real server processes (the demo server, the fault server), each test in
``asyncio.run`` with every wait bounded. The rules hold in both modes unless a test says
otherwise: the start and the stop never block the loop, typed errors cross unchanged,
cancelling the asyncio task cancels the call on the server, and leaving the block — normally,
by an exception or by cancellation — leaves no server process behind.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import psutil
import pytest
from testkit import is_infrastructure

import mcp_actors._hosts.guest
import mcp_actors.asyncio as maio
import mcp_actors.portal
import mcp_actors.runtime
from mcp_actors import events
from mcp_actors.errors import ActorStopped, ServerNotFound, ToolCallDenied, ToolCallTimeout
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import fault_server_command, live_descendants

BOUND = 60.0
"""Generous: a server's first start on a loaded two-core machine."""

MODES = ["guest", "thread"]


def server_processes() -> list[psutil.Process]:
    """Our descendants that are not long-lived helpers (the reaper sidecar)."""
    return live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline())))


def fault_input(name: str, *flags: str) -> dict[str, Any]:
    """A trusted config entry running the fault server with ``flags``."""
    argv = fault_server_command(*flags)
    return {"name": name, "type": "stdio", "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0}}


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


@pytest.fixture
def config(tmp_path: Path) -> Iterator[str]:
    """A fresh config file (the demo server only); no server process may outlive the test."""
    yield str(tmp_path / "cfg.json")
    assert server_processes() == []


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    """``asyncio.run(main())``, bounded."""

    async def bounded() -> Any:
        async with asyncio.timeout(BOUND * 2):
            return await main()

    return asyncio.run(bounded())


async def wait_stderr(service: maio.AsyncioMcpService, server: str, text: str, *, count: int = 1) -> None:
    """Wait (bounded) until the server has written ``count`` stderr lines containing ``text``."""
    seen: set[str] = set()
    await service.connect(server)  # adding spawns nothing: the process is there once connected

    def enough(line: str) -> bool:
        if text in line:
            seen.add(line)
        return len(seen) >= count

    async with asyncio.timeout(BOUND):
        await service.wait_for_stderr(server, enough)


# ---------------------------------------------------------------------- start, stop, modes


@pytest.mark.parametrize("mode", MODES)
def test_start_and_stop_never_block_the_loop(config: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another task of the loop keeps running while the runtime starts and while it stops (servers and all).

    The runtime's own start and stop are made to take a fifth of a second each (on its trio
    loop), so the loop must be free meanwhile: without that a start that happens to be done
    before the first look (a fast thread on a busy machine) would never need the loop to wait.
    """
    import contextlib

    import trio

    real = mcp_actors.runtime.open_runtime

    @contextlib.asynccontextmanager
    async def slow_runtime(*args: Any, **kwargs: Any) -> Any:
        await trio.sleep(0.2)
        async with real(*args, **kwargs) as runtime:
            yield runtime
        await trio.sleep(0.2)

    monkeypatch.setattr(mcp_actors.portal, "open_runtime", slow_runtime)
    monkeypatch.setattr(mcp_actors._hosts.guest, "open_runtime", slow_runtime)

    async def main() -> tuple[int, int, int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before_start = ticks
        async with maio.open_runtime(config, mode=mode) as rt:
            during_start = ticks - before_start
            await rt.service.add(fault_input("f"))
            assert text_of(await rt.service.call_tool("f", "echo", {"text": "up"})) == "up"
            assert len(server_processes()) == 1
            before_stop = ticks
        during_stop = ticks - before_stop
        stop.set()
        await task
        return during_start, during_stop, len(server_processes())

    during_start, during_stop, left = run(main)
    assert during_start > 0 and during_stop > 0
    assert left == 0  # checked at once: leaving the block returned only after reaping


def test_the_default_mode_is_guest_and_a_second_runtime_in_the_thread_takes_a_thread(config: str) -> None:
    """The first runtime of a thread is a guest (no portal); a second one runs on a thread; guest twice is refused."""

    async def main() -> tuple[str, str, bool, bool]:
        async with maio.open_runtime(config) as first:
            async with maio.open_runtime(config + ".2") as second:
                assert second.portal is not None
                with pytest.raises(RuntimeError, match="mode='thread'"):
                    async with maio.open_runtime(config + ".3", mode="guest"):
                        pass
                results = await asyncio.gather(
                    first.service.call_tool("demo", "echo", {"text": "a"}),
                    second.service.call_tool("demo", "echo", {"text": "b"}),
                )
                assert [text_of(r) for r in results] == ["a", "b"]
                return first.mode, second.mode, first.portal is None, isinstance(first.service, maio.AsyncioMcpService)

    assert run(main) == ("guest", "thread", True, True)


def test_a_bad_mode_is_refused(config: str) -> None:
    """``mode`` other than guest or thread: ValueError naming both."""

    async def main() -> None:
        async with maio.open_runtime(config, mode="fork"):  # type: ignore[arg-type]
            pass

    with pytest.raises(ValueError, match="'guest' or 'thread'"):
        run(main)


def test_a_guest_runtime_refuses_other_threads_and_a_thread_runtime_serves_them(config: str) -> None:
    """A guest's facade used from another thread raises RuntimeError naming mode='thread'; a thread runtime's works."""

    def elsewhere(service: maio.AsyncioMcpService) -> str:
        async def call() -> str:
            return text_of(await service.call_tool("demo", "echo", {"text": "other loop"}))

        return asyncio.run(call())

    async def main() -> str:
        async with maio.open_runtime(config) as guest:
            with pytest.raises(RuntimeError, match="mode='thread'"):
                await asyncio.to_thread(elsewhere, guest.service)
            with pytest.raises(RuntimeError, match="mode='thread'"):
                await asyncio.to_thread(guest.service.status, "demo")
        async with maio.open_runtime(config, mode="thread") as threaded:
            return await asyncio.to_thread(elsewhere, threaded.service)

    assert run(main) == "other loop"


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_start_raises_its_typed_error_and_leaves_nothing(tmp_path: Path, mode: str) -> None:
    """A corrupt config file fails the start with ConfigFileCorrupt, as open_runtime does on trio."""
    from mcp_actors.errors import ConfigFileCorrupt

    path = tmp_path / "cfg.json"
    path.write_text("{not json", encoding="utf-8")

    async def main() -> None:
        async with maio.open_runtime(str(path), mode=mode):
            raise AssertionError("never started")

    with pytest.raises(ConfigFileCorrupt):
        run(main)
    assert server_processes() == []


# ---------------------------------------------------------------------- the service


@pytest.mark.parametrize("mode", MODES)
def test_typed_errors_cross_unchanged_and_the_service_is_whole(config: str, mode: str) -> None:
    """Results, tool errors and typed errors (ServerNotFound, ToolCallTimeout) arrive as on trio."""

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            svc = rt.service
            await svc.add(fault_input("hangs", "--hang-tool", "sleep"))
            assert [r.name for r in await svc.list()] == ["demo", "hangs"]
            assert svc.get("hangs").name == "hangs" and svc.status("demo").server_name == "demo"
            with pytest.raises(ServerNotFound):
                await svc.call_tool("nope", "echo", {})
            with pytest.raises(ToolCallTimeout):
                await svc.call_tool("hangs", "sleep", {"seconds": 1}, timeout=0.3)
            failed = await svc.call_tool("hangs", "fail", {"message": "tool says no"})
            assert failed.is_error and "tool says no" in text_of(failed)
            ids = [t.id for t in await svc.list_all_active_server_tools()]
            assert "mcp__demo__echo" in ids and svc.resolve_tool_id("mcp__demo__echo")[1] == "echo"
            by_id = await svc.call_tool_by_id("mcp__demo__add", {"a": 2, "b": 3})
            assert "5" in text_of(by_id)
            assert await svc.health("demo") > 0
            assert (await svc.initialize_result("demo")).server_info.name == "mcp-actors-demo"
            assert svc.stderr_tail("hangs") != ()

    run(main)


@pytest.mark.parametrize("mode", MODES)
def test_cancelling_the_task_cancels_the_call_on_the_server(config: str, mode: str) -> None:
    """Cancelled asyncio tasks cancel their hung calls on the server (notifications/cancelled), which serves on."""

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            svc = rt.service
            await svc.add(fault_input("f", "--hang-tool", "sleep"))
            tasks = [asyncio.create_task(svc.call_tool("f", "sleep", {"seconds": 1})) for _ in range(5)]
            await wait_stderr(svc, "f", "fault: hanging call", count=5)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with pytest.raises(asyncio.CancelledError):
                    await task
            await wait_stderr(svc, "f", "fault: cancelled", count=5)
            assert text_of(await svc.call_tool("f", "echo", {"text": "still here"})) == "still here"
            assert svc.status("f").calls_in_flight == 0

    run(main)


@pytest.mark.parametrize("mode", MODES)
def test_events_approver_and_progress_run_on_the_loop(config: str, mode: str) -> None:
    """Subscriptions stream tool:called; a coroutine approver and an on_progress callback run on the host's loop."""

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            svc = rt.service
            loop_thread = threading.get_ident()
            asked: list[tuple[str, bool]] = []

            async def approver(request: ApprovalRequest) -> bool:
                asked.append((request.tool_name, threading.get_ident() == loop_thread))
                return request.tool_name != "add"

            await svc.update("demo", is_trusted=False)
            svc.set_approver(approver)
            progress: list[bool] = []
            async with svc.subscribe() as sub:
                result = await svc.call_tool(
                    "demo",
                    "sleep",
                    {"seconds": 0.05},
                    on_progress=lambda p, t, m: progress.append(threading.get_ident() == loop_thread),
                )
                assert text_of(result).startswith("slept")
                with pytest.raises(ToolCallDenied):
                    await svc.call_tool("demo", "add", {"a": 1, "b": 2})
                kinds = []
                async with asyncio.timeout(BOUND):
                    async for event in sub:
                        kinds.append(event.type)
                        if event.type == events.TOOL_CALLED:  # the denied call never ran: no event of its own
                            assert event.data["toolName"] == "sleep" and event.data["success"]
                            break
            assert events.TOOL_CALLED in kinds and events.TOOL_PROGRESS in kinds
            assert asked == [("sleep", True), ("add", True)]
            for _ in range(100):  # the last relayed progress may still be scheduled
                if progress:
                    break
                await asyncio.sleep(0.01)
            assert progress and all(progress)

    run(main)


# ---------------------------------------------------------------------- leaving the block


@pytest.mark.parametrize("mode", MODES)
def test_a_block_that_raises_closes_every_server_before_the_error_leaves(config: str, mode: str) -> None:
    """An exception out of the block: running calls end, every process is reaped, and the error is the block's."""

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            await rt.service.add(fault_input("f", "--hang-tool", "sleep", "--spawn-grandchild"))
            hung = asyncio.create_task(rt.service.call_tool("f", "sleep", {"seconds": 1}))
            await wait_stderr(rt.service, "f", "fault: hanging call")
            assert len(server_processes()) >= 2  # the server and its grandchild
            raise KeyError("the host's own error")
        raise AssertionError(f"unreachable {hung}")

    started = time.monotonic()
    with pytest.raises(KeyError, match="the host's own error"):
        run(main)
    assert server_processes() == []
    assert time.monotonic() - started < BOUND


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_task_still_closes_every_server_before_it_ends(config: str, mode: str) -> None:
    """Cancelling the task inside the block: the runtime stops and reaps everything, then CancelledError goes on."""

    async def main() -> tuple[bool, list[psutil.Process]]:
        entered = asyncio.Event()
        calls: list[asyncio.Task[Any]] = []

        async def host() -> None:
            async with maio.open_runtime(config, mode=mode) as rt:
                await rt.service.add(fault_input("f", "--hang-tool", "sleep"))
                calls.append(asyncio.create_task(rt.service.call_tool("f", "sleep", {"seconds": 1})))
                await wait_stderr(rt.service, "f", "fault: hanging call")
                entered.set()
                await asyncio.sleep(BOUND * 10)

        task = asyncio.create_task(host())
        async with asyncio.timeout(BOUND):
            await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        left = server_processes()  # at once: the block was left only after reaping
        with pytest.raises(ActorStopped):
            await calls[0]
        return task.cancelled(), left

    cancelled, left = run(main)
    assert cancelled and left == []


@pytest.mark.parametrize("mode", MODES)
def test_a_cancellation_during_the_start_stops_the_runtime(config: str, mode: str) -> None:
    """A task cancelled while the runtime starts ends with CancelledError and leaves nothing running."""

    async def main() -> None:
        async def host() -> None:
            async with maio.open_runtime(config, mode=mode):
                await asyncio.sleep(BOUND * 10)

        task = asyncio.create_task(host())
        await asyncio.sleep(0)  # the start is under way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main)
    assert server_processes() == []


@pytest.mark.parametrize("mode", MODES)
def test_calls_after_the_block_fail_with_actor_stopped(config: str, mode: str) -> None:
    """The facade of a closed runtime refuses calls with ActorStopped."""

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            service = rt.service
        with pytest.raises(ActorStopped):
            await service.call_tool("demo", "echo", {"text": "late"})

    run(main)
