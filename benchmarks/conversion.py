"""Benchmark 5, provider conversion of large tool sets: inline vs ``trio_parallel`` workers.

What it decides: ``mcp_actors.formats.INLINE_CONVERSION_LIMIT``, the number of uncached
tools from which :func:`~mcp_actors.formats.convert_tools_async` hands the conversion to
worker processes instead of doing it on the event loop.

How: N tools (N = 100, 1000, 5000, 20000; quick mode 100 and 1000) are made by cycling the
real-server schema corpus in ``tests/data/tool_schemas`` (every copy its own id, so
nothing is cached), and converted to the Gemini profile (the heaviest: refs inlined)
with a cold cache, four ways:

* ``blocking``: one synchronous call, the loop stalls for all of it (for reference);
* ``inline``: the product's inline path, a checkpoint every 2 ms of work;
* ``workers cold``: the product's worker path (the host and ``cpu_count - 1`` workers
  share the batch) in a fresh worker context, as for the first large batch of a process;
* ``workers warm``: the same, with a worker already started (every later batch).

Meanwhile a trio task wakes every 1 ms and records the longest gap between two of its
wake-ups: the event loop's longest stall, what every other task of the host waits at
worst. Each cell is the median of ``rounds`` runs (3; quick mode 1).

    python -m benchmarks.conversion [--quick] [--json PATH]

Result on the 2-core machine of the project (full run, shared with other test runs at
a load average of 8-11, so single cells are noisy; the constant's docstring in
``mcp_actors/formats/_convert.py`` quotes it):

    tools  mode           total s  max stall ms
      100  blocking         0.135        141
      100  inline           0.193         45
      100  workers cold     0.630        138
      100  workers warm     0.254         90
     1000  blocking         0.236        237
     1000  inline           0.193          7
     1000  workers cold     0.597         29
     1000  workers warm     2.630        164
     5000  blocking         4.210       4225
     5000  inline           9.331        263
     5000  workers cold     1.939        101
     5000  workers warm     1.298         31
    20000  blocking         4.204       4208
    20000  inline           4.164        200
    20000  workers cold    11.007        592
    20000  workers warm     6.840        212

Reading: blocking stalls the loop for the whole batch; the inline path (a checkpoint
every 2 ms of work) keeps it responsive at any size, its worst stalls being garbage
collections and the load. Workers share the batch with the host (the host never waits
for them to start), so they only change the total: they lose while a batch is shorter
than their start-up and win on large batches when the machine has spare CPU. The rule
(the smallest N where cold workers are no slower than inline) picked 5000 in this run,
which is the value of ``INLINE_CONVERSION_LIMIT``. Re-run on an idle machine to refine.
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
import trio_parallel  # type: ignore[import-untyped]  # ships no py.typed

from benchmarks._common import RESULTS_DIR, machine_info, write_json
from mcp_actors.formats import INLINE_CONVERSION_LIMIT
from mcp_actors.formats import _convert as convert_module
from mcp_actors.tools import MCPTool

__all__ = ["main", "run"]

CORPUS: Final = Path(__file__).resolve().parent.parent / "tests" / "data" / "tool_schemas"
PROFILE: Final = convert_module._Profile("gemini")
MODES: Final = ("blocking", "inline", "workers cold", "workers warm")
TICK: Final = 0.001


def corpus_tools(count: int) -> list[MCPTool]:
    """``count`` tools cycled from the corpus, each with its own id (no cache hits)."""
    base = []
    for path in sorted(CORPUS.glob("*.json")):
        data = json.loads(path.read_text())
        for tool in data["tools"]:
            base.append((tool["name"], tool.get("description", ""), tool["inputSchema"], data["server"]))
    tools = []
    for i in range(count):
        name, description, schema, server = base[i % len(base)]
        tools.append(
            MCPTool(
                id=f"t{i}",
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


async def _measure(mode: str, tools: list[MCPTool]) -> tuple[float, float]:
    """One run: (total seconds, longest loop stall in seconds)."""
    convert_module._caches.clear()
    gaps: list[float] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(_ticker, stop, gaps)
        await trio.sleep(5 * TICK)
        gaps.clear()
        start = time.perf_counter()
        if mode == "blocking":
            convert_module._convert_batch(PROFILE, tools)
            await trio.lowlevel.checkpoint()
        elif mode == "inline":
            await convert_module._convert_missing(PROFILE, tools, use_workers=False)
        else:
            await convert_module._convert_missing(PROFILE, tools, use_workers=True)
        total = time.perf_counter() - start
        await trio.sleep(3 * TICK)  # let the ticker see the end of the stall
        stop.set()
    return total, max(gaps, default=0.0)


async def _run_mode(mode: str, tools: list[MCPTool], rounds: int) -> dict[str, float]:
    totals, stalls = [], []
    for _ in range(rounds):
        if mode.startswith("workers"):
            async with trio_parallel.cache_scope():
                if mode == "workers warm":
                    # a worker started and idle, as after earlier use (converters imported)
                    await trio_parallel.run_sync(convert_module._convert_pickled, PROFILE, [])
                total, stall = await _measure(mode, tools)
        else:
            total, stall = await _measure(mode, tools)
        totals.append(total)
        stalls.append(stall)
    return {"total_s": statistics.median(totals), "max_stall_ms": statistics.median(stalls) * 1e3}


def _choose_limit(rows: list[dict[str, Any]]) -> int | None:
    """The smallest N where cold workers are no slower than the inline path in total."""
    by_n: dict[int, dict[str, float]] = {}
    for row in rows:
        by_n.setdefault(row["tools"], {})[row["mode"]] = row["total_s"]
    for n in sorted(by_n):
        cells = by_n[n]
        if "workers cold" in cells and "inline" in cells and cells["workers cold"] <= cells["inline"]:
            return n
    return None


async def _run_all(sizes: Sequence[int], rounds: int, modes: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        tools = corpus_tools(n)
        for mode in modes:
            cell = await _run_mode(mode, tools, rounds)
            rows.append({"tools": n, "mode": mode, **cell})
            print(f"{n:>6}  {mode:<13} {cell['total_s']:>8.3f} {cell['max_stall_ms']:>12.1f}", flush=True)
    return rows


def run(*, quick: bool) -> dict[str, Any]:
    """Measure and print the table; return the JSON document."""
    sizes = (100, 1000) if quick else (100, 1000, 5000, 20000)
    rounds = 1 if quick else 3
    modes = ("blocking", "inline", "workers cold") if quick else MODES
    print(f"conversion ({PROFILE.provider} profile, cold cache, {rounds} round(s), median)")
    print(f"{'tools':>6}  {'mode':<13} {'total s':>8} {'max stall ms':>12}")
    rows = trio.run(_run_all, sizes, rounds, modes)
    chosen = _choose_limit(rows)
    print(
        f"workers are no slower than inline from {chosen if chosen is not None else 'no measured'} tools on; "
        f"INLINE_CONVERSION_LIMIT is {INLINE_CONVERSION_LIMIT}"
    )
    metrics = []
    for row in rows:
        slug = row["mode"].replace(" ", "_")
        for key, unit, title in (("total_s", "s", "total"), ("max_stall_ms", "ms", "longest loop stall")):
            metrics.append(
                {
                    "key": f"{slug}_{row['tools']}_{key}",
                    "title": f"{title}, {row['mode']}, {row['tools']} tools",
                    "unit": unit,
                    "better": "lower",
                    "results": {"ours": {"median": row[key]}},
                }
            )
    return {
        "benchmark": "conversion",
        "quick": quick,
        "machine": machine_info(),
        "params": {"sizes": list(sizes), "rounds": rounds, "profile": PROFILE.provider, "tick_ms": TICK * 1e3},
        "rows": rows,
        "workers_win_from": chosen,
        "inline_conversion_limit": INLINE_CONVERSION_LIMIT,
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
