"""Host callbacks through open_runtime and McpService over the real transports: stdio and streamable HTTP.

The demo server runs as a real process (stdio) or a real HTTP server on 127.0.0.1; the host's
handlers are reached by the server's requests over that transport. What a record's settings
decide (refused capabilities, no handlers, config.protocol) is the same over any transport: those
tests serve the built-in demo record in memory (``servers_in_memory``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
import trio
from mcp.shared.exceptions import MCPError
from testkit import demo_http_app, serve_in_thread

from mcp_actors import events
from mcp_actors._config.codec import record_to_json_dict
from mcp_actors._connection.callbacks import HostCallbacks
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import HttpParams, StdioParams, TransportParams
from mcp_actors.errors import InvalidServerConfig, ToolCallFailed
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService
from mcp_actors.testing import demo_server_command
from mcp_actors.testing.memory import InMemoryServers

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
    prompt = params.messages[0].content.text  # type: ignore[union-attr]
    return mcp_types.CreateMessageResult(
        role="assistant", content=mcp_types.TextContent(type="text", text=f"echo: {prompt}"), model="host"
    )


async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        return mcp_types.ElicitResult(action="decline")
    return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})


async def call_json(svc: McpService, server: str, tool: str, args: dict[str, Any] | None = None) -> Any:
    result = await svc.call_tool(server, tool, args or {})
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


async def exercise(svc: McpService, server: str) -> None:
    """Sampling, form and URL elicitation, roots, and a roots change, all answered over the transport."""
    sampled = await call_json(svc, server, "ask_model", {"prompt": "hi"})
    assert sampled["content"][0]["text"] == "echo: hi" and sampled["model"] == "host"
    answered = await call_json(svc, server, "ask_user")
    assert answered["action"] == "accept"
    assert answered["content"] == {
        "name": "Ada",
        "age": 30,
        "colour": "green",
        "toppings": [],
        "subscribe": False,
    }
    assert await call_json(svc, server, "ask_user_url") == {"action": "decline"}
    assert await call_json(svc, server, "list_host_roots") == [{"uri": "file:///work/a", "name": None}]
    assert await svc.set_roots(["file:///work/b"]) == 1
    assert await call_json(svc, server, "wait_roots_changed", {"count": 1}) == 1
    assert await call_json(svc, server, "list_host_roots") == [{"uri": "file:///work/b", "name": None}]


LEGACY = {"protocol": "legacy"}
"""The demo's ask_* tools make server-to-client requests, which exist only up to 2025-11-25."""


async def pin_legacy(svc: McpService, server: str) -> None:
    """Make ``server`` speak the handshake revisions, where the ask_* tools' requests exist."""
    config = record_to_json_dict(svc.get(server))["config"]
    await svc.update(server, config={**config, **LEGACY})


@asynccontextmanager
async def demo_url(transport: str) -> AsyncIterator[str | None]:
    """The demo server's streamable HTTP URL, served in a thread for the block; None for stdio.

    Entered before the runtime, so the server outlives the client's session and has no open
    connection to wait for when it stops.
    """
    if transport == "stdio":
        yield None
        return
    async with serve_in_thread(demo_http_app) as url:
        yield url


@asynccontextmanager
async def demo_over(
    tmp_path: Path, transport: str, *, legacy: bool = False, **options: Any
) -> AsyncIterator[tuple[McpService, str]]:
    """A runtime with ``options`` and the demo server over ``transport``; yields the service and the server's name.

    Over stdio the built-in demo record (pinned to the handshake revision with ``legacy``); over
    streamable HTTP a ``remote`` record for the demo app :func:`demo_url` serves.
    """
    async with (
        demo_url(transport) as url,
        open_runtime(tmp_path / "mcp-config.json", sweep_ledger=False, connect_on_add=False, **options) as rt,
    ):
        if url is None:
            if legacy:
                await pin_legacy(rt.service, "demo")
            yield rt.service, "demo"
        else:
            config = {"url": url, **LEGACY} if legacy else {"url": url}
            await rt.service.add({"name": "remote", "type": "http", "config": config})
            yield rt.service, "remote"


