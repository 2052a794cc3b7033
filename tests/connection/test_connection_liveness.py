"""Liveness: when a server that does not answer a ping is dead, and when it is only busy.

A server that blocks its whole loop in a tool (a synchronous loop in Node, ``time.sleep``
in Python) reads nothing and writes nothing until the tool returns: a ping sent meanwhile
waits in its input. That server is alive; one that froze for good looks the same from
outside until the calls it owes run out of time. The rule (``_ConnectionActor._ping``): a
ping unanswered within ``ping_timeout`` is a death unless a request that was already in
flight when the ping was sent is still within its own timeout; and a request that times
out has the server pinged at once.

Here on the in-memory transport and trio's virtual clock, with a server whose loop can be
stopped (:class:`BlockingLoopServer`); the same against real processes (a blocking stdio
server, a SIGSTOPped one) is in tests/connection/test_connection_liveness_processes.py.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import attrs
import pytest
import trio
import trio.testing
from mcp.server.mcpserver import MCPServer
from testkit import drain, running, state_is, text_of, wait_event

from mcp_actors import events
from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.errors import ConnectionFailed, ServerConnectionLost, ToolCallTimeout
from supervisors import Backoff

FAST_BACKOFF = Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0)


@attrs.define(eq=False)
class _Gate:
    """Whether the server's loop runs: closed, nothing is read from or written to its streams."""

    thaw_at: float = -math.inf

    def close_for(self, seconds: float) -> None:
        self.thaw_at = max(self.thaw_at, trio.current_time() + seconds)

    async def wait_open(self) -> None:
        await trio.sleep_until(self.thaw_at)
        if trio.current_time() < self.thaw_at:  # closed for longer meanwhile
            await self.wait_open()


@attrs.define(eq=False)
class BlockingLoopServer:
    """A factory of in-memory servers whose whole loop stops, as a server blocked in synchronous code stops.

    Tools: ``echo``; ``block(seconds)``, which stops the loop for ``seconds`` and then
    answers (a busy, live server); ``freeze``, which stops it for good (a hung one). While
    the loop is stopped the server reads nothing (requests, pings and cancellations wait
    in its input, in order) and writes nothing. :meth:`freeze` stops the running instance
    from outside, with no call in flight.

    Attributes:
        starts: How many instances were built (every connection and restart builds one).
    """

    starts: int = 0
    _gate: _Gate | None = attrs.field(default=None, init=False)

    def __call__(self) -> MCPServer[Any]:
        gate = self._gate = _Gate()
        self.starts += 1
        server: MCPServer[Any] = MCPServer("blocking-loop", version="1.0.0", log_level="WARNING")

        @server.tool(description="Return the text.", structured_output=False)
        async def echo(text: str) -> str:
            return text

        @server.tool(description="Stop the whole loop for the given seconds, then answer.", structured_output=False)
        async def block(seconds: float) -> str:
            gate.close_for(seconds)
            await trio.sleep(seconds)
            return f"blocked {seconds:g} s"

        @server.tool(description="Stop the whole loop for good.", structured_output=False)
        async def freeze() -> str:
            gate.close_for(math.inf)
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        lowlevel = server._lowlevel_server
        serve = lowlevel.run

        async def run_gated(read_stream: Any, write_stream: Any, *args: Any, **kwargs: Any) -> None:
            inner_send, inner_read = anyio.create_memory_object_stream[Any](100)
            inner_write, outer_read = anyio.create_memory_object_stream[Any](100)

            async def pump_in() -> None:
                async with inner_send:
                    async for message in read_stream:
                        await gate.wait_open()
                        await inner_send.send(message)

            async def pump_out() -> None:
                async for message in outer_read:
                    await gate.wait_open()
                    await write_stream.send(message)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump_in)
                nursery.start_soon(pump_out)
                await serve(inner_read, inner_write, *args, **kwargs)
                nursery.cancel_scope.cancel()

        lowlevel.run = run_gated  # type: ignore[method-assign]
        return server

    def freeze(self) -> None:
        """Stop the running instance's loop for good."""
        assert self._gate is not None, "connect first"
        self._gate.close_for(math.inf)


def liveness_settings(server: BlockingLoopServer, **overrides: object) -> ConnectionSettings:
    """The defaults that matter here: pings every 30 s bounded by 10 s, calls bounded by 120 s."""
    base = ConnectionSettings(
        server_id="id-srv",
        server_name="srv",
        transport=MemoryParams(server=server),
        connect_timeout=20.0,
        call_timeout=120.0,
        ping_interval=30.0,
        ping_timeout=10.0,
        backoff=FAST_BACKOFF,
    )
    return attrs.evolve(base, **overrides)


def errors_of(sub: events.Subscription) -> list[str]:
    return [e.data["error"] for e in drain(sub) if e.type == events.CONNECTION_STATE and e.data["state"] == "error"]


