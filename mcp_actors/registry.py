"""The registry: :class:`McpService` and its result types, re-exported from their homes.

The facade and its values live in :mod:`mcp_actors.service`; the actor behind it in the
private ``mcp_actors._registry``. This module keeps ``from mcp_actors.registry import ...``
working for existing code.
"""

from __future__ import annotations

from mcp_actors._registry import DEFAULT_TOOL_CACHE_TTL as DEFAULT_TOOL_CACHE_TTL
from mcp_actors._registry import run_registry as run_registry
from mcp_actors._registry import settings_for as settings_for
from mcp_actors.service import AddJsonEntryResult as AddJsonEntryResult
from mcp_actors.service import ApprovalRequest as ApprovalRequest
from mcp_actors.service import Approver as Approver
from mcp_actors.service import Discovery as Discovery
from mcp_actors.service import McpService as McpService
from mcp_actors.service import ServerTestResult as ServerTestResult
from mcp_actors.service import ToolListing as ToolListing

__all__ = [
    "AddJsonEntryResult",
    "ApprovalRequest",
    "Approver",
    "Discovery",
    "McpService",
    "ServerTestResult",
    "ToolListing",
    "run_registry",
    "settings_for",
]
