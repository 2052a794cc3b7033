"""Benchmark 5, provider conversion: large uncached sets, and the cached per-request setup.

Part 1, large sets. N tools (N = 100, 1000, 5000, 20000; quick mode 100 and 1000) are
made by cycling the real-server schema corpus in ``tests/data/tool_schemas`` (every copy
its own id, 50 per server, so nothing is cached), and converted to the Gemini profile
(the heaviest: refs inlined) with cold caches, two ways:

* ``blocking``: the synchronous converter, the loop stalls for all of it (reference);
* ``inline``: :func:`~mcp_actors.formats.convert_tools_async`, the product's path: on the
  calling task, a checkpoint every 2 ms of work.

Meanwhile a trio task wakes every 1 ms and records the longest gap between two of its
wake-ups: the event loop's longest stall, what every other task of the host waits at
worst. Each cell is the median of ``rounds`` runs (3; quick mode 1).

Part 2, cached setup. :func:`~mcp_actors.formats.setup_mcp_tools` over an in-memory
source of 20 servers x 50 corpus tools that hands out the same tool objects every time
(as the registry does while nothing changed): the formats' share of the per-request
cost, per provider format; the median of 200 calls after one warm call, and the cold
first call. (``benchmarks.tool_setup`` measures the same through a real registry.)

    python -m benchmarks.conversion [--quick] [--json PATH]

Results on the project's 2-core machine, shared with other test runs (load average 5-6,
so single cells are noisy). Part 1, after this change:

    tools  mode      total s  max stall ms
      100  blocking    0.029          26
      100  inline      0.024           8
     1000  blocking    0.267         268
     1000  inline      0.216          12
     5000  blocking    1.523        1524
     5000  inline      1.396          44
    20000  blocking    5.522        5522
    20000  inline      7.955         235

The inline path's longest stalls at 20,000 tools are the garbage collector's full
collections of the large heap (with ``gc`` disabled the same run stalls at most 22 ms);
planning and assembling the answer are sliced like the conversion itself.

Part 2, the formats' share of a cached ``setup_mcp_tools`` (median ms):

    format      before (per-tool value cache)   after (per-server cache)
    openai             1.5                           0.65-0.78
    anthropic          1.2-2.3                       0.37-0.40
    gemini             1.2-1.4                       0.42-0.46

Worker processes (``trio_parallel``) used to share large batches; they were measured
slower than the inline path (20,000 tools: inline 3.3-4.1 s, workers 5.0-5.5 s), their
longest stall was no better, and spawning them re-ran host scripts that lack a
``__main__`` guard, so the conversion is inline only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import trio

from benchmarks._common import RESULTS_DIR, machine_info, write_json
from mcp_actors.formats import _convert as convert_module
from mcp_actors.formats import convert_tools_async, convert_tools_with_report, setup_mcp_tools
from mcp_actors.tools import McpTool

__all__ = ["main", "run"]

CORPUS: Final = Path(__file__).resolve().parent.parent / "tests" / "data" / "tool_schemas"
MODES: Final = ("blocking", "inline")
FORMATS: Final = ("openai", "anthropic", "gemini")
TICK: Final = 0.001
PER_SERVER: Final = 50


def corpus_tools(count: int, *, prefix: str = "t") -> list[McpTool]:
    """``count`` tools cycled from the corpus, each with its own id, 50 per server."""
    base = []
    for path in sorted(CORPUS.glob("*.json")):
        data = json.loads(path.read_text())
        for tool in data["tools"]:
            base.append((tool["name"], tool.get("description", ""), tool["inputSchema"]))
    tools = []
    for i in range(count):
        name, description, schema = base[i % len(base)]
        server = f"{prefix}s{i // PER_SERVER}"
        tools.append(
            McpTool(
                id=f"{prefix}{i}",
                name=name,
                description=description,
                input_schema=schema,
                server_id=server,
                server_name=server,
            )
        )
    return tools


async def _ticker(stop: trio.Event, gaps: list[float], task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    last = time.perf_counter()
    task_status.started()
    while not stop.is_set():
        await trio.sleep(TICK)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def _measure(mode: str, tools: list[McpTool]) -> tuple[float, float]:
    """One run: (total seconds, longest loop stall in seconds)."""
    convert_module._clear_caches()
    gaps: list[float] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(_ticker, stop, gaps)
        await trio.sleep(5 * TICK)
        gaps.clear()
        start = time.perf_counter()
        if mode == "blocking":
            convert_tools_with_report(tools, "gemini")
            await trio.lowlevel.checkpoint()
        else:
            await convert_tools_async(tools, "gemini")
        total = time.perf_counter() - start
        await trio.sleep(3 * TICK)  # let the ticker see the end of the stall
        stop.set()
    return total, max(gaps, default=0.0)


async def _run_mode(mode: str, tools: list[McpTool], rounds: int) -> dict[str, float]:
    totals, stalls = [], []
    for _ in range(rounds):
        total, stall = await _measure(mode, tools)
        totals.append(total)
        stalls.append(stall)
    return {"total_s": statistics.median(totals), "max_stall_ms": statistics.median(stalls) * 1e3}


class _Source:
    """The loader's protocol over fixed lists, handing out the same objects (as the registry does)."""

    def __init__(self, tools: list[McpTool]) -> None:
        self.tools = tools

    async def list_all_active_server_tools(self) -> list[McpTool]:
        return list(self.tools)

    async def list_server_tools(self, server_id_or_name: str) -> list[McpTool]:
        return [tool for tool in self.tools if server_id_or_name in (tool.server_id, tool.server_name)]


