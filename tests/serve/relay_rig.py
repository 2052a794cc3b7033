"""A gateway in front of one in-memory demo server, and the SDK's client with host callbacks, for the relay tests.

In process and on loopback: the upstream is the demo server (its ``ask_model``, ``ask_user``,
``list_host_roots``, ``log`` and ``bump_counter`` tools ask the client, log and change a
resource the way each revision says), served in memory under a stdio record whose
``config.protocol`` picks the revision the gateway speaks to it (``legacy``: 2025-11-25, where
the server sends requests; ``auto``: 2026-07-28, where it answers ``InputRequiredResult``).
The gateway serves real sockets on 127.0.0.1; the client is the SDK's ``ClientSession`` over
its streamable-HTTP transport, with the callbacks a host gives it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp.types as types
import trio
from mcp import Client

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.serve import HttpGateway, serve_http
from mcp_actors.testing import demo_server_command
from mcp_actors.testing.memory import memory_demo_server

BOUND = 30.0
"""Upper bound of any one step: real sockets, a loaded machine."""


@contextlib.asynccontextmanager
async def demo_gateway(tmp_path: Path, protocol: str) -> AsyncIterator[tuple[Runtime, HttpGateway]]:
    """A runtime whose one server ``demo`` (in memory, ``config.protocol`` = ``protocol``) a gateway serves."""
    async with demo_runtime(tmp_path, protocol) as runtime, trio.open_nursery() as nursery:
        gateway: HttpGateway = await nursery.start(serve_http, runtime.service)
        yield runtime, gateway
        with trio.fail_after(BOUND):
            await gateway.stop(1.0)


@contextlib.asynccontextmanager
async def demo_runtime(tmp_path: Path, protocol: str) -> AsyncIterator[Runtime]:
    """A runtime whose one server is ``demo``, in memory, spoken to with ``config.protocol`` = ``protocol``."""
    made: dict[str, MemoryParams] = {}

    def from_record(record: McpServerRecord) -> TransportParams:
        if record.name not in made:
            made[record.name] = MemoryParams(server=memory_demo_server())
        return made[record.name]

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)  # a fresh install's built-in demo server
            argv = demo_server_command()
            entry = {"type": "stdio", "command": argv[0], "args": argv[1:], "protocol": protocol}
            await runtime.service.add_json(json.dumps({"mcpServers": {"demo": entry}}))
            (record,) = await runtime.service.list()
            assert record.config.protocol == protocol, "the rig must speak the revision its test names"
            yield runtime
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


@contextlib.asynccontextmanager
async def sdk_client(url: str, version: str, **options: Any) -> AsyncIterator[Client]:
    """The SDK's ``Client`` at ``version`` with ``options`` (``sampling_callback``, ``message_handler``...).

    At 2026-07-28 it drives an ``InputRequiredResult`` itself: the embedded requests go to the
    same callbacks, and the request is retried with the answers.
    """
    async with Client(url, mode="legacy" if version != "2026-07-28" else version, **options) as client:
        assert client.session.protocol_version == version
        yield client


def text_of(result: types.CallToolResult) -> str:
    """The text blocks of a tool result, joined."""
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))
