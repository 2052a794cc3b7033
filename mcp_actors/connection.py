"""One server's connection: its state, its settings, and the handle callers hold.

The public face of ``mcp_actors._connection``: the names below are the documented API;
everything else there is private and may change.
"""

from __future__ import annotations

from mcp_actors._connection.handle import ConnectionHandle as ConnectionHandle
from mcp_actors._connection.status import RESOURCE_CACHE_TTL as RESOURCE_CACHE_TTL
from mcp_actors._connection.status import ConnectionSettings as ConnectionSettings
from mcp_actors._connection.status import ConnectionState as ConnectionState
from mcp_actors._connection.status import ConnectionStatus as ConnectionStatus
from mcp_actors._connection.status import ProgressCallback as ProgressCallback

__all__ = [
    "ConnectionHandle",
    "ConnectionSettings",
    "ConnectionState",
    "ConnectionStatus",
    "ProgressCallback",
    "RESOURCE_CACHE_TTL",
]
