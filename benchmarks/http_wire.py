"""Client CPU per call over streamable HTTP: our wire vs the SDK's client vs the floor, side by side.

One process, one light server (``benchmarks/_toolserver.py --http``: JSON answers, keep-alive),
the contenders one after the other, in rotating order over ``--rounds`` rounds:

* ``floor``: :class:`benchmarks.stress_floor.FloorHttpClient` (raw HTTP/1.1 on trio sockets);
* ``wire``: :class:`mcp_actors._wire.http.wire.HttpWire` with the smallest possible dispatcher (a
  counter for ids; ``send`` has delivered the answer when it returns);
* ``wire+session``: the SDK's ``ClientSession`` on our ``WireDispatcher`` over the wire, as a
  connection actor runs it (without the actor, the mailbox and the service);
* ``sdk``: the SDK's ``ClientSession`` on its own ``streamable_http_client``;
* ``ours``: the whole of mcp-actors, ``open_runtime()`` and ``McpService.call_tool`` (what
  ``hot_path`` measures as mcp-actors), with a private config and state directory.

Per contender: CPU per sequential call (``time.process_time()`` / calls: the server is another
process), median wall latency, and calls/s with ``--inflight`` calls in flight (and CPU per call
there). Prints a table, medians over rounds, and the load average before and after.

    python -m benchmarks.http_wire [--calls 2000] [--inflight 50] [--rounds 3] [--contenders ...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import trio

from benchmarks._common import toolserver
from benchmarks.stress_floor import open_floor_http

__all__ = ["main"]

Call = Callable[[], Awaitable[None]]
ARGS = {"text": "hello"}


@contextlib.asynccontextmanager
async def _floor(url: str) -> AsyncIterator[Call]:
    async with open_floor_http(url) as client:

        async def call() -> None:
            await client.request("tools/call", {"name": "echo", "arguments": ARGS})

        yield call


@contextlib.asynccontextmanager
async def _wire(url: str) -> AsyncIterator[Call]:
    from mcp_actors._wire.http.transport import HttpParams, open_http_transport
    from mcp_actors._wire.http.wire import HttpWire

    answers: dict[Any, dict[str, Any]] = {}

    def deliver(message: dict[str, Any]) -> None:
        if "id" in message and "method" not in message:
            answers[message["id"]] = message

    next_id = [0]
    headers = {"mcp-protocol-version": "2025-11-25"}

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        next_id[0] += 1
        rpc_id = next_id[0]
        await wire.send({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}, headers=headers)
        answer = answers.pop(rpc_id)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return dict(answer["result"])

    async with open_http_transport(HttpParams(url=url), label="bench") as link, trio.open_nursery() as nursery:
        assert isinstance(link.wire, HttpWire)
        wire: HttpWire = link.wire
        await nursery.start(wire.run, deliver)
        info = {"name": "bench", "version": "0"}
        await request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info})
        await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)

        async def call() -> None:
            result = await request("tools/call", {"name": "echo", "arguments": ARGS})
            if result.get("isError"):
                raise RuntimeError("tool error")

        yield call
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _wire_session(url: str) -> AsyncIterator[Call]:
    from mcp import ClientSession

    from mcp_actors._wire.dispatch import WireDispatcher
    from mcp_actors._wire.http.transport import HttpParams, open_http_transport

    async with open_http_transport(HttpParams(url=url), label="bench") as link:
        assert link.wire is not None
        async with ClientSession(dispatcher=WireDispatcher(link.wire)) as session:
            await session.initialize()

            async def call() -> None:
                await session.call_tool("echo", ARGS)

            yield call


@contextlib.asynccontextmanager
async def _sdk(url: str) -> AsyncIterator[Call]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()

        async def call() -> None:
            await session.call_tool("echo", ARGS)

        yield call


@contextlib.asynccontextmanager
async def _ours(url: str) -> AsyncIterator[Call]:
    import tempfile
    from pathlib import Path

    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.runtime import open_runtime

    with tempfile.TemporaryDirectory() as tmp:
        previous = os.environ.get("MCP_ACTORS_STATE_DIR")
        os.environ["MCP_ACTORS_STATE_DIR"] = tmp
        try:
            path = Path(tmp) / "config.json"
            record = {"id": new_server_id(), "name": "bench", "type": "http", "config": {"url": url}, "isTrusted": True}
            ConfigStore(path).save([record_from_json_dict(record)])
            async with open_runtime(path, connect_on_add=False) as runtime:
                service = runtime.service

                async def call() -> None:
                    result = await service.call_tool("bench", "echo", ARGS)
                    if result.is_error:
                        raise RuntimeError("tool error")

                yield call
        finally:
            if previous is None:
                os.environ.pop("MCP_ACTORS_STATE_DIR", None)
            else:
                os.environ["MCP_ACTORS_STATE_DIR"] = previous


CONTENDERS = {"floor": _floor, "wire": _wire, "wire+session": _wire_session, "sdk": _sdk, "ours": _ours}


async def _measure(opener: Any, url: str, calls: int, inflight: int) -> dict[str, float]:
    async with opener(url) as call:
        for _ in range(100):
            await call()
        latencies = []
        cpu = time.process_time()
        for _ in range(calls):
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)
        seq_cpu = (time.process_time() - cpu) / calls
        remaining = [calls * 2]

        async def worker() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                await call()

        start, cpu = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for _ in range(inflight):
                nursery.start_soon(worker)
        wall = time.perf_counter() - start
        par_cpu = (time.process_time() - cpu) / (calls * 2)
    return {
        "cpu_seq_us": seq_cpu * 1e6,
        "latency_us": statistics.median(latencies) * 1e6,
        "calls_per_s": calls * 2 / wall,
        "cpu_par_us": par_cpu * 1e6,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--inflight", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.contenders.split(",")]
    server = subprocess.Popen([*toolserver(), "--http"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdout is not None and server.stdin is not None
    url = server.stdout.readline().decode().strip()
    print(f"load average before: {os.getloadavg()}; server {url}")
    results: dict[str, list[dict[str, float]]] = {k: [] for k in keys}
    try:
        for round_ in range(args.rounds):
            order = keys[round_ % len(keys) :] + keys[: round_ % len(keys)]
            for key in order:
                results[key].append(trio.run(_measure, CONTENDERS[key], url, args.calls, args.inflight))
    finally:
        server.stdin.close()
        server.wait(10)
    print(f"load average after: {os.getloadavg()}")
    at = f"CPU/call @{args.inflight}"
    print(f"{'contender':14} {'CPU/call seq':>13} {'latency':>10} {'calls/s':>9} {at:>14}")
    for key in keys:
        rows = results[key]

        def med(field: str, rows: list[dict[str, float]] = rows) -> float:
            return statistics.median(r[field] for r in rows)

        print(
            f"{key:14} {med('cpu_seq_us'):10.0f} us {med('latency_us'):7.0f} us {med('calls_per_s'):9.0f}"
            f" {med('cpu_par_us'):11.0f} us"
        )


if __name__ == "__main__":
    main()
