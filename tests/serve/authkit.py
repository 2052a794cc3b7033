"""Helpers of the gateway's auth tests: a gateway with auth over an in-memory demo server, the SDK client."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from sharedhttp import loopback_client

from mcp_actors._config.codec import record_to_json_dict
from mcp_actors._config.record import builtin_demo_record
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.serve import GatewayAuth, HttpGateway, serve_http
from mcp_actors.testing.memory import records_in_memory

BOUND = 30.0
"""Upper bound of any one step: real sockets, a loaded machine."""


PROFILES = {"github": {"servers": {"demo": {}}}, "slack": {"servers": {"demo": {"tools": ["echo"]}}}}
"""Two profiles of the built-in demo server, served at ``/mcp/github`` and ``/mcp/slack``."""


@contextlib.asynccontextmanager
async def auth_gateway(tmp_path: Path, auth: GatewayAuth | None, **options: Any) -> AsyncIterator[HttpGateway]:
    """A gateway with ``auth`` over the built-in demo server (in memory) and :data:`PROFILES`, on loopback."""
    records = [record_to_json_dict(builtin_demo_record())]
    (tmp_path / "cfg.json").write_text(json.dumps({"version": 1, "mcpServers": records, "profiles": PROFILES}))
    with records_in_memory():
        async with open_runtime(tmp_path / "cfg.json") as runtime, trio.open_nursery() as nursery:
            start = functools.partial(serve_http, runtime.service, auth=auth, **options)
            gateway: HttpGateway = await nursery.start(start)
            yield gateway
            with trio.fail_after(BOUND):
                await gateway.stop(0.5)


@contextlib.asynccontextmanager
async def runtime_gateway(tmp_path: Path, auth: GatewayAuth | None) -> AsyncIterator[tuple[Runtime, HttpGateway]]:
    """:func:`auth_gateway`, with the runtime (for tests that configure their own servers)."""
    async with open_runtime(tmp_path / "cfg.json") as runtime, trio.open_nursery() as nursery:
        gateway: HttpGateway = await nursery.start(functools.partial(serve_http, runtime.service, auth=auth))
        yield runtime, gateway
        with trio.fail_after(BOUND):
            await gateway.stop(0.5)


@contextlib.asynccontextmanager
async def sdk_session(
    url: str, *, token: str | None = None, auth: httpx2.Auth | None = None
) -> AsyncIterator[ClientSession]:
    """The SDK's ClientSession over its streamable-HTTP transport, initialized, sending ``token`` as a bearer."""
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    async with loopback_client(headers=headers, auth=auth, timeout=BOUND) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(dispatcher=JSONRPCDispatcher(read, write)) as session:
                with trio.fail_after(BOUND):
                    await session.initialize()
                yield session


async def post_raw(url: str, *, token: str | None = None, headers: dict[str, str] | None = None) -> httpx2.Response:
    """One ``initialize`` POST to ``url`` with ``token``: what a refusal looks like on the wire."""
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **(headers or {})}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    async with loopback_client(timeout=BOUND) as http:
        with trio.fail_after(BOUND):
            return await http.post(url, json=body, headers=sent)
