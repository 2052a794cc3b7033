"""WireDispatcher: the SDK's Dispatcher contract over our stdio wire, against real servers."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import attrs
import mcp.types as mcp_types
import pytest
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from trio.testing import wait_all_tasks_blocked

from mcp_actors._connection.live import LiveSession, RequestStamp
from mcp_actors._connection.status import CLIENT_INFO
from mcp_actors._connection.tasks import TASKS_EXTENSION, session_kwargs
from mcp_actors._sdk import negotiate_auto
from mcp_actors._wire import dispatch as _dispatch
from mcp_actors._wire.base import Deliver, Wire
from mcp_actors._wire.dispatch import WireDispatcher
from mcp_actors._wire.transports import StdioParams, TransportLink, open_stdio_transport
from mcp_actors.testing import demo_server_command, fault_server_command

BOUND = 60.0
"""Generous bound for anything that waits on a real server process on a loaded machine."""


@attrs.define(eq=False)
class TapWire:
    """The real stdio wire, with every message we send kept for the test to read."""

    inner: Wire
    sent: list[dict[str, Any]] = attrs.field(factory=list)
    headers: list[dict[str, str]] = attrs.field(factory=list)

    async def send(
        self, message: dict[str, Any], *, headers: Mapping[str, str] | None = None, bound: float | None = None
    ) -> None:
        self.sent.append(message)
        self.headers.append(dict(headers or {}))
        await self.inner.send(message, headers=headers, bound=bound)

    async def run(self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.inner.run(deliver, task_status=task_status)


@attrs.define(eq=False)
class Bed:
    link: TransportLink
    wire: TapWire
    dispatcher: WireDispatcher
    notes: list[tuple[str, Any]] = attrs.field(factory=list)
    """What on_notify_intercept saw, in receive order."""
    notified: list[str] = attrs.field(factory=list)
    """What on_notify got."""
    handled: list[tuple[str, Any]] = attrs.field(factory=list)
    """What on_notify got, with the params, in the order it got them."""

    async def wait_stderr(self, text: str) -> str:
        assert self.link.stderr is not None
        with trio.fail_after(BOUND):
            return await self.link.stderr.wait_for(lambda line: text in line)


@contextlib.asynccontextmanager
async def open_bed(*flags: str) -> AsyncIterator[Bed]:
    """A fault server over the stdio wire, driven by a bare WireDispatcher (no SDK session)."""
    argv = fault_server_command(*flags)
    params = StdioParams(command=argv[0], args=tuple(argv[1:]))
    async with open_stdio_transport(params, label="disp") as link:
        assert link.wire is not None
        wire = TapWire(link.wire)
        bed = Bed(link=link, wire=wire, dispatcher=WireDispatcher(wire))

        async def on_request(dctx: Any, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
            return {}

        async def on_notify(dctx: Any, method: str, params: Mapping[str, Any] | None) -> None:
            bed.notified.append(method)
            bed.handled.append((method, params))

        def intercept(method: str, params: Mapping[str, Any] | None) -> bool:
            bed.notes.append((method, params))
            return False

        async with trio.open_nursery() as nursery:
            await nursery.start(bed.dispatcher.run, on_request, on_notify, intercept)
            yield bed
            nursery.cancel_scope.cancel()


async def call(bed: Bed, name: str, arguments: dict[str, Any], *, bound: float = BOUND, **opts: Any) -> dict[str, Any]:
    with trio.fail_after(bound):
        return await bed.dispatcher.send_raw_request("tools/call", {"name": name, "arguments": arguments}, opts)  # type: ignore[arg-type]


async def test_a_request_gets_its_answer() -> None:
    """A tools/call goes out as one JSON-RPC line and its result dict comes back to the caller."""
    async with open_bed() as bed:
        result = await call(bed, "echo", {"text": "hello"})
        assert result["content"] == [{"type": "text", "text": "hello"}]
        assert bed.wire.sent[-1] == {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello"}},
        }


async def test_caller_supplied_ids_are_sent_verbatim_and_correlate() -> None:
    """A string id (``listen-7``) goes out verbatim; a stringified int ("42") correlates whether echoed as is."""
    async with open_bed() as bed:
        with trio.fail_after(BOUND):
            assert await bed.dispatcher.send_raw_request("ping", None, {"request_id": "listen-7"}) == {}
            assert await bed.dispatcher.send_raw_request("ping", None, {"request_id": "42"}) == {}
        assert [m["id"] for m in bed.wire.sent] == ["listen-7", "42"]
        assert "params" not in bed.wire.sent[0]  # JSON-RPC forbids params: null


async def test_an_id_in_flight_cannot_be_reused() -> None:
    """Supplying the id of a request still in flight is refused before anything is sent."""
    async with open_bed("--hang-tool", "sleep") as bed, trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(call, bed, "sleep", {"seconds": 1}, request_id="dup"))
        await bed.wait_stderr("hanging call dup")
        with pytest.raises(ValueError, match="already in flight"):
            await bed.dispatcher.send_raw_request("ping", None, {"request_id": "dup"})
        nursery.cancel_scope.cancel()


async def test_an_error_answer_is_an_mcp_error() -> None:
    """The server's JSON-RPC error arrives as MCPError with its code and message."""
    async with open_bed() as bed:
        with pytest.raises(MCPError) as info:
            await call(bed, "no-such-tool", {})
        assert info.value.error.code == mcp_types.INVALID_PARAMS
        assert "unknown tool" in info.value.error.message


