"""Transports: stdio with our own spawn, SSE and streamable HTTP through the SDK, in-memory.

The public face of ``mcp_actors._wire.transports``: the names below are the documented API;
everything else there is private and may change.
"""

from __future__ import annotations

from mcp_actors._wire.transports import HttpParams as HttpParams
from mcp_actors._wire.transports import MemoryParams as MemoryParams
from mcp_actors._wire.transports import StdioParams as StdioParams
from mcp_actors._wire.transports import TransportLink as TransportLink
from mcp_actors._wire.transports import TransportParams as TransportParams
from mcp_actors._wire.transports import params_for_record as params_for_record
from mcp_actors._wire.transports import register_transport_kind as register_transport_kind

__all__ = [
    "HttpParams",
    "MemoryParams",
    "StdioParams",
    "TransportLink",
    "TransportParams",
    "params_for_record",
    "register_transport_kind",
]
