"""Registry adapters (McpToolAdapter, load_mcp_tools) and content flattening.

Adapter rules (names, arguments, call ids, timeouts, failure isolation) run on the fault
server's in-memory twin (``servers_in_memory``); content kinds are checked over real stdio
and streamable HTTP, and deaths mid-call and at start on real processes (their stderr is
part of the error).
"""

from __future__ import annotations

import math
import os
import re
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
import trio
import trio.testing
from testkit import runtime_at

import mcp_actors.adapters as adapters
from mcp_actors import events
from mcp_actors.adapters import (
    DEFAULT_TOOL_TIMEOUT,
    ERROR_PREFIX,
    LoadedTools,
    McpToolAdapter,
    Tool,
    flatten_content,
    flatten_result,
    load_mcp_tools,
)
from mcp_actors.errors import (
    ConnectionFailed,
    ServerConnectionLost,
    ServerNotFound,
    ServerStartFailed,
    ToolCallDenied,
    ToolCallTimeout,
)
from mcp_actors.service import McpService
from mcp_actors.testing import demo_server_command, fault_server_command, serve_http
from mcp_actors.testing.memory import InMemoryServers
from mcp_actors.tools import McpTool

README_TEXT = (
    "This is the mcp-actors demo server. It offers the tools echo, add, sleep, image, "
    "audio, resource, resource_link, fail, big, toggle_extra_tool and stderr, the prompt "
    "'greeting' and this resource.\n"
)


def stdio_entry(name: str, argv: list[str], **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "stdio",
        "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0, **config},
    }


def http_entry(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "type": "http", "config": {"url": url, "pingInterval": 0}}


@asynccontextmanager
async def service_with(tmp_path: Path, *entries: dict[str, Any]) -> AsyncIterator[McpService]:
    """A runtime whose config holds the given servers (and the built-in demo, unused)."""
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        for entry in entries:
            await rt.service.add(entry)
        yield rt.service


async def adapters_of(service: McpService, server: str) -> dict[str, McpToolAdapter]:
    loaded = await load_mcp_tools(service, [server])
    assert not loaded.failures
    return {adapter.mcp_tool.name: adapter for adapter in loaded}


@asynccontextmanager
async def demo_entry(transport: str) -> AsyncIterator[dict[str, Any]]:
    """The demo server named 'srv' as a config entry: spawned by the runtime, or served over HTTP here."""
    if transport == "stdio":
        yield stdio_entry("srv", demo_server_command())
        return
    async with serve_http(demo_server_command("--transport", "streamable-http")) as server:
        yield http_entry("srv", server.url)


@pytest.fixture
def switchable_clock() -> trio.testing.MockClock:
    """Virtual time at real speed until a test turns on autojump (after real I/O is done)."""
    return trio.testing.MockClock(rate=1.0)


# ---------------------------------------------------------------------- flattening (pure)


def test_flatten_content_every_kind() -> None:
    """Each content kind becomes its text or a named placeholder; items are joined with newlines."""
    content: list[mcp_types.ContentBlock] = [
        mcp_types.TextContent(text="hello"),
        mcp_types.ImageContent(data="AAAA", mime_type="image/png"),
        mcp_types.AudioContent(data="AAAA", mime_type="audio/wav"),
        mcp_types.EmbeddedResource(
            resource=mcp_types.TextResourceContents(uri="demo://a", mime_type="text/plain", text="inline text")
        ),
        mcp_types.EmbeddedResource(resource=mcp_types.BlobResourceContents(uri="demo://b.bin", blob="AAAA")),
        mcp_types.ResourceLink(uri="demo://c", name="c"),
    ]
    assert flatten_content(content) == (
        "hello\n[Image: image/png]\n[Audio: audio/wav]\ninline text\n[Resource: demo://b.bin]\n[Resource link: demo://c]"
    )


def test_flatten_content_accepts_json_form_and_names_unknown_kinds() -> None:
    """Content in its JSON form (camelCase mappings) flattens the same; unknown kinds are named, not dropped."""
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "a"},
        {"type": "image", "data": "AAAA", "mimeType": "image/jpeg"},
        {"type": "resource", "resource": {"uri": "x://blob", "blob": "AAAA"}},
        {"type": "hologram"},
    ]
    assert flatten_content(content) == "a\n[Image: image/jpeg]\n[Resource: x://blob]\n[Unsupported content: hologram]"
    assert flatten_content([]) == ""


