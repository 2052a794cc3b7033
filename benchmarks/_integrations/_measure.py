"""Measure one contender of ``benchmarks.integrations`` in this process; print one JSON line.

Both shapes an agent feels, on the caller's asyncio loop: *sequential* (one call after
another: the per-call latency an agent step pays) and *concurrent* (``--inflight`` workers
for ``--seconds``: calls/s when a model asks for many tools at once). Warm-up calls come
first and are not counted. A wedged call is bounded (``CALL_TIMEOUT``): the run fails with
a message instead of hanging.

Usage (from a ``benchmarks/_integrations/<key>.py`` module)::

    if __name__ == "__main__":
        main(CONTENDERS)

    python -m benchmarks._integrations.<key> --contender ours|own [--seconds 6] [--inflight 50]
        [--sequential 300] [--server-json '["python", "benchmarks/_toolserver.py"]']
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

__all__ = ["CALL_TIMEOUT", "Call", "Opener", "main", "measure", "open_bench_runtime"]

CALL_TIMEOUT = 60.0
"""Upper bound of one call: a wedged contender fails its run, never hangs it."""

Call = Callable[[], Awaitable[object]]
Opener = Callable[[list[str]], AbstractAsyncContextManager[Call]]

_BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEFAULT_SERVER = [sys.executable, os.path.join(_BENCH_DIR, "_toolserver.py")]


async def measure(call: Call, *, seconds: float, inflight: int, sequential: int, warmup: int = 50) -> dict[str, Any]:
    """Warm up, then time ``sequential`` calls one by one and ``inflight`` workers for ``seconds``."""
    for _ in range(warmup):
        await asyncio.wait_for(call(), CALL_TIMEOUT)
    latencies: list[float] = []
    cpu0 = time.process_time()
    for _ in range(sequential):
        start = time.perf_counter()
        await asyncio.wait_for(call(), CALL_TIMEOUT)
        latencies.append(time.perf_counter() - start)
    seq_cpu = (time.process_time() - cpu0) / max(1, sequential)
    latencies.sort()
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await asyncio.wait_for(call(), CALL_TIMEOUT)
            done += 1

    start = time.perf_counter()
    cpu0 = time.process_time()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    elapsed = time.perf_counter() - start
    return {
        "sequential_ms": statistics.median(latencies) * 1e3,
        "sequential_p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3,
        "sequential_cpu_ms": seq_cpu * 1e3,
        "calls_per_s": done / elapsed,
        "concurrent_cpu_ms": (time.process_time() - cpu0) / max(1, done) * 1e3,
        "inflight": inflight,
    }


@asynccontextmanager
async def open_bench_runtime(server_argv: list[str]) -> AsyncIterator[Any]:
    """``mcp_actors.asyncio.open_runtime()`` on a temporary config holding the light server as ``bench``.

    The way in an asyncio host is shown everywhere (README, the framework pages): the default
    mode, trio as a guest on this loop. Yields ``rt.service``, the asyncio facade every
    integration takes.
    """
    import mcp_actors.asyncio
    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore

    with tempfile.TemporaryDirectory(prefix="mcp-actors-bench-") as home:
        os.environ["MCP_ACTORS_STATE_DIR"] = home
        config = os.path.join(home, "mcp-config.json")
        record = {"name": "bench", "type": "stdio", "config": {"command": server_argv[0], "args": server_argv[1:]}}
        ConfigStore(config).save([record_from_json_dict({"id": new_server_id(), **record})])
        async with mcp_actors.asyncio.open_runtime(config) as rt:
            yield rt.service


def main(contenders: Mapping[str, Opener], argv: list[str] | None = None) -> None:
    """Parse the arguments, measure the named contender, print its result as one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", required=True, choices=sorted(contenders))
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--inflight", type=int, default=50)
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--server-json", default=json.dumps(_DEFAULT_SERVER))
    options = parser.parse_args(argv)
    server = json.loads(options.server_json)

    async def run() -> dict[str, Any]:
        async with contenders[options.contender](server) as call:
            return await measure(
                call, seconds=options.seconds, inflight=options.inflight, sequential=options.sequential
            )

    print(json.dumps({"contender": options.contender, **asyncio.run(run())}), flush=True)
