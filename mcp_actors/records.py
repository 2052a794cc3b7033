"""Server records, their connection configs, and their on-disk (camelCase JSON) form.

The public face of ``mcp_actors._config.record``: the names below are the documented API;
everything else there is private and may change.
"""

from __future__ import annotations

from mcp_actors._config.codec import CONFIG_KEYS as CONFIG_KEYS
from mcp_actors._config.codec import RECORD_KEYS as RECORD_KEYS
from mcp_actors._config.codec import converter as converter
from mcp_actors._config.codec import document_from_records as document_from_records
from mcp_actors._config.codec import record_from_json_dict as record_from_json_dict
from mcp_actors._config.codec import record_to_json_dict as record_to_json_dict
from mcp_actors._config.codec import records_from_document as records_from_document
from mcp_actors._config.record import DEFAULT_CALL_TIMEOUT as DEFAULT_CALL_TIMEOUT
from mcp_actors._config.record import DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from mcp_actors._config.record import DEFAULT_MAX_SERVER_REQUESTS as DEFAULT_MAX_SERVER_REQUESTS
from mcp_actors._config.record import DEFAULT_MAX_TOTAL_TIMEOUT as DEFAULT_MAX_TOTAL_TIMEOUT
from mcp_actors._config.record import DEFAULT_PING_INTERVAL as DEFAULT_PING_INTERVAL
from mcp_actors._config.record import DEMO_SERVER_ID as DEMO_SERVER_ID
from mcp_actors._config.record import DOCUMENT_VERSION as DOCUMENT_VERSION
from mcp_actors._config.record import LOG_LEVELS as LOG_LEVELS
from mcp_actors._config.record import DpopMode as DpopMode
from mcp_actors._config.record import InstallSource as InstallSource
from mcp_actors._config.record import McpServerRecord as McpServerRecord
from mcp_actors._config.record import OAuthConfig as OAuthConfig
from mcp_actors._config.record import OAuthGrant as OAuthGrant
from mcp_actors._config.record import Scope as Scope
from mcp_actors._config.record import SecretMap as SecretMap
from mcp_actors._config.record import ServerConfig as ServerConfig
from mcp_actors._config.record import ServerType as ServerType
from mcp_actors._config.record import builtin_demo_record as builtin_demo_record
from mcp_actors._config.record import check_name_free as check_name_free
from mcp_actors._config.record import check_record_set as check_record_set
from mcp_actors._config.record import first_name_clash as first_name_clash
from mcp_actors._config.record import new_server_id as new_server_id
from mcp_actors._config.record import redact_url as redact_url

__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_SERVER_REQUESTS",
    "DEFAULT_MAX_TOTAL_TIMEOUT",
    "DEFAULT_PING_INTERVAL",
    "DEMO_SERVER_ID",
    "DOCUMENT_VERSION",
    "DpopMode",
    "InstallSource",
    "LOG_LEVELS",
    "McpServerRecord",
    "OAuthConfig",
    "OAuthGrant",
    "RECORD_KEYS",
    "Scope",
    "SecretMap",
    "ServerConfig",
    "ServerType",
    "builtin_demo_record",
    "check_name_free",
    "check_record_set",
    "document_from_records",
    "first_name_clash",
    "new_server_id",
    "record_from_json_dict",
    "record_to_json_dict",
    "records_from_document",
    "redact_url",
]
