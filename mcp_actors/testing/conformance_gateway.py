"""A gateway (``mcp-actors serve``) in front of one upstream MCP server, for the conformance suite.

Why: the suite's server scenarios call tools, prompts and resources of fixed names
(``test_simple_text``, ``test://static-text``); run against a gateway whose one upstream is
the fixture server (:mod:`mcp_actors.testing.conformance_server`), they show what the gateway
relays of the whole protocol. The gateway keeps the upstream's own names
(``naming=lambda server, name: name``), so the suite finds them.

Run it with ``python -m mcp_actors.testing.conformance_gateway --upstream URL --port 0``;
once it accepts connections it writes one line to stderr::

    mcp-actors: listening on http://127.0.0.1:40123/mcp

The gateway speaks to its upstream at one revision (one connection per server), whatever its
clients speak: ``--protocol legacy`` for the handshake revisions, ``auto`` (the default) for
the newest. ``tests/conformance/run.py server --gateway`` starts the fixture server and this gateway in
front of it. SIGINT or SIGTERM stop it (the gateway's graceful stop, then the runtime's).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from mcp_actors._demo.announce import format_announce

if TYPE_CHECKING:
    from mcp_actors.runtime import Runtime

__all__ = ["main", "run_gateway"]

UPSTREAM_NAME = "conformance"
"""The record name of the one upstream server."""


def _keep_name(server: str, name: str) -> str:
    return name


async def run_gateway(
    upstream: str, *, host: str = "127.0.0.1", port: int = 0, protocol: str = "auto", config_dir: Path
) -> None:
    """Serve a gateway in front of the streamable-HTTP server at ``upstream`` until SIGINT or SIGTERM.

    ``protocol`` is the upstream record's ``config.protocol``: ``legacy`` speaks the handshake
    revisions to it (its server-to-client requests are then 2025-style requests), ``auto`` the
    newest both sides speak (2026-07-28 with the fixture).
    """
    from mcp_actors.runtime import open_runtime

    async with open_runtime(config_dir / "servers.json", config_poll_interval=0) as runtime:
        for record in await runtime.service.list():
            await runtime.service.remove(record.id)  # a fresh config's built-in demo server
        await runtime.service.add(
            {"name": UPSTREAM_NAME, "type": "http", "config": {"url": upstream, "protocol": protocol}}
        )
        await _serve(runtime, host, port)


async def _serve(runtime: Runtime, host: str, port: int) -> None:
    from mcp_actors.serve import serve_http

    async with trio.open_nursery() as nursery:
        gateway = await nursery.start(
            lambda task_status: serve_http(
                runtime.service, host=host, port=port, naming=_keep_name, task_status=task_status
            )
        )
        print(format_announce(gateway.url), file=sys.stderr, flush=True)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                break
        await gateway.stop(grace=2)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_actors.testing.conformance_gateway",
        description="A gateway in front of one streamable-HTTP MCP server, keeping its names.",
    )
    parser.add_argument("--upstream", required=True, help="the upstream server's MCP endpoint")
    parser.add_argument(
        "--protocol",
        choices=("auto", "legacy"),
        default="auto",
        help="the upstream's config.protocol (default: auto, the newest revision both speak)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default: 0)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the gateway from the command line until SIGINT or SIGTERM.

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.
    """
    args = _parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcp-actors-conformance-gateway-") as config_dir:
        trio.run(
            lambda: run_gateway(
                args.upstream, host=args.host, port=args.port, protocol=args.protocol, config_dir=Path(config_dir)
            )
        )


if __name__ == "__main__":
    main()
