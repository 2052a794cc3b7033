"""Google ADK: one ``echo`` call through the tool object ADK's agent loop would run, ``run_async``.

* ``ours``: :class:`~mcp_actors.integrations.google_adk.McpActorsToolset` over the service of
  ``mcp_actors.asyncio.open_runtime()`` (its default mode), the light stdio server as the only record of a
  private config file.
* ``own``: ADK's own ``McpToolset`` with ``StdioConnectionParams`` on the same server. It
  runs in our venv: google-adk's MCP client works with our ``mcp`` 2.3 (its
  ``google.adk.dependencies._mcp`` speaks both SDK majors), so no peer venv is needed. Its
  ``timeout`` (the connection timeout, which ADK also makes the bound of every request on a
  stdio session, 5 s by default) is raised to :data:`~benchmarks._integrations._measure.CALL_TIMEOUT`
  so that neither contender is cut short by a bound the other does not have.

Both are called as ADK calls a tool: ``await tool.run_async(args=..., tool_context=...)``,
with a minimal ``ToolContext`` built as ADK's own tests build one (an ``InvocationContext``
over an in-memory session). A tool error, or a failure answered as ``{"error": ...}``, raises.

    python -m benchmarks._integrations.google_adk --contender ours|own --seconds 3
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.mcp_tool.mcp_session_manager import StdioConnectionParams
from google.adk.tools.mcp_tool.mcp_toolset import McpToolset
from google.adk.tools.tool_context import ToolContext
from mcp import StdioServerParameters

from benchmarks._integrations._measure import CALL_TIMEOUT, Call, main, open_bench_runtime
from mcp_actors.integrations.google_adk import McpActorsToolset

__all__ = ["CONTENDERS"]

ARGS = {"text": "hello"}


async def tool_context() -> ToolContext:
    """A minimal ToolContext, as ADK's tests make one: an invocation over an in-memory session."""
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="bench", user_id="bench")
    agent = LlmAgent(name="bench", model="unused")
    return ToolContext(InvocationContext(session_service=sessions, invocation_id="bench", agent=agent, session=session))


def caller(tool: BaseTool, context: ToolContext) -> Call:
    """One ``echo`` call through ``tool.run_async``; anything but the echoed text raises."""

    async def call() -> object:
        result: dict[str, Any] = await tool.run_async(args=ARGS, tool_context=context)
        if result.get("isError") or "error" in result or result["content"][0]["text"] != ARGS["text"]:
            raise RuntimeError(f"echo failed: {result}")
        return result

    return call


def config_of(server: list[str]) -> dict[str, Any]:
    """The stdio record's ``config``: the server's command line."""
    return {"command": server[0], "args": server[1:]}


@contextlib.asynccontextmanager
async def ours(server: list[str]) -> AsyncIterator[Call]:
    """Our toolset over the asyncio runtime's service (default mode), the server the config's only record."""
    async with open_bench_runtime(server) as service:
        toolset = McpActorsToolset(service, ["bench"], tools=["echo"])
        [echo] = await toolset.get_tools()
        yield caller(echo, await tool_context())
        await toolset.close()


@contextlib.asynccontextmanager
async def own(server: list[str]) -> AsyncIterator[Call]:
    """ADK's own McpToolset on the same server (stdio, its session held by the toolset)."""
    params = StdioServerParameters(command=server[0], args=server[1:])
    toolset = McpToolset(
        connection_params=StdioConnectionParams(server_params=params, timeout=CALL_TIMEOUT), tool_filter=["echo"]
    )
    try:
        [echo] = await toolset.get_tools()
        yield caller(echo, await tool_context())
    finally:
        await toolset.close()


@contextlib.asynccontextmanager
async def floor(server: list[str]) -> AsyncIterator[Call]:
    """ADK's own floor: a ``FunctionTool`` whose coroutine answers the echoed text, through ``run_async``."""
    from google.adk.tools.function_tool import FunctionTool

    del server

    async def echo(text: str) -> dict[str, Any]:
        """Return the given text unchanged."""
        return {"content": [{"type": "text", "text": text}]}

    yield caller(FunctionTool(echo), await tool_context())


@contextlib.asynccontextmanager
async def wire_floor(server: list[str]) -> AsyncIterator[Call]:
    """The least any client pays here: the ``FunctionTool`` of :func:`floor` calling ``echo`` on the light
    server through the hand-written client of :mod:`benchmarks._integrations._wire_floor`."""
    from google.adk.tools.function_tool import FunctionTool

    from benchmarks._integrations._wire_floor import open_wire_floor

    async with open_wire_floor(server) as client:

        async def echo(text: str) -> dict[str, Any]:
            """Return the given text unchanged."""
            result: dict[str, Any] = await client.request("tools/call", {"name": "echo", "arguments": {"text": text}})
            return result

        yield caller(FunctionTool(echo), await tool_context())


CONTENDERS = {"ours": ours, "own": own, "floor": floor, "wire_floor": wire_floor}
CONTENDER_NAMES = ("ours", "own", "floor", "wire_floor")
"""What ``benchmarks.integrations`` measures of this module (read there without importing it)."""

if __name__ == "__main__":
    main(CONTENDERS)
