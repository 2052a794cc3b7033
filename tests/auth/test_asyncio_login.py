"""OAuth from an asyncio host: ``mcp_actors.asyncio.open_runtime(authorization_handler=)`` in both modes.

The host's handler is its own code: a coroutine function that belongs on the host's loop
(it may drive a browser with an asyncio library), or a plain function that may block (a
terminal prompt). Either way the runtime asks it when a server needs a person to log in,
and the call that needed the login goes on with the token.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx2
import pytest
import trio

import mcp_actors.asyncio as maio
from mcp_actors._auth.token_store import MemoryTokenStore
from tests.auth.conftest import AuthServer

BOUND = 120.0


def _follow(authorization_url: str) -> str:
    """What the user's browser does: follow the URL, hand back the redirect."""
    response = httpx2.get(authorization_url)
    assert response.status_code == 302, response.text
    return response.headers["location"]


@pytest.mark.parametrize("mode", ["guest", "thread"])
@pytest.mark.parametrize("kind", ["coroutine", "function"])
async def test_an_asyncio_host_logs_in_through_its_own_handler(
    auth_server: AuthServer, tmp_path: Path, mode: str, kind: str
) -> None:
    asked: list[tuple[str, str | None]] = []

    async def on_loop(server_id: str, authorization_url: str) -> str:
        asked.append((server_id, "loop" if asyncio.get_running_loop() is host_loop[0] else "another loop"))
        return await asyncio.to_thread(_follow, authorization_url)

    def blocking(server_id: str, authorization_url: str) -> str:
        asked.append((server_id, "worker" if threading.current_thread() is not threading.main_thread() else None))
        return _follow(authorization_url)

    host_loop: list[asyncio.AbstractEventLoop] = []

    async def main() -> str:
        host_loop.append(asyncio.get_running_loop())
        async with asyncio.timeout(BOUND):
            async with maio.open_runtime(
                tmp_path / "cfg.json",
                mode=mode,  # type: ignore[arg-type]
                connect_on_add=False,
                token_store=MemoryTokenStore(),
                authorization_handler=on_loop if kind == "coroutine" else blocking,
            ) as rt:
                record = await rt.service.add({"name": "guarded", "type": "http", "config": {"url": auth_server.url}})
                result = await rt.service.call_tool("guarded", "echo", {"text": "from asyncio"})
                assert [server for server, _where in asked] == [record.id]
                return str(result.content[0].text)  # type: ignore[union-attr]

    with trio.fail_after(BOUND + 30):
        text = await trio.to_thread.run_sync(lambda: asyncio.run(main()))
    assert text == "from asyncio"
    # The host's coroutine ran on the host's loop; its blocking function in a worker thread.
    assert [where for _server, where in asked] == (["loop"] if kind == "coroutine" else ["worker"])
