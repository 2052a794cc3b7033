"""The fault-injection suite's test bed: a runtime, a healthy sibling, the four checks.

Every scenario runs on the real runtime (``open_runtime`` with a fresh config file), adds
the faulty server as a record, and keeps a fault server with no fault as a healthy sibling.
Each scenario checks the four guarantees:

1. the runtime keeps serving the other servers (the sibling answers during and after);
2. every call ends — a result or a typed :mod:`mcp_actors.errors` error — within its
   bound (:meth:`FaultBed.settle` wraps each call in ``trio.fail_after``);
3. no process is left behind (the suite-wide autouse fixture) and no trio task either
   (``no_leaked_tasks``, required by the ``bed`` fixture of ``conftest.py``);
4. no config record is lost: the file holds every record after the fault, and again
   after the runtime has closed.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio
from testkit import text_of

from mcp_actors import events
from mcp_actors._config.record import McpServerRecord
from mcp_actors._config.store import ConfigStore
from mcp_actors.errors import McpActorsError
from mcp_actors.runtime import Runtime
from mcp_actors.service import McpService
from mcp_actors.testing import HttpServerHandle, fault_server_command, serve_http

T = TypeVar("T")

SIBLING = "sibling"
"""The healthy sibling: the fault server with no fault, a stdio process of its own beside the faulty one.

Not the built-in demo server: that one imports the MCP SDK on start (about 1.3 s of CPU), the
fault server only the standard library, trio and attrs (about 0.2 s), and every scenario
starts a sibling."""

SIBLING_BOUND = 60.0
"""Seconds the sibling may take to answer: its first start (its connectTimeout is 30 s)
included, on a machine that may be busy."""

FAULT_CONFIG: Mapping[str, Any] = {"connectTimeout": 5.0, "callTimeout": 5.0, "pingInterval": 0}
"""Short bounds for the faulty servers, so that every scenario stays fast."""

CALL_BOUND = 45.0
"""The bound of one call to a faulty server: its connect timeout (5 s) and call timeout (5 s),
plus the longest restart backoff a queued call may sit out (30 s + 20 % jitter). Calls
normally end far sooner; this is the promise, not the expectation."""


@attrs.define(eq=False)
class FaultBed:
    """A running runtime with a healthy sibling, and the checks every scenario ends with.

    Attributes:
        runtime: The runtime under test.
        config_path: Its config file.
        expected: Every record that must survive, by id (name as the value).
    """

    runtime: Runtime
    config_path: Path
    expected: dict[str, str] = attrs.field(factory=dict)

    @property
    def service(self) -> McpService:
        """The McpService facade of the runtime."""
        return self.runtime.service

    async def add(self, entry: Mapping[str, Any]) -> McpServerRecord:
        """Add a server record; it must survive the scenario."""
        record = await self.service.add(entry)
        self.expected[record.id] = record.name
        return record

    async def add_stdio(self, name: str, *flags: str, **config: Any) -> McpServerRecord:
        """Add the fault server over stdio with ``flags`` and the short fault bounds."""
        argv = fault_server_command(*flags)
        return await self.add(
            {
                "name": name,
                "type": "stdio",
                "config": {"command": argv[0], "args": argv[1:], **FAULT_CONFIG, **config},
            }
        )

    async def add_http(self, name: str, url: str, **config: Any) -> McpServerRecord:
        """Add a streamable HTTP server at ``url`` with the short fault bounds."""
        return await self.add({"name": name, "type": "http", "config": {"url": url, **FAULT_CONFIG, **config}})

    async def wait_stderr(self, server: str, text: str, *, count: int = 1, bound: float = 20.0) -> set[str]:
        """Wait (bounded) until a stdio server wrote ``count`` distinct stderr lines containing ``text``."""
        seen: set[str] = set()

        def enough(line: str) -> bool:
            if text in line:
                seen.add(line)
            return len(seen) >= count

        with trio.fail_after(bound):
            await self.service.wait_for_stderr(server, enough)
        return seen

    async def settle(
        self, fn: Callable[..., Awaitable[T]], *args: Any, bound: float, **kwargs: Any
    ) -> T | McpActorsError:
        """Run one call; return its result or its typed error. Anything else fails the test.

        Raises:
            trio.TooSlowError: The call did not end within ``bound`` seconds.
        """
        with trio.fail_after(bound):
            try:
                return await fn(*args, **kwargs)
            except McpActorsError as exc:
                return exc

    async def sibling_serves(self, tag: str = "alive") -> None:
        """The healthy sibling answers a call, within its bound."""
        with trio.fail_after(SIBLING_BOUND):
            result = await self.service.call_tool(SIBLING, "echo", {"text": tag})
        assert text_of(result) == tag and not result.is_error

    def records_on_disk(self) -> dict[str, str]:
        """The records the config file holds now, ``{id: name}``."""
        return {r.id: r.name for r in ConfigStore(self.config_path).load()}

    async def assert_records_kept(self) -> None:
        """The config file and the registry still hold every expected record."""
        assert self.records_on_disk().items() >= self.expected.items()
        assert {r.id: r.name for r in await self.service.list()}.items() >= self.expected.items()

    async def survived(self) -> None:
        """The end of every scenario: the sibling serves and no record was lost."""
        await self.sibling_serves("survived")
        await self.assert_records_kept()


@attrs.define(eq=False)
class Faulty:
    """A faulty server in the bed, over stdio or streamable HTTP."""

    name: str
    bed: FaultBed
    http: HttpServerHandle | None = None

    async def wait_line(self, text: str, *, bound: float = 20.0) -> str:
        """Wait (bounded) for a stderr line of the server containing ``text``."""
        if self.http is None:
            return min(await self.bed.wait_stderr(self.name, text, bound=bound))
        with trio.fail_after(bound):
            return await self.http.wait_stderr_line(text)

    async def call(self, tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
        """One call to the server: its result or its typed error, within :data:`CALL_BOUND`."""
        return await self.bed.settle(self.bed.service.call_tool, self.name, tool, arguments, bound=CALL_BOUND, **kwargs)


@asynccontextmanager
async def faulty(bed: FaultBed, transport: str, name: str, *flags: str, **config: Any) -> AsyncIterator[Faulty]:
    """Add the fault server with ``flags`` as a record, over ``stdio`` or streamable ``http``.

    An HTTP fault server runs on a free port of 127.0.0.1 for the block; the runtime lets
    go of it before it stops.
    """
    if transport == "stdio":
        await bed.add_stdio(name, *flags, **config)
        yield Faulty(name=name, bed=bed)
        return
    argv = fault_server_command("--transport", "streamable-http", *flags)
    async with serve_http(argv) as server:
        await bed.add_http(name, server.url, **config)
        yield Faulty(name=name, bed=bed, http=server)
        await bed.settle(bed.service.disconnect, name, bound=CALL_BOUND)


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port just bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


async def wait_state(sub: events.Subscription, server: str, state: str, *, bound: float = CALL_BOUND) -> events.Event:
    """The next ``connection:state`` event of ``server`` reaching ``state`` (bounded)."""
    with trio.fail_after(bound):
        async for event in sub:
            data = event.data
            if event.type == events.CONNECTION_STATE and data["serverName"] == server and data["state"] == state:
                return event
    raise AssertionError("the event stream ended")
