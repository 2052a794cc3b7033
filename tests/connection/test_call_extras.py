"""What a tool call costs beyond the call itself: its id, its event, its look-up.

A call builds its ``tool:called`` event only when someone listens, draws its id from a
counter instead of ``uuid4()``, and finds its server on one snapshot; the events and ids
that hosts see are unchanged. The demo server is served in memory (no process).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from testkit import drain, runtime_at, text_of

from mcp_actors import events
from mcp_actors.errors import ServerInactive, ServerNotFound
from mcp_actors.testing.memory import InMemoryServers

pytestmark = pytest.mark.usefixtures("servers_in_memory")


def test_has_subscribers_follows_live_subscriptions() -> None:
    """The bus says whether an emit would reach anyone: false, then true while held, false after close."""
    bus = events.EventBus()
    assert not bus.has_subscribers
    sub = bus.subscribe()
    assert bus.has_subscribers
    sub.close()
    assert not bus.has_subscribers


async def test_unheard_call_builds_no_event(tmp_path: Path) -> None:
    """With no subscriber a call emits nothing; a subscriber taken later sees its calls' events."""
    async with runtime_at(tmp_path) as rt:
        await rt.service.list_server_tools("demo")  # connect first: connecting emits its own events
        assert not rt.bus.has_subscribers
        before = rt.bus.statistics().emitted
        result = await rt.service.call_tool("demo", "echo", {"text": "unheard"})
        assert text_of(result) == "unheard"
        assert rt.bus.statistics().emitted == before, "an event nobody can see was built"
        with rt.service.subscribe() as sub:
            await rt.service.call_tool("demo", "echo", {"text": "heard"})
            [called] = [e for e in drain(sub) if e.type == events.TOOL_CALLED]
        assert called.data["toolName"] == "echo" and called.data["success"] is True
        assert called.data["serverName"] == "demo" and called.data["duration"] >= 0
        assert called.seq == rt.bus.statistics().emitted


async def test_call_ids_come_from_a_counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call without a caller's id draws none from uuid4; each gets a distinct 16-hex-digit id."""

    def no_uuid() -> uuid.UUID:
        raise AssertionError("uuid4() on the call path")

    async with runtime_at(tmp_path) as rt:
        await rt.service.list_server_tools("demo")  # connect first: only the call path is watched
        monkeypatch.setattr(uuid, "uuid4", no_uuid)
        with rt.service.subscribe() as sub:
            for text in ("a", "b", "c"):
                await rt.service.call_tool("demo", "echo", {"text": text})
            await rt.service.call_tool("demo", "echo", {"text": "d"}, "host-chosen-id")
            ids = [e.data["callId"] for e in drain(sub) if e.type == events.TOOL_CALLED]
    assert ids[-1] == "host-chosen-id"
    assert len(set(ids[:3])) == 3 and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids[:3])


async def test_lookup_errors_unchanged(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """An unknown server and a disabled one fail with errors naming them, before any connection."""
    async with runtime_at(tmp_path) as rt:
        with pytest.raises(ServerNotFound, match="'nope'"):
            await rt.service.call_tool("nope", "echo", {"text": "x"})
        await rt.service.update("demo", is_active=False)
        with pytest.raises(ServerInactive, match="demo"):
            await rt.service.call_tool("demo", "echo", {"text": "x"})
    assert servers_in_memory.starts.get("demo", 0) == 0


async def test_progress_is_asked_for_only_when_something_can_see_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No callback and no subscriber: no progressToken goes out; a subscriber or a callback asks and gets progress."""
    from mcp_actors._wire.dispatch import WireDispatcher

    tokens: list[object] = []
    send = WireDispatcher.send_raw_request

    async def watched(
        self: WireDispatcher, method: str, params: Any, opts: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        if method == "tools/call":
            tokens.append((opts or {}).get("on_progress") is not None)
        return await send(self, method, params, opts, **kwargs)

    monkeypatch.setattr(WireDispatcher, "send_raw_request", watched)
    async with runtime_at(tmp_path) as rt:
        await rt.service.list_server_tools("demo")
        await rt.service.call_tool("demo", "sleep", {"seconds": 0.01})
        seen: list[float] = []
        await rt.service.call_tool("demo", "sleep", {"seconds": 0.01}, on_progress=lambda p, t, m: seen.append(p))
        with rt.service.subscribe() as sub:
            await rt.service.call_tool("demo", "sleep", {"seconds": 0.01})
            progress = [e for e in drain(sub) if e.type == events.TOOL_PROGRESS]
    assert tokens == [False, True, True]
    assert len(seen) == 10 and len(progress) == 10, (seen, progress)
