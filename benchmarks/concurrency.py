"""Benchmark 2, concurrency: echo calls per second with many calls in flight.

Two shapes, both on the demo server: one server with 1,000 calls, 100 in flight; and ten
servers with 100 in flight on each (500 calls each). The clock runs from the first call to
the last answer, after every server is connected and one warm-up wave has run. Goal: at
least the raw ``mcp.Client``'s throughput, and ahead of every peer.

    python -m benchmarks.concurrency [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks._common import Bench, Metric, demo_server, run_main, toolserver
from benchmarks._peers import Contender

__all__ = ["main", "run"]

GOAL = "at least the raw mcp.Client's calls/s; ahead of every peer"
LANGCHAIN_NOTE = "a new session (a new server process) per call"


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    quick = bench.options.quick
    server = toolserver() if quick else demo_server()
    shapes = (
        [("one_server", "1 server, 100 calls, 20 in flight", 1, 100, 20)]
        if quick
        else [
            ("one_server", "1 server, 1,000 calls, 100 in flight", 1, 1000, 100),
            ("ten_servers", "10 servers x 300 calls, 100 in flight each", 10, 300, 100),
        ]
    )
    bench.params = {
        "server": "light stdlib server (quick mode)" if quick else "demo server",
        "shapes": [{"servers": s, "calls_per_server": c, "in_flight": f} for _k, _t, s, c, f in shapes],
    }
    ours_vs_best_peer: list[float] = []
    for key, title, servers, calls, in_flight in shapes:

        def job(
            contender: Contender, _round: int, servers: int = servers, calls: int = calls, f: int = in_flight
        ) -> Any:
            if contender.key == "langchain":
                calls, f = 20, 10
            return {
                "scenario": "concurrent",
                "servers": [server] * servers,
                "calls_per_server": calls,
                "in_flight": f,
            }

        def value(result: dict[str, Any]) -> float:
            if result["failures"]:
                raise ValueError(f"{result['failures']} calls failed, e.g. {result['failure_sample']}")
            return float(result["calls_per_s"])

        metric = bench.measure(
            Metric(key=key, title=title, unit="calls/s", better="higher"),
            job,
            value,
            timeout=900,
            not_applicable={"langchain": LANGCHAIN_NOTE + ": 10 x 100 in flight would start 1,000 servers"}
            if servers > 1
            else None,
        )
        if metric.results.get("langchain", {}).get("values"):
            metric.results["langchain"]["note"] = f"20 calls, 10 in flight ({LANGCHAIN_NOTE})"
        ours = metric.results.get("ours", {})
        bench.check_goal(f"{title}: mcp-actors / raw", ours.get("ratio_to_raw"), 1.0, at_most=False)
        peers = [e["median"] for k, e in metric.results.items() if k not in ("ours", "raw") and "median" in e]
        if peers and "median" in ours:
            ours_vs_best_peer.append(ours["median"] / max(peers))
            bench.check_goal(f"{title}: mcp-actors / best other", ours_vs_best_peer[-1], 1.0, at_most=False)
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    run_main(__doc__, "concurrency", "2. Concurrency", GOAL, run, argv, default_rounds=3)


if __name__ == "__main__":
    main()
