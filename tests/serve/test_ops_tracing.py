"""One trace from the client through the gateway to the upstream server (OpenTelemetry's SDK, in memory).

The SDK's client sends its span's context in ``_meta.traceparent``; the gateway opens a
server span under it; the runtime's client span for the upstream call is that span's child
and its context is what the upstream server (in memory, recording the ``_meta`` it got) reads.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opskit import BOUND, config

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._wire import dispatch as _dispatch
from mcp_actors._wire.memory import MemoryParams
from mcp_actors._wire.transports import StdioParams, TransportParams, register_transport_kind
from mcp_actors.runtime import open_runtime
from mcp_actors.serve import HttpGateway, _tracing, serve_http
from mcp_actors.serve._metrics import GatewayMetrics
from mcp_actors.serve._tracing import Tracing

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@contextlib.contextmanager
def installed_tracer_provider() -> Iterator[InMemorySpanExporter]:
    """An SDK tracer provider for one test, then the API's default again (as tests/wire/test_dispatch.py does)."""
    from mcp.shared import _otel
    from opentelemetry.util._once import Once

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    proxies = [_otel._tracer, _dispatch._tracer, _tracing._tracer]
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


@contextlib.contextmanager
def recording_upstream() -> Iterator[list[dict[str, Any]]]:
    """Serve every stdio record in memory by a server whose tool ``where`` records the ``_meta`` it got."""
    seen: list[dict[str, Any]] = []

    def build() -> MCPServer[Any]:
        server: MCPServer[Any] = MCPServer("recorder")

        @server.tool(structured_output=False)
        async def where(ctx: Context) -> str:
            seen.append(dict(ctx.request_context.meta or {}))
            return "here"

        return server

    params = MemoryParams(server=build)

    def from_record(record: McpServerRecord) -> TransportParams:
        return params

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        yield seen
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


@contextlib.asynccontextmanager
async def gateway_over(tmp_path: Path) -> AsyncIterator[HttpGateway]:
    async with open_runtime(config(tmp_path / "cfg.json", "up")) as runtime, trio.open_nursery() as nursery:
        gateway: HttpGateway = await nursery.start(functools.partial(serve_http, runtime.service))
        yield gateway
        with trio.fail_after(BOUND):
            await gateway.stop(1.0)


def _ids(span: ReadableSpan) -> tuple[str, str, str | None]:
    """``(trace id, span id, parent span id)`` in hex."""
    context = span.get_span_context()
    assert context is not None
    parent = f"{span.parent.span_id:016x}" if span.parent is not None else None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}", parent


def _traceparent(meta: dict[str, Any]) -> tuple[str, str]:
    """``(trace id, parent span id)`` of a ``_meta``'s ``traceparent``."""
    _version, trace_id, span_id, _flags = meta["traceparent"].split("-")
    return trace_id, span_id


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_one_trace_spans_client_gateway_and_upstream(tmp_path: Path, mode: Any) -> None:
    """Client span -> the gateway's server span -> its client span -> the traceparent the upstream read."""
    with installed_tracer_provider() as exporter, recording_upstream() as seen:
        async with gateway_over(tmp_path) as gateway, Client(gateway.url, mode=mode) as client:
            assert isinstance(gateway.gateway.around, Tracing)
            with trio.fail_after(BOUND):
                await client.list_tools()
                exporter.clear()
                assert not (await client.call_tool("up__where", {})).is_error
        spans = {span.name: span for span in exporter.get_finished_spans()}
    client_trace, client_span, _ = _ids(spans["MCP send tools/call up__where"])
    served = spans["tools/call up__where"]
    assert served.kind is otel_trace.SpanKind.SERVER
    attributes = dict(served.attributes or {})
    assert attributes["gen_ai.tool.name"] == "up__where"
    assert (attributes["mcp.protocol.version"] == "2026-07-28") == (mode == "2026-07-28")
    trace_id, served_span, served_parent = _ids(served)
    assert (trace_id, served_parent) == (client_trace, client_span)
    hop_trace, hop_span, hop_parent = _ids(spans["MCP send tools/call where"])
    assert (hop_trace, hop_parent) == (client_trace, served_span)
    assert _traceparent(seen[-1]) == (client_trace, hop_span)  # what the upstream server read
    upstream_trace, _, upstream_parent = _ids(spans["tools/call where"])  # the upstream SDK server's own span
    assert (upstream_trace, upstream_parent) == (client_trace, hop_span)


