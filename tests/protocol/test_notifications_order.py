"""``McpService.notifications_delivered``: a server's notifications sent before an answer are handled once it returns.

The runtime handles a server's notifications in the wire's order, in a task of its own, so a
call's answer can reach the caller before the log messages the server wrote just before it.
A host that relays both in order (the gateway: a call's log messages go on its stream before
its result) waits on ``notifications_delivered`` after the answer.
"""

from __future__ import annotations

from pathlib import Path

import trio
from testkit import drain

from mcp_actors import events, open_runtime
from mcp_actors.testing import fault_server_command

FLOOD = 300


async def test_every_log_message_before_an_answer_is_an_event_once_notifications_are_delivered(tmp_path: Path) -> None:
    async with open_runtime(tmp_path / "cfg.json") as runtime:
        service = runtime.service
        argv = fault_server_command("--flood-notifications", str(FLOOD))
        await service.add({"name": "f", "type": "stdio", "config": {"command": argv[0], "args": argv[1:]}})
        with trio.fail_after(60):
            await service.connect("f")
            for _round in range(3):
                with service.subscribe(types=[events.SERVER_LOG], buffer=4 * FLOOD) as logs:
                    await service.call_tool("f", "echo", {"text": "after the flood"})
                    await service.notifications_delivered("f")
                    seen = [e for e in drain(logs) if str(e.data.get("data", "")).startswith("flood ")]
                assert len(seen) == FLOOD
                assert [e.data["data"] for e in seen][-1] == f"flood {FLOOD} of {FLOOD}"