async def test_timeout_raises_request_timeout_and_cancels_on_the_server() -> None:
    """``timeout`` ends the wait with REQUEST_TIMEOUT and the server is told (notifications/cancelled)."""
    async with open_bed("--hang-tool", "sleep") as bed:
        with pytest.raises(MCPError) as info:
            await call(bed, "sleep", {"seconds": 1}, timeout=0.2)
        assert info.value.error.code == mcp_types.REQUEST_TIMEOUT
        await bed.wait_stderr("cancelled 1")
        assert bed.wire.sent[-1]["method"] == "notifications/cancelled"
        assert bed.wire.sent[-1]["params"]["requestId"] == 1
        assert bed.dispatcher.requests_pending == 0


async def test_a_cancelled_caller_cancels_on_the_server() -> None:
    """Cancelling the caller sends notifications/cancelled for its request, and nothing stays pending."""
    async with open_bed("--hang-tool", "sleep") as bed:
        with trio.CancelScope() as scope:

            async def cancel_when_hung() -> None:
                await bed.wait_stderr("hanging call 1")
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_hung)
                await call(bed, "sleep", {"seconds": 1})
        assert scope.cancelled_caught
        await bed.wait_stderr("cancelled 1")
        assert bed.dispatcher.requests_pending == 0


async def test_cancel_on_abandon_false_sends_no_cancel() -> None:
    """With ``cancel_on_abandon`` false an abandoned request is not cancelled on the server."""
    async with open_bed("--hang-tool", "sleep") as bed:
        with pytest.raises(MCPError):
            await call(bed, "sleep", {"seconds": 1}, timeout=0.2, cancel_on_abandon=False)
        assert [m.get("method") for m in bed.wire.sent] == ["tools/call"]


async def test_progress_reaches_the_callback_with_the_request_id_as_token() -> None:
    """``on_progress`` gets the request id as progressToken and every update, in order, before the call returns."""
    seen: list[tuple[float, float | None]] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with open_bed("--flood-notifications", "3") as bed:
        await call(bed, "echo", {"text": "x"}, on_progress=progressed)
        assert bed.wire.sent[-1]["params"]["_meta"] == {"progressToken": 1}
        # Every update sent before the answer has reached the callback when the call returns.
        assert seen == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]


async def test_notifications_are_intercepted_in_receive_order_before_the_answer() -> None:
    """Every notification reaches the intercept, in wire order, before the answer after them resolves."""
    async with open_bed("--flood-notifications", "4") as bed:
        await call(bed, "echo", {"text": "x"})
        # Synchronous on the receive path: all four are there the moment the call returns.
        assert [params["data"] for _, params in bed.notes] == [f"flood {i} of 4" for i in range(1, 5)]
        with trio.fail_after(BOUND):
            await wait_all_tasks_blocked()
        assert bed.notified == ["notifications/message"] * 4
        assert [params["data"] for method, params in bed.handled] == [f"flood {i} of 4" for i in range(1, 5)]


