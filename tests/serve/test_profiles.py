"""Profiles through the gateway, as the official SDK client sees them at ``/mcp/<profile>``.

In process and on loopback: the runtime's servers are in-memory twins (demo servers
``alpha`` and ``beta``, the conformance suite's fixture server ``fixture``), the profiles are
written to the config file as a person would, and the client is the SDK's ``mcp.Client``
(at 2026-07-28 by discovery, and at a handshake revision).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import mcp.types as types
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_actors._config.profiles import PROFILES_KEY
from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._config.store import SectionChange
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.errors import InvalidProfile, ProfileNotFound
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.serve import HttpGateway, serve_http, serve_stdio
from mcp_actors.testing import demo_server_command
from mcp_actors.testing.conformance_server import create_conformance_server
from mcp_actors.testing.memory import memory_demo_server
from tests.serve.test_gateway import post_region_mismatch

BOUND = 30.0
"""Upper bound of any one step: real sockets, a loaded machine."""
MODES = ("auto", "legacy")
"""``auto`` discovers 2026-07-28; ``legacy`` opens a handshake session."""

MAKERS: dict[str, Callable[[], Any]] = {
    "alpha": memory_demo_server,
    "beta": memory_demo_server,
    "fixture": create_conformance_server,
}


@contextlib.contextmanager
def servers_in_memory() -> Iterator[None]:
    """Serve stdio records named in :data:`MAKERS` by in-memory servers (a fresh one per connection)."""

    def from_record(record: McpServerRecord) -> TransportParams:
        return MemoryParams(server=MAKERS.get(record.name, memory_demo_server))

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        yield
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


def server_records(names: tuple[str, ...]) -> str:
    """The ``add --json`` document for stdio servers ``names`` (served in memory)."""
    argv = demo_server_command()
    return json.dumps({"mcpServers": {name: {"command": argv[0], "args": argv[1:]} for name in names}})


def write_profiles(runtime: Runtime, profiles: Any) -> None:
    """Write the ``profiles`` section as JSON, as a person editing the file would."""
    runtime.service.config_store.modify_section(PROFILES_KEY, lambda _current: SectionChange(value=profiles))


@attrs.define(eq=False)
class Rig:
    """A runtime and its gateway."""

    runtime: Runtime
    gateway: HttpGateway

    def url(self, profile: str | None = None) -> str:
        return self.gateway.url if profile is None else f"{self.gateway.url}/{profile}"


@contextlib.asynccontextmanager
async def profiled_gateway(
    tmp_path: Path, profiles: Any, names: tuple[str, ...] = ("alpha", "beta"), **serve: Any
) -> AsyncIterator[Rig]:
    """A runtime with servers ``names`` and the ``profiles`` section, served on a free loopback port."""
    with servers_in_memory():
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)  # a fresh install's built-in demo server
            await runtime.service.add_json(server_records(names))
            write_profiles(runtime, profiles)
            async with trio.open_nursery() as nursery:
                gateway: HttpGateway = await nursery.start(lambda **ts: serve_http(runtime.service, **serve, **ts))
                yield Rig(runtime, gateway)
                with trio.fail_after(BOUND):
                    await gateway.stop(1.0)


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


CODER = {
    "coder": {
        "description": "what the coding agent needs",
        "servers": {
            "alpha": {
                "tools": ["ec*", "add"],
                "rename": {"echo": "say"},
                "describe": {"add": "Sum two numbers for the agent."},
                "prompts": False,
                "resources": False,
            },
            "beta": {"tools": ["weather"]},
        },
    }
}


@pytest.mark.parametrize("mode", MODES)
async def test_a_profile_lists_only_its_tools_renamed_and_described(tmp_path: Path, mode: str) -> None:
    """/mcp/coder lists the selected tools (one renamed, one described anew); /mcp still lists everything."""
    async with profiled_gateway(tmp_path, CODER) as rig:
        with trio.fail_after(BOUND):
            async with Client(rig.url("coder"), mode=mode) as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert set(tools) == {"say", "alpha__add", "beta__weather"}
                assert tools["alpha__add"].description == "Sum two numbers for the agent."
                assert tools["say"].description == "Return the given text unchanged."
                assert _text(await client.call_tool("say", {"text": "hi"})) == "hi"
                added = await client.call_tool("alpha__add", {"a": 2, "b": 3})
                assert not added.is_error
            async with Client(rig.url(), mode=mode) as client:
                everything = {tool.name for tool in (await client.list_tools()).tools}
                assert {"alpha__echo", "alpha__sleep", "beta__echo", "beta__weather"} <= everything


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_outside_the_profile_is_an_unknown_tool(tmp_path: Path, mode: str) -> None:
    """A tool the profile does not select (plain name, own name, a renamed one's old name) is unknown."""
    async with profiled_gateway(tmp_path, CODER) as rig, Client(rig.url("coder"), mode=mode) as client:
        with trio.fail_after(BOUND):
            await client.list_tools()
            for name in ("alpha__sleep", "beta__echo", "alpha__echo", "sleep"):
                with pytest.raises(MCPError, match=f"Unknown tool: {name}"):
                    await client.call_tool(name, {"text": "x"})
            assert _text(await client.call_tool("say", {"text": "still here"})) == "still here"


async def test_prompts_and_resources_follow_the_server_selection(tmp_path: Path) -> None:
    """A profile that turns alpha's prompts and resources off shows beta's only; alpha's are not found."""
    async with profiled_gateway(tmp_path, CODER) as rig, Client(rig.url("coder")) as client:
        with trio.fail_after(BOUND):
            prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
            assert prompts and all(name.startswith("beta__") for name in prompts)
            greeting = await client.get_prompt("beta__greeting", {"name": "Ada"})
            assert "Ada" in json.dumps(greeting.model_dump(mode="json"))
            with pytest.raises(MCPError, match="Unknown prompt"):
                await client.get_prompt("alpha__greeting", {"name": "Ada"})
            resources = (await client.list_resources()).resources
            uris = [str(resource.uri) for resource in resources]
            assert uris
            # Both demo servers list the same URIs: alpha's keep them at the plain endpoint, so
            # what this profile shows is beta's renamed ones and nothing of alpha.
            async with Client(rig.url()) as plain:
                owners = {str(r.uri): r for r in (await plain.list_resources()).resources}
            assert all(uri in owners for uri in uris)
            alpha_only = [uri for uri in owners if not uri.startswith("beta+")]
            assert alpha_only
            for uri in uris:
                assert uri.startswith("beta+")
            with pytest.raises(MCPError, match="Resource not found"):
                await client.read_resource(alpha_only[0])
            read = await client.read_resource(uris[0])
            assert read.contents


async def test_an_unknown_profile_path_is_404_and_a_session_belongs_to_its_path(tmp_path: Path) -> None:
    """/mcp/nope is 404 naming the endpoint; a session opened at /mcp/coder is not found at /mcp."""
    async with profiled_gateway(tmp_path, CODER) as rig:
        with trio.fail_after(BOUND):
            async with httpx2.AsyncClient() as http:
                headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
                missing = await http.post(
                    rig.url("nope"), headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
                )
                assert missing.status_code == 404
                assert "/mcp/<profile>" in missing.text
                init = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                }
                opened = await http.post(rig.url("coder"), headers=headers, json=init)
                assert opened.status_code == 200
                sid = opened.headers["mcp-session-id"]
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                same = await http.post(rig.url("coder"), headers={**headers, "mcp-session-id": sid}, json=ping)
                assert same.status_code == 200
                other = await http.post(rig.url(), headers={**headers, "mcp-session-id": sid}, json=ping)
                assert other.status_code == 404


