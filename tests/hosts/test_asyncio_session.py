"""``rt.session(server)``: one supervised server shaped like the SDK's ``mcp.ClientSession``.

Its methods have the installed SDK's signatures and return its ``mcp.types`` results, so
libraries that take a session work on it unchanged: Anthropic's MCP tool helpers
(``anthropic.lib.tools.mcp``) and LlamaIndex's ``McpToolSpec`` (``llama-index-tools-mcp``)
run here against the real demo server, through the runtime's connection.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp
import mcp.types as mcp_types
import pytest
from pydantic import AnyUrl
from testkit import is_infrastructure

import mcp_actors.asyncio as maio
from mcp_actors.errors import ServerNotFound, ServerRequestFailed, ToolCallTimeout
from mcp_actors.testing import fault_server_command, live_descendants

BOUND = 60.0

SESSION_METHODS = [
    "initialize",
    "send_ping",
    "list_tools",
    "call_tool",
    "list_resources",
    "list_resource_templates",
    "read_resource",
    "subscribe_resource",
    "unsubscribe_resource",
    "list_prompts",
    "get_prompt",
    "complete",
    "set_logging_level",
]


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


def params_of(function: Any) -> list[tuple[str, Any]]:
    """``(name, kind)`` of each parameter after ``self``."""
    return [(p.name, p.kind) for p in list(inspect.signature(function).parameters.values())[1:]]


@pytest.mark.parametrize("name", SESSION_METHODS)
def test_each_method_has_the_sdk_sessions_parameters(name: str) -> None:
    """Every parameter of ``mcp.ClientSession.<name>`` is accepted, in the same place and kind (a cursor added)."""
    ours = params_of(getattr(maio.ServerSession, name))
    sdk = params_of(getattr(mcp.ClientSession, name))
    assert inspect.iscoroutinefunction(getattr(maio.ServerSession, name))
    for param in sdk:
        assert param in ours, f"{name}: {param} missing"
    positional = [n for n, k in ours if k is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional[: len([n for n, k in sdk if k is inspect.Parameter.POSITIONAL_OR_KEYWORD])] == [
        n for n, k in sdk if k is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ] or positional[:1] == ["cursor"]


@pytest.mark.parametrize("mode", ["guest", "thread"])
def test_the_session_answers_with_the_sdks_results(config: str, mode: str) -> None:
    """initialize (never a second handshake), tools, resources, templates, prompts, ping: mcp.types results."""

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            session = rt.session("demo")
            assert session.initialize_result is None
            first = await session.initialize()
            assert isinstance(first, mcp_types.InitializeResult)
            assert first.server_info.name == "mcp-actors-demo" and session.server_info == first.server_info
            assert (await session.initialize()) == first  # the connection's one answer, never asked again
            assert session.server_capabilities is not None and session.protocol_version == first.protocol_version
            listed = await session.list_tools()
            assert isinstance(listed, mcp_types.ListToolsResult) and listed.next_cursor is None
            assert all(isinstance(t, mcp_types.Tool) for t in listed.tools)
            echo = next(t for t in listed.tools if t.name == "echo")
            assert echo.input_schema["properties"]["text"]["type"] == "string"
            result = await session.call_tool("echo", {"text": "via session"}, timedelta(seconds=30))
            assert isinstance(result, mcp_types.CallToolResult) and result.content[0].text == "via session"  # type: ignore[union-attr]
            resources = await session.list_resources()
            assert "demo://readme" in {str(r.uri) for r in resources.resources}
            templates = await session.list_resource_templates()
            assert "demo://note/{name}" in {t.uri_template for t in templates.resource_templates}
            read = await session.read_resource(AnyUrl("demo://readme"))
            assert isinstance(read, mcp_types.ReadResourceResult) and read.contents
            prompts = await session.list_prompts()
            assert "greeting" in {p.name for p in prompts.prompts}
            prompt = await session.get_prompt("greeting", {"name": "Ada"})
            assert isinstance(prompt, mcp_types.GetPromptResult) and "Ada" in str(prompt.messages[0].content)
            assert isinstance(await session.send_ping(), mcp_types.EmptyResult)
            async with session as same:  # entering opens nothing, leaving closes nothing
                assert same is session
            assert rt.service.status("demo").state.value == "connected"
            # A handshake-era connection: initialize() gives the very object its handshake received.
            await rt.service.update(
                "demo",
                config={
                    "command": rt.service.get("demo").config.command,
                    "args": list(rt.service.get("demo").config.args),
                    "protocol": "legacy",
                },
            )
            legacy = await session.initialize()
            assert legacy.protocol_version != "2026-07-28" and (await session.initialize()) is legacy

    run(main)


def test_the_session_keeps_the_runtimes_rules(config: str) -> None:
    """disabledTools are not listed; timeouts, unknown servers and server refusals are the runtime's typed errors."""

    async def main() -> None:
        async with maio.open_runtime(config) as rt:
            await rt.service.update("demo", disabled_tools=["add"])
            names = {t.name for t in (await rt.session("demo").list_tools()).tools}
            assert "echo" in names and "add" not in names
            argv = fault_server_command("--hang-tool", "sleep")
            await rt.service.add(
                {"name": "hangs", "type": "stdio", "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0}}
            )
            with pytest.raises(ToolCallTimeout):
                await rt.session("hangs").call_tool("sleep", {"seconds": 1}, read_timeout_seconds=0.3)
            with pytest.raises(ServerNotFound):
                await rt.session("nope").list_tools()
            with pytest.raises(ServerRequestFailed):
                await rt.session("demo").read_resource("demo://no-such-thing")
            with pytest.raises(ValueError, match="first page"):
                await rt.session("demo").list_tools("a-cursor")
            seen: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append(value)

            result = await rt.session("demo").call_tool("sleep", {"seconds": 0.05}, progress_callback=progress)
            assert not result.is_error
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            assert seen

    run(main)


@pytest.mark.parametrize("mode", ["guest", "thread"])
def test_anthropics_mcp_helpers_take_the_session(config: str, mode: str) -> None:
    """Anthropic's async_mcp_tool and mcp_tool (from a worker thread) call through it; prompts and resources convert."""
    from anthropic.lib.tools.mcp import async_mcp_tool, mcp_message, mcp_resource_to_content, mcp_tool

    async def main() -> None:
        async with maio.open_runtime(config, mode=mode) as rt:
            session = rt.session("demo")
            tools = {t.name: t for t in (await session.list_tools()).tools}
            runnable = async_mcp_tool(tools["echo"], session)  # type: ignore[arg-type]
            assert runnable.to_dict()["name"] == "echo"
            assert await runnable.call({"text": "from claude"}) == [{"type": "text", "text": "from claude"}]
            blocking = mcp_tool(tools["add"], session)  # type: ignore[arg-type]
            import anyio.to_thread

            added = await anyio.to_thread.run_sync(blocking.call, {"a": 2, "b": 3})
            assert "5" in str(added)
            prompt = await session.get_prompt("greeting", {"name": "Ada"})
            assert mcp_message(prompt.messages[0])["role"] == "user"
            readme = await session.read_resource("demo://readme")
            assert mcp_resource_to_content(readme)["type"] in ("text", "document")

    run(main)


def test_llamaindex_mcp_tool_spec_takes_the_session(config: str) -> None:
    """llama-index-tools-mcp's McpToolSpec lists the server's tools and resources through it and calls them."""
    from llama_index.tools.mcp import McpToolSpec

    async def main() -> None:
        async with maio.open_runtime(config) as rt:
            spec = McpToolSpec(
                client=rt.session("demo"), allowed_tools=["echo", "add", "readme"], include_resources=True
            )  # type: ignore[arg-type]
            tools = {tool.metadata.name: tool for tool in await spec.to_tool_list_async()}
            assert {"echo", "add", "readme"} <= set(tools)
            echoed = await tools["echo"].acall(text="from llamaindex")
            assert "from llamaindex" in str(echoed.raw_output.content[0].text)
            added = await tools["add"].acall(a=2, b=3)
            assert "5" in str(added.content)
            readme = await tools["readme"].acall()
            assert isinstance(readme.raw_output, mcp_types.ReadResourceResult)

    run(main)
