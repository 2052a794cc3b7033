"""fetch_mcp_tools and setup_mcp_tools against a small in-test tool source."""

from __future__ import annotations

import logging
import time
from typing import Any

import attrs
import pytest
import trio
from formats_checks import check_definitions, corpus_tools, make_tool

from mcp_actors.errors import ConfigError, ServerNotFound, ServerStartFailed
from mcp_actors.formats import (
    McpToolsConfig,
    McpToolSource,
    ToolsMode,
    convert_mcp_tools_to_gemini,
    convert_mcp_tools_to_openai,
    fetch_mcp_tools,
    setup_mcp_tools,
)
from mcp_actors.tools import McpTool

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@attrs.define(eq=False)
class Source:
    """Implements the loader's protocol over fixed tool lists; counts the calls."""

    servers: dict[str, list[McpTool]]
    failing: dict[str, Exception] = attrs.field(factory=dict)
    calls: list[str] = attrs.field(factory=list)

    async def list_all_active_server_tools(self) -> list[McpTool]:
        self.calls.append("*")
        await trio.lowlevel.checkpoint()
        return [t for name, tools in self.servers.items() if name not in self.failing for t in tools]

    async def list_server_tools(self, server_id_or_name: str) -> list[McpTool]:
        self.calls.append(server_id_or_name)
        await trio.lowlevel.checkpoint()
        if server_id_or_name in self.failing:
            raise self.failing[server_id_or_name]
        if server_id_or_name not in self.servers:
            raise ServerNotFound(f"no server {server_id_or_name!r}", server=server_id_or_name)
        return list(self.servers[server_id_or_name])


def tools_of(server: str, count: int) -> list[McpTool]:
    return [make_tool(SCHEMA, name=f"tool{i}", server=server) for i in range(count)]


def source(*servers: str, per_server: int = 2) -> Source:
    return Source({name: tools_of(name, per_server) for name in servers})


def test_source_satisfies_the_protocol() -> None:
    """The in-test source is a structural McpToolSource (what the registry must provide)."""
    src: McpToolSource = source("a")
    assert hasattr(src, "list_all_active_server_tools") and hasattr(src, "list_server_tools")


@pytest.mark.parametrize("config", [None, {}, {"enabled": False}, {"enabled": None, "mode": "auto"}, McpToolsConfig()])
async def test_disabled_or_unset_gives_nothing(config: Any) -> None:
    """``enabled`` false or unset: no tools, and the service is not asked."""
    src = source("a")
    assert await fetch_mcp_tools(src, config) == []
    assert await setup_mcp_tools(src, config) is None
    assert src.calls == []


@pytest.mark.parametrize("config", [{"enabled": True}, {"enabled": True, "mode": "auto"}, McpToolsConfig(enabled=True)])
async def test_auto_or_unset_mode_lists_all_active_servers(config: Any) -> None:
    """Mode auto (or unset) asks once for every active server's tools."""
    src = source("a", "b")
    tools = await fetch_mcp_tools(src, config)
    assert [t.server_name for t in tools] == ["a", "a", "b", "b"]
    assert src.calls == ["*"]


async def test_manual_mode_lists_selected_servers_in_order() -> None:
    """Mode manual lists only the selected servers, in the order given, each once."""
    src = source("a", "b", "c")
    config = {"enabled": True, "mode": "manual", "selectedServers": ["c", "a", "c"]}
    tools = await fetch_mcp_tools(src, config)
    assert [t.server_name for t in tools] == ["c", "c", "a", "a"]
    assert sorted(src.calls) == ["a", "c"]


async def test_manual_mode_skips_a_failing_server(caplog: pytest.LogCaptureFixture) -> None:
    """One failing or unknown server is logged and skipped; the others' tools still come."""
    src = source("a", "b")
    src.failing["b"] = ServerStartFailed("server 'b' did not complete the handshake", server="b")
    config = McpToolsConfig(enabled=True, mode=ToolsMode.MANUAL, selected_servers=("a", "b", "ghost"))
    with caplog.at_level(logging.WARNING, logger="mcp_actors.formats"):
        tools = await fetch_mcp_tools(src, config)
    assert [t.server_name for t in tools] == ["a", "a"]
    skipped = [r.getMessage() for r in caplog.records]
    assert any("'b' skipped" in m and "handshake" in m for m in skipped)
    assert any("'ghost' skipped" in m for m in skipped)


async def test_manual_mode_does_not_swallow_bugs() -> None:
    """An exception that is not a McpActorsError (a bug) propagates."""
    src = source("a")
    src.failing["a"] = ZeroDivisionError("bug")
    with pytest.RaisesGroup(ZeroDivisionError):
        await fetch_mcp_tools(src, {"enabled": True, "mode": "manual", "selectedServers": ["a"]})


async def test_manual_mode_lists_servers_concurrently(autojump_clock: trio.abc.Clock) -> None:
    """Selected servers are listed at the same time: a slow one does not delay the others."""
    started = trio.Event()

    class Slow(Source):
        async def list_server_tools(self, server_id_or_name: str) -> list[McpTool]:
            if server_id_or_name == "a":
                await started.wait()  # only returns once "b" has been asked as well
            else:
                started.set()
            return await super().list_server_tools(server_id_or_name)

    src = Slow({"a": tools_of("a", 1), "b": tools_of("b", 1)})
    with trio.fail_after(1):
        tools = await fetch_mcp_tools(src, {"enabled": True, "mode": "manual", "selectedServers": ["a", "b"]})
    assert [t.server_name for t in tools] == ["a", "b"]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"enabled": True, "mode": "sometimes"}, "mode"),
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": True, "selectedServers": "a"}, "selectedServers"),
        ({"enabled": True, "servers": ["a"]}, "servers"),
    ],
)
async def test_invalid_config_is_a_config_error_naming_the_field(config: dict[str, Any], field: str) -> None:
    """A wrong key or value is a ConfigError that names the field."""
    with pytest.raises(ConfigError) as caught:
        await fetch_mcp_tools(source("a"), config)
    assert caught.value.field == field and field in str(caught.value)


