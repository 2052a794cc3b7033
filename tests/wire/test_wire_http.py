"""The streamable-HTTP wire (``link.wire``) against real servers on 127.0.0.1, message by message.

The test plays the dispatcher: it sends JSON-RPC dicts with ``wire.send`` and looks at what
the wire hands to ``deliver``. Servers: the light stdlib server (``benchmarks/_toolserver.py
--http``: JSON answers, 405 for GET), the demo and fault servers (the SDK's server: SSE
answers, a GET stream, sessions), and a one-shot trio server for statuses no MCP server sends.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
import trio.testing
from test_http11 import ProxySeen, _pipe, clear_proxies, proxy_handler, serve

from mcp_actors._wire.base import WireClosed
from mcp_actors._wire.http.http11 import Url
from mcp_actors._wire.http.transport import HttpParams, open_http_transport
from mcp_actors._wire.http.wire import HttpWire
from mcp_actors._wire.link import TransportLink
from mcp_actors.errors import ServerMessageTooLarge, ServerMisconfigured
from mcp_actors.testing import demo_server_command, fault_server_command, serve_http

BOUND = 30  # generous: every wait here takes well under a second on an idle machine
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
TOOLSERVER = Path(__file__).resolve().parents[2] / "benchmarks" / "_toolserver.py"


@attrs.define(eq=False)
class Inbox:
    """What the wire delivered, in order, with a way to wait for a message."""

    messages: list[dict[str, Any]] = attrs.field(factory=list)
    on_request: Callable[[dict[str, Any]], None] | None = None
    run_ended: trio.Event = attrs.field(factory=trio.Event)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def deliver(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._changed.set()
        self._changed = trio.Event()
        if self.on_request is not None and "method" in message and "id" in message:
            self.on_request(message)

    def response(self, rpc_id: Any) -> dict[str, Any]:
        [found] = [m for m in self.messages if m.get("id") == rpc_id and "method" not in m]
        return found

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            for message in self.messages:
                if predicate(message):
                    return message
            await self._changed.wait()

    async def wait_count(self, method: str, count: int) -> None:
        while sum(1 for m in self.messages if m.get("method") == method) < count:
            await self._changed.wait()


def request(rpc_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params or {}}


def call(rpc_id: Any, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return request(rpc_id, "tools/call", params)


def version_headers(version: str = LEGACY) -> dict[str, str]:
    return {"mcp-protocol-version": version}


def modern_headers(message: dict[str, Any]) -> dict[str, str]:
    """The 2026-07-28 routing headers the session stamps on ``message``."""
    headers = {"mcp-protocol-version": MODERN, "mcp-method": message["method"]}
    if message["method"] == "tools/call":
        headers["mcp-name"] = message["params"]["name"]
    return headers


def modern(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with the 2026-07-28 per-request ``_meta`` envelope (what the session stamps)."""
    message["params"].setdefault("_meta", {}).update(
        {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    )
    return message


@contextlib.asynccontextmanager
async def open_wire(
    url: str, inbox: Inbox | None = None, *, max_message_bytes: int = 1 << 24
) -> AsyncIterator[tuple[HttpWire, TransportLink, Inbox]]:
    """Open the transport and run its wire with an :class:`Inbox` as ``deliver``."""
    inbox = inbox or Inbox()
    params = HttpParams(
        url=url, kind="http", headers={"X-Test": "1"}, connect_timeout=10.0, max_message_bytes=max_message_bytes
    )
    async with open_http_transport(params, label="wired") as link, trio.open_nursery() as nursery:
        wire = link.wire
        assert isinstance(wire, HttpWire)

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            await wire.run(inbox.deliver, task_status=task_status)
            inbox.run_ended.set()

        await nursery.start(run)
        yield wire, link, inbox
        nursery.cancel_scope.cancel()


async def handshake(wire: HttpWire, inbox: Inbox, *, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """``initialize`` then ``notifications/initialized``, as a legacy session does; the result."""
    params = {
        "protocolVersion": LEGACY,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    await wire.send(request(0, "initialize", params))
    result = inbox.response(0)["result"]
    await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=version_headers())
    return dict(result)


@contextlib.asynccontextmanager
async def toolserver_http() -> AsyncIterator[str]:
    """The light stdlib server in its streamable-HTTP mode; yields its URL, stops when stdin closes."""
    process = await trio.lowlevel.open_process(
        [sys.executable, str(TOOLSERVER), "--http"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        line = b""
        with trio.fail_after(BOUND):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, "the toolserver exited before printing its URL"
                line += chunk
        yield line.decode().strip()
    finally:
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            with trio.move_on_after(BOUND):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@attrs.frozen
class Seen:
    """One HTTP request as the scripted server read it."""

    method: str
    headers: dict[str, str]
    body: bytes


async def _read_request(stream: trio.SocketStream) -> Seen | None:
    """Read one HTTP request from ``stream`` (None when the client closed first)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    while len(body) < int(headers.get("content-length", 0)):
        body += await stream.receive_some(65536)
    return Seen(method=lines[0].split(" ", 1)[0], headers=headers, body=body)


async def _answer_once(respond: Callable[[Seen], bytes], seen: list[Seen], stream: trio.SocketStream) -> None:
    """Read one HTTP request, record it, and write what ``respond`` makes of it; then close."""
    request = await _read_request(stream)
    if request is None:
        return
    seen.append(request)
    await stream.send_all(respond(request))
    await stream.aclose()


def http_answer(status: str, body: bytes = b"", content_type: str | None = None, **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    lines += [f"{key.replace('_', '-')}: {value}" for key, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@contextlib.asynccontextmanager
async def scripted_server(respond: Callable[[Seen], bytes], seen: list[Seen] | None = None) -> AsyncIterator[str]:
    """A trio HTTP server answering each request (one per connection) with ``respond(request)``; yields its URL."""
    seen = [] if seen is None else seen
    async with trio.open_nursery() as nursery:
        handler = functools.partial(_answer_once, respond, seen)
        listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
        yield f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------- answers


async def test_json_answer_is_delivered_before_send_returns() -> None:
    """A JSON answer is one delivered message, there when send returns; session id and version are learned."""
    async with toolserver_http() as url, open_wire(url) as (wire, link, inbox):
        with trio.fail_after(BOUND):
            result = await handshake(wire, inbox)
            assert result["protocolVersion"] == LEGACY
            assert wire.session_id == "bench-session" and wire.protocol_version == LEGACY
            await wire.send(call(1, "echo", {"text": "hi"}), headers=version_headers())
        assert inbox.response(1)["result"]["content"] == [{"type": "text", "text": "hi"}]
        assert link.death_reason is None
        # The handshake's response, the call's response: nothing else was delivered.
        assert [m.get("id") for m in inbox.messages] == [0, 1]


async def test_sse_answer_delivers_notifications_in_order_before_the_result() -> None:
    """An SSE answer: every log and progress notification is delivered as it comes, the result last."""
    argv = fault_server_command("--transport", "streamable-http", "--flood-notifications", "3")
    async with serve_http(argv) as server, open_wire(server.url) as (wire, _, inbox):
        with trio.fail_after(BOUND):
            await handshake(wire, inbox)
            before = len(inbox.messages)
            await wire.send(call(1, "echo", {"text": "x"}, progressToken="p1"), headers=version_headers())
        got = inbox.messages[before:]
        kinds = [m.get("method", "response") for m in got]
        assert kinds == ["notifications/message", "notifications/progress"] * 3 + ["response"], kinds
        assert [m["params"]["progress"] for m in got if m.get("method") == "notifications/progress"] == [1, 2, 3]
        assert got[-1]["id"] == 1 and got[-1]["result"]["content"][0]["text"] == "x"


async def test_server_request_on_the_post_stream_is_answered_through_send() -> None:
    """A sampling request on a call's SSE stream is delivered; its answer, sent with send, completes the call."""
    async with trio.open_nursery() as answers:
        inbox = Inbox()

        async def answer(message: dict[str, Any]) -> None:
            assert message["method"] == "sampling/createMessage"
            result = {"role": "assistant", "content": {"type": "text", "text": "forty-two"}, "model": "stub"}
            await wire.send({"jsonrpc": "2.0", "id": message["id"], "result": result}, headers=version_headers())

        inbox.on_request = lambda message: answers.start_soon(answer, message)
        async with serve_http(demo_server_command("--transport", "streamable-http")) as server:
            async with open_wire(server.url, inbox) as (wire, _, _):
                with trio.fail_after(BOUND):
                    await handshake(wire, inbox, capabilities={"sampling": {}})
                    await wire.send(call(1, "ask_model", {"prompt": "meaning?"}), headers=version_headers())
                asked = [m for m in inbox.messages if m.get("method") == "sampling/createMessage"]
                assert len(asked) == 1
                text = inbox.response(1)["result"]["content"][0]["text"]
                assert "forty-two" in text, text


async def test_get_stream_delivers_server_messages_and_is_reopened_with_the_last_event_id() -> None:
    """After the handshake the GET stream delivers what the server sends; a stream the server ends is reopened."""

    def event(event_id: str, message: dict[str, Any]) -> bytes:
        return f"id: {event_id}\r\nretry: 10\r\ndata: {json.dumps(message)}\r\n\r\n".encode()

    def respond(request: Seen) -> bytes:
        if request.method == "GET":
            changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            tick = "e1" if "last-event-id" not in request.headers else "e2"
            return http_answer("200 OK", b": hello\r\n\r\n" + event(tick, changed), "text/event-stream")
        if request.method == "DELETE":
            return http_answer("200 OK")
        message = json.loads(request.body)
        if message.get("method") == "initialize":
            result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            return http_answer("200 OK", body, "application/json", Mcp_Session_Id="s-1")
        return http_answer("202 Accepted")

    seen: list[Seen] = []
    async with scripted_server(respond, seen) as url:
        async with open_wire(url) as (wire, _, inbox):
            with trio.fail_after(BOUND):
                await handshake(wire, inbox)
                await inbox.wait_count("notifications/tools/list_changed", 1)
                assert wire.get_stream_open.is_set()
                # The server ended the stream: reopened after its retry, from the last event seen.
                await inbox.wait_count("notifications/tools/list_changed", 2)
        # Closing the transport ended the session with a DELETE.
        [delete] = [r for r in seen if r.method == "DELETE"]
        assert delete.headers["mcp-session-id"] == "s-1"
        gets = [r for r in seen if r.method == "GET"]
        assert gets[0].headers["mcp-session-id"] == "s-1" and gets[0].headers["mcp-protocol-version"] == LEGACY
        assert "last-event-id" not in gets[0].headers and gets[1].headers["last-event-id"] == "e1"
        posts = [r for r in seen if r.method == "POST"]
        assert "mcp-protocol-version" not in posts[0].headers  # the handshake negotiates it
        assert posts[1].headers["mcp-session-id"] == "s-1" and posts[0].headers["x-test"] == "1"


async def test_an_error_status_fails_one_call_and_the_session_lives_on() -> None:
    """A 500 answered to one tools/call is that call's JSON-RPC error naming the status; the next call works."""
    argv = fault_server_command("--transport", "streamable-http", "--http-error-on-call", "1")
    async with serve_http(argv) as server, open_wire(server.url) as (wire, link, inbox):
        with trio.fail_after(BOUND):
            await handshake(wire, inbox)
            await wire.send(call(1, "echo", {"text": "first"}), headers=version_headers())
            error = inbox.response(1)["error"]
            assert error["code"] == -32603
            assert error["message"] == "the server answered HTTP 500 Internal Server Error"
            await wire.send(call(2, "echo", {"text": "second"}), headers=version_headers())
        assert inbox.response(2)["result"]["content"][0]["text"] == "second"
        assert link.death_reason is None


async def test_404_for_a_known_session_kills_the_link() -> None:
    """The server forgot the session (404 with our session id): the link dies naming it, send raises WireClosed."""
    async with serve_http(demo_server_command("--transport", "streamable-http")) as server:
        async with open_wire(server.url) as (wire, link, inbox):
            with trio.fail_after(BOUND):
                await handshake(wire, inbox)
                assert wire.session_id is not None
                async with httpx2.AsyncClient() as other:  # someone ends our session
                    ended = await other.delete(server.url, headers={"mcp-session-id": wire.session_id})
                assert ended.status_code == 200
                with pytest.raises(WireClosed, match="no longer knows this session"):
                    await wire.send(call(1, "echo", {"text": "x"}), headers=version_headers())
            assert link.dead.is_set() and "HTTP 404" in (link.death_reason or "")
            with pytest.raises(WireClosed):
                await wire.send(call(2, "echo", {"text": "y"}))


async def test_401_kills_the_link_naming_authorization() -> None:
    """A 401 is a death whose reason names the status and what to do; send raises WireClosed."""
    answer = http_answer("401 Unauthorized", b"no", "text/plain", WWW_Authenticate='Bearer realm="mcp"')
    async with scripted_server(lambda seen: answer) as url, open_wire(url) as (wire, link, _):
        with trio.fail_after(BOUND), pytest.raises(WireClosed, match="authorization"):
            await wire.send(call(1, "echo", {"text": "x"}))
        assert "HTTP 401" in (link.death_reason or "")


@pytest.mark.parametrize(
    ("answer", "code", "text"),
    [
        (http_answer("202 Accepted"), -32600, "202 Accepted"),
        (http_answer("200 OK", b"<html/>", "text/html"), -32600, "'text/html'"),
        (http_answer("200 OK", b"{not json", "application/json"), -32700, "does not parse"),
        (
            http_answer("200 OK", b"event: message\r\ndata: {}\r\n\r\n: bye\r\n", "text/event-stream"),
            -32000,
            "without an answer",
        ),
        (
            http_answer(
                "400 Bad Request",
                b'{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad params"}}',
                "application/json",
            ),
            -32602,
            "bad params",
        ),
        (http_answer("404 Not Found", b"nope", "text/plain"), -32601, "HTTP 404 Not Found"),
    ],
)
async def test_an_answer_that_is_no_response_is_an_error_reply(answer: bytes, code: int, text: str) -> None:
    """202 to a request, a strange content type, bad JSON, an SSE stream ending early, an error body, 404: one error."""
    async with scripted_server(lambda seen: answer) as url, open_wire(url) as (wire, link, inbox):
        with trio.fail_after(BOUND):
            await wire.send(request(7, "server/discover"), headers=version_headers(MODERN))
        error = inbox.response(7)["error"]
        assert error["code"] == code and text in error["message"], error
        assert link.death_reason is None


def _resumable_server(
    resumed: Callable[[Seen], bytes], times: list[tuple[str, str | None, float]]
) -> Callable[[Seen], bytes]:
    """A legacy server whose ``tools/call`` stream sends a priming event (id ``p1``, retry 150 ms) and ends.

    The GET that resumes it (with ``Last-Event-ID``) is answered by ``resumed``; the standalone GET
    stream is refused (405). ``times`` gets (method, last event id, time) of every request.
    """

    def respond(request: Seen) -> bytes:
        times.append((request.method, request.headers.get("last-event-id"), trio.current_time()))
        if request.method == "GET":
            if "last-event-id" not in request.headers:
                return http_answer("405 Method Not Allowed")
            return resumed(request)
        if request.method == "DELETE":
            return http_answer("200 OK")
        message = json.loads(request.body)
        if message.get("method") == "initialize":
            result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            return http_answer("200 OK", body, "application/json", Mcp_Session_Id="s-1")
        if message.get("method") == "tools/call":
            return http_answer("200 OK", b"id: p1\r\nretry: 150\r\ndata: \r\n\r\n", "text/event-stream")
        return http_answer("202 Accepted")

    return respond


async def test_a_stream_ended_before_its_answer_is_resumed_after_its_retry_with_the_last_event_id() -> None:
    """SEP-1699: the answer comes on the GET that resumes the stream, sent after ``retry`` with ``Last-Event-ID``."""

    def resumed(request: Seen) -> bytes:
        answer = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "resumed"}]}}
        return http_answer("200 OK", f"id: p2\r\ndata: {json.dumps(answer)}\r\n\r\n".encode(), "text/event-stream")

    times: list[tuple[str, str | None, float]] = []
    async with scripted_server(_resumable_server(resumed, times)) as url, open_wire(url) as (wire, link, inbox):
        with trio.fail_after(BOUND):
            await handshake(wire, inbox)
            await wire.send(call(1, "slow", {}), headers=version_headers())
        assert inbox.response(1)["result"]["content"][0]["text"] == "resumed"
        assert link.death_reason is None
    [posted] = [t for method, _, t in times if method == "POST"][-1:]
    [(_, last_event_id, resumed_at)] = [entry for entry in times if entry[0] == "GET" and entry[1] is not None]
    assert last_event_id == "p1"
    assert resumed_at - posted >= 0.15  # the stream's retry, not at once


