"""Direct-adapter connections get the host callbacks, with the runtime's semantics.

The demo server's sampling, elicitation and roots tools, called through direct adapters:
answered by the given handlers (elicitation defaults filled by the shared code), and
undeclared when no handler is given. Over the demo server's in-memory twin and over stdio.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types
import pytest
import trio

from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType, builtin_demo_record
from mcp_actors.adapters import DirectMcpToolAdapter, open_direct_mcp_tools
from mcp_actors.errors import McpActorsError
from mcp_actors.testing import demo_server_command
from mcp_actors.testing.memory import InMemoryServers

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

BOUND = 60.0
"""Real seconds a stdio test may take on a loaded 2-core machine (well under 5 s alone)."""


async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
    """A host model that always answers 'sampled'."""
    return mcp_types.CreateMessageResult(
        role="assistant", content=mcp_types.TextContent(type="text", text="sampled"), model="host-model"
    )


def by_tool(tools: tuple[DirectMcpToolAdapter, ...]) -> dict[str, DirectMcpToolAdapter]:
    """The adapters by the server's own tool name."""
    return {adapter.tool.name: adapter for adapter in tools}


async def test_direct_tools_reach_the_host_callbacks(servers_in_memory: InMemoryServers) -> None:
    """Sampling, elicitation (defaults filled) and roots are answered by the handlers given to the direct loader."""
    seen: list[tuple[str, str]] = []

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        seen.append((server_id, params.message))
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada", "size": "m"})

    record = builtin_demo_record()
    async with open_direct_mcp_tools(
        [record], sampling_handler=sample, elicitation_handler=elicit, roots=["file:///work/project"]
    ) as (tools, connections):
        assert connections[0].handle.offers() == {"sampling", "elicitation", "roots"}
        adapters = by_tool(tools.tools)
        sampled = json.loads(await adapters["ask_model"].execute({"prompt": "hi"}))
        assert sampled["content"][0]["text"] == "sampled" and sampled["model"] == "host-model"
        answered = json.loads(await adapters["ask_user"].execute({}))
        assert answered["action"] == "accept"
        assert answered["content"]["age"] == 30, "the schema's default was filled in (SEP-1034)"
        assert seen and seen[0][0] == record.id
        roots = await adapters["list_host_roots"].execute({})
        assert "file:///work/project" in roots


async def test_direct_tools_without_handlers_declare_nothing(servers_in_memory: InMemoryServers) -> None:
    """Without handlers no capability is declared, and a server that asks anyway is refused by the protocol."""
    async with open_direct_mcp_tools([builtin_demo_record()]) as (tools, connections):
        assert connections[0].handle.offers() == frozenset()
        with pytest.raises(McpActorsError, match="not supported"):
            await by_tool(tools.tools)["ask_model"].execute({"prompt": "hi"})


async def test_a_record_may_refuse_what_the_direct_loader_offers(servers_in_memory: InMemoryServers) -> None:
    """allowSampling: false on the record keeps sampling undeclared even though a handler is given."""
    argv = demo_server_command()
    record = McpServerRecord(
        name="demo",
        type=ServerType.STDIO,
        config=ServerConfig(command=argv[0], args=tuple(argv[1:]), ping_interval=0, allow_sampling=False),
    )
    async with open_direct_mcp_tools([record], sampling_handler=sample, roots=["file:///w"]) as (_, connections):
        assert connections[0].handle.offers() == {"roots"}


async def test_direct_stdio_server_samples_through_the_host() -> None:
    """Over a real stdio demo server process, a direct adapter's sampling request reaches the handler."""
    argv = demo_server_command()
    record = McpServerRecord(
        name="demo", type=ServerType.STDIO, config=ServerConfig(command=argv[0], args=tuple(argv[1:]), ping_interval=0)
    )
    calls: list[Any] = []

    async def counting(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        calls.append(server_id)
        return await sample(server_id, params)

    with trio.fail_after(BOUND):
        async with open_direct_mcp_tools([record], sampling_handler=counting) as (tools, _):
            sampled = json.loads(await by_tool(tools.tools)["ask_model"].execute({"prompt": "hi"}))
    assert sampled["content"][0]["text"] == "sampled"
    assert calls == [record.id]
