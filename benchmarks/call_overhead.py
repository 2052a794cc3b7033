"""Benchmark 1, call overhead: sequential ``call_tool`` latency on one stdio server.

One demo server (the SDK's ``MCPServer``), its ``echo`` tool, one call at a time after a
warm-up. Each round reports the median latency of its calls; the table gives the median
over rounds. Goal: mcp-actors within 5 % of the raw ``mcp.Client``.

    python -m benchmarks.call_overhead [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks._common import Bench, Metric, demo_server, run_main, toolserver
from benchmarks._peers import Contender

__all__ = ["main", "run"]

GOAL = "mcp-actors within 5% of the raw mcp.Client"


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    quick = bench.options.quick
    calls, warmup = (50, 5) if quick else (1000, 50)
    # langchain's default tools open a new session (a new server process) per call.
    slow = {"langchain": (5, 1)}
    # Quick mode proves the path works; the light server spares CI two SDK imports.
    server = toolserver() if quick else demo_server()
    name = "light stdlib server (quick mode)" if quick else "demo server (python -m mcp_actors.demo_server)"
    bench.params = {"server": name, "tool": "echo", "calls": calls}

    def job(contender: Contender, _round: int) -> dict[str, Any]:
        n, w = slow.get(contender.key, (calls, warmup))
        return {"scenario": "sequential", "servers": [server], "calls": n, "warmup": w}

    def median_us(result: dict[str, Any]) -> float:
        return float(statistics.median(result["latencies"])) * 1e6

    metric = bench.measure(Metric(key="latency_us", title="echo call latency", unit="us"), job, median_us, timeout=600)
    for key, (n, _w) in slow.items():
        if key in metric.results and metric.results[key].get("values"):
            metric.results[key]["note"] = f"{n} calls (each starts a server)"
    bench.check_goal("mcp-actors latency / raw", metric.results.get("ours", {}).get("ratio_to_raw"), 1.05)
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    run_main(__doc__, "call_overhead", "1. Call overhead", GOAL, run, argv, default_rounds=3)


if __name__ == "__main__":
    main()
