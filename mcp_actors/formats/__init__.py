"""Provider tool formats: MCP tool schemas to OpenAI, Anthropic and Gemini definitions.

Dicts in, dicts out, no I/O (except :func:`fetch_mcp_tools` / :func:`setup_mcp_tools`,
which ask the registry). Every converter accepts any schema a real server sends, makes
it valid for the provider, loses as little as it can, and says what it changed: the
``*_with_report`` variants return a list of :class:`ConversionNote` beside the
definitions.
"""

from ._convert import GEMINI_MAX_DECLARATIONS as GEMINI_MAX_DECLARATIONS
from ._convert import ApiFormat as ApiFormat
from ._convert import OpenAIApi as OpenAIApi
from ._convert import convert_mcp_tools_to_anthropic as convert_mcp_tools_to_anthropic
from ._convert import convert_mcp_tools_to_anthropic_with_report as convert_mcp_tools_to_anthropic_with_report
from ._convert import convert_mcp_tools_to_gemini as convert_mcp_tools_to_gemini
from ._convert import convert_mcp_tools_to_gemini_with_report as convert_mcp_tools_to_gemini_with_report
from ._convert import convert_mcp_tools_to_openai as convert_mcp_tools_to_openai
from ._convert import convert_mcp_tools_to_openai_with_report as convert_mcp_tools_to_openai_with_report
from ._convert import convert_tools as convert_tools
from ._convert import convert_tools_async as convert_tools_async
from ._convert import convert_tools_async_with_report as convert_tools_async_with_report
from ._convert import convert_tools_with_report as convert_tools_with_report
from ._convert import process_json_schema as process_json_schema
from ._loader import McpToolsConfig as McpToolsConfig
from ._loader import McpToolSource as McpToolSource
from ._loader import ToolsMode as ToolsMode
from ._loader import fetch_mcp_tools as fetch_mcp_tools
from ._loader import setup_mcp_tools as setup_mcp_tools
from ._names import TOOL_NAME_PATTERN as TOOL_NAME_PATTERN
from ._names import check_tool_ids as check_tool_ids
from ._report import ConversionNote as ConversionNote
from ._report import NoteAction as NoteAction

__all__ = [
    "ApiFormat",
    "ConversionNote",
    "GEMINI_MAX_DECLARATIONS",
    "McpToolSource",
    "McpToolsConfig",
    "NoteAction",
    "OpenAIApi",
    "TOOL_NAME_PATTERN",
    "ToolsMode",
    "check_tool_ids",
    "convert_mcp_tools_to_anthropic",
    "convert_mcp_tools_to_anthropic_with_report",
    "convert_mcp_tools_to_gemini",
    "convert_mcp_tools_to_gemini_with_report",
    "convert_mcp_tools_to_openai",
    "convert_mcp_tools_to_openai_with_report",
    "convert_tools",
    "convert_tools_async",
    "convert_tools_async_with_report",
    "convert_tools_with_report",
    "fetch_mcp_tools",
    "process_json_schema",
    "setup_mcp_tools",
]
