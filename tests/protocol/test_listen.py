"""The 2026-07-28 subscriptions/listen stream on virtual time: bounded backoff on loss, one stream per connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing

from mcp_actors import events
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.listen import LISTEN_ACK_BOUND
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._demo.features import COUNTER_URI
from mcp_actors._sdk import lowlevel_server
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.demo_server import create_demo_server
from mcp_actors.errors import ServerProtocolError


@asynccontextmanager
async def modern(bus: events.EventBus) -> AsyncIterator[ConnectionHandle]:
    """The demo server in memory, connected at 2026-07-28 (the default negotiation)."""
    settings = ConnectionSettings(
        server_id="id-listen", server_name="listen", transport=MemoryParams(server=create_demo_server), ping_interval=0
    )
    handle, start = open_connection(settings, bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            await handle.connect()
            yield handle
        finally:
            await handle.aclose()


async def until(sub: events.Subscription, kind: events.EventType) -> float:
    """The virtual time at which the next event of ``kind`` arrives."""
    async for event in sub:
        if event.type == kind:
            return trio.current_time()
    raise AssertionError("event bus closed")


async def test_lost_stream_reopens_after_a_doubling_backoff(autojump_clock: trio.abc.Clock) -> None:
    """Each loss re-listens after 0.4-0.5 s, then 0.8-1 s (jittered doubling); subscriptions survive every re-open."""
    bus = events.EventBus()
    sub = bus.subscribe()
    async with modern(bus) as handle:
        live = handle._cell.live
        assert live is not None and live.session.protocol_version == "2026-07-28"
        await handle.subscribe_resource(COUNTER_URI)
        listener = handle._cell.listener
        assert listener is not None and listener.uris == (COUNTER_URI,)
        opened = listener.opened
        start = trio.current_time()
        await handle.call_tool("end_subscriptions")
        first = await until(sub, events.RESOURCE_UPDATED) - start
        assert 0.4 <= first <= 0.5 + 0.01
        start = trio.current_time()
        await handle.call_tool("end_subscriptions")
        second = await until(sub, events.RESOURCE_UPDATED) - start
        assert 0.8 <= second <= 1.0 + 0.01
        assert listener.opened == opened + 2
        # Still one stream carrying the URI: an update arrives once.
        await handle.call_tool("bump_counter")
        await until(sub, events.RESOURCE_UPDATED)
        assert handle.status().tools_epoch >= 3  # connect + two re-opens invalidated the tool cache


async def test_subscription_set_changes_relisten_once_per_change(autojump_clock: trio.abc.Clock) -> None:
    """Subscribing and unsubscribing re-listen with the new filter (acknowledged before returning), once per change."""
    bus = events.EventBus()
    async with modern(bus) as handle:
        listener = handle._cell.listener
        assert listener is not None
        await handle.subscribe_resource(COUNTER_URI)
        base = listener.opened
        await handle.subscribe_resource(COUNTER_URI)  # already in the set: no new stream
        assert listener.opened == base
        await handle.subscribe_resource("demo://readme")
        assert listener.uris == (COUNTER_URI, "demo://readme") and listener.opened == base + 1
        await handle.unsubscribe_resource(COUNTER_URI)
        await handle.unsubscribe_resource(COUNTER_URI)  # not in the set: nothing to do
        assert listener.uris == ("demo://readme",) and listener.opened == base + 2


async def test_subscribe_on_a_server_without_listen_is_a_typed_error(autojump_clock: trio.abc.Clock) -> None:
    """A 2026-07-28 server that refuses subscriptions/listen makes subscribe_resource a ServerProtocolError."""
    from mcp.server.mcpserver import MCPServer

    def no_listen() -> MCPServer[object]:
        server: MCPServer[object] = MCPServer("quiet", subscriptions=False)

        @server.resource("mem://one", name="one")
        async def one() -> str:  # async: a sync one runs in a thread, which the autojump clock would skip past
            return "1"

        return server

    settings = ConnectionSettings(
        server_id="id-quiet", server_name="quiet", transport=MemoryParams(server=no_listen), ping_interval=0
    )
    handle, start = open_connection(settings, events.EventBus())
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            await handle.connect()
            try:
                await handle.subscribe_resource("mem://one")
            except ServerProtocolError as exc:
                assert "'quiet'" in str(exc) and "subscriptions/listen" in str(exc)
            else:
                raise AssertionError("subscribe_resource succeeded on a server without subscriptions/listen")
            assert (await handle.read_resource("mem://one")).contents[0].text == "1"  # type: ignore[union-attr]
        finally:
            await handle.aclose()


async def test_an_update_while_relistening_reaches_the_host(autojump_clock: trio.abc.Clock) -> None:
    """An update sent while a new filter awaits its ack arrives on the old stream, kept open until that ack."""
    gate, entered, arm = trio.Event(), trio.Event(), {"on": False}

    def slow_ack() -> object:
        """The demo server, whose next subscriptions/listen waits for the gate before it acknowledges."""
        server = create_demo_server()
        lowlevel = lowlevel_server(server)
        entry = lowlevel.get_request_handler("subscriptions/listen")
        assert entry is not None

        async def listen(ctx: object, params: object) -> object:
            if arm["on"]:
                arm["on"] = False
                entered.set()
                await gate.wait()
            return await entry.handler(ctx, params)  # type: ignore[arg-type]

        lowlevel.add_request_handler("subscriptions/listen", entry.params_type, listen)
        return server

    bus = events.EventBus()
    sub = bus.subscribe()
    settings = ConnectionSettings(
        server_id="id-gap", server_name="gap", transport=MemoryParams(server=slow_ack), ping_interval=0
    )
    handle, start = open_connection(settings, bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            await handle.subscribe_resource(COUNTER_URI)  # a stream in place, carrying the counter
            arm["on"] = True
            subscribed = trio.Event()

            async def subscribe_more() -> None:
                await handle.subscribe_resource("demo://readme")
                subscribed.set()

            nursery.start_soon(subscribe_more)
            await entered.wait()  # the new filter is asked for, not yet acknowledged: the window
            seen: list[tuple[events.EventType, object]] = []

            async def collect() -> None:
                async for event in sub:
                    seen.append((event.type, event.data.get("uri")))

            nursery.start_soon(collect)
            await handle.call_tool("bump_counter")  # resources/updated of the counter, now: only a listen stream has it
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
            with trio.fail_after(LISTEN_ACK_BOUND):
                await subscribed.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert (events.RESOURCE_UPDATED, COUNTER_URI) in seen
            listener = handle._cell.listener
            assert listener is not None and listener.uris == (COUNTER_URI, "demo://readme")
        finally:
            await handle.aclose()
            nursery.cancel_scope.cancel()
