"""The Anthropic SDK's tool runner: one ``echo`` call through each contender's function tool.

* ``ours``: :func:`mcp_actors.integrations.anthropic.async_tools` over the service of
  ``mcp_actors.asyncio.open_runtime()`` (its default mode; a temporary config with the
  light stdio server as ``bench``); one call is
  ``await tool.call({"text": ...})`` — what ``BetaAsyncToolRunner`` awaits for a ``tool_use``.
* ``own``: the SDK's own MCP helper, ``anthropic.lib.tools.mcp.async_mcp_tool``, over an
  ``mcp.ClientSession`` on the official SDK's stdio client to the same server; one call is
  the same ``await tool.call(...)``.
* ``floor``: a ``beta_async_tool`` answering without any server (the tool layer alone);
  ``wire_floor``: the same tool calling the light server through a hand-written client
  (:mod:`benchmarks._integrations._wire_floor`), the least any client pays here.

Both run in the project's venv: the helper reads mcp 2.x's snake_case fields (and 1.x's
camelCase ones), so "own" needs nothing beyond ``mcp-actors[anthropic]`` and ``mcp``.

    python -m benchmarks._integrations.anthropic --contender ours --seconds 3
    python -m benchmarks._integrations.anthropic --contender own --seconds 3
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from benchmarks._integrations._measure import Call, main, open_bench_runtime

__all__ = ["CONTENDERS"]

_ARGUMENTS = {"text": "benchmark"}


def _check(result: Any) -> object:
    """The call's content, after checking it is the echoed text (a failure must not pass for a fast call)."""
    if result != [{"type": "text", "text": _ARGUMENTS["text"]}]:
        raise RuntimeError(f"echo answered {result!r}")
    return result


@asynccontextmanager
async def ours(server_argv: list[str]) -> AsyncIterator[Call]:
    """The light server on the asyncio runtime (default mode); ``echo`` as an ``McpAsyncFunctionTool``."""
    from mcp_actors.integrations.anthropic import async_tools

    async with open_bench_runtime(server_argv) as service:
        [echo] = await async_tools(service, ["bench"], tools=["echo"])

        async def call() -> object:
            return _check(await echo.call(_ARGUMENTS))

        yield call


@asynccontextmanager
async def own(server_argv: list[str]) -> AsyncIterator[Call]:
    """The light server on the official SDK's stdio client; ``echo`` as the SDK helper's ``async_mcp_tool``."""
    from anthropic.lib.tools.mcp import async_mcp_tool
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async with AsyncExitStack() as stack:
        params = StdioServerParameters(command=server_argv[0], args=server_argv[1:])
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        listed = await session.list_tools()
        [echo] = [async_mcp_tool(tool, session) for tool in listed.tools if tool.name == "echo"]

        async def call() -> object:
            return _check(await echo.call(_ARGUMENTS))

        yield call


@asynccontextmanager
async def floor(server_argv: list[str]) -> AsyncIterator[Call]:
    """The SDK's own floor: a ``beta_async_tool`` whose coroutine answers the echoed text; ``call`` as above."""
    from anthropic.lib.tools import beta_async_tool

    del server_argv

    @beta_async_tool
    async def echo(text: str) -> Any:
        """Return the given text unchanged."""
        return [{"type": "text", "text": text}]

    async def call() -> object:
        return _check(await echo.call(_ARGUMENTS))

    yield call


@asynccontextmanager
async def wire_floor(server_argv: list[str]) -> AsyncIterator[Call]:
    """The least any client pays here: a ``beta_async_tool`` whose coroutine calls ``echo`` on the light
    server through the hand-written client of :mod:`benchmarks._integrations._wire_floor`."""
    from anthropic.lib.tools import beta_async_tool

    from benchmarks._integrations._wire_floor import open_wire_floor

    async with open_wire_floor(server_argv) as client:

        @beta_async_tool
        async def echo(text: str) -> Any:
            """Return the given text unchanged."""
            result = await client.request("tools/call", {"name": "echo", "arguments": {"text": text}})
            return result["content"]

        async def call() -> object:
            return _check(await echo.call(_ARGUMENTS))

        yield call


CONTENDERS = {"ours": ours, "own": own, "floor": floor, "wire_floor": wire_floor}
CONTENDER_NAMES = ("ours", "own", "floor", "wire_floor")
"""What ``benchmarks.integrations`` measures of this module (read there without importing it)."""

if __name__ == "__main__":
    main(CONTENDERS)
