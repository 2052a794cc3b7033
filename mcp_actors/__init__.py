"""mcp-actors: a trio supervisor tree for many MCP servers at once.

The public names below are imported lazily (PEP 562), so that ``python -m
mcp_actors.demo_server`` and the fault server — which every test spawns — do not pay for
the runtime's imports at start-up.

Start here:

* :func:`open_runtime` (trio), :func:`mcp_actors.asyncio.open_runtime` (asyncio) or
  :func:`start_portal` (sync hosts);
* :class:`McpService` — add servers, list tools, call tools, events;
* :mod:`mcp_actors.formats` — tool definitions for OpenAI, Anthropic and Gemini;
* :mod:`mcp_actors.adapters` — tools for agent engines;
* :mod:`mcp_actors.errors` — every error a user can hit.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

__all__ = [
    "ConnectionState",
    "ConnectionStatus",
    "Event",
    "EventBus",
    "McpServerRecord",
    "McpService",
    "McpTool",
    "Runtime",
    "ServerConfig",
    "ServerType",
    "errors",
    "open_runtime",
    "start_portal",
]

__version__ = "0.1.0"
"""This package's version (PEP 440); the one place it is written (pyproject reads it from here)."""

# A library never decides where its logs go: without a handler anywhere up the tree, Python's
# "last resort" handler would print every WARNING (a crashing server's restarts, say) to the
# stderr of a host that never configured logging. The host's own configuration (basicConfig,
# dictConfig, a root handler) still sees everything. ``supervisors`` is our own engine and
# logs each restart, so it is silenced the same way.
for _name in ("mcp_actors", "supervisors"):
    _logger = logging.getLogger(_name)
    if not any(isinstance(handler, logging.NullHandler) for handler in _logger.handlers):
        _logger.addHandler(logging.NullHandler())
del _name, _logger

_LAZY = {
    "ConnectionState": "mcp_actors.connection",
    "ConnectionStatus": "mcp_actors.connection",
    "Event": "mcp_actors.events",
    "EventBus": "mcp_actors.events",
    "McpTool": "mcp_actors.tools",
    "McpServerRecord": "mcp_actors.records",
    "McpService": "mcp_actors.service",
    "Runtime": "mcp_actors.runtime",
    "ServerConfig": "mcp_actors.records",
    "ServerType": "mcp_actors.records",
    "open_runtime": "mcp_actors.runtime",
    "start_portal": "mcp_actors.portal",
}

if TYPE_CHECKING:
    from mcp_actors import errors as errors
    from mcp_actors.connection import ConnectionState as ConnectionState
    from mcp_actors.connection import ConnectionStatus as ConnectionStatus
    from mcp_actors.events import Event as Event
    from mcp_actors.events import EventBus as EventBus
    from mcp_actors.portal import start_portal as start_portal
    from mcp_actors.records import McpServerRecord as McpServerRecord
    from mcp_actors.records import ServerConfig as ServerConfig
    from mcp_actors.records import ServerType as ServerType
    from mcp_actors.runtime import Runtime as Runtime
    from mcp_actors.runtime import open_runtime as open_runtime
    from mcp_actors.service import McpService as McpService
    from mcp_actors.tools import McpTool as McpTool


def __getattr__(name: str) -> Any:
    if name == "errors":
        return importlib.import_module("mcp_actors.errors")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_actors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
