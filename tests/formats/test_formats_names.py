"""Tool names: ids that a provider would reject are refused with a clear error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcp_actors.errors import ConfigError, InvalidToolName
from mcp_actors.formats import (
    check_tool_ids,
    convert_mcp_tools_to_anthropic,
    convert_mcp_tools_to_gemini,
    convert_mcp_tools_to_openai,
    convert_tools_async,
)
from mcp_actors.tools import McpTool

CONVERTERS: list[Callable[[list[McpTool]], Any]] = [
    convert_mcp_tools_to_openai,
    convert_mcp_tools_to_anthropic,
    convert_mcp_tools_to_gemini,
]


def tool(tool_id: str, *, name: str = "read.file", server: str = "files") -> McpTool:
    return McpTool(id=tool_id, name=name, description="", input_schema={}, server_id="id-1", server_name=server)


@pytest.mark.parametrize(
    "bad_id",
    [
        "mcp__files__read.file",  # a dot
        "a" * 65,  # over 64 characters
        "9tools",  # starts with a digit
        "",  # empty
        "mcp__файлы__read",  # non-ASCII
        "read file",  # a space
        "read\n",  # a trailing newline ($ would accept it)
        "-read",  # starts with a dash
    ],
)
@pytest.mark.parametrize("convert", CONVERTERS)
def test_invalid_ids_are_refused_naming_tool_server_and_rule(
    bad_id: str, convert: Callable[[list[McpTool]], Any]
) -> None:
    """Every converter refuses an id outside the shared rule; the error names tool, server and rule."""
    with pytest.raises(InvalidToolName) as caught:
        convert([tool("ok_tool", name="other"), tool(bad_id)])
    message = str(caught.value)
    assert repr(bad_id) in message and "'read.file'" in message and "'files'" in message
    assert "^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$" in message
    assert caught.value.server == "files" and caught.value.field == "id"
    assert isinstance(caught.value, ConfigError)


@pytest.mark.parametrize("good_id", ["a", "_x", "A" * 64, "mcp__files__read_file", "x-y_z-0"])
def test_valid_ids_pass(good_id: str) -> None:
    """Ids inside the rule (up to 64 characters, letters, digits, ``_`` and ``-``) are accepted."""
    check_tool_ids([tool(good_id)])
    assert convert_mcp_tools_to_openai([tool(good_id)])[0]["function"]["name"] == good_id


def test_duplicate_ids_are_refused() -> None:
    """Two tools with one id are refused (providers reject duplicate function names)."""
    with pytest.raises(InvalidToolName, match="used twice"):
        convert_mcp_tools_to_anthropic([tool("dup", server="a"), tool("dup", server="b")])


async def test_async_conversion_refuses_invalid_ids_too() -> None:
    """The async entry point applies the same rule before any work."""
    with pytest.raises(InvalidToolName):
        await convert_tools_async([tool("bad.id")], "openai")
