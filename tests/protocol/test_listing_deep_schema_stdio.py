"""Over stdio, a tool whose inputSchema nests past the SDK's serialization depth costs only itself."""

from __future__ import annotations

import sys

import pytest
import trio
from testkit import running, text_of

from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._wire.transports import StdioParams

DEPTH = 200
"""Past pydantic's serialization depth (about 128 nested schemas in a ``tools/list`` result)."""


def deep_settings(depth: int) -> ConnectionSettings:
    """The hostile deep-schema server over stdio, no pings, generous timeouts."""
    argv = (sys.executable, "-m", "mcp_actors.testing.hostile.deep_schema_tool", str(depth))
    return ConnectionSettings(
        server_id="id-deep",
        server_name="deep",
        transport=StdioParams(command=argv[0], args=argv[1:], close_grace=2.0, term_grace=1.0),
        connect_timeout=20.0,
        call_timeout=30.0,
        ping_interval=0,
    )


async def test_a_tool_nested_too_deep_is_set_aside_and_its_siblings_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``deep`` is left out with a warning naming it and the reason; ``echo`` is listed and answers."""
    async with running(deep_settings(DEPTH)) as ([handle], _):
        with trio.fail_after(30):
            tools = await handle.list_tools()
            assert [tool.name for tool in tools] == ["echo"]
            assert text_of(await handle.call_tool("echo", {"text": "sibling"})) == "sibling"
    left_out = [r.getMessage() for r in caplog.records if "left out of the listing" in r.getMessage()]
    assert len(left_out) == 1, left_out
    assert "server 'deep'" in left_out[0] and "tool 'deep'" in left_out[0]
    # Each level is a schema and its "properties" object; the string schema at the bottom is one more.
    assert f"nested too deep ({2 * DEPTH + 1} levels of JSON objects and arrays)" in left_out[0]
