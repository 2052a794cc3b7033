"""One established connection and the one path every request takes over it.

A :class:`LiveSession` is created by the connection actor when ``initialize`` succeeds and
ended by it, exactly once, when the connection dies or is closed. Requests
(``tools/call``, ``tools/list``, ``ping``, ...) run in the *caller's* task through
:meth:`LiveSession.request`: the session multiplexes them, so there is nothing for a
mailbox to serialise. Each request registers itself for its duration; ending the session
fails every registered request with the end's error by cancelling its scope.

``tools/call`` is sent by :meth:`LiveSession.call_tool` straight through the session's
dispatcher (:class:`~mcp_actors._wire.dispatch.WireDispatcher`): a params dict out,
stamped as the SDK's session would stamp it (:class:`RequestStamp`, rebuilt from the
negotiated version and what we gave the session), the answer validated once into
``CallToolResult`` and its ``structuredContent`` checked against the ``outputSchema`` this
session listed. Every tool call takes this path; the SDK's ``call_tool`` (a pydantic request
model, the result validated twice) is not used.

The ordering rule (DESIGN §5, "state lags failures" fixed): the actor publishes the death
(state ``error`` and its event) *before* it calls :meth:`LiveSession.end`, and a request
that notices a closed stream itself never fails on its own: it marks the transport dead
and waits to be ended by the actor. So no caller sees a failure before the state says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Final, TypeVar, Union, get_args

import attrs
import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.shared.dispatcher import CallOptions, ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field, TypeAdapter, ValidationError

from mcp_actors._config.sdk_logs import SDK_LOGS_OWNED
from mcp_actors._connection.tasks import TASKS_EXTENSION, ExtensionTask
from mcp_actors._wire.dispatch import MalformedReply, WireDispatcher
from mcp_actors._wire.transports import TransportLink
from mcp_actors.errors import (
    ConnectionFailed,
    McpActorsError,
    ServerProtocolError,
    ServerRequestFailed,
    ToolCallFailed,
    ToolCallTimeout,
)

__all__ = ["LiveSession", "ProgressDeadline", "RequestStamp", "SessionEnded"]

T = TypeVar("T")

_END_GRACE = 10.0
"""Seconds a request that found the transport dead waits for the actor to end the session."""
_NOTHING_OWED: Final[frozenset[trio.CancelScope]] = frozenset()
"""What a request that is not a ping takes note of as it starts: nothing (no set built per call)."""


_PLAIN_RESULT: Final = mcp_types.CallToolResult.__pydantic_validator__
_CALL_RESULT: Final[TypeAdapter[mcp_types.CallToolResult | mcp_types.InputRequiredResult]] = TypeAdapter(
    mcp_types.CallToolResult | mcp_types.InputRequiredResult
)
"""What a ``tools/call`` answers (2026-07-28 may ask for input first): validated once, here."""

_CONTENT: Final[TypeAdapter[list[mcp_types.ContentBlock]]] = TypeAdapter(
    list[Annotated[Union[get_args(mcp_types.ContentBlock)], Field(discriminator="type")]]  # type: ignore[arg-type, misc]  # noqa: UP007
)
"""A result's ``content``: the SDK's ``ContentBlock`` members, picked by their ``type`` literal.

The SDK's union is a plain one: pydantic tries every member on every block (7.4 us for one
text block, against 2.4 us for this list of it, measured). The members' ``type`` fields are
distinct literals, so both accept exactly the same blocks and build the same SDK models.
"""
_CONTENT_BLOCKS: Final = _CONTENT.validator
"""Its core validator, called directly: the adapter's ``validate_python`` is a Python layer per call."""


CallAnswer = mcp_types.CallToolResult | mcp_types.InputRequiredResult | ExtensionTask
"""What a ``tools/call`` may answer: the result, a request for input (2026-07-28), or a task (the extension)."""


