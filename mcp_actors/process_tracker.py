"""Track every stdio server process, and make sure none outlives its host.

The public face of ``mcp_actors._process.tracker``: the names below are the documented API;
everything else there is private and may change.
"""

from __future__ import annotations

from mcp_actors._process.tracker import STATE_DIR_ENV as STATE_DIR_ENV
from mcp_actors._process.tracker import ProcessIdentity as ProcessIdentity
from mcp_actors._process.tracker import ProcessTracker as ProcessTracker
from mcp_actors._process.tracker import TrackedConnection as TrackedConnection
from mcp_actors._process.tracker import kill_process_tree as kill_process_tree

__all__ = [
    "ProcessIdentity",
    "ProcessTracker",
    "STATE_DIR_ENV",
    "TrackedConnection",
    "kill_process_tree",
]
