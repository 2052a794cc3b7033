"""The gateway's Prometheus metrics: what it answers, how fast, and how its servers fare.

Two sources, each read the cheapest way:

* **The request path** (:class:`GatewayMetrics`, an :class:`~mcp_actors.serve._gateway.Around`):
  every request the gateway answers is counted and timed by method, and every ``tools/call``
  by server and tool, into plain numbers owned by the trio thread that serves. No lock (one
  thread writes them), no label formatting per call (one series object per label set, made
  once and kept in a dict by the public tool name), one histogram bucket found by bisection.
  ``prometheus_client``'s own metric objects take a lock on every update; they are not used
  on the hot path. A scrape turns the numbers into metric families (a custom collector).
* **The runtime**: at each scrape, every enabled server's published status (connection
  state, circuit, restarts, requests in flight on its session), and, as they happen, its
  ``connection:state`` events (counted by the state reached), which a scrape between two
  changes would miss. Tool calls emit nothing for this: the relay subscribes only to rare kinds.

Label values are bounded: ``method`` by the methods the gateway serves (anything else is
``other``), ``kind`` by the fixed set in :data:`ERROR_KINDS`, ``server`` by the configured
servers, ``tool`` by the tools the gateway listed (a name it never listed, which a client
can make up, counts under ``_unlisted``), and at most :data:`MAX_TOOL_SERIES` server-tool
pairs (further ones count under ``_other``).

``prometheus-client`` is optional (``pip install 'mcp-actors[gateway]'``): without it the
gateway serves no ``/metrics`` and :func:`metrics_available` says so.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

import attrs
import mcp_types
import trio

from mcp_actors import events
from mcp_actors.connection import ConnectionState
from mcp_actors.errors import McpActorsError
from mcp_actors.serve._gateway import Answer, Around, Gateway, Request, RpcError
from mcp_actors.serve._http import HttpConnection, HttpRequest

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "BUCKETS",
    "ERROR_KINDS",
    "GatewayMetrics",
    "MAX_TOOL_SERIES",
    "METHODS",
    "MetricsUnavailable",
    "metrics_available",
]

PREFIX: Final = "mcp_actors_gateway"
METHODS: Final = (
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "other",
)
"""The ``method`` label's values: the methods the gateway serves, and ``other`` for the rest."""
ERROR_KINDS: Final = (
    "tool_error",
    "unavailable",
    "invalid_params",
    "method_not_found",
    "resource_not_found",
    "internal",
    "cancelled",
    "other",
)
"""The ``kind`` label's values (docs/gateway.md, Operations, says what each means)."""
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Histogram bucket bounds in seconds: a call through the gateway takes from under a millisecond to minutes."""
MAX_TOOL_SERIES: Final = 2000
"""At most this many ``(server, tool)`` label pairs; calls to tools past it count under ``_other``."""
_MAX_SERVERS: Final = 1000
"""At most this many server names in the event counts (a config that renames servers in a loop stays bounded)."""
_KIND_OF_CODE: Final = {
    mcp_types.INVALID_PARAMS: "invalid_params",
    mcp_types.METHOD_NOT_FOUND: "method_not_found",
    mcp_types.INTERNAL_ERROR: "internal",
    -32002: "resource_not_found",
}
_STATES: Final = tuple(state.value for state in ConnectionState)
_LE: Final = (*(repr(bound) for bound in BUCKETS), "+Inf")
_clock: Final = time.perf_counter


class MetricsUnavailable(RuntimeError):
    """Metrics were asked for and ``prometheus-client`` is not installed."""

    def __init__(self) -> None:
        super().__init__(
            "metrics need the prometheus-client package: install it (pip install 'mcp-actors[gateway]')"
            " or serve without metrics"
        )


def metrics_available() -> bool:
    """Whether ``prometheus-client`` can be imported (the gateway serves ``/metrics`` only then)."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


