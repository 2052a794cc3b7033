"""Benchmark 9, hot path: what one call costs the client, on a server that costs nearly nothing.

The demo server (benchmarks 1 and 2) spends more per call than the clients do, so it
hides their differences. Here the server is fast: the light stdlib server
(``benchmarks/_toolserver.py``, newline JSON-RPC over stdio, and its ``--http`` mode, a
minimal streamable-HTTP server on asyncio) and, when ``node`` and ``npx`` are on the
PATH, the everything server from npm (``npx -y @modelcontextprotocol/server-everything``,
its ``echo``). The contenders: the floor (``benchmarks/stress_floor.py``, a hand-written
JSON-RPC client), the raw SDK ``mcp.Client``, mcp-actors, and the peers that keep a
session open (the SDK's ``ClientSessionGroup``, ``fastmcp.Client``, openai-agents'
``MCPServerStdio`` / ``MCPServerStreamableHttp``); langchain-mcp-adapters starts a server
per call, so it gets one row saying so instead of a measurement. Per server: the median
latency of sequential calls, the throughput with 50 calls in flight, and the client's CPU
per call (process CPU time / calls, the server's process excluded) in both. Every table
gives each contender's ratio to the raw SDK and to the floor, all from the same run; the
load average before and after is printed with them.

``--quick`` (CI) measures the light stdio server only, with small counts, floor, raw SDK
and mcp-actors, and prints a regression-guard line with mcp-actors' ratios to the raw SDK
and to the floor: informational, it never fails on noise (only a contender that cannot
run at all fails the benchmark).

    python -m benchmarks.hot_path [--quick] [--json PATH] [--rounds N] [--contenders ...]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import attrs

from benchmarks._common import Bench, Metric, core_failures, parse_options, toolserver
from benchmarks._peers import Contender

__all__ = ["EVERYTHING", "everything_installed", "main", "run"]

GOAL = (
    "mcp-actors >= 2x the raw mcp.Client's calls/s and ahead of every peer, <= 0.7x its latency, <= 100 us CPU per call"
)
EVERYTHING = ["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"]
"""The MCP reference 'everything' server (Node), over stdio."""

IN_FLIGHT = 50

FULL_CONTENDERS = "floor,ours,raw,session-group,fastmcp,openai-agents"
"""What a full run measures by default: the floor, ours, the raw SDK and the peers that keep a session."""
LOCAL_CONTENDERS = "floor,ours,raw,session-group"
"""``--contenders local``: no peer venvs."""
QUICK_CONTENDERS = "floor,ours,raw"
"""``--quick`` (CI): no installs, the guard's three."""
NOT_ON_THE_HOT_PATH = {
    "langchain": "not measured: a new session (a new server process) per call; see call_overhead",
}
"""Peers shown as one row with the reason, never run here."""


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


def everything_installed(bound: float = 180.0) -> list[str] | str:
    """The everything server's argv without npx (``node <its entry> stdio``), or why there is none.

    ``npx -y`` asks the npm registry for the package's newest version at every start (a
    network round trip of ~0.8 s here, in its debug log), so twenty servers started through
    it took 21-47 s on two cores that were busy for only ~21 s of it: a start-up figure then
    measures the network. npx resolves the package once here (installing it on first
    use); every contender then starts the installed entry with ``node``.
    """
    package = EVERYTHING[2]
    command = [EVERYTHING[0], "-y", "-p", package, "-c", "command -v mcp-server-everything"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=bound, check=False)
    except subprocess.TimeoutExpired:
        return f"npx did not resolve {package} within {bound:g}s"
    except OSError as exc:
        return f"could not run npx: {exc}"
    found = done.stdout.strip().splitlines()
    entry = os.path.realpath(found[-1]) if found else ""
    node = shutil.which("node")
    if done.returncode != 0 or not os.path.isfile(entry) or node is None:
        return f"npx did not resolve {package} (exit {done.returncode}): {done.stderr.strip()[-200:]}"
    return [node, entry, *EVERYTHING[3:]]


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


def _ratios(entry: dict[str, Any]) -> str:
    """``1.05x raw, 2.10x floor`` for one contender's entry (the ratios it has)."""
    parts = [
        f"{entry[k]:.2f}x {name}" for k, name in (("ratio_to_raw", "raw"), ("ratio_to_floor", "floor")) if k in entry
    ]
    return ", ".join(parts)


def _guard_line(title: str, latency: dict[str, Any], rate: dict[str, Any], cpu: dict[str, Any]) -> str | None:
    """The regression guard's line for one server: mcp-actors against the raw SDK and the floor."""
    if "ratio_to_raw" not in latency or "ratio_to_raw" not in rate:
        return None
    line = f"{title}: latency {_ratios(latency)}; calls/s {_ratios(rate)}"
    if "median" in cpu:
        line += f"; CPU/call {cpu['median']:.0f} us ({_ratios(cpu)})"
    return line


def _check_ahead_of_peers(bench: Bench, title: str, throughput: Metric) -> None:
    """Goal: ahead of every peer (the SDK-based clients, not the floor or the raw SDK itself)."""
    ours = throughput.results.get("ours", {}).get("median")
    peers = {
        key: entry["median"]
        for key, entry in throughput.results.items()
        if key not in ("ours", "floor", "raw") and "median" in entry
    }
    if ours is None or not peers:
        return
    best = max(peers, key=peers.__getitem__)
    bench.check_goal(f"{title}: mcp-actors calls/s / best peer ({best})", ours / peers[best], 1.0, at_most=False)


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
        ours_latency = latency.results.get("ours", {})
        ours_rate = throughput.results.get("ours", {})
        ours_cpu = cpu.results.get("ours", {})
        bench.check_goal(f"{title}: mcp-actors calls/s / raw", ours_rate.get("ratio_to_raw"), 2.0, at_most=False)
        bench.check_goal(f"{title}: mcp-actors latency / raw", ours_latency.get("ratio_to_raw"), 0.7)
        bench.check_goal(f"{title}: mcp-actors CPU per call (us)", ours_cpu.get("median"), 100.0)
        _check_ahead_of_peers(bench, title, throughput)
        line = _guard_line(title, ours_latency, ours_rate, ours_cpu)
        if line is not None:
            guard.append(line)
    for line in guard:
        # The regression guard: printed for a reader of the CI log, never a failure.
        bench.notes.append(f"regression guard (informational, never fails): mcp-actors on the {line}")
    return bench.report()


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    options = parse_options(__doc__.splitlines()[0], argv)
    described: dict[str, str] = {}
    if options.contenders in ("all", "local"):
        # The floor is only ever measured where it is named; quick mode installs nothing.
        if options.quick:
            contenders = QUICK_CONTENDERS
        elif options.contenders == "local":
            contenders = LOCAL_CONTENDERS
        else:
            contenders = FULL_CONTENDERS
            described = NOT_ON_THE_HOT_PATH
        options = attrs.evolve(options, contenders=contenders)
    bench = Bench("hot_path", "9. Hot path (fast server)", GOAL, options, default_rounds=3, described=described)
    document = run(bench)
    failed = core_failures(document)
    if failed:
        print(f"hot_path: failed runs: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
