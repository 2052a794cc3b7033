"""The connection actor over SSE and streamable HTTP against the real demo server on 127.0.0.1."""

from __future__ import annotations

import functools
import os
import signal

import pytest
import trio
from testkit import text_of

from mcp_actors import events
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings, ConnectionState
from mcp_actors._wire.transports import HttpParams
from mcp_actors.errors import ConnectionFailed, ServerConnectionLost, ToolCallFailed, ToolCallTimeout
from mcp_actors.testing import demo_server_command, fault_server_command, serve_http
from supervisors import Backoff, Intensity

KINDS = [("streamable-http", "http"), ("sse", "sse")]


def http_settings(url: str, kind: str, **overrides: object) -> ConnectionSettings:
    return ConnectionSettings(
        server_id=f"id-{kind}",
        server_name=f"remote-{kind}",
        transport=HttpParams(url=url, kind=kind, headers={"X-Test": "1"}, connect_timeout=10.0),  # type: ignore[arg-type]
        connect_timeout=10.0,
        call_timeout=20.0,
        ping_interval=0,
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
        **overrides,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("transport", "kind"), KINDS)
async def test_http_list_call_and_concurrency(transport: str, kind: str) -> None:
    """Tools list, calls work, and 50 concurrent calls over one HTTP session all succeed."""
    async with serve_http(demo_server_command("--transport", transport, "--port", "0")) as server:
        bus = events.EventBus()
        handle, start = open_connection(http_settings(server.url, kind), bus)
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                names = {t.name for t in await handle.list_tools()}
                assert {"echo", "sleep", "fail"} <= names
                assert handle.status().state is ConnectionState.CONNECTED and handle.status().pid is None
                results = []

                async def one(i: int) -> None:
                    results.append(text_of(await handle.call_tool("echo", {"text": str(i)})))

                async with trio.open_nursery() as calls:
                    for i in range(50):
                        calls.start_soon(one, i)
                assert sorted(results, key=int) == [str(i) for i in range(50)]
                failed = await handle.call_tool("fail", {"message": "nope"})
                assert failed.is_error
            finally:
                await handle.aclose()


