"""An upstream's ``prompts/list_changed`` reaches the gateway's listeners, like its tools' and resources'.

The runtime turns the notification into a ``prompts:changed`` event (as it does
``tools:changed`` and ``resources:changed``), and the gateway's relay tells every client that
listens: here a 2026-07-28 ``subscriptions/listen`` stream that asked for prompt changes only.
"""

from __future__ import annotations

from pathlib import Path

import trio
from mcp import Client
from mcp.shared.subscriptions import PromptsListChanged

from mcp_actors import events
from tests.serve.test_profiles import BOUND, profiled_gateway

SETTLE = 1.0
"""Seconds within which the notice of the server's own start reaches a new stream, if it does."""


async def test_an_upstreams_prompt_list_change_is_an_event_and_reaches_a_listener(tmp_path: Path) -> None:
    async with profiled_gateway(tmp_path, {}, ("fixture",)) as rig:
        service = rig.runtime.service
        with trio.fail_after(BOUND):
            await service.connect("fixture")
        seen = service.subscribe()
        async with Client(rig.url(), mode="2026-07-28") as client:
            with trio.fail_after(BOUND):
                await client.list_prompts()
                async with client.listen(prompts_list_changed=True) as subscription:
                    with trio.move_on_after(SETTLE):
                        async for _start in subscription:
                            pass  # the server's start, told late: not what is tested
                    await client.call_tool("fixture__test_trigger_prompt_change", {})
                    async for event in subscription:
                        assert isinstance(event, PromptsListChanged)
                        break
                async for runtime_event in seen:
                    if runtime_event.type == events.PROMPTS_CHANGED:
                        assert runtime_event.data["serverName"] == "fixture"
                        break
