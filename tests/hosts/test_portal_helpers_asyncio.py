"""The helpers that take a service work with the portal's asyncio facade, awaited in ``asyncio.run``.

Real runtime, real demo server (a process): the helpers' bodies are trio code, and the
asyncio facade runs them on the runtime's loop and hands back the result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio
from testkit import is_infrastructure

from mcp_actors.adapters import ERROR_PREFIX, McpToolAdapter, load_mcp_tools
from mcp_actors.errors import ServerNotFound
from mcp_actors.formats import fetch_mcp_tools, setup_mcp_tools
from mcp_actors.portal import RuntimePortal, start_portal
from mcp_actors.testing import live_descendants

BOUND = 60.0
"""Generous: the demo server's first start on a loaded machine."""


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[RuntimePortal]:
    """A running portal on a fresh config (the demo server only); no server process left after."""
    with start_portal(str(tmp_path / "cfg.json")) as running:
        yield running
    assert live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline()))) == []


def test_setup_mcp_tools_with_the_asyncio_service(portal: RuntimePortal) -> None:
    """``setup_mcp_tools`` gives the demo server's tools in OpenAI's format, awaited on asyncio."""
    service = portal.asyncio_service()

    async def main() -> tuple[list[str], list[str]]:
        setup = await asyncio.wait_for(setup_mcp_tools(service, {"enabled": True}, "openai"), BOUND)
        assert setup is not None
        definitions, tools = setup
        return [d["function"]["name"] for d in definitions], [t.id for t in tools]

    names, ids = asyncio.run(main())
    assert "mcp__demo__echo" in names and names == ids


def test_fetch_mcp_tools_with_the_asyncio_service(portal: RuntimePortal) -> None:
    """``fetch_mcp_tools`` in manual mode lists the selected server; an unknown one is skipped."""
    service = portal.asyncio_service()

    async def main() -> list[str]:
        config = {"enabled": True, "mode": "manual", "selectedServers": ["demo", "nope"]}
        return [t.name for t in await asyncio.wait_for(fetch_mcp_tools(service, config), BOUND)]

    assert "echo" in asyncio.run(main())


def test_load_mcp_tools_and_its_adapters_with_the_asyncio_service(portal: RuntimePortal) -> None:
    """``load_mcp_tools`` loads on asyncio, and its adapters execute there: results, tool errors, typed errors."""
    service = portal.asyncio_service()

    async def main() -> tuple[str, str, str, type[BaseException]]:
        loaded = await asyncio.wait_for(load_mcp_tools(service, ["demo", "nope"]), BOUND)
        assert set(loaded.failures) == {"nope"}
        by_name = {tool.name: tool for tool in loaded.tools}
        echo = by_name["mcp__demo__echo"]
        text = await asyncio.wait_for(echo.execute({"text": "from asyncio"}), BOUND)
        raw = await asyncio.wait_for(by_name["mcp__demo__add"].call({"a": 2, "b": 3}), BOUND)
        tool_error = await asyncio.wait_for(echo.execute({}), BOUND)
        gone = McpToolAdapter(attrs.evolve(echo.mcp_tool, server_id="nope"), service, timeout=5)
        try:
            await gone.execute({"text": "x"})
        except Exception as exc:
            error = type(exc)
        else:
            error = type(None)
        return text, str(raw.structured_content), tool_error, error

    text, structured, tool_error, error = asyncio.run(main())
    assert text == "from asyncio"
    assert "5" in structured
    assert tool_error.startswith(ERROR_PREFIX)
    assert error is ServerNotFound


def test_an_adapters_progress_reaches_the_asyncio_loop(portal: RuntimePortal) -> None:
    """An adapter's on_progress, given the asyncio facade, runs on the caller's loop thread (a coroutine too)."""
    service = portal.asyncio_service()
    seen: list[tuple[float, int]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, threading.get_ident()))

    async def main() -> str:
        loaded = await asyncio.wait_for(load_mcp_tools(service, ["demo"]), BOUND)
        sleeper = attrs.evolve(next(t for t in loaded if t.name == "mcp__demo__sleep"), on_progress=on_progress)
        text = await asyncio.wait_for(sleeper.execute({"seconds": 0.05}), BOUND)
        for _ in range(100):  # the last relayed coroutine may still be scheduled
            if seen and seen[-1][0] >= 0.05:
                break
            await asyncio.sleep(0.01)
        return text

    assert asyncio.run(main()).startswith("slept")
    assert seen and {ident for _, ident in seen} == {threading.get_ident()}


def test_the_trio_service_awaited_on_asyncio_is_refused_naming_the_facade(portal: RuntimePortal) -> None:
    """The runtime's own McpService awaited on asyncio: a RuntimeError at once that names asyncio_service()."""

    async def main() -> None:
        await setup_mcp_tools(portal.service, {"enabled": True})

    with pytest.raises(RuntimeError, match=r"portal\.asyncio_service\(\)"):
        asyncio.run(main())


def test_the_asyncio_facade_on_trio_is_refused_naming_the_service(portal: RuntimePortal) -> None:
    """The asyncio facade passed to a helper on trio: a RuntimeError at once that names the McpService."""

    async def main() -> None:
        await load_mcp_tools(portal.asyncio_service(), ["demo"])

    with pytest.raises(RuntimeError, match="runtime's McpService"):
        trio.run(main)
