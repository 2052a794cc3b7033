"""LangChain: our ``SupervisedMcpTool`` against ``langchain-mcp-adapters``' own tool, one ``echo`` call each.

Both contenders call ``await tool.ainvoke({"text": ...})`` on the LangChain ``BaseTool`` an
agent's ``ToolNode`` would run, against the same light stdio server.

* ``ours``: :func:`mcp_actors.integrations.langchain.load_tools` on the service of
  ``mcp_actors.asyncio.open_runtime()`` (its default mode), over a temporary config holding only that server.
* ``own``: ``langchain-mcp-adapters``' ``MultiServerMCPClient`` on its fast path, a session
  kept open (``async with client.session("bench")`` + ``load_mcp_tools(session)``). Its
  default path, ``client.get_tools()``, opens a new session (a new server process) for every
  call; that is the ``langchain`` contender of ``benchmarks/_peers.py``.

``own`` needs ``langchain-mcp-adapters`` (:data:`PEER_PACKAGES`), which pins ``mcp<2`` and so
cannot be installed beside mcp-actors: run it with a peer venv's interpreter, e.g. the one
``benchmarks/_peers.py`` makes for its ``langchain`` contender (the same pin)::

    python -m benchmarks._integrations.langchain --contender ours --seconds 3
    benchmarks/.venvs/langchain/bin/python -m benchmarks._integrations.langchain --contender own --seconds 3

Each opener imports its own side only, so this module loads in either environment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any, Final

from benchmarks._integrations._measure import Call, main, open_bench_runtime

__all__ = ["CONTENDERS", "PEER_PACKAGES", "open_ours", "open_own"]

PEER_PACKAGES: Final = {"own": ("langchain-mcp-adapters==0.3.2",)}
"""What each contender needs beyond our venv (a venv of its own): ``own`` is on ``mcp<2``."""

_ARGUMENTS: Final = {"text": "hello"}


@contextlib.asynccontextmanager
async def open_ours(server: list[str]) -> AsyncIterator[Call]:
    """Our runtime (asyncio, default mode) with the one server; the call is our LangChain tool's ``ainvoke``."""
    from mcp_actors.integrations.langchain import load_tools

    async with open_bench_runtime(server) as service:
        (echo,) = await load_tools(service, ["bench"], tools=["echo"])

        async def call() -> Any:
            return await echo.ainvoke(_ARGUMENTS)

        yield call


@contextlib.asynccontextmanager
async def open_own(server: list[str]) -> AsyncIterator[Call]:
    """``langchain-mcp-adapters`` with one session kept open; the call is its tool's ``ainvoke``."""
    from langchain_mcp_adapters.client import MultiServerMCPClient  # type: ignore[import-not-found,unused-ignore]
    from langchain_mcp_adapters.tools import load_mcp_tools  # type: ignore[import-not-found,unused-ignore]

    connection: Any = {"command": server[0], "args": server[1:], "transport": "stdio", "env": dict(os.environ)}
    client = MultiServerMCPClient({"bench": connection})
    async with client.session("bench") as session:
        (echo,) = [tool for tool in await load_mcp_tools(session) if tool.name == "echo"]

        async def call() -> Any:
            return await echo.ainvoke(_ARGUMENTS)

        yield call


@contextlib.asynccontextmanager
async def open_floor(server: list[str]) -> AsyncIterator[Call]:
    """LangChain's own floor: a plain ``StructuredTool`` whose coroutine returns its text; ``ainvoke`` as above."""
    from langchain_core.tools import StructuredTool

    del server

    async def echo(text: str) -> str:
        """Return the given text unchanged."""
        return text

    tool = StructuredTool.from_function(coroutine=echo)

    async def call() -> Any:
        return await tool.ainvoke(_ARGUMENTS)

    yield call


@contextlib.asynccontextmanager
async def open_wire_floor(server: list[str]) -> AsyncIterator[Call]:
    """The least any client pays here: the ``StructuredTool`` of :func:`open_floor` calling ``echo`` on the
    light server through the hand-written client of :mod:`benchmarks._integrations._wire_floor`."""
    from langchain_core.tools import StructuredTool

    from benchmarks._integrations._wire_floor import echo_tool
    from benchmarks._integrations._wire_floor import open_wire_floor as open_client

    async with open_client(server) as client:
        tool = StructuredTool.from_function(coroutine=echo_tool(client))

        async def call() -> Any:
            return await tool.ainvoke(_ARGUMENTS)

        yield call


CONTENDERS: Final = {"ours": open_ours, "own": open_own, "floor": open_floor, "wire_floor": open_wire_floor}
CONTENDER_NAMES: Final = ("ours", "own", "floor", "wire_floor")
"""What ``benchmarks.integrations`` measures of this module (read there without importing it)."""

if __name__ == "__main__":
    main(CONTENDERS)
