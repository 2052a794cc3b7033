"""An upstream's log messages and resource updates reach the clients that asked for them, through the gateway.

The SDK's own client, at 2025-11-25 (``logging/setLevel``, ``resources/subscribe`` and the
session's GET stream) and 2026-07-28 (the per-request log-level opt-in), against the demo
server spoken to at either revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
import trio

from tests.serve.relay_rig import BOUND, demo_gateway, sdk_client, text_of

UPSTREAMS = ("legacy", "auto")


class Logs:
    """The log messages a client received, and a way to wait for one."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []
        self._arrived = trio.Event()

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.seen.append((params.level, params.data))
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait_for(self, data: str) -> None:
        while not any(data in str(seen) for _, seen in self.seen):
            await self._arrived.wait()

    def texts(self) -> list[str]:
        return [str(data) for _, data in self.seen]


@pytest.mark.parametrize("upstream", UPSTREAMS)
async def test_log_messages_of_a_call_reach_its_client_at_its_level_2025(tmp_path: Path, upstream: str) -> None:
    """Without a level every message comes; after ``logging/setLevel`` only those at or above it."""
    logs = Logs()
    async with demo_gateway(tmp_path, upstream) as (_, gateway):
        async with sdk_client(gateway.url, "2025-11-25", logging_callback=logs) as client:
            with trio.fail_after(BOUND):
                result = await client.call_tool("demo__log", {"level": "info", "message": "first"})
                assert not result.is_error, text_of(result)
                await logs.wait_for("first")
                await client.set_logging_level("error")
                await client.call_tool("demo__log", {"level": "warning", "message": "below the level"})
                await client.call_tool("demo__log", {"level": "error", "message": "at the level"})
                await logs.wait_for("at the level")
    assert not any("below the level" in text for text in logs.texts())


@pytest.mark.parametrize("upstream", UPSTREAMS)
async def test_log_messages_at_2026_come_only_to_a_request_that_opts_in(tmp_path: Path, upstream: str) -> None:
    """A 2026-07-28 request without ``logLevel`` hears nothing; one with it hears its level and above."""
    quiet, loud = Logs(), Logs()
    async with demo_gateway(tmp_path, upstream) as (_, gateway):
        async with (
            sdk_client(gateway.url, "2026-07-28", logging_callback=quiet) as silent,
            sdk_client(gateway.url, "2026-07-28", logging_callback=loud, log_level="warning") as listening,
        ):
            with trio.fail_after(BOUND):
                await silent.call_tool("demo__log", {"level": "error", "message": "not asked for"})
                await listening.call_tool("demo__log", {"level": "info", "message": "below the level"})
                await listening.call_tool("demo__log", {"level": "error", "message": "asked for"})
                await loud.wait_for("asked for")
    assert quiet.seen == []
    assert not any("below the level" in text for text in loud.texts())


@pytest.mark.parametrize("upstream", UPSTREAMS)
async def test_a_subscribed_resource_s_updates_reach_its_subscribers(tmp_path: Path, upstream: str) -> None:
    """One upstream subscription for two clients; updates reach each; the last subscriber leaving unsubscribes."""
    updates: dict[str, list[str]] = {"ada": [], "bob": []}
    arrived = {name: trio.Event() for name in updates}

    def handler(name: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                updates[name].append(str(message.params.uri))
                arrived[name].set()

        return on_message

    async with demo_gateway(tmp_path, upstream) as (_, gateway):
        async with (
            sdk_client(gateway.url, "2025-11-25", message_handler=handler("ada")) as ada,
            sdk_client(gateway.url, "2025-11-25", message_handler=handler("bob")) as bob,
        ):
            with trio.fail_after(BOUND):
                caps = ada.session.server_capabilities
                assert caps is not None and caps.resources is not None and caps.resources.subscribe
                await ada.subscribe_resource("demo://counter")
                await bob.subscribe_resource("demo://counter")
                subscribed = gateway.gateway.subscriptions.subscribers
                assert [len(who) for who in subscribed.values()] == [2]  # one upstream subscription, two clients
                await ada.call_tool("demo__bump_counter", {})
                await arrived["ada"].wait()
                await arrived["bob"].wait()
                assert updates == {"ada": ["demo://counter"], "bob": ["demo://counter"]}
                await ada.unsubscribe_resource("demo://counter")
                assert [len(who) for who in subscribed.values()] == [1]
                arrived["bob"] = trio.Event()
                await ada.call_tool("demo__bump_counter", {})
                await arrived["bob"].wait()
        # bob's session ended: the gateway unsubscribes upstream in the background.
        with trio.fail_after(BOUND):
            while gateway.gateway.subscriptions.subscribers:  # noqa: ASYNC110  (the gateway's background work: polled)
                await trio.sleep(0.01)
    assert updates == {"ada": ["demo://counter"], "bob": ["demo://counter", "demo://counter"]}
