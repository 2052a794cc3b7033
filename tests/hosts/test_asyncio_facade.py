"""The asyncio facade is the whole McpService, and its callbacks run whatever callable the host gives."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from mcp_actors.asyncio import AsyncioMcpService
from mcp_actors.portal import start_portal
from mcp_actors.service import McpService

NOT_FOR_ASYNCIO = {"subscribe"}
"""Operations whose asyncio form differs in kind: ``subscribe`` gives an asyncio iterator (a plain method)."""
TRIO_SIDE = {"bus", "config_store", "host_callbacks", "notifications_delivered"}
"""The runtime's own parts, for code that runs on its trio loop beside it (the gateway plugs into them):
the event bus and host callbacks are trio objects, the config store is the registry's to write, and
``notifications_delivered`` orders a relay's notifications before the answer it relays."""


def public_members(cls: type) -> dict[str, Any]:
    return {name: member for name, member in inspect.getmembers(cls) if not name.startswith("_")}


@pytest.mark.parametrize("name", sorted(public_members(McpService)))
def test_every_mcp_service_operation_is_on_the_asyncio_facade(name: str) -> None:
    """Each public McpService member exists on the facade: a coroutine for a coroutine, a plain read for a read."""
    ours = public_members(AsyncioMcpService)
    if name in TRIO_SIDE:
        assert name not in ours, f"{name} is a trio-side part: an asyncio host must not get it"
        return
    assert name in ours, f"AsyncioMcpService lacks {name}"
    theirs = public_members(McpService)[name]
    if name in NOT_FOR_ASYNCIO or isinstance(theirs, property):
        return
    assert inspect.iscoroutinefunction(ours[name]) == inspect.iscoroutinefunction(theirs), name


class Recorder:
    """A progress callback that is an object with an ``async __call__`` (the SDK's ``ProgressFnT`` shape)."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        await asyncio.sleep(0)
        self.seen.append(progress)


def test_an_awaitable_returning_progress_callback_is_run(tmp_path: Path) -> None:
    """on_progress given as an object whose call returns a coroutine: the coroutine runs on the loop."""
    recorder = Recorder()

    async def main() -> None:
        with start_portal(str(tmp_path / "cfg.json")) as portal:
            service = portal.asyncio_service()
            result = await service.call_tool("demo", "sleep", {"seconds": 0.05}, on_progress=recorder)
            assert not result.is_error
            for _ in range(200):  # the last relayed call may still be scheduled
                if recorder.seen:
                    break
                await asyncio.sleep(0.01)

    asyncio.run(main())
    assert recorder.seen