async def test_the_wire_ending_fails_waiters_and_later_requests() -> None:
    """A server dying mid-call wakes the caller with CONNECTION_CLOSED; later requests get it at once."""
    async with open_bed("--crash-on-call", "1") as bed:
        with pytest.raises(MCPError) as info:
            await call(bed, "echo", {"text": "x"})
        assert info.value.error.code == mcp_types.CONNECTION_CLOSED
        assert bed.link.dead.is_set()
        with pytest.raises(MCPError) as later:
            await bed.dispatcher.send_raw_request("ping", None)
        assert later.value.error.code == mcp_types.CONNECTION_CLOSED
        await bed.dispatcher.notify("notifications/initialized", None)  # dropped, never raises


async def test_a_caller_cancelled_mid_line_leaves_the_stream_framed() -> None:
    """A caller cancelled half-way through writing a big message does not cut its line: the next call works."""
    async with open_bed("--slow-start", "3") as bed:
        await bed.wait_stderr("slow start")  # the server now sleeps without reading: the pipe fills
        with trio.CancelScope() as scope:

            async def cancel_when_blocked() -> None:
                await wait_all_tasks_blocked(cushion=0.1)  # the writer waits for room in the pipe
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_blocked)
                # No courtesy cancel: the next message written is the next call itself.
                await call(bed, "echo", {"text": "x" * (1 << 20)}, cancel_on_abandon=False)
        assert scope.cancelled_caught
        result = await call(bed, "echo", {"text": "after"}, bound=30)  # the server sleeps 3 s, then answers
        assert result["content"] == [{"type": "text", "text": "after"}]
        assert bed.link.garbage_lines == 0 and not bed.link.dead.is_set()


async def test_no_trace_context_without_an_opentelemetry_sdk() -> None:
    """With the API's default tracer provider nothing is added to ``params._meta`` (tracing costs nothing)."""
    assert isinstance(otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider)
    async with open_bed() as bed:
        await call(bed, "echo", {"text": "x"})
        assert "_meta" not in bed.wire.sent[-1]["params"]


# ---------------------------------------------------------------------- OpenTelemetry


@contextlib.contextmanager
def installed_tracer_provider() -> Iterator[InMemorySpanExporter]:
    """Install an SDK tracer provider for one test, then put the API's default back.

    The global provider is set-once by design; tests reset it the way OpenTelemetry's own
    test helpers do, and drop the real tracers the SDK's and our proxy tracers cached.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    from mcp.shared import _otel
    from opentelemetry.util._once import Once

    proxies = [_otel._tracer, _dispatch._tracer]
    otel_trace._TRACER_PROVIDER_SET_ONCE = Once()
    otel_trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        otel_trace._TRACER_PROVIDER = None
        otel_trace._TRACER_PROVIDER_SET_ONCE = Once()
        for proxy in proxies:
            proxy._real_tracer = None  # type: ignore[attr-defined]


def span_facts(exporter: InMemorySpanExporter) -> list[tuple[str, str, dict[str, Any], str]]:
    return [
        (span.name, span.kind.name, dict(span.attributes or {}), span.status.status_code.name)
        for span in exporter.get_finished_spans()
    ]


async def session_calls(session: ClientSession) -> None:
    """The same requests on either path: the handshake, a good call, a call the server rejects."""
    with trio.fail_after(BOUND):
        await session.initialize()
        await session.call_tool("echo", {"text": "x"})
        with pytest.raises(MCPError):
            await session.call_tool("no-such-tool", {})


async def test_spans_match_the_sdk_dispatcher() -> None:
    """Our client spans have the SDK's names, kinds, attributes and error status, and carry trace context."""
    argv = fault_server_command()
    with installed_tracer_provider() as exporter:
        async with (
            stdio_client(StdioServerParameters(command=argv[0], args=argv[1:])) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session_calls(session)
        sdk_spans = span_facts(exporter)
        exporter.clear()
        params = StdioParams(command=argv[0], args=tuple(argv[1:]))
        async with open_stdio_transport(params, label="otel") as link:
            assert link.wire is not None
            wire = TapWire(link.wire)
            async with ClientSession(dispatcher=WireDispatcher(wire)) as session:
                await session_calls(session)
        our_spans = exporter.get_finished_spans()
    assert span_facts_of(our_spans) == sdk_spans
    names = [name for name, *_ in sdk_spans]
    assert "MCP send tools/call echo" in names and "MCP send tools/call no-such-tool" in names
    rejected = next(facts for facts in sdk_spans if facts[0] == "MCP send tools/call no-such-tool")
    assert rejected[2]["error.type"] == str(mcp_types.INVALID_PARAMS) and rejected[3] == "ERROR"
    # W3C trace context: the request's traceparent names the span that sent it.
    call = next(m for m in wire.sent if m.get("method") == "tools/call")
    span = next(s for s in our_spans if s.name == "MCP send tools/call echo")
    context = span.get_span_context()
    assert context is not None
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert call["params"]["_meta"]["traceparent"] == expected


def span_facts_of(spans: Any) -> list[tuple[str, str, dict[str, Any], str]]:
    return [(s.name, s.kind.name, dict(s.attributes or {}), s.status.status_code.name) for s in spans]


# ---------------------------------------------------------------------- the lean tools/call


async def _sample(ctx: Any, params: Any) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=-1, message="no")