class _Series:
    """The numbers of one label set: count, sum, histogram buckets, errors by kind (one thread writes them)."""

    __slots__ = ("buckets", "count", "errors", "labels", "sum")

    def __init__(self, labels: tuple[str, ...]) -> None:
        self.labels = labels
        self.count = 0
        self.sum = 0.0
        self.buckets = [0] * (len(BUCKETS) + 1)  # per bucket, not cumulative: one increment per observation
        self.errors: dict[str, int] = {}

    def observe(self, seconds: float, kind: str | None) -> None:
        self.count += 1
        self.sum += seconds
        self.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        if kind is not None:
            self.errors[kind] = self.errors.get(kind, 0) + 1

    def cumulative(self) -> list[tuple[str, float]]:
        total, out = 0, []
        for le, count in zip(_LE, self.buckets, strict=True):
            total += count
            out.append((le, float(total)))
        return out


def _kind(exc: BaseException) -> str:
    if isinstance(exc, RpcError):
        return _KIND_OF_CODE.get(exc.code, "other")
    if isinstance(exc, trio.Cancelled):
        return "cancelled"
    return "internal"


@attrs.frozen
class _Upstream:
    name: str
    state: str
    circuit_open: bool
    restarts: int
    in_flight: int


@attrs.define(eq=False)
class GatewayMetrics(Around):
    """Counts and times what a gateway answers; serves them, with its servers' state, at ``/metrics``.

    Set it as the gateway's :attr:`~mcp_actors.serve.Gateway.around` (directly, or inside
    :class:`~mcp_actors.serve._tracing.Tracing`), run :meth:`watch` for the event counts, and
    route ``/metrics`` to :meth:`scrape`.

    Args:
        gateway: The gateway observed (its name table gives a tool call its labels).
        sessions: The protocol revisions of the open sessions (the HTTP front's), read at each scrape.

    Raises:
        MetricsUnavailable: ``prometheus-client`` is not installed.
    """

    gateway: Gateway
    sessions: Callable[[], Iterable[str]] = lambda: ()
    in_flight: int = attrs.field(default=0, init=False)
    """Requests being answered now."""
    tool_calls_in_flight: int = attrs.field(default=0, init=False)
    """Tool calls being answered now."""
    _methods: dict[str, _Series] = attrs.field(init=False)
    _tools: dict[str, _Series] = attrs.field(factory=dict, init=False)
    _tool_pairs: dict[tuple[str, str], _Series] = attrs.field(factory=dict, init=False)
    _unlisted: _Series = attrs.field(factory=lambda: _Series(("_unlisted", "_unlisted")), init=False)
    _overflow: _Series = attrs.field(factory=lambda: _Series(("_other", "_other")), init=False)
    _state_changes: dict[tuple[str, str], int] = attrs.field(factory=dict, init=False)
    _upstreams: list[_Upstream] = attrs.field(factory=list, init=False)
    registry: CollectorRegistry = attrs.field(init=False)
    """The registry scraped: these metrics and the process's (``process_*``)."""

    def __attrs_post_init__(self) -> None:
        try:
            from prometheus_client import CollectorRegistry, ProcessCollector
        except ImportError:
            raise MetricsUnavailable() from None
        self._methods = {method: _Series((method,)) for method in METHODS}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        ProcessCollector(registry=self.registry)

    # ------------------------------------------------------------------ the request path

    async def __call__(self, request: Request, answer: Answer) -> dict[str, Any]:
        """Answer ``request`` with ``answer``, counting and timing it."""
        if request.method == "tools/call":
            return await self._tool_call(request, answer)
        self.in_flight += 1
        start = _clock()
        try:
            result = await answer(request)
        except BaseException as exc:
            self.in_flight -= 1
            self._method_series(request.method).observe(_clock() - start, _kind(exc))
            raise
        seconds = _clock() - start
        self.in_flight -= 1
        self._method_series(request.method).observe(seconds, None)
        return result

    async def _tool_call(self, request: Request, answer: Answer) -> dict[str, Any]:
        """:meth:`__call__` for ``tools/call``: counted by method and by server and tool."""
        self.in_flight += 1
        self.tool_calls_in_flight += 1
        start = _clock()
        try:
            result = await answer(request)
        except BaseException as exc:
            self._tool_done(request, _clock() - start, _kind(exc))
            raise
        seconds = _clock() - start
        self._tool_done(request, seconds, self._tool_error_kind(request) if result.get("isError") is True else None)
        return result

    def _tool_done(self, request: Request, seconds: float, kind: str | None) -> None:
        self.in_flight -= 1
        self.tool_calls_in_flight -= 1
        self._methods["tools/call"].observe(seconds, kind)
        name = request.params.get("name")
        if isinstance(name, str):
            (self._tools.get(name) or self._tool_series(name)).observe(seconds, kind)
        else:
            self._unlisted.observe(seconds, kind)

    def _method_series(self, method: str) -> _Series:
        series = self._methods.get(method)
        return series if series is not None else self._methods["other"]

    def _target(self, name: Any) -> tuple[str, str] | None:
        return self.gateway.tools.resolve(name) if isinstance(name, str) else None

    def _tool_series(self, name: str) -> _Series:
        """The series of a public tool name seen first: its server and tool, if the gateway listed it."""
        target = self._target(name)
        if target is None:
            return self._unlisted  # not kept: a made-up name must not grow the dict
        server_id, tool = target
        try:
            server = self.gateway.service.get(server_id).name
        except McpActorsError:
            server = server_id
        series = self._tool_pairs.get((server, tool))
        if series is None:
            if len(self._tool_pairs) >= MAX_TOOL_SERIES:
                series = self._overflow
            else:
                series = self._tool_pairs[(server, tool)] = _Series((server, tool))
        self._tools[name] = series  # bounded by the gateway's name table
        return series

    def _tool_error_kind(self, request: Request) -> str:
        """``unavailable`` when the call's server is not connected (the gateway answered), else ``tool_error``."""
        target = self._target(request.params.get("name"))
        if target is not None:
            try:
                state = self.gateway.service.status(target[0]).state
            except McpActorsError:
                return "unavailable"
            if state is not ConnectionState.CONNECTED:
                return "unavailable"
        return "tool_error"

    # ------------------------------------------------------------------ the runtime

    async def watch(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Count the runtime's ``connection:state`` events by server and state reached, until cancelled."""
        with self.gateway.service.subscribe(types=(events.CONNECTION_STATE,)) as subscription:
            task_status.started()
            async for event in subscription:
                key = (str(event.data.get("serverName", "")), str(event.data.get("state", "")))
                if key in self._state_changes or len(self._state_changes) < _MAX_SERVERS * len(_STATES):
                    self._state_changes[key] = self._state_changes.get(key, 0) + 1

    async def refresh(self) -> None:
        """Take a snapshot of every enabled server's status (what the next :meth:`collect` reports)."""
        upstreams = []
        for record in await self.gateway.service.list():
            if not record.is_active:
                continue
            status = self.gateway.service.status(record.id)
            upstreams.append(
                _Upstream(
                    name=record.name,
                    state=status.state.value,
                    circuit_open=status.circuit_open,
                    restarts=status.restarts,
                    in_flight=status.calls_in_flight,
                )
            )
        self._upstreams = upstreams

    async def scrape(self, conn: HttpConnection, request: HttpRequest) -> None:
        """Answer a ``GET /metrics``: the Prometheus text format."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if request.method != "GET":
            await conn.respond(405, (("allow", "GET"),))
            return
        try:
            await self.refresh()
        except McpActorsError:
            pass  # the config cannot be read now: the servers' part is the last snapshot's
        await conn.respond(200, (("content-type", CONTENT_TYPE_LATEST),), generate_latest(self.registry))

    # ------------------------------------------------------------------ the families

    def collect(self) -> Iterator[Any]:
        """The metric families, built from the numbers as they are now."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        requests = CounterMetricFamily(f"{PREFIX}_requests", "Requests answered, by method.", labels=["method"])
        request_errors = CounterMetricFamily(
            f"{PREFIX}_request_errors", "Requests that failed, by method and kind.", labels=["method", "kind"]
        )
        request_seconds = HistogramMetricFamily(
            f"{PREFIX}_request_duration_seconds", "Time to answer a request, by method.", labels=["method"]
        )
        for series in self._methods.values():
            requests.add_metric(series.labels, series.count)
            request_seconds.add_metric(series.labels, series.cumulative(), series.sum)
            for kind, count in series.errors.items():
                request_errors.add_metric((*series.labels, kind), count)
        yield from (requests, request_errors, request_seconds)

        labels = ["server", "tool"]
        calls = CounterMetricFamily(f"{PREFIX}_tool_calls", "Tool calls answered, by server and tool.", labels=labels)
        call_errors = CounterMetricFamily(
            f"{PREFIX}_tool_call_errors", "Tool calls that failed, by server, tool and kind.", labels=[*labels, "kind"]
        )
        call_seconds = HistogramMetricFamily(
            f"{PREFIX}_tool_call_duration_seconds", "Time to answer a tool call, by server and tool.", labels=labels
        )
        for series in (*self._tool_pairs.values(), self._unlisted, self._overflow):
            if not series.count:
                continue
            calls.add_metric(series.labels, series.count)
            call_seconds.add_metric(series.labels, series.cumulative(), series.sum)
            for kind, count in series.errors.items():
                call_errors.add_metric((*series.labels, kind), count)
        yield from (calls, call_errors, call_seconds)

        yield GaugeMetricFamily(f"{PREFIX}_requests_in_flight", "Requests being answered now.", value=self.in_flight)
        yield GaugeMetricFamily(
            f"{PREFIX}_tool_calls_in_flight", "Tool calls being answered now.", value=self.tool_calls_in_flight
        )
        sessions = GaugeMetricFamily(
            f"{PREFIX}_sessions", "Open sessions (2025 revisions), by protocol revision.", labels=["revision"]
        )
        by_revision: dict[str, int] = {}
        for revision in self.sessions():
            by_revision[revision] = by_revision.get(revision, 0) + 1
        for revision, count in sorted(by_revision.items()):
            sessions.add_metric((revision,), count)
        yield sessions
        yield GaugeMetricFamily(
            f"{PREFIX}_event_streams",
            "Open streams of list changes (a session's GET, subscriptions/listen).",
            value=len(self.gateway.listeners),
        )

        state = GaugeMetricFamily(
            f"{PREFIX}_upstream_state", "1 for a server's state, 0 for the others.", labels=["server", "state"]
        )
        circuit = GaugeMetricFamily(
            f"{PREFIX}_upstream_circuit_open", "1 while a server's circuit is open.", labels=["server"]
        )
        restarts = CounterMetricFamily(
            f"{PREFIX}_upstream_restarts", "Restarts of a server's connection actor.", labels=["server"]
        )
        upstream_in_flight = GaugeMetricFamily(
            f"{PREFIX}_upstream_requests_in_flight", "Requests running on a server's session now.", labels=["server"]
        )
        for upstream in self._upstreams:
            for value in _STATES:
                state.add_metric((upstream.name, value), 1.0 if upstream.state == value else 0.0)
            circuit.add_metric((upstream.name,), 1.0 if upstream.circuit_open else 0.0)
            restarts.add_metric((upstream.name,), upstream.restarts)
            upstream_in_flight.add_metric((upstream.name,), upstream.in_flight)
        yield from (state, circuit, restarts, upstream_in_flight)

        changes = CounterMetricFamily(
            f"{PREFIX}_upstream_state_changes",
            "Connection state changes of a server, by the state reached.",
            labels=["server", "state"],
        )
        for key, count in sorted(self._state_changes.items()):
            changes.add_metric(key, count)
        yield changes


@attrs.define(eq=False)
class _Collector:
    """``prometheus_client``'s view of :class:`GatewayMetrics` (a custom collector: built at each scrape)."""

    metrics: GatewayMetrics

    def collect(self) -> Iterator[Any]:
        return self.metrics.collect()