async def test_config_of_the_wrong_type_is_a_type_error() -> None:
    """A config that is neither a mapping nor McpToolsConfig is a TypeError."""
    with pytest.raises(TypeError, match="list"):
        await fetch_mcp_tools(source("a"), ["enabled"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("api_format", "fmt"),
    [("openai", "openai"), ("anthropic", "anthropic"), ("google", "gemini"), ("gemini", "gemini")],
)
async def test_setup_returns_definitions_and_tools(api_format: str, fmt: str) -> None:
    """setup_mcp_tools returns the provider definitions and the MCP tools behind them."""
    src = source("a", "b")
    result = await setup_mcp_tools(src, {"enabled": True}, api_format)
    assert result is not None
    definitions, tools = result
    assert [t.server_name for t in tools] == ["a", "a", "b", "b"]
    check_definitions(fmt, {}, tools, definitions, [])


async def test_setup_passes_provider_options() -> None:
    """Provider options (strict, api, json_schema) reach the converter."""
    src = source("a")
    result = await setup_mcp_tools(src, {"enabled": True}, "openai", strict=True, api="responses")
    assert result is not None and result[0][0]["strict"] is True and "name" in result[0][0]
    result = await setup_mcp_tools(src, {"enabled": True}, "google", json_schema=True)
    assert result is not None and "parametersJsonSchema" in result[0][0]["functionDeclarations"][0]


async def test_setup_refuses_an_unknown_format_even_when_disabled() -> None:
    """An unknown api_format is a ValueError at once, not only once tools exist."""
    with pytest.raises(ValueError, match="'cohere'"):
        await setup_mcp_tools(source("a"), None, "cohere")


async def test_setup_returns_none_when_no_tool_is_found() -> None:
    """No tools (all selected servers failed) gives None, as in the reference design."""
    src = Source({"a": []})
    assert await setup_mcp_tools(src, {"enabled": True, "mode": "manual", "selectedServers": ["a", "ghost"]}) is None


async def test_setup_logs_tools_per_server(caplog: pytest.LogCaptureFixture) -> None:
    """Each setup logs how many tools each server contributed (debug level)."""
    with caplog.at_level(logging.DEBUG, logger="mcp_actors.formats"):
        await setup_mcp_tools(Source({"a": tools_of("a", 3), "b": tools_of("b", 1)}), {"enabled": True})
    messages = [r.getMessage() for r in caplog.records]
    assert "mcp tools: 3 from server 'a'" in messages and "mcp tools: 1 from server 'b'" in messages


async def test_repeated_setup_reuses_conversions() -> None:
    """A second setup with the same tools re-normalises nothing: the schemas are the cached objects."""
    corpus = list(corpus_tools())[:50]
    src = Source({"corpus": corpus})
    config = {"enabled": True}
    for api_format, parameters in (
        ("openai", lambda d: d["function"]["parameters"]),
        ("anthropic", lambda d: d["input_schema"]),
    ):
        first = await setup_mcp_tools(src, config, api_format)
        second = await setup_mcp_tools(src, config, api_format)
        assert first is not None and second is not None
        assert all(parameters(a) is parameters(b) for a, b in zip(first[0], second[0], strict=True))
        assert all(a is not b for a, b in zip(first[0], second[0], strict=True))  # fresh outer dicts


async def test_equal_tools_fetched_again_hit_the_cache_and_changed_ones_do_not() -> None:
    """A refetched equal tool (new object) reuses the conversion; a changed schema is converted anew."""
    original = make_tool(SCHEMA, name="cached_again")
    same = make_tool(dict(SCHEMA), name="cached_again")
    changed = make_tool({"type": "object", "properties": {"q": {"type": "integer"}}}, name="cached_again")
    first = convert_mcp_tools_to_openai([original])[0]["function"]["parameters"]
    assert convert_mcp_tools_to_openai([same])[0]["function"]["parameters"] is first
    assert convert_mcp_tools_to_openai([changed])[0]["function"]["parameters"]["properties"]["q"] == {"type": "integer"}


async def test_cached_setup_of_a_thousand_tools_is_fast() -> None:
    """20 servers x 50 tools, cached: a setup call is a small fraction of the first one (goal < 5 ms)."""
    corpus = list(corpus_tools())
    servers = {
        f"s{s}": [attrs.evolve(corpus[(s * 50 + i) % len(corpus)], id=f"mcp__s{s}__t{i}") for i in range(50)]
        for s in range(20)
    }
    src = Source(servers)
    config = {"enabled": True}
    start = time.perf_counter()
    assert await setup_mcp_tools(src, config, "gemini") is not None
    cold = time.perf_counter() - start
    warm = []
    for _ in range(20):
        start = time.perf_counter()
        result = await setup_mcp_tools(src, config, "gemini")
        warm.append(time.perf_counter() - start)
    assert result is not None and len(result[0][0]["functionDeclarations"]) == 1000
    assert result[0] == convert_mcp_tools_to_gemini(result[1])
    warm.sort()
    # The bound is loose so a busy CI machine does not flake; the benchmark tool_setup measures it.
    assert warm[len(warm) // 2] < min(0.05, cold / 5), (warm[len(warm) // 2], cold)