async def _run_setup(reps: int) -> list[dict[str, Any]]:
    """Cached setup_mcp_tools, 20 servers x 50 tools, per format: cold first call and warm median."""
    convert_module._clear_caches()
    source = _Source(corpus_tools(20 * PER_SERVER, prefix="setup"))
    config = {"enabled": True}
    rows = []
    for fmt in FORMATS:
        start = time.perf_counter()
        await setup_mcp_tools(source, config, fmt)
        cold = time.perf_counter() - start
        latencies = []
        for _ in range(reps):
            start = time.perf_counter()
            await setup_mcp_tools(source, config, fmt)
            latencies.append(time.perf_counter() - start)
        row = {
            "format": fmt,
            "cold_ms": cold * 1e3,
            "median_ms": statistics.median(latencies) * 1e3,
            "max_ms": max(latencies) * 1e3,
        }
        rows.append(row)
        print(
            f"{fmt:<10} {row['cold_ms']:>8.1f} {row['median_ms']:>10.3f} {row['max_ms']:>8.2f}",
            flush=True,
        )
    return rows


async def _run_all(sizes: Sequence[int], rounds: int, reps: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    print(f"large sets (gemini profile, cold caches, {rounds} round(s), median)")
    print(f"{'tools':>6}  {'mode':<9} {'total s':>8} {'max stall ms':>12}")
    rows = []
    for n in sizes:
        tools = corpus_tools(n)
        for mode in MODES:
            cell = await _run_mode(mode, tools, rounds)
            rows.append({"tools": n, "mode": mode, **cell})
            print(f"{n:>6}  {mode:<9} {cell['total_s']:>8.3f} {cell['max_stall_ms']:>12.1f}", flush=True)
    print(f"cached setup_mcp_tools, 20 servers x {PER_SERVER} tools, median of {reps}")
    print(f"{'format':<10} {'cold ms':>8} {'median ms':>10} {'max ms':>8}")
    setup = await _run_setup(reps)
    return rows, setup


def run(*, quick: bool) -> dict[str, Any]:
    """Measure and print the tables; return the JSON document."""
    sizes = (100, 1000) if quick else (100, 1000, 5000, 20000)
    rounds = 1 if quick else 3
    reps = 20 if quick else 200
    rows, setup = trio.run(_run_all, sizes, rounds, reps)
    metrics = []
    for row in rows:
        for key, unit, title in (("total_s", "s", "total"), ("max_stall_ms", "ms", "longest loop stall")):
            metrics.append(
                {
                    "key": f"{row['mode']}_{row['tools']}_{key}",
                    "title": f"{title}, {row['mode']}, {row['tools']} tools",
                    "unit": unit,
                    "better": "lower",
                    "results": {"ours": {"median": row[key]}},
                }
            )
    for row in setup:
        metrics.append(
            {
                "key": f"setup_{row['format']}_ms",
                "title": f"cached setup_mcp_tools (formats share), {row['format']}, 20 x {PER_SERVER} tools",
                "unit": "ms",
                "better": "lower",
                "results": {"ours": {"median": row["median_ms"], "max": row["max_ms"]}},
            }
        )
    return {
        "benchmark": "conversion",
        "quick": quick,
        "machine": machine_info(),
        "params": {"sizes": list(sizes), "rounds": rounds, "profile": "gemini", "tick_ms": TICK * 1e3, "reps": reps},
        "rows": rows,
        "setup": setup,
        "metrics": metrics,
        "status": "ok",
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: 100 and 1000 tools, one round")
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="write the result as JSON here")
    args = parser.parse_args(argv)
    document = run(quick=args.quick)
    path = args.json_path or RESULTS_DIR / f"conversion-{'quick' if args.quick else 'full'}.json"
    write_json(path, document)
    print(f"JSON: {path}")


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    main()
