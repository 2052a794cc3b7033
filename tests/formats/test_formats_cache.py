"""The per-server conversion cache: a repeated setup converts nothing, a changed server alone is redone."""

from __future__ import annotations

import itertools

import attrs
import pytest
import trio
from formats_checks import corpus_tools

from mcp_actors.errors import InvalidToolName
from mcp_actors.formats import _convert as convert_module
from mcp_actors.formats import (
    convert_mcp_tools_to_gemini,
    convert_tools_async,
    convert_tools_with_report,
    setup_mcp_tools,
)
from mcp_actors.tools import McpTool

_batch = itertools.count()


@attrs.define(eq=False)
class Source:
    """The loader's protocol over fixed lists; hands out the same objects every time, as the registry does."""

    servers: dict[str, list[McpTool]]

    async def list_all_active_server_tools(self) -> list[McpTool]:
        await trio.lowlevel.checkpoint()
        return [tool for tools in self.servers.values() for tool in tools]

    async def list_server_tools(self, server_id_or_name: str) -> list[McpTool]:
        await trio.lowlevel.checkpoint()
        return list(self.servers[server_id_or_name])


def fleet(servers: int = 20, per_server: int = 50) -> dict[str, list[McpTool]]:
    """``servers`` x ``per_server`` corpus tools under ids never converted before."""
    corpus = corpus_tools()
    prefix = f"c{next(_batch)}"
    return {
        f"{prefix}s{s}": [
            attrs.evolve(
                corpus[(s * per_server + i) % len(corpus)],
                id=f"mcp__{prefix}s{s}__t{i}",
                server_id=f"{prefix}s{s}",
                server_name=f"{prefix}s{s}",
            )
            for i in range(per_server)
        ]
        for s in range(servers)
    }


def delta(before: convert_module._Statistics) -> dict[str, int]:
    after = convert_module.statistics()
    return {field: getattr(after, field) - getattr(before, field) for field in attrs.fields_dict(type(after))}


async def test_a_repeated_setup_hits_every_server_and_converts_nothing() -> None:
    """20 x 50 tools: the first setup converts 1000 tools; a repeat is 20 server hits, no per-tool work."""
    src = Source(fleet())
    config = {"enabled": True}
    before = convert_module.statistics()
    first = await setup_mcp_tools(src, config, "openai")
    assert delta(before) == {
        "tools_converted": 1000,
        "tool_cache_lookups": 1000,
        "server_cache_hits": 0,
        "server_cache_misses": 20,
    }
    before = convert_module.statistics()
    second = await setup_mcp_tools(src, config, "openai")
    assert delta(before) == {
        "tools_converted": 0,
        "tool_cache_lookups": 0,
        "server_cache_hits": 20,
        "server_cache_misses": 0,
    }
    assert first is not None and second is not None
    assert second[0] == first[0]
    assert all(a is not b for a, b in zip(first[0], second[0], strict=True))  # fresh outer dicts


async def test_a_server_whose_tools_change_is_converted_again_alone() -> None:
    """New objects for one server: only that server misses, and only its changed tool is converted."""
    servers = fleet(servers=5, per_server=10)
    src = Source(servers)
    config = {"enabled": True}
    await setup_mcp_tools(src, config, "anthropic")
    changed_server = list(servers)[2]
    old = servers[changed_server]
    new_schema = {"type": "object", "properties": {"changed": {"type": "integer"}}}
    # as after a re-listing: every object new, one tool's schema different
    servers[changed_server] = [attrs.evolve(t) for t in old[:-1]] + [attrs.evolve(old[-1], input_schema=new_schema)]
    before = convert_module.statistics()
    result = await setup_mcp_tools(src, config, "anthropic")
    assert delta(before) == {
        "tools_converted": 1,
        "tool_cache_lookups": 10,
        "server_cache_hits": 4,
        "server_cache_misses": 1,
    }
    assert result is not None
    assert result[0][29]["input_schema"]["properties"] == {"changed": {"type": "integer"}}
    assert result[0] == convert_tools_with_report([attrs.evolve(t) for t in result[1]], "anthropic")[0]


async def test_the_server_cache_is_kept_per_format_and_options() -> None:
    """The same tools in another format or with other options are converted for that profile."""
    servers = fleet(servers=2, per_server=5)
    tools = [t for ts in servers.values() for t in ts]
    await convert_tools_async(tools, "openai")
    for api_format, options in (("openai", {"strict": True}), ("gemini", {}), ("gemini", {"json_schema": True})):
        before = convert_module.statistics()
        definitions = await convert_tools_async(tools, api_format, **options)
        assert delta(before)["server_cache_misses"] == 2, (api_format, options)
        assert definitions == convert_tools_with_report([attrs.evolve(t) for t in tools], api_format, **options)[0]


async def test_a_duplicate_id_across_cached_servers_is_still_refused() -> None:
    """Servers that are each cached but share an id between them still raise InvalidToolName."""
    servers = fleet(servers=2, per_server=3)
    a, b = servers.values()
    clash = attrs.evolve(b[0], id=a[0].id)
    await convert_tools_async(a, "gemini")
    await convert_tools_async([clash, *b[1:]], "gemini")
    before = convert_module.statistics()
    with pytest.raises(InvalidToolName, match="used twice"):
        await convert_tools_async([*a, clash, *b[1:]], "gemini")
    assert delta(before)["server_cache_hits"] == 2  # both runs were cache hits, yet the clash is seen


def test_a_server_listed_in_two_runs_is_cached_per_run() -> None:
    """Tools of one server split by another server's still convert right and hit the cache next time."""
    servers = fleet(servers=2, per_server=4)
    a, b = servers.values()
    tools = a[:2] + b + a[2:]
    first = convert_mcp_tools_to_gemini(tools)
    before = convert_module.statistics()
    assert convert_mcp_tools_to_gemini(tools) == first
    assert delta(before)["server_cache_hits"] == 3
    names = [d["name"] for d in first[0]["functionDeclarations"]]
    assert names == [t.id for t in tools]


async def test_a_huge_conversion_keeps_yielding_to_other_tasks() -> None:
    """Converting 6000 uncached tools on the event loop lets another task run again and again."""
    tools = [t for ts in fleet(servers=6, per_server=1000).values() for t in ts]
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.lowlevel.checkpoint()
        start = ticks
        definitions = await convert_tools_async(tools, "anthropic")
        done = True
    assert len(definitions) == 6000
    assert ticks - start >= 20
