"""The protocol features through the blocking and asyncio facades (real demo server over stdio)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp.types as mcp_types

from mcp_actors._demo.callbacks import SAMPLED_TEMPLATE
from mcp_actors._demo.features import COUNTER_URI, NOTE_TEMPLATE, TASK_TOOL
from mcp_actors.portal import start_portal
from mcp_actors.testing import demo_server_command

BOUND = 60.0


def demo_input(**config: Any) -> dict[str, Any]:
    argv = demo_server_command()
    return {
        "name": "srv",
        "type": "stdio",
        "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0, **config},
    }


def text_of(result: Any) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


def test_sync_facade_offers_every_feature(tmp_path: Path, protocol: str) -> None:
    """The blocking facade reads resources, prompts, completions, log level, progress and tasks, at each revision."""
    seen: list[float] = []
    with start_portal(str(tmp_path / "cfg.json")) as portal:
        svc = portal.sync_service()
        svc.add(demo_input(protocol=protocol))
        assert COUNTER_URI in {str(r.uri) for r in svc.list_resources("srv")}
        assert [t.uri_template for t in svc.list_resource_templates("srv")] == [SAMPLED_TEMPLATE, NOTE_TEMPLATE]
        assert svc.read_resource("srv", "demo://note/beta").contents[0].text == "note beta"  # type: ignore[union-attr]
        svc.subscribe_resource("srv", COUNTER_URI)
        svc.unsubscribe_resource("srv", COUNTER_URI)
        assert "compose" in {p.name for p in svc.list_prompts("srv")}
        got = svc.get_prompt("srv", "compose", {"topic": "x"})
        assert got.messages[0].content.text == "Write a friendly paragraph about x."  # type: ignore[union-attr]
        assert svc.complete("srv", mcp_types.PromptReference(name="compose"), ("tone", "fu")).values == ["funny"]
        svc.set_log_level("srv", "error")
        assert text_of(svc.call_tool("srv", "log", {"level": "info", "message": "m"})).startswith("not logged")
        svc.call_tool("srv", "sleep", {"seconds": 0.02}, on_progress=lambda p, t, m: seen.append(p))
        assert len(seen) == 10
        assert text_of(svc.call_tool("srv", TASK_TOOL, {"topic": "t"})) == "research on t: done"
        # 2025-11-25: the core tasks; 2026-07-28: the tasks extension (the server makes the task).
        assert text_of(svc.call_tool("srv", "count", {"n": 2}, as_task=True)) == "1 2"


def test_asyncio_facade_offers_every_feature(tmp_path: Path) -> None:
    """The asyncio facade runs progress callbacks (sync or coroutine) on the caller's loop."""
    with start_portal(str(tmp_path / "cfg.json")) as portal:
        svc = portal.asyncio_service()

        async def main() -> None:
            loop = asyncio.get_running_loop()
            on_loop: list[bool] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                on_loop.append(asyncio.get_running_loop() is loop)

            await svc.add(demo_input())
            templates = await svc.list_resource_templates("srv")
            assert [t.uri_template for t in templates] == [SAMPLED_TEMPLATE, NOTE_TEMPLATE]
            assert (await svc.read_resource("srv", COUNTER_URI)).contents[0].text == "0"  # type: ignore[union-attr]
            await svc.subscribe_resource("srv", COUNTER_URI)
            await svc.unsubscribe_resource("srv", COUNTER_URI)
            assert "resources" not in (await svc.discover("srv")).errors
            assert {p.name for p in await svc.list_prompts("srv")} >= {"compose", "greeting"}
            assert (await svc.get_prompt("srv", "greeting", {"name": "Ada"})).messages
            names = await svc.complete("srv", {"type": "ref/resource", "uri": NOTE_TEMPLATE}, ("name", "g"))
            assert names.values == ["gamma"]
            await svc.set_log_level("srv", "debug")
            await svc.call_tool("srv", "sleep", {"seconds": 0.02}, on_progress=on_progress)
            await asyncio.sleep(0)  # the last relayed coroutine may still be scheduled
            for _ in range(1000):
                if len(on_loop) == 10:
                    break
                await asyncio.sleep(0.01)
            assert on_loop == [True] * 10
            assert text_of(await svc.call_tool("srv", TASK_TOOL, {"topic": "a"})) == "research on a: done"

        asyncio.run(asyncio.wait_for(main(), BOUND))