async def test_the_http_traceparent_header_is_continued_when_meta_has_none(tmp_path: Path) -> None:
    """A raw request with only the HTTP ``traceparent`` header joins that trace; ``_meta``'s wins over it."""
    header = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    other_trace, other_span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    with installed_tracer_provider() as exporter, recording_upstream() as seen:
        async with gateway_over(tmp_path) as gateway, httpx2.AsyncClient() as http:
            base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
            with trio.fail_after(BOUND):
                init = await http.post(
                    gateway.url,
                    headers=base,
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "1"},
                        },
                    },
                )
                headers = {**base, "mcp-session-id": init.headers["mcp-session-id"], "traceparent": header}
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "up__where"}}
                assert (await http.post(gateway.url, headers=headers, json=call)).json()["result"]["content"]
                exporter.clear()
                call["id"] = 3
                call["params"] = {"name": "up__where", "_meta": {"traceparent": f"00-{other_trace}-{other_span}-01"}}
                assert (await http.post(gateway.url, headers=headers, json=call)).json()["result"]["content"]
                second = [s for s in exporter.get_finished_spans() if s.name == "tools/call up__where"]
    by_header, by_meta = seen[-2], seen[-1]
    assert _traceparent(by_header)[0] == CLIENT_TRACE
    assert _traceparent(by_meta)[0] == other_trace
    assert [_ids(span)[0::2] for span in second] == [(other_trace, other_span)]


async def test_without_an_opentelemetry_sdk_nothing_is_traced_or_sent(tmp_path: Path) -> None:
    """No tracer provider: no tracing wrapper in the gateway, no trace context to the upstream."""
    assert isinstance(otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider)
    with recording_upstream() as seen:
        async with gateway_over(tmp_path) as gateway, Client(gateway.url, mode="legacy") as client:
            assert isinstance(gateway.gateway.around, GatewayMetrics)
            with trio.fail_after(BOUND):
                assert not (await client.call_tool("up__where", {})).is_error
    assert "traceparent" not in seen[-1]


async def test_the_stdio_front_continues_the_trace_too(tmp_path: Path) -> None:
    """Over stdio, a request's ``_meta.traceparent`` is continued by the gateway's span and carried upstream."""
    import trio.testing
    from test_stdio_front import Client as StdioClient

    from mcp_actors.serve import serve_stdio

    with installed_tracer_provider() as exporter, recording_upstream() as seen:
        async with open_runtime(config(tmp_path / "cfg.json", "up")) as runtime:
            stdin_send, stdin_receive = trio.testing.memory_stream_one_way_pair()
            stdout_send, stdout_receive = trio.testing.memory_stream_one_way_pair()
            client = StdioClient(stdin_send, stdout_receive)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    functools.partial(serve_stdio, runtime.service, stdin=stdin_receive, stdout=stdout_send, grace=1.0)
                )
                info = {"name": "t", "version": "1"}
                init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
                await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
                await client.answer_to(1)
                await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                meta = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}
                params = {"name": "up__where", "arguments": {}, "_meta": meta}
                await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
                assert "result" in await client.answer_to(2)
                await stdin_send.aclose()
        served = [s for s in exporter.get_finished_spans() if s.name == "tools/call up__where"]
    assert [_ids(span)[0::2] for span in served] == [(CLIENT_TRACE, CLIENT_SPAN)]
    assert _traceparent(seen[-1])[0] == CLIENT_TRACE
