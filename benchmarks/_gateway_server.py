"""A gateway process for ``benchmarks/gateway.py``: one kind of gateway in front of one stdio upstream.

Run as the benchmark harness runs an HTTP server (``{"http": argv}``): it prints its
endpoint URL as the first line on stdout and serves until its stdin closes, then stops the
runtime (the upstream's process with it)::

    python benchmarks/_gateway_server.py --kind lean|sdk [--profile STATS] -- <upstream argv...>

``--profile``: the whole run under cProfile, its stats written to ``STATS`` when it ends (where
the gateway's CPU per call goes: ``python -m pstats STATS``).

Kinds:

* ``lean``: the product, :func:`mcp_actors.serve.serve_http` (our HTTP/1.1 server side,
  requests dispatched straight into the runtime's ``McpService`` in the same trio loop).
* ``sdk``: the SDK's server stack on the same runtime: a low-level ``mcp.server.Server``
  whose handlers call the same ``McpService``, served by the SDK's
  ``StreamableHTTPSessionManager`` (``Server.streamable_http_app``, JSON responses: its
  cheaper mode) under hypercorn's trio worker, in the same trio loop as the runtime. The
  cheapest credible way to build the gateway on the SDK; it is only a benchmark contender.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_actors._config.codec import record_from_json_dict
from mcp_actors._config.record import new_server_id
from mcp_actors._config.store import ConfigStore
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService


def _config(upstream: list[str]) -> Path:
    path = Path(tempfile.mkdtemp(prefix="mcp-actors-gateway-bench-")) / "mcp-config.json"
    record = record_from_json_dict(
        {
            "id": new_server_id(),
            "name": "up",
            "type": "stdio",
            "config": {"command": upstream[0], "args": upstream[1:], "protocol": "legacy"},
            "isTrusted": True,
        }
    )
    ConfigStore(path).save([record])
    return path


async def _until_stdin_closes() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        while await stdin.receive_some(1024):
            pass


def _announce(url: str) -> None:
    sys.stdout.write(url + "\n")
    sys.stdout.flush()


async def _lean(service: McpService) -> None:
    from mcp_actors.serve import serve_http

    async with trio.open_nursery() as nursery:
        # One upstream: its tools keep their own names (the harness calls "echo").
        gateway = await nursery.start(functools.partial(serve_http, service, naming=_own_name))
        _announce(gateway.url)
        await _until_stdin_closes()
        await gateway.stop(1.0)


def _own_name(server: str, tool: str) -> str:
    """The naming of a gateway in front of one server: every tool keeps its own name."""
    return tool


def _sdk_server(service: McpService) -> Any:
    """A low-level SDK server relaying tools/list and tools/call to ``service`` (the tools' own names)."""
    import mcp.types as types
    from mcp.server import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tools = await service.list_server_tools("up")
        listed = [t.definition for t in tools if t.definition is not None]
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await service.call_tool("up", params.name, params.arguments or {})

    return Server("mcp-actors-sdk-gateway", on_list_tools=list_tools, on_call_tool=call_tool)


async def _sdk(service: McpService) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    server = _sdk_server(service)
    app = server.streamable_http_app(json_response=True)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.loglevel = "WARNING"
    config.accesslog = None
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(functools.partial(serve, app, config, shutdown_trigger=shutdown.wait))
        _announce(f"{binds[0]}/mcp")
        await _until_stdin_closes()
        shutdown.set()


def main() -> None:
    """Parse, start the runtime, serve the chosen kind until stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("lean", "sdk"), required=True)
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats of the whole run here")
    parser.add_argument("upstream", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    upstream = [a for a in args.upstream if a != "--"]
    config = _config(upstream)

    async def run() -> None:
        async with open_runtime(config) as runtime:
            await runtime.service.list_server_tools("up")  # connected before the URL is announced
            await (_lean if args.kind == "lean" else _sdk)(runtime.service)

    if args.profile is None:
        trio.run(run)
        return
    import cProfile

    profiler = cProfile.Profile(time.process_time)  # CPU, not the waits for a core on a busy machine
    try:
        profiler.runcall(trio.run, run)
    finally:
        profiler.dump_stats(args.profile)


if __name__ == "__main__":
    main()
