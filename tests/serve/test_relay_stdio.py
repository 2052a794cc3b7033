"""The stdio front relays too: an upstream's request goes to the client on stdout, its answer comes back on stdin.

One client on in-memory stdin/stdout (a desktop app's one server), the demo server behind the
gateway at either revision the gateway speaks to it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcp_actors.serve import serve_stdio
from tests.serve.relay_rig import BOUND, demo_runtime


class Lines:
    """The client's ends of the gateway's stdin and stdout, one JSON message a line."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.send_stream, self.receive_stream, self.buffer = send, receive, b""

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_stream.send_all(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.receive_stream.receive_some(65536)
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


@pytest.fixture(params=["legacy", "auto"])
async def stdio(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Lines]:
    async with demo_runtime(tmp_path, request.param) as runtime:
        stdin_send, stdin_receive = trio.testing.memory_stream_one_way_pair()
        stdout_send, stdout_receive = trio.testing.memory_stream_one_way_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: serve_stdio(runtime.service, stdin=stdin_receive, stdout=stdout_send, grace=1.0))
            yield Lines(stdin_send, stdout_receive)
            await stdin_send.aclose()


async def test_an_elicitation_and_a_log_message_reach_the_stdio_client(stdio: Lines) -> None:
    """The gateway asks the client on stdout with an id of its own; the client's answer on stdin reaches the tool."""
    client = stdio
    with trio.fail_after(BOUND):
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"},
        }
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert "result" in await client.receive()
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "demo__ask_user"}})
        asked = await client.receive()
        while asked.get("method") != "elicitation/create":
            assert asked.get("id") != 2, asked
            asked = await client.receive()
        assert str(asked["id"]).startswith("mcp-actors-")
        assert asked["params"]["requestedSchema"]["required"] == ["name"]
        answer = {"action": "accept", "content": {"name": "cy"}}
        await client.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
        result = await client.receive()
        while result.get("id") != 2:
            result = await client.receive()
        told = json.loads(result["result"]["content"][0]["text"])
        assert told["action"] == "accept" and told["content"]["name"] == "cy"

        log = {"name": "demo__log", "arguments": {"level": "warning", "message": "on stdout"}}
        await client.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": log})
        seen = []
        message = await client.receive()
        while message.get("id") != 3:
            seen.append(message)
            message = await client.receive()
        logs = [m for m in seen if m.get("method") == "notifications/message"]
        assert [(m["params"]["level"], "on stdout" in str(m["params"]["data"])) for m in logs] == [("warning", True)]
