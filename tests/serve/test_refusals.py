"""An upstream's protocol refusal of a tool call, as the gateway's client receives it.

Most failures of a call are tool errors naming the server (the model reads them). A refusal
that is about the client, ``-32021`` (MissingRequiredClientCapability: the call needs a
capability the client did not declare), is the client's to handle in protocol form: it passes
through as the same JSON-RPC error, with its ``data`` (``requiredCapabilities``), and at
2026-07-28 with HTTP 400, as the SDK's own server answers it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
import trio
from mcp import Client, MCPError
from mcp.server.mcpserver import Context, MCPServer

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.runtime import open_runtime
from mcp_actors.serve import HttpGateway, serve_http
from mcp_actors.testing import demo_server_command

BOUND = 30.0
REQUIRED = {"requiredCapabilities": {"sampling": {}}}


def picky_server() -> MCPServer[Any]:
    """A server whose ``summarize`` needs sampling, which the gateway's runtime never declares."""
    server: MCPServer[Any] = MCPServer("picky")

    @server.tool(structured_output=False)
    async def summarize(ctx: Context) -> str:
        raise MCPError(
            code=mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool requires the client 'sampling' capability",
            data=REQUIRED,
        )

    @server.tool(structured_output=False)
    async def broken() -> str:
        raise MCPError(code=mcp_types.INTERNAL_ERROR, message="the disk is full")

    return server


@contextlib.asynccontextmanager
async def gateway(tmp_path: Path) -> AsyncIterator[HttpGateway]:
    """The record ``picky`` (served in memory) behind a gateway on a free loopback port."""
    made: dict[str, MemoryParams] = {}

    def from_record(record: McpServerRecord) -> TransportParams:
        return made.setdefault(record.name, MemoryParams(server=picky_server))

    argv = demo_server_command()
    register_transport_kind(ServerType.STDIO, from_record)
    try:
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)
            entry = {"type": "stdio", "command": argv[0], "args": argv[1:]}
            await runtime.service.add_json(json.dumps({"mcpServers": {"picky": entry}}))
            async with trio.open_nursery() as nursery:
                served: HttpGateway = await nursery.start(serve_http, runtime.service)
                yield served
                with trio.fail_after(BOUND):
                    await served.stop(1.0)
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_missing_client_capability_reaches_the_client_as_the_same_error(tmp_path: Path, mode: str) -> None:
    """The SDK's client gets -32021 with its requiredCapabilities, not a tool result; other failures: tool errors."""
    async with gateway(tmp_path) as served, Client(served.url, mode=mode) as client:
        with trio.fail_after(BOUND):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("picky__summarize", {})
            assert refused.value.error.code == mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert refused.value.error.data == REQUIRED
            assert "'picky'" in refused.value.error.message
            broken = await client.call_tool("picky__broken", {})
            assert broken.is_error and "'picky'" in str(broken.content)


async def test_at_2026_07_28_the_refusal_is_http_400(tmp_path: Path) -> None:
    """The stateless revision's status for -32021 (the SDK's ERROR_CODE_HTTP_STATUS): 400, the request's id kept."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 401,
        "method": "tools/call",
        "params": {"name": "picky__summarize", "arguments": {}, "_meta": envelope},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "picky__summarize",
    }
    async with gateway(tmp_path) as served, httpx2.AsyncClient(timeout=BOUND) as http:
        answer = await http.post(served.url, json=body, headers=headers)
    assert answer.status_code == 400
    assert answer.json()["id"] == 401
    assert answer.json()["error"]["code"] == mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert answer.json()["error"]["data"] == REQUIRED
