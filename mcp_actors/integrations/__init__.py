"""The supervised servers as the agent frameworks' own tools and toolsets.

One module per framework, each importing its framework only when it is imported (install
the matching extra, e.g. ``pip install 'mcp-actors[pydantic-ai]'``):

* :mod:`mcp_actors.integrations.openai_agents` — OpenAI Agents SDK (``agents.mcp.MCPServer``).
* :mod:`mcp_actors.integrations.pydantic_ai` — pydantic-ai (``AbstractToolset``).
* :mod:`mcp_actors.integrations.langchain` — LangChain / LangGraph (``BaseTool``).
* :mod:`mcp_actors.integrations.llamaindex` — LlamaIndex (``FunctionTool`` / ``BaseToolSpec``).
* :mod:`mcp_actors.integrations.google_adk` — Google ADK (``BaseToolset``).
* :mod:`mcp_actors.integrations.anthropic` — Anthropic SDK tool runner (function tools).

Every module takes a *service*: the runtime's :class:`~mcp_actors.service.McpService` on
trio, or the asyncio facade (``rt.service`` of :func:`mcp_actors.asyncio.open_runtime`, or
``portal.asyncio_service()``) on asyncio, where the frameworks run. What they share — which
servers and tools, under which names, how a failure reads to the model — lives in
:mod:`mcp_actors.integrations._common`, so every framework sees the same rules: disabled
tools are hidden, the service's approver is asked, every call is bounded, progress and
cancellation cross over, and a failure names the tool, the server and what to do.
"""

from __future__ import annotations

from mcp_actors.integrations._common import SelectedTool as SelectedTool
from mcp_actors.integrations._common import ToolNaming as ToolNaming
from mcp_actors.integrations._common import ToolProgress as ToolProgress
from mcp_actors.integrations._common import ToolSelection as ToolSelection
from mcp_actors.integrations._common import bind_progress as bind_progress
from mcp_actors.integrations._common import check_selection as check_selection
from mcp_actors.integrations._common import failure_message as failure_message
from mcp_actors.integrations._common import retry_may_help as retry_may_help
from mcp_actors.integrations._common import select_tools as select_tools

__all__ = [
    "SelectedTool",
    "ToolNaming",
    "ToolProgress",
    "ToolSelection",
    "bind_progress",
    "check_selection",
    "failure_message",
    "retry_may_help",
    "select_tools",
]
