"""What the gateway's metrics and tracing cost a request: their wrappers timed around a constant answer.

The gateway's hot path through HTTP is too noisy on a shared machine to show a microsecond
(``benchmarks.gateway``), so the wrappers are timed alone, in process CPU time
(``time.process_time``), against awaiting the same answer bare: a ``tools/call`` of a
listed tool through :class:`~mcp_actors.serve._metrics.GatewayMetrics`, and through
:class:`~mcp_actors.serve._tracing.Tracing` with an OpenTelemetry SDK's tracer provider
that drops its spans (the span's own cost). Blocks of each shape in turn; the median per
request is printed with the load average (docs/gateway.md, Operations).

    python -m benchmarks.gateway_ops [--requests N] [--blocks N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

__all__ = ["main"]


async def _measure(requests: int, blocks: int) -> dict[str, float]:
    from opentelemetry.sdk.trace import TracerProvider

    from mcp_actors.runtime import open_runtime
    from mcp_actors.serve import Gateway
    from mcp_actors.serve._gateway import Request
    from mcp_actors.serve._metrics import GatewayMetrics
    from mcp_actors.serve._tracing import Tracing

    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "cfg.json"
        config.write_text('{"mcpServers": []}')
        async with open_runtime(config) as runtime:
            gateway = Gateway(runtime.service)
            gateway.tools.claim("server-id", "alpha", "echo")  # a listed tool: its series is found by name
            metrics = GatewayMetrics(gateway)
            tracing = Tracing(tracer=TracerProvider().get_tracer("benchmark"))  # records spans, exports none
            request = Request("tools/call", {"name": "alpha__echo", "arguments": {"text": "x"}}, "2025-11-25")
            constant: dict[str, Any] = {"content": []}

            async def answer(_request: Request) -> dict[str, Any]:
                return constant

            async def bare() -> None:
                for _ in range(requests):
                    await answer(request)

            def wrapped(around: Callable[..., Awaitable[Any]]) -> Callable[[], Awaitable[None]]:
                async def run() -> None:
                    for _ in range(requests):
                        await around(request, answer)

                return run

            shapes = {"bare": bare, "metrics": wrapped(metrics), "tracing": wrapped(tracing)}
            times: dict[str, list[float]] = {name: [] for name in shapes}
            for _ in range(blocks):
                for name, run in shapes.items():
                    start = time.process_time()
                    await run()
                    times[name].append((time.process_time() - start) / requests * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests per block")
    parser.add_argument("--blocks", type=int, default=11, help="blocks per shape")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    result = trio.run(_measure, args.requests, args.blocks)
    print(f"load average {load:.2f} -> {os.getloadavg()[0]:.2f}; {args.blocks} blocks of {args.requests} requests")
    bare = result["bare"]
    for name, value in result.items():
        added = "" if name == "bare" else f"  (+{value - bare:.2f} us)"
        print(f"{name:8} {value:.2f} us CPU per request{added}")


if __name__ == "__main__":
    main()
