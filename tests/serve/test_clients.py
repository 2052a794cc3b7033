"""The gateway from outside, through the clients users have.

Each client connects to a real gateway on a loopback socket (``serve_http`` in the test's
trio run): the official SDK's ``Client`` (and its ``ClientSession`` at every revision the SDK
speaks), fastmcp's ``Client``, the OpenAI Agents SDK's ``MCPServerStreamableHttp`` under a
real ``Runner.run`` with a scripted model (its asyncio loop in a worker thread), and
mcp-actors itself, whose runtime has an HTTP record pointing at the gateway (a gateway of
gateways). Each lists the tools (prefixed names), calls one, sees progress where the client
can, and meets a killed upstream: that call is a tool error naming the server, the next works.

Behind the gateway: the fault server ``alpha`` (``echo``; ``sleep`` reports ten progress steps)
and the demo server ``beta``, in memory and killable as processes are.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import mcp.types as types
import pytest
import trio
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, SUPPORTED_PROTOCOL_VERSIONS

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.connection import ConnectionState
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.serve import HttpGateway, serve_http
from mcp_actors.testing import demo_server_command, fault_server_command
from mcp_actors.testing.memory import KillableServer, memory_demo_server, memory_fault_server

BOUND = 45.0
"""Upper bound of any one step: real sockets, a loaded 2-core machine; only a broken test reaches it."""

_T = TypeVar("_T")

SDK_MODES = ("legacy", "auto", "2026-07-28")
"""What the SDK's ``Client`` speaks: the handshake (2025-11-25), discovery (2026-07-28 here), 2026-07-28 outright."""


# ---------------------------------------------------------------------------------------- the rig


@attrs.define(eq=False)
class Rig:
    """A runtime with ``alpha`` and ``beta``, its gateway, and the in-memory servers behind it."""

    runtime: Runtime
    gateway: HttpGateway
    upstreams: dict[str, KillableServer]

    @property
    def url(self) -> str:
        return self.gateway.url

    def in_flight(self, server: str) -> int:
        return self.runtime.service.status(server).calls_in_flight


@contextlib.contextmanager
def _upstreams_in_memory() -> Iterator[dict[str, KillableServer]]:
    """Serve the stdio records ``alpha`` (fault server) and ``beta`` (demo server) in memory, killable."""
    servers: dict[str, KillableServer] = {}
    made: dict[str, MemoryParams] = {}

    def from_record(record: McpServerRecord) -> TransportParams:
        if record.name not in made:
            servers[record.name] = KillableServer(memory_fault_server if record.name == "alpha" else memory_demo_server)
            made[record.name] = MemoryParams(server=servers[record.name])
        return made[record.name]

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        yield servers
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


@contextlib.asynccontextmanager
async def gateway_rig(tmp_path: Path) -> AsyncIterator[Rig]:
    """``alpha`` and ``beta`` behind a gateway on a free loopback port."""
    records = {}
    for name, argv in (("alpha", fault_server_command()), ("beta", demo_server_command())):
        records[name] = {"type": "stdio", "command": argv[0], "args": argv[1:]}
    with _upstreams_in_memory() as upstreams:
        async with open_runtime(tmp_path / "gateway.json") as runtime:
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)  # a fresh install's built-in demo server
            await runtime.service.add_json(json.dumps({"mcpServers": records}))
            async with trio.open_nursery() as nursery:
                gateway: HttpGateway = await nursery.start(serve_http, runtime.service)
                yield Rig(runtime, gateway, upstreams)
                with trio.fail_after(BOUND):
                    await gateway.stop(1.0)


