"""What every framework integration shares: choosing tools, naming them, failures as text.

One home for these rules, so the six frameworks cannot drift apart: which servers and
tools a toolset offers (:func:`select_tools`), under which names (:data:`ToolNaming`), and
how a typed failure reads to a model (:func:`failure_message`), and whether the model
trying the call again may help (:func:`retry_may_help`). A call goes through
:class:`~mcp_actors.adapters.McpToolAdapter`: bounded from start to end, connecting a lazy
server first, asking the service's approver, relaying progress, cancelled with its caller.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from mcp_actors._loops import RuntimeHop
from mcp_actors.adapters import DEFAULT_TOOL_TIMEOUT, ERROR_PREFIX, McpToolAdapter, load_mcp_tools
from mcp_actors.adapters._base import _check_timeout
from mcp_actors.errors import (
    ConnectionFailed,
    InvalidCallInput,
    McpActorsError,
    ServerCircuitOpen,
    ServerMessageTooLarge,
    ServerMisconfigured,
    ServerRequestFailed,
    ToolCallTimeout,
)
from mcp_actors.service import McpService
from mcp_actors.tools import McpTool

__all__ = [
    "SelectedTool",
    "ToolNaming",
    "ToolProgress",
    "ToolSelection",
    "bind_progress",
    "check_selection",
    "failure_message",
    "retry_may_help",
    "select_tools",
]

ToolNaming: TypeAlias = Literal["id", "tool"] | Callable[[McpTool], str]
"""How a toolset names a tool to the model.

* ``"id"`` (default): the runtime's tool id, ``mcp__<server>__<tool>`` — unique across
  servers and safe for every provider.
* ``"tool"``: the tool's own name on its server (as the framework's own MCP client names
  it); two servers offering the same name is an error that names both.
* a function of the :class:`~mcp_actors.tools.McpTool`: any other scheme; the names it
  gives must be unique.
"""

ToolSelection: TypeAlias = Collection[str] | Callable[[McpTool], bool] | None
"""Which tools a toolset offers: ``None`` (all enabled), names or ids, or a predicate.

A string matches a tool's id (``mcp__demo__echo``) or its own name (``echo``); a predicate
gets the :class:`~mcp_actors.tools.McpTool`. Tools in a server's ``disabledTools`` are never
offered, whatever the selection says.
"""


ToolProgress: TypeAlias = Callable[[str, float, float | None, str | None], Awaitable[None] | None]
"""``on_progress(tool, progress, total, message)``: one host callback for every tool of a toolset.

