"""A ``ClientSession``-shaped view of one supervised server, for libraries that take an SDK session.

Many libraries accept an ``mcp.ClientSession`` and call ``list_tools``, ``call_tool``,
``read_resource`` ... on it (Anthropic's ``anthropic.lib.tools.mcp`` helpers, LlamaIndex's
``McpToolSpec``). :class:`ServerSession` gives them one server of the runtime with the
signatures of the SDK's ``ClientSession`` (mcp 2.3) and its result types (``mcp.types``),
while the runtime keeps the connection: its process, its one handshake, restarts, timeouts,
approval, the tool cache and ``disabledTools``.

What differs from a session of one's own, on purpose:

* ``initialize()`` never handshakes again: it returns the handshake answer of the
  runtime's connection (connecting first if needed).
* Listings come in one page: every item, ``next_cursor`` ``None``.
* Errors are the runtime's typed errors (:mod:`mcp_actors.errors`), a server's JSON-RPC
  error included (``ServerRequestFailed``), not ``mcp.MCPError``; a tool's own failure is
  a result with ``is_error``, as with the SDK.
* A server that asks for input mid-request (2026-07-28) is answered by the runtime's host
  callbacks; no ``InputRequiredResult`` is ever returned.
* Entering or leaving it (``async with``) opens and closes nothing: the runtime owns the
  connection until the runtime closes.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp.types as mcp_types

if TYPE_CHECKING:
    from mcp_actors._hosts.facade import AsyncioMcpService

__all__ = ["ServerSession"]


def _one_page(cursor: str | None, params: mcp_types.PaginatedRequestParams | None, what: str) -> None:
    if cursor is None and params is not None:
        cursor = params.cursor
    if cursor is not None:
        raise ValueError(
            f"{what}: this session gives every item in the first page (next_cursor is None), so there is no"
            f" cursor to continue from; got {cursor!r}"
        )


def _no_input_answers(input_responses: object, request_state: object, what: str) -> None:
    if input_responses is not None or request_state is not None:
        raise ValueError(
            f"{what}: the runtime answers a server's input requests through its host callbacks and never returns"
            " an InputRequiredResult, so there are no input_responses or request_state to send back"
        )


def _seconds(value: float | datetime.timedelta | None) -> float | None:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return value


class ServerSession:
    """One server of the runtime with the methods and results of the SDK's ``ClientSession``.

    Get it with ``rt.session(server)`` (or ``service.session(server)``); it is a light view:
    make as many as you like. It runs where its facade runs (a guest runtime's only on its
    own loop). The properties that ``ClientSession`` fills at ``initialize()``
    (``initialize_result``, ``server_info``, ``server_capabilities``, ``instructions``,
    ``protocol_version``) are ``None`` until :meth:`initialize` has been awaited on this view.
    """

    def __init__(self, service: AsyncioMcpService, server: str) -> None:
        self._service = service
        self._server = server
        self._initialize_result: mcp_types.InitializeResult | None = None

    def __repr__(self) -> str:
        return f"ServerSession(server={self._server!r})"

    @property
    def server(self) -> str:
        """The server's id or name, as given."""
        return self._server

    async def __aenter__(self) -> ServerSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    # ---------------------------------------------------------- the handshake

    async def initialize(self) -> mcp_types.InitializeResult:
        """The server's handshake answer on the runtime's connection (connecting first if needed).

        Never a second handshake: the connection made its own when it connected.

        Raises:
            ServerNotFound, ServerInactive, ConnectionFailed: As the names say.
        """
        result = await self._service.initialize_result(self._server)
        self._initialize_result = result
        return result

    @property
    def initialize_result(self) -> mcp_types.InitializeResult | None:
        """The handshake answer, once :meth:`initialize` was awaited."""
        return self._initialize_result

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol version, once :meth:`initialize` was awaited."""
        result = self._initialize_result
        return result.protocol_version if result is not None else None

    @property
    def server_info(self) -> mcp_types.Implementation | None:
        """The server's name and version, once :meth:`initialize` was awaited."""
        result = self._initialize_result
        return result.server_info if result is not None else None

    @property
    def server_capabilities(self) -> mcp_types.ServerCapabilities | None:
        """The server's capabilities, once :meth:`initialize` was awaited."""
        result = self._initialize_result
        return result.capabilities if result is not None else None

    @property
    def instructions(self) -> str | None:
        """The server's instructions, once :meth:`initialize` was awaited (``None`` when it gave none)."""
        result = self._initialize_result
        return result.instructions if result is not None else None

    async def send_ping(self, *, meta: mcp_types.RequestParamsMeta | None = None) -> mcp_types.EmptyResult:
        """Ping the server now (see :meth:`~mcp_actors.service.McpService.health`); an empty result."""
        await self._service.health(self._server)
        return mcp_types.EmptyResult()

    # ---------------------------------------------------------- tools

    async def list_tools(
        self, cursor: str | None = None, *, params: mcp_types.PaginatedRequestParams | None = None
    ) -> mcp_types.ListToolsResult:
        """The server's tools (``disabledTools`` left out), all in one page.

        Raises:
            ValueError: A cursor was given (there is never a next page).
        """
        _one_page(cursor, params, "list_tools")
        return mcp_types.ListToolsResult(tools=await self._service.list_tool_definitions(self._server))

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | datetime.timedelta | None = None,
        progress_callback: Any = None,
        *,
        input_responses: mcp_types.InputResponses | None = None,
        request_state: str | None = None,
        meta: mcp_types.RequestParamsMeta | None = None,
        allow_input_required: bool = False,
        allow_claimed: bool = False,
    ) -> mcp_types.CallToolResult:
        """Call a tool through the runtime: approval, timeouts, cancellation, ``tool:called`` events.

        Args:
            name: The tool's name on the server.
            arguments: Its arguments.
            read_timeout_seconds: The call's timeout (seconds or a ``timedelta``); default
                the server's configured call timeout.
            progress_callback: ``async (progress, total, message)`` (a plain function too),
                run on this loop for each progress notification.
            input_responses: Not used: the runtime answers input requests itself (must be ``None``).
            request_state: Not used, as ``input_responses``.
            meta: The request's ``_meta``.
            allow_input_required: Accepted for the SDK's signature; no ``InputRequiredResult`` is returned.
            allow_claimed: Accepted for the SDK's signature; the result is always a ``CallToolResult``.

        Raises:
            ToolCallTimeout, ToolCallDenied, ToolDisabled, ConnectionFailed, ...: The runtime's
                typed errors (see :meth:`~mcp_actors.service.McpService.call_tool`).
            ValueError: ``input_responses`` or ``request_state`` was given.
        """
        _no_input_answers(input_responses, request_state, "call_tool")
        return await self._service.call_tool(
            self._server,
            name,
            arguments,
            timeout=_seconds(read_timeout_seconds),
            on_progress=progress_callback,
            meta=meta,
        )

    # ---------------------------------------------------------- resources

    async def list_resources(
        self, cursor: str | None = None, *, params: mcp_types.PaginatedRequestParams | None = None
    ) -> mcp_types.ListResourcesResult:
        """The server's resources, all in one page (the runtime's cached listing)."""
        _one_page(cursor, params, "list_resources")
        return mcp_types.ListResourcesResult(resources=await self._service.list_resources(self._server))

    async def list_resource_templates(
        self, cursor: str | None = None, *, params: mcp_types.PaginatedRequestParams | None = None
    ) -> mcp_types.ListResourceTemplatesResult:
        """The server's resource templates, all in one page."""
        _one_page(cursor, params, "list_resource_templates")
        templates = await self._service.list_resource_templates(self._server)
        return mcp_types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(
        self,
        uri: Any,
        *,
        input_responses: mcp_types.InputResponses | None = None,
        request_state: str | None = None,
        meta: mcp_types.RequestParamsMeta | None = None,
        allow_input_required: bool = False,
    ) -> mcp_types.ReadResourceResult:
        """Read one resource; ``uri`` a string or a URL object (``str(uri)`` is sent).

        Raises:
            ServerRequestFailed: The server refused (an unknown URI): its JSON-RPC error.
            ValueError: ``input_responses`` or ``request_state`` was given.
        """
        _no_input_answers(input_responses, request_state, "read_resource")
        return await self._service.read_resource(self._server, str(uri))

    async def subscribe_resource(
        self, uri: Any, *, meta: mcp_types.RequestParamsMeta | None = None
    ) -> mcp_types.EmptyResult:
        """Subscribe to ``uri``; updates arrive as ``resource:updated`` events of the runtime."""
        await self._service.subscribe_resource(self._server, str(uri))
        return mcp_types.EmptyResult()

    async def unsubscribe_resource(
        self, uri: Any, *, meta: mcp_types.RequestParamsMeta | None = None
    ) -> mcp_types.EmptyResult:
        """End a subscription made with :meth:`subscribe_resource`."""
        await self._service.unsubscribe_resource(self._server, str(uri))
        return mcp_types.EmptyResult()

    # ---------------------------------------------------------- prompts, completion, logging

    async def list_prompts(
        self, cursor: str | None = None, *, params: mcp_types.PaginatedRequestParams | None = None
    ) -> mcp_types.ListPromptsResult:
        """The server's prompts, all in one page."""
        _one_page(cursor, params, "list_prompts")
        return mcp_types.ListPromptsResult(prompts=await self._service.list_prompts(self._server))

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        *,
        input_responses: mcp_types.InputResponses | None = None,
        request_state: str | None = None,
        meta: mcp_types.RequestParamsMeta | None = None,
        allow_input_required: bool = False,
    ) -> mcp_types.GetPromptResult:
        """One prompt rendered with ``arguments``.

        Raises:
            ServerRequestFailed: The server refused (an unknown prompt, a missing argument).
            ValueError: ``input_responses`` or ``request_state`` was given.
        """
        _no_input_answers(input_responses, request_state, "get_prompt")
        return await self._service.get_prompt(self._server, name, arguments)

    async def complete(
        self,
        ref: mcp_types.ResourceTemplateReference | mcp_types.PromptReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> mcp_types.CompleteResult:
        """Completion values for an argument of a prompt or a resource template."""
        completion = await self._service.complete(self._server, ref, argument, context_arguments)
        return mcp_types.CompleteResult(completion=completion)

    async def set_logging_level(
        self, level: mcp_types.LoggingLevel, *, meta: Mapping[str, Any] | None = None
    ) -> mcp_types.EmptyResult:
        """Ask the server for log messages from ``level`` up (see ``McpService.set_log_level``)."""
        await self._service.set_log_level(self._server, level)
        return mcp_types.EmptyResult()
