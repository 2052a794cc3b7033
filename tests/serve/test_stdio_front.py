"""The gateway's stdio front, one client on a pair of in-memory byte streams (what stdin and stdout carry)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.serve import serve_stdio
from mcp_actors.testing import fault_server_command
from mcp_actors.testing.memory import InMemoryServers

BOUND = 20.0
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@attrs.define(eq=False)
class Client:
    """The client's ends: lines written to the gateway's stdin, lines read from its stdout."""

    to_gateway: trio.abc.SendStream
    from_gateway: trio.abc.ReceiveStream
    buffer: bytes = b""

    async def send(self, message: dict[str, Any]) -> None:
        await self.to_gateway.send_all(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        with trio.fail_after(BOUND):
            while b"\n" not in self.buffer:
                self.buffer += await self.from_gateway.receive_some(65536)
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def answer_to(self, rid: int, seen: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The answer to request ``rid``; the notifications before it go to ``seen``."""
        while True:
            message = await self.receive()
            if message.get("id") == rid and "method" not in message:
                return message
            if seen is not None:
                seen.append(message)


@pytest.fixture
async def stdio(tmp_path: Path, servers_in_memory: InMemoryServers) -> AsyncIterator[tuple[Client, Runtime]]:
    """A gateway on in-memory stdin/stdout over a runtime with one fault server, ``alpha``."""
    argv = fault_server_command()
    config = {"mcpServers": {"alpha": {"command": argv[0], "args": argv[1:]}}}
    async with open_runtime(tmp_path / "cfg.json") as runtime:
        for record in await runtime.service.list():
            await runtime.service.remove(record.id)
        await runtime.service.add_json(json.dumps(config))
        stdin_send, stdin_receive = trio.testing.memory_stream_one_way_pair()
        stdout_send, stdout_receive = trio.testing.memory_stream_one_way_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_stdio(runtime.service, stdin=stdin_receive, stdout=stdout_send, grace=1.0))
            yield Client(stdin_send, stdout_receive), runtime
            await stdin_send.aclose()  # the end of stdin ends the gateway


async def test_a_handshake_session_lists_calls_gets_progress_and_cancels(stdio: tuple[Client, Runtime]) -> None:
    """initialize, tools/list, a call with progress, and a cancelled call that ends upstream."""
    client, runtime = stdio
    await client.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    assert (await client.answer_to(1))["result"]["protocolVersion"] == "2025-06-18"
    await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    names = {tool["name"] for tool in (await client.answer_to(2))["result"]["tools"]}
    assert {"alpha__echo", "alpha__sleep"} <= names
    call = {"name": "alpha__sleep", "arguments": {"seconds": 0.1}, "_meta": {"progressToken": "p"}}
    await client.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
    seen: list[dict[str, Any]] = []
    answer = await client.answer_to(3, seen)
    assert answer["result"]["content"][0]["text"] == "slept 0.1 s"
    progress = [m for m in seen if m.get("method") == "notifications/progress"]
    assert len(progress) == 10 and all(m["params"]["progressToken"] == "p" for m in progress)
    long = {"name": "alpha__sleep", "arguments": {"seconds": 60}}
    await client.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": long})
    with trio.fail_after(BOUND):
        while runtime.service.status("alpha").calls_in_flight == 0:  # noqa: ASYNC110 - a published status
            await trio.sleep(0.01)
        await client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}})
        while runtime.service.status("alpha").calls_in_flight:  # noqa: ASYNC110 - a published status
            await trio.sleep(0.01)
    await client.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})
    assert (await client.answer_to(5))["result"] == {}  # and no answer to 4 ever came (answer_to would see it)


async def test_list_changes_are_sent_once_initialized(stdio: tuple[Client, Runtime]) -> None:
    """Disabling the server is announced as tools/list_changed on stdout."""
    client, runtime = stdio
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
    await client.answer_to(1)
    await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await client.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    await client.answer_to(2)  # the notification was read before this answer
    await runtime.service.update("alpha", is_active=False)
    methods = set()
    while "notifications/tools/list_changed" not in methods:
        methods.add((await client.receive()).get("method"))


async def test_2026_requests_on_stdio_carry_their_envelope(stdio: tuple[Client, Runtime]) -> None:
    """No initialize at 2026-07-28: each request's _meta says its revision; results carry resultType."""
    client, _ = stdio
    await client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}})
    result = (await client.answer_to(1))["result"]
    assert result["resultType"] == "complete"
    assert "alpha__echo" in {tool["name"] for tool in result["tools"]}
    await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert (await client.answer_to(2))["error"]["code"] == -32600  # neither initialized nor enveloped


async def test_garbage_and_oversized_lines_are_answered_and_skipped(stdio: tuple[Client, Runtime]) -> None:
    """A line that is no JSON gets a parse error; the session goes on."""
    client, _ = stdio
    await client.to_gateway.send_all(b"{nope\n")
    assert (await client.receive())["error"]["code"] == -32700
    await client.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert (await client.answer_to(7))["result"] == {}  # ping needs no handshake