async def test_a_resumption_that_brings_nothing_gives_up_and_fails_the_request() -> None:
    """Resumed streams that end with no new event are tried a bounded number of times, then the request fails."""
    times: list[tuple[str, str | None, float]] = []

    def resumed(request: Seen) -> bytes:
        return http_answer("200 OK", b": nothing new\r\n\r\n", "text/event-stream")

    async with scripted_server(_resumable_server(resumed, times)) as url, open_wire(url) as (wire, link, inbox):
        with trio.fail_after(BOUND):
            await handshake(wire, inbox)
            await wire.send(call(1, "slow", {}), headers=version_headers())
        error = inbox.response(1)["error"]
        assert error["code"] == -32000 and "without an answer" in error["message"], error
        assert link.death_reason is None
    assert [entry[1] for entry in times if entry[0] == "GET" and entry[1] is not None] == ["p1", "p1"]


async def test_an_answer_on_the_get_stream_settles_a_request_whose_own_stream_stays_open() -> None:
    """A response that comes on the GET stream ends the wait on the request's stream (no resumption after it)."""
    call_seen = trio.Event()
    sse_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"

    async def handle(stream: trio.SocketStream) -> None:
        request = await _read_request(stream)
        if request is None:
            return
        if request.method == "GET":
            await stream.send_all(sse_head + b"id: g1\r\nretry: 10\r\ndata: \r\n\r\n")
            await call_seen.wait()
            answer = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "on the GET"}]}}
            await stream.send_all(f"id: g2\r\ndata: {json.dumps(answer)}\r\n\r\n".encode())
            await trio.sleep_forever()
        message = json.loads(request.body)
        if message.get("method") == "initialize":
            result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            await stream.send_all(http_answer("200 OK", body, "application/json", Mcp_Session_Id="s-1"))
        elif message.get("method") == "tools/call":
            await stream.send_all(sse_head + b"id: p1\r\nretry: 10\r\ndata: \r\n\r\n")
            call_seen.set()
            await trio.sleep_forever()  # the request's own stream never brings the answer
        else:
            await stream.send_all(http_answer("202 Accepted"))
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"
        async with open_wire(url) as (wire, link, inbox):
            with trio.fail_after(BOUND):
                await handshake(wire, inbox)
                await wire.get_stream_open.wait()
                await wire.send(call(1, "slow", {}), headers=version_headers())
            assert inbox.response(1)["result"]["content"][0]["text"] == "on the GET"
            assert link.death_reason is None
        nursery.cancel_scope.cancel()


