"""Import MCP server configs written for desktop apps and IDEs (pure: text in, records out).

The public face of ``mcp_actors._config.host_import``: the names below are the documented API;
everything else there is private and may change.
"""

from __future__ import annotations

from mcp_actors._config.host_import import AddJsonEntryResult as AddJsonEntryResult
from mcp_actors._config.host_import import ImportFormat as ImportFormat
from mcp_actors._config.host_import import ImportInput as ImportInput
from mcp_actors._config.host_import import ImportReport as ImportReport
from mcp_actors._config.host_import import declared_inputs as declared_inputs
from mcp_actors._config.host_import import parse_server_configs as parse_server_configs
from mcp_actors._config.host_import import read_server_configs as read_server_configs
from mcp_actors._config.host_import import substitute_import_variables as substitute_import_variables

__all__ = [
    "AddJsonEntryResult",
    "ImportFormat",
    "ImportInput",
    "ImportReport",
    "declared_inputs",
    "parse_server_configs",
    "read_server_configs",
    "substitute_import_variables",
]
