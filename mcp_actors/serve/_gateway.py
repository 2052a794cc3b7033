"""The gateway's core: one MCP server's requests answered from every enabled server of a runtime.

Transport-free: the fronts (streamable HTTP, stdio) parse and frame, this module decides.
A request goes straight from the front's task into the runtime's :class:`McpService` in the
same trio run (no thread, no queue, no task of its own), so a tool call through the gateway
costs one look-up in a dict more than a call from the host itself.

The SDK's rules, used as the SDK's server uses them: every request is checked against the
protocol revision's surface (:func:`mcp_types.methods.validate_client_request`: an unknown
method or one the revision does not have is ``-32601``, a malformed one ``-32602``), every
result is shaped by the revision's surface (:func:`mcp_types.methods.serialize_server_result`,
which drops what the client's revision does not know), and a 2026-07-28 result carries
``resultType`` and the ``serverInfo`` stamp. The version is negotiated as the SDK negotiates
it (the client's when the gateway speaks it, else the newest handshake revision).

What each server offers is asked of it on each listing (the runtime caches tools for its TTL
and resources for five minutes, so a listing is cheap), concurrently and each bounded by
``list_timeout``: a server that is down, or too slow, is left out of that listing and never
fails it. Its tools keep their names (:class:`~mcp_actors.serve._names.NameTable`), so a call
to one of them while it is down is a tool error naming the server, not an unknown tool.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import mcp_types
import pydantic
import trio
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import x_mcp_header_map
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

from mcp_actors.connection import ConnectionState
from mcp_actors.errors import McpActorsError, ServerRequestFailed, ToolCallFailed
from mcp_actors.records import McpServerRecord
from mcp_actors.serve._client_requests import Ask, Caller, ClientRequests, client_capabilities
from mcp_actors.serve._names import Joined, NameTable, Naming, UriTable, uri_prefix
from mcp_actors.serve._subscriptions import Client, LogRelay, Subscriptions
from mcp_actors.serve._tasks import CAPABILITY as _TASKS_CAPABILITY
from mcp_actors.serve._tasks import LEGACY as _TASKS_LEGACY
from mcp_actors.serve._tasks import LEGACY_METHODS as _LEGACY_TASK_METHODS
from mcp_actors.serve._tasks import METHODS as _TASK_METHODS
from mcp_actors.serve._tasks import TASKS_EXTENSION, GatewayTasks, declared
from mcp_actors.service import McpService

if TYPE_CHECKING:
    from mcp_actors.serve._profiles import Profiles

__all__ = [
    "Answer",
    "Around",
    "DEFAULT_LIST_TIMEOUT",
    "Gateway",
    "Listener",
    "Request",
    "RpcError",
    "SERVER_NAME",
    "connect_all",
    "relay_changes",
]

logger = logging.getLogger("mcp_actors.serve")

SERVER_NAME: Final = "mcp-actors"
DEFAULT_LIST_TIMEOUT: Final = 10.0
"""Seconds one server may take to answer a listing before the listing goes on without it."""
_RELIST_AFTER: Final = 1.0
"""A name no listing handed out lists everything again at most this often (a flood of bad names lists nothing)."""
_INSTRUCTIONS: Final = (
    "One MCP server in front of several: each tool and prompt is named after the server that offers it"
    " (<server>__<name>); resources keep their URIs."
)
_MODERN: Final = frozenset(MODERN_PROTOCOL_VERSIONS)
_ASKABLE: Final = frozenset({"sampling", "elicitation", "roots"})
"""The client capabilities an upstream's request to the client needs (one of them)."""
_PLAIN_CALL_KEYS: Final = frozenset({"name", "arguments"})
_RESOURCE_NOT_FOUND: Final = -32002
"""The code MCP gives an unknown resource URI."""


class RpcError(Exception):
    """A JSON-RPC error answer: ``code``, ``message`` and optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        """The ``error`` member of the answer."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


Notify = Callable[[dict[str, Any]], None]
"""Sends one notification to the client that made a request, without waiting (it may be dropped)."""


