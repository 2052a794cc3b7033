"""The client at every handshake revision the SDK speaks, against a server that knows only one.

The demo server negotiates 2025-11-25 (legacy) and 2026-07-28 (auto) in the other protocol
tests; here the fault server answers ``initialize`` with one older revision whatever the
client asks (``--protocol-version``), as servers built on older SDKs do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from protocol_bed import BOUND, negotiated, text_of

from mcp_actors.runtime import open_runtime
from mcp_actors.testing import fault_server_command

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


@pytest.mark.parametrize("revision", REVISIONS)
async def test_tools_progress_logging_and_health_at_each_handshake_revision(tmp_path: Path, revision: str) -> None:
    """Listing, a call with progress, the log level and health work at the revision the server chose."""
    argv = fault_server_command("--protocol-version", revision, "--flood-notifications", "3")
    record = {"name": "old", "type": "stdio", "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0}}
    progress: list[float] = []
    with trio.fail_after(BOUND):
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False) as rt:
            svc = rt.service
            await svc.add(record)
            tools = await svc.list_server_tools("old")
            assert "echo" in {tool.name for tool in tools}
            result = await svc.call_tool(
                "old", "echo", {"text": revision}, on_progress=lambda p, _t, _m: progress.append(p)
            )
            assert text_of(result) == revision
            assert negotiated(svc, "old") == revision
            assert len(progress) == 3
            await svc.set_log_level("old", "debug")
            assert await svc.health("old") >= 0
