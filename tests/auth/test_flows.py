"""OAuth flows against a real authorization server guarding the real demo server."""

from __future__ import annotations

from mcp_actors._oauth import AuthSettings, build_auth, open_authorized_session
from mcp_actors._token_store import MemoryTokenStore
from tests.auth.conftest import AuthServer, browser


async def test_dynamic_registration_login_then_call(auth_server: AuthServer) -> None:
    """With a handler, a fresh client registers, logs in with PKCE and calls a tool."""
    store = MemoryTokenStore()
    settings = AuthSettings(token_store=store, authorization_handler=browser)
    target = auth_server.target()
    async with open_authorized_session(target, build_auth(target, settings)) as session:
        result = await session.call_tool("echo", {"text": "hi"})
    assert result.content[0].text == "hi"
    assert await auth_server.count("register") == 1
    assert await auth_server.count("token:authorization_code") == 1
    status = await store.status(target.server_id)
    assert status.logged_in and status.scopes == ("mcp",)
