"""The gateway as the official SDK client sees it: two upstream servers behind one endpoint.

In process and on loopback: the runtime's servers are in-memory twins (a fault server
``alpha``, demo servers ``beta`` and ``gamma``), the gateway serves real sockets on
127.0.0.1, and the client is the SDK's own (``ClientSession`` over its streamable-HTTP
transport) at 2025-06-18, 2025-11-25 and 2026-07-28.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import attrs
import httpx2
import mcp.types as types
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from pydantic import Field

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.connection import ConnectionState
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.serve import HttpGateway, serve_http
from mcp_actors.testing import demo_server_command, fault_server_command
from mcp_actors.testing.memory import KillableServer, memory_demo_server, memory_fault_server

VERSIONS = ("2025-06-18", "2025-11-25", "2026-07-28")
BOUND = 30.0
"""Upper bound of any one step: real sockets, a loaded machine."""


@attrs.define(eq=False)
class Upstreams:
    """The in-memory servers behind the gateway, by record name, each killable as a process is."""

    servers: dict[str, KillableServer] = attrs.field(factory=dict)
    dead: set[str] = attrs.field(factory=set)

    def build(self, name: str, make: Callable[[], Any]) -> KillableServer:
        def instance() -> Any:
            if name in self.dead:
                # A server that stays down: every restart exits at once (as a broken install would).
                from mcp_actors.testing._fault_plan import FaultPlan

                return memory_fault_server(FaultPlan(exit_at_start=1))
            return make()

        self.servers[name] = KillableServer(instance)
        return self.servers[name]

    def kill_for_good(self, name: str) -> None:
        self.dead.add(name)
        self.servers[name].kill()


def header_server() -> Any:
    """A server whose tool mirrors an argument as an ``Mcp-Param-Region`` header (2026-07-28)."""
    server: MCPServer[Any] = MCPServer("headers")

    @server.tool(structured_output=False)
    async def where(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        return f"in {region}"

    return server


@contextlib.contextmanager
def upstreams_in_memory() -> Iterator[Upstreams]:
    """Serve the stdio records ``alpha`` (fault server), ``beta`` and ``gamma`` (demo servers) in memory."""
    upstreams = Upstreams()
    made: dict[str, MemoryParams] = {}

    def from_record(record: McpServerRecord) -> TransportParams:
        if record.name not in made:
            make = {"alpha": memory_fault_server, "delta": header_server}.get(record.name, memory_demo_server)
            made[record.name] = MemoryParams(server=upstreams.build(record.name, make))
        return made[record.name]

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        yield upstreams
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


def _records(names: tuple[str, ...]) -> dict[str, Any]:
    servers = []
    for name in names:
        argv = fault_server_command() if name == "alpha" else demo_server_command()
        servers.append({"name": name, "type": "stdio", "command": argv[0], "args": argv[1:]})
    return {"mcpServers": {s.pop("name"): s for s in servers}}


@attrs.define(eq=False)
class Rig:
    """A runtime, its gateway, and the upstreams behind it."""

    runtime: Runtime
    gateway: HttpGateway
    upstreams: Upstreams

    @property
    def url(self) -> str:
        return self.gateway.url


@contextlib.asynccontextmanager
async def gateway_rig(tmp_path: Path, names: tuple[str, ...] = ("alpha", "beta")) -> AsyncIterator[Rig]:
    """A runtime with ``names`` configured, served by a gateway on a free loopback port."""
    with upstreams_in_memory() as upstreams:
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)  # a fresh install's built-in demo server
            await runtime.service.add_json(json.dumps(_records(names)))
            async with trio.open_nursery() as nursery:
                gateway: HttpGateway = await nursery.start(serve_http, runtime.service)
                yield Rig(runtime, gateway, upstreams)
                with trio.fail_after(BOUND):
                    await gateway.stop(1.0)


@contextlib.asynccontextmanager
async def sdk_client(
    url: str, version: str, on_message: Callable[[Any], Any] | None = None
) -> AsyncIterator[ClientSession]:
    """The SDK's ClientSession over its streamable-HTTP transport, at ``version``."""
    async with streamable_http_client(url) as (read, write):
        kwargs: dict[str, Any] = {}
        if on_message is not None:

            async def handler(message: Any) -> None:
                on_message(message)

            kwargs["message_handler"] = handler
        async with ClientSession(dispatcher=JSONRPCDispatcher(read, write), **kwargs) as session:
            with trio.fail_after(BOUND):
                if version == "2026-07-28":
                    session.adopt(
                        types.DiscoverResult(supported_versions=[version], capabilities=types.ServerCapabilities())
                    )
                    discovered = await session.send_discover(version)
                    session.adopt(types.DiscoverResult.model_validate(discovered, by_name=False))
                elif version == "2025-11-25":
                    await session.initialize()
                else:
                    result = await session.send_request(
                        types.InitializeRequest(
                            params=types.InitializeRequestParams(
                                protocol_version=version,
                                capabilities=types.ClientCapabilities(),
                                client_info=types.Implementation(name="test", version="1"),
                            )
                        ),
                        types.InitializeResult,
                    )
                    session.adopt(result)
                    await session.send_notification(types.InitializedNotification())
            assert session.protocol_version == version
            yield session


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("version", VERSIONS)
async def test_the_sdk_client_lists_both_servers_tools_prefixed_and_calls_one(tmp_path: Path, version: str) -> None:
    """At each revision: tools of both servers, named <server>__<tool>; a call reaches the right one."""
    async with gateway_rig(tmp_path) as rig, sdk_client(rig.url, version) as client:
        with trio.fail_after(BOUND):
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"alpha__echo", "alpha__sleep", "beta__weather", "beta__bump_counter"} <= names
            assert all(name.startswith(("alpha__", "beta__")) for name in names)
            result = await client.call_tool("alpha__echo", {"text": f"hello at {version}"})
            assert _text(result) == f"hello at {version}"
            assert not result.is_error
            weather = await client.call_tool("beta__weather", {"city": "Oslo"})
            assert weather.structured_content is not None  # the structured result passes through whole