def test_flatten_result_marks_errors_and_falls_back_to_structured_content() -> None:
    """isError results start with exactly 'Error: '; content-less results show their structured content as JSON."""
    failed = mcp_types.CallToolResult(content=[mcp_types.TextContent(text="no such file")], is_error=True)
    assert flatten_result(failed) == "Error: no such file"
    assert ERROR_PREFIX == "Error: "
    silent = mcp_types.CallToolResult(content=[], is_error=True)
    assert flatten_result(silent).startswith(ERROR_PREFIX) and len(flatten_result(silent)) > len(ERROR_PREFIX)
    structured = mcp_types.CallToolResult(content=[], structured_content={"sum": 5, "note": "ü"})
    assert flatten_result(structured) == '{"sum": 5, "note": "ü"}'
    both = mcp_types.CallToolResult(content=[mcp_types.TextContent(text="5")], structured_content={"result": 5})
    assert flatten_result(both) == "5"


def test_exports_are_sorted_and_resolve() -> None:
    """The module's __all__ is sorted and every name in it exists."""
    assert list(adapters.__all__) == sorted(adapters.__all__)
    assert all(hasattr(adapters, name) for name in adapters.__all__)


# ---------------------------------------------------------------------- execute, both transports


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_execute_returns_every_content_kind(tmp_path: Path, transport: str) -> None:
    """Over stdio and streamable HTTP: every content kind flattens, isError is marked, a short timeout bounds a call."""
    async with demo_entry(transport) as entry, service_with(tmp_path, entry) as service:
        tools = await adapters_of(service, "srv")
        echo = tools["echo"]
        assert isinstance(echo, Tool)
        assert echo.name == "mcp__srv__echo"
        assert echo.description == "Return the given text unchanged."
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert echo.timeout == DEFAULT_TOOL_TIMEOUT == 120.0
        assert await echo.execute({"text": "héllo"}) == "héllo"
        assert await tools["image"].execute() == "[Image: image/png]"
        assert await tools["audio"].execute({}) == "[Audio: audio/wav]"
        assert await tools["resource"].execute() == README_TEXT + "\n[Resource: demo://pixel.png]"
        assert await tools["resource_link"].execute() == "[Resource link: demo://readme]"
        assert await tools["fail"].execute({"message": "disk full"}) == "Error: disk full"
        # Arguments are the server's to validate: a bad one comes back as a tool error.
        assert (await tools["add"].execute({"a": "x", "b": 1})).startswith(ERROR_PREFIX)
        raw = await tools["add"].call({"a": 2, "b": 3})
        assert not raw.is_error and raw.structured_content == {"result": 5.0}
        sleep = McpToolAdapter(tools["sleep"].mcp_tool, service, timeout=0.5)
        start = trio.current_time()
        with pytest.raises(ToolCallTimeout, match=r"^tool 'mcp__srv__sleep' \(tool 'sleep' of server 'srv'\).*0\.5s"):
            await sleep.execute({"seconds": 30})
        assert trio.current_time() - start < 5.0
        assert await echo.execute({"text": "still connected"}) == "still connected"


