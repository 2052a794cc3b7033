"""``mcp-actors serve``: every enabled server of a runtime, served as one MCP server (a gateway).

Clients connect to one endpoint and see the tools, prompts, resources and resource
templates of every enabled server, named ``<server>__<name>`` (tools and prompts; resources
keep their URIs). The runtime's :class:`~mcp_actors.service.McpService` is the one source:
supervision, restarts, timeouts and kill-on-exit are the runtime's, and a server that is
down costs only its own tools. See docs/gateway.md.

::

    async with open_runtime() as runtime, trio.open_nursery() as nursery:
        gateway = await nursery.start(serve_http, runtime.service)
        print(gateway.url)            # http://127.0.0.1:<port>/mcp

Modules: ``_serve.py`` (running a gateway), ``_gateway.py`` (the transport-free core:
requests answered from the service, names, list changes), ``_streamable.py`` (the
streamable-HTTP front: 2025 sessions, 2026-07-28 single requests), ``_stdio.py`` (the stdio
front), ``_http.py`` (HTTP/1.1 server side, bounded), ``_names.py`` (public names and URIs),
``_profiles.py`` (profiles: a view of the core at ``/mcp/<profile>``), ``_reload.py`` (the config
file followed while serving), ``_authn.py`` (inbound authentication: the front's one hook), ``_auth_keys.py`` (API keys,
stored as digests), ``_auth_oauth.py`` (OAuth access tokens checked against the issuer's JWKS),
``_sessions.py`` (signed session ids: any replica continues a session), ``_store.py`` (what
replicas share: ended sessions, OAuth tokens, API keys; in memory or Redis),
``_ops.py`` (health, metrics and tracing fitted to an HTTP gateway: ``_health.py``,
``_metrics.py``, ``_tracing.py``).
"""

from __future__ import annotations

from mcp_actors.serve._auth_keys import ApiKey as ApiKey
from mcp_actors.serve._auth_keys import ApiKeyTable as ApiKeyTable
from mcp_actors.serve._auth_keys import FileApiKeyTable as FileApiKeyTable
from mcp_actors.serve._auth_keys import MemoryApiKeyTable as MemoryApiKeyTable
from mcp_actors.serve._auth_keys import create_api_key as create_api_key
from mcp_actors.serve._auth_oauth import OAuthSettings as OAuthSettings
from mcp_actors.serve._authn import GatewayAuth as GatewayAuth
from mcp_actors.serve._authn import Principal as Principal
from mcp_actors.serve._gateway import DEFAULT_LIST_TIMEOUT as DEFAULT_LIST_TIMEOUT
from mcp_actors.serve._gateway import Gateway as Gateway
from mcp_actors.serve._http import HttpLimits as HttpLimits
from mcp_actors.serve._metrics import MetricsUnavailable as MetricsUnavailable
from mcp_actors.serve._names import Joined as Joined
from mcp_actors.serve._names import Naming as Naming
from mcp_actors.serve._serve import HttpGateway as HttpGateway
from mcp_actors.serve._serve import serve_http as serve_http
from mcp_actors.serve._serve import serve_stdio as serve_stdio
from mcp_actors.serve._sessions import SessionBook as SessionBook
from mcp_actors.serve._sessions import SessionKeys as SessionKeys
from mcp_actors.serve._sessions import SessionState as SessionState
from mcp_actors.serve._store import GatewayStore as GatewayStore
from mcp_actors.serve._store import MemoryGatewayStore as MemoryGatewayStore
from mcp_actors.serve._store import RedisGatewayStore as RedisGatewayStore
from mcp_actors.serve._streamable import DEFAULT_GRACE as DEFAULT_GRACE

__all__ = [
    "ApiKey",
    "ApiKeyTable",
    "DEFAULT_GRACE",
    "DEFAULT_LIST_TIMEOUT",
    "FileApiKeyTable",
    "Gateway",
    "GatewayAuth",
    "GatewayStore",
    "HttpGateway",
    "HttpLimits",
    "Joined",
    "MemoryApiKeyTable",
    "MemoryGatewayStore",
    "MetricsUnavailable",
    "Naming",
    "OAuthSettings",
    "Principal",
    "RedisGatewayStore",
    "SessionBook",
    "SessionKeys",
    "SessionState",
    "create_api_key",
    "serve_http",
    "serve_stdio",
]
