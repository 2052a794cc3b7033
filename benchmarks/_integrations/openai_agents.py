"""OpenAI Agents SDK: ``SupervisedMcpServer`` ("ours") against the SDK's own ``MCPServerStdio`` ("own").

Both contenders are called through ``MCPServer.call_tool(name, arguments)``: the method the
SDK's tool wrapper (``MCPUtil.invoke_mcp_tool``, behind the ``FunctionTool`` an agent's
model calls) awaits for every call, so both pay the same wrapper on top and the wrapper is
left out of both. Each lists its tools once first, as an agent's first turn does.

* "ours": ``mcp_actors.asyncio.open_runtime()`` (its default mode, trio as a guest on the
  loop) on a temporary config holding the light stdio server, and the server's
  ``SupervisedMcpServer`` (the tool's default name, ``mcp__bench__echo``).
* "own": ``MCPServerStdio`` with ``cache_tools_list=True``, connected (``async with``) to the
  same server program, as ``benchmarks/drivers/openai_agents.py`` configures it (session
  read timeout raised to 60 s so a queue of in-flight calls measures speed, not time-outs).
* "floor": a ``call_tool`` answering a ready result (the harness alone); "wire_floor": a
  ``call_tool`` calling the light server through a hand-written client
  (:mod:`benchmarks._integrations._wire_floor`), the least any client pays here.

Both run in this project's venv: ``openai-agents`` (the ``openai-agents`` extra) works with
our ``mcp`` 2.x, so no peer venv is needed.

    python -m benchmarks._integrations.openai_agents --contender ours|own --seconds 3
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import mcp.types as mcp_types
from agents.mcp import MCPServerStdio, MCPServerStdioParams

from benchmarks._integrations._measure import Call, main, open_bench_runtime
from mcp_actors.integrations.openai_agents import SupervisedMcpServer, mcp_servers

__all__ = ["CONTENDERS", "open_ours", "open_own"]

SESSION_TIMEOUT = 60.0
"""The SDK session's read timeout for "own" (its default, 5 s, would fail calls queued behind 50 in flight)."""


def _check(result: object) -> None:
    if getattr(result, "is_error", False):
        raise RuntimeError(f"the echo call failed: {result!r}")


@contextlib.asynccontextmanager
async def open_ours(server_argv: list[str]) -> AsyncIterator[Call]:
    """Our runtime (asyncio, default mode) with the light server; yields one ``echo`` through our MCPServer."""
    async with open_bench_runtime(server_argv) as service:
        [server] = await mcp_servers(service, ["bench"])
        await _first_listing(server)

        async def call() -> None:
            _check(await server.call_tool("mcp__bench__echo", {"text": "hi"}))

        yield call


async def _first_listing(server: SupervisedMcpServer | MCPServerStdio) -> None:
    names = [tool.name for tool in await server.list_tools()]
    if not any(name.endswith("echo") for name in names):
        raise RuntimeError(f"the light server offers no echo tool: {names}")


@contextlib.asynccontextmanager
async def open_own(server_argv: list[str]) -> AsyncIterator[Call]:
    """The SDK's own stdio client on the light server; yields one ``echo`` through its MCPServer."""
    params: MCPServerStdioParams = {"command": server_argv[0], "args": server_argv[1:]}
    async with MCPServerStdio(
        params, cache_tools_list=True, name="bench", client_session_timeout_seconds=SESSION_TIMEOUT
    ) as server:
        await _first_listing(server)

        async def call() -> None:
            _check(await server.call_tool("echo", {"text": "hi"}))

        yield call


@contextlib.asynccontextmanager
async def open_floor(server_argv: list[str]) -> AsyncIterator[Call]:
    """The framework's floor on this path: none. ``MCPServer.call_tool`` is the server object's own
    method (the SDK's wrapper is left out of both contenders), so the floor is an ``MCPServer``
    whose ``call_tool`` answers a ready result: this harness alone."""
    del server_argv
    answer = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="hi")])

    async def call_tool(name: str, arguments: dict[str, object] | None) -> mcp_types.CallToolResult:
        return answer

    async def call() -> None:
        _check(await call_tool("echo", {"text": "hi"}))

    yield call


@contextlib.asynccontextmanager
async def open_wire_floor(server_argv: list[str]) -> AsyncIterator[Call]:
    """The least any client pays here: a ``call_tool`` that calls ``echo`` on the light server through the
    hand-written client of :mod:`benchmarks._integrations._wire_floor` and builds the SDK's result."""
    from benchmarks._integrations._wire_floor import open_wire_floor as open_client

    async with open_client(server_argv) as client:

        async def call_tool(name: str, arguments: dict[str, object] | None) -> mcp_types.CallToolResult:
            result = await client.request("tools/call", {"name": name, "arguments": arguments or {}})
            return mcp_types.CallToolResult.model_validate(result)

        async def call() -> None:
            _check(await call_tool("echo", {"text": "hi"}))

        yield call


CONTENDERS = {"ours": open_ours, "own": open_own, "floor": open_floor, "wire_floor": open_wire_floor}
CONTENDER_NAMES = ("ours", "own", "floor", "wire_floor")
"""What ``benchmarks.integrations`` measures of this module (read there without importing it)."""

if __name__ == "__main__":
    main(CONTENDERS)
