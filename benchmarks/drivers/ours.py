"""Driver: mcp-actors, through ``open_runtime()`` and the ``McpService`` facade.

Runs with the project's interpreter on trio. The servers are written to a private config
file before the clock starts (a configured install); connecting is lazy, as in real use,
so the first listing of a server is what connects it.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _harness

from mcp_actors._config.codec import record_from_json_dict
from mcp_actors._config.record import new_server_id
from mcp_actors._config.store import ConfigStore
from mcp_actors.formats import setup_mcp_tools
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService

CONNECT_TIMEOUT = 600.0
"""Seconds a server may take to connect: the raw SDK has no such bound, so ours must not fire first."""
PROTOCOL = os.environ.get("MCP_ACTORS_BENCH_PROTOCOL", "legacy")
"""The servers' ``protocol`` mode: ``legacy`` (the default, see ``prepare``), or ``auto`` where a
benchmark wants the 2026-07-28 revision when the server offers it (``benchmarks/gateway.py --replicas``:
stateless requests, so a load balancer may send each anywhere)."""


class OursSession:
    """Calls go by server name through the registry facade, as a host would make them."""

    def __init__(self, service: McpService, names: list[str]) -> None:
        self.service = service
        self.names = names

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        result = await self.service.call_tool(self.names[server], tool, arguments)
        if result.is_error:
            raise RuntimeError(f"tool error from {tool}")

    async def tool_names(self, server: int) -> list[str]:
        return [t.name for t in await self.service.list_server_tools(self.names[server])]


class OursDriver:
    def __init__(self) -> None:
        self.path = Path(os.environ["MCP_ACTORS_STATE_DIR"]) / f"bench-config-{os.getpid()}.json"
        self.names: list[str] = []

    def prepare(self, servers: list[Any]) -> None:
        self.names = [f"s{i}" for i in range(len(servers))]
        records = [
            record_from_json_dict(
                {
                    "id": new_server_id(),
                    "name": name,
                    "type": "http" if isinstance(server, str) else "stdio",
                    # A URL (the harness started an HTTP server) is a streamable-HTTP server.
                    # connectTimeout raised (default 30 s) so that it does not fire on a busy
                    # machine: twenty npx servers on two loaded cores can take longer to start.
                    # protocol "legacy": the classic initialize, the handshake every other contender
                    # uses (raw_sdk.py's mode="legacy"). Our default, "auto" (as the SDK's Client's),
                    # first asks server/discover: one more round trip per server at start-up.
                    "config": {"url": server, "connectTimeout": CONNECT_TIMEOUT, "protocol": PROTOCOL}
                    if isinstance(server, str)
                    else {
                        "command": server[0],
                        "args": server[1:],
                        "connectTimeout": CONNECT_TIMEOUT,
                        "protocol": "legacy",
                    },
                    "isTrusted": True,
                }
            )
            for name, server in zip(self.names, servers, strict=True)
        ]
        ConfigStore(self.path).save(records)

    @contextlib.asynccontextmanager
    async def open(self, servers: list[Any]) -> AsyncIterator[OursSession]:
        async with open_runtime(self.path, connect_on_add=False) as runtime:
            yield OursSession(runtime.service, self.names)


async def tool_setup(driver: OursDriver, job: dict[str, Any]) -> dict[str, Any]:
    """``setup_mcp_tools`` per LLM request, tool lists and conversions cached (after one warm call)."""
    servers = job["servers"]
    driver.prepare(servers)
    out: dict[str, Any] = {}
    config = {"enabled": True, "mode": "auto"}
    async with driver.open(servers) as session:
        cold_start = time.perf_counter()
        first = await setup_mcp_tools(session.service, config, "openai")
        out["cold_seconds"] = time.perf_counter() - cold_start
        assert first is not None
        out["tools"] = len(first[1])
        for fmt in job["formats"]:
            await setup_mcp_tools(session.service, config, fmt)  # warm this format's cache
            latencies = []
            for _ in range(job["reps"]):
                start = time.perf_counter()
                got = await setup_mcp_tools(session.service, config, fmt)
                latencies.append(time.perf_counter() - start)
            assert got is not None and len(got[1]) == out["tools"]
            out[fmt] = {"median": statistics.median(latencies), "max": max(latencies), "latencies": latencies}
    return out


if __name__ == "__main__":
    sys.setrecursionlimit(10_000)
    _harness.main(OursDriver(), {"tool_setup": tool_setup})  # type: ignore[dict-item]
