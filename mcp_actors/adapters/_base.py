"""What both adapter kinds share: the :class:`Tool` protocol, content flattening, the bounded call.

Private: the public names are re-exported by :mod:`mcp_actors.adapters`, whose module
docstring states the contract of :meth:`Tool.execute`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar, overload, runtime_checkable

import attrs
import mcp.types as mcp_types
import trio

from mcp_actors._connection.call_ids import new_call_id
from mcp_actors.errors import McpActorsError, ToolCallTimeout

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "ERROR_PREFIX",
    "LoadedTools",
    "Tool",
    "flatten_content",
    "flatten_result",
]

DEFAULT_TOOL_TIMEOUT: Final = 120.0
"""Seconds an adapter's :meth:`~Tool.execute` may take, unless the adapter says otherwise."""

ERROR_PREFIX: Final = "Error: "
"""How a tool-level error (``isError: true``) starts when :meth:`~Tool.execute` returns it."""

_EMPTY_ERROR: Final = "the tool reported an error without a message"


# ---------------------------------------------------------------------- the protocol


@runtime_checkable
class Tool(Protocol):
    """What an agent engine's tool registry holds: a named, described, callable tool.

    The adapters of this module implement it; an engine may hold other tools of its own
    beside them. ``isinstance(x, Tool)`` checks the attributes' presence only.
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by (provider-safe, unique in the registry)."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model (may be empty)."""
        ...

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments, as its server declared it."""
        ...

    async def execute(self, params: Mapping[str, Any] | None = None) -> str:
        """Run the tool with the model's arguments and return the result as text for the model."""
        ...


# ---------------------------------------------------------------------- content


def _get(item: Any, *keys: str) -> Any:
    """The first of ``keys`` present on a model object or in a mapping, else None."""
    for key in keys:
        value = item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)
        if value is not None:
            return value
    return None


def _flatten_one(item: Any) -> str:
    kind = _get(item, "type")
    if kind == "text":
        return str(_get(item, "text") or "")
    if kind == "image":
        return f"[Image: {_get(item, 'mime_type', 'mimeType') or 'unknown type'}]"
    if kind == "audio":
        return f"[Audio: {_get(item, 'mime_type', 'mimeType') or 'unknown type'}]"
    if kind == "resource":
        resource = _get(item, "resource")
        text = _get(resource, "text") if resource is not None else None
        if isinstance(text, str):
            return text
        uri = _get(resource, "uri") if resource is not None else None
        return f"[Resource: {uri or 'unknown uri'}]"
    if kind == "resource_link":
        return f"[Resource link: {_get(item, 'uri') or 'unknown uri'}]"
    return f"[Unsupported content: {kind or type(item).__name__}]"


def flatten_content(content: Iterable[mcp_types.ContentBlock | Mapping[str, Any]]) -> str:
    """Turn an MCP tool result's content into one string a model can read.

    Models take text; binary content is named, not inlined (a base64 PNG would only
    burn the context window). Each item becomes:

    ==================================  ===============================================
    text                                its text, unchanged
    image                               ``[Image: <mime type>]``
    audio                               ``[Audio: <mime type>]``
    embedded text resource              its text
    embedded blob resource              ``[Resource: <uri>]``
    resource link                       ``[Resource link: <uri>]``
    anything else                       ``[Unsupported content: <type>]``
    ==================================  ===============================================

    The items are joined with ``"\\n"``; no content gives ``""``.

    Args:
        content: The result's ``content``: SDK content models, or their JSON form as
            mappings (``{"type": "image", "mimeType": ...}``).

    Returns:
        The flattened text.
    """
    return "\n".join(_flatten_one(item) for item in content)


def flatten_result(result: mcp_types.CallToolResult) -> str:
    """The text :meth:`Tool.execute` returns for a tool result.

    :func:`flatten_content` of the content; if the server sent no content but structured
    content, that as JSON. A tool-level error (``is_error``) is marked by starting with
    exactly :data:`ERROR_PREFIX` (``"Error: "``), followed by the text, or by a note
    that the tool gave no message.

    Args:
        result: The MCP result of ``tools/call``.

    Returns:
        The text for the model.
    """
    text = flatten_content(result.content)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if result.is_error:
        return ERROR_PREFIX + (text or _EMPTY_ERROR)
    return text


# ---------------------------------------------------------------------- the call


