"""LlamaIndex: our ``McpFunctionTool`` against ``llama-index-tools-mcp``'s, one ``echo`` call at a time.

Both contenders call the light stdio server's ``echo`` as LlamaIndex's agents call a tool,
``await tool.acall(text=...)``, on the tool object the framework's agent would hold:

* ``ours``: a temporary config with the server as the record ``bench``, the runtime of
  ``mcp_actors.asyncio.open_runtime()`` (its default mode), and the tool from
  ``McpActorsToolSpec(rt.service, ["bench"], tools=["echo"])``.
* ``own``: LlamaIndex's own MCP client, ``McpToolSpec(BasicMCPClient(argv[0], args=argv[1:]),
  allowed_tools=["echo"])``. Its client opens a new session for every call: over stdio, a new
  server process per call, which is what this contender measures.

``own`` needs ``llama-index-tools-mcp`` (0.6.0 measured), which is not one of this project's
extras. It asks ``mcp>=2,<3``, so it also installs in the project's own venv beside ``mcp``
2.3, changing nothing else (``.venv/bin/pip install llama-index-tools-mcp``, then run this
module directly). ``python -m benchmarks.integrations`` runs it in a venv of its own
(:data:`PEER_PACKAGES`, under ``benchmarks/.venvs/``), with the same ``mcp`` minor as ours, so
that neither our venv nor our extras change.

    python -m benchmarks._integrations.llamaindex --contender ours --seconds 3
    python -m benchmarks._integrations.llamaindex --contender own --seconds 3
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from benchmarks._integrations._measure import Call, main, open_bench_runtime

PEER_PACKAGES: dict[str, tuple[str, ...]] = {"own": ("llama-index-tools-mcp==0.6.0", "mcp>=2.3,<2.4")}
"""What ``own`` needs beyond the standard library, for its venv (``benchmarks.integrations``)."""


def _echo_call(tool: object) -> Call:
    async def call() -> object:
        output = await tool.acall(text="ping")  # type: ignore[attr-defined]
        if output.is_error or "ping" not in output.content:  # own's content is the result's repr
            raise RuntimeError(f"echo failed: {output.content!r}")
        return output

    return call


@contextlib.asynccontextmanager
async def ours(server: list[str]) -> AsyncIterator[Call]:
    """Our toolset's ``echo`` tool over the asyncio runtime (default mode), the server named ``bench``."""
    from mcp_actors.integrations.llamaindex import McpActorsToolSpec

    async with open_bench_runtime(server) as service:
        spec = McpActorsToolSpec(service, ["bench"], tools=["echo"])
        [echo] = await spec.to_tool_list_async()
        yield _echo_call(echo)


@contextlib.asynccontextmanager
async def own(server: list[str]) -> AsyncIterator[Call]:
    """``llama-index-tools-mcp``'s ``echo`` tool (a new session, so a new process, per call)."""
    try:
        from llama_index.tools.mcp import BasicMCPClient, McpToolSpec  # type: ignore[import-untyped]
    except ImportError as exc:
        raise SystemExit(
            f"the 'own' contender needs llama-index-tools-mcp: .venv/bin/pip install llama-index-tools-mcp ({exc})"
        ) from None
    spec = McpToolSpec(BasicMCPClient(server[0], args=server[1:]), allowed_tools=["echo"])
    [echo] = await spec.to_tool_list_async()
    yield _echo_call(echo)


@contextlib.asynccontextmanager
async def floor(server: list[str]) -> AsyncIterator[Call]:
    """LlamaIndex's own floor: a ``FunctionTool`` whose coroutine returns its text, through ``acall``."""
    from llama_index.core.tools import FunctionTool

    del server

    async def echo(text: str) -> str:
        """Return the given text unchanged."""
        return text

    yield _echo_call(FunctionTool.from_defaults(async_fn=echo))


@contextlib.asynccontextmanager
async def wire_floor(server: list[str]) -> AsyncIterator[Call]:
    """The least any client pays here: the ``FunctionTool`` of :func:`floor` calling ``echo`` on the light
    server through the hand-written client of :mod:`benchmarks._integrations._wire_floor`."""
    from llama_index.core.tools import FunctionTool

    from benchmarks._integrations._wire_floor import echo_tool, open_wire_floor

    async with open_wire_floor(server) as client:
        yield _echo_call(FunctionTool.from_defaults(async_fn=echo_tool(client)))


CONTENDERS = {"ours": ours, "own": own, "floor": floor, "wire_floor": wire_floor}
CONTENDER_NAMES = ("ours", "own", "floor", "wire_floor")
"""What ``benchmarks.integrations`` measures of this module (read there without importing it)."""

if __name__ == "__main__":
    main(CONTENDERS)
