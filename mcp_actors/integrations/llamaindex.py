"""The supervised servers as LlamaIndex tools: ``FunctionTool``\\ s and a ``BaseToolSpec``.

LlamaIndex agents (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow``, ``CodeActAgent``)
take a list of tools; a tool *spec* is how an integration hands one over
(``spec.to_tool_list()``, as ``llama-index-tools-mcp``'s ``McpToolSpec`` does). Here:

* :class:`McpActorsToolSpec` — the spec: ``await McpActorsToolSpec(service).to_tool_list_async()``
  (or ``to_tool_list()`` outside a running loop) lists the servers now and gives one
  :class:`McpFunctionTool` per tool.
* :func:`load_tools` — the same in one call.
* :class:`McpFunctionTool` — a ``FunctionTool`` whose call goes through the runtime's
  service: one session per server shared by every tool and agent, lazy servers connected
  on first use, the service's approver asked, every call bounded, a dead server restarted by
  its supervisor.
* :class:`McpToolProgress` — the event a tool's progress notifications become in the
  agent's event stream (opt-in: ``progress=True``).

**The schema the model sees.** A ``FunctionTool`` describes its arguments with a pydantic
model (``ToolMetadata.fn_schema``); LlamaIndex gives the model
``fn_schema.model_json_schema()``, keeping its ``type``, ``properties``, ``required``,
``$defs`` and ``definitions``. ``McpToolSpec`` builds that model field by field from the
server's JSON schema and the model sees what the model makes of it: nested inline objects
turn into bare ``object``\\ s, and ``minimum``, ``pattern``, ``format``, ``oneOf`` ... are
lost. Our model's ``model_json_schema()`` *is* the server's
schema (a copy), so the model sees it as sent, under LlamaIndex's own top-level rule; its
fields (one per top-level property, typed ``Any``, the server validating the values) are
there for code that introspects ``model_fields``.

**Failures.** LlamaIndex's agents turn any exception of a tool into
``ToolOutput(is_error=True, content=str(exc))``, and a tool that returns a
``ToolOutput(is_error=True)`` reads the same to them. :class:`McpFunctionTool` returns one
itself instead of raising, for three reasons: the text is the shared failure text
(``Error: tool '<name>': ...``, naming the tool, the server and what to do) whichever path
called the tool, direct ``acall`` included; the typed
:class:`~mcp_actors.errors.McpActorsError` stays at hand as ``output.exception``; and a
tool-level error (``isError: true``) is flagged ``is_error`` too, which a raised exception
could not express without losing the server's own result (``output.raw_output``). Misuse
(a bad argument shape, the trio service awaited on asyncio) still raises.

**Cancellation.** Cancelling the agent's run (``await handler.cancel_run()``) or the task
awaiting it cancels the tool's asyncio task, and so the call: the runtime tells the server
(``notifications/cancelled``).

**Progress.** LlamaIndex has one channel from a tool to the host while it runs: the
workflow's event stream (``handler.stream_events()``), which a tool reaches through the
``Context`` the agent passes to a tool that asks for it. With ``progress=True`` each tool
asks for it, and every progress notification of its calls is written to the stream as a
:class:`McpToolProgress`. Off by default: ``CodeActAgent`` refuses tools that take the
context.
"""

from __future__ import annotations

import asyncio
import copy
import keyword
import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any, ClassVar

import attrs
from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.types import TextBlock
from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput
from llama_index.core.tools.tool_spec.base import SPEC_FUNCTION_TYPE, BaseToolSpec
from llama_index.core.workflow import Context, Event
from pydantic import BaseModel, ConfigDict, Field, create_model

from mcp_actors._loops import RuntimeHop
from mcp_actors.adapters import DEFAULT_TOOL_TIMEOUT, flatten_result
from mcp_actors.errors import McpActorsError
from mcp_actors.integrations._common import (
    SelectedTool,
    ToolNaming,
    ToolSelection,
    check_selection,
    failure_message,
    select_tools,
)
from mcp_actors.service import McpService
from mcp_actors.tools import McpTool

