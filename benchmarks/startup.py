"""Benchmark 3, start-up: time until N stdio servers are connected and their tools listed.

The clock starts before the client library does anything (for mcp-actors: before
``open_runtime``, with the servers already in its config file) and stops when every
server's tool list is in hand. Measured for one demo server (the baseline: its start is
dominated by importing the MCP SDK) and for twenty; and for twenty light stdlib servers,
whose start costs almost nothing, so that the client's own orchestration shows. Goal:
twenty servers close to the slowest single one, not their sum. On two cores twenty demo
servers cannot start in the time of one: their imports alone need twenty times the CPU.

    python -m benchmarks.startup [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks._common import Bench, Metric, demo_server, run_main, toolserver
from benchmarks._peers import Contender

__all__ = ["main", "run"]

GOAL = "20 servers close to the slowest single server, not the sum of 20"


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    quick = bench.options.quick
    many = 2 if quick else 20
    shapes = (
        [("light_many", f"{many} light servers", toolserver(), many)]
        if quick
        else [
            ("demo_one", "1 demo server (baseline)", demo_server(), 1),
            ("demo_many", f"{many} demo servers", demo_server(), many),
            ("light_one", "1 light server", toolserver(), 1),
            ("light_many", f"{many} light servers", toolserver(), many),
        ]
    )
    bench.params = {"servers": many}
    medians: dict[str, dict[str, float]] = {}
    for key, title, server, count in shapes:

        def job(_contender: Contender, _round: int, server: list[str] = server, count: int = count) -> Any:
            return {"scenario": "startup", "servers": [server] * count}

        metric = bench.measure(Metric(key=key, title=title, unit="s"), job, lambda r: float(r["seconds"]), timeout=600)
        medians[key] = {k: e["median"] for k, e in metric.results.items() if "median" in e}
    for kind in ("demo", "light"):
        one, more = medians.get(f"{kind}_one", {}), medians.get(f"{kind}_many", {})
        if "ours" in one and "ours" in more:
            ratio = more["ours"] / one["ours"]
            bench.notes.append(
                f"{kind}: mcp-actors takes {ratio:.1f}x its single-server time for {many} servers "
                f"(the sum would be {many}x)"
            )
            for key, e in bench.metrics[[m.key for m in bench.metrics].index(f"{kind}_many")].results.items():
                if key in one and "median" in e:
                    e["note"] = f"{e['median'] / one[key]:.1f}x its 1-server time"
    light_one = medians.get("light_one", {}).get("ours")
    light_many = medians.get("light_many", {}).get("ours")
    if light_one and light_many:
        bench.check_goal(f"{many} light servers / 1 (mcp-actors; the sum would be {many})", light_many / light_one, 2.0)
    bench.notes.append(
        "demo servers are CPU-bound on start (each imports the MCP SDK), so on 2 cores twenty of them need "
        "about ten times one server's time whatever the client does; the light servers show the client's part"
    )
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    run_main(__doc__, "startup", "3. Start-up", GOAL, run, argv, default_rounds=2)


if __name__ == "__main__":
    main()
