"""Gateway: what serving the runtime's servers as one MCP server costs a client, against a direct connection.

The client is always ours (``open_runtime`` + ``McpService.call_tool``, the ``ours`` driver of
``benchmarks/drivers``), over streamable HTTP, in a fresh process per run. What it talks to:

* ``direct``: the light stdlib server (``benchmarks/_toolserver.py --http``) on its own port;
* ``lean``: ``mcp_actors.serve`` (our HTTP/1.1 server side, each request dispatched straight
  into the runtime's ``McpService`` in the same trio loop) in front of the same light server
  over stdio;
* ``sdk``: the SDK's server stack in front of the same upstream on the same runtime: a
  low-level ``mcp.server.Server`` whose two handlers call the same ``McpService``, served by
  ``StreamableHTTPSessionManager`` (``Server.streamable_http_app(json_response=True)``, its
  cheaper mode) under hypercorn's trio worker in the runtime's own trio loop. The cheapest
  credible gateway built on the SDK (``benchmarks/_gateway_server.py`` has both).

Per target: the median latency of sequential echo calls and the calls/s with 50 in flight;
the load average before and after is printed with them (this machine is shared: read the
ratios, which the load moves far less than the absolute figures).

    python -m benchmarks.gateway [--quick] [--json PATH] [--rounds N] [--targets direct,lean,sdk]

**The decision: our own lean server** (``mcp_actors/serve/_http.py``, ``_streamable.py``), not
the SDK's server stack. Measured on the shared 2-core machine (2026-12-05, 3 rounds in rotating
order, load average 7.9 before and 7.6 after, other jobs running):

==========================  ============  ===========  ===========
target                      seq. latency  calls/s @50  vs direct
==========================  ============  ===========  ===========
direct (light server)       211 us        2,400        1.00x
lean gateway (ours)         745 us        770          0.32x
SDK stack (hypercorn/trio)  6,249 us      217          0.09x
==========================  ============  ===========  ===========

(Two one-round ``--quick`` runs: 0.60x at load 6.3, 0.46x at load 5.1, where the SDK stack
made 0.09x; the sequential latency through the lean gateway was 1.1 and 3.1 ms. ``python -m
benchmarks.gateway`` prints the current table; docs/gateway.md keeps the figures of record.)

The SDK stack is 3.5x behind ours in calls/s and 8x in latency before the gateway does any
work of its own: starlette's request objects, the session
manager's memory streams and task per request, every message validated by pydantic on the way
in and out, hypercorn's HTTP/1.1 machinery on anyio's trio backend. The lean server parses a
request with a few ``bytes`` operations and one regex, reads and writes the socket's
descriptor directly (trio's ``SocketStream`` takes a conflict detector and a scheduler pass per
write), keeps one cancel scope per connection instead of one per phase (bounds are watched once
a second), and hands the request to the core in the connection's own task, where it calls the
runtime's ``McpService`` directly. It keeps the SDK's request check and result shaping
(``mcp_types.methods``: ~16 us a call) so the protocol's rules stay the SDK's. What is left:
the gateway process spends ~350 us CPU per call at this load (~190 us serving HTTP, the rest
the upstream call over stdio), against ~100 us for the light server's whole HTTP side, and a
sequential call through a third process on two cores waits for four scheduler wake-ups
instead of two. Goals (>= 0.5x calls/s, <= 0.2 ms added latency): not met on this machine
under this load.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks._common import Metric, format_metric, machine_info, toolserver, write_json
from benchmarks._peers import BENCH_DIR, CONTENDERS, DriverError, run_driver

__all__ = ["TARGETS", "main", "run"]

GOAL: Final = "the gateway >= 0.5x a direct connection's calls/s at 50 in flight; <= 0.2 ms added sequential latency"
IN_FLIGHT: Final = 50
TARGETS: Final = ("direct", "lean", "sdk")
LABELS: Final = {
    "direct": "direct (light server, streamable HTTP)",
    "lean": "mcp_actors.serve (ours)",
    "sdk": "SDK server stack (hypercorn, trio)",
}


def _server(target: str) -> dict[str, Any]:
    """The harness's ``{"http": argv}`` for a target (it starts the process and reads its URL)."""
    if target == "direct":
        return {"http": [*toolserver(), "--http"]}
    return {"http": [sys.executable, str(BENCH_DIR / "_gateway_server.py"), "--kind", target, "--", *toolserver()]}


