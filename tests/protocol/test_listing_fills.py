"""Listings have one owner: concurrent misses share one request, whose outcome every waiter gets."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from mcp.server.mcpserver import MCPServer

from mcp_actors import events
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.errors import ConnectionFailed, ServerRequestFailed

WAITERS = 8


class Gated:
    """A server whose listings are counted and, while ``gate`` is set to an Event, held until it fires."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.gate: trio.Event | None = None
        self.fail = False

    def server(self) -> MCPServer[Any]:
        server: MCPServer[Any] = MCPServer("gated")

        @server.resource("mem://one", name="one")
        def one() -> str:
            return "1"

        @server.prompt()
        def greet(name: str) -> str:
            return f"hello {name}"

        @server.tool()
        async def echo(text: str) -> str:
            return text

        for method in ("list_resources", "list_prompts", "list_tools"):
            self._count(server, method)
        return server

    def _count(self, server: MCPServer[Any], method: str) -> None:
        plain = getattr(server, method)

        async def counted() -> Any:
            self.requests[method] += 1
            if self.gate is not None:
                await self.gate.wait()
            if self.fail:
                raise ValueError(f"{method} is broken today")
            return await plain()

        setattr(server, method, counted)


@asynccontextmanager
async def connected(gated: Gated, **settings: Any) -> AsyncIterator[ConnectionHandle]:
    """A connected handle to a fresh gated server (in memory), closed at the end."""
    base = ConnectionSettings(
        server_id="id-gated",
        server_name="gated",
        transport=MemoryParams(server=gated.server, raise_exceptions=False),
        ping_interval=0,
        # The fill is the same at every revision; at the handshake one the in-memory twin's
        # handler errors keep their text, which the failure test checks.
        negotiate="legacy",
    )
    handle, start = open_connection(attrs.evolve(base, **settings), events.EventBus())
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        await handle.connect()
        yield handle
        await handle.aclose()


async def gather(n: int, fn: Callable[[], Any]) -> list[Any]:
    """Run ``fn`` ``n`` times concurrently; the results, or the exceptions, in order."""
    outcomes: list[Any] = [None] * n

    async def one(i: int) -> None:
        try:
            outcomes[i] = await fn()
        except Exception as exc:
            outcomes[i] = exc

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(one, i)
    return outcomes


async def test_concurrent_resource_misses_send_one_request(autojump_clock: trio.abc.Clock) -> None:
    """N concurrent list_resources on a cold cache send exactly one resources/list and share its answer."""
    gated = Gated()
    async with connected(gated) as handle:
        gated.gate = trio.Event()
        async with trio.open_nursery() as nursery:
            results: list[Any] = []

            async def waiter() -> None:
                results.append(await handle.list_resources())

            for _ in range(WAITERS):
                nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert gated.requests["list_resources"] == 1
            gated.gate.set()
        assert len(results) == WAITERS
        assert all(result == results[0] for result in results)
        assert [str(r.uri) for r in results[0]] == ["mem://one"]
        assert gated.requests["list_resources"] == 1


async def test_a_failed_listing_reaches_every_waiter_and_is_not_cached(autojump_clock: trio.abc.Clock) -> None:
    """Every waiter of a shared fetch gets its failure; the next demand asks the server again."""
    gated = Gated()
    async with connected(gated) as handle:
        gated.fail = True
        outcomes = await gather(WAITERS, handle.list_resources)
        assert all(isinstance(outcome, ServerRequestFailed) for outcome in outcomes), outcomes
        assert all("broken today" in str(outcome) for outcome in outcomes)
        assert gated.requests["list_resources"] == 1
        gated.fail = False
        assert [str(r.uri) for r in await handle.list_resources()] == ["mem://one"]
        assert gated.requests["list_resources"] == 2


async def test_a_cancelled_waiter_does_not_cancel_the_others_fetch(autojump_clock: trio.abc.Clock) -> None:
    """A waiter that gives up leaves the shared fetch running; the other waiter gets its answer."""
    gated = Gated()
    async with connected(gated) as handle:
        gated.gate = trio.Event()
        kept: list[Any] = []
        async with trio.open_nursery() as nursery:
            quitter = trio.CancelScope()

            async def gives_up() -> None:
                with quitter:
                    await handle.list_resources()

            async def keeps_waiting() -> None:
                kept.append(await handle.list_resources())

            nursery.start_soon(gives_up)
            nursery.start_soon(keeps_waiting)
            await trio.testing.wait_all_tasks_blocked()
            quitter.cancel()
            await trio.testing.wait_all_tasks_blocked()
            gated.gate.set()
        assert quitter.cancelled_caught
        assert [str(r.uri) for r in kept[0]] == ["mem://one"]
        assert gated.requests["list_resources"] == 1
        assert await handle.list_resources() == kept[0]  # the fetch the quitter left filled the cache
        assert gated.requests["list_resources"] == 1


async def test_a_shared_fetch_is_bounded_by_the_call_timeout(autojump_clock: trio.abc.Clock) -> None:
    """A listing the server never answers fails every waiter after the call timeout, not never."""
    gated = Gated()
    async with connected(gated, call_timeout=5.0) as handle:
        gated.gate = trio.Event()
        start = trio.current_time()
        outcomes = await gather(WAITERS, handle.list_resources)
        assert all(isinstance(outcome, ConnectionFailed) for outcome in outcomes), outcomes
        assert all("timed out after 5s" in str(outcome) for outcome in outcomes)
        assert trio.current_time() - start == pytest.approx(5.0, abs=0.5)
        assert gated.requests["list_resources"] == 1


async def test_concurrent_calls_on_a_fresh_connection_list_tools_once(autojump_clock: trio.abc.Clock) -> None:
    """N concurrent call_tool (task support looked up) on a fresh connection send one tools/list."""
    gated = Gated()
    async with connected(gated) as handle:
        gated.gate = trio.Event()
        async with trio.open_nursery() as nursery:
            texts: list[str] = []

            async def call(i: int) -> None:
                result = await handle.call_tool("echo", {"text": str(i)})
                texts.append(result.content[0].text)  # type: ignore[union-attr]

            for i in range(WAITERS):
                nursery.start_soon(call, i)
            await trio.testing.wait_all_tasks_blocked()
            assert gated.requests["list_tools"] == 1
            gated.gate.set()
        assert sorted(texts) == sorted(str(i) for i in range(WAITERS))
        assert gated.requests["list_tools"] == 1


async def test_list_tools_is_fetched_now_but_joins_a_fetch_under_way(autojump_clock: trio.abc.Clock) -> None:
    """list_tools asks the server each time; concurrent ones share one request."""
    gated = Gated()
    async with connected(gated) as handle:
        first = await gather(WAITERS, handle.list_tools)
        assert {tool.name for tool in first[0]} == {"echo"}
        assert gated.requests["list_tools"] == 1
        await handle.list_tools()
        assert gated.requests["list_tools"] == 2


async def test_concurrent_prompt_listings_send_one_request(autojump_clock: trio.abc.Clock) -> None:
    """N concurrent list_prompts share one prompts/list."""
    gated = Gated()
    async with connected(gated) as handle:
        gated.gate = trio.Event()
        async with trio.open_nursery() as nursery:
            names: list[set[str]] = []

            async def waiter() -> None:
                names.append({prompt.name for prompt in await handle.list_prompts()})

            for _ in range(WAITERS):
                nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            gated.gate.set()
        assert names == [{"greet"}] * WAITERS
        assert gated.requests["list_prompts"] == 1
