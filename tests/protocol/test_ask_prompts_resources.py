"""prompts/get and resources/read that ask the host: the same handlers as tools/call, each revision.

The demo server's prompt ``introduce`` asks the user's name (elicitation) and its template
``demo://model-says/{topic}`` samples the host's model: through a server-to-client request at
2025-11-25 (``legacy``), through an ``InputRequiredResult`` the client fulfils and retries at
2026-07-28 (``auto``). Real processes (stdio) and a real HTTP server on 127.0.0.1.

How a server's question reaches the host over each transport is what
``test_callbacks_transports.py`` checks (``tools/call``); here the question comes from
``prompts/get`` and ``resources/read``. Each revision runs over streamable HTTP, and the
handshake revision's server-to-client requests once more over stdio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
import trio
from mcp.shared.exceptions import MCPError
from protocol_bed import BOUND, NEGOTIATED, negotiated
from testkit import demo_http_app, serve_in_thread

from mcp_actors._demo.callbacks import ASKING_PROMPT
from mcp_actors.errors import ServerProtocolError, ServerRequestFailed
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService
from mcp_actors.testing import demo_server_command

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@asynccontextmanager
async def asking_service(tmp_path: Path, transport: str, protocol: str, **handlers: Any) -> AsyncIterator[McpService]:
    """A runtime with ``handlers`` and the demo server named 'srv' at ``protocol``, over ``transport``."""
    config = {"pingInterval": 0, "protocol": protocol}
    if transport == "stdio":
        argv = demo_server_command()
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False, **handlers) as rt:
            await rt.service.add(
                {"name": "srv", "type": "stdio", "config": {"command": argv[0], "args": argv[1:], **config}}
            )
            yield rt.service
        return
    # The server outlives the runtime, so it has no open connection to wait for when it stops.
    async with (
        serve_in_thread(demo_http_app) as url,
        open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False, **handlers) as rt,
    ):
        await rt.service.add({"name": "srv", "type": "http", "config": {"url": url, **config}})
        yield rt.service


def prompt_text(result: mcp_types.GetPromptResult) -> str:
    content = result.messages[0].content
    assert isinstance(content, mcp_types.TextContent)
    return content.text


def resource_text(result: mcp_types.ReadResourceResult) -> str:
    content = result.contents[0]
    assert isinstance(content, mcp_types.TextResourceContents)
    return content.text


@pytest.mark.parametrize(("transport", "protocol"), [("stdio", "legacy"), ("http", "legacy"), ("http", "auto")])
async def test_prompt_and_resource_reach_the_handlers_answered_and_declined(
    tmp_path: Path, transport: str, protocol: str
) -> None:
    """A prompt that elicits and a resource that samples get the host's answers; a decline and a refusal arrive too."""
    mode = {"answer": True}
    asked: list[tuple[str, str]] = []

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append((server_id, params.message))
        if mode["answer"]:
            return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})
        return mcp_types.ElicitResult(action="decline")

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        if not mode["answer"]:
            raise MCPError(code=mcp_types.INVALID_REQUEST, message="the user turned sampling off")
        question = params.messages[0].content
        assert isinstance(question, mcp_types.TextContent)
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(type="text", text=f"echo: {question.text}"), model="host"
        )

    with trio.fail_after(BOUND):
        async with asking_service(
            tmp_path, transport, protocol, elicitation_handler=elicit, sampling_handler=sample
        ) as svc:
            rendered = await svc.get_prompt("srv", ASKING_PROMPT, {"team": "ops"})
            assert prompt_text(rendered) == "Please introduce Ada to the ops team."
            read = await svc.read_resource("srv", "demo://model-says/trio")
            assert resource_text(read) == "echo: Say one sentence about trio."
            assert negotiated(svc, "srv") == NEGOTIATED[protocol]
            assert asked == [(svc.get("srv").id, "Who should be introduced to ops?")]

            mode["answer"] = False
            declined = await svc.get_prompt("srv", ASKING_PROMPT, {"team": "ops"})
            assert prompt_text(declined) == "The user answered decline: introduce nobody to the ops team."
            with pytest.raises(ServerRequestFailed, match=r"'srv'.*resources/read.*the user turned sampling off"):
                await svc.read_resource("srv", "demo://model-says/trio")


async def test_prompt_and_resource_without_handlers_are_refused(tmp_path: Path, protocol: str) -> None:
    """With no handler the server's question is refused the protocol's way; the error names the server and method."""
    with trio.fail_after(BOUND):
        async with asking_service(tmp_path, "http", protocol) as svc:
            with pytest.raises(ServerRequestFailed, match=r"'srv'.*prompts/get.*Elicitation not supported"):
                await svc.get_prompt("srv", ASKING_PROMPT, {"team": "ops"})
            with pytest.raises(ServerRequestFailed, match=r"'srv'.*resources/read.*Sampling not supported"):
                await svc.read_resource("srv", "demo://model-says/trio")
            assert negotiated(svc, "srv") == NEGOTIATED[protocol]


async def test_a_server_that_keeps_asking_is_stopped_after_the_round_cap(autojump_clock: trio.abc.Clock) -> None:
    """prompts/get, resources/read and tools/call give up after 10 InputRequiredResult rounds with a typed error."""
    from mcp.server.mcpserver import MCPServer

    from mcp_actors import events
    from mcp_actors._connection.callbacks import INPUT_REQUIRED_MAX_ROUNDS, HostCallbacks
    from mcp_actors._connection.handle import open_connection
    from mcp_actors._connection.status import ConnectionSettings
    from mcp_actors._wire.transports import MemoryParams
    from mcp_actors.errors import ToolCallFailed

    answered = 0

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        nonlocal answered
        answered += 1
        return mcp_types.ElicitResult(action="accept", content={})

    def again() -> mcp_types.InputRequiredResult:
        params = mcp_types.ElicitRequestFormParams(
            message="again?", requested_schema={"type": "object", "properties": {}}
        )
        return mcp_types.InputRequiredResult(input_requests={"again": mcp_types.ElicitRequest(params=params)})

    def insistent() -> MCPServer[object]:
        server: MCPServer[object] = MCPServer("insistent")

        @server.prompt(name="nag")
        async def nag() -> mcp_types.InputRequiredResult:
            return again()

        @server.resource("mem://nag/{n}", name="nag")
        async def nag_resource(n: str) -> mcp_types.InputRequiredResult:
            return again()

        @server.tool(name="nag")
        async def nag_tool() -> mcp_types.InputRequiredResult:
            return again()

        return server

    settings = ConnectionSettings(
        server_id="id-nag",
        server_name="nag",
        transport=MemoryParams(server=insistent),
        ping_interval=0,
        host=HostCallbacks(elicitation=elicit),
    )
    handle, start = open_connection(settings, events.EventBus())
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            with pytest.raises(ServerProtocolError, match=r"'nag': prompts/get still asked for input after 10 rounds"):
                await handle.get_prompt("nag")
            with pytest.raises(ServerProtocolError, match=r"'nag': resources/read still asked for input after 10"):
                await handle.read_resource("mem://nag/1")
            with pytest.raises(ToolCallFailed, match=r"tool 'nag' still asked for input after 10 rounds"):
                await handle.call_tool("nag", {})
        finally:
            await handle.aclose()
    assert answered == 3 * INPUT_REQUIRED_MAX_ROUNDS