async def test_adapter_arguments_are_checked_for_shape_only(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """A non-mapping params is a TypeError; a non-positive or infinite timeout is a ValueError."""
    async with service_with(tmp_path, stdio_entry("quick", fault_server_command())) as service:
        echo = (await adapters_of(service, "quick"))["echo"]
        with pytest.raises(TypeError, match="mcp__quick__echo"):
            await echo.execute(["not", "a", "mapping"])  # type: ignore[arg-type]
        for bad in (0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError, match="timeout"):
                McpToolAdapter(echo.mcp_tool, service, timeout=bad)
        with pytest.raises(ValueError, match="timeout"):
            await load_mcp_tools(service, ["quick"], timeout=0)
        assert await McpToolAdapter(echo.mcp_tool, service, timeout=5).execute({"text": "ok"}) == "ok"


async def test_each_execute_has_its_own_call_id(
    tmp_path: Path, servers_in_memory: InMemoryServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every execute draws a fresh call id from the counter (no uuid4), which tool:called reports."""

    def no_uuid() -> uuid.UUID:
        raise AssertionError("uuid4() on the call path")

    async with service_with(tmp_path, stdio_entry("ids", fault_server_command())) as service:
        echo = (await adapters_of(service, "ids"))["echo"]
        monkeypatch.setattr(uuid, "uuid4", no_uuid)
        with service.subscribe() as subscription:
            for text in ("a", "b"):
                assert await echo.execute({"text": text}) == text
            called = []
            while len(called) < 2:
                with trio.fail_after(10):
                    event = await subscription.receive()
                if event.type == events.TOOL_CALLED:
                    called.append(event.data)
        ids = [data["callId"] for data in called]
        assert all(re.fullmatch(r"[0-9a-f]{16}", call_id) for call_id in ids) and ids[0] != ids[1]
        assert [data["toolName"] for data in called] == ["echo", "echo"] and all(d["success"] for d in called)


async def test_errors_name_the_tool_and_server(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """A failure that is not the tool's own (here: the server was removed) raises a typed error naming the tool."""
    async with service_with(tmp_path, stdio_entry("gone", fault_server_command())) as service:
        echo = (await adapters_of(service, "gone"))["echo"]
        await service.remove("gone")
        with pytest.raises(ServerNotFound) as info:
            await echo.execute({"text": "x"})
        assert str(info.value).startswith("tool 'mcp__gone__echo': ")
        assert info.value.server == echo.mcp_tool.server_id


async def test_a_denied_call_keeps_its_message(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """ToolCallDenied (a PermissionError, whose ``__new__`` keeps no args) reads "tool '<name>': ...", not ""."""
    async with service_with(tmp_path, stdio_entry("guarded", fault_server_command())) as service:
        echo = (await adapters_of(service, "guarded"))["echo"]
        service.set_approver(lambda request: False)
        with pytest.raises(ToolCallDenied) as info:
            await echo.execute({"text": "x"})
        service.set_approver(None)
        assert str(info.value) == "tool 'mcp__guarded__echo': the call to 'echo' of server 'guarded' was not approved"
        assert info.value.tool == "echo" and info.value.server == "guarded"


# ---------------------------------------------------------------------- timeouts


async def test_default_timeout_is_120_virtual_seconds(
    tmp_path: Path, switchable_clock: trio.testing.MockClock, servers_in_memory: InMemoryServers
) -> None:
    """A hung call fails with ToolCallTimeout after exactly the default 120 s (virtual), and the server stays usable."""
    entry = stdio_entry("hangs", fault_server_command("--hang-tool", "echo"))
    async with service_with(tmp_path, entry) as service:
        tools = await adapters_of(service, "hangs")
        await service.connect("hangs")  # real I/O happens at real speed, before time may jump
        switchable_clock.autojump_threshold = 0
        try:
            start = trio.current_time()
            with pytest.raises(ToolCallTimeout) as info:
                await tools["echo"].execute({"text": "never"})
            elapsed = trio.current_time() - start
        finally:
            switchable_clock.autojump_threshold = math.inf
        assert 120.0 <= elapsed < 121.0, elapsed
        error = info.value
        assert error.timeout == 120.0 and error.tool == "echo" and error.server == "hangs"
        assert "mcp__hangs__echo" in str(error) and "'hangs'" in str(error) and "120s" in str(error)
        assert await tools["add"].execute({"a": 1, "b": 2}) == "3"
    assert "hangs" in servers_in_memory.names


async def test_timeout_covers_connecting(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """The adapter's bound includes connecting: a server still starting at the deadline gives a ToolCallTimeout."""
    entry = stdio_entry("sluggish", fault_server_command("--slow-start", "60"), connectTimeout=300)
    async with service_with(tmp_path, entry) as service:
        record = service.get("sluggish")
        tool = McpTool(id="mcp__sluggish__echo", name="echo", server_id=record.id, server_name="sluggish")
        start = trio.current_time()
        with pytest.raises(ToolCallTimeout, match=r"still connecting; the call was not sent") as info:
            await McpToolAdapter(tool, service, timeout=0.5).execute({"text": "x"})
        assert 0.5 <= trio.current_time() - start < 5.0
        assert info.value.server == "sluggish" and info.value.timeout == 0.5


# ---------------------------------------------------------------------- death mid-call


async def test_stdio_server_dying_mid_call(tmp_path: Path) -> None:
    """A stdio server that exits during the call raises ServerConnectionLost naming tool and server, with stderr."""
    entry = stdio_entry("crashy", fault_server_command("--crash-on-call", "2"))
    async with service_with(tmp_path, entry) as service:
        echo = (await adapters_of(service, "crashy"))["echo"]
        assert await echo.execute({"text": "one"}) == "one"
        with pytest.raises(ServerConnectionLost) as info:
            await echo.execute({"text": "two"})
        message = str(info.value)
        assert message.startswith("tool 'mcp__crashy__echo': server 'crashy'")
        assert "exited with code 3" in message
        assert any("crashing on call 2" in line for line in info.value.stderr_tail)


async def test_http_server_dying_mid_call(tmp_path: Path) -> None:
    """An HTTP server killed while a call hangs fails that call promptly with a typed connection error."""
    async with serve_http(fault_server_command("--transport", "streamable-http", "--hang-tool", "echo")) as server:
        async with service_with(tmp_path, http_entry("remote", server.url)) as service:
            echo = (await adapters_of(service, "remote"))["echo"]
            failures: list[ConnectionFailed] = []

            async def doomed() -> None:
                with pytest.raises(ConnectionFailed) as info:
                    await echo.execute({"text": "x"})
                failures.append(info.value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                with trio.fail_after(10):
                    await server.wait_stderr_line("fault: hanging call")
                os.killpg(server.pid, signal.SIGKILL)
                killed_at = trio.current_time()
            assert trio.current_time() - killed_at < 10.0
            [error] = failures
            assert str(error).startswith("tool 'mcp__remote__echo': server 'remote'")


# ---------------------------------------------------------------------- load_mcp_tools


async def test_load_mcp_tools_isolates_a_broken_server(tmp_path: Path, no_leaked_tasks: None) -> None:
    """One broken server among three (plus an unknown name): the good two load and work, failures are reported."""
    async with service_with(
        tmp_path,
        stdio_entry("good-one", fault_server_command()),
        stdio_entry("broken", fault_server_command("--exit-at-start", "7")),
        stdio_entry("good-two", fault_server_command()),
    ) as service:
        broken_id = service.get("broken").id
        loaded = await load_mcp_tools(service, ["good-one", broken_id, "good-two", "missing", "good-one"])
        assert isinstance(loaded, LoadedTools)
        names = [adapter.name for adapter in loaded]
        expected = ["echo", "add", "sleep", "big", "fail"]
        assert names == [f"mcp__good_one__{t}" for t in expected] + [f"mcp__good_two__{t}" for t in expected]
        assert len(loaded) == 10 and loaded[0].name == names[0] and [a.name for a in loaded[-5:]] == names[5:]
        assert list(loaded.failures) == [broken_id, "missing"]
        assert isinstance(loaded.failures[broken_id], ServerStartFailed)
        assert "exiting at start with code 7" in str(loaded.failures[broken_id])
        assert isinstance(loaded.failures["missing"], ServerNotFound)
        assert await loaded[5].execute({"text": "from two"}) == "from two"


async def test_load_mcp_tools_defaults_to_every_active_server(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """Without server ids, every active server's tools load; disabled servers and disabledTools are left out."""
    async with service_with(
        tmp_path,
        stdio_entry("on", fault_server_command()),
        {**stdio_entry("off", fault_server_command()), "isActive": False},
    ) as service:
        await service.update("on", disabled_tools=("big",))
        await service.update("demo", is_active=False)
        loaded = await load_mcp_tools(service)
        assert [a.name for a in loaded] == ["mcp__on__echo", "mcp__on__add", "mcp__on__sleep", "mcp__on__fail"]
        assert not loaded.failures
        with pytest.raises(TypeError):
            await load_mcp_tools(service, "on")
    assert servers_in_memory.starts["on"] == 1 and servers_in_memory.starts["off"] == 0


async def test_a_hung_approver_is_bounded_by_the_adapter_timeout(
    tmp_path: Path, switchable_clock: trio.testing.MockClock, servers_in_memory: InMemoryServers
) -> None:
    """An approver that never answers: ToolCallTimeout at exactly the adapter's timeout (virtual), tool never run."""
    entry = stdio_entry("guarded", fault_server_command())
    async with service_with(tmp_path, entry) as service:
        tools = await adapters_of(service, "guarded")
        await service.connect("guarded")
        asked: list[str] = []

        async def approver(request: Any) -> bool:
            asked.append(request.tool_name)
            await trio.sleep_forever()
            return True  # pragma: no cover

        service.set_approver(approver)
        switchable_clock.autojump_threshold = 0
        try:
            start = trio.current_time()
            with pytest.raises(ToolCallTimeout) as info:
                await McpToolAdapter(tools["echo"].mcp_tool, service, timeout=30).execute({"text": "x"})
            elapsed = trio.current_time() - start
        finally:
            switchable_clock.autojump_threshold = math.inf
        service.set_approver(None)
        assert asked == ["echo"]
        assert 30.0 <= elapsed < 31.0, elapsed
        assert info.value.timeout == 30 and info.value.tool == "echo" and info.value.server == "guarded"
        assert await tools["echo"].execute({"text": "after"}) == "after"
