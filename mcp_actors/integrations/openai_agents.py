"""The supervised servers as OpenAI Agents SDK MCP servers: ``Agent(mcp_servers=await mcp_servers(service))``.

The Agents SDK takes MCP servers as :class:`agents.mcp.MCPServer` objects: on every turn
the agent lists each server's tools (``list_tools``), turns them into function tools, and
runs the model's calls through ``call_tool``. :class:`SupervisedMcpServer` is one such
object per supervised server, named after it, backed by the runtime's service: no
process, session or socket of its own. So everything the SDK does per server applies as
usual — ``tool_filter``, ``mcp_config={"include_server_in_tool_names": True}``, its own
``require_approval`` (human in the loop), guardrails, ``MCPServerManager`` — and
everything the runtime does applies underneath: one shared, supervised connection per
server, restarted on a crash, reconnected after a drop, killed when the host exits.

Lifecycle. The runtime owns every process:

* ``connect()`` asks the runtime to connect the server now (a lazy server otherwise
  connects on the first listing or call), so that ``MCPServerManager`` sees a server that
  cannot start — unknown, disabled, failing, its circuit breaker open — as failed, the way
  it sees the SDK's own servers. It spawns nothing itself, and nothing needs it: listing
  and calling work without it.
* ``cleanup()`` forgets this object's tool listing and nothing else. It does not stop,
  disconnect or kill the supervised server: other agents, toolsets and hosts share that
  connection, and the runtime closes it when the runtime itself closes (``portal.close()``).

Tools. :func:`~mcp_actors.integrations.select_tools` lists them on every ``list_tools``
(the SDK asks once per turn): the runtime answers from its cache, refreshed on
``tools/list_changed`` and after its TTL, so a new or removed tool shows up on the next
turn, and tools in the server's ``disabledTools`` never do. ``tools=`` and ``naming=`` are
the rules every integration shares (:data:`~mcp_actors.integrations.ToolSelection`,
:data:`~mcp_actors.integrations.ToolNaming`); the default name is the tool id,
``mcp__<server>__<tool>``, unique across servers without any SDK option. With
``naming="tool"`` the tools keep their own names and the SDK's naming rules apply
(``include_server_in_tool_names`` to tell two servers' ``search`` apart). A listing that
fails because the server is down or restarting keeps offering the last tools listed
(logged): a call then fails with a clear message, or succeeds once the server is back,
instead of one restarting server failing the agent's whole run. A server no retry can
fix (misconfigured, or parked by its circuit breaker) fails the listing, as does one this
object never listed.

Failures. A call goes through :class:`~mcp_actors.adapters.McpToolAdapter`: bounded by
``timeout`` from start to end, connecting a lazy server first, asking the service's
approver (``set_approver``), relaying progress. Its typed failures
(:class:`~mcp_actors.errors.McpActorsError`: the server died during the call, the call
timed out, the approver said no, the tool was disabled) are raised from ``call_tool`` as
the SDK's :class:`agents.exceptions.UserError`, with the typed error as ``__cause__``.
Why that exception: the SDK's tool wrapper (``MCPUtil.invoke_mcp_tool``) passes a
``UserError`` on untouched to the function tool's failure handling — it is what the SDK's
own servers raise when a call's transport fails — while any other exception is logged as
a programming error with its traceback and wrapped. The failure handling then asks the
server's ``failure_error_function`` for the text the model reads. The SDK's default text
hides the error ("An error occurred while running the tool. Please try again."); ours,
:func:`tool_failure_message`, gives the model the typed error's own message, which names
the tool and the server and says what happened, e.g. ``Error: tool 'mcp__demo__sleep':
server 'demo' connection lost ...``. Pass ``failure_error_function=None`` to have the run
raise instead, or a function of your own. A tool-level error (``isError: true``) is not a
failure: its result goes back to the model as the server wrote it, as with the SDK's own
servers.

Progress and cancellation. The SDK has no channel for MCP progress, so ``on_progress``
is ours: called with ``(tool name, progress, total, message)`` on the agent's loop for
every progress notification. Cancelling the agent's run cancels the SDK's tool task,
which cancels our call on the runtime's loop, which tells the server
(``notifications/cancelled``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

import attrs
import mcp.types as mcp_types
from agents.exceptions import UserError
from agents.mcp import MCPServer, MCPToolCustomDataExtractor, ToolFilter, ToolFilterContext
from agents.mcp.server import RequireApprovalSetting
from agents.run_context import RunContextWrapper
from agents.tool import ToolErrorFunction, default_tool_error_function
from agents.tool_guardrails import ToolInputGuardrail, ToolOutputGuardrail

from mcp_actors._config.record import McpServerRecord
from mcp_actors._loops import RuntimeHop, hop_for
from mcp_actors.adapters import DEFAULT_TOOL_TIMEOUT, McpToolAdapter
from mcp_actors.errors import ConnectionFailed, McpActorsError, ServerCircuitOpen, ServerMisconfigured
from mcp_actors.integrations._common import (
    ToolNaming,
    ToolProgress,
    ToolSelection,
    bind_progress,
    failure_message,
    select_tools,
)
from mcp_actors.service import McpService
from mcp_actors.tools import McpTool

if TYPE_CHECKING:
    from agents.agent import AgentBase

__all__ = ["SupervisedMcpServer", "ToolProgressCallback", "mcp_servers", "tool_failure_message"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

ToolProgressCallback: TypeAlias = ToolProgress
"""``on_progress(tool, progress, total, message)``: a function or coroutine function, run on the agent's loop.

