"""The JSON config store: ``mcp-config.json``, which never loses a record.

The public face of ``mcp_actors._config.store``: the names below are the documented API;
everything else there is private and may change.
"""

from __future__ import annotations

from mcp_actors._config.store import CONFIG_ENV_VAR as CONFIG_ENV_VAR
from mcp_actors._config.store import CONFIG_FILE_NAME as CONFIG_FILE_NAME
from mcp_actors._config.store import ConfigFileLocked as ConfigFileLocked
from mcp_actors._config.store import ConfigStore as ConfigStore
from mcp_actors._config.store import default_config_path as default_config_path
from mcp_actors._config.store import resolve_config_path as resolve_config_path

__all__ = [
    "CONFIG_ENV_VAR",
    "CONFIG_FILE_NAME",
    "ConfigFileLocked",
    "ConfigStore",
    "default_config_path",
    "resolve_config_path",
]
