"""Host callbacks through the portal: plain functions in a worker thread, coroutines on the host's asyncio loop."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest

from mcp_actors._config.codec import record_to_json_dict
from mcp_actors.portal import start_portal

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


LEGACY = {"protocol": "legacy"}
"""The demo's ask_* tools make server-to-client requests, which exist only up to 2025-11-25."""


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


def test_sync_handlers_run_in_a_worker_thread(tmp_path: Path) -> None:
    """A sync host's plain handlers run in a worker thread (not the trio thread); set_roots notifies the server."""
    threads: list[str] = []

    def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        threads.append(threading.current_thread().name)
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(type="text", text="from a thread"), model="sync"
        )

    def roots(server_id: str) -> list[str]:
        threads.append(threading.current_thread().name)
        return ["file:///sync/root"]

    with start_portal(str(tmp_path / "cfg.json"), sweep_ledger=False, sampling_handler=sample, roots=roots) as portal:
        svc = portal.sync_service()
        svc.update("demo", config={**record_to_json_dict(svc.get("demo"))["config"], **LEGACY})
        answer = json.loads(text_of(svc.call_tool("demo", "ask_model", {"prompt": "hi"})))
        assert answer["content"][0]["text"] == "from a thread"
        assert json.loads(text_of(svc.call_tool("demo", "list_host_roots", {})))[0]["uri"] == "file:///sync/root"
        assert svc.set_roots(["file:///sync/other"]) == 1
        assert text_of(svc.call_tool("demo", "wait_roots_changed", {"count": 1})) == "1"
        assert json.loads(text_of(svc.call_tool("demo", "list_host_roots", {})))[0]["uri"] == "file:///sync/other"
    assert threads and all(name not in ("mcp-actors-runtime", "MainThread") for name in threads)


def test_asyncio_handler_runs_on_the_host_loop(tmp_path: Path) -> None:
    """An asyncio host's coroutine elicitation handler runs on the loop that started the portal."""

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        seen: list[bool] = []

        async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
            seen.append(asyncio.get_running_loop() is loop)
            await asyncio.sleep(0)
            return mcp_types.ElicitResult(action="accept", content={"name": "Grace", "age": 41})

        portal = start_portal(str(tmp_path / "cfg.json"), sweep_ledger=False, elicitation_handler=elicit)
        try:
            svc = portal.asyncio_service()
            await svc.update("demo", config={**record_to_json_dict(svc.get("demo"))["config"], **LEGACY})
            result = json.loads(text_of(await svc.call_tool("demo", "ask_user", {})))
            assert seen == [True]
            assert await svc.set_roots(["file:///nobody/hears"]) == 0  # roots were never offered
            return dict(result)
        finally:
            await asyncio.to_thread(portal.close)

    result = asyncio.run(main())
    assert result["action"] == "accept" and result["content"]["name"] == "Grace" and result["content"]["age"] == 41
    assert result["content"]["colour"] == "green"  # the schema's default, filled in


def test_coroutine_handler_without_a_loop_is_refused(tmp_path: Path) -> None:
    """A coroutine handler given where no asyncio loop runs is a TypeError saying what to do."""

    async def sample(server_id: str, params: Any) -> Any:
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="no asyncio loop runs here"):
        start_portal(str(tmp_path / "cfg.json"), sweep_ledger=False, sampling_handler=sample)
