"""The demo server, driven by the official MCP SDK client over stdio, streamable HTTP and SSE."""

from __future__ import annotations

import base64
import struct
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from io import BytesIO
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcp_actors import demo_server
from mcp_actors._demo.announce import parse_announce
from mcp_actors._demo.callbacks import ASKING_PROMPT, CALLBACK_TOOL_NAMES
from mcp_actors.demo_server import EXTRA_TOOL_NAME, README_URI
from mcp_actors.testing import demo_server_command, serve_http

BOUND = 30  # seconds; the demo server takes ~1.5 s to start, more on a loaded machine

DEMO_TOOLS = {
    "echo",
    "add",
    "sleep",
    "image",
    "audio",
    "resource",
    "resource_link",
    "fail",
    "big",
    "toggle_extra_tool",
    "stderr",
    # the protocol features (mcp_actors/_demo/features.py)
    "bump_counter",
    "toggle_extra_resource",
    "end_subscriptions",  # 2026-07-28: closes every subscriptions/listen stream
    "log",
    "weather",
    "bad_weather",
    "research",
    "count",
    "finish_task",
    "list_requests",  # 2026-07-28 caching: what it answered, and what its lists say
    "cache_hints",
} | CALLBACK_TOOL_NAMES  # and the tools that ask the host


WaitLine = Callable[[str], Awaitable[str]]


@asynccontextmanager
async def demo_session(
    transport: str, messages: list[Any], errlog_pipe: Any
) -> AsyncIterator[tuple[ClientSession, WaitLine]]:
    """A client session with the demo server over ``transport``, and a way to wait for its stderr lines."""

    async def record(message: Any) -> None:
        messages.append(message)

    if transport == "stdio":
        argv = demo_server_command()
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with errlog_pipe() as (errlog, lines), stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, message_handler=record) as session:
                await session.initialize()
                yield session, lines.wait_for
        return
    async with serve_http(demo_server_command("--transport", transport)) as server:
        assert parse_announce(server.stderr_lines[0]) == server.url
        if transport == "sse":
            assert server.url.endswith("/sse")
            client = sse_client(server.url)
        else:
            assert server.url.endswith("/mcp")
            client = streamable_http_client(server.url)
        async with client as (read, write, *_):
            async with ClientSession(read, write, message_handler=record) as session:
                await session.initialize()
                yield session, server.wait_stderr_line


def only_text(result: types.CallToolResult) -> str:
    [item] = result.content
    assert isinstance(item, types.TextContent)
    return item.text


async def check_listing(session: ClientSession) -> None:
    """Every tool has a description and an object input schema; the prompt and resource exist."""
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == DEMO_TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 15
        assert tool.input_schema["type"] == "object"
    assert tools["echo"].input_schema["required"] == ["text"]
    assert tools["add"].input_schema["properties"]["a"]["type"] == "number"
    assert tools["big"].input_schema["properties"]["n"]["type"] == "integer"
    prompts = {p.name: p for p in (await session.list_prompts()).prompts}
    assert set(prompts) == {"greeting", "compose", ASKING_PROMPT}
    prompt = prompts["greeting"]
    assert prompt.name == "greeting" and [a.name for a in prompt.arguments or []] == ["name"]
    rendered = await session.get_prompt("greeting", {"name": "Ada"})
    assert "Ada" in rendered.messages[0].content.text  # type: ignore[union-attr]
    resources = {str(r.uri) for r in (await session.list_resources()).resources}
    assert README_URI in resources
    [contents] = (await session.read_resource(README_URI)).contents
    assert isinstance(contents, types.TextResourceContents) and "demo server" in contents.text


