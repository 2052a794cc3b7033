"""``mcp-actors demo``: the library's main job, shown in a few seconds.

It runs the built-in demo server through the real supervision tree, against a
throw-away config in a temporary directory (so the user's config is never read or
written), and walks through what an agent runtime relies on:

1. start the server (lazily, on first use) and list its tools;
2. the same tools as OpenAI, Anthropic and Gemini definitions;
3. tool calls: a success, a structured result, a tool-level error, a timeout;
4. SIGKILL the server while a call is in flight: the call fails at once (it does not
   hang until its timeout), and the next call succeeds on a new process started by the
   automatic reconnect;
5. a summary of every step against what was expected.

Every wait is bounded; the runtime stops the server on the way out.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from mcp_actors.cli._support import CliError, ExitCode, error_line, print_json
from mcp_actors.errors import McpActorsError, ServerConnectionLost, ToolCallTimeout
from mcp_actors.naming import plural

if TYPE_CHECKING:
    import mcp.types as mcp_types

    from mcp_actors.service import McpService

__all__ = ["DemoStep", "run_demo"]

DEMO: Final = "demo"
_TIMEOUT_CALL: Final = 1.0
"""The timeout of the call that is meant to time out (the tool sleeps far longer)."""
_IN_FLIGHT_BOUND: Final = 10.0
_POLL: Final = 0.01
_FAIL_FAST_BOUND: Final = 10.0
_ERROR_STATE_BOUND: Final = 5.0


@attrs.frozen(kw_only=True)
class DemoStep:
    """One step of the demo and whether it behaved as expected.

    Attributes:
        name: Short name of the step.
        expected: What should happen.
        outcome: What happened.
        ok: Whether the outcome is the expected one.
        seconds: How long the step took.
    """

    name: str
    expected: str
    outcome: str
    ok: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The step as a JSON-ready dict."""
        return {
            "name": self.name,
            "expected": self.expected,
            "outcome": self.outcome,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
        }


@attrs.define(eq=False)
class _Show:
    """Human output of the demo (nothing at all in ``--json`` mode)."""

    console: Console
    enabled: bool

    def heading(self, text: str) -> None:
        if self.enabled:
            self.console.print()
            self.console.rule(Text(text, style="bold"), align="left")

    def line(self, *parts: str | tuple[str, str]) -> None:
        if self.enabled:
            self.console.print(Text.assemble(*parts))

    def json(self, data: Any) -> None:
        if self.enabled:
            self.console.print(JSON.from_data(data))


