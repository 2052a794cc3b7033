"""Fixtures for the OAuth tests: the test authorization server guarding the demo server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from sharedhttp import http_slots, loopback_client, slot

from mcp_actors._auth.oauth import OAuthTarget
from mcp_actors._config.record import OAuthConfig

__all__ = ["AuthServer", "auth_server", "browser", "fail_after", "http_slots", "oauth_server"]


@contextlib.asynccontextmanager
async def oauth_server(**options: Any) -> AsyncIterator[AuthServer]:
    """A fresh test authorization server (and the demo MCP server behind it) with ``options``.

    The app ``python -m mcp_actors.testing._oauth_server`` serves, served the same way, in a
    thread of the test process: these tests check the client's flows over HTTP, not the
    server's process (``test_the_server_command_serves_the_flows`` runs the command once). The
    authorization server (options, clients, tokens, counters) is new for each call; the
    socket and the demo server's apps behind it are the module's (``sharedhttp.slot``).
    """
    from mcp_actors.testing._oauth_server import OAuthTestServer

    async with slot(demo=True) as held:
        assert held.demo_apps is not None
        held.app = OAuthTestServer(options, *held.demo_apps)
        yield AuthServer(held.origin + "/mcp")


class AuthServer:
    """A running test authorization server: its URLs, its controls and its counters."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.base = url.removesuffix("/mcp")

    async def control(self, **options: Any) -> None:
        """Change options at run time (``revoke=True``, ``expireAccess=True``, ``deny=True``, ...)."""
        async with loopback_client() as client:
            response = await client.post(self.base + "/_control", json=options)
            response.raise_for_status()

    async def stats(self) -> dict[str, Any]:
        """The server's counters."""
        async with loopback_client() as client:
            response = await client.get(self.base + "/_stats")
            return dict(response.json())

    async def count(self, key: str) -> int:
        """One counter (``token:refresh_token``, ``register``, ``mcp401``, ...)."""
        return int((await self.stats())["counts"].get(key, 0))

    def target(self, oauth: OAuthConfig | None = None, *, name: str = "guarded") -> OAuthTarget:
        """The OAuth target of the guarded demo server."""
        return OAuthTarget(server_id=f"mcp_test_{name}", server_name=name, url=self.url, oauth=oauth)


async def browser(server_id: str, authorization_url: str) -> str:
    """An authorization handler that plays the user's browser: follow the URL, return the redirect."""
    async with loopback_client() as client:
        response = await client.get(authorization_url)
    assert response.status_code == 302, response.text
    return response.headers["location"]


@pytest.fixture
async def auth_server() -> AsyncIterator[AuthServer]:
    """A test authorization server with default options (PRM in the 401 header, DCR)."""
    async with oauth_server() as server:
        yield server


def fail_after(seconds: float = 60.0) -> trio.CancelScope:
    """A generous bound for one test step."""
    return trio.fail_after(seconds)