async def _elicit(ctx: Any, params: Any) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=-1, message="no")


async def _roots(ctx: Any) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=-1, message="no")


@pytest.mark.parametrize("negotiate", ["legacy", "auto"])
@pytest.mark.parametrize("offered", ["none", "all", "tasks"])
async def test_the_lean_tools_call_is_stamped_like_the_sdks(negotiate: str, offered: str) -> None:
    """LiveSession.call_tool sends the params, _meta and headers the SDK's call_tool sends, on either revision.

    With the tasks extension given to the session too (as every connection gives it): declared
    at 2026-07-28 by both, at 2025-11-25 by neither.
    """
    host_kwargs: dict[str, Any] = {}
    if offered in ("all", "tasks"):
        host_kwargs = {
            "sampling_callback": _sample,
            "sampling_capabilities": mcp_types.SamplingCapability(tools=mcp_types.SamplingToolsCapability()),
            "elicitation_callback": _elicit,
            "list_roots_callback": _roots,
        }
    if offered == "tasks":
        host_kwargs.update(session_kwargs())
    argv = demo_server_command()
    params = StdioParams(command=argv[0], args=tuple(argv[1:]))
    with trio.fail_after(BOUND):
        async with open_stdio_transport(params, label="stamp") as link:
            assert link.wire is not None
            wire = TapWire(link.wire)
            dispatcher = WireDispatcher(wire)
            async with ClientSession(dispatcher=dispatcher, client_info=CLIENT_INFO, **host_kwargs) as session:
                if negotiate == "auto":
                    await negotiate_auto(session)
                else:
                    await session.initialize()
                listing = await session.list_tools()
                sdk_result = await session.call_tool("echo", {"text": "same"})
                live = LiveSession(
                    session=session,
                    link=link,
                    label="stamp",
                    dispatcher=dispatcher,
                    stamp=RequestStamp.negotiated(session, client_info=CLIENT_INFO, host_kwargs=host_kwargs),
                )
                live.tool_defs = {tool.name: tool for tool in listing.tools}
                our_result = await live.call_tool("echo", {"text": "same"})
    assert session.protocol_version == ("2026-07-28" if negotiate == "auto" else "2025-11-25")
    assert our_result == sdk_result
    calls = [(m, h) for m, h in zip(wire.sent, wire.headers, strict=True) if m.get("method") == "tools/call"]
    (sdk_message, sdk_headers), (our_message, our_headers) = calls
    assert our_message["params"] == sdk_message["params"]
    assert our_headers == sdk_headers
    if negotiate == "auto":
        assert "io.modelcontextprotocol/clientCapabilities" in our_message["params"]["_meta"]
        assert our_headers["mcp-name"] == "echo"
        declared = our_message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].get("extensions")
        assert (declared == {TASKS_EXTENSION: {}}) is (offered == "tasks")