For frameworks without a progress channel of their own; ``tool`` is the name the model
called, so that a UI can tell two calls in flight apart. See :func:`bind_progress`.
"""


def bind_progress(callback: ToolProgress, tool: str) -> Callable[..., Any]:
    """``callback`` with ``tool`` bound: the ``(progress, total, message)`` callback an adapter takes.

    A coroutine function stays one, so that the asyncio facade still runs it on the
    caller's loop; a plain function stays plain.
    """
    if inspect.iscoroutinefunction(callback):

        async def relay_async(progress: float, total: float | None, message: str | None) -> None:
            await callback(tool, progress, total, message)

        return relay_async

    def relay(progress: float, total: float | None, message: str | None) -> None:
        callback(tool, progress, total, message)

    return relay


@attrs.frozen(kw_only=True)
class SelectedTool:
    """One tool a toolset offers: the name the model sees and the adapter that calls it.

    Attributes:
        name: The name under the toolset's :data:`ToolNaming`.
        adapter: Calls the tool through the service (bounded, approved, progress relayed).
    """

    name: str
    adapter: McpToolAdapter

    @property
    def mcp_tool(self) -> McpTool:
        """The listed tool (id, own name, description, input schema, server)."""
        return self.adapter.mcp_tool


def _name_of(tool: McpTool, naming: ToolNaming) -> str:
    if naming == "id":
        return tool.id
    if naming == "tool":
        return tool.name
    if callable(naming):
        name = naming(tool)
        if not isinstance(name, str) or not name:
            raise ValueError(f"naming gave {name!r} for tool {tool.id!r}: it must return a non-empty string")
        return name
    raise ValueError(f"naming must be 'id', 'tool' or a function of the McpTool, got {naming!r}")


def _selected(tool: McpTool, selection: ToolSelection) -> bool:
    if selection is None:
        return True
    if callable(selection):
        return bool(selection(tool))
    return tool.id in selection or tool.name in selection


def check_selection(
    servers: Iterable[str] | None = None,
    *,
    tools: ToolSelection = None,
    naming: ToolNaming = "id",
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> tuple[str, ...] | None:
    """Check a toolset's options when it is built, before any server is listed.

    A framework may list a toolset's tools long after it was built, and some swallow an
    error raised then (Google ADK drops the toolset and runs the agent without it): a
    constructor that calls this fails where the mistake is made. :func:`select_tools`
    checks the same rules, so both raise the same errors.

    Args:
        servers: Server names or ids, or ``None`` (every active server).
        tools: Which tools (see :data:`ToolSelection`).
        naming: How tools are named (see :data:`ToolNaming`).
        timeout: The bound of each call (seconds).

    Returns:
        ``servers`` as a tuple (an iterator is read once, here), or ``None``.

    Raises:
        TypeError: ``servers`` or ``tools`` is one string instead of a collection.
        ValueError: ``naming`` is not ``"id"``, ``"tool"`` or a function, or ``timeout``
            is not a finite number of seconds > 0.
    """
    if isinstance(servers, str):
        raise TypeError(f"servers must be a collection of server names or ids, got the string {servers!r}")
    if isinstance(tools, str):
        raise TypeError(f"tools must be a collection of tool names or ids, or a predicate; got the string {tools!r}")
    if naming not in ("id", "tool") and not callable(naming):
        raise ValueError(f"naming must be 'id', 'tool' or a function of the McpTool, got {naming!r}")
    _check_timeout(None, None, timeout)
    return None if servers is None else tuple(servers)


async def select_tools(
    service: McpService | RuntimeHop,
    servers: Iterable[str] | None = None,
    *,
    tools: ToolSelection = None,
    naming: ToolNaming = "id",
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> tuple[tuple[SelectedTool, ...], Mapping[str, McpActorsError]]:
    """The tools a toolset offers now, and the servers that could not be listed.

    Servers are listed concurrently; one that fails (down, disabled, unknown) is left out
    and reported in the second value, never failing the listing.

    Args:
        service: The runtime's ``McpService`` (trio) or the asyncio facade.
        servers: Server names or ids, in order; ``None`` means every active server.
        tools: Which tools (see :data:`ToolSelection`).
        naming: How tools are named (see :data:`ToolNaming`).
        timeout: The bound of each call, connecting included (seconds).

    Raises:
        ValueError: Two tools got the same name (the message names both), or ``naming``
            or ``timeout`` is not valid.
        TypeError: ``servers`` is one string instead of a collection.
    """
    servers = check_selection(servers, tools=tools, naming=naming, timeout=timeout)
    loaded = await load_mcp_tools(service, servers, timeout=timeout)
    chosen: list[SelectedTool] = []
    owner: dict[str, str] = {}
    for adapter in loaded:
        tool = adapter.mcp_tool
        if not _selected(tool, tools):
            continue
        name = _name_of(tool, naming)
        if name in owner:
            raise ValueError(
                f"two tools would both be named {name!r}: {owner[name]!r} and {tool.id!r};"
                " use naming='id' (unique ids), a naming function, or select one of them"
            )
        owner[name] = tool.id
        chosen.append(SelectedTool(name=name, adapter=adapter))
    return tuple(chosen), loaded.failures


def failure_message(error: McpActorsError) -> str:
    """A typed failure as the text a model reads: ``Error: tool '<name>': <what happened and what to do>``.

    For frameworks whose failing tool answers the model with a message instead of raising.
    """
    return f"{ERROR_PREFIX}{error}"


def retry_may_help(error: McpActorsError) -> bool:
    """Whether the model calling the tool again (perhaps with other arguments) may succeed.

    For frameworks that tell a *retryable* failure (the model is asked to try again, and a
    retry budget is spent) from a *terminal* one (the model is told and adapts). True for
    what passes or what the model can fix: the server's connection died (the supervisor
    restarts it) or could not be made yet, the call timed out, the arguments or the request
    were refused. False for what no retry in this run can fix: the approver said no, the
    tool or server is disabled, unknown or misconfigured, its circuit is open (a person
    must ``reconnect``), its answer is over the size limit, the runtime is closing.
    """
    if isinstance(error, ServerMisconfigured | ServerCircuitOpen | ServerMessageTooLarge):
        return False
    return isinstance(error, ConnectionFailed | ToolCallTimeout | InvalidCallInput | ServerRequestFailed)