async def check_tool_outputs(session: ClientSession) -> None:
    """Each content-producing tool returns exactly the documented content."""
    assert only_text(await session.call_tool("echo", {"text": "héllo ✓"})) == "héllo ✓"

    added = await session.call_tool("add", {"a": 2, "b": 0.5})
    assert float(only_text(added)) == 2.5 and added.structured_content == {"result": 2.5}

    [image] = (await session.call_tool("image", {})).content
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", png[16:24]) == (1, 1)  # IHDR width, height

    [audio] = (await session.call_tool("audio", {})).content
    assert isinstance(audio, types.AudioContent) and audio.mime_type == "audio/wav"
    with wave.open(BytesIO(base64.b64decode(audio.data))) as wav:
        assert wav.getnchannels() == 1 and wav.getnframes() > 0

    text_item, blob_item = (await session.call_tool("resource", {})).content
    assert isinstance(text_item, types.EmbeddedResource) and isinstance(blob_item, types.EmbeddedResource)
    assert isinstance(text_item.resource, types.TextResourceContents)
    assert str(text_item.resource.uri) == README_URI and "demo server" in text_item.resource.text
    assert isinstance(blob_item.resource, types.BlobResourceContents)
    assert base64.b64decode(blob_item.resource.blob).startswith(b"\x89PNG")

    [link] = (await session.call_tool("resource_link", {})).content
    assert isinstance(link, types.ResourceLink) and str(link.uri) == README_URI

    failed = await session.call_tool("fail", {"message": "it broke"})
    assert failed.is_error is True and only_text(failed) == "it broke"

    for n in (0, 1, 100_003):
        assert len(only_text(await session.call_tool("big", {"n": n})).encode()) == n

    rejected = await session.call_tool("big", {"n": -1})
    assert rejected.is_error is True


async def check_toggle(session: ClientSession, messages: list[Any]) -> None:
    """toggle_extra_tool adds then removes 'extra', each time notifying tools/list_changed first."""
    changed = types.ToolListChangedNotification
    assert only_text(await session.call_tool("toggle_extra_tool", {})) == f"tool {EXTRA_TOOL_NAME!r} added"
    assert sum(isinstance(m, changed) for m in messages) == 1
    assert EXTRA_TOOL_NAME in {t.name for t in (await session.list_tools()).tools}
    assert only_text(await session.call_tool(EXTRA_TOOL_NAME, {})) == "the extra tool is here"
    assert only_text(await session.call_tool("toggle_extra_tool", {})) == f"tool {EXTRA_TOOL_NAME!r} removed"
    assert sum(isinstance(m, changed) for m in messages) == 2
    assert EXTRA_TOOL_NAME not in {t.name for t in (await session.list_tools()).tools}


async def check_sleep_progress(session: ClientSession) -> None:
    """sleep reports ten increasing progress steps up to its total, then returns."""
    updates: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total))

    result = await session.call_tool("sleep", {"seconds": 0.1}, progress_callback=on_progress)
    assert only_text(result) == "slept 0.1 s"
    assert len(updates) == 10
    assert [p for p, _ in updates] == sorted(p for p, _ in updates)
    last_progress, last_total = updates[-1]
    assert last_progress == pytest.approx(0.1) and last_total == pytest.approx(0.1)


async def check_stderr_and_abandoned_call(session: ClientSession, wait_stderr_line: WaitLine) -> None:
    """stderr(text) writes one line to stderr; a call the client abandons leaves the session usable."""
    result = await session.call_tool("stderr", {"text": "a line for the log"})
    assert only_text(result) == "wrote 18 bytes to stderr"
    assert await wait_stderr_line("a line for the log") == "a line for the log"
    with trio.move_on_after(0.2) as abandoned:
        await session.call_tool("sleep", {"seconds": 60})
    assert abandoned.cancelled_caught
    assert only_text(await session.call_tool("echo", {"text": "still here"})) == "still here"


# One server per transport for all checks: the demo takes over a second to start.
@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "sse"])
async def test_serves_every_tool(transport: str, errlog_pipe: Any) -> None:
    """Over each transport the demo lists its tools, prompt and resource; every tool does what it documents."""
    messages: list[Any] = []
    with trio.fail_after(BOUND):
        async with demo_session(transport, messages, errlog_pipe) as (session, wait_stderr_line):
            await check_listing(session)
            await check_tool_outputs(session)
            await check_sleep_progress(session)
            await check_toggle(session, messages)
            await check_stderr_and_abandoned_call(session, wait_stderr_line)


def test_help_and_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    """--help names the transports; a port out of range exits with code 2 and says so."""
    with pytest.raises(SystemExit) as shown:
        demo_server.main(["--help"])
    assert shown.value.code == 0
    out = capsys.readouterr().out
    assert "streamable-http" in out and "--port" in out
    with pytest.raises(SystemExit) as bad:
        demo_server.main(["--transport", "sse", "--port", "99999"])
    assert bad.value.code == 2
    assert "--port must be in 0..65535" in capsys.readouterr().err