async def test_a_default_profile_restricts_the_plain_endpoint(tmp_path: Path) -> None:
    """With a profile named ``default``, /mcp serves that profile, not every server."""
    profiles = {"default": {"servers": {"beta": {"tools": ["echo"]}}}}
    async with profiled_gateway(tmp_path, profiles) as rig, Client(rig.url()) as client:
        with trio.fail_after(BOUND):
            assert [tool.name for tool in (await client.list_tools()).tools] == ["beta__echo"]
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("alpha__echo", {"text": "x"})


async def test_the_conformance_fixture_is_served_under_its_tools_own_names(tmp_path: Path) -> None:
    """A profile with ``naming: tool`` serves the fixture server's tools under their own names, callable."""
    profiles = {"conformance": {"naming": "tool", "servers": {"fixture": {}}}}
    async with profiled_gateway(tmp_path, profiles, names=("fixture", "alpha")) as rig:
        with trio.fail_after(BOUND):
            async with Client(create_conformance_server()) as direct:
                own = {tool.name for tool in (await direct.list_tools()).tools}
            async with Client(rig.url("conformance")) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert names == own
                result = await client.call_tool("test_simple_text", {})
                assert not result.is_error
                assert _text(result)
                prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
                assert prompts and not any("__" in name for name in prompts)


async def test_a_rename_wins_over_a_generated_name(tmp_path: Path) -> None:
    """Under ``naming: tool`` two ``echo`` collide: the one renamed to ``echo`` keeps it, the other is suffixed."""
    profiles = {
        "both": {
            "naming": "tool",
            "servers": {"alpha": {"tools": ["echo"]}, "beta": {"tools": ["add"], "rename": {"echo": "echo"}}},
        }
    }
    async with profiled_gateway(tmp_path, profiles) as rig, Client(rig.url("both")) as client:
        with trio.fail_after(BOUND):
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            assert "echo" in names and "add" in names and len(names) == 3
            other = next(name for name in names if name.startswith("echo_"))
            assert _text(await client.call_tool("echo", {"text": "b"})) == "b"
            assert _text(await client.call_tool(other, {"text": "a"})) == "a"