__all__ = ["McpActorsToolSpec", "McpFunctionTool", "McpToolProgress", "load_tools"]

logger = logging.getLogger(__name__)

_CONTEXT_KEY = "mcp-actors:context"
"""The keyword the agent passes its workflow ``Context`` under (``FunctionTool.ctx_param_name``).

Not an identifier, so it can be no Python parameter, and no server names an argument so.
"""


class McpToolProgress(Event):
    """One progress notification of an MCP tool call, in the agent's event stream.

    Written by a tool of a spec made with ``progress=True`` while it runs in an agent
    (read them with ``async for event in handler.stream_events()``). Why an event: it is
    LlamaIndex's only channel from a running tool to the host.

    Attributes:
        tool_name: The tool's name as the model sees it.
        server: The server's name.
        tool: The tool's own name on its server.
        progress: The progress so far (the server's unit).
        total: The total, if the server knows it.
        message: The server's message, if any.
    """

    tool_name: str
    server: str
    tool: str
    progress: float
    total: float | None = None
    message: str | None = None


class _ServerSchema(BaseModel):
    """A tool's argument model whose JSON schema is the server's own, not one rebuilt from fields."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())

    mcp_input_schema: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The server's input schema, a copy (``type`` and ``properties`` added if it had none)."""
        schema = copy.deepcopy(dict(cls.mcp_input_schema))
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})  # LlamaIndex's single-argument helpers index it
        return schema


def _field_name(prop: str, index: int) -> str:
    """``prop`` if it can be a pydantic field name, else a stand-in (the property stays its alias)."""
    if (
        prop.isidentifier()
        and not keyword.iskeyword(prop)
        and not prop.startswith("_")
        and not hasattr(BaseModel, prop)
    ):
        return prop
    return f"argument_{index}"


def _arguments_model(name: str, schema: Mapping[str, Any]) -> type[_ServerSchema]:
    """The ``fn_schema`` of a tool: the server's schema, plus one ``Any`` field per top-level property."""
    properties = schema.get("properties")
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    fields: dict[str, Any] = {}
    if isinstance(properties, Mapping):
        for index, (prop, sub) in enumerate(properties.items()):
            sub = sub if isinstance(sub, Mapping) else {}
            field_name = _field_name(str(prop), index)
            default = ... if prop in required_names else sub.get("default")
            fields[field_name] = (
                Any,
                Field(default, alias=None if field_name == prop else str(prop), description=sub.get("description")),
            )
    model: type[_ServerSchema] = create_model(f"{name}_arguments", __base__=_ServerSchema, **fields)
    model.mcp_input_schema = schema
    return model