@asynccontextmanager
async def runtime(tmp_path: Path) -> AsyncIterator[McpService]:
    async with open_runtime(
        tmp_path / "mcp-config.json",
        sweep_ledger=False,
        connect_on_add=False,
        sampling_handler=sample,
        elicitation_handler=elicit,
        roots=["file:///work/a"],
    ) as rt:
        await pin_legacy(rt.service, "demo")
        yield rt.service


async def test_callbacks_over_stdio(tmp_path: Path) -> None:
    """Over stdio (the built-in demo server as a process) every host callback is answered."""
    with trio.fail_after(120):
        async with runtime(tmp_path) as svc:
            await exercise(svc, "demo")


async def test_callbacks_over_streamable_http(tmp_path: Path) -> None:
    """Over streamable HTTP (the demo server on 127.0.0.1) every host callback is answered."""
    with trio.fail_after(120):
        async with serve_in_thread(demo_http_app) as url:
            async with runtime(tmp_path) as svc:
                config = {"url": url, "pingInterval": 0, **LEGACY}
                await svc.add({"name": "remote", "type": "http", "config": config})
                await exercise(svc, "remote")


async def test_record_refuses_sampling_and_roots(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """A record with allowSampling/allowRoots false keeps them undeclared (saved on disk); elicitation still works."""
    with trio.fail_after(120):
        async with runtime(tmp_path) as svc:
            config = record_to_json_dict(svc.get("demo"))["config"]
            await svc.update("demo", config={**config, "allowSampling": False, "allowRoots": False})
            with pytest.raises(ToolCallFailed, match="Sampling not supported"):
                await svc.call_tool("demo", "ask_model", {"prompt": "hi"})
            with pytest.raises(ToolCallFailed, match="List roots not supported"):
                await svc.call_tool("demo", "list_host_roots", {})
            assert (await call_json(svc, "demo", "ask_user"))["action"] == "accept"
            assert await svc.set_roots(["file:///x"]) == 0  # nobody who can hear it
            saved = json.loads((tmp_path / "mcp-config.json").read_text())["mcpServers"][0]["config"]
            assert saved["allowSampling"] is False and saved["allowRoots"] is False
            assert "allowElicitation" not in saved  # defaults are not written
            with pytest.raises(InvalidServerConfig, match="allowElicitation"):
                await svc.update("demo", config={**config, "allowElicitation": "no"})
    assert servers_in_memory.names == {"demo"}


async def test_runtime_without_handlers_offers_nothing(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """open_runtime with no handlers: servers that ask get the protocol's errors, set_roots reaches nobody."""
    with trio.fail_after(120):
        async with open_runtime(tmp_path / "mcp-config.json", sweep_ledger=False, connect_on_add=False) as rt:
            svc = rt.service
            await pin_legacy(svc, "demo")
            with pytest.raises(ToolCallFailed, match="Elicitation not supported"):
                await svc.call_tool("demo", "ask_user", {})
            assert await svc.set_roots(["file:///later"]) == 0
            with pytest.raises(ValueError, match="file:// URI"):
                await svc.set_roots(["relative/dir"])
    assert servers_in_memory.names == {"demo"}


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_input_required_over_real_transports(transport: str) -> None:
    """At 2026-07-28 (negotiated through server/discover) the InputRequiredResult round trip works over the wire."""
    seen: list[str] = []

    async def answer(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        seen.append(server_id)
        return mcp_types.ElicitResult(action="accept", content={"name": "Wire"})

    host = HostCallbacks(elicitation=answer)

    async def check(params: TransportParams) -> None:
        settings = ConnectionSettings(
            server_id="id-wire", server_name="wire", transport=params, ping_interval=0, host=host, negotiate="auto"
        )
        handle, start = open_connection(settings, events.EventBus())
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                result = await handle.call_tool("ask_user_resolved", {})
                assert json.loads(text_of(result)) == {"action": "accept", "content": {"name": "Wire"}}
                live = handle._cell.live
                assert live is not None and live.session.protocol_version == "2026-07-28"
            finally:
                await handle.aclose()

    with trio.fail_after(120):
        if transport == "stdio":
            argv = demo_server_command()
            await check(StdioParams(command=argv[0], args=argv[1:]))
        else:
            async with serve_in_thread(demo_http_app) as url:
                await check(HttpParams(url=url, kind="http"))  # type: ignore[arg-type]
    assert seen == ["id-wire"]


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_refusing_raising_and_timing_out_over_real_transports(tmp_path: Path, transport: str) -> None:
    """Over the wire: a refusal in the host's words, a raising roots callable, an unanswered elicitation (cancel)."""

    async def refuse(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        raise MCPError(code=mcp_types.INVALID_REQUEST, message="the user turned sampling off")

    async def never(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def broken_roots(server_id: str) -> list[str]:
        raise OSError("token=abc123")

    async def run(svc: McpService, server: str) -> None:
        with pytest.raises(ToolCallFailed, match="the user turned sampling off"):
            await svc.call_tool(server, "ask_model", {"prompt": "hi"})
        with pytest.raises(ToolCallFailed, match="roots callable failed") as info:
            await svc.call_tool(server, "list_host_roots", {})
        assert "abc123" not in str(info.value)
        assert await call_json(svc, server, "ask_user") == {"action": "cancel", "content": None}

    with trio.fail_after(120):
        async with demo_over(
            tmp_path,
            transport,
            legacy=True,
            sampling_handler=refuse,
            elicitation_handler=never,
            roots=broken_roots,
            callback_timeout=0.5,  # the handler never answers: no race, only how soon the cancel comes
        ) as (svc, server):
            await run(svc, server)


async def test_record_protocol_auto_speaks_2026_through_the_runtime(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """config.protocol auto (the default) speaks 2026-07-28; InputRequiredResult reaches the handler.

    Over the real transports: ``test_input_required_over_real_transports``.
    """
    with trio.fail_after(120):
        async with runtime(tmp_path) as svc:
            config = record_to_json_dict(svc.get("demo"))["config"]
            with pytest.raises(InvalidServerConfig, match=r"protocol.*'legacy'.*'auto'.*got 'modern'"):
                await svc.update("demo", config={**config, "protocol": "modern"})
            await svc.update("demo", config={**config, "protocol": "auto"})
            answered = await call_json(svc, "demo", "ask_user_resolved")
            assert answered == {"action": "accept", "content": {"name": "Ada"}}
            record = svc.get("demo")
            live = svc._registry.snapshot.handles[record.id]._cell.live
            assert live is not None and live.session.protocol_version == "2026-07-28"
            saved = json.loads((tmp_path / "mcp-config.json").read_text())["mcpServers"][0]["config"]
            assert "protocol" not in saved  # auto is the default, and defaults are not written
    assert servers_in_memory.names == {"demo"}


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_callbacks_at_2026_over_real_transports(tmp_path: Path, transport: str) -> None:
    """At 2026-07-28 (the default) the demo's ask_* tools reach every handler through InputRequiredResult."""

    async def run(svc: McpService, server: str) -> None:
        answer = await call_json(svc, server, "ask_model", {"prompt": "hi"})
        assert answer["content"][0]["text"] == "echo: hi" and answer["model"] == "host"
        assert await call_json(svc, server, "ask_user_url") == {"action": "decline"}
        user = await call_json(svc, server, "ask_user")
        assert user["action"] == "accept" and user["content"]["age"] == 30  # the schema's default, filled in
        assert await call_json(svc, server, "list_host_roots") == [{"uri": "file:///work/a", "name": None}]
        record = svc.get(server)
        live = svc._registry.snapshot.handles[record.id]._cell.live
        assert live is not None and live.session.protocol_version == "2026-07-28"
        # No roots/list_changed at 2026-07-28: nobody is told, and the next request sees the new roots.
        assert await svc.set_roots(["file:///work/b"]) == 0
        assert await call_json(svc, server, "list_host_roots") == [{"uri": "file:///work/b", "name": None}]

    with trio.fail_after(120):
        async with demo_over(
            tmp_path, transport, sampling_handler=sample, elicitation_handler=elicit, roots=["file:///work/a"]
        ) as (svc, server):
            await run(svc, server)