def _call_result(raw: dict[str, Any]) -> CallAnswer:
    """Validate a ``tools/call`` answer once: as a ``CallToolResult`` unless it asks for input or is a task.

    The union's validator tries both models (9 us against 5.5 us for one, measured); an
    answer that does not say ``input_required`` is almost always a plain result, and the
    union decides only what that first try refuses (its error then names both models). A
    ``resultType: "task"`` is the tasks extension's ``CreateTaskResult``; whether the server
    may answer one is the caller's to judge (it negotiated the extension or not).
    """
    result_type = raw.get("resultType", "complete")
    if result_type == "task":
        return ExtensionTask.model_validate(raw, by_name=False)
    if result_type == "complete":
        content = raw.get("content")
        if type(content) is list:
            try:
                blocks = _CONTENT_BLOCKS.validate_python(content, by_name=False)
            except ValidationError:
                pass  # the whole result's validation below names the fault
            else:
                raw = {**raw, "content": blocks}  # models already: the result's union takes them as they are
        try:
            plain: mcp_types.CallToolResult = _PLAIN_RESULT.validate_python(raw, by_name=False)
        except ValidationError:
            pass
        else:
            return plain
    return _CALL_RESULT.validate_python(raw, by_name=False)


def client_capabilities(host_kwargs: Mapping[str, Any], version: str | None = None) -> mcp_types.ClientCapabilities:
    """The capabilities the SDK's session declares at ``version`` for what we give it (its rule, restated).

    ``ClientSession`` declares sampling (with the given ``sampling_capabilities``),
    elicitation (form and URL) and roots (``listChanged``) exactly when the callback is
    given; we give only the offered ones (``HostCallbacks.session_kwargs``). It declares the
    ``extensions`` it was given, except one whose result claims are none of them active at
    ``version`` (a claim is active at the 2026-07-28 revisions it names, all of them by
    default, never before): the tasks extension's (:func:`~mcp_actors._connection.tasks.session_kwargs`).
    """
    sampling = (
        host_kwargs.get("sampling_capabilities") or mcp_types.SamplingCapability()
        if host_kwargs.get("sampling_callback") is not None
        else None
    )
    elicitation = (
        mcp_types.ElicitationCapability(
            form=mcp_types.FormElicitationCapability(), url=mcp_types.UrlElicitationCapability()
        )
        if host_kwargs.get("elicitation_callback") is not None
        else None
    )
    roots = mcp_types.RootsCapability(list_changed=True) if host_kwargs.get("list_roots_callback") is not None else None
    extensions: dict[str, dict[str, Any]] | None = host_kwargs.get("extensions")
    claims: Mapping[str, Any] = host_kwargs.get("result_claims") or {}
    if extensions is not None:

        def active(claim: Any) -> bool:
            return version in MODERN_PROTOCOL_VERSIONS and (
                claim.protocol_versions is None or version in claim.protocol_versions
            )

        extensions = {
            key: settings
            for key, settings in extensions.items()
            if key not in claims or any(active(claim) for claim in claims[key])
        } or None
    return mcp_types.ClientCapabilities(sampling=sampling, elicitation=elicitation, roots=roots, extensions=extensions)