``tool`` is the name the model called (under the server's naming), so that a UI can tell
two calls in flight apart.
"""


def tool_failure_message(context: RunContextWrapper[Any], error: Exception) -> str:
    """The text the model reads when a tool call fails: our typed error's message, else the SDK's default.

    The default ``failure_error_function`` of :class:`SupervisedMcpServer`. The SDK's own
    default hides every error from the model; the typed errors of mcp-actors are written
    for it (they name the tool and the server and say what to do), so they are shown:
    ``Error: tool '<name>': <what happened>``. Any other exception (one raised by the SDK,
    a guardrail, ...) gets the SDK's default text.

    Args:
        context: The run context (passed on to the SDK's default).
        error: What the tool raised, as the SDK hands it over.
    """
    typed = _typed_cause(error)
    if typed is not None:
        return failure_message(typed)
    return default_tool_error_function(context, error)


def _typed_cause(error: BaseException) -> McpActorsError | None:
    """The first :class:`McpActorsError` in ``error``'s cause chain (the SDK may wrap ours)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, McpActorsError):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


def _check_timeout(timeout: float) -> None:
    """The adapters' own rule for ``timeout`` (one home for it), applied when an option is given."""
    field = attrs.fields(McpToolAdapter).timeout
    if field.validator is not None:
        field.validator(None, field, timeout)


@attrs.frozen
class _Offered:
    """One listing of a server, as offered: the SDK's tool objects and the adapter behind each name.

    ``source`` (each name with its listed tool) tells an unchanged listing: the runtime
    hands out the very same ``McpTool`` objects while a server's tools are unchanged.
    """

    source: tuple[tuple[str, McpTool], ...]
    tools: tuple[mcp_types.Tool, ...]
    adapters: Mapping[str, McpToolAdapter]


def _transient(error: McpActorsError) -> bool:
    """Whether a listing failure may pass by itself: a server down or restarting, not misconfigured or parked."""
    return isinstance(error, ConnectionFailed) and not isinstance(error, ServerMisconfigured | ServerCircuitOpen)


async def _in_runtime(service: McpService | RuntimeHop, what: str, fn: Callable[[McpService], Awaitable[T]]) -> T:
    """``fn(service)`` on the runtime's trio loop: directly on trio, through the asyncio facade elsewhere."""
    hop = hop_for(service, what)
    if hop is None:
        return await fn(cast(McpService, service))
    return await hop.run_in_runtime(fn)


class SupervisedMcpServer(MCPServer):
    """One supervised server as an Agents SDK MCP server (``Agent(mcp_servers=[...])``).

    Holds no connection: lists and calls through the runtime's service, so any number of
    these (one per agent, say) share the runtime's one connection to the server. Usually
    built by :func:`mcp_servers`; build one directly to give one server options of its own.

    Args:
        service: The asyncio facade (``portal.asyncio_service()``), as the SDK runs on
            asyncio; the runtime's ``McpService`` works when awaited on trio.
        server: The server's id or name, as the runtime knows it.
        name: The name the SDK knows the server by (its logs, traces, tool filters,
            ``include_server_in_tool_names``); default ``server``.
        tools: Which of its tools to offer (:data:`~mcp_actors.integrations.ToolSelection`).
        naming: How to name them (:data:`~mcp_actors.integrations.ToolNaming`; default the
            tool id, ``mcp__<server>__<tool>``).
        timeout: The bound of one call, connecting and approval included (seconds).
        on_progress: Called for every progress notification of a call
            (:data:`ToolProgressCallback`).
        tool_filter: The SDK's filter (static allow/block lists of the names offered, or a
            function of the run context and the tool), applied after ``tools``.
        use_structured_content: As the SDK's servers: give the model the structured
            content (as JSON) instead of the content, when there is some.
        require_approval: As the SDK's servers: which calls need a human's approval in the
            run (an interruption). The runtime's approver (``set_approver``) is asked
            besides, for every call of an untrusted server.
        failure_error_function: The text the model reads when a call fails; default
            :func:`tool_failure_message`. ``None`` makes the run raise instead. Set here,
            it takes precedence over the agent's ``mcp_config`` (as for every SDK server).
        custom_data_extractor: As the SDK's servers (SDK-side data for the output items).
        tool_input_guardrails: As the SDK's servers: run before each call of these tools.
        tool_output_guardrails: As the SDK's servers: run after each call of these tools.

    Raises:
        ValueError: ``timeout`` is not a finite number of seconds > 0.
        TypeError: ``tools`` is one string.
    """

    def __init__(
        self,
        service: McpService | RuntimeHop,
        server: str,
        *,
        name: str | None = None,
        tools: ToolSelection = None,
        naming: ToolNaming = "id",
        timeout: float = DEFAULT_TOOL_TIMEOUT,
        on_progress: ToolProgressCallback | None = None,
        tool_filter: ToolFilter = None,
        use_structured_content: bool = False,
        require_approval: RequireApprovalSetting = None,
        failure_error_function: ToolErrorFunction | None = tool_failure_message,
        custom_data_extractor: MCPToolCustomDataExtractor | None = None,
        tool_input_guardrails: list[ToolInputGuardrail[Any]] | None = None,
        tool_output_guardrails: list[ToolOutputGuardrail[Any]] | None = None,
    ) -> None:
        super().__init__(
            use_structured_content=use_structured_content,
            require_approval=require_approval,
            failure_error_function=failure_error_function,
            custom_data_extractor=custom_data_extractor,
            tool_input_guardrails=tool_input_guardrails,
            tool_output_guardrails=tool_output_guardrails,
        )
        _check_timeout(timeout)  # now, not on the first listing: a bad option is the caller's bug
        if isinstance(tools, str):
            raise TypeError(
                f"tools must be a collection of tool names or ids, or a predicate; got the string {tools!r}"
            )
        self._service = service
        self._server = server
        self._name = name if name is not None else server
        self._tools = tools
        self._naming = naming
        self._timeout = timeout
        self._on_progress = on_progress
        self.tool_filter = tool_filter
        self._offered: _Offered | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def name(self) -> str:
        """The server's name for the SDK (logs, traces, tool filters, prefixed tool names)."""
        return self._name

    @property
    def server(self) -> str:
        """The id or name the runtime knows the server by."""
        return self._server

    async def connect(self) -> None:
        """Ask the runtime to connect the server now, so a server that cannot start fails here.

        Spawns nothing of its own: the runtime starts (and owns) the server's process.
        Not required before listing or calling; ``MCPServerManager`` calls it to sort
        working servers from failed ones.

        Raises:
            ServerNotFound, ServerInactive: The server is unknown or disabled.
            ConnectionFailed: The server could not be started or reached (its circuit
                breaker may be open: ``service.reconnect`` closes it).
        """
        server = self._server
        await _in_runtime(self._service, f"SupervisedMcpServer({self._name!r}).connect", lambda s: s.connect(server))

    async def cleanup(self) -> None:
        """Forget this object's tool listing. The supervised server keeps running.

        The runtime owns the server and its connection, which other agents and hosts may
        share; it closes them when it closes. Idempotent.
        """
        self._offered = None

    # ------------------------------------------------------------------ tools

    @property
    def cached_tools(self) -> list[mcp_types.Tool] | None:
        """The tools of the last listing (copies; ``tool_filter`` not applied), or None before one."""
        offered = self._offered
        return None if offered is None else [tool.model_copy(deep=True) for tool in offered.tools]

    async def _listing(self) -> _Offered:
        """List the server's tools now (the runtime's cache answers while they are unchanged)."""
        selected, failures = await select_tools(
            self._service, [self._server], tools=self._tools, naming=self._naming, timeout=self._timeout
        )
        previous = self._offered
        source = tuple((chosen.name, chosen.mcp_tool) for chosen in selected)
        if failures:
            [error] = failures.values()
            if previous is not None and _transient(error):
                logger.warning("MCP server %s: listing tools failed, offering the last listing: %s", self._name, error)
                return previous
            raise error
        if previous is not None and previous.source == source:
            return previous  # unchanged: the same McpTool objects, nothing to rebuild
        adapters = {
            chosen.name: chosen.adapter
            if self._on_progress is None
            else attrs.evolve(chosen.adapter, on_progress=bind_progress(self._on_progress, chosen.name))
            for chosen in selected
        }
        tools = tuple(
            mcp_types.Tool(
                name=chosen.name,
                description=chosen.mcp_tool.description or None,
                input_schema=dict(chosen.mcp_tool.input_schema),
            )
            for chosen in selected
        )
        offered = _Offered(source=source, tools=tools, adapters=adapters)
        self._offered = offered
        return offered

    async def list_tools(
        self,
        run_context: RunContextWrapper[Any] | None = None,
        agent: AgentBase | None = None,
    ) -> list[mcp_types.Tool]:
        """The tools offered now, after ``tools``, the disabled tools and ``tool_filter``.

        Returns copies: the SDK (or a filter) may change them freely.

        Raises:
            ServerNotFound, ServerInactive: The server is unknown or disabled.
            ConnectionFailed: The server is misconfigured or parked by its circuit breaker,
                or cannot be reached and was never listed by this object (a server
                listed before and now restarting keeps its last listing instead).
            UserError: ``tool_filter`` is a function and no run context or agent was given.
        """
        offered = await self._listing()
        tools = [tool.model_copy(deep=True) for tool in offered.tools]
        return await self._filtered(tools, run_context, agent)

    async def _filtered(
        self, tools: list[mcp_types.Tool], run_context: RunContextWrapper[Any] | None, agent: AgentBase | None
    ) -> list[mcp_types.Tool]:
        """``tool_filter`` applied as the SDK's own servers apply it."""
        tool_filter = self.tool_filter
        if tool_filter is None:
            return tools
        if isinstance(tool_filter, dict):
            allowed = tool_filter.get("allowed_tool_names")
            blocked = tool_filter.get("blocked_tool_names")
            return [
                tool
                for tool in tools
                if (allowed is None or tool.name in allowed) and (blocked is None or tool.name not in blocked)
            ]
        if run_context is None or agent is None:
            raise UserError("run_context and agent are required for dynamic tool filtering")
        context = ToolFilterContext(run_context=run_context, agent=agent, server_name=self.name)
        kept = []
        for tool in tools:
            try:
                verdict = tool_filter(context, tool)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception:
                # As the SDK does: a filter that fails hides the tool rather than failing the run.
                logger.exception(
                    "MCP server %s: the tool filter failed on tool %r; tool left out", self.name, tool.name
                )
                continue
            if verdict:
                kept.append(tool)
        return kept

    async def call_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool by the name it was offered under; a tool-level error is the result's ``is_error``.

        Bounded by ``timeout``; asks the runtime's approver; cancelled with its caller (the
        server is told). A name this object has not listed yet is looked up by listing once.

        Raises:
            UserError: The call failed; ``__cause__`` is the typed
                :class:`~mcp_actors.errors.McpActorsError` (the server died during the call,
                the call timed out, the approver said no, ...), whose message names the
                tool and the server. Also: the name is not offered by this server, or
                ``meta`` was given (the runtime sends no request ``_meta``).
        """
        if meta:
            raise UserError(
                f"MCP server {self.name!r}: mcp-actors does not send request _meta with tool calls;"
                " leave tool_meta_resolver unset"
            )
        offered = self._offered
        adapter = offered.adapters.get(tool_name) if offered is not None else None
        if adapter is None:
            try:
                adapter = (await self._listing()).adapters.get(tool_name)
            except McpActorsError as exc:
                raise UserError(f"tool {tool_name!r} of MCP server {self.name!r}: {exc}") from exc
            if adapter is None:
                raise UserError(
                    f"tool {tool_name!r} is not offered by MCP server {self.name!r}"
                    " (no such tool, disabled in the server's disabledTools, or not selected)"
                )
        try:
            return await adapter.call(arguments)
        except McpActorsError as exc:
            raise UserError(str(exc)) from exc

    # ------------------------------------------------------------------ prompts and resources

    def _run(self, what: str, fn: Callable[[McpService], Awaitable[T]]) -> Awaitable[T]:
        return _in_runtime(self._service, f"SupervisedMcpServer({self._name!r}).{what}", fn)

    async def list_prompts(self) -> mcp_types.ListPromptsResult:
        """The server's prompts, every page in one result.

        Raises:
            McpActorsError: As :meth:`McpService.list_prompts <mcp_actors.service.McpService.list_prompts>`.
        """
        server = self._server
        return mcp_types.ListPromptsResult(prompts=await self._run("list_prompts", lambda s: s.list_prompts(server)))

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> mcp_types.GetPromptResult:
        """One prompt rendered with its arguments.

        Raises:
            McpActorsError: As :meth:`McpService.get_prompt <mcp_actors.service.McpService.get_prompt>`.
        """
        server = self._server
        return await self._run("get_prompt", lambda s: s.get_prompt(server, name, arguments))

    async def list_resources(self, cursor: str | None = None) -> mcp_types.ListResourcesResult:
        """The server's resources, every page in one result (so there is never a cursor to pass).

        Raises:
            UserError: A ``cursor`` was given.
            McpActorsError: As :meth:`McpService.list_resources <mcp_actors.service.McpService.list_resources>`.
        """
        _no_cursor(cursor, self.name)
        server = self._server
        resources = await self._run("list_resources", lambda s: s.list_resources(server))
        return mcp_types.ListResourcesResult(resources=resources)

    async def list_resource_templates(self, cursor: str | None = None) -> mcp_types.ListResourceTemplatesResult:
        """The server's resource templates, every page in one result.

        Raises:
            UserError: A ``cursor`` was given.
            McpActorsError: As :meth:`McpService.list_resource_templates
                <mcp_actors.service.McpService.list_resource_templates>`.
        """
        _no_cursor(cursor, self.name)
        server = self._server
        templates = await self._run("list_resource_templates", lambda s: s.list_resource_templates(server))
        return mcp_types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """Read one resource.

        Raises:
            McpActorsError: As :meth:`McpService.read_resource <mcp_actors.service.McpService.read_resource>`.
        """
        server = self._server
        return await self._run("read_resource", lambda s: s.read_resource(server, uri))

    def __repr__(self) -> str:
        return f"SupervisedMcpServer(name={self._name!r}, server={self._server!r})"


def _no_cursor(cursor: str | None, server: str) -> None:
    if cursor is not None:
        raise UserError(f"MCP server {server!r}: listings come in one page here; there is no page after {cursor!r}")


async def mcp_servers(
    service: McpService | RuntimeHop,
    servers: Iterable[str] | None = None,
    *,
    tools: ToolSelection = None,
    naming: ToolNaming = "id",
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    on_progress: ToolProgressCallback | None = None,
    **server_options: Any,
) -> list[SupervisedMcpServer]:
    """One :class:`SupervisedMcpServer` per server, for ``Agent(mcp_servers=...)``.

    Each is named after its server (the record's name) and addresses it by its id, so a
    rename in the config does not break it.

    Args:
        service: The asyncio facade (``portal.asyncio_service()``).
        servers: Server names or ids, in order; ``None`` means every active server. A
            disabled server named here is kept: its ``connect()`` fails, and
            ``MCPServerManager`` leaves it out until it is enabled.
        tools: Which tools each server offers (names, ids or a predicate).
        naming: How tools are named (default the tool id, unique across servers).
        timeout: The bound of one call (seconds).
        on_progress: Progress of every call (:data:`ToolProgressCallback`).
        **server_options: Other :class:`SupervisedMcpServer` options (``tool_filter``,
            ``require_approval``, ``failure_error_function``, ...), the same for each.

    Raises:
        ServerNotFound: A name in ``servers`` is not configured (the message lists the known ones).
        TypeError: ``servers`` or ``tools`` is one string.
    """
    if isinstance(servers, str):
        raise TypeError("servers must be a collection of server ids or names, not one string")
    wanted = None if servers is None else list(dict.fromkeys(servers))

    async def records(s: McpService) -> list[McpServerRecord]:
        current = await s.list()  # current with the config file
        if wanted is None:
            return [record for record in current if record.is_active]
        return [s.get(server) for server in wanted]

    chosen = await _in_runtime(service, "mcp_servers", records)
    return [
        SupervisedMcpServer(
            service,
            record.id,
            name=record.name,
            tools=tools,
            naming=naming,
            timeout=timeout,
            on_progress=on_progress,
            **server_options,
        )
        for record in chosen
    ]
