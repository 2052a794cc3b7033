"""Where one call's time goes: cProfile of sequential echo calls, per contender, by layer.

Runs the contender's driver in this process (trio), profiles only the measured calls
(after the handshake and a warm-up), and prints the client's time grouped by layer
(ours, the SDK, pydantic, trio/anyio, json, ...) and the functions with the most own
time. The server runs in its own process and is not profiled. What this prints is the
basis of the "where the time goes" section of docs/performance.md. First, unprofiled, it
prints the wall and CPU time per call and the trio task steps per call, by task (how many
times a task is resumed per call: every hop between tasks costs a scheduler pass).

    python -m benchmarks.profile_call [--calls N] [--contenders ours,raw,floor] [--server stdlib|stdlib_http|everything]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from benchmarks._common import toolserver
from benchmarks._peers import DRIVERS_DIR
from benchmarks.hot_path import EVERYTHING

__all__ = ["LAYERS", "layer_of", "main", "profile"]

LAYERS: tuple[tuple[str, str], ...] = (
    ("/mcp_actors/_connection/live.py", "ours: LiveSession (_connection/live)"),
    ("/mcp_actors/_connection/", "ours: connection actor"),
    ("/mcp_actors/_registry/", "ours: registry"),
    ("/mcp_actors/service", "ours: service facade"),
    ("/mcp_actors/_wire/http/http11", "ours: HTTP/1.1 client (_wire/http/http11)"),
    ("/mcp_actors/_wire/http/wire", "ours: HTTP wire (_wire/http/wire)"),
    ("/mcp_actors/_wire/http/transport", "ours: HTTP transport (watch, auth)"),
    ("/mcp_actors/_wire/dispatch", "ours: dispatcher (_wire/dispatch)"),
    ("/mcp_actors/_wire/", "ours: transports"),
    ("/mcp_actors/events", "ours: events"),
    ("/mcp_actors/", "ours: other"),
    ("/mcp/client/stdio", "SDK: stdio transport"),
    ("/mcp/client/streamable_http", "SDK: http transport"),
    ("/mcp/shared/session", "SDK: BaseSession (request/response)"),
    ("/mcp/client/session", "SDK: ClientSession"),
    ("/mcp/client/", "SDK: client other"),
    ("/mcp/shared/", "SDK: shared other"),
    ("/mcp/", "SDK: other"),
    ("/mcp_types/", "SDK: mcp_types"),
    ("/pydantic_core/", "pydantic (validation/serialisation)"),
    ("/pydantic/", "pydantic (validation/serialisation)"),
    ("/anyio/streams/memory", "anyio memory streams"),
    ("/anyio/", "anyio other (cancel scopes, task groups)"),
    ("/trio/", "trio (scheduler, I/O, cancel scopes)"),
    ("/httpx", "httpx (HTTP client)"),
    ("/httpcore/", "httpcore + h11 (HTTP/1.1)"),
    ("/h11/", "httpcore + h11 (HTTP/1.1)"),
    ("/contextlib.py", "contextlib (context managers)"),
    ("/json/", "json (stdlib)"),
    ("/stress_floor.py", "floor client"),
    ("/drivers/", "benchmark driver"),
)
"""Path fragment → layer, first match wins."""


def layer_of(filename: str, function: str) -> str:
    """The layer a profiled function belongs to."""
    for fragment, layer in LAYERS:
        if fragment in filename:
            return layer
    if filename == "~":
        if "pydantic" in function or "validate" in function or "serializ" in function:
            return "pydantic (validation/serialisation)"
        return "builtins (C calls)"
    return "other python"


def _driver(key: str) -> Any:
    sys.path.insert(0, str(DRIVERS_DIR))
    if key == "ours":
        from ours import OursDriver  # type: ignore[import-not-found]

        return OursDriver()
    if key == "raw":
        from raw_sdk import RawDriver  # type: ignore[import-not-found]

        return RawDriver()
    if key == "floor":
        from floor import FloorDriver  # type: ignore[import-not-found]

        return FloorDriver()
    raise SystemExit(f"unknown contender {key!r}: ours, raw or floor")


class StepCounter(trio.abc.Instrument):
    """Counts trio task steps (one resumption of a task each) by task name while enabled."""

    def __init__(self) -> None:
        self.enabled = False
        self.steps: Counter[str] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.enabled:
            self.steps[task.name.rsplit(".", 1)[-1]] += 1


async def _measure(
    driver: Any, argv: Any, arguments: dict[str, Any], calls: int
) -> tuple[cProfile.Profile, float, float, float, Counter[str]]:
    """Unprofiled wall and CPU per call (task steps counted), then the same calls profiled."""
    driver.prepare([argv])
    profiler = cProfile.Profile()
    counter = StepCounter()
    trio.lowlevel.add_instrument(counter)
    async with driver.open([argv]) as session:
        await session.tool_names(0)
        for _ in range(100):
            await session.call(0, "echo", arguments)
        start, cpu = time.perf_counter(), time.process_time()
        counter.enabled = True
        for _ in range(calls):
            await session.call(0, "echo", arguments)
        counter.enabled = False
        wall, cpu = (time.perf_counter() - start) / calls, (time.process_time() - cpu) / calls
        trio.lowlevel.remove_instrument(counter)
        start = time.perf_counter()
        profiler.enable()
        for _ in range(calls):
            await session.call(0, "echo", arguments)
        profiler.disable()
        elapsed = time.perf_counter() - start
    return profiler, elapsed, wall, cpu, counter.steps


def profile(key: str, argv: Any, arguments: dict[str, Any], calls: int, top: int) -> None:
    """Profile ``calls`` sequential calls of contender ``key`` and print the breakdown."""
    profiler, elapsed, wall, cpu, steps = trio.run(_measure, _driver(key), argv, arguments, calls)
    print(
        f"\n=== {key}: unprofiled {wall * 1e6:.0f} us/call wall, {cpu * 1e6:.0f} us/call CPU; "
        f"{sum(steps.values()) / calls:.1f} trio task steps per call ==="
    )
    for name, count in steps.most_common():
        print(f"  {count / calls:5.2f}  {name}")
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    layers: dict[str, float] = defaultdict(float)
    for (filename, _line, function), entry in raw.items():
        layers[layer_of(filename, function)] += entry[2]
    print(
        f"\n=== {key}: {calls} sequential calls, {elapsed / calls * 1e6:.0f} us/call wall (profiled), "
        f"{total / calls * 1e6:.0f} us/call profiled own time ==="
    )
    print(f"{'layer':45} {'us/call':>8} {'share':>6}")
    for layer, seconds in sorted(layers.items(), key=lambda kv: -kv[1]):
        print(f"{layer:45} {seconds / calls * 1e6:8.1f} {seconds / total * 100:5.1f}%")
    print(f"\ntop {top} functions by own time (us/call, calls/call):")
    ranked = sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]
    for (filename, line, function), entry in ranked:
        short = "/".join(Path(filename).parts[-2:]) if filename != "~" else "~"
        print(f"  {entry[2] / calls * 1e6:7.1f}  {entry[1] / calls:6.1f}  {short}:{line} {function}")
    print(f"\ntop {top} functions by cumulative time (us/call):")
    ranked = sorted(raw.items(), key=lambda kv: -kv[1][3])[:top]
    for (filename, line, function), entry in ranked:
        short = "/".join(Path(filename).parts[-2:]) if filename != "~" else "~"
        print(f"  {entry[3] / calls * 1e6:7.1f}  {short}:{line} {function}")


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--contenders", default="ours,raw,floor")
    parser.add_argument("--server", choices=("stdlib", "stdlib_http", "everything"), default="stdlib")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    http: subprocess.Popen[bytes] | None = None
    server: Any
    if args.server == "everything":
        server, arguments = EVERYTHING, {"message": "hello"}
    elif args.server == "stdlib_http":
        http = subprocess.Popen([*toolserver(), "--http"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert http.stdout is not None
        server, arguments = http.stdout.readline().decode().strip(), {"text": "hello"}
    else:
        server, arguments = toolserver(), {"text": "hello"}
    with tempfile.TemporaryDirectory(prefix="mcp-actors-profile-") as state, contextlib.ExitStack() as stack:
        if http is not None:
            stack.callback(http.wait, 10)
            stack.callback(http.stdin.close)  # type: ignore[union-attr]
        os.environ["MCP_ACTORS_STATE_DIR"] = state
        os.environ["MCP_ACTORS_CONFIG"] = str(Path(state) / "mcp-config.json")
        for key in args.contenders.split(","):
            profile(key.strip(), server, arguments, args.calls, args.top)


if __name__ == "__main__":
    main()