class McpFunctionTool(FunctionTool):
    """One MCP tool as a LlamaIndex ``FunctionTool``, called through the runtime's service.

    Built by :class:`McpActorsToolSpec` (or :func:`load_tools`); hand it to any agent. Its
    :meth:`acall` returns a ``ToolOutput``: the result as text (``raw_output`` the MCP
    ``CallToolResult``), or a failure with ``is_error=True`` (see the module docstring).
    ``async_fn`` (and ``real_fn``) take the arguments by keyword and return the text,
    raising the typed error, for code that calls functions (``CodeActAgent``, LangChain).

    Args:
        selected: The tool and the adapter that calls it (from ``select_tools``).
        progress: Ask the agent for its workflow ``Context`` and write each progress
            notification to its event stream as a :class:`McpToolProgress`.
        return_direct: LlamaIndex's flag: the agent ends with this tool's output.
    """

    def __init__(self, selected: SelectedTool, *, progress: bool = False, return_direct: bool = False) -> None:
        tool = selected.mcp_tool
        adapter = selected.adapter

        async def run(**arguments: Any) -> str:
            return await adapter.execute(arguments)

        run.__name__ = selected.name
        run.__qualname__ = selected.name
        run.__doc__ = tool.description
        metadata = ToolMetadata(
            name=selected.name,
            description=tool.description,
            fn_schema=_arguments_model(selected.name, tool.input_schema),
            return_direct=return_direct,
        )
        super().__init__(async_fn=run, metadata=metadata)
        self._selected = selected
        self._properties = tuple(tool.input_schema.get("properties") or ())
        if progress:
            # The agents pass their Context under ctx_param_name to a tool that asks for it.
            self.requires_context = True
            self.ctx_param_name = _CONTEXT_KEY

    @property
    def mcp_tool(self) -> McpTool:
        """The listed tool: id, own name, description, input schema, server."""
        return self._selected.mcp_tool

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if not args:
            return kwargs
        if len(args) == 1 and not kwargs:
            [only] = args
            if isinstance(only, Mapping):
                return dict(only)
            if len(self._properties) == 1:  # LlamaIndex calls a one-argument tool with the bare value
                return {self._properties[0]: only}
        raise TypeError(
            f"tool {self.metadata.name!r} takes its arguments by keyword or as one mapping;"
            f" got {len(args)} positional argument(s)"
        )

    def _progress_to(self, ctx: Context) -> Any:
        tool = self._selected.mcp_tool
        name = self._selected.name

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            ctx.write_event_to_stream(
                McpToolProgress(
                    tool_name=name,
                    server=tool.server_name,
                    tool=tool.name,
                    progress=progress,
                    total=total,
                    message=message,
                )
            )

        return on_progress

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Call the tool with the model's arguments.

        Returns:
            A ``ToolOutput``: the result's text (``raw_output``: the ``CallToolResult``);
            for a tool-level error, that text after ``Error: `` and ``is_error=True``; for
            a typed failure (timeout, server down or killed mid-call, denied, disabled),
            ``failure_message`` of it, ``is_error=True`` and the error as ``exception``.

        Raises:
            TypeError: Positional arguments other than one mapping (or the bare value of
                a one-argument tool).
            RuntimeError: The trio ``McpService`` awaited off trio (pass the asyncio facade).
        """
        ctx = kwargs.pop(_CONTEXT_KEY, None)
        arguments = self._arguments(args, kwargs)
        adapter = self._selected.adapter
        if ctx is not None:
            adapter = attrs.evolve(adapter, on_progress=self._progress_to(ctx))
        raw_input = {"args": (), "kwargs": arguments}
        name = self._selected.name
        try:
            result = await adapter.call(arguments)
        except McpActorsError as exc:
            text = failure_message(exc)
            return ToolOutput(
                blocks=[TextBlock(text=text)],
                tool_name=name,
                raw_input=raw_input,
                raw_output=text,
                is_error=True,
                exception=exc,
            )
        return ToolOutput(
            blocks=[TextBlock(text=flatten_result(result))],
            tool_name=name,
            raw_input=raw_input,
            raw_output=result,
            is_error=bool(result.is_error),
        )

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """:meth:`acall` from synchronous code (LlamaIndex runs it on a loop of its own)."""
        output: ToolOutput = asyncio_run(self.acall(*args, **kwargs))
        return output


class McpActorsToolSpec(BaseToolSpec):
    """The supervised servers' tools as a LlamaIndex tool spec.

    Each :meth:`to_tool_list_async` lists the servers anew, so a server that changed its
    tools (``tools/list_changed``), was added, disabled or removed is seen on the next
    listing; the runtime caches each server's list until it changes, and a tool whose
    listing did not change keeps its :class:`McpFunctionTool` (no model rebuilt). A server
    that cannot be listed is left out and reported in :attr:`failures`.

    Args:
        service: The asyncio facade (``portal.asyncio_service()``, or ``rt.service`` of
            :func:`mcp_actors.asyncio.open_runtime`), where LlamaIndex runs; or the
            runtime's trio ``McpService`` for an agent awaited on trio.
        servers: Server names or ids, in order; ``None`` means every active server.
        tools: Which tools (see :data:`~mcp_actors.integrations.ToolSelection`).
        naming: How tools are named (see :data:`~mcp_actors.integrations.ToolNaming`).
        timeout: The bound of each call, connecting and approval included (seconds).
        progress: Stream progress notifications as :class:`McpToolProgress` events (the
            tools then take the agent's ``Context``; ``CodeActAgent`` refuses such tools).
        return_direct: LlamaIndex's ``return_direct`` for every tool.

    Attributes:
        failures: The servers the last listing could not list, and why.

    Raises:
        TypeError: ``servers`` or ``tools`` is one string instead of a collection.
        ValueError: ``naming`` or ``timeout`` is not valid.
    """

    def __init__(
        self,
        service: McpService | RuntimeHop,
        servers: Iterable[str] | None = None,
        *,
        tools: ToolSelection = None,
        naming: ToolNaming = "id",
        timeout: float = DEFAULT_TOOL_TIMEOUT,
        progress: bool = False,
        return_direct: bool = False,
    ) -> None:
        servers = check_selection(servers, tools=tools, naming=naming, timeout=timeout)  # fail here, not later
        self.spec_functions: list[SPEC_FUNCTION_TYPE] = []  # BaseToolSpec's; these tools come from the servers
        self.service = service
        self.servers: tuple[str, ...] | None = servers
        self.tools = tools
        self.naming = naming
        self.timeout = timeout
        self.progress = progress
        self.return_direct = return_direct
        self.failures: Mapping[str, McpActorsError] = {}
        self._built: dict[str, McpFunctionTool] = {}

    async def to_tool_list_async(
        self,
        spec_functions: list[SPEC_FUNCTION_TYPE] | None = None,
        func_to_metadata_mapping: dict[str, ToolMetadata] | None = None,
    ) -> list[FunctionTool]:
        """List the servers now; one :class:`McpFunctionTool` per selected tool.

        Raises:
            TypeError: ``spec_functions`` or ``func_to_metadata_mapping`` given (they name
                methods of a hand-written spec; these tools come from the servers).
            ValueError: Two tools would get the same name (the message names both).
        """
        _refuse_spec_functions(spec_functions, func_to_metadata_mapping)
        selected, self.failures = await select_tools(
            self.service, self.servers, tools=self.tools, naming=self.naming, timeout=self.timeout
        )
        built: dict[str, McpFunctionTool] = {}
        for one in selected:
            tool = self._built.get(one.name)
            if tool is None or tool.mcp_tool != one.mcp_tool:  # by value: a re-listing makes new objects
                tool = McpFunctionTool(one, progress=self.progress, return_direct=self.return_direct)
            built[one.name] = tool
        self._built = built
        return list(built.values())

    def to_tool_list(
        self,
        spec_functions: list[SPEC_FUNCTION_TYPE] | None = None,
        func_to_metadata_mapping: dict[str, ToolMetadata] | None = None,
    ) -> list[FunctionTool]:
        """:meth:`to_tool_list_async` from synchronous code with no asyncio loop running.

        Raises:
            RuntimeError: Called while an asyncio loop runs in this thread (await
                :meth:`to_tool_list_async` there).
        """
        _refuse_spec_functions(spec_functions, func_to_metadata_mapping)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.to_tool_list_async())
        raise RuntimeError("to_tool_list() was called inside a running asyncio loop; await to_tool_list_async() there")


def _refuse_spec_functions(spec_functions: Collection[Any] | None, mapping: Mapping[str, Any] | None) -> None:
    if spec_functions is not None or mapping is not None:
        raise TypeError(
            "McpActorsToolSpec takes no spec_functions or func_to_metadata_mapping: its tools come from the"
            " servers; choose them with tools= and name them with naming="
        )


async def load_tools(
    service: McpService | RuntimeHop,
    servers: Iterable[str] | None = None,
    *,
    tools: ToolSelection = None,
    naming: ToolNaming = "id",
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    progress: bool = False,
    return_direct: bool = False,
) -> list[FunctionTool]:
    """The servers' tools as LlamaIndex ``FunctionTool``\\ s, listed now.

    For ``FunctionAgent(tools=await load_tools(service))``.

    The one-call form of :class:`McpActorsToolSpec` (same arguments); a server that cannot
    be listed is left out (and logged). Keep a spec instead to list again later.
    """
    spec = McpActorsToolSpec(
        service,
        servers,
        tools=tools,
        naming=naming,
        timeout=timeout,
        progress=progress,
        return_direct=return_direct,
    )
    return await spec.to_tool_list_async()
