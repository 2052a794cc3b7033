"""Benchmark 8, fault recovery: a server crashes under an in-flight call.

One fault server (the project's well-behaved test server; it starts in ~0.3 s, so the
numbers show the client's recovery, not an SDK import). A ``sleep(30)`` call is put in
flight, the server process is killed with SIGKILL, and the driver measures (1) the time
until the in-flight call fails (fail-fast; a client that waits for a timeout shows as
"-"), and (2) the time until the first successful ``echo`` after the kill, retrying every
10 ms with each attempt bounded by 1 s (attempts that hit the bound are counted as hung;
a client with no restart never gets a success within the 20 s limit).

    python -m benchmarks.fault_recovery [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks._common import Bench, Metric, fault_server, run_main
from benchmarks._peers import Contender

__all__ = ["main", "run"]

GOAL = "the in-flight call fails at once; a call succeeds again after an automatic restart"
FAIL_LIMIT = 10.0
RECOVER_LIMIT = 20.0


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    fail_limit, recover_limit = (3.0, 5.0) if bench.options.quick else (FAIL_LIMIT, RECOVER_LIMIT)
    bench.params = {"server": "fault server, no flags", "fail_limit_s": fail_limit, "recover_limit_s": recover_limit}
    results: list[dict[str, Any]] = []

    def job(_contender: Contender, _round: int) -> dict[str, Any]:
        return {
            "scenario": "crash",
            "servers": [fault_server()],
            "fail_limit": fail_limit,
            "recover_limit": recover_limit,
        }

    def fail_fast_ms(result: dict[str, Any]) -> float:
        results.append(result)
        if result["fail_fast"] is None:
            raise ValueError(f"the in-flight call did not fail within {fail_limit:g}s ({result['inflight_error']})")
        return float(result["fail_fast"]) * 1e3

    fail = bench.measure(
        Metric(key="fail_fast_ms", title="kill -> in-flight call fails", unit="ms"), job, fail_fast_ms, timeout=120
    )
    recovered = Metric(key="recovered_ms", title="kill -> first successful call", unit="ms")
    for result in results:
        key = result["contender"]
        if result["recovered"] is None:
            recovered.mark(key, "none", f"no successful call within {recover_limit:g}s: {result['recovery_errors']}")
        else:
            recovered.add_value(
                key,
                float(result["recovered"]) * 1e3,
                {"attempts": result["attempts"], "hung_attempts": result.get("hung_attempts", 0)},
            )
    for key, entry in fail.results.items():
        if not any(r["contender"] == key for r in results):
            recovered.mark(key, entry["status"], "; ".join(entry.get("errors", [])))
    recovered.finish()
    for entry in recovered.results.values():
        hung = sum(x.get("hung_attempts", 0) for x in entry.get("extra", []))
        if hung:
            entry["note"] = f"{hung} attempt(s) hung for 1 s before the first success"
    order = list(fail.results)
    recovered.results = dict(sorted(recovered.results.items(), key=lambda kv: order.index(kv[0])))
    bench.metrics.append(recovered)
    bench.check_goal("mcp-actors fail-fast ms", fail.results.get("ours", {}).get("median"), 100.0)
    bench.check_goal("mcp-actors recovery ms", recovered.results.get("ours", {}).get("median"), 5000.0)
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    run_main(__doc__, "fault_recovery", "8. Fault recovery", GOAL, run, argv, default_rounds=3)


if __name__ == "__main__":
    main()
