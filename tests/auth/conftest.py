"""Fixtures for the OAuth tests: the test authorization server guarding the demo server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import trio
from testkit import serve_in_thread

from mcp_actors._auth.oauth import OAuthTarget
from mcp_actors._config.record import OAuthConfig


@contextlib.asynccontextmanager
async def oauth_server(**options: Any) -> AsyncIterator[AuthServer]:
    """Run the test authorization server (and the demo MCP server behind it) with ``options``.

    The app ``python -m mcp_actors.testing._oauth_server`` serves, served the same way, in a
    thread of the test process (``testkit.serve_in_thread``): these tests check the client's
    flows over HTTP, not the server's process (``test_the_server_command_serves_the_flows``
    runs the command once).
    """

    def build() -> Any:
        from mcp_actors.demo_server import create_demo_server
        from mcp_actors.testing._oauth_server import OAuthTestServer

        mcp_app = create_demo_server().streamable_http_app(host="127.0.0.1")
        sse_app = create_demo_server().sse_app(host="127.0.0.1")
        return OAuthTestServer(options, mcp_app, sse_app)

    async with serve_in_thread(build) as url:
        yield AuthServer(url)


class AuthServer:
    """A running test authorization server: its URLs, its controls and its counters."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.base = url.removesuffix("/mcp")

    async def control(self, **options: Any) -> None:
        """Change options at run time (``revoke=True``, ``expireAccess=True``, ``deny=True``, ...)."""
        async with httpx2.AsyncClient() as client:
            response = await client.post(self.base + "/_control", json=options)
            response.raise_for_status()

    async def stats(self) -> dict[str, Any]:
        """The server's counters."""
        async with httpx2.AsyncClient() as client:
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
    async with httpx2.AsyncClient() as client:
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