async def until(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate()`` holds (the caller bounds the wait): a status the runtime publishes."""
    while not predicate():  # noqa: ASYNC110 - a snapshot other tasks publish, no event to wait on
        await trio.sleep(0.01)


async def kill_during_a_call(rig: Rig, call: Callable[[], Awaitable[Any]]) -> Any:
    """Start ``call`` (a long ``alpha__sleep``), kill ``alpha`` while it runs, return what the call returned."""
    outcome: list[Any] = []

    async def calling() -> None:
        outcome.append(await call())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(calling)
        await until(lambda: rig.in_flight("alpha") > 0)
        rig.upstreams["alpha"].kill()
    return outcome[0]


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


# ---------------------------------------------------------------------------------------- the SDK's Client


@pytest.mark.parametrize("mode", SDK_MODES)
async def test_the_sdk_client_lists_calls_sees_progress_and_survives_a_killed_upstream(
    tmp_path: Path, mode: str
) -> None:
    """``mcp.Client`` in each mode: prefixed tools, a real result, progress, a dead upstream named, then fine."""
    steps: list[float] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    async with gateway_rig(tmp_path) as rig, Client(rig.url, mode=mode) as client:
        with trio.fail_after(BOUND):
            assert client.protocol_version == (LATEST_HANDSHAKE_VERSION if mode == "legacy" else "2026-07-28")
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"alpha__echo", "alpha__sleep", "beta__weather", "beta__add"} <= names
            assert all(name.startswith(("alpha__", "beta__")) for name in names)
            assert _text(await client.call_tool("alpha__echo", {"text": f"via {mode}"})) == f"via {mode}"
            weather = await client.call_tool("beta__weather", {"city": "Oslo"})
            assert not weather.is_error and weather.structured_content is not None
            slept = await client.call_tool("alpha__sleep", {"seconds": 0.2}, progress_callback=progressed)
            assert _text(slept) == "slept 0.2 s"
            assert len(steps) == 10 and steps[-1] == pytest.approx(0.2)

            failed = await kill_during_a_call(rig, lambda: client.call_tool("alpha__sleep", {"seconds": 60}))
            assert failed.is_error
            assert "'alpha'" in _text(failed)
            assert _text(await client.call_tool("alpha__echo", {"text": "back"})) == "back"


@contextlib.asynccontextmanager
async def session_at(url: str, version: str) -> AsyncIterator[ClientSession]:
    """The SDK's ``ClientSession`` over its streamable-HTTP transport, speaking exactly ``version``."""
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(dispatcher=JSONRPCDispatcher(read, write)) as session,
    ):
        if version in HANDSHAKE_PROTOCOL_VERSIONS:
            result = await session.send_request(
                types.InitializeRequest(
                    params=types.InitializeRequestParams(
                        protocol_version=version,
                        capabilities=types.ClientCapabilities(),
                        client_info=types.Implementation(name="every-revision", version="1"),
                    )
                ),
                types.InitializeResult,
            )
            session.adopt(result)
            await session.send_notification(types.InitializedNotification())
        else:
            session.adopt(types.DiscoverResult(supported_versions=[version], capabilities=types.ServerCapabilities()))
        assert session.protocol_version == version
        yield session


@pytest.mark.parametrize("version", SUPPORTED_PROTOCOL_VERSIONS)
async def test_every_revision_the_sdk_speaks_lists_and_calls_through_the_gateway(tmp_path: Path, version: str) -> None:
    """From 2024-11-05 to 2026-07-28: the listing has every tool of both servers, and calls are answered."""
    async with gateway_rig(tmp_path) as rig, session_at(rig.url, version) as session:
        with trio.fail_after(BOUND):
            listed = (await session.list_tools()).tools
            names = {tool.name for tool in listed}
            direct = {f"alpha__{t.name}" for t in await rig.runtime.service.list_tool_definitions("alpha")}
            direct |= {f"beta__{t.name}" for t in await rig.runtime.service.list_tool_definitions("beta")}
            assert names == direct
            assert _text(await session.call_tool("alpha__echo", {"text": version})) == version
            added = await session.call_tool("beta__add", {"a": 2, "b": 3})
            assert not added.is_error and "5" in _text(added)


# ---------------------------------------------------------------------------------------- asyncio clients


async def beside_the_gateway(rig: Rig, scenario: Callable[[Callable[[], None]], Awaitable[_T]]) -> _T:
    """Run an asyncio ``scenario`` in a worker thread while the gateway serves in this trio run.

    The scenario calls ``arm()`` right before its long ``alpha__sleep``; this side then kills
    ``alpha`` as soon as that call is in flight upstream.
    """
    armed = trio.Event()

    def arm() -> None:
        trio.from_thread.run_sync(armed.set)

    async def killer() -> None:
        await armed.wait()
        await until(lambda: rig.in_flight("alpha") > 0)
        rig.upstreams["alpha"].kill()

    async def bounded() -> _T:
        return await asyncio.wait_for(scenario(arm), BOUND)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(killer)
        result = await trio.to_thread.run_sync(lambda: asyncio.run(bounded()))
        nursery.cancel_scope.cancel()
    return result


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_fastmcp_client_lists_calls_sees_progress_and_survives_a_killed_upstream(
    tmp_path: Path, mode: str
) -> None:
    """fastmcp's ``Client`` (asyncio), handshake or discovery: tools, a result, progress, the dead server named."""
    import fastmcp

    async def scenario(arm: Callable[[], None]) -> dict[str, Any]:
        seen: dict[str, Any] = {"progress": []}

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            seen["progress"].append(progress)

        async with fastmcp.Client(rig.url, mode=mode) as client:
            seen["version"] = client.session.protocol_version
            seen["names"] = {tool.name for tool in await client.list_tools()}
            seen["echo"] = _text(await client.call_tool("alpha__echo", {"text": "from fastmcp"}))
            seen["slept"] = _text(await client.call_tool("alpha__sleep", {"seconds": 0.2}, progress_handler=progressed))
            arm()
            seen["killed"] = await client.call_tool("alpha__sleep", {"seconds": 60}, raise_on_error=False)
            seen["after"] = _text(await client.call_tool("alpha__echo", {"text": "back"}))
        return seen

    async with gateway_rig(tmp_path) as rig:
        with trio.fail_after(BOUND):
            seen = await beside_the_gateway(rig, scenario)
    assert seen["version"] == (LATEST_HANDSHAKE_VERSION if mode == "legacy" else "2026-07-28")
    assert {"alpha__echo", "alpha__sleep", "beta__weather"} <= seen["names"]
    assert all(name.startswith(("alpha__", "beta__")) for name in seen["names"])
    assert seen["echo"] == "from fastmcp"
    assert seen["slept"] == "slept 0.2 s"
    assert len(seen["progress"]) == 10
    assert seen["killed"].is_error and "'alpha'" in _text(seen["killed"])
    assert seen["after"] == "back"


