"""``mcp-actors stress``: its own ceiling next to a floor client, and its accuracy.

    python -m benchmarks.stress_ceiling [--quick] [--json PATH] [--seconds S]

* **Ceiling**: calls/s the stress tool drives against a fast server (the fault server's
  ``echo``, closed model, 32 users per worker), with one worker and with one worker per
  core; next to it the floor, a hand-written JSON-RPC client (``benchmarks/stress_floor.py``)
  in one process and in one process per core. Each worker has its own server.
* **Accuracy**: a server with a known injected latency (``sleep`` 100 ms) at a rate far
  below capacity, measured at p50 and p99; a fixed ``--rate`` and the achieved send rate;
  a 1 s stall (SIGSTOP) under open-model load against the same stall seen by a closed
  model (one user), which hides it.

Run it on an idle machine for the figures in docs/stress.md; on a busy one the injected
latency is overshot by the server's own sleeps, not by the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import trio

from benchmarks.stress_floor import floor_rate, floor_rate_sync
from mcp_actors.stress import (
    LoadPlan,
    StressSettings,
    Tally,
    adhoc_target,
    drive,
    parse_chaos,
    parse_rate,
    run_stress,
    single_tool,
)

FAULT = [sys.executable, "-m", "mcp_actors.testing.fault_server"]
ECHO = ("echo", {"text": "x"})


async def _stress(plan: LoadPlan, tool: tuple[str, dict[str, Any]], workers: int) -> dict[str, Any]:
    settings = StressSettings(
        target=adhoc_target(command=FAULT),
        target_label="fault_server",
        scenario=single_tool(*tool),
        plan=plan,
        workers=workers,
    )
    return await run_stress(settings)


async def _engine_only(seconds: float) -> float:
    """Calls/s of the load engine alone (scheduler, mix, HDR recording) with a no-op executor."""
    tally = Tally()

    async def execute(n: int, op: Any, args: Any, timeout: float) -> None:
        await trio.lowlevel.checkpoint()

    await drive(
        LoadPlan(users=32, duration=seconds), single_tool(*ECHO), execute, start=trio.current_time(), tally=tally
    )
    return tally.requests / tally.measured_seconds


async def _floor(processes: int, seconds: float) -> float:
    import trio_parallel

    rates: list[float] = []

    async def one() -> None:
        rates.append(await trio_parallel.run_sync(floor_rate_sync, FAULT, ECHO[0], ECHO[1], 32, seconds))

    async with trio.open_nursery() as nursery:
        for _ in range(processes):
            nursery.start_soon(one)
    return sum(rates)


async def measure(seconds: float) -> dict[str, Any]:
    """Every figure of this benchmark."""
    cores = os.cpu_count() or 1
    out: dict[str, Any] = {"cores": cores, "seconds": seconds}
    for workers in sorted({1, cores}):
        doc = await _stress(LoadPlan(users=32 * workers, duration=seconds, timeout=30.0), ECHO, workers)
        out[f"ceiling_workers_{workers}"] = round(doc["summary"]["throughput"], 1)
        out[f"floor_processes_{workers}"] = round(await _floor(workers, seconds), 1)

    out["engine_only_calls_per_s"] = round(await _engine_only(seconds), 1)

    latency = 0.100
    sleep = ("sleep", {"seconds": latency})
    doc = await _stress(LoadPlan(rate=parse_rate("5"), duration=seconds), sleep, 1)
    lat = doc["summary"]["latency_ms"]
    # The server's true latency, seen by the floor client one call at a time: the fault
    # server sleeps in ten steps, each overshooting a little, so it is above the nominal.
    samples: list[float] = []
    await floor_rate(FAULT, tool=sleep[0], arguments=sleep[1], concurrency=1, seconds=seconds, latencies=samples)
    samples.sort()
    true_p50 = samples[len(samples) // 2] * 1e3
    true_p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1e3
    out["injected_ms"] = latency * 1e3
    out["floor_p50_ms"] = round(true_p50, 3)
    out["floor_p99_ms"] = round(true_p99, 3)
    out["measured_p50_ms"] = lat["p50"]
    out["measured_p99_ms"] = lat["p99"]
    out["p50_error_vs_floor_pct"] = round((lat["p50"] / true_p50 - 1) * 100, 2)
    out["p99_error_vs_floor_pct"] = round((lat["p99"] / true_p99 - 1) * 100, 2)
    out["p50_error_vs_nominal_pct"] = round((lat["p50"] / (latency * 1e3) - 1) * 100, 2)

    doc = await _stress(LoadPlan(rate=parse_rate("200"), duration=seconds), ECHO, 1)
    out["fixed_rate"] = 200
    out["achieved_send_rate"] = round(doc["summary"]["send_rate"], 2)
    out["rate_error_pct"] = round((doc["summary"]["send_rate"] / 200 - 1) * 100, 3)

    stall = (parse_chaos("stop-every=1.5s,stop-for=1s"),)
    run = max(seconds, 3.0)
    open_doc = await _stress(LoadPlan(rate=parse_rate("100"), duration=run, chaos=stall), ECHO, 1)
    closed_doc = await _stress(LoadPlan(users=1, duration=run, chaos=stall), ECHO, 1)
    out["stall_open_p99_ms"] = open_doc["summary"]["latency_ms"]["p99"]
    out["stall_closed_p99_ms"] = closed_doc["summary"]["latency_ms"]["p99"]
    out["stall_closed_max_ms"] = closed_doc["summary"]["latency_ms"]["max"]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print the figures (and write them with ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stress_ceiling", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s per measurement (smoke mode)")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per measurement (default 5)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    options = parser.parse_args(argv)
    figures = trio.run(measure, 1.0 if options.quick else options.seconds)
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