@attrs.define(eq=False, slots=True)
class Request:
    """One client request as the core sees it.

    Attributes:
        method: The JSON-RPC method.
        params: Its params (``{}`` when absent).
        version: The protocol revision it is served at.
        notify: Where its notifications (progress, log messages) go, or ``None`` when nowhere.
        profile: The profile it is served as (the front's path selects it; ``None``:
            everything, no profile applies).
        ask: How an upstream's request (sampling, elicitation, roots) reaches the client on
            this request's stream (2025 revisions), or ``None`` when it cannot.
        client: The client (a 2025 session, the stdio client) for what outlives the request:
            its capabilities, its log level, its resource subscriptions; ``None`` at 2026-07-28.
        headers: The transport's headers (HTTP, lower-case names), or ``None``: where a trace
            context the request's ``_meta`` does not carry may be (``traceparent``).
    """

    method: str
    params: dict[str, Any]
    version: str
    notify: Notify | None = None
    profile: str | None = None
    ask: Ask | None = None
    client: Client | None = None
    headers: Mapping[str, str] | None = None


Answer = Callable[[Request], Awaitable[dict[str, Any]]]
"""What answers one request: the gateway's own handling, or the next :class:`Around`'s."""


class Around:
    """Work done around every request the gateway answers (metrics, tracing: ``mcp_actors.serve._metrics``).

    The gateway calls it with the request and what answers it; it awaits ``answer(request)``
    and returns (or raises) what that does. It runs in the request's task, so a span it makes
    current is the parent of the upstream call's.
    """

    async def __call__(self, request: Request, answer: Answer) -> dict[str, Any]:
        """Answer ``request`` with ``answer``, observing it."""
        raise NotImplementedError


class Listener:
    """A client that hears about list changes: a 2025 GET stream, a 2026 listen stream, stdio.

    The gateway calls :meth:`changed` with the kinds that changed (``tools``, ``prompts``,
    ``resources``); a listener never blocks it.
    """

    def changed(self, kinds: frozenset[str]) -> None:
        """Queue ``notifications/<kind>/list_changed`` for each kind this listener wants."""
        raise NotImplementedError

    def log(self, message: dict[str, Any], level: str) -> None:
        """Queue a server's log message sent outside a call, when this listener's client admits ``level``."""


def _dump(value: Any) -> dict[str, Any]:
    if isinstance(value, pydantic.BaseModel):
        dumped: dict[str, Any] = value.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    return dict(value)


def _plain_call(method: str, version: str, params: Mapping[str, Any]) -> bool:
    """Whether a request is a ``tools/call`` that the SDK's check passes whatever it holds, so it need not run.

    At a handshake revision, params of only a string ``name`` and an object (or null)
    ``arguments``: every such request validates (``tests/serve/test_plain_call.py``). The
    check is a pydantic validation of the whole request, a twentieth of the gateway's work
    on a call; anything else (``_meta``, ``task``, another type) still goes through it.
    """
    if method != "tools/call" or version in _MODERN or type(params.get("name")) is not str:
        return False
    arguments = params.get("arguments")
    return (arguments is None or type(arguments) is dict) and params.keys() <= _PLAIN_CALL_KEYS


def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _naming_of(naming: str | Naming | None) -> Naming:
    if naming is None:
        return Joined()
    if isinstance(naming, str):
        return Joined(naming)
    if callable(naming):
        return naming
    raise TypeError(f"naming must be a separator string or a function (server, name) -> str, got {naming!r}")


def _server_named(message: str, server: str) -> str:
    """``message``, prefixed with the server's name unless it already says it."""
    return message if repr(server) in message else f"server {server!r}: {message}"


