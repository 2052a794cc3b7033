"""Helpers for the protocol-feature tests: the demo server over stdio and streamable HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from testkit import demo_http_app, serve_in_thread

from mcp_actors import events
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService
from mcp_actors.testing import demo_server_command

TRANSPORTS = ("stdio", "http")
PROTOCOLS = ("legacy", "auto")
"""config.protocol values: the handshake (2025-11-25 with the demo server), server/discover (2026-07-28)."""
NEGOTIATED = {"legacy": "2025-11-25", "auto": "2026-07-28"}
"""The revision the demo server speaks under each config.protocol."""


def negotiated(svc: McpService, server: str) -> str | None:
    """The protocol revision the server's live session negotiated (``None`` when not connected)."""
    record = svc.get(server)
    live = svc._registry.snapshot.handles[record.id]._cell.live
    return live.session.protocol_version if live is not None else None


def text_of(result: Any) -> str:
    """The concatenated text items of a result."""
    return "".join(getattr(item, "text", "") for item in result.content)


@asynccontextmanager
async def demo_service(tmp_path: Path, transport: str, **config: Any) -> AsyncIterator[McpService]:
    """A runtime with the demo server named 'srv', spawned (stdio) or served in a thread here (streamable HTTP).

    The HTTP server outlives the runtime: the client closes its session first, so the server
    has no open connection to wait for when it stops (it would wait out its graceful timeout).
    """
    base = {"pingInterval": 0, **config}
    if transport == "stdio":
        argv = demo_server_command()
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False) as rt:
            await rt.service.add(
                {"name": "srv", "type": "stdio", "config": {"command": argv[0], "args": argv[1:], **base}}
            )
            yield rt.service
        return
    async with (
        serve_in_thread(demo_http_app) as url,
        open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False) as rt,
    ):
        await rt.service.add({"name": "srv", "type": "http", "config": {"url": url, **base}})
        yield rt.service


async def next_event(sub: events.Subscription, kind: events.EventType, where: Callable[[events.Event], bool]) -> Any:
    """The next event of ``kind`` satisfying ``where`` (bounded generously by the caller)."""
    async for event in sub:
        if event.type == kind and where(event):
            return event
    raise AssertionError("event bus closed")


BOUND = 60.0
"""Real seconds any one wait may take on a loaded 2-core machine (each takes well under 2 s alone)."""
