"""tasks/list and notifications/tasks/status (2025-11-25 tasks) against the demo server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import trio
from protocol_bed import BOUND, demo_service, next_event, text_of

from mcp_actors import events
from mcp_actors._config.codec import record_to_json_dict
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._demo.features import TASK_PAGE_SIZE
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.demo_server import create_demo_server
from mcp_actors.errors import ToolCallTimeout
from mcp_actors.portal import start_portal

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

LONG_POLL_MS = 600_000
"""A poll interval far beyond any bound here: a call that finishes in time was woken by the notification."""


def memory_demo() -> ConnectionSettings:
    """The demo server in memory."""
    return ConnectionSettings(
        server_id="id-demo",
        server_name="demo",
        transport=MemoryParams(server=create_demo_server, raise_exceptions=False),
        ping_interval=0,
        negotiate="legacy",  # tasks are a 2025-11-25 feature (at 2026-07-28 an extension the SDK lacks)
    )


async def test_list_tasks_returns_every_page(tmp_path: Path, transport: str) -> None:
    """McpService.list_tasks gathers every page of tasks/list, with each task's status."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, transport, protocol="legacy") as svc:  # tasks: 2025-11-25
            assert await svc.list_tasks("srv") == []
            sub = svc.subscribe()
            created = TASK_PAGE_SIZE + 1
            for n in range(created):
                await svc.call_tool("srv", "count", {"n": n + 1, "seconds": 0.05}, as_task=True)
            ids = []
            for _ in range(created):
                event = await next_event(sub, events.TASK_STATUS, lambda e: e.data["taskId"] not in ids)
                ids.append(event.data["taskId"])
            listed = await svc.list_tasks("srv")
            assert sorted(task.task_id for task in listed) == sorted(ids)
            assert {task.status for task in listed} == {"completed"}


async def test_status_notification_ends_the_wait_of_a_running_task_call() -> None:
    """notifications/tasks/status of a running task call updates it at once, not at its next poll."""
    bus = events.EventBus()
    handle, start = open_connection(memory_demo(), bus)
    results: list[str] = []
    with bus.subscribe() as sub, trio.fail_after(BOUND):  # far below the 600 s poll interval
        async with trio.open_nursery() as nursery:
            await nursery.start(start)

            async def long_call() -> None:
                args = {"n": 2, "seconds": 3600, "poll_ms": LONG_POLL_MS}
                results.append(text_of(await handle.call_tool("count", args, as_task=True, timeout=3600)))

            async with trio.open_nursery() as calls:
                calls.start_soon(long_call)
                working = await next_event(sub, events.TASK_STATUS, lambda e: e.data["status"] == "working")
                assert working.data["toolName"] == "count"
                await handle.call_tool("finish_task", {"task_id": working.data["taskId"]})
                done = await next_event(sub, events.TASK_STATUS, lambda e: e.data["status"] == "completed")
                assert done.data["taskId"] == working.data["taskId"] and done.data["toolName"] == "count"
            await handle.aclose()
    assert results == ["1 2"]


async def test_status_of_a_task_no_call_waits_for_is_an_event() -> None:
    """A status notification about a task no running call watches is published as task:status (no tool name)."""
    bus = events.EventBus()
    handle, start = open_connection(memory_demo(), bus)
    with bus.subscribe() as sub, trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            await handle.call_tool("count", {"n": 1, "seconds": 0.05}, as_task=True)
            (task,) = await handle.list_tasks()
            await handle.call_tool("finish_task", {"task_id": task.task_id})
            event = await next_event(
                sub, events.TASK_STATUS, lambda e: e.data["taskId"] == task.task_id and "toolName" not in e.data
            )
            await handle.aclose()
    assert dict(event.data) == {
        "serverId": "id-demo",
        "serverName": "demo",
        "taskId": task.task_id,
        "status": "completed",
        "message": "completed",
    }


async def test_a_timed_out_task_call_still_cancels_with_notifications_in_play() -> None:
    """A task call whose timeout ends it is cancelled on the server; list_tasks then shows it cancelled."""
    handle, start = open_connection(memory_demo(), events.EventBus())
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            with pytest.raises(ToolCallTimeout):
                await handle.call_tool("count", {"seconds": 3600, "poll_ms": LONG_POLL_MS}, as_task=True, timeout=0.5)
            (task,) = await handle.list_tasks()
            assert task.status == "cancelled"
            await handle.aclose()


def test_portal_facades_list_tasks(tmp_path: Path) -> None:
    """The blocking and the asyncio facades have list_tasks too."""
    with start_portal(str(tmp_path / "cfg.json"), sweep_ledger=False) as portal:
        svc = portal.sync_service()
        # Tasks are a 2025-11-25 feature: the demo speaks the handshake revision for this test.
        config = record_to_json_dict(svc.get("demo"))["config"]
        svc.update("demo", config={**config, "protocol": "legacy"})
        svc.call_tool("demo", "count", {"n": 1, "seconds": 0.05}, as_task=True)
        tasks: list[Any] = svc.list_tasks("demo")
        assert [task.status for task in tasks] == ["completed"]
        listed = asyncio.run(portal.asyncio_service().list_tasks("demo"))
        assert [task.task_id for task in listed] == [task.task_id for task in tasks]