@attrs.frozen(kw_only=True)
class RequestStamp:
    """What every request of a negotiated session carries, rebuilt from public facts.

    The SDK's session stamps each request it sends: on 2026-07-28 the ``_meta`` keys of the
    stateless revision (protocol version, client info, client capabilities, an optional
    log level) and the ``Mcp-*`` headers (version, method, name, ``x-mcp-header`` params);
    on the handshake revisions the protocol-version header only. Requests we send through
    the dispatcher ourselves (``tools/call``) carry the same, built from the negotiated
    version and what we passed to the session, never from its private members.

    Attributes:
        version: The negotiated protocol version.
        meta: The ``_meta`` entries of a 2026-07-28 session (``None`` on a handshake revision).
        log_level: A default ``logLevel`` entry (2026-07-28), overridable per request.
        taskless_meta: ``meta`` without the tasks extension in its capabilities: a
            ``tools/call`` that must not become a task declares no support for one (the
            server may then not answer with a task). ``meta`` itself when it has none.
    """

    version: str
    meta: Mapping[str, Any] | None = None
    log_level: str | None = None
    modern: bool = False
    """Whether ``version`` is a 2026-07-28 revision (the stateless one: ``meta`` is set)."""
    taskless_meta: Mapping[str, Any] | None = None

    @classmethod
    def negotiated(
        cls,
        session: ClientSession,
        *,
        client_info: mcp_types.Implementation,
        host_kwargs: Mapping[str, Any],
        log_level: str | None = None,
    ) -> RequestStamp:
        """The stamp of an initialized session (``session.protocol_version`` is set)."""
        version = session.protocol_version
        if version is None:
            raise RuntimeError("the session has not negotiated a protocol version yet")
        if version not in MODERN_PROTOCOL_VERSIONS:
            return cls(version=version)
        dump: dict[str, Any] = {"by_alias": True, "mode": "json", "exclude_none": True}
        capabilities = client_capabilities(host_kwargs, version)
        meta = {
            PROTOCOL_VERSION_META_KEY: version,
            CLIENT_INFO_META_KEY: client_info.model_dump(**dump),
            CLIENT_CAPABILITIES_META_KEY: capabilities.model_dump(**dump),
        }
        taskless: Mapping[str, Any] = meta
        if capabilities.extensions and TASKS_EXTENSION in capabilities.extensions:
            others = {key: value for key, value in capabilities.extensions.items() if key != TASKS_EXTENSION}
            plain = capabilities.model_copy(update={"extensions": others or None})
            taskless = {**meta, CLIENT_CAPABILITIES_META_KEY: plain.model_dump(**dump)}
        return cls(version=version, meta=meta, log_level=log_level, modern=True, taskless_meta=taskless)

    def apply(
        self,
        method: str,
        params: dict[str, Any],
        opts: CallOptions,
        *,
        param_headers: Mapping[str, str] | None = None,
        tasks: bool = True,
    ) -> None:
        """Stamp one outgoing request's ``params`` and ``opts`` in place (as the SDK's session does).

        ``tasks=False`` leaves the tasks extension out of this request's capabilities.
        """
        headers = opts.setdefault("headers", {})
        headers[MCP_PROTOCOL_VERSION_HEADER] = self.version
        if self.meta is None:
            return
        stamp = self.meta if tasks or self.taskless_meta is None else self.taskless_meta
        given = params.get("_meta", {})
        meta = params["_meta"] = {**given, **stamp}
        if CLIENT_CAPABILITIES_META_KEY in given:
            # A caller that relays another client's request (the gateway) declares that client's capabilities.
            meta[CLIENT_CAPABILITIES_META_KEY] = given[CLIENT_CAPABILITIES_META_KEY]
        if self.log_level is not None:
            meta.setdefault(LOG_LEVEL_META_KEY, self.log_level)
        headers[MCP_METHOD_HEADER] = method
        name_key = NAME_BEARING_METHODS.get(method) or _TASK_ROUTED.get(method)
        if name_key is not None and isinstance(name := params.get(name_key), str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        if param_headers:
            headers.update(param_headers)


_TASK_ROUTED: Final[Mapping[str, str]] = {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
"""The extension's methods whose ``Mcp-Name`` header carries the task id (SEP-2663: load balancers
route a task's requests to the instance holding it). The SDK's table knows only the core methods."""

_REFUSED_HINTS: Final[Mapping[str, str]] = {
    "resources/read": "see what it offers with 'mcp-actors resources list {server}' (and --templates)",
    "resources/subscribe": "see what it offers with 'mcp-actors resources list {server}' (and --templates)",
    "resources/unsubscribe": "see what it offers with 'mcp-actors resources list {server}' (and --templates)",
    "prompts/get": "see its prompts and their arguments with 'mcp-actors prompts list {server}'",
    "completion/complete": "check the prompt or template and its argument with 'mcp-actors discover {server}'",
}
_REFUSED_HINT: Final = (
    "the connection is fine: fix the request and retry ('mcp-actors discover {server}' shows what it offers)"
)


def _refused(server: str, what: str, error: mcp_types.ErrorData) -> ServerRequestFailed:
    """The typed error for a server's JSON-RPC error reply to a request other than ``tools/call``.

    Names the server, the method and the server's own message, and says what to do next.
    """
    hint = _REFUSED_HINTS.get(what, _REFUSED_HINT).format(server=server)
    return ServerRequestFailed(
        f"server {server!r}: {what} failed: {error.message} (code {error.code}); {hint}",
        server=server,
        method=what,
        code=error.code,
    )


class SessionEnded(Exception):
    """The session ended before the request was registered; nothing was sent, so ask for a fresh one."""


@attrs.define(eq=False)
class ProgressDeadline:
    """A request deadline that progress pushes back (``resetTimeoutOnProgress``), never past a hard bound.

    Attributes:
        max_total: Seconds from registration after which the request ends however much
            progress it reports.
    """

    max_total: float
    _timeout: float = 0.0
    _start: float = 0.0
    _scope: trio.CancelScope | None = None

    def arm(self, scope: trio.CancelScope, timeout: float) -> None:
        """Bind to the request's scope at registration (``LiveSession.request`` calls it)."""
        self._scope, self._timeout, self._start = scope, timeout, trio.current_time()
        scope.deadline = min(scope.deadline, self._start + self.max_total)

    def touch(self) -> None:
        """Progress arrived: the timeout starts again from now (within the hard bound)."""
        if self._scope is not None:
            self._scope.deadline = min(trio.current_time() + self._timeout, self._start + self.max_total)

    @property
    def hit_max_total(self) -> bool:
        """Whether the hard bound, not the idle timeout, ended the request."""
        return self._scope is not None and self._scope.deadline >= self._start + self.max_total


@attrs.define(eq=False)
class LiveSession:
    """An initialized MCP session over an open transport, with the requests running on it.

    Attributes:
        session: The SDK's client session.
        link: The transport under it (death signal, stderr tail, process).
        label: The server's name, for messages.
        lost: Why the session ended (``None`` while it lives); set once, by :meth:`end`.
    """

    session: ClientSession
    link: TransportLink
    label: str
    lost: ConnectionFailed | None = None
    offered: frozenset[str] = frozenset()
    """The host callbacks declared to the server in this session's handshake."""
    tool_defs: dict[str, mcp_types.Tool] = attrs.field(factory=dict)
    """The tools of the last complete listing on this session, by name (output schemas, header params).

    Written by the connection actor only, when its fill of the tool listing completes.
    """
    dispatcher: WireDispatcher | None = None
    """The session's dispatcher: the one way our own requests (``tools/call``) are sent."""
    stamp: RequestStamp | None = None
    """What every request we send ourselves carries (set with :attr:`dispatcher`)."""
    tasks_extension: bool = False
    """The server offered the tasks extension (2026-07-28): only then are ``tasks/*`` sent to it."""
    on_timeout: Callable[[], None] | None = None
    """Called when a request times out (a ping's own timeout aside): the actor probes the server at once."""
    _requests: set[trio.CancelScope] = attrs.field(factory=set, init=False)
    """The scopes of the requests in flight; :meth:`end` cancels them and starts a new set."""
    _ended: trio.Event = attrs.field(factory=trio.Event, init=False)
    _validators: dict[str, tuple[Any, Any]] = attrs.field(factory=dict, init=False)
    _header_maps: dict[str, tuple[Any, dict[tuple[str, ...], str]]] = attrs.field(factory=dict, init=False)

    async def notifications_delivered(self) -> None:
        """Wait until the server's notifications received so far are handled (see the dispatcher's)."""
        if self.dispatcher is not None:
            await self.dispatcher.notifications_delivered()

    async def send_raw(
        self, method: str, params: dict[str, Any], *, on_progress: ProgressFnT | None = None
    ) -> dict[str, Any]:
        """Send one request through the session's dispatcher, stamped as the SDK would; the raw result.

        Cancellation and timeouts are the caller's (:meth:`request`); the dispatcher sends
        ``notifications/cancelled`` when the caller gives up.

        Raises:
            MCPError: The server's error answer, or ``CONNECTION_CLOSED``.
        """
        dispatcher, opts = self._stamped(method, params, on_progress)
        return await dispatcher.send_raw_request(method, params, opts)

    def _stamped(
        self, method: str, params: dict[str, Any], on_progress: ProgressFnT | None, *, tasks: bool = True
    ) -> tuple[WireDispatcher, CallOptions]:
        """Stamp ``params`` as the SDK would; the dispatcher and the options to send them with."""
        dispatcher, stamp = self.dispatcher, self.stamp
        if dispatcher is None or stamp is None:
            raise RuntimeError(f"server {self.label!r}: the session has no dispatcher of ours")
        opts: CallOptions = {}
        if on_progress is not None:
            opts["on_progress"] = on_progress
        param_headers = None
        if stamp.meta is not None and method == "tools/call":
            param_headers = self._param_headers(params.get("name"), params.get("arguments"))
        stamp.apply(method, params, opts, param_headers=param_headers, tasks=tasks)
        return dispatcher, opts

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressFnT | None = None,
        input_responses: mcp_types.InputResponses | None = None,
        request_state: str | None = None,
        meta: Mapping[str, Any] | None = None,
        bound: float | None = None,
        tasks: bool = True,
    ) -> CallAnswer:
        """``tools/call`` the lean way: a params dict out, the result validated once, then its output schema.

        ``meta`` goes into the request's ``_meta`` (the 2026-07-28 log-level opt-in); the
        stamp adds the revision's own keys to it. ``bound``: the timeout of the
        :meth:`request` this runs in (its scope ends the call by then), for the wire.
        ``tasks=False``: the request does not declare the tasks extension (2026-07-28), so
        the server may not answer with a task.

        Raises:
            MCPError: The server's error answer, or ``CONNECTION_CLOSED``.
            pydantic.ValidationError: The answer is not a ``CallToolResult`` (nor input required).
            RuntimeError: The structured result breaks the tool's ``outputSchema`` (the SDK's wording).
        """
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = dict(meta)
        if input_responses is not None or request_state is not None:
            more = mcp_types.CallToolRequestParams(
                name=name, input_responses=input_responses, request_state=request_state
            ).model_dump(by_alias=True, mode="json", exclude_none=True)
            params.update({key: more[key] for key in ("inputResponses", "requestState") if key in more})
        # send_raw's two steps, inline: one coroutine frame less on the hot path (~2 % of a stdio
        # call's instructions, benchmarks.instructions).
        dispatcher, opts = self._stamped("tools/call", params, on_progress, tasks=tasks)
        result = _call_result(await dispatcher.send_raw_request("tools/call", params, opts, bound=bound))
        if isinstance(result, mcp_types.CallToolResult) and not result.is_error:
            tool = self.tool_defs.get(name)
            if tool is not None and tool.output_schema is not None:  # most tools have none: no call then
                self.check_output(name, result)
        return result

    def check_output(self, name: str, result: mcp_types.CallToolResult) -> None:
        """Validate ``structuredContent`` against the tool's ``outputSchema`` from :attr:`tool_defs`.

        A tool this session never listed is not checked (the SDK only warns then too).

        Raises:
            RuntimeError: Structured content is missing or breaks the schema, or the schema is invalid.
        """
        tool = self.tool_defs.get(name)
        schema = tool.output_schema if tool is not None else None
        if schema is None:
            return
        # Lazily, as the SDK does: jsonschema is slow to import and most tools have no outputSchema.
        from jsonschema import SchemaError  # type: ignore[import-untyped]
        from jsonschema import exceptions as jsonschema_exceptions
        from jsonschema.validators import validator_for  # type: ignore[import-untyped]
        from referencing import Registry
        from referencing.exceptions import Unresolvable

        if result.structured_content is None and "structured_content" not in result.model_fields_set:
            raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
        cached = self._validators.get(name)
        if cached is None or cached[0] is not schema:
            validator_cls = validator_for(schema)
            try:
                validator_cls.check_schema(schema)
            except SchemaError as exc:
                raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from None
            cached = self._validators[name] = (schema, validator_cls(schema, registry=Registry()))
        try:
            error = jsonschema_exceptions.best_match(cached[1].iter_errors(result.structured_content))
        except Unresolvable as exc:
            raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from exc
        if error is not None:
            raise RuntimeError(f"Invalid structured content returned by tool {name}: {error}") from error

    def _param_headers(self, name: Any, arguments: Any) -> dict[str, str] | None:
        """``Mcp-Param-*`` headers for a 2026-07-28 ``tools/call`` (from the tool's ``x-mcp-header`` marks)."""
        tool = self.tool_defs.get(name) if isinstance(name, str) else None
        if tool is None or not isinstance(arguments, dict):
            return None
        cached = self._header_maps.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = self._header_maps[tool.name] = (tool, x_mcp_header_map(tool.input_schema))
        return mcp_param_headers(cached[1], arguments) if cached[1] else None

    @property
    def requests_in_flight(self) -> int:
        """How many requests are registered right now."""
        return len(self._requests)

    def owed(self) -> frozenset[trio.CancelScope]:
        """The requests in flight now that are still within their timeouts: what a busy server owes first.

        Taken as a health probe is sent; :meth:`still_owes` later says whether its silence
        may be that of a server busy with them (``_ConnectionActor._ping`` has the rule).
        """
        now = trio.current_time()
        return frozenset(scope for scope in self._requests if scope.deadline > now)

    def still_owes(self, owed: frozenset[trio.CancelScope]) -> bool:
        """Whether one of ``owed`` (from :meth:`owed`) is still in flight and within its timeout."""
        now = trio.current_time()
        requests = self._requests
        return any(scope in requests and scope.deadline > now for scope in owed)

    def end(self, error: ConnectionFailed) -> None:
        """End the session: no request registers any more, every registered one fails with ``error``.

        Called only by the connection actor, after it has published the state. Idempotent.
        """
        if self.lost is not None:
            return
        self.lost = error
        self._ended.set()
        requests, self._requests = self._requests, set()  # a request ended here finds its set replaced
        for scope in requests:
            scope.cancel()

    async def request(
        self,
        what: str,
        op: Callable[[ClientSession], Awaitable[T]] | None = None,
        *,
        live_op: Callable[[LiveSession], Awaitable[T]] | None = None,
        timeout: float,
        tool: str | None = None,
        die_on_timeout: bool = False,
        progress: ProgressDeadline | None = None,
    ) -> T:
        """Run one request in the caller's task, bounded by ``timeout`` seconds.

        Cancelling the caller cancels the request on the server too (the dispatcher sends
        ``notifications/cancelled``); so does the timeout.

        Args:
            what: The MCP method, for messages (``"tools/call"``).
            op: Sends the request on the SDK session and returns its result.
            live_op: Instead of ``op``: sends it through this live session (our own
                requests, ``tools/call``), without a wrapper frame per call.
            timeout: Seconds from registration to the answer.
            tool: The tool's name, for a ``tools/call``.
            die_on_timeout: A timeout means the server is dead (pings): mark the transport so,
                unless a request sent before this one is still within its own timeout (the
                server may be busy with it: ``_ConnectionActor._ping`` has the rule).
            progress: Lets progress notifications push the deadline back (within its bound).

        Raises:
            SessionEnded: The session had already ended; nothing was sent.
            ServerConnectionLost: The connection ended during the request (or another
                ``ConnectionFailed`` given to :meth:`end`).
            ToolCallTimeout: A tool call got no answer within ``timeout``.
            ToolCallFailed: The server answered a tool call with a JSON-RPC error.
            ServerRequestFailed: The server answered another request with a JSON-RPC error.
            ServerProtocolError: The server answered with something that is not MCP (or
                the dispatcher's own request timeout ran out).
            ConnectionFailed: Another request got no answer within ``timeout`` (a ping, while
                the server is busy with requests sent before it: not a death).
        """
        if self.lost is not None:
            raise SessionEnded(self.label)
        owed = self.owed() if die_on_timeout else _NOTHING_OWED
        scope = trio.CancelScope(deadline=trio.current_time() + timeout)
        requests = self._requests
        requests.add(scope)
        if progress is not None:
            progress.arm(scope, timeout)
        owned = SDK_LOGS_OWNED.set(True)  # the SDK's records in this request are about our connection
        try:
            with scope:
                try:
                    if live_op is not None:
                        return await live_op(self)
                    assert op is not None
                    return await op(self.session)
                except MCPError as exc:
                    if exc.error.code != mcp_types.CONNECTION_CLOSED:
                        raise
                except Exception:
                    if not self.link.dead.is_set():
                        raise
                # The connection closed under the request. The actor declares the death (state
                # first), then ends this request with the error: wait for it, never fail alone.
                self.link.die("the connection closed")
                await trio.sleep_forever()
        except MCPError as exc:
            if tool is not None and not isinstance(exc, MalformedReply):
                raise ToolCallFailed(
                    f"server {self.label!r} rejected the call to {tool!r}: {exc.error.message} (code {exc.error.code})",
                    server=self.label,
                    tool=tool,
                    code=exc.error.code,
                    data=exc.error.data,
                ) from None
            if isinstance(exc, MalformedReply) or exc.error.code == mcp_types.REQUEST_TIMEOUT:
                # Not the server's answer to the request: a broken reply, or our own clock.
                raise ServerProtocolError(
                    f"server {self.label!r}: {what} failed: {exc.error.message}", server=self.label
                ) from None
            raise _refused(self.label, what, exc.error) from None
        except McpActorsError:
            raise
        except Exception as exc:
            # The reply did not parse (pydantic) or the SDK choked: the server's fault, this request only.
            raise ServerProtocolError(
                f"server {self.label!r}: {what} returned something that is not valid MCP: {type(exc).__name__}: {exc}",
                server=self.label,
            ) from exc
        finally:
            SDK_LOGS_OWNED.reset(owned)
            requests.discard(scope)
        # Only two things cancel the scope: the session's end (which replaced the set the
        # request was registered in) and the deadline.
        if requests is not self._requests and self.lost is not None:
            raise self.lost
        if die_on_timeout:
            if self.still_owes(owed):
                raise ConnectionFailed(
                    f"server {self.label!r} did not answer a {what} within {timeout:g}s, but it is busy: requests"
                    " sent before it are still within their timeouts, so it is not declared dead",
                    server=self.label,
                )
            # Silence means death here: let the actor declare it (state first), then report it.
            self.link.die(f"the server did not answer a {what} within {timeout:g}s")
            with trio.move_on_after(_END_GRACE):
                await self._ended.wait()
            if self.lost is not None:
                raise self.lost
        elif self.on_timeout is not None:
            self.on_timeout()  # a server that let a request time out may be hung: probe it now
        if tool is not None and progress is not None and progress.hit_max_total:
            raise ToolCallTimeout(
                f"server {self.label!r}: tool {tool!r} did not finish within its hard bound of"
                f" {progress.max_total:g}s (maxTotalTimeout), progress or not; the server was asked to"
                " cancel it (raise config.maxTotalTimeout if the tool is legitimately slow)",
                server=self.label,
                tool=tool,
                timeout=progress.max_total,
            )
        if tool is not None:
            raise ToolCallTimeout(
                f"server {self.label!r}: tool {tool!r} did not finish within {timeout:g}s; the server was asked to"
                " cancel it (raise the call timeout if the tool is legitimately slow)",
                server=self.label,
                tool=tool,
                timeout=timeout,
            )
        raise ConnectionFailed(f"server {self.label!r}: {what} timed out after {timeout:g}s", server=self.label)
