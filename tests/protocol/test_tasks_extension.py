"""The tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) from the client's side, on virtual time.

The demo server implements the extension on the SDK's low-level server
(:mod:`mcp_actors._demo.tasks`); here it runs in process, a recorder noting every request it
gets (method, params, the capabilities the client declared on it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.server.mcpserver import MCPServer
from testkit import drain, running, text_of

from mcp_actors import events
from mcp_actors._connection.callbacks import HostCallbacks
from mcp_actors._connection.handle import ConnectionHandle
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._connection.tasks import TASKS_EXTENSION
from mcp_actors._demo.tasks import ASK_KEY
from mcp_actors._sdk import lowlevel_server
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.errors import ServerRequestFailed, ToolCallFailed, ToolCallTimeout, ToolTaskFailed
from mcp_actors.testing.memory import memory_demo_server, memory_fault_server

CAPS = types.CLIENT_CAPABILITIES_META_KEY


class Recorded:
    """What a server was asked: ``(method, params)`` in order, params as they came."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def methods(self, prefix: str = "") -> list[str]:
        return [method for method, _ in self.requests if method.startswith(prefix)]

    def declared(self, method: str) -> list[bool]:
        """Per request of ``method``: whether the client declared the tasks extension on it."""
        out = []
        for m, params in self.requests:
            if m != method:
                continue
            caps = params.get("capabilities") if m == "initialize" else (params.get("_meta") or {}).get(CAPS)
            out.append(TASKS_EXTENSION in ((caps or {}).get("extensions") or {}))
        return out

    def attach(self, server: MCPServer[Any]) -> MCPServer[Any]:
        async def record(ctx: Any, call_next: Any) -> Any:
            self.requests.append((ctx.method, dict(ctx.params) if isinstance(ctx.params, dict) else {}))
            return await call_next(ctx)

        lowlevel_server(server).middleware.insert(1, record)  # after the SDK's own telemetry, before the demo's
        return server


@contextlib.asynccontextmanager
async def demo(
    recorded: Recorded, *, host: HostCallbacks | None = None, build: Any = memory_demo_server, **overrides: Any
) -> AsyncIterator[tuple[ConnectionHandle, Any]]:
    settings = ConnectionSettings(
        server_id="id-demo",
        server_name="demo",
        transport=MemoryParams(server=lambda: recorded.attach(build()), raise_exceptions=False),
        ping_interval=0,
        host=host,
        **overrides,
    )
    async with running(settings) as (handles, sub):
        await handles[0].connect()
        yield handles[0], sub


def statuses(sub: Any) -> list[str]:
    return [e.data["status"] for e in drain(sub) if e.type == events.TASK_STATUS]


# ---------------------------------------------------------------------- negotiation


async def test_the_extension_is_declared_at_2026_only(autojump_clock: trio.abc.Clock) -> None:
    """Every request of a 2026-07-28 session declares the extension; a 2025-11-25 handshake never does."""
    modern, legacy = Recorded(), Recorded()
    async with demo(modern) as (handle, _):
        await handle.list_tools()
        await handle.call_tool("count", {"n": 2, "seconds": 0})
        assert handle._cell.live is not None and handle._cell.live.tasks_extension
    assert modern.declared("server/discover") and all(modern.declared("server/discover"))
    assert all(modern.declared("tools/list")) and all(modern.declared("tools/call"))
    assert all(modern.declared("tasks/get"))
    async with demo(legacy, negotiate="legacy") as (handle, _):
        assert text_of(await handle.call_tool("count", {"n": 2})) == "1 2"
        assert handle._cell.live is not None and not handle._cell.live.tasks_extension
    assert legacy.declared("initialize") == [False]
    assert not any(legacy.declared("tools/call"))


async def test_a_server_without_the_extension_is_sent_no_task_method(autojump_clock: trio.abc.Clock) -> None:
    """as_task=True to a server that does not offer the extension is refused before anything is sent."""
    recorded = Recorded()
    async with demo(recorded, build=memory_fault_server) as (handle, _):
        with pytest.raises(ToolCallFailed, match="does not offer it") as caught:
            await handle.call_tool("echo", {"text": "x"}, as_task=True)
        assert TASKS_EXTENSION in str(caught.value)
        assert text_of(await handle.call_tool("echo", {"text": "x"})) == "x"
        with pytest.raises(ServerRequestFailed) as listed:
            await handle.list_tasks()
        assert listed.value.code == types.METHOD_NOT_FOUND
    assert recorded.methods("tasks/") == []


