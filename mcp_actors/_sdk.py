"""The SDK's private parts we use, in one place.

The ``mcp`` SDK marks some of what we need as private: modules whose names start with an
underscore (``mcp.client._probe``) and attributes of public classes (``MCPServer._lowlevel_server``).
They may move or change in any release, so this is the one module of the product that touches
them; every other module imports the names below. ``tests/test_sdk_private.py`` checks each one
against the installed SDK (that it exists, with the parameters and attributes we rely on) and
fails naming the name and the SDK version, and it fails too when a module other than this one
imports a private SDK module. ``pyproject.toml`` pins ``mcp`` to the minor versions that test
passes on.

Each name says what we use it for and which public alternative the SDK lacks.

Besides the names here, ``mcp_actors._auth.oauth`` and ``mcp_actors._auth.assertion_grants``
override hooks of the SDK's OAuth providers (:data:`OAUTH_PROVIDER_HOOKS`,
:data:`OAUTH_PROVIDER_HOOKS_WITH_ARGUMENTS`): a subclass cannot take those from a module, so they
are listed here and checked by the same test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from mcp.client._input_required import InputRequiredRoundsExceededError as InputRequiredRoundsExceededError
from mcp.client._input_required import run_input_required_driver as run_input_required_driver
from mcp.client._probe import negotiate_auto as negotiate_auto
from mcp.shared._request_clock import request_clock as request_clock

if TYPE_CHECKING:
    import mcp_types
    from mcp import ClientSession
    from mcp.client.auth import OAuthClientProvider
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

__all__ = [
    "OAUTH_PROVIDER_HOOKS",
    "OAUTH_PROVIDER_HOOKS_WITH_ARGUMENTS",
    "InputRequiredRoundsExceededError",
    "absorb_tool_listing",
    "initialize_provider",
    "lowlevel_server",
    "negotiate_auto",
    "provider_initialized",
    "registered_tools",
    "remove_resource",
    "request_clock",
    "run_input_required_driver",
]

# The re-exports above, one by one (a docstring cannot follow an import):
#
# InputRequiredRoundsExceededError (mcp.client._input_required): what the driver raises when a
#     server keeps answering InputRequiredResult; the connection handle turns it into our error.
#     Public alternative missing: only ``Client`` drives the loop publicly, and we drive our own
#     ``ClientSession``.
# run_input_required_driver (mcp.client._input_required): the SEP-2322 multi-round-trip loop
#     (fulfil the input requests, retry with the responses) for tools/call, prompts/get and
#     resources/read. Public alternative missing: as above, ``Client`` only.
# negotiate_auto (mcp.client._probe): the ``auto`` revision negotiation (``server/discover``
#     first, the handshake as fallback) on our own session. Public alternative missing:
#     ``Client(mode="auto")`` only, which builds its own session and dispatcher.
# request_clock (mcp.shared._request_clock): a request's timeout clock, which the OAuth flow
#     pauses while a person answers a login; our dispatcher puts one around every request as
#     the SDK's own dispatcher does. Public alternative missing: the clock is the SDK's internal
#     contract between its dispatcher and its auth flow.

OAUTH_PROVIDER_HOOKS: Final[dict[str, tuple[str, ...]]] = {
    "OAuthClientProvider": ("_initialize", "_perform_authorization", "_refresh_token"),
    "ClientCredentialsOAuthProvider": ("_exchange_token_client_credentials",),
}
"""The private coroutine methods (no arguments but ``self``) our OAuth providers override.

Used by ``mcp_actors._auth.oauth``: a configured client id wins over a stored registration
(``_initialize``), configured scopes and the client-secret method are applied before a grant
(``_perform_authorization``, ``_refresh_token``, ``_exchange_token_client_credentials``).
``mcp_actors._auth.assertion_grants`` overrides the first three for the JWT-bearer grants: the
configured client with no registration, the assertion fetched for each token request.
Public alternative missing: the providers take no client-information, scope or token-endpoint
auth-method callbacks.
"""

OAUTH_PROVIDER_HOOKS_WITH_ARGUMENTS: Final[dict[str, tuple[tuple[str, ...], bool]]] = {
    "_handle_token_response": (("self", "response"), True),
    "_select_authorization_server": (("self", "advertised"), False),
}
"""Further ``OAuthClientProvider`` hooks we override: name -> (parameters, whether a coroutine).

Used by ``mcp_actors._auth.assertion_grants``: a refused JWT-bearer grant becomes one typed
error naming the assertion's source, and a refresh token a client without an id cannot use is
not kept (``_handle_token_response``); a configured issuer decides which advertised
authorization server is used (``_select_authorization_server``, as the SDK's own
client-credentials providers do). Public alternative missing: as above.
"""


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """The low-level ``Server`` under an ``MCPServer`` (its ``_lowlevel_server``).

    Used to serve an ``MCPServer`` in process (the SDK's own in-memory transport unwraps it the
    same way), and by the demo and test servers to register handlers the decorators lack
    (resource subscriptions, tasks, notifications) and to wrap ``run``. Public alternative
    missing: ``MCPServer`` has no accessor for it.
    """
    return server._lowlevel_server


def registered_tools(server: MCPServer[Any]) -> list[Tool]:
    """The tools registered on an ``MCPServer``, as its tool manager holds them (function and all).

    Used by the in-memory test servers to run synchronous tools on the event loop. Public
    alternative missing: ``MCPServer.list_tools`` answers protocol ``Tool`` values, without
    the function.
    """
    return server._tool_manager.list_tools()


def remove_resource(server: MCPServer[Any], uri: str) -> None:
    """Remove a fixed resource from an ``MCPServer``; nothing if it is not there.

    Used by the demo server's ``toggle_extra_resource``. Public alternative missing:
    ``MCPServer`` has ``remove_tool`` and ``remove_prompt``, no ``remove_resource``.
    """
    server._resource_manager._resources.pop(uri, None)


def absorb_tool_listing(
    session: ClientSession,
) -> Callable[..., mcp_types.ListToolsResult] | None:
    """The session's ``_absorb_tool_listing(result, *, complete)``, or None on an SDK without it.

    Used when we fetch a tools listing ourselves (leaving out the tools that fail validation
    instead of failing the whole listing): the session must still absorb the kept tools
    (2026-07-28 header maps, output-schema validators), as its own ``list_tools`` does.
    Public alternative missing: only ``list_tools`` absorbs, and it rejects a listing with one
    bad tool.
    """
    absorb: Callable[..., mcp_types.ListToolsResult] | None = getattr(session, "_absorb_tool_listing", None)
    return absorb


def provider_initialized(provider: OAuthClientProvider) -> bool:
    """Whether an OAuth provider has loaded its stored tokens and client (its ``_initialized``).

    Used by our auth flow to send a fresh token without the provider's lock. Public alternative
    missing: the provider loads lazily inside its own flow and does not say whether it did.
    """
    return bool(getattr(provider, "_initialized", False))


async def initialize_provider(provider: OAuthClientProvider) -> None:
    """Load an OAuth provider's stored tokens and client (its ``_initialize()``).

    Used by our auth flow before it reads the tokens itself. Public alternative missing: as for
    :func:`provider_initialized`.
    """
    await provider._initialize()