@attrs.define(eq=False)
class Gateway:
    """Answers MCP requests for every enabled server of ``service``, under one name space.

    Args:
        service: The runtime's service (the one source of tools, prompts and resources).
        naming: ``"__"`` (the default) or another separator between server and item names,
            or a function ``(server name, item name) -> public name``.
        list_timeout: Seconds each server may take to answer a listing before the listing
            goes on without it.
        profiles: The profiles served (:mod:`mcp_actors.serve._profiles`); a request with a
            :attr:`Request.profile` is answered as that profile sees the gateway.
        around: What observes every request (:class:`Around`), or ``None``.
    """

    service: McpService
    naming: str | Naming | None = None
    list_timeout: float = DEFAULT_LIST_TIMEOUT
    profiles: Profiles | None = None
    around: Around | None = None
    tools: NameTable = attrs.field(init=False)
    prompts: NameTable = attrs.field(init=False)
    resources: UriTable = attrs.field(factory=UriTable, init=False)
    templates: UriTable = attrs.field(factory=UriTable, init=False)
    listeners: set[Listener] = attrs.field(factory=set, init=False)
    _naming: Naming = attrs.field(init=False)
    _listed_at: dict[str, float] = attrs.field(factory=dict, init=False)
    _server_names: dict[str, str] = attrs.field(factory=dict, init=False)
    header_schemas: dict[str, Any] = attrs.field(factory=dict, init=False)
    """Input schemas of the listed tools that mark arguments as ``Mcp-Param-*`` headers (2026-07-28), by public name."""
    _handlers: dict[str, Callable[[Request], Awaitable[Any]]] = attrs.field(factory=dict, init=False)
    relays: ClientRequests = attrs.field(init=False)
    """The upstreams' requests to the clients (sampling, elicitation, roots), by the call that caused them."""
    subscriptions: Subscriptions = attrs.field(init=False)
    logs: LogRelay = attrs.field(init=False)
    tasks: GatewayTasks = attrs.field(init=False)
    """The gateway's own tasks (2026-07-28, the tasks extension): calls whose upstream answered with a task."""

    def __attrs_post_init__(self) -> None:
        if not (isinstance(self.list_timeout, int | float) and 0 < self.list_timeout < math.inf):
            raise ValueError(f"list_timeout must be a positive number of seconds, got {self.list_timeout!r}")
        self._naming = _naming_of(self.naming)
        self.tools = NameTable(self._naming)
        self.prompts = NameTable(self._naming)
        self.relays = ClientRequests(server_names=self._server_name)
        self.tasks = GatewayTasks(self.relays, server_names=self._server_name)
        self.subscriptions = Subscriptions(self.service.subscribe_resource, self.service.unsubscribe_resource)
        self.logs = LogRelay(
            service_subscribe=self.service.subscribe,
            initialize_result=self.service.initialize_result,
            notifications_delivered=self.service.notifications_delivered,
            calls=self.relays,
            listeners=self.listeners,
            subscriptions=self.subscriptions,
        )
        self._handlers = {
            "ping": self._ping,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "prompts/list": self._list_prompts,
            "prompts/get": self._get_prompt,
            "resources/list": self._list_resources,
            "resources/templates/list": self._list_templates,
            "resources/read": self._read_resource,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "completion/complete": self._complete,
            "logging/setLevel": self._set_level,
            "server/discover": self._discover,
        }

    # ------------------------------------------------------------------ the protocol's frame

    @staticmethod
    def negotiate(requested: Any) -> str:
        """The handshake revision to answer an ``initialize`` with (the SDK's rule)."""
        return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION

    def capabilities(self, version: str) -> dict[str, Any]:
        """What the gateway offers at ``version`` (the same whatever its servers offer: it relays)."""
        caps: dict[str, Any] = {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "completions": {},
        }
        if version not in _MODERN:
            caps["logging"] = {}  # 2026-07-28 has no logging/setLevel: a request opts in by its _meta
            if version == _TASKS_LEGACY:
                caps["tasks"] = dict(_TASKS_CAPABILITY)
        else:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def server_info(self) -> dict[str, Any]:
        """The gateway's ``serverInfo``."""
        from mcp_actors import __version__

        return {"name": SERVER_NAME, "version": __version__}

    def initialize(self, params: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
        """The ``initialize`` result and the negotiated revision.

        Raises:
            RpcError: The params are not an ``initialize`` request's.
        """
        try:
            init = mcp_types.InitializeRequestParams.model_validate(params or {}, by_name=False)
        except pydantic.ValidationError as exc:
            raise RpcError(mcp_types.INVALID_PARAMS, "Invalid request parameters", _errors(exc)) from None
        version = self.negotiate(init.protocol_version)
        result = {
            "protocolVersion": version,
            "capabilities": self.capabilities(version),
            "serverInfo": self.server_info(),
            "instructions": _INSTRUCTIONS,
        }
        return _methods.serialize_server_result("initialize", version, result), version

    async def handle(self, request: Request) -> dict[str, Any]:
        """Answer one request; the result in its wire form for ``request.version``.

        Raises:
            RpcError: The JSON-RPC error to answer with.
        """
        if request.profile is not None and self.profiles is not None and self.profiles.applies(request.profile):
            # A profile answers through the core with a plain request (``_profiles``): that one is observed.
            return await self.profiles.handle(self, request)
        if self.around is not None:
            return await self.around(request, self._handle)
        return await self._handle(request)

    async def _handle(self, request: Request) -> dict[str, Any]:
        """:meth:`handle` without what observes it."""
        method, version = request.method, request.version
        if version in _MODERN and method in _TASK_METHODS:
            return await self._task_request(request)
        if version == _TASKS_LEGACY and method in _LEGACY_TASK_METHODS:
            return await self._task_request(request)
        if not _plain_call(method, version, request.params):
            try:
                _methods.validate_client_request(method, version, request.params)
            except KeyError:
                raise RpcError(mcp_types.METHOD_NOT_FOUND, "Method not found", method) from None
            except pydantic.ValidationError as exc:
                raise RpcError(mcp_types.INVALID_PARAMS, "Invalid request parameters", _errors(exc)) from None
        handler = self._handlers.get(method)
        if handler is None:
            raise RpcError(mcp_types.METHOD_NOT_FOUND, "Method not found", method)
        try:
            result = _dump(await handler(request))
        except RpcError:
            raise
        except McpActorsError as exc:  # the runtime refused (a config it cannot read, a server gone)
            raise RpcError(mcp_types.INTERNAL_ERROR, str(exc)) from None
        except (ValueError, TypeError) as exc:  # arguments the service refuses (they passed the schema)
            raise RpcError(mcp_types.INVALID_PARAMS, str(exc)) from None
        except Exception:
            # A fault of ours: this request fails, the gateway and the connection go on.
            logger.exception("the gateway failed on a %s request", method)
            raise RpcError(mcp_types.INTERNAL_ERROR, "the gateway failed on this request") from None
        if version in _MODERN and result.get("resultType") == "task":
            return self._stamped(result)  # the extension's CreateTaskResult: not a shape the SDK's surface has
        if version == _TASKS_LEGACY and method == "tools/call" and "task" in result:
            return result  # CreateTaskResult: the SDK's surface has no tasks
        if version in _MODERN:
            result.setdefault("resultType", "complete")
            if method in _methods.CACHEABLE_METHODS:
                # Immediately stale and private (the SDK's default hint): what the gateway lists
                # changes whenever one of its servers does, and a list change is announced.
                result.setdefault("ttlMs", 0)
                result.setdefault("cacheScope", "private")
        try:
            wire = _methods.serialize_server_result(method, version, result)
        except (KeyError, pydantic.ValidationError):
            logger.exception("the gateway built an invalid %s result", method)
            raise RpcError(mcp_types.INTERNAL_ERROR, "the gateway built an invalid result") from None
        if version in _MODERN:
            meta = wire.get("_meta")
            stamp = {mcp_types.SERVER_INFO_META_KEY: self.server_info()}
            wire["_meta"] = {**meta, **stamp} if isinstance(meta, dict) else stamp
        return wire

    def _stamped(self, wire: dict[str, Any]) -> dict[str, Any]:
        meta = wire.get("_meta")
        stamp = {mcp_types.SERVER_INFO_META_KEY: self.server_info()}
        wire["_meta"] = {**meta, **stamp} if isinstance(meta, dict) else stamp
        return wire

    async def _task_request(self, request: Request) -> dict[str, Any]:
        """``tasks/get``, ``tasks/update``, ``tasks/cancel`` (the extension's, outside the SDK's surface)."""
        try:
            if request.version == _TASKS_LEGACY:
                owner = request.client if request.client is not None else request
                return await self.tasks.handle_legacy(request.method, request.params, owner, request.ask)
            result = await self.tasks.handle(request.method, request.params)
        except MCPError as exc:
            raise RpcError(exc.error.code, exc.error.message, exc.error.data) from None
        return self._stamped({"resultType": "complete", **result})

    # ------------------------------------------------------------------ listings

    async def _records(self) -> list[McpServerRecord]:
        records = [record for record in await self.service.list() if record.is_active]
        ids = [record.id for record in records]
        for table in (self.tools, self.prompts, self.resources, self.templates):
            table.keep_only(ids)
        self._server_names = {record.id: record.name for record in records}
        return records

    async def _each_server(
        self, kind: str, records: list[McpServerRecord], fetch: Callable[[str], Awaitable[list[Any]]]
    ) -> dict[str, list[Any]]:
        """Every server's items of ``kind``, asked concurrently; a server that fails or is slow is left out."""
        found: dict[str, list[Any]] = {}

        async def one(record: McpServerRecord) -> None:
            status = self.service.status(record.id)
            if status.state is ConnectionState.ERROR:
                logger.debug("server %s is down (%s): its %s are left out", record.name, status.error, kind)
                return
            with trio.move_on_after(self.list_timeout) as scope:
                try:
                    found[record.id] = await fetch(record.id)
                except McpActorsError as exc:
                    logger.warning("server %s: listing %s failed, left out: %s", record.name, kind, exc)
            if scope.cancelled_caught:
                bound = self.list_timeout
                logger.warning("server %s did not list its %s within %gs: left out", record.name, kind, bound)

        async with trio.open_nursery() as nursery:
            for record in records:
                nursery.start_soon(one, record)
        return found

    async def _list_tools(self, request: Request | None = None) -> dict[str, Any]:
        records = await self._records()
        found = await self._each_server("tools", records, self.service.list_server_tools)
        self._listed_at["tools"] = time.monotonic()
        tools = []
        for record in records:
            for tool in found.get(record.id, ()):
                wire = (
                    _dump(tool.definition)
                    if tool.definition is not None
                    else {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
                )
                name = wire["name"] = self.tools.claim(record.id, record.name, tool.name)
                if request is not None and request.version == _TASKS_LEGACY:
                    # Any call can be a task of the gateway's (a runtime call it runs): optional
                    # unless the server's own listing says otherwise.
                    wire.setdefault("execution", {}).setdefault("taskSupport", "optional")
                if x_mcp_header_map(tool.input_schema):
                    self.header_schemas[name] = tool.input_schema
                else:
                    self.header_schemas.pop(name, None)
                tools.append(wire)
        return {"tools": tools}

    async def _list_prompts(self, request: Request | None = None) -> dict[str, Any]:
        records = await self._records()
        found = await self._each_server("prompts", records, self.service.list_prompts)
        self._listed_at["prompts"] = time.monotonic()
        prompts = []
        for record in records:
            for prompt in found.get(record.id, ()):
                wire = _dump(prompt)
                wire["name"] = self.prompts.claim(record.id, record.name, prompt.name)
                prompts.append(wire)
        return {"prompts": prompts}

    async def _list_resources(self, request: Request | None = None) -> dict[str, Any]:
        records = await self._records()
        found = await self._each_server("resources", records, self.service.list_resources)
        resources = []
        for record in records:
            for resource in found.get(record.id, ()):
                wire = _dump(resource)
                wire["uri"] = self.resources.claim(record.id, record.name, str(resource.uri))
                resources.append(wire)
        return {"resources": resources}

    async def _list_templates(self, request: Request | None = None) -> dict[str, Any]:
        records = await self._records()
        found = await self._each_server("resource templates", records, self.service.list_resource_templates)
        templates = []
        for record in records:
            for template in found.get(record.id, ()):
                wire = _dump(template)
                wire["uriTemplate"] = self.templates.claim(record.id, record.name, template.uri_template)
                templates.append(wire)
        return {"resourceTemplates": templates}

    # ------------------------------------------------------------------ look-ups

    async def _target(self, kind: str, table: NameTable, name: str) -> tuple[str, str]:
        """``(server id, item name)`` of a public tool or prompt name, listing again once if it is new."""
        target = table.resolve(name)
        if target is None and time.monotonic() - self._listed_at.get(kind, -math.inf) > _RELIST_AFTER:
            await (self._list_tools() if kind == "tools" else self._list_prompts())
            target = table.resolve(name)
        if target is None:
            target = self._by_naming(name)
        if target is None and len(self._server_names) == 1 and not isinstance(self._naming, Joined):
            # One server under a naming of the caller's (a gateway in front of one server keeps its
            # names): the server itself answers for a name it never listed, as it would directly.
            target = next(iter(self._server_names)), name
        if target is None:
            what = "tool" if kind == "tools" else "prompt"
            raise RpcError(mcp_types.INVALID_PARAMS, f"Unknown {what}: {name}")
        return target

    def _by_naming(self, name: str) -> tuple[str, str] | None:
        """A name the default naming would give an item of a configured server never listed (it is down)."""
        naming = self._naming
        if not isinstance(naming, Joined):
            return None
        split = naming.split(name)
        if split is None:
            return None
        server_part, item = split
        for server_id, server_name in self._server_names.items():
            if naming.server_part(server_name) == server_part:
                return server_id, item
        return None

    def _server_name(self, server_id: str) -> str:
        return self._server_names.get(server_id, server_id)

    # ------------------------------------------------------------------ requests

    async def _ping(self, request: Request) -> dict[str, Any]:
        return {}

    async def _discover(self, request: Request) -> dict[str, Any]:
        return {
            "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
            "capabilities": self.capabilities(request.version),
            "serverInfo": self.server_info(),
            "instructions": _INSTRUCTIONS,
        }

    async def _call_tool(self, request: Request) -> Any:
        params = request.params
        name = params["name"]
        server_id, tool = await self._target("tools", self.tools, name)
        on_progress = None
        meta = params.get("_meta")
        if request.notify is not None and isinstance(meta, dict) and meta.get("progressToken") is not None:
            on_progress = _ProgressRelay(request.notify, meta["progressToken"])
        if request.version == _TASKS_LEGACY and "task" in params:
            try:
                await self.tasks.check_allowed(self.service, server_id, tool, name)
            except MCPError as exc:
                raise RpcError(exc.error.code, exc.error.message) from None
        caller = self._caller(request, server_id)
        # At 2026-07-28 the upstream learns the client's capabilities from each request: the
        # relayed client's, so it asks only what that client can answer (and refuses with -32021
        # what needs a capability the client lacks); and it sends log messages only when asked.
        call_meta: dict[str, Any] = {mcp_types.CLIENT_CAPABILITIES_META_KEY: dict(caller.capabilities)}
        if caller.log_level != "off":
            call_meta[mcp_types.LOG_LEVEL_META_KEY] = caller.log_level or "debug"

        async def call() -> Any:
            return await self.service.call_tool(
                server_id, tool, params.get("arguments") or {}, on_progress=on_progress, meta=call_meta
            )

        try:
            return await self._with_caller(request, caller, call)
        except ToolCallFailed as exc:
            if exc.code != mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY:
                return _tool_error(_server_named(str(exc), self._server_name(server_id)))
            # About the client, not the tool: the client handles it in protocol form (the same
            # error, its requiredCapabilities, HTTP 400 at 2026-07-28), as from the server itself.
            raise RpcError(exc.code, _server_named(str(exc), self._server_name(server_id)), exc.data) from None
        except McpActorsError as exc:
            # Every failure of the call is the tool's to report (MCP: tool errors are results the
            # model sees), naming the server: a server that is down costs only its own tools.
            return _tool_error(_server_named(str(exc), self._server_name(server_id)))

    async def _get_prompt(self, request: Request) -> Any:
        params = request.params
        server_id, prompt = await self._target("prompts", self.prompts, params["name"])

        async def get() -> Any:
            return await _relayed(self.service.get_prompt(server_id, prompt, params.get("arguments") or {}))

        return await self._with_caller(request, self._caller(request, server_id), get)

    def _resource_target(self, uri: str) -> tuple[str, str]:
        """``(server id, original URI)`` for a URI to read: listed, renamed, or matching a server's template."""
        target = self.resources.resolve(uri)
        if target is not None:
            return target
        prefix, plus, rest = uri.partition("+")
        if plus:
            servers = self._server_names.items()
            for server_id, server_name in servers:
                if uri_prefix(server_name) == prefix:
                    return server_id, rest
            for server_id, server_name in servers:
                head = uri_prefix(server_name)
                if prefix.startswith(head) and prefix[len(head) :].isdigit():
                    return server_id, rest
        from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

        for public, (server_id, _original) in self.templates.items():
            try:
                if UriTemplate.parse(public).match(uri) is not None:
                    return server_id, uri
            except InvalidUriTemplate:
                continue
        if len(self._server_names) == 1:
            return next(iter(self._server_names)), uri
        raise RpcError(_RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})

    async def resource_target(self, uri: str) -> tuple[str, str]:
        """``(server id, original URI)`` that a read of ``uri`` goes to (what a profile checks).

        Raises:
            RpcError: No server owns ``uri`` (resource not found).
        """
        if not self._server_names:
            await self._records()
        return self._resource_target(uri)

    async def _read_resource(self, request: Request) -> Any:
        uri = request.params["uri"]
        if not self._server_names:
            await self._records()
        server_id, original = self._resource_target(uri)

        async def read() -> Any:
            return await _relayed(self.service.read_resource(server_id, original))

        result = _dump(await self._with_caller(request, self._caller(request, server_id), read))
        if result.get("resultType") == "input_required":
            return result
        if original != uri:
            for content in result.get("contents", ()):
                if content.get("uri") == original:
                    content["uri"] = uri
        return result

    async def _subscribe(self, request: Request) -> dict[str, Any]:
        uri = request.params["uri"]
        client = request.client
        if client is None:
            raise RpcError(
                mcp_types.INVALID_REQUEST, "resources/subscribe needs a session: subscribe on a listen stream"
            )
        if not self._server_names:
            await self._records()
        server_id, original = self._resource_target(uri)
        await _relayed(self.subscriptions.add(client, client.notify, server_id, original, uri))
        return {}

    async def _unsubscribe(self, request: Request) -> dict[str, Any]:
        uri = request.params["uri"]
        client = request.client
        if client is None:
            raise RpcError(mcp_types.INVALID_REQUEST, "resources/unsubscribe needs a session")
        if not self._server_names:
            await self._records()
        server_id, original = self._resource_target(uri)
        await self.subscriptions.remove(client, server_id, original)
        return {}

    async def listen_resources(self, subscriber: Any, uris: Any, meta: Mapping[str, Any]) -> list[str]:
        """Subscribe a 2026-07-28 listen stream to ``uris`` (its ``resourceSubscriptions``); the URIs honoured.

        A URI no server can be found for, or whose server refuses, is left out of the
        acknowledgement (the revision's way to say it is not honoured).
        """
        if not isinstance(uris, list) or not uris:
            return []
        if not self._server_names:
            await self._records()

        def notify(message: dict[str, Any]) -> None:
            message["params"] = {**message.get("params", {}), "_meta": dict(meta)}
            subscriber.notify(message)

        honoured = []
        for uri in uris:
            if not isinstance(uri, str):
                continue
            try:
                server_id, original = self._resource_target(uri)
                await self.subscriptions.add(subscriber, notify, server_id, original, uri)
            except (RpcError, McpActorsError) as exc:
                logger.info("subscriptions/listen: %s is not honoured: %s", uri, exc)
                continue
            honoured.append(uri)
        return honoured

    # ------------------------------------------------------------------ calls an upstream may ask things of

    def _caller(self, request: Request, server_id: str) -> Caller:
        """Who an upstream's request during this call goes to, with what the client declared."""
        if request.version in _MODERN:
            meta = request.params.get("_meta")
            level = meta.get(mcp_types.LOG_LEVEL_META_KEY) if isinstance(meta, dict) else None
            return Caller(
                server_id,
                client=request,
                capabilities=client_capabilities(request.params),
                notify=request.notify,
                log_level=level if isinstance(level, str) else "off",
            )
        client = request.client
        return Caller(
            server_id,
            client=client if client is not None else request,
            capabilities=client.capabilities if client is not None else {},
            ask=request.ask,
            notify=request.notify,
            log_level=client.log_level if client is not None else None,
        )

    async def _with_caller(self, request: Request, caller: Caller, op: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``op`` (a request to ``caller.server_id``) with its caller known to the relays.

        A 2026-07-28 request whose client can be asked something (it declared sampling,
        elicitation or roots), or that resumes a parked call, runs as a parked call; any other
        runs in the request's own task, as at the handshake revisions (no task of its own).
        """
        if request.version == _TASKS_LEGACY and request.method == "tools/call" and "task" in request.params:
            owner = request.client if request.client is not None else request
            try:
                return await self.tasks.start(caller, owner, request.params, op)
            except MCPError as exc:
                raise RpcError(exc.error.code, exc.error.message, exc.error.data) from None
        if request.version in _MODERN and request.method == "tools/call" and declared(request.params):

            async def as_task() -> Any:
                result = await op()
                await self.logs.settle(caller.server_id, caller.log_level)
                return result

            try:
                return await self.tasks.call(caller, request.params, as_task)
            except MCPError as exc:
                raise RpcError(exc.error.code, exc.error.message, exc.error.data) from None
        if request.version in _MODERN and (
            "requestState" in request.params or not _ASKABLE.isdisjoint(caller.capabilities)
        ):

            async def settled() -> Any:
                result = await op()
                await self.logs.settle(caller.server_id, caller.log_level)
                return result

            try:
                return await self.relays.run_parked(caller, request.params, settled)
            except MCPError as exc:
                raise RpcError(exc.error.code, exc.error.message, exc.error.data) from None
        with self.relays.calling(caller):
            result = await op()
            await self.logs.settle(caller.server_id, caller.log_level)
        return result

    async def _complete(self, request: Request) -> Any:
        params = request.params
        ref = dict(params["ref"])
        if ref.get("type") == "ref/prompt":
            server_id, ref["name"] = await self._target("prompts", self.prompts, ref["name"])
        else:
            target = self.templates.resolve(ref["uri"])
            if target is None:
                raise RpcError(mcp_types.INVALID_PARAMS, f"Unknown resource template: {ref['uri']}")
            server_id, ref["uri"] = target
        context = (params.get("context") or {}).get("arguments")
        completion = await _relayed(self.service.complete(server_id, ref, params["argument"], context))
        return {"completion": _dump(completion)}

    async def _set_level(self, request: Request) -> dict[str, Any]:
        level = request.params["level"]
        if request.client is not None:
            request.client.log_level = level  # what the gateway relays to this client from now on
        records = await self._records()

        async def one(record: McpServerRecord) -> None:
            if self.service.status(record.id).state is not ConnectionState.CONNECTED:
                return
            with trio.move_on_after(self.list_timeout):
                try:
                    await self.service.set_log_level(record.id, level)
                except McpActorsError as exc:
                    logger.info("server %s: logging/setLevel failed: %s", record.name, exc)

        async with trio.open_nursery() as nursery:
            for record in records:
                nursery.start_soon(one, record)
        return {}

    # ------------------------------------------------------------------ list changes

    def changed(self, kinds: frozenset[str]) -> None:
        """Tell every listener that the listings of ``kinds`` changed."""
        for listener in list(self.listeners):
            listener.changed(kinds)


@attrs.define(eq=False, slots=True)
class _ProgressRelay:
    """A call's progress, relayed to its client with the client's own token (never blocking the upstream)."""

    notify: Notify
    token: Any

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        params: dict[str, Any] = {"progressToken": self.token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


async def _relayed(coro: Awaitable[Any]) -> Any:
    """Await a request to a server; its refusal becomes the same JSON-RPC error, a failure an internal one."""
    try:
        return await coro
    except ServerRequestFailed as exc:
        raise RpcError(exc.code, str(exc)) from None
    except McpActorsError as exc:
        raise RpcError(mcp_types.INTERNAL_ERROR, str(exc)) from None


def _errors(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    """The validation errors, without the input values (a client's arguments are not echoed)."""
    return [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]


_EVENT_KINDS: Final[Mapping[str, frozenset[str]]] = {
    "tools:changed": frozenset({"tools"}),
    "resources:changed": frozenset({"resources"}),
    "prompts:changed": frozenset({"prompts"}),
    "servers:changed": frozenset({"tools", "prompts", "resources"}),
    "server:connected": frozenset({"tools", "prompts", "resources"}),
}
_WATCHED: Final = frozenset({*_EVENT_KINDS, "connection:state"})
"""What the relay subscribes to: list changes only, so a tool call costs the relay nothing."""
_COALESCE: Final = 0.05
"""Seconds the relay gathers events before it tells the clients (a server starting emits several)."""


def _kinds_of(event: Any) -> frozenset[str]:
    kinds = _EVENT_KINDS.get(str(event.type))
    if kinds is not None:
        return kinds
    if event.type == "connection:state" and event.data.get("state") in ("error", "disconnected"):
        return frozenset({"tools", "prompts", "resources"})  # its items leave the listings
    return frozenset()


async def relay_changes(gateway: Gateway, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Tell the gateway's listeners of every list change in the runtime, until cancelled; run the relays.

    The relays (:mod:`~mcp_actors.serve._client_requests`, :mod:`~mcp_actors.serve._subscriptions`)
    take the runtime's host callbacks and its log and resource-update events for as long.

    Events within :data:`_COALESCE` seconds of each other make one notification per kind.
    """
    async with trio.open_nursery() as relays:
        await relays.start(gateway.relays.run, gateway.service.host_callbacks)
        await relays.start(gateway.subscriptions.run)
        await relays.start(gateway.logs.run)
        await _relay_list_changes(gateway, task_status)


async def _relay_list_changes(gateway: Gateway, task_status: trio.TaskStatus[None]) -> None:
    with gateway.service.subscribe(types=_WATCHED) as events:
        task_status.started()
        while True:
            kinds = _kinds_of(await events.receive())
            if not kinds:
                continue
            with trio.move_on_after(_COALESCE):
                while True:
                    kinds |= _kinds_of(await events.receive())
            gateway.changed(kinds)


async def connect_all(service: McpService) -> None:
    """Connect every enabled server now, concurrently, so a client's first listing finds them up.

    A server that fails shows as left out of the listings (and in the log), never as an error here.
    """

    async def one(record: McpServerRecord) -> None:
        try:
            await service.connect(record.id)
        except McpActorsError as exc:
            logger.warning("server %s did not connect: %s", record.name, exc)

    async with trio.open_nursery() as nursery:
        for record in await service.list():
            if record.is_active:
                nursery.start_soon(one, record)