async def test_a_busy_server_is_not_declared_dead_by_missed_pings(autojump_clock: trio.abc.Clock) -> None:
    """A tool that blocks the server's loop for 45 s (call timeout 120 s) answers at 45 s; no death, no restart.

    The pings at 30 s (and after) go unanswered while the loop is blocked, but the call in
    flight before them is within its timeout: the server is busy, not dead.
    """
    server = BlockingLoopServer()
    async with running(liveness_settings(server)) as ([handle], sub):
        await handle.connect()
        start = trio.current_time()
        result = await handle.call_tool("block", {"seconds": 45})
        assert text_of(result) == "blocked 45 s"
        assert trio.current_time() - start == pytest.approx(45, abs=1)
        assert handle.status().state is ConnectionState.CONNECTED
        assert errors_of(sub) == []
        # It keeps answering pings (and calls) afterwards, on the same connection.
        await trio.sleep(100)
        assert text_of(await handle.call_tool("echo", {"text": "after"})) == "after"
        assert (server.starts, handle.status().restarts, errors_of(sub)) == (1, 0, [])


async def test_a_hung_server_with_nothing_in_flight_is_declared_dead_at_the_ping_bound(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A server that stops answering with no request in flight dies at the next ping plus the ping timeout."""
    server = BlockingLoopServer()
    async with running(liveness_settings(server)) as ([handle], sub):
        await handle.connect()
        start = trio.current_time()
        server.freeze()
        event = await wait_event(sub, state_is("error"), timeout=60)
        assert trio.current_time() - start == pytest.approx(40, abs=1)
        assert "did not answer a ping within 10s" in event.data["error"]
        await wait_event(sub, state_is("connected"))  # restarted by its slot
        assert server.starts == 2


async def test_a_hung_server_with_a_call_in_flight_dies_once_the_call_times_out(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A frozen server owing a call is excused only until that call's timeout; then it dies within the ping timeout."""
    server = BlockingLoopServer()
    async with running(liveness_settings(server)) as ([handle], sub):
        await handle.connect()
        start = trio.current_time()
        with pytest.raises(ToolCallTimeout):
            await handle.call_tool("freeze", {})
        assert trio.current_time() - start == pytest.approx(120, abs=1)
        event = await wait_event(sub, state_is("error"), timeout=60)
        assert 120 < trio.current_time() - start <= 130 + 1
        assert "did not answer a ping within 10s" in event.data["error"]


async def test_a_call_timeout_has_the_server_pinged_at_once(autojump_clock: trio.abc.Clock) -> None:
    """A call that times out on a frozen server: the state is error within the ping timeout, not at the next ping.

    Before, the server stayed ``connected`` until the periodic ping 30 s after connecting
    (plus its 10 s), and the next caller was sent to it meanwhile.
    """
    server = BlockingLoopServer()
    async with running(liveness_settings(server)) as ([handle], sub):
        await handle.connect()
        start = trio.current_time()
        with pytest.raises(ToolCallTimeout):
            await handle.call_tool("freeze", {}, timeout=5)
        timed_out = trio.current_time()
        assert timed_out - start == pytest.approx(5, abs=0.5)
        event = await wait_event(sub, state_is("error"), timeout=60)
        assert trio.current_time() - timed_out <= 10 + 0.5  # the ping bound, well before the ping at 30 s
        assert "did not answer a ping within 10s" in event.data["error"]
        await wait_event(sub, state_is("connected"))  # restarted: the next caller gets a live server
        assert text_of(await handle.call_tool("echo", {"text": "next"})) == "next"
        assert server.starts == 2


async def test_a_call_timeout_on_a_live_server_leaves_it_connected(autojump_clock: trio.abc.Clock) -> None:
    """The probe after a timeout is answered by a server that is only slow: it stays connected."""
    server = BlockingLoopServer()
    async with running(liveness_settings(server)) as ([handle], sub):
        await handle.connect()
        with pytest.raises(ToolCallTimeout):
            await handle.call_tool("block", {"seconds": 6}, timeout=5)
        await trio.sleep(30)
        assert handle.status().state is ConnectionState.CONNECTED
        assert (server.starts, errors_of(sub)) == (1, [])


async def test_health_on_a_busy_server_fails_without_declaring_it_dead(autojump_clock: trio.abc.Clock) -> None:
    """health() unanswered while a call is in flight within its timeout: an error for health, the call lives."""
    server = BlockingLoopServer()
    async with running(liveness_settings(server, ping_interval=0)) as ([handle], sub):
        await handle.connect()
        async with trio.open_nursery() as nursery:
            results: list[Any] = []

            async def call() -> None:
                results.append(await handle.call_tool("block", {"seconds": 45}))

            nursery.start_soon(call)
            await trio.sleep(1)
            with pytest.raises(ConnectionFailed, match="busy") as info:
                await handle.health(timeout=10)
            assert not isinstance(info.value, ServerConnectionLost)
            assert handle.status().state is ConnectionState.CONNECTED
        assert text_of(results[0]) == "blocked 45 s"
        assert (server.starts, errors_of(sub)) == (1, [])
        # Nothing in flight: an unanswered health ping is a death, as before.
        server.freeze()
        with pytest.raises(ServerConnectionLost, match="did not answer a ping"):
            await handle.health(timeout=10)
