"""Benchmark 4, tool setup per LLM request: ``setup_mcp_tools`` with everything cached.

Twenty light stdlib servers with fifty real tool definitions each (1,000 tools taken from
the schema corpus of public MCP servers in ``tests/data/tool_schemas``). After one warm
call per provider format, each call finds the tool lists in the registry's cache and the
conversions in the formats' cache: what an agent pays before every request to its LLM.
mcp-actors only (the peers have no equivalent). Goal: under 5 ms.

    python -m benchmarks.tool_setup [--quick] [--json PATH] [--rounds N]

Measured on the project's 2-core machine at load average 5-8 (3 rounds, median ms),
before and after the formats' per-server conversion cache:

    format      before   after
    openai       3.03     2.21
    anthropic    2.82     2.90
    gemini       1.98     3.39

At that load the driver's medians are dominated by noise; the same session measured
in-process (registry listing, then setup_mcp_tools, 200 calls each, median) shows the
change: setup_mcp_tools 1.8-2.5 ms before, 0.8-1.3 ms after, of which the registry's
cached listing is 0.3 ms and the conversion 0.4-0.9 ms (was 1.4-1.6 ms).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks._common import Bench, Metric, run_main, toolserver
from benchmarks._peers import Contender

__all__ = ["main", "run"]

GOAL = "setup_mcp_tools under 5 ms for 20 servers x 50 tools, cached, in every provider format"
FORMATS = ("openai", "anthropic", "gemini")


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    quick = bench.options.quick
    servers, tools, reps = (2, 50, 20) if quick else (20, 50, 200)
    bench.params = {"servers": servers, "tools_per_server": tools, "calls_per_round": reps, "formats": FORMATS}
    results: list[dict[str, Any]] = []

    def job(_contender: Contender, _round: int) -> dict[str, Any]:
        return {"scenario": "tool_setup", "servers": [toolserver(tools)] * servers, "formats": FORMATS, "reps": reps}

    def remember(result: dict[str, Any]) -> float:
        results.append(result)
        return float(result["cold_seconds"]) * 1e3

    bench.measure(
        Metric(key="cold_ms", title="first call (connect + list + convert)", unit="ms"), job, remember, timeout=600
    )
    # The warm numbers come from the same driver runs, one metric per format.
    for fmt in FORMATS:
        metric = Metric(key=f"{fmt}_ms", title=f"cached setup_mcp_tools, {fmt}", unit="ms")
        for result in results:
            metric.add_value("ours", result[fmt]["median"] * 1e3, {"max_ms": result[fmt]["max"] * 1e3})
        metric.finish()
        bench.metrics.append(metric)
        bench.check_goal(f"{fmt}: median ms", metric.results.get("ours", {}).get("median"), 5.0)
    if results:
        bench.notes.append(f"{results[0]['tools']} tools per request")
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    run_main(__doc__, "tool_setup", "4. Tool setup per LLM request", GOAL, run, argv, default_rounds=3, only=("ours",))


if __name__ == "__main__":
    main()