@pytest.mark.parametrize("version", VERSIONS)
async def test_progress_of_an_upstream_call_reaches_the_client(tmp_path: Path, version: str) -> None:
    """A call with a progress token gets the upstream's progress notifications, then its result."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with gateway_rig(tmp_path) as rig, sdk_client(rig.url, version) as client:
        with trio.fail_after(BOUND):
            result = await client.call_tool("alpha__sleep", {"seconds": 0.2}, progress_callback=progressed)
    assert _text(result) == "slept 0.2 s"
    assert len(seen) == 10
    assert seen[-1][0] == pytest.approx(0.2) and seen[-1][1] == pytest.approx(0.2)
    assert seen[0][2] is not None and "slept" in seen[0][2]


async def until(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate()`` holds (the caller bounds the wait): a status the runtime publishes."""
    while not predicate():  # noqa: ASYNC110 - a snapshot other tasks publish, no event to wait on
        await trio.sleep(0.01)


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_client_that_cancels_cancels_the_upstream_call(tmp_path: Path, version: str) -> None:
    """Cancelling a call (notifications/cancelled, or at 2026-07-28 closing its request) ends it upstream."""
    async with gateway_rig(tmp_path) as rig, sdk_client(rig.url, version) as client:
        with trio.fail_after(BOUND):
            await client.call_tool("alpha__echo", {"text": "warm"})
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.call_tool, "alpha__sleep", {"seconds": 60})
                    await until(lambda: rig.runtime.service.status("alpha").calls_in_flight > 0)
                    scope.cancel()
            assert scope.cancelled_caught
            # Bounded by fail_after: the 60 s sleep was cancelled upstream.
            await until(lambda: rig.runtime.service.status("alpha").calls_in_flight == 0)
            assert _text(await client.call_tool("alpha__echo", {"text": "still fine"})) == "still fine"


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_a_killed_upstream_costs_only_its_own_tools(tmp_path: Path, version: str) -> None:
    """A dead server leaves the listing; its tools answer a tool error naming it; the other works on."""
    async with gateway_rig(tmp_path) as rig, sdk_client(rig.url, version) as client:
        with trio.fail_after(BOUND):
            assert "alpha__echo" in {tool.name for tool in (await client.list_tools()).tools}
            rig.upstreams.kill_for_good("alpha")
            await until(lambda: rig.runtime.service.status("alpha").state is ConnectionState.ERROR)
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names and all(name.startswith("beta__") for name in names)
            failed = await client.call_tool("alpha__echo", {"text": "anyone?"})
            assert failed.is_error
            assert "'alpha'" in _text(failed)
            assert not (await client.call_tool("beta__weather", {"city": "Rome"})).is_error