def _check_timeout(_instance: object, _attribute: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {value!r}")


def _check_params(params: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(
            f"tool {name!r}: params must be a mapping of argument names to values, got {type(params).__name__}"
        )
    return dict(params)


def _in_context(exc: McpActorsError, name: str) -> McpActorsError:
    """The same error, its message prefixed with the adapter's tool name.

    Built without calling ``__init__`` (whose signature differs per class, and which for
    connection errors would append the stderr line a second time); every attribute
    (``server``, ``tool``, ``stderr_tail``, ``timeout``, ...) is carried over. ``args`` is
    set as well: ``OSError.__new__`` leaves it empty when a subclass has its own
    ``__init__``, and ``ToolCallDenied`` (a ``PermissionError``) would read as ``""``.
    """
    cls = type(exc)
    message = f"tool {name!r}: {exc}"
    renamed = cls.__new__(cls, message)
    renamed.args = (message,)
    renamed.__dict__.update(exc.__dict__)
    return renamed


@attrs.frozen(kw_only=True)
class _Target:
    """How an adapter reaches its tool: the pieces the shared call logic needs.

    ``straight`` says whether ``call``, awaited now, awaits nothing before a request bounded
    by its ``timeout`` (connected, tool listed, no approval step): then the adapter's bound
    is handed down as that timeout and no cancel scope of the adapter's is needed.
    """

    name: str
    tool: str
    server: str
    timeout: float
    straight: Callable[[], bool]
    connected: Callable[[], bool]
    connect: Callable[[], Awaitable[None]]
    call: Callable[[dict[str, Any], float, str | None], Awaitable[mcp_types.CallToolResult]]


async def _call(target: _Target, params: Mapping[str, Any] | None) -> mcp_types.CallToolResult:
    """Call the tool, bounded by ``target.timeout`` from start to end: one bound, one deadline.

    When the call goes straight to its request (``target.straight()``: connected, the tool
    listed, no approval step, no timeout that progress resets), the bound is the call's own
    ``timeout``: one cancel scope, the request's, from the first step to the answer.
    Otherwise a single cancel scope at the deadline covers every step (connecting a server
    that is not connected yet, the registry's approval step, the call); the call also gets
    what is left of the budget as its ``timeout``, so a shorter per-server default never
    cuts the adapter's bound short. Whichever fires at the deadline, the server is told
    to cancel the call (the connection does so for a timed-out and for a cancelled call)
    and the caller gets one :class:`~mcp_actors.errors.ToolCallTimeout`.
    """
    arguments = _check_params(params, target.name)
    connected = True
    try:
        if target.straight():
            return await target.call(arguments, target.timeout, None)
        deadline = trio.current_time() + target.timeout
        with trio.move_on_at(deadline):
            if not target.connected():
                connected = False
                await target.connect()
                connected = trio.current_time() < deadline  # else the call is never sent
            remaining = deadline - trio.current_time()
            if remaining > 0:
                return await target.call(arguments, remaining, new_call_id())
    except ToolCallTimeout:
        pass
    except McpActorsError as exc:
        raise _in_context(exc, target.name) from exc.__cause__
    if connected:
        what = "did not finish within {}s; the server was asked to cancel the call"
    else:
        what = "could not be called within {}s: its server was still connecting; the call was not sent"
    raise ToolCallTimeout(
        f"tool {target.name!r} (tool {target.tool!r} of server {target.server!r}) {what.format(f'{target.timeout:g}')};"
        " raise the adapter's timeout if the tool is legitimately slow",
        server=target.server,
        tool=target.tool,
        timeout=target.timeout,
    ) from None


# ---------------------------------------------------------------------- results of a loader


T_co = TypeVar("T_co", bound=Tool, covariant=True)


@attrs.frozen(kw_only=True)
class LoadedTools(Sequence[T_co]):
    """The adapters a loader built, plus the servers that failed and why.

    A sequence of the adapters (iterate it, index it, ``len`` it — like the list the
    reference design returns); :attr:`failures` says which servers were skipped.

    Attributes:
        tools: The adapters, in server order, then the server's tool order.
        failures: Server (as the caller named it) → the typed error that kept it out.
    """

    tools: tuple[T_co, ...] = ()
    failures: Mapping[str, McpActorsError] = attrs.field(factory=dict)

    @overload
    def __getitem__(self, index: int) -> T_co: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T_co]: ...

    def __getitem__(self, index: int | slice) -> T_co | Sequence[T_co]:
        return self.tools[index]

    def __len__(self) -> int:
        return len(self.tools)

    def __iter__(self) -> Iterator[T_co]:
        return iter(self.tools)
