"""The tool-name rule shared by OpenAI, Anthropic and Gemini."""

from __future__ import annotations

import re
from collections.abc import Iterable

from mcp_actors.errors import InvalidToolName
from mcp_actors.tools import McpTool

__all__ = ["TOOL_NAME_PATTERN", "check_tool_ids"]

TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,63}")
"""The intersection of the three providers' function-name rules.

OpenAI allows ``^[a-zA-Z0-9_-]{1,64}$``, Anthropic ``^[a-zA-Z0-9_-]{1,64}$``, Gemini
must start with a letter or an underscore and allows dots and colons. The registry
builds every tool id inside this pattern; it is matched with ``fullmatch``.
"""


def check_tool_ids(tools: Iterable[McpTool]) -> None:
    """Refuse tool ids that a provider would reject, before anything is sent.

    The registry's ids already satisfy the rule, so a failure here means the tools
    did not come from the registry (or were edited): the fix is at their source, not
    in the converter, which never renames (the model would call a name nobody knows).

    Args:
        tools: The tools about to be converted.

    Raises:
        InvalidToolName: An id does not match :data:`TOOL_NAME_PATTERN`, or two tools
            share an id.
    """
    seen: dict[str, McpTool] = {}
    for tool in tools:
        tool_id = tool.id
        if not isinstance(tool_id, str) or TOOL_NAME_PATTERN.fullmatch(tool_id) is None:
            raise InvalidToolName(
                f"tool id {tool_id!r} (tool {tool.name!r} of server {tool.server_name!r}) "
                f"does not match ^[a-zA-Z_][a-zA-Z0-9_-]{{0,63}}$, which OpenAI, Anthropic "
                "and Gemini all require; take the tools from the registry, whose ids "
                "satisfy the rule, or give the tool a conforming id",
                server=tool.server_name,
                field="id",
            )
        other = seen.get(tool_id)
        if other is not None:
            raise InvalidToolName(
                f"tool id {tool_id!r} is used twice (tool {other.name!r} of server "
                f"{other.server_name!r} and tool {tool.name!r} of server "
                f"{tool.server_name!r}); providers reject duplicate function names, so "
                "every tool id must be unique: take the tools from one registry, which "
                "keeps ids unique, or drop one of them",
                server=tool.server_name,
                field="id",
            )
        seen[tool_id] = tool