async def test_an_sse_message_over_the_limit_fails_its_request_only() -> None:
    """An SSE message larger than max_message_bytes fails that request with ServerMessageTooLarge naming the limit."""
    big = json.dumps({"jsonrpc": "2.0", "id": 3, "result": {"text": "x" * 500}}).encode()
    answer = http_answer("200 OK", b"data: " + big + b"\n\n", "text/event-stream")
    async with (
        scripted_server(lambda seen: answer) as url,
        open_wire(url, max_message_bytes=200) as (wire, link, inbox),
    ):
        with trio.fail_after(BOUND), pytest.raises(ServerMessageTooLarge) as info:
            await wire.send(request(3, "tools/list"))
        assert "200 bytes" in str(info.value) and "max_message_bytes" in str(info.value), info.value
        assert not inbox.messages
        assert link.death_reason is None


# ---------------------------------------------------------------------- deaths and close


async def test_server_killed_mid_call_is_seen_at_once() -> None:
    """SIGKILL under a call in flight: the link dies naming the HTTP failure; the call's send raises at once."""
    argv = fault_server_command("--transport", "streamable-http", "--hang-on-call", "1")
    async with serve_http(argv) as server, open_wire(server.url) as (wire, link, inbox):
        with trio.fail_after(BOUND):
            await handshake(wire, inbox)
        failures: list[BaseException] = []

        async def doomed() -> None:
            try:
                await wire.send(call(1, "sleep", {"seconds": 60}), headers=version_headers())
            except WireClosed as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(doomed)
            with trio.fail_after(BOUND):
                await server.wait_stderr_line("fault: hanging call")
            os.kill(server.pid, signal.SIGKILL)
            killed_at = trio.current_time()
        # Expected in ~0.1 s; 5 s is generous on a loaded machine, far below any call timeout.
        assert trio.current_time() - killed_at < 5.0
        assert len(failures) == 1 and "HTTP" in str(failures[0]), failures
        assert link.dead.is_set() and "HTTP" in (link.death_reason or "")
        with trio.fail_after(BOUND):
            await inbox.run_ended.wait()  # run() ends with the link: a dispatcher fails what still waits