async def test_a_tool_call_states_its_timeout_to_the_http_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tools/call tells the HTTP client the call's timeout as its ``bound`` (the request's scope
    ends it by then), so the client looks up no effective deadline on the call path; other
    requests state none and the client finds the deadline itself."""
    from mcp_actors._wire.http.http11 import HttpClient

    stated: list[tuple[bytes, float | None]] = []
    send = HttpClient.send

    async def watched(self: HttpClient, *args: object, bound: float | None = None, **kwargs: object) -> object:
        body = args[3] if len(args) > 3 else kwargs.get("body", b"")
        assert isinstance(body, bytes)
        stated.append((body, bound))
        return await send(self, *args, bound=bound, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(HttpClient, "send", watched)
    async with serve_http(demo_server_command("--transport", "streamable-http", "--port", "0")) as server:
        handle, start = open_connection(http_settings(server.url, "http"), events.EventBus())
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                await handle.list_tools()
                assert text_of(await handle.call_tool("echo", {"text": "a"})) == "a"
                assert text_of(await handle.call_tool("echo", {"text": "b"}, timeout=12.5)) == "b"
            finally:
                await handle.aclose()
    calls = [bound for body, bound in stated if b'"tools/call"' in body]
    assert calls == [20.0, 12.5]  # the server's call timeout, then the call's own
    assert all(bound is None for body, bound in stated if b'"tools/call"' not in body)


@pytest.mark.parametrize(("transport", "kind"), KINDS)
async def test_http_timeout_is_typed(transport: str, kind: str) -> None:
    """A slow HTTP call past its timeout raises ToolCallTimeout; the session keeps working."""
    async with serve_http(demo_server_command("--transport", transport, "--port", "0")) as server:
        handle, start = open_connection(http_settings(server.url, kind), events.EventBus())
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                with pytest.raises(ToolCallTimeout, match="sleep"):
                    await handle.call_tool("sleep", {"seconds": 30}, timeout=0.5)
                assert text_of(await handle.call_tool("echo", {"text": "alive"})) == "alive"
            finally:
                await handle.aclose()


@pytest.mark.parametrize(("transport", "kind"), KINDS)
async def test_http_server_killed_mid_call_fails_fast(transport: str, kind: str) -> None:
    """Killing the HTTP server fails the in-flight call long before its 20 s timeout."""
    async with serve_http(demo_server_command("--transport", transport, "--port", "0")) as server:
        handle, start = open_connection(
            http_settings(server.url, kind, intensity=Intensity(max_restarts=0, period=60)), events.EventBus()
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                await handle.connect()
                outcome: list[BaseException] = []

                async def doomed() -> None:
                    try:
                        await handle.call_tool("sleep", {"seconds": 60})
                    except ConnectionFailed as exc:
                        outcome.append(exc)

                async with trio.open_nursery() as calls:
                    calls.start_soon(doomed)
                    await trio.testing.wait_all_tasks_blocked(cushion=0.1)
                    os.kill(server.pid, signal.SIGKILL)
                    start_time = trio.current_time()
                elapsed = trio.current_time() - start_time
                assert outcome and isinstance(outcome[0], ConnectionFailed)
                assert elapsed < 5.0, elapsed
            finally:
                await handle.aclose()


async def test_http_unreachable_is_a_clear_error() -> None:
    """Nothing listening on the port: a typed connection error naming the server."""
    handle, start = open_connection(
        http_settings("http://127.0.0.1:9/mcp", "http", intensity=Intensity(max_restarts=0, period=60)),
        events.EventBus(),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            with pytest.raises(ConnectionFailed, match="remote-http"):
                await handle.connect()
        finally:
            await handle.aclose()


async def wait_for_state(sub: events.Subscription, state: ConnectionState) -> events.Event:
    async for event in sub:
        if event.type == events.CONNECTION_STATE and event.data["state"] == state.value:
            return event
    raise AssertionError("event bus closed")


async def test_http_death_mid_call_is_a_lost_connection_with_its_reason() -> None:
    """A server killed mid-call fails the call at once with ServerConnectionLost naming the HTTP failure; error."""
    argv = fault_server_command("--transport", "streamable-http", "--port", "0", "--hang-on-call", "1")
    async with serve_http(argv) as server:
        bus = events.EventBus()
        sub = bus.subscribe()
        handle, start = open_connection(
            http_settings(server.url, "http", intensity=Intensity(max_restarts=0, period=60)), bus
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                await handle.connect()
                outcome: list[BaseException] = []

                async def doomed() -> None:
                    with pytest.raises(ServerConnectionLost) as info:
                        await handle.call_tool("sleep", {"seconds": 60})
                    outcome.append(info.value)

                async with trio.open_nursery() as calls:
                    calls.start_soon(doomed)
                    with trio.fail_after(10):
                        await server.wait_stderr_line("fault: hanging call")
                    os.kill(server.pid, signal.SIGKILL)
                    killed_at = trio.current_time()
                # Expected in ~0.1 s; 5 s is generous on a loaded machine, far below the 20 s call timeout.
                assert trio.current_time() - killed_at < 5.0
                message = str(outcome[0])
                assert "HTTP" in message and "connection closed" not in message, message
                with trio.fail_after(10):
                    event = await wait_for_state(sub, ConnectionState.ERROR)
                assert "HTTP" in event.data["error"]
                assert handle.status().state is ConnectionState.ERROR
            finally:
                await handle.aclose()


async def _answer_with_status(status: str, headers: dict[str, str], stream: trio.SocketStream) -> None:
    """Read one HTTP request and answer it with a fixed status line, headers and a short body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += await stream.receive_some(65536)
    payload = b"not an MCP server"
    extra = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    head_out = (
        f"HTTP/1.1 {status}\r\nContent-Length: {len(payload)}\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    )
    await stream.send_all((head_out + extra + "\r\n").encode() + payload)
    await stream.aclose()


@pytest.mark.parametrize("kind", ["http", "sse"])
@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        ("401 Unauthorized", {"WWW-Authenticate": 'Bearer realm="mcp"'}, ["HTTP 401", "authorization"]),
        (
            "302 Found",
            {"Location": "http://user:pa55word@elsewhere.test/mcp?token=t0ken"},
            ["HTTP 302", "elsewhere.test"],
        ),
        ("500 Internal Server Error", {}, ["HTTP 500", "Internal Server Error"]),
    ],
)
async def test_http_status_is_named_in_the_connect_error(
    status: str, headers: dict[str, str], expected: list[str], kind: str
) -> None:
    """A server answering 401, 302 or 500 yields a connect error that says the status (and for 401: authorization)."""
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(
                trio.serve_tcp, functools.partial(_answer_with_status, status, headers), 0, host="127.0.0.1"
            )
        )
        port = listeners[0].socket.getsockname()[1]
        settings = http_settings(f"http://127.0.0.1:{port}/mcp", kind, intensity=Intensity(max_restarts=0, period=60))
        handle, start = open_connection(settings, events.EventBus())
        await nursery.start(start)
        try:
            with trio.fail_after(30), pytest.raises(ConnectionFailed) as info:
                await handle.connect()
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    message = str(info.value)
    for part in expected:
        assert part in message, message
    assert "closed" not in message and "pa55word" not in message and "t0ken" not in message


async def test_idle_http_server_death_is_an_error_event_without_a_request() -> None:
    """An idle streamable HTTP server killed: state error (with its event) before any request is made."""
    async with serve_http(fault_server_command("--transport", "streamable-http", "--port", "0")) as server:
        bus = events.EventBus()
        sub = bus.subscribe()
        handle, start = open_connection(
            http_settings(server.url, "http", intensity=Intensity(max_restarts=0, period=60)), bus
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                await handle.connect()
                os.kill(server.pid, signal.SIGKILL)
                # The GET stream breaks at once; 10 s is > 10x what it takes on a loaded machine.
                with trio.fail_after(10):
                    event = await wait_for_state(sub, ConnectionState.ERROR)
                assert "HTTP" in event.data["error"], event.data
                with pytest.raises(ConnectionFailed):
                    await handle.call_tool("echo", {"text": "x"})
            finally:
                await handle.aclose()


async def test_http_500_on_one_call_names_the_status_and_the_session_lives_on() -> None:
    """A 500 answered to one tools/call fails that call with the status named; the next call works."""
    argv = fault_server_command("--transport", "streamable-http", "--port", "0", "--http-error-on-call", "1")
    async with serve_http(argv) as server:
        handle, start = open_connection(http_settings(server.url, "http"), events.EventBus())
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            try:
                with trio.fail_after(30), pytest.raises(ToolCallFailed) as info:
                    await handle.call_tool("echo", {"text": "first"})
                assert "HTTP 500 Internal Server Error" in str(info.value), str(info.value)
                with trio.fail_after(30):  # the server's stderr is read by another task: wait for the line
                    await server.wait_stderr_line("fault: http error 500 on call 1")
                with trio.fail_after(30):
                    assert text_of(await handle.call_tool("echo", {"text": "second"})) == "second"
                assert handle.status().state is ConnectionState.CONNECTED
            finally:
                await handle.aclose()