@attrs.define(eq=False)
class _Demo:
    service: McpService
    show: _Show
    steps: list[DemoStep] = attrs.field(factory=list)

    async def step(self, name: str, expected: str, run: Callable[[], Awaitable[tuple[str, bool]]]) -> bool:
        """Run one step; an unexpected failure is recorded, never raised."""
        start = time.perf_counter()
        try:
            outcome, ok = await run()
        except McpActorsError as exc:
            outcome, ok = f"{type(exc).__name__}: {exc}", False
        step = DemoStep(name=name, expected=expected, outcome=outcome, ok=ok, seconds=time.perf_counter() - start)
        self.steps.append(step)
        mark = ("✓ ", "green") if ok else ("✗ ", "red")
        self.show.line(mark, (f"{outcome}", "" if ok else "red"), (f"  ({step.seconds:.2f} s)", "dim"))
        return ok

    async def call(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> mcp_types.CallToolResult:
        return await self.service.call_tool(DEMO, tool, arguments, timeout=timeout)


def _text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(getattr(item, "text", f"[{getattr(item, 'type', '?')}]") for item in result.content)


def _find_definition(api: str, definitions: list[Any], tool_id: str) -> Any:
    """The definition of ``tool_id`` in one provider's tool list."""
    for item in definitions:
        if api == "openai" and item.get("function", {}).get("name") == tool_id:
            return item
        if api == "anthropic" and item.get("name") == tool_id:
            return item
        if api == "google":
            for declaration in item.get("functionDeclarations", ()):
                if declaration.get("name") == tool_id:
                    return {"functionDeclarations": [declaration]}
    return None


async def run_demo(out: Console, *, as_json: bool) -> ExitCode:
    """Run the demo; print it for people (or one JSON summary); return the exit status.

    Args:
        out: Where the walkthrough goes (stdout).
        as_json: Print only ``{"ok", "seconds", "steps": [...]}`` on stdout.

    Returns:
        ``OK`` when every step behaved as expected, else ``FAILED``.
    """
    from mcp_actors.runtime import open_runtime

    show = _Show(out, enabled=not as_json)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mcp-actors-demo-") as tmp:
        async with open_runtime(Path(tmp) / "mcp-config.json", connect_on_add=False) as runtime:
            demo = _Demo(service=runtime.service, show=show)
            await _walkthrough(demo)
    return _finish(demo, show, out, as_json, started)


async def _walkthrough(demo: _Demo) -> None:
    """Steps 1-4; each records its outcome in ``demo.steps``."""
    from mcp_actors.formats import setup_mcp_tools

    service = demo.service
    show = demo.show
    state: dict[str, Any] = {}

    # ------------------------------------------------------------- 1. start
    show.heading("1. Start the built-in demo server under the supervisor")
    show.line(("It starts lazily, on first use: this test connects and lists its tools.", "dim"))

    async def start() -> tuple[str, bool]:
        result = await service.test(DEMO)
        if result.error is not None:
            raise result.error
        state["pid"] = service.status(DEMO).pid
        state["tools"] = result.tool_names
        return (
            f"pid {state['pid']}: connected in {result.connect_seconds:.2f} s, "
            f"{plural(len(result.tool_names), 'tool')}: {', '.join(result.tool_names)}",
            True,
        )

    if not await demo.step("start", "the server starts and lists its tools", start):
        return  # nothing else can work without the server

    # ------------------------------------------------------------- 2. formats
    show.heading("2. The same tools for three LLM providers (setup_mcp_tools)")
    config = {"enabled": True, "mode": "manual", "selectedServers": [DEMO]}
    for label, api in (("OpenAI", "openai"), ("Anthropic", "anthropic"), ("Gemini", "google")):

        async def convert(api: str = api, label: str = label) -> tuple[str, bool]:
            setup = await setup_mcp_tools(service, config, api_format=api)
            if setup is None:
                return "no tools", False
            definitions, tools = setup
            example = _find_definition(api, definitions, "mcp__demo__add")
            show.line((f"{label}: the tool mcp__demo__add", "dim"))
            show.json(example)
            count = sum(len(d.get("functionDeclarations", ())) for d in definitions) or len(definitions)
            return f"{label}: {count} tool definitions", count == len(tools) and example is not None

        await demo.step(f"format {label}", f"{label} definitions of every tool", convert)

    # ------------------------------------------------------------- 3. calls
    show.heading("3. Calling tools")

    async def echo() -> tuple[str, bool]:
        text = _text(await demo.call("echo", {"text": "Hello from mcp-actors"}))
        return f"echo → {text!r}", text == "Hello from mcp-actors"

    async def add() -> tuple[str, bool]:
        result = await demo.call("add", {"a": 2, "b": 3})
        return f"add(2, 3) → {_text(result)} (structured: {result.structured_content})", not result.is_error

    async def fail() -> tuple[str, bool]:
        result = await demo.call("fail", {"message": "this tool fails on purpose"})
        return f"fail → isError={result.is_error}: {_text(result)!r} (a result, not an exception)", bool(
            result.is_error
        )

    async def timeout() -> tuple[str, bool]:
        try:
            await demo.call("sleep", {"seconds": 30}, timeout=_TIMEOUT_CALL)
        except ToolCallTimeout as exc:
            return f"sleep(30) with timeout={_TIMEOUT_CALL:g} s → {type(exc).__name__}: {exc}", True
        return "sleep(30) finished before its timeout", False

    await demo.step("call echo", "the text comes back", echo)
    await demo.step("call add", "the sum, as text and structured content", add)
    await demo.step("tool error", "an error result (isError: true), not an exception", fail)
    await demo.step("timeout", f"ToolCallTimeout after {_TIMEOUT_CALL:g} s; the server cancels the call", timeout)

    # ------------------------------------------------------------- 4. crash
    show.heading("4. Kill the server (SIGKILL) while a call is in flight")
    with service.subscribe() as events:

        async def crash() -> tuple[str, bool]:
            return await _kill_during_call(demo, state)

        await demo.step(
            "fail fast", "the in-flight call fails at once with ServerConnectionLost, not at its timeout", crash
        )
        # The actor notices the death and goes to `error`; the next call triggers the
        # restart. Waiting for that state keeps the demo's next call clearly "after".
        with trio.move_on_after(_ERROR_STATE_BOUND):
            async for event in events:
                if event.type == "connection:state" and event.data.get("state") == "error":
                    break

    async def reconnect() -> tuple[str, bool]:
        result = await demo.call("echo", {"text": "back again"})
        pid = service.status(DEMO).pid
        fresh = pid is not None and pid != state["pid"]
        return f"echo → {_text(result)!r} from a new process (pid {pid}, was {state['pid']})", fresh and (
            _text(result) == "back again"
        )

    await demo.step("reconnect", "the next call succeeds on a new process (automatic reconnect)", reconnect)


async def _kill_during_call(demo: _Demo, state: dict[str, Any]) -> tuple[str, bool]:
    service = demo.service
    outcome: dict[str, Any] = {}
    done = trio.Event()

    async def long_call() -> None:
        try:
            await demo.call("sleep", {"seconds": 30}, timeout=60)
        except McpActorsError as exc:
            outcome["error"] = exc
        outcome["at"] = time.perf_counter()
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(long_call)
        # Bounded wait until the call is on the wire. Nothing signals that moment (the
        # status is a snapshot), so poll it; without this the kill could beat the request.
        with trio.move_on_after(_IN_FLIGHT_BOUND):
            while service.status(DEMO).calls_in_flight < 1:  # noqa: ASYNC110
                await trio.sleep(_POLL)
        pid = state["pid"]
        demo.show.line(f"sleep(30) is running; kill -9 {pid}")
        killed_at = time.perf_counter()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            nursery.cancel_scope.cancel()
            return f"the demo server (pid {pid}) was already gone before the kill", False
        with trio.move_on_after(_FAIL_FAST_BOUND) as scope:
            await done.wait()
        if scope.cancelled_caught:
            nursery.cancel_scope.cancel()
            return f"the call was still waiting {_FAIL_FAST_BOUND:g} s after the kill", False
    error = outcome.get("error")
    after = outcome["at"] - killed_at
    if isinstance(error, ServerConnectionLost):
        return f"failed {after:.2f} s after the kill: {type(error).__name__}: {error}", True
    return f"the call ended {after:.2f} s after the kill with {error!r}", False


def _finish(demo: _Demo, show: _Show, out: Console, as_json: bool, started: float) -> ExitCode:
    total = time.perf_counter() - started
    ok = all(step.ok for step in demo.steps)
    if as_json:
        print_json({"ok": ok, "seconds": round(total, 3), "steps": [s.to_json() for s in demo.steps]})
    else:
        show.heading("Summary")
        table = Table()
        for column in ("", "STEP", "EXPECTED", "SECONDS"):
            table.add_column(column, overflow="fold")
        for step in demo.steps:
            table.add_row(
                Text("✓", style="green") if step.ok else Text("✗", style="red"),
                step.name,
                step.expected,
                f"{step.seconds:.2f}",
            )
        out.print(table)
        passed = sum(step.ok for step in demo.steps)
        out.print(
            Text(
                f"{passed} of {len(demo.steps)} steps behaved as expected in {total:.1f} s; "
                "the demo server has been stopped.",
                style="bold green" if ok else "bold red",
            )
        )
    if not ok:
        failed = next(step for step in demo.steps if not step.ok)
        message = f"demo step {failed.name!r} did not behave as expected: {failed.outcome}"
        print(error_line(CliError(message)), file=sys.stderr)
    return ExitCode.OK if ok else ExitCode.FAILED