async def test_close_ends_the_session_on_the_server() -> None:
    """Closing the transport sends DELETE: the server no longer knows the session id afterwards."""
    async with serve_http(demo_server_command("--transport", "streamable-http")) as server:
        async with open_wire(server.url) as (wire, _, inbox):
            with trio.fail_after(BOUND):
                await handshake(wire, inbox)
            session = wire.session_id
            assert session is not None
        async with httpx2.AsyncClient() as other:
            body = request(1, "ping")
            headers = {"mcp-session-id": session, "accept": "application/json, text/event-stream"}
            with trio.fail_after(BOUND):
                after = await other.post(server.url, json=body, headers=headers)
        assert after.status_code == 404


# ---------------------------------------------------------------------- 2026-07-28


async def test_modern_has_no_session_and_a_cancel_aborts_the_post_instead_of_posting() -> None:
    """At 2026-07-28: discover gives no session; notifications/cancelled aborts its request's POST, is not POSTed."""
    argv = fault_server_command("--transport", "streamable-http", "--hang-tool", "sleep", "--modern")
    async with serve_http(argv) as server, open_wire(server.url) as (wire, link, inbox):
        with trio.fail_after(BOUND):
            message = modern(request("d", "server/discover"))
            await wire.send(message, headers=modern_headers(message))
        assert MODERN in inbox.response("d")["result"]["supportedVersions"]
        assert wire.session_id is None and wire.protocol_version == MODERN
        aborted = trio.Event()

        async def hung() -> None:
            message = modern(call(5, "sleep", {"seconds": 60}))
            await wire.send(message, headers=modern_headers(message))
            aborted.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hung)
            with trio.fail_after(BOUND):
                await server.wait_stderr_line("fault: hanging call")
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
                await wire.send(cancel)
                await aborted.wait()
        assert not [m for m in inbox.messages if m.get("id") == 5]  # nothing answers an abandoned request
        # The frame never reached the server (the fault server logs every cancel it receives).
        with trio.fail_after(BOUND):
            message = modern(call(6, "echo", {"text": "after"}))
            await wire.send(message, headers=modern_headers(message))
        assert inbox.response(6)["result"]["content"][0]["text"] == "after"
        assert not any(line.startswith("fault: cancelled") for line in server.stderr_lines)
        assert link.death_reason is None