async def test_an_openai_agents_run_calls_tools_through_the_gateway(tmp_path: Path) -> None:
    """``MCPServerStreamableHttp`` under ``Runner.run``: the model sees the outputs and the dead server named.

    The Agents SDK has no progress callback for MCP calls, so progress is not checked here.
    ``cache_tools_list=True``: without it the SDK lists tools before every turn, and a turn
    right after the kill would find ``alpha``'s tools left out of the gateway's listing while
    ``alpha`` restarts (a server that is down costs its own items), so the model's next call
    to one would be refused by the SDK itself as an unknown tool.
    """
    from agents import Agent, RunConfig, Runner
    from agents.mcp import MCPServerStreamableHttp

    from tests.integrations.openai_agents_kit import ScriptedModel

    model = ScriptedModel(
        [("alpha__echo", {"text": "from the agent"}), ("beta__add", {"a": 2, "b": 3})],
        [("alpha__sleep", {"seconds": 60})],
        [("alpha__echo", {"text": "back"})],
    )

    async def scenario(arm: Callable[[], None]) -> str:
        turns = 0
        real = model.get_response

        async def arming(*args: Any, **kwargs: Any) -> Any:
            nonlocal turns
            turns += 1
            if turns == 2:  # this turn calls alpha__sleep
                arm()
            return await real(*args, **kwargs)

        model.get_response = arming  # type: ignore[method-assign]
        async with MCPServerStreamableHttp(
            {"url": rig.url, "timeout": BOUND}, name="gateway", cache_tools_list=True
        ) as server:
            agent = Agent(name="a", model=model, mcp_servers=[server])
            result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
        return str(result.final_output)

    async with gateway_rig(tmp_path) as rig:
        with trio.fail_after(BOUND):
            final = await beside_the_gateway(rig, scenario)
    assert {"alpha__echo", "alpha__sleep", "beta__add", "beta__weather"} <= set(model.tools_seen[0])
    first, second, killed, back = model.outputs
    assert (first, second) == ("from the agent", "5.0")
    assert "server 'alpha'" in killed
    assert back == "back"
    assert final.endswith("back")


# ---------------------------------------------------------------------------------------- mcp-actors itself


async def test_mcp_actors_is_a_client_of_the_gateway(tmp_path: Path) -> None:
    """A second runtime with an HTTP record at the gateway (gateway of gateways): list, call, progress, a death."""
    steps: list[float] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    async with gateway_rig(tmp_path) as rig, open_runtime(tmp_path / "outer.json") as outer:
        for record in await outer.service.list():
            await outer.service.remove(record.id)
        await outer.service.add_json(json.dumps({"mcpServers": {"gw": {"type": "http", "url": rig.url}}}))
        service = outer.service
        with trio.fail_after(BOUND):
            names = {tool.name for tool in await service.list_server_tools("gw")}
            assert {"alpha__echo", "alpha__sleep", "beta__weather"} <= names
            assert _text(await service.call_tool("gw", "alpha__echo", {"text": "nested"})) == "nested"
            slept = await service.call_tool("gw", "alpha__sleep", {"seconds": 0.2}, on_progress=progressed)
            assert _text(slept) == "slept 0.2 s"
            assert len(steps) == 10 and steps[-1] == pytest.approx(0.2)
            failed = await kill_during_a_call(rig, lambda: service.call_tool("gw", "alpha__sleep", {"seconds": 60}))
            assert failed.is_error and "'alpha'" in _text(failed)
            assert service.status("gw").state is ConnectionState.CONNECTED  # the gateway itself is fine
            assert _text(await service.call_tool("gw", "alpha__echo", {"text": "back"})) == "back"