async def test_a_task_from_a_server_that_did_not_offer_it_is_refused(autojump_clock: trio.abc.Clock) -> None:
    """A task answered by a server that never negotiated the extension fails the call; no tasks/* follows."""
    recorded = Recorded()

    def rogue() -> MCPServer[Any]:
        server = memory_fault_server()

        async def task_anyway(ctx: Any, call_next: Any) -> Any:
            if ctx.method == "tools/call":
                return {"resultType": "task", "taskId": "t-1", "status": "working", "ttlMs": None}
            return await call_next(ctx)

        lowlevel_server(server).middleware.append(task_anyway)
        return server

    async with demo(recorded, build=rogue) as (handle, _):
        with pytest.raises(ToolCallFailed, match=r"did not offer the io\.modelcontextprotocol/tasks extension"):
            await handle.call_tool("echo", {"text": "x"})
    assert recorded.methods("tasks/") == []


async def test_list_tasks_sends_nothing_at_2026(autojump_clock: trio.abc.Clock) -> None:
    """tasks/list does not exist in the extension: "method not found" without a request."""
    recorded = Recorded()
    async with demo(recorded) as (handle, _):
        with pytest.raises(ServerRequestFailed, match="does not exist at protocol 2026-07-28") as caught:
            await handle.list_tasks()
    assert caught.value.code == types.METHOD_NOT_FOUND
    assert recorded.methods("tasks/") == []


# ---------------------------------------------------------------------- a task's life


async def test_a_task_is_polled_at_its_interval_to_its_inline_result(autojump_clock: trio.abc.Clock) -> None:
    """The server makes a task of the call; tasks/get every pollIntervalMs; the result comes inline."""
    recorded = Recorded()
    async with demo(recorded) as (handle, sub):
        start = trio.current_time()
        result = await handle.call_tool("count", {"n": 3, "seconds": 2, "poll_ms": 500})
        assert trio.current_time() - start == pytest.approx(2.0)
        assert text_of(result) == "1 2 3"
        assert recorded.methods("tasks/") == ["tasks/get"] * 4
        seen = statuses(sub)
        assert seen[0] == "working" and seen[-1] == "completed"
        assert recorded.methods("tasks/result") == []  # the 2025-11-25 way is not taken


async def test_as_task_false_declares_no_support_and_gets_a_plain_answer(autojump_clock: trio.abc.Clock) -> None:
    """as_task=False leaves the extension out of that request: the server must answer plainly."""
    recorded = Recorded()
    async with demo(recorded) as (handle, sub):
        result = await handle.call_tool("research", {"topic": "actors", "seconds": 5}, as_task=False)
        assert text_of(result) == "research on actors: done"
        assert recorded.declared("tools/call") == [False]
        assert recorded.methods("tasks/") == [] and statuses(sub) == []
        tasked = await handle.call_tool("research", {"topic": "actors", "seconds": 0.2}, as_task=True)
        assert text_of(tasked) == "research on actors: done"
        assert recorded.declared("tools/call") == [False, True] and recorded.methods("tasks/")


async def test_a_failed_task_raises_with_the_servers_error(autojump_clock: trio.abc.Clock) -> None:
    """A task that ends failed raises ToolTaskFailed carrying its id, its status and the server's error."""
    async with demo(Recorded()) as (handle, _):
        with pytest.raises(ToolTaskFailed, match="ended failed: count failed on purpose") as caught:
            await handle.call_tool("count", {"n": 1, "seconds": 0.1, "fail": True})
    assert caught.value.status == "failed" and caught.value.task_id and caught.value.tool == "count"


async def test_an_abandoned_task_is_cancelled_with_an_acknowledged_cancel(autojump_clock: trio.abc.Clock) -> None:
    """A call that times out sends tasks/cancel (not notifications/cancelled) and reports the timeout."""
    recorded = Recorded()
    async with demo(recorded) as (handle, sub):
        start = trio.current_time()
        with pytest.raises(ToolCallTimeout):
            await handle.call_tool("count", {"n": 1, "seconds": 600, "poll_ms": 100}, timeout=1.0)
        assert trio.current_time() - start == pytest.approx(1.0)
        assert recorded.methods("tasks/cancel") == ["tasks/cancel"]
        [(_, cancel)] = [r for r in recorded.requests if r[0] == "tasks/cancel"]
        assert TASKS_EXTENSION in cancel["_meta"][CAPS]["extensions"]
        assert statuses(sub)[-1] == "cancelled"


