"""The shared rules of the framework toolsets that need no server: options, progress, which failures a retry helps."""

from __future__ import annotations

import inspect
import math

import pytest

from mcp_actors.errors import (
    ActorStopped,
    CommandNotFound,
    ConnectTimeout,
    InvalidCallInput,
    McpActorsError,
    ServerCircuitOpen,
    ServerConnectionLost,
    ServerInactive,
    ServerMessageTooLarge,
    ServerNotFound,
    ServerProtocolError,
    ServerRequestFailed,
    ServerStartFailed,
    ToolCallDenied,
    ToolCallTimeout,
    ToolDisabled,
    ToolNotFound,
)
from mcp_actors.integrations import bind_progress, check_selection, failure_message, retry_may_help


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


@pytest.mark.parametrize(
    "error",
    [
        ServerConnectionLost("connection lost", server="s"),
        ServerStartFailed("handshake failed", server="s"),
        ConnectTimeout("slow start", server="s"),
        ServerProtocolError("garbage on stdout", server="s"),
        ToolCallTimeout("too slow", server="s", tool="t", timeout=1.0),
        InvalidCallInput("arguments are not an object", server="s", tool="t", field="arguments"),
        ServerRequestFailed("invalid params", server="s", method="tools/call", code=-32602),
    ],
)
def test_a_retry_may_help_after_a_passing_or_fixable_failure(error: McpActorsError) -> None:
    """A dead connection (restarted), a timeout, refused arguments: the model may try again."""
    assert retry_may_help(error)


@pytest.mark.parametrize(
    "error",
    [
        ToolCallDenied("not approved", server="s", tool="t"),
        ToolDisabled("disabled", server="s", tool="t"),
        ToolNotFound("no such tool"),
        ServerNotFound("no such server"),
        ServerInactive("disabled server", server="s"),
        CommandNotFound("no command", server="s", command="nope"),
        ServerCircuitOpen("circuit open", server="s"),
        ServerMessageTooLarge("too large", server="s", limit=10),
        ActorStopped("the runtime is closed"),
    ],
)
def test_no_retry_helps_after_a_terminal_failure(error: McpActorsError) -> None:
    """Denied, disabled, unknown, misconfigured, circuit open, oversized, runtime closed: no retry can succeed."""
    assert not retry_may_help(error)


def test_failure_message_is_the_error_prefixed_for_a_model() -> None:
    """The text a model reads starts with 'Error: ' and carries the error's whole message."""
    assert failure_message(ToolCallDenied("tool 'x': not approved")) == "Error: tool 'x': not approved"