def run(targets: Sequence[str], *, rounds: int, quick: bool, json_path: Path | None) -> dict[str, Any]:
    """Measure every target in rotating order; print the tables; return the JSON document."""
    ours = next(c for c in CONTENDERS if c.key == "ours")
    python = Path(sys.executable)
    calls, warmup, flight_calls = (300, 30, 1000) if quick else (2000, 100, 5000)
    latency = Metric(key="latency_us", title="sequential echo latency", unit="us")
    rate = Metric(
        key="calls_per_s", title=f"{flight_calls:,} echo calls, {IN_FLIGHT} in flight", unit="calls/s", better="higher"
    )
    before = machine_info()
    state = Path(tempfile.mkdtemp(prefix="mcp-actors-bench-gateway-"))
    for round_no in range(rounds):
        shift = round_no % len(targets)
        for target in [*targets[shift:], *targets[:shift]]:
            server = _server(target)
            print(f"[gateway] {target} (round {round_no + 1}/{rounds})", file=sys.stderr, flush=True)
            try:
                seq = run_driver(
                    ours,
                    python,
                    {"scenario": "sequential", "servers": [server], "calls": calls, "warmup": warmup},
                    state_dir=state / target,
                    timeout=600,
                )
                latency.add_value(target, statistics.median(seq["latencies"]) * 1e6)
                flight = run_driver(
                    ours,
                    python,
                    {
                        "scenario": "concurrent",
                        "servers": [server],
                        "calls_per_server": flight_calls,
                        "in_flight": IN_FLIGHT,
                    },
                    state_dir=state / target,
                    timeout=600,
                )
                if flight["failures"]:
                    raise DriverError(f"{flight['failures']} calls failed, e.g. {flight['failure_sample']}")
                rate.add_value(target, flight["calls_per_s"])
            except DriverError as exc:
                latency.mark(target, "failed", str(exc)[:300])
                rate.mark(target, "failed", str(exc)[:300])
    verdicts = []
    for metric in (latency, rate):
        metric.finish()
        direct = metric.results.get("direct", {}).get("median")
        for entry in metric.results.values():
            if direct and "median" in entry:
                entry["vs_direct"] = entry["median"] / direct
                entry["note"] = f"{entry['vs_direct']:.2f}x direct"
    lean_rate = rate.results.get("lean", {}).get("vs_direct")
    if lean_rate is not None:
        verdicts.append(
            f"lean calls/s / direct = {lean_rate:.2f} (goal >= 0.5): {'met' if lean_rate >= 0.5 else 'NOT met'}"
        )
    lean_latency = latency.results.get("lean", {}).get("median")
    direct_latency = latency.results.get("direct", {}).get("median")
    if lean_latency is not None and direct_latency is not None:
        added = lean_latency - direct_latency
        verdicts.append(
            f"lean added sequential latency = {added:.0f} us (goal <= 200 us): {'met' if added <= 200 else 'NOT met'}"
        )
    after = machine_info()
    print(f"\n== Gateway ==\ngoal: {GOAL}")
    print(f"machine: {before['cpus']} cpus; before: {before['load']}; after: {after['load']}; rounds: {rounds}")
    for metric in (latency, rate):
        print()
        print(format_metric(metric, LABELS))
    for verdict in verdicts:
        print(f"goal check: {verdict}")
    document = {
        "benchmark": "gateway",
        "goal": GOAL,
        "quick": quick,
        "rounds": rounds,
        "machine": {**before, "load_after": after["load"]},
        "metrics": [latency.to_json(), rate.to_json()],
        "verdicts": verdicts,
    }
    if json_path is not None:
        write_json(json_path, document)
    shutil.rmtree(state, ignore_errors=True)
    return document


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, one round, direct and lean only")
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="write the result as JSON here")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default: 3; 1 with --quick)")
    parser.add_argument("--targets", default=None, help=f"comma-separated subset of {','.join(TARGETS)}")
    args = parser.parse_args(argv)
    targets = tuple(args.targets.split(",")) if args.targets else (("direct", "lean") if args.quick else TARGETS)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(TARGETS)}")
    rounds = args.rounds or (1 if args.quick else 3)
    if rounds < 1:
        parser.error(f"--rounds must be >= 1, got {rounds}")
    document = run(targets, rounds=rounds, quick=args.quick, json_path=args.json_path)
    if any(entry.get("status") == "failed" for m in document["metrics"] for entry in m["results"].values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
