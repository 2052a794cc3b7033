"""Gateway: what serving the servers as one MCP server costs a client, against a direct connection and peers.

The client is always ours (``open_runtime`` + ``McpService.call_tool``, the ``ours`` driver of
``benchmarks/drivers``), over streamable HTTP, in a fresh process per run, at the handshake
revision (``protocol: legacy``). What it talks to, always the same light stdlib server
(``benchmarks/_toolserver.py``) in the end:

* ``direct``: the light server's own streamable-HTTP mode (``--http``) on its own port;
* ``lean``: ``mcp_actors.serve`` (our HTTP/1.1 server side, each request dispatched straight
  into the runtime's ``McpService`` in the same trio loop) in front of the light server over stdio;
* ``sdk``: the SDK's server stack in front of the same upstream on the same runtime: a
  low-level ``mcp.server.Server`` whose two handlers call the same ``McpService``, served by
  ``StreamableHTTPSessionManager`` (JSON responses, its cheaper mode) under hypercorn's trio
  worker (``benchmarks/_gateway_server.py``): the cheapest credible gateway built on the SDK;
* ``fastmcp``: fastmcp's proxy (``fastmcp.server.create_proxy`` of an ``mcpServers`` config,
  its ``http`` transport under uvicorn) in front of the light server over stdio;
* ``mcp-proxy``: the ``mcp-proxy`` command (PyPI) exposing the light server over streamable HTTP.

The peers run in venvs of their own under ``benchmarks/.venvs/gw-<target>/`` (:data:`PEER_PACKAGES`,
installed on first use: ``mcp-proxy`` needs ``mcp<2``), started by ``benchmarks/_peer_gateway.py``.

Per target: the median and the p99 latency of sequential echo calls, the calls/s with 50 in
flight, and the RSS its processes grow by per idle session (``--sessions`` opened with raw
HTTP ``initialize`` + ``notifications/initialized`` after 100 to warm up,
``benchmarks/_sessions.py``). ``--replicas 1,2,3`` also measures N ``lean`` gateways behind
haproxy (``benchmarks/_replicas.py``: round-robin per request; our client at 2026-07-28,
whose requests stand alone). The load average before and after is printed (this machine is
shared: read the ratios, which the load moves far less than the absolute figures).

    python -m benchmarks.gateway [--quick] [--json PATH] [--rounds N] [--targets direct,lean,...|none]
                                 [--replicas 1,2,3] [--sessions N]

Figures of record, and why the gateway has its own HTTP server side rather than the SDK's:
docs/gateway.md ("Cost") and docs/performance.md ("Gateway").
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks._common import Metric, format_metric, machine_info, toolserver, write_json
from benchmarks._peers import (
    BENCH_DIR,
    CONTENDERS,
    Contender,
    DriverError,
    PeerUnavailable,
    ensure_peer_venv,
    run_driver,
)
from benchmarks._sessions import open_sessions, wait_settled

__all__ = ["PEER_PACKAGES", "TARGETS", "main", "run"]

GOAL: Final = "the gateway >= 0.5x a direct connection's calls/s at 50 in flight; <= 0.2 ms added sequential latency"
IN_FLIGHT: Final = 50
TARGETS: Final = ("direct", "lean", "sdk", "fastmcp", "mcp-proxy")
LABELS: Final = {
    "direct": "direct (light server, streamable HTTP)",
    "lean": "mcp_actors.serve (ours)",
    "sdk": "SDK server stack (hypercorn, trio)",
    "fastmcp": "fastmcp create_proxy (uvicorn)",
    "mcp-proxy": "mcp-proxy (uvicorn)",
}
PEER_PACKAGES: Final = {
    "fastmcp": ("fastmcp==4.2.3",),
    "mcp-proxy": ("mcp-proxy==0.13.0",),
}
"""The peers' pins, each installed on first use into ``benchmarks/.venvs/gw-<target>/``: ``mcp-proxy``
needs ``mcp<2`` (ours needs 2.x), so no extra of ours can hold it."""


def _peer_python(target: str) -> Path:
    peer = Contender(
        key=f"gw-{target}", label=LABELS[target], driver="", backend="asyncio", packages=PEER_PACKAGES[target]
    )
    return ensure_peer_venv(peer, log=lambda message: print(message, file=sys.stderr, flush=True))


def _server(target: str, replicas: int = 0) -> dict[str, Any]:
    """The harness's ``{"http": argv}`` for a target (it starts the process and reads its URL).

    Raises:
        PeerUnavailable: A peer's venv could not be made.
    """
    if target == "direct":
        return {"http": [*toolserver(), "--http"]}
    if target == "replicas":
        return {
            "http": [sys.executable, str(BENCH_DIR / "_replicas.py"), "--replicas", str(replicas), "--", *toolserver()]
        }
    if target in PEER_PACKAGES:
        python = _peer_python(target)
        return {
            "http": [
                sys.executable,
                str(BENCH_DIR / "_peer_gateway.py"),
                "--kind",
                target,
                "--python",
                str(python),
                "--",
                *toolserver(),
            ]
        }
    return {"http": [sys.executable, str(BENCH_DIR / "_gateway_server.py"), "--kind", target, "--", *toolserver()]}


def session_memory(server: dict[str, Any], sessions: int) -> float:
    """Bytes of RSS the target's process tree grows by per idle session (``sessions`` opened after 100 to warm up)."""
    proc = subprocess.Popen(server["http"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        if not url.startswith("http"):
            raise DriverError(f"the server printed no URL (got {url!r})")
        open_sessions(url, 100)
        before = wait_settled(proc.pid)
        open_sessions(url, sessions)
        after = wait_settled(proc.pid)
        return (after - before) / sessions
    except RuntimeError as exc:
        raise DriverError(str(exc)) from None
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def run(
    targets: Sequence[str],
    *,
    rounds: int,
    quick: bool,
    json_path: Path | None,
    replicas: Sequence[int] = (),
    sessions: int | None = None,
) -> dict[str, Any]:
    """Measure every target (and each replica count) in rotating order; print the tables; return the JSON document."""
    ours = next(c for c in CONTENDERS if c.key == "ours")
    python = Path(sys.executable)
    calls, warmup, flight_calls = (300, 30, 1000) if quick else (2000, 100, 5000)
    session_count = sessions or (300 if quick else 2000)
    latency = Metric(key="latency_us", title="sequential echo latency (median)", unit="us")
    tail = Metric(key="latency_p99_us", title="sequential echo latency (p99 of the round)", unit="us")
    rate = Metric(
        key="calls_per_s", title=f"{flight_calls:,} echo calls, {IN_FLIGHT} in flight", unit="calls/s", better="higher"
    )
    memory = Metric(key="session_kib", title=f"RSS per idle session ({session_count:,} opened)", unit="KiB")
    before = machine_info()
    state = Path(tempfile.mkdtemp(prefix="mcp-actors-bench-gateway-"))
    keys = [*targets, *(f"replicas-{n}" for n in replicas)]
    for round_no in range(rounds):
        shift = round_no % len(keys)
        for key in [*keys[shift:], *keys[:shift]]:
            print(f"[gateway] {key} (round {round_no + 1}/{rounds})", file=sys.stderr, flush=True)
            measured = (latency, tail, rate) if key.startswith("replicas-") else (latency, tail, rate, memory)
            try:
                if key.startswith("replicas-"):
                    server = _server("replicas", int(key.split("-")[1]))
                else:
                    server = _server(key)
            except PeerUnavailable as exc:
                for metric in measured:
                    metric.mark(key, "unavailable", str(exc)[:300])
                continue
            # Replicas: the 2026-07-28 revision (stateless), so that haproxy may send each request anywhere.
            os.environ["MCP_ACTORS_BENCH_PROTOCOL"] = "auto" if key.startswith("replicas-") else "legacy"
            try:
                seq = run_driver(
                    ours,
                    python,
                    {"scenario": "sequential", "servers": [server], "calls": calls, "warmup": warmup},
                    state_dir=state / key,
                    timeout=600,
                )
                latency.add_value(key, statistics.median(seq["latencies"]) * 1e6)
                tail.add_value(key, _p99(seq["latencies"]) * 1e6)
            except DriverError as exc:
                latency.mark(key, "failed", str(exc)[:300])
                tail.mark(key, "failed", str(exc)[:300])
            try:
                flight = run_driver(
                    ours,
                    python,
                    {
                        "scenario": "concurrent",
                        "servers": [server],
                        "calls_per_server": flight_calls,
                        "in_flight": IN_FLIGHT,
                    },
                    state_dir=state / key,
                    timeout=600,
                )
                if flight["failures"]:
                    raise DriverError(f"{flight['failures']} calls failed, e.g. {flight['failure_sample']}")
                rate.add_value(key, flight["calls_per_s"])
            except DriverError as exc:
                rate.mark(key, "failed", str(exc)[:300])
            if memory in measured:
                try:
                    memory.add_value(key, session_memory(server, session_count) / 1024)
                except DriverError as exc:
                    memory.mark(key, "failed", str(exc)[:300])
    os.environ.pop("MCP_ACTORS_BENCH_PROTOCOL", None)
    verdicts = []
    for metric in (latency, tail, rate):
        metric.finish()
        direct = metric.results.get("direct", {}).get("median")
        for entry in metric.results.values():
            if direct and "median" in entry:
                entry["vs_direct"] = entry["median"] / direct
                entry["note"] = f"{entry['vs_direct']:.2f}x direct"
    memory.finish()
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
    labels = {**LABELS, **{f"replicas-{n}": f"{n} x ours behind haproxy (2026-07-28)" for n in replicas}}
    print(f"\n== Gateway ==\ngoal: {GOAL}")
    print(f"machine: {before['cpus']} cpus; before: {before['load']}; after: {after['load']}; rounds: {rounds}")
    for metric in (latency, tail, rate, memory):
        if metric.results:
            print()
            print(format_metric(metric, labels))
    for verdict in verdicts:
        print(f"goal check: {verdict}")
    document = {
        "benchmark": "gateway",
        "goal": GOAL,
        "quick": quick,
        "rounds": rounds,
        "machine": {**before, "load_after": after["load"]},
        "metrics": [latency.to_json(), tail.to_json(), rate.to_json(), memory.to_json()],
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
    parser.add_argument("--targets", default=None, help=f"comma-separated subset of {','.join(TARGETS)} (or none)")
    parser.add_argument(
        "--replicas", default="", help="also N gateways behind haproxy, for each N of a comma-separated list (1,2,3)"
    )
    parser.add_argument("--sessions", type=int, default=None, help="idle sessions opened (default 2000; 300 --quick)")
    args = parser.parse_args(argv)
    if args.targets == "none":
        targets: tuple[str, ...] = ()
    else:
        targets = tuple(args.targets.split(",")) if args.targets else (("direct", "lean") if args.quick else TARGETS)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(TARGETS)}")
    try:
        replicas = tuple(int(n) for n in args.replicas.split(",") if n.strip())
    except ValueError:
        parser.error(f"--replicas takes counts like 1,2,3, got {args.replicas!r}")
    if any(n < 1 for n in replicas):
        parser.error("--replicas counts must be >= 1")
    if replicas and shutil.which("haproxy") is None and not Path("/usr/sbin/haproxy").exists():
        parser.error("--replicas needs haproxy (Debian: apt-get install haproxy)")
    if not targets and not replicas:
        parser.error("nothing to measure")
    rounds = args.rounds or (1 if args.quick else 3)
    if rounds < 1:
        parser.error(f"--rounds must be >= 1, got {rounds}")
    document = run(
        targets, rounds=rounds, quick=args.quick, json_path=args.json_path, replicas=replicas, sessions=args.sessions
    )
    if any(entry.get("status") == "failed" for m in document["metrics"] for entry in m["results"].values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
