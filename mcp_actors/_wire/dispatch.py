"""The SDK's ``Dispatcher`` over a :class:`~mcp_actors._wire.base.Wire`: one task hop per call.

``ClientSession(dispatcher=WireDispatcher(link.wire))`` keeps every rule of the SDK's
session (the handshake, revision negotiation, callbacks, subscriptions) and replaces only
the layer under it. The SDK's ``JSONRPCDispatcher`` moves every message through memory
streams, a writer task, a reader task and its own receive loop, builds a pydantic envelope
per message and a one-slot memory stream per request. Here:

* ``send_raw_request`` builds the envelope as a plain ``dict``, sends it from the caller's
  own task (:meth:`Wire.send`) and parks the caller on its own pending slot;
* the wire's reader hands every decoded message to :meth:`WireDispatcher._deliver`, which
  answers a waiting caller synchronously (a ``reschedule``: no task, no stream).

Semantics kept from ``JSONRPCDispatcher`` (read it side by side): request ids are coerced
for correlation (``"7"`` and ``7`` are one id) and a caller-supplied id (``listen-1``) is
sent verbatim; ``timeout`` raises ``MCPError(REQUEST_TIMEOUT)`` after a courtesy
``notifications/cancelled``; a cancelled caller sends one too (shielded, bounded), unless
``cancel_on_abandon`` is false or the request was never written; ``on_progress`` gets the
request id as progress token; inbound requests run ``on_request`` in their own task and a
peer's ``notifications/cancelled`` interrupts them (never answered then); inbound
notifications go to ``on_notify_intercept`` synchronously in receive order, then to
``on_notify``; when the wire ends, every waiter and every later request gets
``MCPError(CONNECTION_CLOSED)``. One difference, on purpose: the SDK spawns a task per
notification and per progress update, which trio may run in any order (progress 3 before
progress 1); here ``on_notify`` calls run one at a time in the wire's order, and so do
each request's progress callbacks. And one bound the SDK does not have: at most
``max_inbound`` inbound requests run at once (a task each); one past that is answered at once
with a JSON-RPC error (``INTERNAL_ERROR``, "at most N requests in flight"), written by one task
that queues only the ids, so a server flooding us with requests costs neither tasks nor
host handler calls beyond the bound.

OpenTelemetry: the same client span as the SDK (``MCP send {method}[ {name}]``, kind
CLIENT, ``mcp.method.name``, ``jsonrpc.request.id``, error attributes and status on an
error response) and W3C trace context in ``params._meta``, both skipped while no
OpenTelemetry SDK is installed as the global tracer provider (the API's default proxy or
no-op provider records nothing and has no span to propagate), so they cost nothing then.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final

import anyio
import attrs
import trio
from mcp.shared.dispatcher import (
    CallOptions,
    OnNotify,
    OnNotifyIntercept,
    OnRequest,
    ProgressFnT,
    coerce_request_id,
    run_notify_intercept,
)
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import (
    cancelled_request_id_from_params,
    handler_exception_to_error_data,
    progress_token_from_params,
)
from mcp.shared.message import ClientMessageMetadata, MessageMetadata, SessionMessage
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    ErrorData,
    ProgressToken,
    RequestId,
    jsonrpc_message_adapter,
)
from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from pydantic import BaseModel, ValidationError

from mcp_actors._config.record import DEFAULT_MAX_SERVER_REQUESTS
from mcp_actors._sdk import request_clock
from mcp_actors._wire.base import Deliver, Wire, WireClosed
from mcp_actors._wire.codec import UNREADABLE
from mcp_actors._wire.lograte import LogThrottle

__all__ = ["BoundNotification", "MalformedReply", "StreamWire", "WireDispatcher"]

logger = logging.getLogger(__name__)

_ABANDON_WRITE_TIMEOUT: Final = 5.0
"""Bound for the courtesy ``notifications/cancelled`` (the SDK's value): a wedged wire must not hang a cancel."""

_SHUTDOWN_WRITE_TIMEOUT: Final = 1.0
"""Bound for the error answer to an inbound request cut short by the connection's end (the SDK's value)."""

_CLOSED: Final[dict[str, Any]] = {"error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}}
"""What a waiter receives when the wire ends; matched by identity (a peer can send the same code)."""

_TRANSPORT: Final = TransportContext(kind="jsonrpc", can_send_request=True)
"""Every inbound message on a wire rides a full duplex channel (stdio; HTTP says otherwise in its own wire)."""

_tracer = otel_trace.get_tracer("mcp-python-sdk")

_NO_SPAN: Final = contextlib.nullcontext(None)
"""A request's span when no OpenTelemetry SDK is there: none."""
"""The SDK's own instrumentation scope, so our spans are indistinguishable from its."""

_NO_SDK_PROVIDERS: Final = (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)
_UNKNOWN: Final = object()
"""OpenTelemetry without the module global we read (another version): ask it the public way."""


_PROVIDER_FROM_ENV: Final = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
"""Whether the environment names a provider (OpenTelemetry then loads it on first use)."""


def _tracing() -> bool:
    """Whether an OpenTelemetry SDK is installed (else a span and its propagation are pure cost).

    Until a provider is set (``set_tracer_provider``, once per process) the answer is no,
    read from OpenTelemetry's module global: ``get_tracer_provider()`` looks the environment
    up on every call, about 1 us per request for nothing.
    """
    if getattr(otel_trace, "_TRACER_PROVIDER", _UNKNOWN) is None and not _PROVIDER_FROM_ENV:
        return False
    return not isinstance(otel_trace.get_tracer_provider(), _NO_SDK_PROVIDERS)


def _error_dict(error: ErrorData) -> dict[str, Any]:
    out: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        out["data"] = error.data
    return out


class MalformedReply(MCPError):
    """The server's answer is not JSON-RPC: no JSON, an ``error`` member that is no error object, a result no object.

    An ``MCPError`` (``INTERNAL_ERROR``) like the SDK's, so callers that only know ``MCPError``
    see no difference; the call path tells it from a real error answer: the server broke the
    protocol rather than refused the request.
    """


def _mcp_error(error: Any) -> MCPError:
    """The ``MCPError`` for a JSON-RPC ``error`` member (a malformed one is the server's internal error)."""
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
            return MCPError(code=code, message=message, data=error.get("data"))
    return MalformedReply(code=INTERNAL_ERROR, message=f"malformed error response from the server: {error!r:.200}")


class _Serial:
    """Runs queued handler calls one at a time, in the order they were queued.

    A task exists only while the queue is non-empty, so an idle connection costs no task and
    a burst of notifications costs one. The SDK spawns a task per notification, which trio
    may run in any order (progress 3 before progress 1); here the order is the wire's.
    """

    __slots__ = ("_idle", "_queue", "_running")

    def __init__(self) -> None:
        self._queue: collections.deque[tuple[Callable[..., Awaitable[None]], tuple[Any, ...]]] = collections.deque()
        self._running = False
        self._idle: trio.Event | None = None

    async def wait_idle(self) -> None:
        """Wait until every call queued so far has run (no checkpoint when nothing is queued)."""
        if self._running:
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()

    def push(self, nursery: trio.Nursery, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        self._queue.append((fn, args))
        if not self._running:
            self._running = True
            nursery.start_soon(self._drain)

    async def _drain(self) -> None:
        try:
            while self._queue:
                fn, args = self._queue.popleft()
                await fn(*args)
        finally:
            self._running = False
            idle, self._idle = self._idle, None
            if idle is not None:
                idle.set()


class _Pending:
    """One outbound request awaiting its answer: the answer lands in ``outcome`` and wakes ``task``."""

    __slots__ = ("on_progress", "outcome", "progress", "task")

    def __init__(self, on_progress: ProgressFnT | None) -> None:
        self.on_progress = on_progress
        self.outcome: dict[str, Any] | None = None
        self.task: trio.lowlevel.Task | None = None
        self.progress: _Serial | None = None
        """This request's progress updates, in order (created at the first one)."""

    def resolve(self, outcome: dict[str, Any]) -> None:
        """Settle once (a second answer for the same id is dropped) and wake the waiter."""
        if self.outcome is not None:
            return
        self.outcome = outcome
        task, self.task = self.task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def wait(self) -> dict[str, Any]:
        """Park until settled; cancellable (the slot then stays for a late answer to be dropped).

        Settled already (streamable HTTP: the answer came inside the wire's send) is no
        checkpoint of its own: the request's ``checkpoint_if_cancelled`` was the cancel point,
        and the answer could only come after the send waited on the wire (the schedule point).
        One trip through the scheduler less per call.
        """
        if self.outcome is None:
            self.task = trio.lowlevel.current_task()

            def abort(_: Any) -> trio.lowlevel.Abort:
                self.task = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        assert self.outcome is not None
        return self.outcome


@attrs.define(eq=False)
class _Context:
    """The ``DispatchContext`` of one inbound message: the back-channel and the peer's cancel signal."""

    _dispatcher: WireDispatcher
    _request_id: RequestId | None
    _progress_token: ProgressToken | None = None
    cancel_requested: anyio.Event = attrs.field(factory=anyio.Event)
    _closed: bool = False

    @property
    def transport(self) -> TransportContext:
        """The wire's transport facts (a duplex channel)."""
        return _TRANSPORT

    @property
    def request_id(self) -> RequestId | None:
        """The inbound request's id (``None`` for a notification)."""
        return self._request_id

    @property
    def message_metadata(self) -> MessageMetadata:
        """Nothing: a wire attaches no ``SessionMessage`` metadata."""
        return None

    @property
    def can_send_request(self) -> bool:
        """Whether a request may still be sent on behalf of this inbound request."""
        return not self._closed

    def close(self) -> None:
        """The inbound request is answered: its back-channel closes."""
        self._closed = True

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Send a notification on behalf of this inbound message (dropped once it is answered)."""
        if self._closed:
            logger.debug("dropped %s: dispatch context closed", method)
            return
        await self._dispatcher.notify(method, params, opts)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Send a request on behalf of this inbound request (see ``WireDispatcher.send_raw_request``)."""
        if self._closed:
            raise NoBackChannelError(method)
        return await self._dispatcher.send_raw_request(method, params, opts)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress for the inbound request, when the peer gave a progress token."""
        if self._progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


@attrs.frozen
class BoundNotification:
    """A notification the dispatcher hands to ``handler`` itself, its params validated as ``params_type``."""

    params_type: type[BaseModel]
    handler: Callable[[Any], Awaitable[None]]


class _Started(trio.TaskStatus[None]):
    """The dispatcher's ``task_status`` as the wire sees it: marks the dispatcher running, then passes it on."""

    __slots__ = ("_dispatcher", "_outer")

    def __init__(self, dispatcher: WireDispatcher, outer: trio.TaskStatus[None]) -> None:
        self._dispatcher = dispatcher
        self._outer = outer

    def started(self, value: None = None) -> None:
        self._dispatcher._running = True
        self._outer.started()


@attrs.define(eq=False)
class WireDispatcher:
    """The SDK ``Dispatcher`` protocol over a :class:`~mcp_actors._wire.base.Wire` (see the module docstring).

    Single-shot like the SDK's: once :meth:`run` ends, the dispatcher stays closed.
    """

    wire: Wire
    bound: Mapping[str, BoundNotification] = attrs.field(factory=dict)
    """Notifications handled here, by method (validated, in wire order, in the handlers' queue):
    what the SDK's tables know only as types (``notifications/tasks/status``), without the
    task and stream pair per session its ``notification_bindings`` cost."""
    max_inbound: int = attrs.field(default=DEFAULT_MAX_SERVER_REQUESTS, kw_only=True)
    """Inbound requests handled at once; the rest are refused at once (see the module docstring)."""
    _pending: dict[RequestId, _Pending] = attrs.field(factory=dict, init=False)
    _in_flight: dict[RequestId, tuple[trio.CancelScope, _Context]] = attrs.field(factory=dict, init=False)
    _next_id: int = attrs.field(default=0, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _running: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _on_request: OnRequest | None = attrs.field(default=None, init=False)
    _on_notify: OnNotify | None = attrs.field(default=None, init=False)
    _intercept: OnNotifyIntercept | None = attrs.field(default=None, init=False)
    _notifications: _Serial = attrs.field(factory=_Serial, init=False)
    _inbound_running: int = attrs.field(default=0, init=False)
    """Inbound requests whose task is running (handling, or writing the answer)."""
    _refused: collections.deque[RequestId] = attrs.field(factory=collections.deque, init=False)
    """Ids of inbound requests refused past the bound, waiting for their error answer."""
    _refusing: bool = attrs.field(default=False, init=False)
    _refusals_logged: LogThrottle = attrs.field(factory=LogThrottle, init=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.max_inbound, bool) or not isinstance(self.max_inbound, int) or self.max_inbound < 1:
            raise ValueError(f"max_inbound must be an integer >= 1, got {self.max_inbound!r}")

    @property
    def requests_pending(self) -> int:
        """Outbound requests waiting for their answer right now."""
        return len(self._pending)

    # ------------------------------------------------------------------ outbound

    async def send_raw_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        opts: CallOptions | None = None,
        *,
        bound: float | None = None,
    ) -> dict[str, Any]:
        """Send a request and wait for its raw result.

        Cancellation: cancelling the caller abandons the request and sends the peer a
        ``notifications/cancelled`` (shielded, bounded by 5 s) once it was written.

        ``bound``: seconds within which a cancel scope of the caller's (unshielded from here)
        ends the request, when the caller knows (it goes to the wire's ``send``).

        Raises:
            MCPError: The peer's error answer; ``REQUEST_TIMEOUT`` when ``opts["timeout"]``
                elapsed; ``CONNECTION_CLOSED`` when the wire ended (before or during the request).
            ValueError: ``opts["request_id"]`` is already in flight.
            RuntimeError: Called before :meth:`run`.
        """
        if self._closed:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        if not self._running:
            raise RuntimeError("WireDispatcher.send_raw_request called before run()")
        if opts is None:
            opts = {}
        supplied = opts.get("request_id")
        request_id: RequestId
        if supplied is not None:
            request_id, key = supplied, coerce_request_id(supplied)
            if key in self._pending:
                raise ValueError(f"request id {supplied!r} is already in flight")
        else:
            self._next_id += 1
            while self._next_id in self._pending:  # past an id a caller supplied
                self._next_id += 1
            request_id = key = self._next_id
        on_progress = opts.get("on_progress")
        tracing = _tracing()
        out_params = dict(params) if params is not None else {}
        meta: dict[str, Any] | None = None
        if on_progress is not None or tracing or "_meta" in out_params:
            meta = dict(out_params.pop("_meta", None) or {})
            if on_progress is not None:
                meta["progressToken"] = request_id  # the id doubles as the token: _pending finds the callback
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        pending = _Pending(on_progress)
        self._pending[key] = pending
        try:
            # The SDK's client span around the exchange, when an OpenTelemetry SDK is there.
            with self._client_span(method, out_params, meta, request_id) if tracing else _NO_SPAN as span:
                if meta:
                    out_params["_meta"] = meta
                if out_params:  # JSON-RPC forbids "params": null; an empty object is left out, as the SDK does
                    message["params"] = out_params
                if opts.get("timeout") is None:
                    # The untimed exchange (every tools/call of ours) inline, a coroutine frame less
                    # per call (worth ~3 % of a stdio call's instructions, benchmarks.instructions);
                    # the SDK's request clock is in _timed_exchange.
                    # A cancellation already pending surfaces here, while the request provably was never
                    # written; past this point a cancelled write counts as issued (the peer ignores a
                    # cancel for an id it never saw; skipping it could leak a delivered request's work).
                    await trio.lowlevel.checkpoint_if_cancelled()
                    try:
                        await self.wire.send(message, headers=opts.get("headers"), bound=bound)
                        # Settled already when the wire exchanged it inside send (streamable HTTP).
                        outcome = pending.outcome if pending.outcome is not None else await pending.wait()
                    except WireClosed:  # only a send raises it (the request's own, or the wire's death under it)
                        raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
                    except trio.Cancelled:
                        await self._abandoned(request_id, opts)
                        raise
                else:
                    outcome = await self._timed_exchange(method, request_id, message, pending, opts, bound)
                if span is not None and "error" in outcome and outcome is not _CLOSED:
                    error = _mcp_error(outcome["error"])
                    code = str(error.code)
                    span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                    span.set_status(otel_trace.StatusCode.ERROR, error.message)
        finally:
            self._pending.pop(key, None)  # on every path: a late answer is dropped, not leaked
        if pending.progress is not None:
            # The updates that came before the answer reach the callback before the caller
            # hears the answer (the SDK's spawned callbacks usually, not always, made it).
            await pending.progress.wait_idle()
        if "result" in outcome:
            result = outcome["result"]
            if isinstance(result, dict):
                return result
            raise MalformedReply(
                code=INTERNAL_ERROR, message=f"malformed response from the server: result {result!r:.200}"
            )
        if UNREADABLE in outcome:  # the wire's stand-in for an answer that was no JSON
            raise MalformedReply(code=PARSE_ERROR, message=outcome["error"]["message"])
        raise _mcp_error(outcome.get("error"))

    async def notifications_delivered(self) -> None:
        """Wait until every notification received so far has been handed to its handler.

        Notifications run one at a time in the wire's order, in a task of their own; a caller
        that got an answer may wait here so the server's notifications sent before that
        answer (its log messages) have been handled. No checkpoint when none is queued.
        """
        await self._notifications.wait_idle()

    @contextlib.contextmanager
    def _client_span(
        self, method: str, params: dict[str, Any], meta: dict[str, Any] | None, request_id: RequestId
    ) -> Iterator[otel_trace.Span]:
        """The SDK's client span (same name, kind and attributes), its context injected into ``meta``."""
        target = params.get("name")
        name = f"MCP send {method} {target}" if isinstance(target, str) else f"MCP send {method}"
        attributes = {"mcp.method.name": method, "jsonrpc.request.id": str(request_id)}
        with _tracer.start_as_current_span(name, kind=otel_trace.SpanKind.CLIENT, attributes=attributes) as span:
            if meta is not None:
                propagate.inject(meta)  # SEP-414: the peer sees this span as its parent
            yield span

    async def _timed_exchange(
        self,
        method: str,
        request_id: RequestId,
        message: dict[str, Any],
        pending: _Pending,
        opts: CallOptions,
        bound: float | None,
    ) -> dict[str, Any]:
        """Write the request and wait for its answer within ``opts["timeout"]`` (the SDK's timeout and abandon rules).

        The untimed exchange is :meth:`send_raw_request`'s own (the same steps without the clock).
        """
        headers = opts.get("headers")
        timeout = opts.get("timeout")
        assert timeout is not None
        # A cancellation already pending surfaces here (see send_raw_request).
        await trio.lowlevel.checkpoint_if_cancelled()
        armed = False
        try:
            # The SDK's request clock: a person answering an OAuth prompt during the
            # request pauses it (``waiting_on_a_person``), as on the SDK's own path.
            with request_clock(timeout) as clock:
                # A wire whose whole exchange happens inside send (streamable HTTP) runs the clock
                # from the start; otherwise it starts once the request is written, as the SDK's.
                exchange = getattr(self.wire, "exchange_in_send", False)
                if exchange:
                    clock.start()
                    armed = True
                # (Not a bound to pass on: a person answering an OAuth prompt pauses this clock.)
                await self.wire.send(message, headers=headers, bound=bound)
                if not exchange:
                    clock.start()
                    armed = True
                return await pending.wait()
        except WireClosed:  # only a send raises it (the request's own, or the wire's death under it)
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
        except TimeoutError:
            if not armed:
                raise  # the wire's own bounded send failed: a transport error, not the timeout
            if opts.get("cancel_on_abandon", True):
                # Unshielded, as the SDK's: an outer cancellation may still interrupt it.
                with trio.move_on_after(_ABANDON_WRITE_TIMEOUT) as scope:
                    await self._cancel_outbound(request_id, f"timed out after {timeout}s")
                if scope.cancelled_caught:
                    logger.warning("courtesy cancel for timed-out request %r gave up: wire blocked", request_id)
            raise MCPError(code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out") from None
        except trio.Cancelled:
            await self._abandoned(request_id, opts)
            raise

    async def _abandoned(self, request_id: RequestId, opts: CallOptions) -> None:
        """The caller gave up on a written request: tell the peer (shielded, bounded), unless asked not to."""
        if opts.get("cancel_on_abandon", True):
            with trio.move_on_after(_ABANDON_WRITE_TIMEOUT, shield=True) as scope:
                await self._cancel_outbound(request_id, "caller cancelled")
            if scope.cancelled_caught:
                logger.warning("courtesy cancel for caller-cancelled request %r gave up: wire blocked", request_id)

    async def _cancel_outbound(self, request_id: RequestId, reason: str) -> None:
        await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Send a notification; fire-and-forget (dropped with a debug log once the wire is gone)."""
        if self._closed:
            logger.debug("dropped %s: dispatcher closed", method)
            return
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            await self.wire.send(message, headers=opts.get("headers") if opts else None)
        except WireClosed:
            logger.debug("dropped %s: wire closed", method)

    async def _write(self, message: dict[str, Any]) -> None:
        try:
            await self.wire.send(message)
        except WireClosed:
            logger.debug("dropped the answer to %r: wire closed", message.get("id"))

    # ------------------------------------------------------------------ inbound

    async def run(
        self,
        on_request: OnRequest,
        on_notify: OnNotify,
        on_notify_intercept: OnNotifyIntercept | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the wire's reader and the inbound handlers until the wire ends.

        ``task_status.started()`` fires once requests may be sent. When the wire ends
        (or this is cancelled), every waiting request gets ``CONNECTION_CLOSED`` and the
        inbound handlers still running are cancelled.
        """
        self._on_request, self._on_notify, self._intercept = on_request, on_notify, on_notify_intercept
        # The wire runs in this task (no reader task of ours); the nursery holds only the
        # inbound handlers. Requests may be sent once the wire says it started.
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    await self.wire.run(self._deliver, task_status=_Started(self, task_status))
                except WireClosed:
                    pass
                finally:
                    self._close()
                    nursery.cancel_scope.cancel()  # the callers of in-flight handlers are gone
        finally:
            self._close()
            self._nursery = None

    def _close(self) -> None:
        """Wake every waiter with ``CONNECTION_CLOSED``; synchronous and idempotent."""
        self._running = False
        self._closed = True
        pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.resolve(_CLOSED)

    def _deliver(self, message: dict[str, Any]) -> None:
        """Route one decoded message from the peer (synchronous: the wire's reader calls it)."""
        method = message.get("method")
        if method is None:
            request_id = message.get("id")
            key = request_id if type(request_id) is int else coerce_request_id(request_id)  # type: ignore[arg-type]
            valid = isinstance(key, int | str) and not isinstance(key, bool)  # True would alias id 1
            pending = self._pending.get(key) if valid else None
            if pending is None:
                logger.debug("dropping an answer for unknown or late request id %r", request_id)
                return
            pending.resolve(message)
            return
        params = message.get("params")
        if not isinstance(method, str) or (params is not None and not isinstance(params, dict)):
            logger.debug("dropping a malformed message from the peer: %.200r", message)
            return
        if "id" in message:
            self._inbound_request(message["id"], method, params)
        else:
            self._inbound_notification(method, params)

    def _inbound_request(self, request_id: Any, method: str, params: dict[str, Any] | None) -> None:
        if not isinstance(request_id, int | str) or isinstance(request_id, bool) or self._nursery is None:
            logger.debug("dropping request %r with a malformed id %r", method, request_id)
            return
        if self._inbound_running >= self.max_inbound:
            self._refuse(request_id, method)
            return
        self._inbound_running += 1
        dctx = _Context(self, request_id, progress_token_from_params(params))
        scope = trio.CancelScope()
        # Duplicate ids overwrite (the SDK's rule); keyed coerced so a stringified cancel still correlates.
        self._in_flight[coerce_request_id(request_id)] = (scope, dctx)
        self._nursery.start_soon(self._handle_request, request_id, method, params, dctx, scope)

    async def _handle_request(
        self, request_id: RequestId, method: str, params: dict[str, Any] | None, dctx: _Context, scope: trio.CancelScope
    ) -> None:
        """Run ``on_request`` and answer it; a request the peer cancelled is never answered."""
        try:
            await self._answer_request(request_id, method, params, dctx, scope)
        finally:
            self._inbound_running -= 1

    async def _answer_request(
        self, request_id: RequestId, method: str, params: dict[str, Any] | None, dctx: _Context, scope: trio.CancelScope
    ) -> None:
        assert self._on_request is not None
        answer_started = False
        try:
            with scope:
                try:
                    result = await self._on_request(dctx, method, params)
                finally:
                    dctx.close()
                    key = coerce_request_id(request_id)
                    if (entry := self._in_flight.get(key)) is not None and entry[1] is dctx:
                        del self._in_flight[key]
                if not dctx.cancel_requested.is_set():
                    answer_started = True
                    await self._write({"jsonrpc": "2.0", "id": request_id, "result": result})
        except trio.Cancelled:
            # The connection is ending: answer so the peer is not left waiting, unless an
            # answer may already be out (two answers for one id would break JSON-RPC).
            if not answer_started and not dctx.cancel_requested.is_set():
                error = {"code": CONNECTION_CLOSED, "message": "Connection closed"}
                with trio.move_on_after(_SHUTDOWN_WRITE_TIMEOUT, shield=True):
                    await self._write({"jsonrpc": "2.0", "id": request_id, "error": error})
            raise
        except Exception as exc:
            error_data = handler_exception_to_error_data(exc)
            if error_data is None:
                logger.exception("handler for %r raised", method)
                error_data = ErrorData(code=0, message=str(exc))  # the SDK's v1-compatible code
            if not dctx.cancel_requested.is_set():
                await self._write({"jsonrpc": "2.0", "id": request_id, "error": _error_dict(error_data)})

    def _refuse(self, request_id: RequestId, method: str) -> None:
        """Answer an inbound request past the bound with an error, from one writer task (ids queued, nothing else)."""
        assert self._nursery is not None
        count = self._refusals_logged.hit()
        if count:
            logger.warning(
                "refused %d request(s) from the server (the last: %s): at most %d may be in flight;"
                " further refusals are logged once per %gs",
                count,
                method,
                self.max_inbound,
                self._refusals_logged.interval,
            )
        self._refused.append(request_id)
        if not self._refusing:
            self._refusing = True
            self._nursery.start_soon(self._write_refusals)

    async def _write_refusals(self) -> None:
        message = (
            f"too many requests: this client handles at most {self.max_inbound} requests in flight"
            " from a server; retry once one is answered"
        )
        error = {"code": INTERNAL_ERROR, "message": message}
        try:
            while self._refused:
                await self._write({"jsonrpc": "2.0", "id": self._refused.popleft(), "error": error})
        finally:
            self._refusing = False

    def _inbound_notification(self, method: str, params: dict[str, Any] | None) -> None:
        """Apply cancel and progress (they correlate against our tables), then intercept, then ``on_notify``."""
        if method == "notifications/cancelled":
            request_id = cancelled_request_id_from_params(params)
            if request_id is not None and (entry := self._in_flight.get(coerce_request_id(request_id))) is not None:
                entry[1].cancel_requested.set()
                entry[0].cancel()
        elif method == "notifications/progress" and params is not None:
            token, progress = params.get("progressToken"), params.get("progress")
            if (
                isinstance(token, int | str)
                and not isinstance(token, bool)
                and isinstance(progress, int | float)
                and not isinstance(progress, bool)
                and (pending := self._pending.get(coerce_request_id(token))) is not None
                and pending.on_progress is not None
                and self._nursery is not None
            ):
                total, text = params.get("total"), params.get("message")
                if pending.progress is None:
                    pending.progress = _Serial()
                pending.progress.push(
                    self._nursery,
                    _contained_progress,
                    pending.on_progress,
                    float(progress),
                    float(total) if isinstance(total, int | float) and not isinstance(total, bool) else None,
                    text if isinstance(text, str) else None,
                )
        bound = self.bound.get(method)
        if bound is not None:
            if self._nursery is not None:
                self._notifications.push(self._nursery, _contained_bound, bound, method, params)
            return
        if run_notify_intercept(self._intercept, method, params):
            return
        if self._nursery is not None and self._on_notify is not None:
            self._notifications.push(
                self._nursery, _contained_notify, self._on_notify, _Context(self, None), method, params
            )


async def _contained_progress(fn: ProgressFnT, progress: float, total: float | None, message: str | None) -> None:
    """A raising progress callback costs only that update, never the connection."""
    try:
        await fn(progress, total, message)
    except Exception:
        logger.exception("progress callback raised")


async def _contained_bound(bound: BoundNotification, method: str, params: dict[str, Any] | None) -> None:
    """A bound notification: its params validated, then its handler; a failure costs only that notification."""
    try:
        typed = bound.params_type.model_validate(params or {}, by_name=False)
    except ValidationError as exc:
        logger.warning("dropping a malformed %s: %s", method, exc.errors(include_url=False)[:1])
        return
    try:
        await bound.handler(typed)
    except Exception:
        logger.exception("notification handler for %r raised", method)


async def _contained_notify(
    fn: Callable[..., Awaitable[None]], dctx: _Context, method: str, params: dict[str, Any] | None
) -> None:
    """A raising notification handler costs only that notification, never the connection."""
    try:
        await fn(dctx, method, params)
    except Exception:
        logger.exception("notification handler for %r raised", method)


_PAYLOADS: Final = frozenset({"result", "params", "error"})


def _plain_message(message: Any) -> dict[str, Any]:
    """A received envelope as the JSON dict the dispatcher takes.

    A payload nested past pydantic's serialization depth (a server may send a tool schema
    hundreds of levels deep) cannot be dumped whole; it is already plain JSON data (the
    transport parsed it), so it is passed on as it is, and whoever reads it (the listing)
    decides what it costs: never the wire, whose end would be the connection's.
    """
    try:
        return message.model_dump(by_alias=True, mode="json", exclude_unset=True)  # type: ignore[no-any-return]
    except ValueError:
        data: dict[str, Any] = message.model_dump(by_alias=True, mode="json", exclude_unset=True, exclude=_PAYLOADS)
        for name in _PAYLOADS & message.model_fields_set:
            data[name] = getattr(message, name)
        if isinstance(error := data.get("error"), ErrorData):
            data["error"] = error.model_dump(by_alias=True, mode="json", exclude_unset=True, exclude={"data"})
            if "data" in error.model_fields_set:
                data["error"]["data"] = error.data
        return data


@attrs.define(eq=False)
class StreamWire:
    """A :class:`~mcp_actors._wire.base.Wire` over an SDK stream pair (``SessionMessage`` in, out).

    For transports that speak the SDK's stream contract (the in-memory transport, the SDK's
    SSE and streamable-HTTP clients), so every session runs on :class:`WireDispatcher`
    and there is one call path whatever the transport. The envelopes are built and dumped
    with the SDK's models here, as its own dispatcher does; a transport with a wire of its
    own (stdio) skips them.
    """

    read_stream: Any
    """``MemoryObjectReceiveStream[SessionMessage | Exception]``: what the server sends."""
    write_stream: Any
    """``MemoryObjectSendStream[SessionMessage]``: what we send (closed when :meth:`run` ends)."""

    async def send(
        self, message: dict[str, Any], *, headers: Mapping[str, str] | None = None, bound: float | None = None
    ) -> None:
        """Put one message on the write stream (``headers`` ride along for an HTTP transport; ``bound`` is unused).

        Raises:
            WireClosed: The write stream is closed.
        """
        envelope = jsonrpc_message_adapter.validate_python(message, by_name=False)
        metadata = ClientMessageMetadata(headers=dict(headers)) if headers else None
        try:
            await self.write_stream.send(SessionMessage(envelope, metadata=metadata))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise WireClosed("the transport's stream is closed") from None

    async def run(self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver every message of the read stream until it ends; a transport exception is logged."""
        try:
            task_status.started()
            async for item in self.read_stream:
                if isinstance(item, Exception):
                    logger.warning("transport reported %s: %s", type(item).__name__, item)
                    continue
                deliver(_plain_message(item.message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            # As the SDK's dispatcher does at its end: the transport sees the session is over.
            self.write_stream.close()
