"""In-memory twins of the demo and fault servers, for behaviour tests on trio's virtual clock.

Why: a registry, connection or adapter test that checks behaviour (caching, coalescing,
timeouts, a crash mid-call, restarts) does not need a process. Spawning one costs a
Python start-up and an SDK import (about a second on a loaded 2-core machine) and ties
the test to the wall clock; over :class:`~mcp_actors._wire.transports.MemoryParams` the same
test runs in milliseconds, and on ``autojump_clock`` an hour-long call takes no time.

* :func:`memory_demo_server` — the demo server with every tool run inline (the SDK runs
  a synchronous tool on a worker thread, and a thread is real time that virtual time
  would jump past).
* :func:`memory_fault_server` — the fault server's tools (``echo``, ``add``, ``sleep``,
  ``big``, ``fail``, answered as the stdio fault server answers them) and the faults that
  need no process: ``--exit-at-start``, ``--slow-start``, ``--crash-on-call`` (with
  ``--crash-exit-code``), ``--hang-on-call`` and ``--hang-tool``. A crash is the server
  task ending with ``SystemExit``, which the link reports as "exited with code N".
* :func:`records_in_memory` — while the block runs, every stdio record whose command is
  the demo or fault server (as :func:`~mcp_actors.testing.demo_server_command` and
  :func:`~mcp_actors.testing.fault_server_command` build it) is served in memory; any
  other record keeps its own transport.

Stderr, spawn, kill and orphan behaviour need the real servers: this module has no stderr.
This module imports the SDK's server side; :mod:`mcp_actors.testing` does not import it.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Final

import attrs
import mcp.types as types
import trio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._config.variables import PYTHON_PLACEHOLDER
from mcp_actors._sdk import lowlevel_server, registered_tools
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.demo_server import create_demo_server
from mcp_actors.testing._fault_plan import HANG_LIMIT, FaultPlan, parse_fault_args

__all__ = [
    "UNSUPPORTED_FAULTS",
    "InMemoryServers",
    "KillableServer",
    "memory_demo_server",
    "memory_fault_server",
    "memory_params_for_argv",
    "records_in_memory",
]

_DEMO_MODULE: Final = "mcp_actors.demo_server"
_FAULT_MODULE: Final = "mcp_actors.testing.fault_server"
_SLEEP_STEPS: Final = 10
_MAX_SLEEP_SECONDS: Final = 3600.0
_MAX_BIG_BYTES: Final = 64 * 1024 * 1024
_BIG_PATTERN: Final = "0123456789abcdefghijklmnopqrstuvwxyz\n"

UNSUPPORTED_FAULTS: Final = (
    "garbage_stdout",
    "flood_stderr",
    "close_stdout",
    "spawn_grandchild",
    "huge_output",
    "no_ping",
    "untyped_tool",
    "flood_notifications",
    "http_error_on_call",
)
"""Fault-plan fields only a process (or HTTP) can act out; a plan that sets one stays a process."""


def _inline(fn: Callable[..., Any]) -> Callable[..., Any]:
    async def run_inline(**kwargs: Any) -> Any:
        return fn(**kwargs)

    return run_inline


def _run_tools_inline(server: MCPServer[Any]) -> None:
    """Make every synchronous tool of ``server`` run on the event loop instead of a thread."""
    for tool in registered_tools(server):
        if not tool.is_async:
            tool.fn = _inline(tool.fn)
            tool.is_async = True


def memory_demo_server() -> MCPServer[Any]:
    """A fresh demo server whose tools all run inline (usable on virtual time).

    Same tools, descriptions, schemas, prompt and resource as the stdio demo server; its
    ``stderr`` tool writes to this process's stderr. ``toggle_extra_tool`` adds a tool that
    runs on a worker thread (call it on the real clock only).
    """
    server = create_demo_server()
    _run_tools_inline(server)
    return server


def _format_number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def _text_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def memory_fault_server(plan: FaultPlan | None = None) -> MCPServer[Any]:
    """A fresh in-memory server with the fault server's tools and the process-free faults of ``plan``.

    Args:
        plan: The faults (default: none, a well-behaved server).

    Raises:
        ValueError: ``plan`` asks for a fault only a process can act out (see
            :data:`UNSUPPORTED_FAULTS`); the message names it.
    """
    plan = plan or FaultPlan()
    unsupported = [name for name in UNSUPPORTED_FAULTS if getattr(plan, name) != getattr(FaultPlan(), name)]
    if unsupported:
        raise ValueError(f"faults {unsupported} need a real process; run the stdio fault server instead")
    # Its tool list is fresh for 300 s (2026-07-28 ttlMs): what its stdio twin, which speaks the
    # handshake revisions only and so gives no word, gets from the registry's default TTL.
    server: MCPServer[Any] = MCPServer(
        "mcp-actors-fault",
        version="0.1.0",
        log_level="WARNING",
        cache_hints={"tools/list": CacheHint(ttl_ms=300_000, scope="public")},
    )
    calls = 0

    async def before_call(name: str) -> None:
        nonlocal calls
        calls += 1
        if plan.crash_on_call == calls:
            raise SystemExit(plan.crash_exit_code)
        if plan.hang_on_call == calls or name in plan.hang_tools:
            await trio.sleep(HANG_LIMIT)

    @server.tool(description="Return the given text unchanged.", structured_output=False)
    async def echo(text: Annotated[str, Field(description="The text to send back.")]) -> str:
        await before_call("echo")
        return text

    @server.tool(description="Add two numbers and return their sum.", structured_output=False)
    async def add(
        a: Annotated[float, Field(description="The first addend.")],
        b: Annotated[float, Field(description="The second addend.")],
    ) -> str:
        await before_call("add")
        return _format_number(a + b)

    @server.tool(
        description=(
            "Sleep for the given number of seconds in ten equal steps, reporting progress after each step, then return."
        ),
        structured_output=False,
    )
    async def sleep(
        seconds: Annotated[float, Field(ge=0, le=_MAX_SLEEP_SECONDS, description="How long to sleep, in seconds.")],
        ctx: Context,
    ) -> str:
        await before_call("sleep")
        step = seconds / _SLEEP_STEPS
        for done in range(1, _SLEEP_STEPS + 1):
            await trio.sleep(step)
            await ctx.report_progress(done * step, seconds, f"slept {done * step:g} of {seconds:g} s")
        return f"slept {seconds:g} s"

    @server.tool(
        description="Return a text of exactly n bytes (ASCII), to test large results.", structured_output=False
    )
    async def big(
        n: Annotated[int, Field(ge=0, le=_MAX_BIG_BYTES, description="The size of the text in bytes.")],
    ) -> str:
        await before_call("big")
        return (_BIG_PATTERN * (n // len(_BIG_PATTERN) + 1))[:n]

    @server.tool(description="Fail on purpose: return a tool error result (isError: true).")
    async def fail(message: Annotated[str, Field(description="The error text.")]) -> types.CallToolResult:
        await before_call("fail")
        return _text_error(message)

    if plan.exit_at_start is not None or plan.slow_start > 0:
        lowlevel = lowlevel_server(server)
        serve = lowlevel.run

        async def run_after_start_faults(*args: Any, **kwargs: Any) -> None:
            # What the process does before reading stdin: exit at once, or be slow to serve.
            if plan.exit_at_start is not None:
                raise SystemExit(plan.exit_at_start)
            await trio.sleep(plan.slow_start)
            await serve(*args, **kwargs)

        lowlevel.run = run_after_start_faults  # type: ignore[method-assign]
    return server


@attrs.define(eq=False)
class KillableServer:
    """A factory of in-memory servers whose running instance a test can kill, as ``os.kill`` kills a process.

    Give it as ``MemoryParams(server=KillableServer(memory_fault_server))``: every
    connection (and reconnect) builds a fresh instance; :meth:`kill` ends the running one
    with ``SystemExit(code)``, so its link dies with "exited with code N" while calls are
    in flight, the way a killed process's link dies.

    Attributes:
        build: Makes one server (``memory_demo_server``, ``memory_fault_server``, ...).
        starts: How many instances were built so far.
    """

    build: Callable[[], MCPServer[Any]]
    starts: int = 0
    _kill: trio.Event | None = attrs.field(default=None, init=False)
    _code: int = attrs.field(default=0, init=False)

    def __call__(self) -> MCPServer[Any]:
        """Build the next instance (the transport calls this at every connection)."""
        server = self.build()
        self.starts += 1
        killed = trio.Event()
        self._kill = killed
        lowlevel = lowlevel_server(server)
        serve = lowlevel.run

        async def run_until_killed(*args: Any, **kwargs: Any) -> None:
            async def die_when_killed() -> None:
                await killed.wait()
                raise SystemExit(self._code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(die_when_killed)
                await serve(*args, **kwargs)
                nursery.cancel_scope.cancel()

        lowlevel.run = run_until_killed  # type: ignore[method-assign]
        return server

    def kill(self, code: int = 137) -> None:
        """End the running instance with exit code ``code`` (137: what a shell reports for SIGKILL).

        Raises:
            RuntimeError: No instance was built yet.
        """
        if self._kill is None:
            raise RuntimeError("no server instance to kill; connect first")
        self._code = code
        self._kill.set()


def _module_and_flags(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    # This interpreter, spelled out or as the symbolic command the built-in demo record keeps.
    if len(argv) < 3 or argv[0] not in (sys.executable, PYTHON_PLACEHOLDER) or argv[1] != "-m":
        return None
    return argv[2], list(argv[3:])


def memory_params_for_argv(argv: Sequence[str]) -> MemoryParams | None:
    """The in-memory twin of a demo or fault server command, or None when it has none.

    ``argv`` is a full command line (``[sys.executable, "-m", module, *flags]``). The demo
    server has a twin only without flags (its flags pick HTTP transports); the fault
    server has one when every flag is a fault this module acts out.
    """
    parsed = _module_and_flags(argv)
    if parsed is None:
        return None
    module, flags = parsed
    if module == _DEMO_MODULE and not flags:
        return MemoryParams(server=memory_demo_server)
    if module == _FAULT_MODULE:
        try:
            plan = parse_fault_args(flags)
        except SystemExit:
            return None
        if plan.transport != "stdio" or any(
            getattr(plan, name) != getattr(FaultPlan(), name) for name in UNSUPPORTED_FAULTS
        ):
            return None
        return MemoryParams(server=lambda: memory_fault_server(plan))
    return None


@attrs.define(eq=False)
class InMemoryServers:
    """What :func:`records_in_memory` routed, for tests to check (it is their "process list").

    Attributes:
        names: The records served in memory (their connection settings were built).
        starts: Per server name, how many server instances were started (every connection
            and every reconnect starts a fresh one, as a new process would be).
        running: Per server name, how many instances are running now (the in-memory
            counterpart of "its process is alive").
    """

    names: set[str] = attrs.field(factory=set)
    starts: collections.Counter[str] = attrs.field(factory=collections.Counter)
    running: collections.Counter[str] = attrs.field(factory=collections.Counter)


@contextlib.contextmanager
def records_in_memory() -> Iterator[InMemoryServers]:
    """Serve demo and fault server stdio records in memory while the block runs.

    A record with its own ``env`` or ``cwd`` keeps its real process (those are what it tests).

    Yields:
        An :class:`InMemoryServers` counting the server instances started per name.
    """
    servers = InMemoryServers()
    # One params object per (name, command line): the registry compares a record's settings
    # with a live slot's to decide whether the config changed, as equal StdioParams compare.
    made: dict[tuple[str, tuple[str, ...]], MemoryParams] = {}

    def from_record(record: McpServerRecord) -> TransportParams:
        stdio = StdioParams.from_record(record)
        argv = (stdio.command, *stdio.args)
        if (record.name, argv) in made:
            return made[record.name, argv]
        twin = memory_params_for_argv(argv) if not stdio.env and stdio.cwd is None else None
        if twin is None:
            return stdio
        servers.names.add(record.name)
        build = twin.server

        def start() -> Any:
            server = build()
            servers.starts[record.name] += 1
            lowlevel = lowlevel_server(server)
            serve = lowlevel.run

            async def run_counted(*args: Any, **kwargs: Any) -> None:
                servers.running[record.name] += 1
                try:
                    await serve(*args, **kwargs)
                finally:
                    servers.running[record.name] -= 1

            lowlevel.run = run_counted  # type: ignore[method-assign]
            return server

        made[record.name, argv] = MemoryParams(server=start)
        return made[record.name, argv]

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        yield servers
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)