async def test_input_requests_are_answered_once_through_tasks_update(autojump_clock: trio.abc.Clock) -> None:
    """An input_required task's question reaches the host once, however often a poll repeats it."""
    asked: list[str] = []

    async def elicit(server_id: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    recorded = Recorded()
    stale = {"left": 1}

    def lagging() -> MCPServer[Any]:
        # The update is eventually consistent: the first poll after it still shows the question.
        server = memory_demo_server()
        before: dict[str, Any] = {}

        async def lag(ctx: Any, call_next: Any) -> Any:
            result = await call_next(ctx)
            if ctx.method == "tasks/get" and isinstance(result, dict) and result.get("status") == "input_required":
                before.update(result)
            elif ctx.method == "tasks/get" and before and stale["left"]:
                stale["left"] -= 1
                return before
            return result

        lowlevel_server(server).middleware.append(lag)
        return server

    async with demo(recorded, host=HostCallbacks(elicitation=elicit), build=lagging) as (handle, sub):
        result = await handle.call_tool("count", {"n": 2, "seconds": 1, "poll_ms": 200, "ask": True})
        assert text_of(result) == "1 2 (confirmed)"
        assert asked == ["Count to 2?"]
        [(_, update)] = [r for r in recorded.requests if r[0] == "tasks/update"]
        assert update["inputResponses"] == {ASK_KEY: {"action": "accept", "content": {"ok": True}}}
        assert stale["left"] == 0  # the stale poll happened, and asked nothing again
        assert "input_required" in statuses(sub)


async def test_a_declined_question_completes_the_task_with_its_error_result(autojump_clock: trio.abc.Clock) -> None:
    """A tool-level outcome of the task (isError) is a result, not an exception."""

    async def decline(server_id: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with demo(Recorded(), host=HostCallbacks(elicitation=decline)) as (handle, _):
        result = await handle.call_tool("count", {"n": 2, "seconds": 1, "ask": True})
    assert result.is_error and text_of(result) == "not confirmed"


async def test_a_pushed_task_state_ends_the_wait(autojump_clock: trio.abc.Clock) -> None:
    """notifications/tasks with the result inline finishes the call at once, long before its next poll."""
    recorded = Recorded()
    async with demo(recorded) as (handle, sub):
        outcome: dict[str, Any] = {}

        async def long_call() -> None:
            outcome["result"] = await handle.call_tool("count", {"n": 2, "seconds": 3000, "poll_ms": 3_600_000})
            outcome["at"] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_call)
            created = None
            async for event in sub:
                if event.type == events.TASK_STATUS:
                    created = event.data["taskId"]
                    break
            await trio.sleep(10)
            finished_at = trio.current_time()
            assert await handle.call_tool("finish_task", {"task_id": created}) is not None
        assert text_of(outcome["result"]) == "1 2"
        assert outcome["at"] == pytest.approx(finished_at)
        assert recorded.methods("tasks/get") == []  # the push carried the result: no poll was needed


async def test_input_first_then_a_task(autojump_clock: trio.abc.Clock) -> None:
    """A call answered InputRequiredResult, retried with the answer, then made a task, runs to the task's result."""

    async def elicit(server_id: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"ok": True})

    def composed() -> MCPServer[Any]:
        server = memory_demo_server()

        async def ask_first(ctx: Any, call_next: Any) -> Any:
            params = ctx.params if isinstance(ctx.params, dict) else {}
            if ctx.method == "tools/call" and params.get("name") == "research" and "inputResponses" not in params:
                question = {"mode": "form", "message": "Sure?", "requestedSchema": {"type": "object"}}
                return {
                    "resultType": "input_required",
                    "inputRequests": {"q": {"method": "elicitation/create", "params": question}},
                }
            return await call_next(ctx)

        lowlevel_server(server).middleware.insert(1, ask_first)
        return server

    recorded = Recorded()
    async with demo(recorded, host=HostCallbacks(elicitation=elicit), build=composed) as (handle, sub):
        result = await handle.call_tool("research", {"topic": "actors", "seconds": 0.5})
        assert text_of(result) == "research on actors: done"
        assert statuses(sub)[-1] == "completed"
    assert len(recorded.methods("tools/call")) == 2 and recorded.methods("tasks/get")
