"""The fault server over streamable HTTP: the per-message faults through the SDK client."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_actors.testing import fault_server_command, serve_http

BOUND = 30


def only_text(result: types.CallToolResult) -> str:
    [item] = result.content
    assert isinstance(item, types.TextContent)
    return item.text


async def test_hang_no_ping_floods_and_huge_output_over_http() -> None:
    """Over HTTP: floods precede results, huge output replaces them, hangs and pings stay unanswered, cancels logged."""
    argv = fault_server_command(
        "--transport",
        "streamable-http",
        "--hang-tool",
        "sleep",
        "--no-ping",
        "--flood-notifications",
        "3",
        "--huge-output",
        "200000",
    )
    messages: list[Any] = []

    async def record(message: Any) -> None:
        messages.append(message)

    with trio.fail_after(BOUND):
        async with serve_http(argv) as server:
            assert server.url.endswith("/mcp")
            async with streamable_http_client(server.url) as (read, write, *_):
                async with ClientSession(read, write, message_handler=record) as session:
                    init = await session.initialize()
                    assert init.server_info.name == "mcp-actors-fault"
                    assert {t.name for t in (await session.list_tools()).tools} == {
                        "echo",
                        "add",
                        "sleep",
                        "big",
                        "fail",
                    }
                    result = await session.call_tool("echo", {"text": "hi"})
                    assert len(only_text(result)) == 200000
                    logs = [m for m in messages if isinstance(m, types.LoggingMessageNotification)]
                    assert [m.params.data for m in logs] == ["flood 1 of 3", "flood 2 of 3", "flood 3 of 3"]
                    failed = await session.call_tool("fail", {"message": "kept"})
                    assert failed.is_error and only_text(failed) == "kept"

                    with trio.move_on_after(0.5) as timed_out:
                        await session.call_tool("sleep", {"seconds": 1})
                    assert timed_out.cancelled_caught
                    hung = await server.wait_stderr_line("fault: hanging call ")
                    await server.wait_stderr_line(f"fault: cancelled {hung.rsplit(' ', 1)[1]}")

                    with trio.move_on_after(0.5) as no_pong:
                        await session.send_ping()
                    assert no_pong.cancelled_caught
                    await server.wait_stderr_line("fault: ignoring ping ")


async def test_crash_on_call_over_http() -> None:
    """Over HTTP, --crash-on-call 2: the 2nd call fails and the process exits with the crash code."""
    argv = fault_server_command("--transport", "streamable-http", "--crash-on-call", "2", "--crash-exit-code", "9")
    with trio.fail_after(BOUND):
        async with serve_http(argv) as server:
            async with streamable_http_client(server.url) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    assert only_text(await session.call_tool("add", {"a": 1, "b": 2})) == "3"
                    with pytest.raises(MCPError):
                        await session.call_tool("echo", {"text": "boom"})
            await server.process.wait()
            assert server.process.returncode == 9
            await server.wait_stderr_line("fault: crashing on call 2")
