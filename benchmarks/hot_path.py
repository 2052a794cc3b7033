"""Benchmark 9, hot path: what one call costs the client, on a server that costs nearly nothing.

The demo server (benchmarks 1 and 2) spends more per call than the clients do, so it
hides their differences. Here the server is fast: the light stdlib server
(``benchmarks/_toolserver.py``, newline JSON-RPC over stdio, and its ``--http`` mode, a
minimal streamable-HTTP server on asyncio) and, when ``node`` and ``npx`` are on the
PATH, the everything server from npm (``npx -y @modelcontextprotocol/server-everything``,
its ``echo``). Three contenders: the floor (``benchmarks/stress_floor.py``, a hand-written JSON-RPC client), the raw SDK
``mcp.Client`` and mcp-actors. Per server: the median latency of sequential calls, the
throughput with 50 calls in flight, and the client's CPU per call (process CPU time /
calls, the server's process excluded) in both.

``--quick`` (CI) measures the light server only, with small counts, and prints the ratio
of mcp-actors to the raw SDK as a regression guard: informational, it never fails on
noise (only a contender that cannot run at all fails the benchmark).

    python -m benchmarks.hot_path [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import attrs

from benchmarks._common import Bench, Metric, core_failures, parse_options, toolserver
from benchmarks._peers import Contender

__all__ = ["EVERYTHING", "main", "run"]

GOAL = "mcp-actors >= 2x the raw mcp.Client's calls/s, <= 0.7x its latency, <= 100 us CPU per call (issue 15)"
EVERYTHING = ["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"]
"""The MCP reference 'everything' server (Node), over stdio."""

IN_FLIGHT = 50


def _servers(quick: bool) -> list[tuple[str, str, Any, dict[str, Any]]]:
    """(key, title, server, echo arguments) of every fast server this run measures.

    A server is an argv (stdio) or ``{"http": argv}`` (the harness starts it and hands the
    drivers its URL: streamable HTTP).
    """
    text = {"text": "hello"}
    servers: list[tuple[str, str, Any, dict[str, Any]]] = [("stdlib", "light stdlib server, stdio", toolserver(), text)]
    if quick:
        return servers
    servers.append(("stdlib_http", "light stdlib server, streamable HTTP", {"http": [*toolserver(), "--http"]}, text))
    if shutil.which("node") and shutil.which("npx") and _answers(EVERYTHING) is None:
        servers.append(("everything", "everything server (node), stdio", EVERYTHING, {"message": "hello"}))
    return servers


def _answers(argv: list[str], bound: float = 180.0) -> str | None:
    """Why the stdio server ``argv`` does not answer ``initialize`` (``None``: it does).

    npx installs the everything server on first use; offline, or with a broken npm, it
    never starts, and the run must go on without it instead of failing every contender.
    """
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n"
    try:
        done = subprocess.run(argv, input=line, capture_output=True, text=True, timeout=bound, check=False)
    except subprocess.TimeoutExpired:
        return f"no answer to initialize within {bound:g}s"
    except OSError as exc:
        return f"could not start: {exc}"
    if '"id":1' not in done.stdout.replace(" ", ""):
        return f"no answer to initialize (exit {done.returncode}): {done.stderr.strip()[-200:]}"
    return None


def _cpu_metric(bench: Bench, source: Metric, key: str, title: str) -> Metric:
    """Client CPU per call from the runs of ``source`` (every result carries ``cpu_per_call``)."""
    metric = Metric(key=key, title=title, unit="us CPU/call")
    for contender, entry in source.results.items():
        for extra in entry.get("extra", []):
            if "cpu_per_call" in extra:
                metric.add_value(contender, extra["cpu_per_call"] * 1e6)
        if not entry.get("values"):
            metric.mark(contender, entry.get("status", "failed"), "; ".join(entry.get("errors", [])))
    metric.finish()
    bench.metrics.append(metric)
    return metric


def run(bench: Bench) -> dict[str, Any]:
    """Measure and report; return the JSON document."""
    quick = bench.options.quick
    calls, warmup = (200, 20) if quick else (2000, 100)
    flight_calls = 1000 if quick else 5000
    servers = _servers(quick)
    bench.params = {
        "servers": {key: title for key, title, _s, _a in servers},
        "sequential_calls": calls,
        "concurrent_calls": flight_calls,
        "in_flight": IN_FLIGHT,
    }
    if not quick and not any(key == "everything" for key, *_ in servers):
        why = "node/npx is not on the PATH" if not shutil.which("npx") else _answers(EVERYTHING)
        bench.notes.append(f"the everything server was not measured: {why}")
    guard: list[str] = []
    for key, title, argv, arguments in servers:

        def sequential(_c: Contender, _r: int, argv: Any = argv, arguments: dict[str, Any] = arguments) -> Any:
            return {
                "scenario": "sequential",
                "servers": [argv],
                "calls": calls,
                "warmup": warmup,
                "arguments": arguments,
            }

        def concurrent(_c: Contender, _r: int, argv: Any = argv, arguments: dict[str, Any] = arguments) -> Any:
            return {
                "scenario": "concurrent",
                "servers": [argv],
                "calls_per_server": flight_calls,
                "in_flight": IN_FLIGHT,
                "arguments": arguments,
            }

        def median_us(result: dict[str, Any]) -> float:
            return float(statistics.median(result["latencies"])) * 1e6

        def rate(result: dict[str, Any]) -> float:
            if result["failures"]:
                raise ValueError(f"{result['failures']} calls failed, e.g. {result['failure_sample']}")
            return float(result["calls_per_s"])

        latency = bench.measure(
            Metric(key=f"{key}_latency_us", title=f"{title}: sequential echo latency", unit="us"),
            sequential,
            median_us,
            timeout=600,
        )
        _cpu_metric(bench, latency, f"{key}_latency_cpu_us", f"{title}: client CPU per sequential call")
        throughput = bench.measure(
            Metric(
                key=f"{key}_calls_per_s",
                title=f"{title}: {flight_calls:,} calls, {IN_FLIGHT} in flight",
                unit="calls/s",
                better="higher",
            ),
            concurrent,
            rate,
            timeout=600,
        )
        cpu = _cpu_metric(
            bench, throughput, f"{key}_concurrent_cpu_us", f"{title}: client CPU per call, {IN_FLIGHT} in flight"
        )
        ours_latency = latency.results.get("ours", {}).get("ratio_to_raw")
        ours_rate = throughput.results.get("ours", {}).get("ratio_to_raw")
        bench.check_goal(f"{title}: mcp-actors calls/s / raw", ours_rate, 2.0, at_most=False)
        bench.check_goal(f"{title}: mcp-actors latency / raw", ours_latency, 0.7)
        bench.check_goal(f"{title}: mcp-actors CPU per call (us)", cpu.results.get("ours", {}).get("median"), 100.0)
        if ours_latency is not None and ours_rate is not None:
            guard.append(f"{title}: latency {ours_latency:.2f}x raw, calls/s {ours_rate:.2f}x raw")
    for line in guard:
        # The regression guard: printed for a reader of the CI log, never a failure.
        bench.notes.append(f"regression guard (informational, never fails): mcp-actors on the {line}")
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    options = parse_options(__doc__.splitlines()[0], argv)
    if options.contenders in ("all", "local"):
        # The floor is named here; peers are not measured on the hot path.
        options = attrs.evolve(options, contenders="floor,ours,raw")
    document = run(Bench("hot_path", "9. Hot path (fast server)", GOAL, options, default_rounds=3))
    failed = core_failures(document)
    if failed:
        print(f"hot_path: failed runs: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
