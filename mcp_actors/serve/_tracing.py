"""Spans across the gateway's hop: the client's trace continued, and carried on to the upstream server.

A request's trace context is read from its ``params._meta`` (``traceparent``, ``tracestate``:
the W3C keys MCP's SEP-414 puts there, as the SDK's client sends them) or, when ``_meta``
has none, from the HTTP request's ``traceparent`` header (what an HTTP-level tracer or proxy
sends). The gateway opens a server span under it, the span the SDK's own server opens (same
name, kind and attributes: ``tools/call <tool>``, ``SERVER``, ``mcp.method.name``, ...),
and makes it current while the request runs. The upstream call runs in that same task, so
the runtime's client span (``MCP send tools/call <tool>``, ``mcp_actors._wire.dispatch``) is
its child and injects its own context into the upstream request's ``_meta``: one trace from
the client through the gateway to the server.

OpenTelemetry's API comes with the SDK (the ``mcp`` package requires it); spans are only
recorded when an OpenTelemetry SDK is installed and a tracer provider set (with
``opentelemetry-instrument``, or ``trace.set_tracer_provider`` before the gateway starts).
Without one the gateway installs no tracing at all: not a span, not a look-up per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio
from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from opentelemetry.context import Context

from mcp_actors.serve._gateway import Answer, Around, Request, RpcError

__all__ = ["Tracing", "tracing_enabled", "trace_context"]

_tracer = otel_trace.get_tracer("mcp_actors.serve")
_NO_SDK_PROVIDERS: Final = (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)


def tracing_enabled() -> bool:
    """Whether an OpenTelemetry SDK's tracer provider is set (else a span is pure cost: nothing records it)."""
    return not isinstance(otel_trace.get_tracer_provider(), _NO_SDK_PROVIDERS)


def _extracted(carrier: Mapping[str, Any] | None) -> Context | None:
    if not carrier or "traceparent" not in carrier:
        return None
    try:
        context = propagate.extract(carrier)
    except (ValueError, TypeError):
        return None
    return context if otel_trace.get_current_span(context).get_span_context().is_valid else None


def trace_context(request: Request) -> Context | None:
    """The trace ``request`` continues: its ``_meta``'s, else its HTTP ``traceparent`` header's, else none.

    A malformed carrier counts as none (the span then starts a trace of its own).
    """
    meta = request.params.get("_meta")
    context = _extracted(meta) if isinstance(meta, dict) else None
    if context is None and request.headers is not None:
        context = _extracted(request.headers)
    return context


@attrs.define(eq=False)
class Tracing(Around):
    """A server span around every request, continuing the client's trace (see the module's doc).

    Args:
        inner: What runs inside the span (the metrics' :class:`Around`), or ``None``.
        tracer: Where the spans go (default: the global tracer provider's).
    """

    inner: Around | None = None
    tracer: otel_trace.Tracer = _tracer

    async def __call__(self, request: Request, answer: Answer) -> dict[str, Any]:
        """Answer ``request`` inside its server span; the span's status says how it ended."""
        method = request.method
        name = request.params.get("name")
        target = name if isinstance(name, str) else None
        attributes: dict[str, Any] = {"mcp.method.name": method, "mcp.protocol.version": request.version}
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
            if target is not None:
                attributes["gen_ai.tool.name"] = target
        elif method == "prompts/get" and target is not None:
            attributes["gen_ai.prompt.name"] = target
        with self.tracer.start_as_current_span(
            f"{method} {target}" if target else method,
            kind=otel_trace.SpanKind.SERVER,
            attributes=attributes,
            context=trace_context(request),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = await (self.inner(request, answer) if self.inner is not None else answer(request))
            except RpcError as exc:
                code = str(exc.code)
                span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                span.set_status(otel_trace.StatusCode.ERROR, exc.message)
                raise
            except trio.Cancelled:
                span.set_attribute("error.type", "cancelled")
                span.set_status(otel_trace.StatusCode.ERROR, "cancelled")
                raise
            if method == "tools/call" and result.get("isError") is True:
                span.set_attribute("error.type", "tool_error")
                span.set_status(otel_trace.StatusCode.ERROR)
            return result