async def test_a_malformed_profile_section_stops_the_gateway_at_start(tmp_path: Path) -> None:
    """A gateway does not start on a bad ``profiles`` section: the error names the profile and the field."""
    with servers_in_memory():
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            write_profiles(runtime, {"coder": {"servers": {"alpha": {"tools": "echo"}}}})
            with pytest.raises(InvalidProfile) as caught:
                await serve_http(runtime.service)
            assert caught.value.profile == "coder"
            assert caught.value.field == "profiles.coder.servers.alpha.tools"


async def test_serve_stdio_refuses_a_profile_that_is_not_configured(tmp_path: Path) -> None:
    """``serve_stdio(profile=...)`` with an unknown name fails at start, naming the profiles there are."""
    with servers_in_memory():
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            write_profiles(runtime, CODER)
            send, receive = trio.testing.memory_stream_pair()
            with pytest.raises(ProfileNotFound, match="the profiles are: default, coder"):
                await serve_stdio(runtime.service, stdin=receive, stdout=send, profile="nope")


async def test_serve_stdio_serves_one_profile(tmp_path: Path) -> None:
    """Over stdio with ``profile``, the client sees that profile's tools only."""
    with servers_in_memory():
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            for record in await runtime.service.list():
                await runtime.service.remove(record.id)
            await runtime.service.add_json(server_records(("alpha", "beta")))
            write_profiles(runtime, CODER)
            client_out, server_in = trio.testing.memory_stream_pair()
            server_out, client_in = trio.testing.memory_stream_pair()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: serve_stdio(runtime.service, stdin=server_in, stdout=server_out, profile="coder")
                )
                with trio.fail_after(BOUND):
                    lines = _Lines(client_in)
                    initialize = {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"},
                        },
                    }
                    await client_out.send_all(json.dumps(initialize).encode() + b"\n")
                    assert (await lines.next())["id"] == 1
                    for outgoing in (
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                    ):
                        await client_out.send_all(json.dumps(outgoing).encode() + b"\n")
                    answers: dict[int, dict[str, Any]] = {}
                    while 2 not in answers:
                        message = await lines.next()
                        if "id" in message:
                            answers[message["id"]] = message
                    assert "result" in answers[2], answers[2]
                    names = {tool["name"] for tool in answers[2]["result"]["tools"]}
                    assert names == {"say", "alpha__add", "beta__weather"}
                await client_out.aclose()


@attrs.define(eq=False)
class _Lines:
    """Newline-delimited JSON messages read from a stream."""

    stream: Any
    buffer: bytes = b""

    async def next(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the gateway closed stdout"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        decoded: dict[str, Any] = json.loads(line)
        return decoded


async def test_a_profile_naming_a_server_not_configured_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server a profile names that the config lacks (renamed, removed) is logged once at start, and left out."""
    profiles = {"x": {"servers": {"gone": {}, "alpha": {"tools": ["echo"]}, "b*": {"tools": []}}}}
    with caplog.at_level("WARNING", logger="mcp_actors.serve"):
        async with profiled_gateway(tmp_path, profiles) as rig, Client(rig.url("x")) as client:
            with trio.fail_after(BOUND):
                assert [tool.name for tool in (await client.list_tools()).tools] == ["alpha__echo"]
    warned = [record.getMessage() for record in caplog.records if "not configured" in record.getMessage()]
    assert warned == ["profile 'x' names server 'gone', which is not configured: it is left out"]


async def test_mcp_param_headers_are_checked_under_a_profiles_names(tmp_path: Path) -> None:
    """At 2026-07-28 a header that disagrees with its argument is -32020 on a profile's path too."""
    profiles = {"own": {"naming": "tool", "servers": {"fixture": {}}}}
    async with profiled_gateway(tmp_path, profiles, ("fixture",)) as rig:
        url = rig.url("own")
        async with Client(url, mode="2026-07-28") as client:
            with trio.fail_after(BOUND):
                listed = {tool.name for tool in (await client.list_tools()).tools}
                assert "test_x_mcp_header" in listed
                answer = await client.call_tool("test_x_mcp_header", {"region": "eu"})
                assert not answer.is_error
        with trio.fail_after(BOUND):
            refused = await post_region_mismatch(url, "test_x_mcp_header")
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == -32020


@pytest.mark.parametrize("mode", MODES)
async def test_a_profiles_first_request_may_be_a_call_or_a_get(tmp_path: Path, mode: str) -> None:
    """A client that calls a renamed tool, or gets a prompt, before it ever lists is answered (at either era)."""
    profiles = {"coder": {"servers": {"alpha": {"tools": ["echo"], "rename": {"echo": "say"}}}}}
    async with profiled_gateway(tmp_path, profiles) as rig:
        with trio.fail_after(BOUND):
            async with Client(rig.url("coder"), mode=mode) as client:
                assert _text(await client.call_tool("say", {"text": "first"})) == "first"
            async with Client(rig.url("coder"), mode=mode) as client:
                prompt = await client.get_prompt("alpha__compose", {"topic": "trio"})
                assert prompt.messages
