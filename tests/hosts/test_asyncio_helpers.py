"""The helpers that take a service, and the host callbacks, on ``mcp_actors.asyncio.open_runtime``'s service.

``fetch_mcp_tools``, ``setup_mcp_tools``, ``load_mcp_tools`` and the adapters run their trio
bodies on the runtime's loop when given ``rt.service`` from asyncio, in both modes; host
callbacks given to ``open_runtime`` as coroutine functions run on the host's loop. Real
runtime, real demo server.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import mcp.types as mcp_types
import pytest
from testkit import is_infrastructure

import mcp_actors.asyncio as maio
from mcp_actors._config.codec import record_to_json_dict
from mcp_actors.adapters import ERROR_PREFIX, McpToolAdapter, load_mcp_tools
from mcp_actors.errors import ServerNotFound
from mcp_actors.formats import fetch_mcp_tools, setup_mcp_tools
from mcp_actors.testing import live_descendants

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

BOUND = 60.0
MODES = ["guest", "thread"]
LEGACY = {"protocol": "legacy"}
"""The demo's ask_* tools make server-to-client requests, which exist only up to 2025-11-25."""


@pytest.fixture
def config(tmp_path: Path) -> Iterator[str]:
    """A fresh config file (the demo server only); no server process may outlive the test."""
    yield str(tmp_path / "cfg.json")
    assert live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline()))) == []


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(BOUND * 2):
            return await main()

    return asyncio.run(bounded())


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


@pytest.mark.parametrize("mode", MODES)
def test_the_tool_helpers_take_the_service(config: str, mode: str) -> None:
    """setup_mcp_tools, fetch_mcp_tools, load_mcp_tools and the adapters (results, tool errors, typed errors)."""

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            service = rt.service
            setup = await setup_mcp_tools(service, {"enabled": True}, "openai")
            assert setup is not None
            definitions, _ = setup
            assert "mcp__demo__echo" in [d["function"]["name"] for d in definitions]
            fetched = await fetch_mcp_tools(service, {"enabled": True, "mode": "manual", "selectedServers": ["demo"]})
            assert "echo" in [t.name for t in fetched]
            loaded = await load_mcp_tools(service, ["demo", "nope"])
            assert set(loaded.failures) == {"nope"}
            by_name = {tool.name: tool for tool in loaded.tools}
            echo = by_name["mcp__demo__echo"]
            assert await echo.execute({"text": "from asyncio"}) == "from asyncio"
            assert (await echo.execute({})).startswith(ERROR_PREFIX)
            gone = McpToolAdapter(attrs.evolve(echo.mcp_tool, server_id="nope"), service, timeout=5)
            with pytest.raises(ServerNotFound):
                await gone.execute({"text": "x"})

    run(main)


def test_coroutine_host_callbacks_run_on_the_guests_loop(config: str) -> None:
    """A coroutine sampling handler and roots callable run on the host's loop, in the loop's thread."""

    async def main() -> tuple[dict[str, Any], list[dict[str, Any]], list[bool]]:
        loop = asyncio.get_running_loop()
        seen: list[bool] = []

        async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
            seen.append(asyncio.get_running_loop() is loop and threading.current_thread() is threading.main_thread())
            await asyncio.sleep(0)
            return mcp_types.CreateMessageResult(
                role="assistant", content=mcp_types.TextContent(type="text", text="from the loop"), model="guest"
            )

        async def roots(server_id: str) -> list[str]:
            seen.append(asyncio.get_running_loop() is loop)
            return ["file:///guest/root"]

        async with maio.open_runtime(config, sampling_handler=sample, roots=roots) as rt:
            svc = rt.service
            await svc.update("demo", config={**record_to_json_dict(svc.get("demo"))["config"], **LEGACY})
            answer = json.loads(text_of(await svc.call_tool("demo", "ask_model", {"prompt": "hi"})))
            listed = json.loads(text_of(await svc.call_tool("demo", "list_host_roots", {})))
            return answer, listed, seen

    answer, listed, seen = run(main)
    assert answer["content"][0]["text"] == "from the loop"
    assert listed[0]["uri"] == "file:///guest/root"
    assert seen and all(seen)


def test_trio_code_of_ones_own_runs_in_the_runtime(config: str) -> None:
    """run_in_runtime runs a trio coroutine function with the runtime's McpService; its error crosses unchanged."""
    import trio

    async def body(service: Any) -> str:
        await trio.lowlevel.checkpoint()
        return str(service.get("demo").name)

    async def fails(service: Any) -> None:
        await trio.lowlevel.checkpoint()
        raise LookupError("from trio")

    async def main() -> str:
        async with maio.open_runtime(config) as rt:
            with pytest.raises(LookupError, match="from trio"):
                await rt.service.run_in_runtime(fails)
            return await rt.service.run_in_runtime(body)

    assert run(main) == "demo"
