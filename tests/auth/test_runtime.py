"""OAuth through open_runtime: the real tree, the real HTTP transport, the test authorization server."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from mcp_actors._auth.token_store import MemoryTokenStore
from mcp_actors._connection.status import ConnectionState
from mcp_actors.errors import (
    AuthorizationFailed,
    AuthorizationRequired,
    AuthorizationServerUnreachable,
    ConnectionFailed,
    ServerCircuitOpen,
)
from mcp_actors.events import Subscription
from mcp_actors.runtime import open_runtime
from tests.auth.conftest import AuthServer, browser, fail_after, oauth_server


async def _wait_circuit_open(events: Subscription) -> None:
    async for event in events:
        if event.type == "connection:state" and event.data.get("circuitOpen"):
            return


def _record(server: AuthServer) -> dict[str, object]:
    return {"name": "guarded", "type": "http", "config": {"url": server.url}}


async def test_runtime_with_handler_logs_in_and_calls(auth_server: AuthServer, tmp_path: Path) -> None:
    """open_runtime(authorization_handler=) logs in through the host's handler on first use."""
    asked: list[str] = []

    async def handler(server_id: str, url: str) -> str:
        asked.append(server_id)
        return await browser(server_id, url)

    store = MemoryTokenStore()
    with fail_after():
        async with open_runtime(
            tmp_path / "cfg.json",
            sweep_ledger=False,
            connect_on_add=False,
            authorization_handler=handler,
            token_store=store,
        ) as rt:
            record = await rt.service.add(_record(auth_server))
            result = await rt.service.call_tool("guarded", "echo", {"text": "through the tree"})
    assert result.content[0].text == "through the tree"  # type: ignore[union-attr]
    assert asked == [record.id]
    assert (await store.status(record.id)).logged_in


async def test_runtime_without_handler_parks_the_server_with_authorization_required(
    auth_server: AuthServer, tmp_path: Path
) -> None:
    """No tokens, no handler: the call fails with AuthorizationRequired, the server is in error, and calls fail fast."""
    with fail_after():
        async with open_runtime(
            tmp_path / "cfg.json", sweep_ledger=False, connect_on_add=False, token_store=MemoryTokenStore()
        ) as rt:
            await rt.service.add(_record(auth_server))
            events = rt.service.subscribe()
            with pytest.raises(AuthorizationRequired, match="mcp-actors auth login guarded"):
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
            await _wait_circuit_open(events)
            status = rt.service.status("guarded")
            assert status.state is ConnectionState.ERROR
            assert status.circuit_open
            assert "auth login guarded" in (status.error or "")
            with trio.fail_after(5), pytest.raises(ServerCircuitOpen, match="auth login guarded"):
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
    assert await auth_server.count("authorize") == 0


async def test_revocation_mid_session_ends_in_authorization_required(tmp_path: Path) -> None:
    """A grant revoked while connected: the call fails typed, the server goes to error naming the fix."""
    async with oauth_server() as server:
        store = MemoryTokenStore()
        with fail_after():
            async with open_runtime(
                tmp_path / "cfg.json",
                sweep_ledger=False,
                connect_on_add=False,
                authorization_handler=browser,
                token_store=store,
            ) as rt:
                await rt.service.add(_record(server))
                await rt.service.call_tool("guarded", "echo", {"text": "x"})
        with fail_after():
            async with open_runtime(
                tmp_path / "cfg.json", sweep_ledger=False, connect_on_add=False, token_store=store
            ) as rt:
                await rt.service.call_tool("guarded", "echo", {"text": "still logged in"})
                await server.control(revoke=True)
                events = rt.service.subscribe()
                with pytest.raises(ConnectionFailed, match="auth login guarded"):
                    await rt.service.call_tool("guarded", "echo", {"text": "x"})
                await _wait_circuit_open(events)
                with pytest.raises(ConnectionFailed, match="auth login guarded"):
                    await rt.service.call_tool("guarded", "echo", {"text": "x"})
                status = rt.service.status("guarded")
                assert status.state is ConnectionState.ERROR and status.circuit_open


async def test_sse_server_logs_in_through_the_runtime(auth_server: AuthServer, tmp_path: Path) -> None:
    """An OAuth-protected SSE server is authorized the same way (discovery from its own /sse resource)."""
    store = MemoryTokenStore()
    url = auth_server.url.removesuffix("/mcp") + "/sse"
    with fail_after():
        async with open_runtime(
            tmp_path / "cfg.json",
            sweep_ledger=False,
            connect_on_add=False,
            authorization_handler=browser,
            token_store=store,
        ) as rt:
            record = await rt.service.add({"name": "guarded-sse", "type": "sse", "config": {"url": url}})
            result = await rt.service.call_tool("guarded-sse", "echo", {"text": "over sse"})
    assert result.content[0].text == "over sse"  # type: ignore[union-attr]
    assert (await store.status(record.id)).logged_in
    assert url in (await auth_server.stats())["resources"]


@pytest.mark.parametrize(
    ("options", "error", "parked"),
    [
        ({"prmResource": "http://127.0.0.1:9/elsewhere"}, AuthorizationFailed, True),
        ({"malformed": "asm"}, AuthorizationFailed, True),
        ({"authServers": ["http://127.0.0.1:9"]}, AuthorizationServerUnreachable, False),
    ],
    ids=["resource-mismatch", "malformed-metadata", "unreachable-authorization-server"],
)
async def test_authorization_failures_end_in_the_right_state(
    tmp_path: Path, options: dict[str, object], error: type[Exception], parked: bool
) -> None:
    """Each failure is its typed error and state error; only an unreachable server is retried (circuit closed)."""
    async with oauth_server(**options) as server:
        with fail_after():
            async with open_runtime(
                tmp_path / "cfg.json",
                sweep_ledger=False,
                connect_on_add=False,
                authorization_handler=browser,
                token_store=MemoryTokenStore(),
            ) as rt:
                await rt.service.add(_record(server))
                events = rt.service.subscribe()
                with pytest.raises(error):
                    await rt.service.call_tool("guarded", "echo", {"text": "x"})
                if parked:
                    await _wait_circuit_open(events)
                status = rt.service.status("guarded")
                assert status.state in (ConnectionState.ERROR, ConnectionState.CONNECTING)
                assert status.circuit_open is parked
        assert await server.count("token:authorization_code") == 0
