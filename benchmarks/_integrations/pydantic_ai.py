"""pydantic-ai: our toolset against pydantic-ai's own MCP toolset, one ``echo`` call through ``call_tool``.

Both contenders are driven as pydantic-ai's agent loop drives a toolset: ``get_tools(ctx)``
once, then ``toolset.call_tool("echo", args, ctx, tool)`` per call, with a bare
``RunContext`` (as pydantic-ai's own tests build one: no agent, no event stream).

* ``ours`` — :class:`mcp_actors.integrations.pydantic_ai.McpActorsToolset` over
  ``mcp_actors.asyncio.open_runtime()``'s service (its default mode, on a temp config
  holding the light stdio server), in this project's venv.
* ``own`` — ``pydantic_ai.mcp.MCPToolset`` over a FastMCP ``StdioTransport`` of the same
  server (pydantic-ai 2.x replaced ``MCPServerStdio`` with this toolset). It needs
  ``pydantic-ai-slim[mcp]`` (which brings ``fastmcp-slim[client]``, :data:`PEER_PACKAGES`),
  not in our venv: installing it there would keep our ``mcp`` pin but move
  ``opentelemetry-api`` past our ``opentelemetry-sdk``, so it runs in a peer venv of its own
  (``benchmarks/.venvs/fw-pydantic_ai-own/``, made on first use by ``benchmarks.integrations``).
  Run from our venv, ``--contender own`` makes that venv if needed and runs itself there.

Usage::

    python -m benchmarks._integrations.pydantic_ai --contender ours --seconds 3
    python -m benchmarks._integrations.pydantic_ai --contender own --seconds 3
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from benchmarks._integrations._measure import Call, main, open_bench_runtime

__all__ = ["CONTENDERS", "PEER_PACKAGES", "own", "ours"]

PEER_PACKAGES = {"own": ("pydantic-ai-slim[mcp]==2.78.0",)}
"""What "own" needs in its venv: pydantic-ai's MCP toolset and its FastMCP client (read by the runner)."""


def _bare_context() -> Any:
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import RunContext
    from pydantic_ai.usage import RunUsage

    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


@contextlib.asynccontextmanager
async def _calling(toolset: Any) -> AsyncIterator[Call]:
    """Enter ``toolset`` and yield one ``echo`` call through it, as pydantic-ai's agent loop makes it."""
    ctx = _bare_context()
    async with toolset:
        tool = (await toolset.get_tools(ctx))["echo"]

        async def call() -> object:
            return await toolset.call_tool("echo", {"text": "hi"}, ctx, tool)

        yield call


@contextlib.asynccontextmanager
async def ours(server: list[str]) -> AsyncIterator[Call]:
    """Our toolset over the asyncio runtime's service, offering the light server's echo (a temp config)."""
    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    async with open_bench_runtime(server) as service:
        async with _calling(McpActorsToolset(service, ["bench"], tools=["echo"], naming="tool")) as call:
            yield call


@contextlib.asynccontextmanager
async def own(server: list[str]) -> AsyncIterator[Call]:
    """pydantic-ai's own ``MCPToolset`` over FastMCP's stdio transport (needs :data:`PEER_PACKAGES`)."""
    from fastmcp.client.transports import StdioTransport  # type: ignore[import-not-found]  # the peer venv has it
    from pydantic_ai.mcp import MCPToolset

    async with _calling(MCPToolset(StdioTransport(command=server[0], args=server[1:]))) as call:
        yield call


def _function_toolset(echo: Callable[[str], Awaitable[str]]) -> contextlib.AbstractAsyncContextManager[Call]:
    """``echo`` as a ``FunctionToolset`` tool, called the way the contenders are."""
    from pydantic_ai.toolsets import FunctionToolset

    return _calling(FunctionToolset([echo]))


@contextlib.asynccontextmanager
async def floor(server: list[str]) -> AsyncIterator[Call]:
    """pydantic-ai's own floor: a ``FunctionToolset`` whose ``echo`` returns its text, called the same way."""
    del server

    async def echo(text: str) -> str:
        """Return the given text unchanged."""
        return text

    async with _function_toolset(echo) as call:
        yield call


@contextlib.asynccontextmanager
async def wire_floor(server: list[str]) -> AsyncIterator[Call]:
    """The least any client pays here: the ``FunctionToolset`` of :func:`floor` whose ``echo`` calls the
    light server through the hand-written client of :mod:`benchmarks._integrations._wire_floor`."""
    from benchmarks._integrations._wire_floor import echo_tool, open_wire_floor

    async with open_wire_floor(server) as client, _function_toolset(echo_tool(client)) as call:
        yield call


CONTENDERS = {"ours": ours, "own": own, "floor": floor, "wire_floor": wire_floor}
CONTENDER_NAMES = ("ours", "own", "floor", "wire_floor")
"""What ``benchmarks.integrations`` measures of this module (read there without importing it)."""


def _own_available() -> bool:
    try:
        import fastmcp  # type: ignore[import-not-found]  # noqa: F401
        import pydantic_ai.mcp  # noqa: F401
    except ImportError:
        return False
    return True


def _run_own_in_its_venv(argv: list[str]) -> int:
    """Make the peer venv (first use) and run this module there with the same arguments."""
    from benchmarks.integrations import REPO, _python_for

    python = _python_for("pydantic_ai", "own")
    return subprocess.run([str(python), "-m", "benchmarks._integrations.pydantic_ai", *argv], cwd=REPO).returncode


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if ("own" in arguments or "--contender=own" in arguments) and not _own_available():
        sys.exit(_run_own_in_its_venv(arguments))
    main(CONTENDERS)