async def test_send_before_run_is_a_usage_error() -> None:
    """send() without a running run() (no deliver yet) is refused with a RuntimeError naming run()."""
    params = HttpParams(url="http://127.0.0.1:9/mcp", kind="http")
    async with open_http_transport(params, label="idle") as link:
        assert link.wire is not None
        with pytest.raises(RuntimeError, match=r"run\(\)"):
            await link.wire.send(request(1, "ping"))


# ---------------------------------------------------------------------- TLS and proxies, end to end


@contextlib.asynccontextmanager
async def tls_front(target: str, context: ssl.SSLContext) -> AsyncIterator[str]:
    """A TLS-terminating front on 127.0.0.1 relaying every connection to ``target`` (http://host:port/path)."""
    origin = Url.parse(target)

    async def relay(stream: trio.SocketStream) -> None:
        secure = trio.SSLStream(stream, context, server_side=True)
        async with await trio.open_tcp_stream(origin.host, origin.port) as upstream, trio.open_nursery() as nursery:
            nursery.start_soon(_pipe, secure, upstream)
            await _pipe(upstream, secure)
            nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, relay, 0, host="127.0.0.1"))
        yield f"https://127.0.0.1:{listeners[0].socket.getsockname()[1]}{origin.target}"
        nursery.cancel_scope.cancel()


