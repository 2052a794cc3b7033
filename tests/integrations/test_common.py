"""The shared rules of the framework toolsets that need no server: checking a toolset's options, binding progress."""

from __future__ import annotations

import inspect
import math

import pytest

from mcp_actors.integrations import bind_progress, check_selection


def test_check_selection_returns_the_servers_as_a_tuple_read_once() -> None:
    """A generator of servers is read once, into a tuple; ``None`` stays ``None`` (every active server)."""
    assert check_selection(name for name in ["demo", "files"]) == ("demo", "files")
    assert check_selection(None, tools=["echo"], naming="tool", timeout=5) is None
    assert check_selection(["demo"], tools=lambda tool: True, naming=lambda tool: tool.name) == ("demo",)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"servers": "demo"}, TypeError, "servers must be a collection.*'demo'"),
        ({"tools": "echo"}, TypeError, "tools must be a collection.*'echo'"),
        ({"naming": "name"}, ValueError, "naming must be 'id', 'tool' or a function.*'name'"),
        ({"timeout": 0}, ValueError, "timeout must be a finite number of seconds > 0, got 0"),
        ({"timeout": math.inf}, ValueError, "timeout must be a finite number"),
        ({"timeout": True}, ValueError, "timeout must be a finite number"),
    ],
)
def test_check_selection_refuses_a_bad_option_naming_it(options: dict[str, object], error: type, match: str) -> None:
    """Each bad option is refused at once with the rule and the value it broke."""
    with pytest.raises(error, match=match):
        check_selection(**options)  # type: ignore[arg-type]


async def test_bind_progress_binds_the_tool_name_and_keeps_the_callbacks_kind() -> None:
    """A plain callback stays plain and a coroutine function stays one; both get the tool's name first."""
    seen: list[tuple[object, ...]] = []

    def plain(tool: str, progress: float, total: float | None, message: str | None) -> None:
        seen.append((tool, progress, total, message))

    async def coroutine(tool: str, progress: float, total: float | None, message: str | None) -> None:
        seen.append(("async", tool, progress, total, message))

    relay = bind_progress(plain, "mcp__demo__sleep")
    assert not inspect.iscoroutinefunction(relay)
    relay(1.0, 10.0, "one")
    relay_async = bind_progress(coroutine, "sleep")
    assert inspect.iscoroutinefunction(relay_async)
    await relay_async(2.0, None, None)
    assert seen == [("mcp__demo__sleep", 1.0, 10.0, "one"), ("async", "sleep", 2.0, None, None)]