async def test_list_changes_reach_the_session_stream(tmp_path: Path) -> None:
    """Disabling a server is announced on the 2025 GET stream as tools/prompts/resources list_changed."""
    arrived: list[str] = []
    changed = trio.Event()

    def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            arrived.append(message.root.method if hasattr(message, "root") else message.method)
        elif hasattr(message, "method"):
            arrived.append(message.method)
        if "notifications/tools/list_changed" in arrived:
            changed.set()

    async with gateway_rig(tmp_path) as rig, sdk_client(rig.url, "2025-11-25", on_message) as client:
        with trio.fail_after(BOUND):
            await client.list_tools()
            await trio.sleep(0.2)  # the client opens its GET stream after the handshake
            await rig.runtime.service.update("beta", is_active=False)
            await changed.wait()
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names and all(name.startswith("alpha__") for name in names)


async def test_prompts_resources_and_completion_are_relayed_with_colliding_uris_told_apart(tmp_path: Path) -> None:
    """Prompts are prefixed; the second server's copy of a URI gets its server's scheme prefix; reads route back."""
    async with gateway_rig(tmp_path, ("alpha", "beta", "gamma")) as rig, sdk_client(rig.url, "2025-11-25") as client:
        with trio.fail_after(BOUND):
            prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
            assert {"beta__compose", "gamma__compose"} <= prompts
            rendered = await client.get_prompt("gamma__compose", {"topic": "trio", "tone": "formal"})
            assert "formal paragraph about trio" in str(rendered.messages[0].content)
            uris = {str(resource.uri) for resource in (await client.list_resources()).resources}
            assert {"demo://counter", "gamma+demo://counter"} <= uris
            await rig.runtime.service.call_tool("gamma", "bump_counter")
            plain = await client.read_resource("demo://counter")
            renamed = await client.read_resource("gamma+demo://counter")
            assert [c.text for c in plain.contents] == ["0"]  # beta's counter
            assert [c.text for c in renamed.contents] == ["1"]  # gamma's, bumped once
            assert str(renamed.contents[0].uri) == "gamma+demo://counter"
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert {"demo://note/{name}", "gamma+demo://note/{name}"} <= templates
            note = await client.read_resource("gamma+demo://note/ideas")
            assert [c.text for c in note.contents] == ["note ideas"]
            completion = await client.complete(
                types.PromptReference(name="beta__compose"), {"name": "tone", "value": "f"}
            )
            assert set(completion.completion.values) == {"formal", "friendly", "funny"}


async def test_a_stopped_gateway_leaves_nothing_running(tmp_path: Path, no_leaked_tasks: None) -> None:
    """stop() ends the gateway's tasks; the runtime then closes its servers."""
    async with gateway_rig(tmp_path) as rig, sdk_client(rig.url, "2025-11-25") as client:
        with trio.fail_after(BOUND):
            await client.call_tool("alpha__echo", {"text": "x"})
    for server in ("alpha", "beta"):
        assert rig.upstreams.servers[server].starts >= 0


async def test_a_2026_listen_stream_hears_list_changes(tmp_path: Path) -> None:
    """At 2026-07-28 the SDK client's subscriptions/listen is acknowledged and gets tools/list_changed."""
    from mcp import Client

    async with gateway_rig(tmp_path) as rig, Client(rig.url, mode="2026-07-28") as client:
        with trio.fail_after(BOUND):
            async with client.listen(tools_list_changed=True) as subscription:
                await rig.runtime.service.update("beta", is_active=False)
                async for _event in subscription:
                    break  # one tools/list_changed arrived
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names and all(name.startswith("alpha__") for name in names)


async def post_region_mismatch(url: str, tool: str) -> httpx2.Response:
    """A 2026-07-28 ``tools/call`` of ``tool`` whose ``Mcp-Param-Region`` header (us) disagrees with its argument."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"region": "eu"}, "_meta": envelope},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
        "mcp-param-region": "us",
    }
    async with httpx2.AsyncClient() as http:
        return await http.post(url, json=body, headers=headers)


async def test_mcp_param_headers_are_checked_against_the_tools_schema(tmp_path: Path) -> None:
    """At 2026-07-28 a header that disagrees with its argument is -32020; the SDK client's own headers pass."""
    from mcp import Client

    async with gateway_rig(tmp_path, ("alpha", "delta")) as rig, Client(rig.url, mode="2026-07-28") as client:
        with trio.fail_after(BOUND):
            await client.list_tools()
            assert _text(await client.call_tool("delta__where", {"region": "eu"})) == "in eu"
            answer = await post_region_mismatch(rig.url, "delta__where")
            assert answer.status_code == 400
            assert answer.json()["error"]["code"] == -32020
