"""Benchmark 6, memory: resident memory of the host per idle connection.

The driver process measures its own RSS (``/proc/self/statm``) after its imports, then
connects N light stdlib servers, lists their tools, lets them idle for half a second,
collects garbage and measures again: (after - before) / N. The servers' own processes
are never counted. N = 1, 50 and 200. At N = 1 the number also carries one-off costs
(lazily imported modules, first buffers), so read the 50 and 200 rows for the per-server
cost.

    python -m benchmarks.memory [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks._common import Bench, Metric, run_main, toolserver
from benchmarks._peers import Contender

__all__ = ["main", "run"]

GOAL = "report the host's RSS per idle connection actor (servers excluded) at 1, 50 and 200 servers"


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    sizes = (3,) if bench.options.quick else (1, 50, 200)
    bench.params = {"servers": sizes, "server": "light stdlib server"}
    for size in sizes:

        def job(_contender: Contender, _round: int, size: int = size) -> dict[str, Any]:
            return {"scenario": "memory", "servers": [toolserver()] * size}

        bench.measure(
            Metric(key=f"servers_{size}", title=f"RSS per idle connection, {size} server(s)", unit="KiB"),
            job,
            lambda r: float(r["per_server_bytes"]) / 1024,
            timeout=300,
            not_applicable={"langchain": "get_tools() keeps no connection open (a new session per call)"},
        )
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    run_main(__doc__, "memory", "6. Memory", GOAL, run, argv, default_rounds=2)


if __name__ == "__main__":
    main()
