"""The asyncio road against the trio road and the raw SDK on asyncio, one light stdio server.

Contenders (each measured in a process of its own by ``python -m
benchmarks._integrations.asyncio_road --contender KEY``; ``--rounds N`` without
``--contender`` runs every contender N times, in rotating order, each in a fresh process, and
prints the per-run figures and the medians):

* ``trio``: ``mcp_actors.runtime.open_runtime`` and ``McpService.call_tool`` on trio (the
  same loop and the same JSON keys as :func:`benchmarks._integrations._measure.measure`,
  written for trio: :func:`measure_trio`).
* ``asyncio``: ``mcp_actors.asyncio.open_runtime`` with its default mode, ``rt.service.call_tool``.
* ``asyncio-thread``: the same with ``mode="thread"`` (the runtime on a thread of its own;
  the default is ``mode="guest"``, trio as a guest on the asyncio loop).
* ``portal``: ``start_portal()`` and ``portal.asyncio_service()``, the older way in (on this
  checkout the same hop as ``asyncio-thread``; ``portal@main`` with ``--tree`` for another's).
* ``raw-asyncio``: the official SDK's ``mcp.Client`` over stdio on asyncio, by hand.
* ``wire_floor``: a hand-written JSON-RPC client on asyncio
  (:mod:`benchmarks._integrations._wire_floor`): the least any client pays for a call here.

``--tree main=/path/to/checkout --only portal@main,...`` measures a contender on another
checkout's package (its ``portal`` before this module's changes, say), the same way.
``python -m benchmarks.integrations --frameworks asyncio_road`` measures it among the
framework integrations, ``ours`` (the asyncio road) against ``own`` (the raw SDK on asyncio).

Every contender drives the same server (``benchmarks/_toolserver.py``) with the classic
``initialize`` handshake, and calls ``echo``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks._integrations._measure import CALL_TIMEOUT, Call, Opener, measure

__all__ = ["CONTENDERS", "main", "measure_trio"]

_BENCH_DIR = Path(__file__).resolve().parent.parent
_DEFAULT_SERVER = [sys.executable, str(_BENCH_DIR / "_toolserver.py")]
_ARGS = {"text": "hi"}


def _write_config(directory: str, server: list[str]) -> str:
    """A config file with the one server, named ``bench``, trusted, classic handshake."""
    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore

    path = os.path.join(directory, "mcp-config.json")
    record = record_from_json_dict(
        {
            "id": new_server_id(),
            "name": "bench",
            "type": "stdio",
            "config": {"command": server[0], "args": server[1:], "protocol": "legacy", "connectTimeout": 600},
            "isTrusted": True,
        }
    )
    ConfigStore(path).save([record])
    return path


def _checked(result: Any) -> None:
    if result.is_error:
        raise RuntimeError("the echo call failed")


# --------------------------------------------------------------------------- asyncio contenders


def _asyncio_road(mode: str | None) -> Opener:
    @contextlib.asynccontextmanager
    async def opener(server: list[str]) -> AsyncIterator[Call]:
        import mcp_actors.asyncio

        options: dict[str, Any] = {} if mode is None else {"mode": mode}
        with tempfile.TemporaryDirectory(prefix="mcp-actors-bench-asyncio-") as tmp:
            os.environ["MCP_ACTORS_STATE_DIR"] = tmp
            async with mcp_actors.asyncio.open_runtime(_write_config(tmp, server), **options) as rt:
                service = rt.service

                async def call() -> None:
                    _checked(await service.call_tool("bench", "echo", _ARGS))

                yield call

    return opener


@contextlib.asynccontextmanager
async def _portal(server: list[str]) -> AsyncIterator[Call]:
    from mcp_actors.portal import start_portal

    with tempfile.TemporaryDirectory(prefix="mcp-actors-bench-portal-") as tmp:
        os.environ["MCP_ACTORS_STATE_DIR"] = tmp
        with start_portal(_write_config(tmp, server)) as portal:
            service = portal.asyncio_service()

            async def call() -> None:
                _checked(await service.call_tool("bench", "echo", _ARGS))

            yield call


@contextlib.asynccontextmanager
async def _raw_asyncio(server: list[str]) -> AsyncIterator[Call]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
    async with Client(params, mode="legacy") as client:

        async def call() -> None:
            _checked(await client.call_tool("echo", _ARGS))

        yield call


@contextlib.asynccontextmanager
async def _wire_floor(server: list[str]) -> AsyncIterator[Call]:
    from benchmarks._integrations._wire_floor import open_wire_floor

    async with open_wire_floor(server) as client:

        async def call() -> None:
            result = await client.request("tools/call", {"name": "echo", "arguments": _ARGS})
            if result.get("isError"):
                raise RuntimeError("the echo call failed")

        yield call


# --------------------------------------------------------------------------- the trio road


async def measure_trio(
    call: Callable[[], Awaitable[object]], *, seconds: float, inflight: int, sequential: int, warmup: int = 50
) -> dict[str, Any]:
    """:func:`~benchmarks._integrations._measure.measure` on trio: the same shapes, bounds and keys."""
    import trio

    for _ in range(warmup):
        with trio.fail_after(CALL_TIMEOUT):
            await call()
    latencies: list[float] = []
    cpu0 = time.process_time()
    for _ in range(sequential):
        start = time.perf_counter()
        with trio.fail_after(CALL_TIMEOUT):
            await call()
        latencies.append(time.perf_counter() - start)
    seq_cpu = (time.process_time() - cpu0) / max(1, sequential)
    latencies.sort()
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            with trio.fail_after(CALL_TIMEOUT):
                await call()
            done += 1

    start = time.perf_counter()
    cpu0 = time.process_time()
    async with trio.open_nursery() as nursery:
        for _ in range(inflight):
            nursery.start_soon(worker)
    elapsed = time.perf_counter() - start
    return {
        "sequential_ms": statistics.median(latencies) * 1e3,
        "sequential_p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3,
        "sequential_cpu_ms": seq_cpu * 1e3,
        "calls_per_s": done / elapsed,
        "concurrent_cpu_ms": (time.process_time() - cpu0) / max(1, done) * 1e3,
        "inflight": inflight,
    }


def _run_trio(server: list[str], *, seconds: float, inflight: int, sequential: int) -> dict[str, Any]:
    import trio

    from mcp_actors.runtime import open_runtime

    async def run() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="mcp-actors-bench-trio-") as tmp:
            os.environ["MCP_ACTORS_STATE_DIR"] = tmp
            async with open_runtime(_write_config(tmp, server)) as rt:
                service = rt.service

                async def call() -> None:
                    _checked(await service.call_tool("bench", "echo", _ARGS))

                return await measure_trio(call, seconds=seconds, inflight=inflight, sequential=sequential)

    return trio.run(run)


CONTENDERS: dict[str, Opener] = {
    "asyncio": _asyncio_road(None),
    "asyncio-thread": _asyncio_road("thread"),
    "portal": _portal,
    "raw-asyncio": _raw_asyncio,
    "wire_floor": _wire_floor,
}
"""The asyncio contenders (``trio`` is measured by :func:`measure_trio` on trio)."""

KEYS = ("trio", *CONTENDERS)
"""The contenders of ``--rounds``, by their own names."""

ALIASES = {"ours": "asyncio", "own": "raw-asyncio"}
"""``benchmarks.integrations`` compares ``ours`` with ``own``: here the asyncio road with the raw SDK on asyncio."""

CONTENDER_NAMES = ("ours", "own", "trio", "asyncio-thread", "portal", "wire_floor")
"""What ``benchmarks.integrations`` measures of this module (read there without importing it)."""


# --------------------------------------------------------------------------- one contender, many


def _measure_one(
    contender: str, server: list[str], *, seconds: float, inflight: int, sequential: int
) -> dict[str, Any]:
    if contender == "trio":
        return _run_trio(server, seconds=seconds, inflight=inflight, sequential=sequential)

    async def run() -> dict[str, Any]:
        async with CONTENDERS[contender](server) as call:
            return await measure(call, seconds=seconds, inflight=inflight, sequential=sequential)

    return asyncio.run(run())


def _rounds(keys: list[str], rounds: int, extra: list[str], trees: dict[str, str]) -> None:
    """Every contender ``rounds`` times, order shuffled each round, each run in a fresh process."""
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in keys}
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for n in range(rounds):
        order = keys[n % len(keys) :] + keys[: n % len(keys)]
        random.shuffle(order)
        for key in order:
            command = [sys.executable, "-m", "benchmarks._integrations.asyncio_road", "--contender", key, *extra]
            env, cwd = None, None
            if "@" in key:  # a contender of another tree's package: this script, that tree first on the path
                name, tree = key.split("@", 1)
                command = [sys.executable, __file__, "--contender", name, *extra]
                env, cwd = {**os.environ, "PYTHONPATH": trees[tree]}, tempfile.gettempdir()
            out = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600, env=env, cwd=cwd)
            if out.returncode != 0:
                print(f"{key}: failed\n{out.stderr}", file=sys.stderr)
                continue
            result = json.loads(out.stdout.strip().splitlines()[-1])
            runs[key].append(result)
            print(
                f"round {n + 1} {key:15} {result['calls_per_s']:9.0f} calls/s  {result['sequential_ms']:.3f} ms",
                flush=True,
            )
    print(f"\n{started}; load average before {load_before}, after {os.getloadavg()}")
    print("| contender | calls/s at 50 in flight (median) | sequential ms (median) | per run: calls/s, ms |")
    print("|---|---:|---:|---|")
    for key in keys:
        got = runs[key]
        if not got:
            print(f"| {key} | failed | failed | |")
            continue
        per_run = "; ".join(f"{r['calls_per_s']:.0f}, {r['sequential_ms']:.3f}" for r in got)
        rate = statistics.median(r["calls_per_s"] for r in got)
        seq = statistics.median(r["sequential_ms"] for r in got)
        print(f"| {key} | {rate:,.0f} | {seq:.3f} | {per_run} |")
    print(json.dumps({"started": started, "runs": runs}))


def main(argv: list[str] | None = None) -> None:
    """Measure one contender (``--contender``) and print one JSON line, or all of them (``--rounds``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", choices=sorted({*KEYS, *ALIASES}))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(KEYS), help="comma-separated contenders for --rounds")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--inflight", type=int, default=50)
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--server-json", default=json.dumps(_DEFAULT_SERVER))
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another checkout; with --rounds, a contender KEY@NAME runs KEY on that checkout's package",
    )
    options = parser.parse_args(argv)
    shape = ["--seconds", str(options.seconds), "--inflight", str(options.inflight)]
    shape += ["--sequential", str(options.sequential), "--server-json", options.server_json]
    if options.contender is None:
        trees = dict(tree.split("=", 1) for tree in options.tree)
        _rounds([k for k in options.only.split(",") if k], options.rounds, shape, trees)
        return
    result = _measure_one(
        ALIASES.get(options.contender, options.contender),
        json.loads(options.server_json),
        seconds=options.seconds,
        inflight=options.inflight,
        sequential=options.sequential,
    )
    print(json.dumps({"contender": options.contender, **result}), flush=True)


if __name__ == "__main__":
    main()