async def test_https_with_ssl_cert_file_carries_the_session(
    server_tls: ssl.SSLContext, ca_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """https:// verified with SSL_CERT_FILE: the handshake and a call go through TLS to the server."""
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    async with toolserver_http() as url, tls_front(url, server_tls) as secure:
        async with open_wire(secure) as (wire, link, inbox):
            with trio.fail_after(BOUND):
                await handshake(wire, inbox)
                await wire.send(call(1, "echo", {"text": "over tls"}), headers=version_headers())
            assert link.death_reason is None
        assert inbox.response(1)["result"]["content"] == [{"type": "text", "text": "over tls"}]


async def test_an_untrusted_certificate_kills_the_link_with_the_reason(
    server_tls: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate no trusted CA signed: the link dies saying the TLS handshake failed and why; send raises."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with toolserver_http() as url, tls_front(url, server_tls) as secure:
        async with open_wire(secure) as (wire, link, inbox):
            with trio.fail_after(BOUND), pytest.raises(WireClosed, match="TLS handshake"):
                await handshake(wire, inbox)
        reason = link.death_reason or ""
        assert "the HTTP connection failed" in reason and "certificate" in reason, reason


async def test_the_wire_goes_through_the_environment_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY: every POST of the session reaches the server through the proxy, in absolute form."""
    clear_proxies(monkeypatch)
    seen = ProxySeen()
    async with toolserver_http() as url, serve(proxy_handler(seen)) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/mcp"))
        async with open_wire(url) as (wire, link, inbox):
            with trio.fail_after(BOUND):
                await handshake(wire, inbox)
                await wire.send(call(1, "echo", {"text": "proxied"}), headers=version_headers())
            assert link.death_reason is None
        assert inbox.response(1)["result"]["content"][0]["text"] == "proxied"
        # initialize, initialized, the call; maybe the GET stream (refused: 405); the DELETE that ends the session.
        assert [line for line in seen.lines if line.startswith("POST")] == [f"POST {url} HTTP/1.1"] * 3, seen.lines
        assert set(seen.lines) <= {f"{method} {url} HTTP/1.1" for method in ("POST", "GET", "DELETE")}, seen.lines
        # The DELETE follows every POST (they share the pooled connection, in order). The GET
        # has a connection of its own: the proxy may read its first line after the DELETE's
        # when the loop is slow to run its task (seen once with two suites on two cores).
        without_get = [line for line in seen.lines if not line.startswith("GET")]
        assert without_get[-1] == f"DELETE {url} HTTP/1.1" and without_get.count(without_get[-1]) == 1, seen.lines


async def test_a_header_with_a_line_break_is_a_misconfiguration_naming_the_header() -> None:
    """config.headers with CR/LF in a value: opening fails with ServerMisconfigured naming the header, not the value."""
    params = HttpParams(url="http://127.0.0.1:9/mcp", kind="http", headers={"X-Api-Key": "s3cret\r\nX-Evil: 1"})
    with pytest.raises(ServerMisconfigured, match="'X-Api-Key'") as info:
        async with open_http_transport(params, label="bad-header"):
            pass
    assert "s3cret" not in str(info.value) and "bad-header" in str(info.value)
