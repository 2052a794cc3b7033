"""The connection actor against hostile HTTP servers on 127.0.0.1 (:mod:`mcp_actors.testing.hostile`).

Legacy SSE with big messages and with a POST endpoint on another origin; secrets (the URL's
password and query token, a header's value) never reachable from an error we raise, its
exception chain included, for connect failures over SSE and streamable HTTP.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from testkit import text_of

from mcp_actors import events
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import HttpParams
from mcp_actors.errors import ConnectionFailed, ServerMessageTooLarge, ToolCallFailed
from mcp_actors.testing.hostile import Bomb, serve_bomb, serve_legacy_sse, serve_status
from supervisors import Backoff, Intensity

BOUND = 30
PASSWORD = "pa55w0rd-s3cret"
TOKEN = "t0ken-s3cret"
HEADER = "Bearer h3ader-s3cret"
SECRETS = (PASSWORD, TOKEN, HEADER.split()[1])


def settings_for(url: str, kind: str, **transport: Any) -> ConnectionSettings:
    return ConnectionSettings(
        server_id=f"id-{kind}",
        server_name="hostile",
        transport=HttpParams(url=url, kind=kind, connect_timeout=BOUND, **transport),  # type: ignore[arg-type]
        connect_timeout=BOUND,
        call_timeout=BOUND,
        ping_interval=0,
        intensity=Intensity(max_restarts=0, period=60),
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
    )


async def _start(nursery: trio.Nursery, settings: ConnectionSettings) -> ConnectionHandle:
    handle, start = open_connection(settings, events.EventBus())
    await nursery.start(start)
    return handle


# ---------------------------------------------------------------------- legacy SSE and big messages


async def test_a_big_result_over_legacy_sse_arrives_whole() -> None:
    """A 2 MB tool result over legacy SSE arrives whole (the limit is max_message_bytes, not 1 MiB)."""
    async with serve_legacy_sse(result_bytes=2_000_000) as server, trio.open_nursery() as nursery:
        handle = await _start(nursery, settings_for(server.url, "sse"))
        try:
            with trio.fail_after(BOUND):
                result = await handle.call_tool("big", {})
            assert len(text_of(result)) == 2_000_000
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()


async def test_a_legacy_sse_message_over_the_limit_names_the_limit_to_the_caller() -> None:
    """A result over max_message_bytes on legacy SSE fails the caller with the real reason: the limit."""
    limit = 1024 * 1024
    async with serve_legacy_sse(result_bytes=2_000_000) as server, trio.open_nursery() as nursery:
        handle = await _start(nursery, settings_for(server.url, "sse", max_message_bytes=limit))
        try:
            with trio.fail_after(BOUND), pytest.raises(ConnectionFailed) as info:
                await handle.call_tool("big", {})
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    message = str(info.value)
    assert "max_message_bytes" in message and str(limit) in message, message


async def test_a_streamable_http_bomb_at_connect_is_a_typed_error() -> None:
    """A server whose handshake answer is a gzip bomb fails the connect with ServerMessageTooLarge."""
    async with serve_bomb(Bomb.GZIP_JSON) as server, trio.open_nursery() as nursery:
        handle = await _start(nursery, settings_for(server.url, "http", max_message_bytes=64 * 1024))
        try:
            with trio.fail_after(BOUND), pytest.raises(ServerMessageTooLarge) as info:
                await handle.connect()
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    assert "'hostile'" in str(info.value) and "65536" in str(info.value)


async def test_a_legacy_sse_post_refused_with_500_fails_that_call_only() -> None:
    """A tools/call POST answered HTTP 500 fails that call at once with the status named; the next call works."""
    async with serve_legacy_sse(fail_call=1) as server, trio.open_nursery() as nursery:
        handle = await _start(nursery, settings_for(server.url, "sse"))
        try:
            with trio.fail_after(5), pytest.raises(ToolCallFailed) as info:
                await handle.call_tool("big", {})
            assert "HTTP 500 Internal Server Error" in str(info.value), str(info.value)
            with trio.fail_after(BOUND):
                assert len(text_of(await handle.call_tool("big", {}))) == 16
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------- SSE on another origin


async def test_an_sse_endpoint_on_another_origin_is_refused_at_once() -> None:
    """An ``endpoint`` event naming another origin fails the connect at once, saying so; nothing is sent there."""
    async with (
        serve_legacy_sse() as decoy,
        serve_legacy_sse(endpoint=f"{decoy.origin}/messages") as server,
        trio.open_nursery() as nursery,
    ):
        url = server.url.replace("http://", f"http://user:{PASSWORD}@") + f"?token={TOKEN}"
        handle = await _start(nursery, settings_for(url, "sse", headers={"Authorization": HEADER}))
        try:
            with trio.fail_after(5), pytest.raises(ConnectionFailed) as info:
                await handle.connect()
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    message = str(info.value)
    assert "origin" in message and decoy.origin in message, message
    assert decoy.requests == []
    _assert_no_secret(info.value)


# ---------------------------------------------------------------------- secrets in exception chains


def _reachable(root: BaseException) -> Iterator[tuple[str, object]]:
    """Every object an error reporter could reach from ``root``: its chain (``__cause__``,
    ``__context__``, a group's ``.exceptions``, recursively), and each exception's args, vars()
    and ``.request``/``.response``/``.url`` (with their own url and headers)."""
    seen: set[int] = set()
    todo: list[tuple[str, object]] = [("error", root)]
    while todo:
        path, obj = todo.pop()
        if id(obj) in seen or obj is None:
            continue
        seen.add(id(obj))
        yield path, obj
        if isinstance(obj, BaseException):
            todo += [(f"{path}.__cause__", obj.__cause__), (f"{path}.__context__", obj.__context__)]
            todo += [(f"{path}.args[{i}]", arg) for i, arg in enumerate(obj.args)]
            todo += [(f"{path}.{key}", value) for key, value in vars(obj).items()]
            if isinstance(obj, BaseExceptionGroup):
                todo += [(f"{path}.exceptions[{i}]", e) for i, e in enumerate(obj.exceptions)]
        for name in ("request", "response", "url", "headers"):
            try:
                value = getattr(obj, name, None)
            except Exception:  # httpx raises for a request it was not given
                continue
            if value is not None and not isinstance(value, str | bytes | int):
                todo.append((f"{path}.{name}", value))
            elif isinstance(value, str | bytes):
                todo.append((f"{path}.{name}", value))
        if isinstance(obj, dict | list | tuple):
            items = obj.items() if isinstance(obj, dict) else enumerate(obj)
            todo += [(f"{path}[{key!r}]", value) for key, value in items]


def _assert_no_secret(error: BaseException) -> None:
    for path, obj in _reachable(error):
        texts = [str(obj), repr(obj)]
        if hasattr(obj, "items") and not isinstance(obj, dict):  # httpx Headers
            texts += [repr(list(obj.items()))]
        for text in texts:
            for secret in SECRETS:
                assert secret not in text, f"{secret!r} reachable at {path}: {text[:300]}"


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("kind", ["http", "sse"])
@pytest.mark.parametrize("fault", ["refused", "401", "500", "tls"])
async def test_no_secret_is_reachable_from_a_connect_error(
    kind: str, fault: str, server_tls: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connect failure (nothing listening, 401, 500, an untrusted certificate) raises an error from
    which neither the URL's password nor its query token nor a header value is reachable, chain included."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    status = {"401": "401 Unauthorized", "500": "500 Internal Server Error"}.get(fault, "200 OK")
    tls = server_tls if fault == "tls" else None
    async with serve_status(status, tls=tls) as base, trio.open_nursery() as nursery:
        if fault == "refused":
            base = f"http://127.0.0.1:{_free_port()}/mcp"
        scheme, rest = base.split("://")
        url = f"{scheme}://alice:{PASSWORD}@{rest.replace('/mcp', '/sse' if kind == 'sse' else '/mcp')}?token={TOKEN}"
        handle = await _start(nursery, settings_for(url, kind, headers={"Authorization": HEADER}))
        try:
            with trio.fail_after(BOUND), pytest.raises(ConnectionFailed) as info:
                await handle.connect()
        finally:
            await handle.aclose()
        nursery.cancel_scope.cancel()
    _assert_no_secret(info.value)
