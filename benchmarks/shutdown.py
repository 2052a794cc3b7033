"""Benchmark 7, shutdown: time to close with 50 stdio servers running, and what is left.

The driver connects 50 light stdlib servers and lists their tools; the clock runs while
the client library's context exits (for mcp-actors: ``open_runtime``'s ``async with``).
Right after, it counts the servers that still run (must be 0) and the ones that exited
but were never reaped (zombies). Anything still alive is then killed by the harness, so a
leaking contender costs nothing to the next one.

    python -m benchmarks.shutdown [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks._common import Bench, Metric, run_main, toolserver
from benchmarks._peers import Contender

__all__ = ["main", "run"]

GOAL = "open_runtime exits fast with 50 stdio servers running, and leaves 0 processes"


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    count = 5 if bench.options.quick else 50
    bench.params = {"servers": count, "server": "light stdlib server"}
    remaining: dict[str, list[int]] = {}

    def job(_contender: Contender, _round: int) -> dict[str, Any]:
        return {"scenario": "shutdown", "servers": [toolserver()] * count}

    def seconds(result: dict[str, Any]) -> float:
        remaining.setdefault(result["contender"], []).append(int(result["remaining"]))
        return float(result["seconds"])

    na = {"langchain": "get_tools() keeps no server running between calls"}
    metric = bench.measure(
        Metric(key="seconds", title=f"close with {count} servers running", unit="s"),
        job,
        seconds,
        timeout=300,
        not_applicable=na,
    )
    left = Metric(key="remaining", title="server processes still running right after close", unit="processes")
    for key, counts in remaining.items():
        for n in counts:
            left.add_value(key, float(n))
    for key, entry in metric.results.items():
        if key not in remaining:
            left.mark(key, entry["status"], "; ".join(entry.get("errors", [])))
    left.finish()
    left.results = {k: left.results[k] for k in metric.results if k in left.results}
    for entry in left.results.values():
        entry.pop("ratio_to_raw", None)
        entry.pop("ours_vs", None)
    bench.metrics.append(left)
    bench.check_goal("mcp-actors processes left (max over rounds)", left.results.get("ours", {}).get("max"), 0)
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    run_main(__doc__, "shutdown", "7. Shutdown", GOAL, run, argv, default_rounds=3)


if __name__ == "__main__":
    main()
