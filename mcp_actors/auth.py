"""OAuth for remote (SSE and streamable-HTTP) MCP servers: the public face.

Most hosted MCP servers require OAuth (the MCP authorization spec, revision 2025-11-25, with
the 2025-03-26 fallbacks). mcp-actors does the whole client side on the SDK's
``mcp.client.auth``: discovery, client identity (pre-registered, Client ID Metadata Document,
dynamic registration), PKCE, the ``resource`` parameter, scope selection and step-up,
refresh, the client-credentials grants, and the assertion grants (RFC 7523 JWT-bearer: an
ID-JAG from the enterprise IdP, or a workload's own token). What a host decides:

* **Who logs in.** ``open_runtime(authorization_handler=...)`` takes an
  :data:`AuthorizationHandler`, ``async (server_id, authorization_url) -> redirect_url``: the
  host shows the URL to a person and returns the URL the authorization server redirected to.
  Without one, a server that needs a login fails with :class:`AuthorizationRequired` (the
  runtime never opens a browser, and no call waits on a person); ``mcp-actors auth login``
  logs in from a terminal.
* **Who vouches for the user or the workload.** The assertion grants (enterprise-managed
  authorization with the enterprise IdP's ID token, workload identity federation with the
  platform's token) read their token from a file or a variable the record names, or ask
  ``open_runtime(assertion_handler=...)``, an :data:`AssertionHandler`,
  ``async (server_id, AssertionRequest) -> token``.
* **Where tokens live.** ``open_runtime(token_store=...)`` takes a :class:`TokenStore`:
  :class:`FileTokenStore` (the default: a 0600 JSON file in the state directory),
  :class:`MemoryTokenStore`, :class:`KeyringTokenStore` (with the ``keyring`` package), or a
  host's own SDK ``TokenStorage`` per server through :class:`CallableTokenStore`. Tokens are
  never in the config file, events, logs, reprs or errors.
* **How each server authorizes.** ``config.oauth`` (:class:`OAuthConfig`) in the server's
  record; see docs/auth.md.
"""

from __future__ import annotations

from mcp_actors._auth.assertion_grants import AssertionHandler as AssertionHandler
from mcp_actors._auth.assertion_grants import AssertionKind as AssertionKind
from mcp_actors._auth.assertion_grants import AssertionRequest as AssertionRequest
from mcp_actors._auth.oauth import DEFAULT_REDIRECT_PORT as DEFAULT_REDIRECT_PORT
from mcp_actors._auth.oauth import AuthorizationHandler as AuthorizationHandler
from mcp_actors._auth.oauth import parse_redirect as parse_redirect
from mcp_actors._auth.oauth import redirect_uri as redirect_uri
from mcp_actors._auth.token_store import CallableTokenStore as CallableTokenStore
from mcp_actors._auth.token_store import FileTokenStore as FileTokenStore
from mcp_actors._auth.token_store import KeyringTokenStore as KeyringTokenStore
from mcp_actors._auth.token_store import LoginStatus as LoginStatus
from mcp_actors._auth.token_store import MemoryTokenStore as MemoryTokenStore
from mcp_actors._auth.token_store import TokenStore as TokenStore
from mcp_actors._auth.token_store import default_token_path as default_token_path
from mcp_actors._config.record import SIGNING_ALGORITHMS as SIGNING_ALGORITHMS
from mcp_actors._config.record import DpopMode as DpopMode
from mcp_actors._config.record import OAuthConfig as OAuthConfig
from mcp_actors._config.record import OAuthGrant as OAuthGrant
from mcp_actors.errors import AuthorizationFailed as AuthorizationFailed
from mcp_actors.errors import AuthorizationRequired as AuthorizationRequired
from mcp_actors.errors import AuthorizationServerUnreachable as AuthorizationServerUnreachable
from mcp_actors.errors import IdentityProviderRefused as IdentityProviderRefused

__all__ = [
    "AssertionHandler",
    "AssertionKind",
    "AssertionRequest",
    "AuthorizationFailed",
    "AuthorizationHandler",
    "AuthorizationRequired",
    "AuthorizationServerUnreachable",
    "CallableTokenStore",
    "DEFAULT_REDIRECT_PORT",
    "DpopMode",
    "FileTokenStore",
    "IdentityProviderRefused",
    "KeyringTokenStore",
    "LoginStatus",
    "MemoryTokenStore",
    "OAuthConfig",
    "OAuthGrant",
    "SIGNING_ALGORITHMS",
    "TokenStore",
    "default_token_path",
    "parse_redirect",
    "redirect_uri",
]
