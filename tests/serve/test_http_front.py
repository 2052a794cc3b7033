"""What the gateway's HTTP front refuses, and how: raw requests on a loopback socket.

Every check happens before any work: the path, Host and Origin (DNS rebinding), the method,
Content-Type, Accept, the body's size and shape, the session, the protocol version.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_actors.runtime import open_runtime
from mcp_actors.serve import HttpGateway, HttpLimits, serve_http

BOUND = 20.0
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[HttpGateway]:
    """A gateway over a runtime with no servers, small limits, on a free loopback port."""
    (tmp_path / "cfg.json").write_text('{"mcpServers": []}')
    async with open_runtime(tmp_path / "cfg.json") as runtime, trio.open_nursery() as nursery:
        limits = HttpLimits(max_body=1024, max_head=2048)
        gateway: HttpGateway = await nursery.start(functools.partial(serve_http, runtime.service, limits=limits))
        yield gateway
        await gateway.stop(0.5)


class Raw:
    """One keep-alive connection, requests written by hand, answers read by hand."""

    def __init__(self, stream: trio.SocketStream, port: int) -> None:
        self.stream = stream
        self.port = port
        self.buffer = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def request(
        self, method: str, body: Any = None, headers: dict[str, str] | None = None, path: str = "/mcp"
    ) -> tuple[int, dict[str, str], bytes]:
        payload = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        lines = [f"{method} {path} HTTP/1.1", f"host: 127.0.0.1:{self.port}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        if body is not None:
            lines.append(f"content-length: {len(payload)}")
        await self.send(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        return await self.answer()

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        with trio.fail_after(BOUND):
            while b"\r\n\r\n" not in self.buffer:
                chunk = await self.stream.receive_some(65536)
                if not chunk:
                    return 0, {}, b""
                self.buffer += chunk
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            status_line, *fields = head.decode("latin-1").split("\r\n")
            headers = {name.lower(): value.strip() for name, _, value in (f.partition(":") for f in fields)}
            length = int(headers.get("content-length", "0"))
            while len(self.buffer) < length:
                self.buffer += await self.stream.receive_some(65536)
            body, self.buffer = self.buffer[:length], self.buffer[length:]
            return int(status_line.split()[1]), headers, body


def _head(host: str, framing: str) -> bytes:
    """A POST head for a JSON body, with this Host and this framing header."""
    lines = ["POST /mcp HTTP/1.1", f"host: {host}", "content-type: application/json", "accept: application/json"]
    return ("\r\n".join([*lines, framing]) + "\r\n\r\n").encode()


async def connect(gateway: HttpGateway) -> Raw:
    port = int(gateway.url.rsplit(":", 1)[1].split("/")[0])
    return Raw(await trio.open_tcp_stream("127.0.0.1", port), port)


async def test_a_session_is_opened_kept_and_ended(gateway: HttpGateway) -> None:
    """initialize opens a session (its id in a header); requests name it on one connection; DELETE ends it."""
    raw = await connect(gateway)
    status, headers, body = await raw.request("POST", INIT, JSON_HEADERS)
    assert status == 200
    assert json.loads(body)["result"]["protocolVersion"] == "2025-06-18"
    session = {"mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    status, _, body = await raw.request(
        "POST", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {**JSON_HEADERS, **session}
    )
    assert (status, json.loads(body)["result"]) == (200, {"tools": []})
    status, _, _ = await raw.request(
        "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, {**JSON_HEADERS, **session}
    )
    assert status == 202
    status, _, _ = await raw.request("DELETE", None, session)
    assert status == 200
    status, _, _ = await raw.request("POST", {"jsonrpc": "2.0", "id": 3, "method": "ping"}, {**JSON_HEADERS, **session})
    assert status == 404  # the session is gone


async def test_requests_outside_the_rules_are_refused_before_any_work(gateway: HttpGateway) -> None:
    """Path, Host, Origin, method, Content-Type, Accept, JSON, JSON-RPC shape, session: each its own status."""
    raw = await connect(gateway)
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    cases: list[tuple[str, Any, dict[str, str], str, int]] = [
        ("POST", INIT, JSON_HEADERS, "/other", 404),
        ("POST", INIT, {**JSON_HEADERS, "origin": "http://evil.example"}, "/mcp", 403),
        ("PUT", INIT, JSON_HEADERS, "/mcp", 405),
        ("POST", INIT, {**JSON_HEADERS, "content-type": "text/plain"}, "/mcp", 415),
        ("POST", INIT, {**JSON_HEADERS, "accept": "text/html"}, "/mcp", 406),
        ("POST", b"{not json", JSON_HEADERS, "/mcp", 400),
        ("POST", [ping, ping], JSON_HEADERS, "/mcp", 400),  # no batches
        ("POST", ping, JSON_HEADERS, "/mcp", 400),  # no session id
        ("POST", ping, {**JSON_HEADERS, "mcp-session-id": "nope"}, "/mcp", 404),
        ("GET", None, {"accept": "text/event-stream", "mcp-session-id": "nope"}, "/mcp", 404),
        ("POST", ping, {**JSON_HEADERS, "mcp-protocol-version": "1999-01-01"}, "/mcp", 400),
    ]
    for method, body, headers, path, expected in cases:
        status, _, _ = await raw.request(method, body, headers, path)
        assert status == expected, (method, path, headers, body)


async def test_dns_rebinding_a_foreign_host_is_refused(gateway: HttpGateway) -> None:
    """A Host header that is not a loopback name gets 421 (a browser tricked by DNS rebinding sends one)."""
    raw = await connect(gateway)
    payload = json.dumps(INIT).encode()
    await raw.send(_head("attacker.example:80", f"content-length: {len(payload)}") + payload)
    status, _, _ = await raw.answer()
    assert status == 421


async def test_a_body_over_the_bound_is_refused_as_it_is_announced(gateway: HttpGateway) -> None:
    """413 from the content-length alone (the body is never read), and the connection is closed."""
    raw = await connect(gateway)
    await raw.send(_head(f"127.0.0.1:{raw.port}", "content-length: 5000000"))
    status, headers, _ = await raw.answer()
    assert status == 413
    assert headers.get("connection") == "close"


async def test_a_chunked_body_over_the_bound_is_refused_and_one_within_is_read(gateway: HttpGateway) -> None:
    """A chunked body counts as it comes: within the bound it is served, past it 413."""
    raw = await connect(gateway)
    payload = json.dumps(INIT).encode()
    head = _head(f"127.0.0.1:{raw.port}", "transfer-encoding: chunked")
    half = len(payload) // 2
    chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, payload[:half], len(payload) - half, payload[half:])
    await raw.send(head + chunks)
    status, _, body = await raw.answer()
    assert status == 200 and json.loads(body)["id"] == 1
    await raw.send(head + b"800\r\n" + b"x" * 0x800 + b"\r\n")
    status, _, _ = await raw.answer()
    assert status == 413


async def test_a_head_over_the_bound_is_refused(gateway: HttpGateway) -> None:
    """431 for a head larger than the limit, before it ends."""
    raw = await connect(gateway)
    await raw.send(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{raw.port}\r\nx-big: {'a' * 4096}\r\n".encode())
    status, _, _ = await raw.answer()
    assert status == 431


async def test_a_malformed_request_line_is_a_400_and_the_connection_closes(gateway: HttpGateway) -> None:
    """A request the server cannot frame is answered 400 and the connection ends."""
    raw = await connect(gateway)
    await raw.send(b"GARBAGE\r\n\r\n")
    status, headers, _ = await raw.answer()
    assert status == 400 and headers.get("connection") == "close"
    with trio.fail_after(BOUND):
        assert await raw.stream.receive_some(100) == b""


async def test_2026_requests_are_checked_by_the_sdk_ladder(gateway: HttpGateway) -> None:
    """At 2026-07-28: no envelope is -32602; headers unlike the body are -32020 (both 400); discover works."""
    raw = await connect(gateway)
    modern = {**JSON_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}
    status, _, body = await raw.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}, modern)
    assert status == 400 and json.loads(body)["error"]["code"] == -32602
    envelope = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    discover = {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": envelope}
    status, _, body = await raw.request("POST", discover, {**modern, "mcp-method": "tools/list"})
    assert status == 400 and json.loads(body)["error"]["code"] == -32020
    status, headers, body = await raw.request("POST", discover, modern)
    result = json.loads(body)["result"]
    assert status == 200 and result["supportedVersions"] == ["2026-07-28"]
    assert "mcp-session-id" not in headers  # stateless
    unknown = {"jsonrpc": "2.0", "id": 3, "method": "nope/nope", "params": envelope}
    status, _, body = await raw.request("POST", unknown, {**modern, "mcp-method": "nope/nope"})
    assert status == 404 and json.loads(body)["error"]["code"] == -32601


async def test_a_head_with_bare_lf_lines_is_read_up_to_its_own_end(gateway: HttpGateway) -> None:
    """Bare-LF line ends are accepted; a CRLF pair inside the body is not taken for the head's end."""
    raw = await connect(gateway)
    body = json.dumps(INIT).replace(', "id"', ',\r\n\r\n"id"').encode()  # JSON whitespace: a CRLF pair
    head = _head(f"127.0.0.1:{raw.port}", f"content-length: {len(body)}").replace(b"\r\n", b"\n")
    await raw.send(head + body)
    status, _, answer = await raw.answer()
    assert status == 200 and json.loads(answer)["id"] == 1