def test_task_methods_are_routed_by_task_id_and_a_call_may_decline_tasks() -> None:
    """tasks/* carry Mcp-Name = taskId (SEP-2663 routing); a tools/call may leave the extension undeclared."""
    stamp = RequestStamp(
        version="2026-07-28",
        meta={"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        taskless_meta={"io.modelcontextprotocol/clientCapabilities": {}},
        modern=True,
    )
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        params: dict[str, Any] = {"taskId": "t-42"}
        opts: Any = {}
        stamp.apply(method, params, opts)
        assert opts["headers"]["mcp-name"] == "t-42" and opts["headers"]["mcp-method"] == method
    params = {"name": "echo"}
    opts = {}
    stamp.apply("tools/call", params, opts, tasks=False)
    assert params["_meta"] == {"io.modelcontextprotocol/clientCapabilities": {}}


async def test_a_result_that_breaks_the_output_schema_is_refused() -> None:
    """The lean call validates structuredContent against the listed outputSchema, in the SDK's words."""
    argv = demo_server_command()
    params = StdioParams(command=argv[0], args=tuple(argv[1:]))
    with trio.fail_after(BOUND):
        async with open_stdio_transport(params, label="schema") as link:
            assert link.wire is not None
            dispatcher = WireDispatcher(link.wire)
            async with ClientSession(dispatcher=dispatcher) as session:
                await session.initialize()
                live = LiveSession(
                    session=session,
                    link=link,
                    label="schema",
                    dispatcher=dispatcher,
                    stamp=RequestStamp.negotiated(session, client_info=CLIENT_INFO, host_kwargs={}),
                )
                live.tool_defs = {tool.name: tool for tool in (await session.list_tools()).tools}
                good = await live.call_tool("weather", {"city": "Oslo"})
                assert isinstance(good, mcp_types.CallToolResult) and good.structured_content is not None
                with pytest.raises(RuntimeError, match="Invalid structured content returned by tool bad_weather"):
                    await live.call_tool("bad_weather", {})


@attrs.define(eq=False)
class HandWire:
    """A wire the test feeds by hand: what it delivers is what a peer would have sent."""

    deliver: Deliver | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)

    async def send(
        self, message: dict[str, Any], *, headers: Mapping[str, str] | None = None, bound: float | None = None
    ) -> None:
        await trio.lowlevel.checkpoint()

    async def run(self, deliver: Deliver, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.deliver = deliver
        task_status.started()
        await self.ended.wait()


async def test_bound_notifications_are_validated_and_handled_in_order_without_a_task() -> None:
    """A bound notification reaches its handler typed and in order; a malformed or failing one costs only itself."""
    seen: list[str] = []

    async def handler(params: mcp_types.TaskStatusNotificationParams) -> None:
        if params.task_id == "boom":
            raise RuntimeError("a handler bug")
        seen.append(params.task_id)

    notified: list[str] = []

    async def on_notify(dctx: Any, method: str, params: Any) -> None:
        notified.append(method)

    async def on_request(dctx: Any, method: str, params: Any) -> dict[str, Any]:
        return {}

    wire = HandWire()
    dispatcher = WireDispatcher(
        wire,
        bound={
            "notifications/tasks/status": _dispatch.BoundNotification(
                params_type=mcp_types.TaskStatusNotificationParams, handler=handler
            )
        },
    )
    status: dict[str, Any] = {
        "status": "working",
        "createdAt": "2026-11-30T00:00:00Z",
        "lastUpdatedAt": "2026-11-30T00:00:00Z",
        "ttl": None,
    }
    async with trio.open_nursery() as nursery:
        await nursery.start(dispatcher.run, on_request, on_notify)
        assert wire.deliver is not None
        for params in ({"taskId": "a"}, {"status": "working"}, {"taskId": "boom"}, {"taskId": "b"}):
            message = {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {**status, **params}}
            if "taskId" not in params:
                message["params"] = params  # malformed: no taskId, no timestamps
            wire.deliver(message)
        wire.deliver({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
        await wait_all_tasks_blocked()
        assert seen == ["a", "b"]
        assert notified == ["notifications/message"]
        wire.ended.set()
