"""What an HTTP gateway gets for its operators: health, metrics and tracing, fitted to its front in one place.

:func:`~mcp_actors.serve.serve_http` calls :meth:`Operations.install` on the front it built
and runs :meth:`Operations.run` beside it; each part is its own module (``_health``,
``_metrics``, ``_tracing``) and knows nothing of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from mcp_actors.serve._health import Health, Route, serve_ops
from mcp_actors.serve._metrics import GatewayMetrics, MetricsUnavailable, metrics_available
from mcp_actors.serve._tracing import Tracing, tracing_enabled

if TYPE_CHECKING:
    from mcp_actors.serve._streamable import HttpFront

__all__ = ["Operations"]


@attrs.define(eq=False)
class Operations:
    """A gateway's health, its metrics (or ``None``) and where they are served.

    Attributes:
        health: Liveness and readiness.
        metrics: The metrics, or ``None`` when off.
        metrics_port: The operator's own port, or ``None``: the endpoint's listener serves them.
        routes: The operator's paths and what answers them.
    """

    health: Health
    metrics: GatewayMetrics | None
    metrics_port: int | None
    routes: dict[str, Route]

    @classmethod
    def install(cls, front: HttpFront, *, metrics: bool | None, metrics_port: int | None) -> Operations:
        """Fit health, metrics and tracing to ``front`` and its gateway.

        Args:
            front: The HTTP front (its routes are set) and, through it, the gateway (its
                :attr:`~mcp_actors.serve.Gateway.around` is set).
            metrics: ``None``: on when ``prometheus-client`` is installed; ``True``: on, or raise.
            metrics_port: As for :func:`~mcp_actors.serve.serve_http`.

        Raises:
            MetricsUnavailable: ``metrics=True`` and ``prometheus-client`` is not installed.
            ValueError: ``metrics_port`` is not a port number.
        """
        if metrics_port is not None and not (isinstance(metrics_port, int) and 0 <= metrics_port <= 65535):
            raise ValueError(f"metrics_port must be a port number (0-65535) or None, got {metrics_port!r}")
        gateway = front.gateway
        health = Health(gateway.service)
        if metrics is None:
            metrics = metrics_available()
        elif metrics and not metrics_available():
            raise MetricsUnavailable()
        counted = None
        if metrics:
            counted = GatewayMetrics(gateway, sessions=lambda: [session.version for session in front.sessions.values()])
        if tracing_enabled():
            gateway.around = Tracing(inner=counted)
        else:
            gateway.around = counted
        routes: dict[str, Route] = {"/healthz": health.healthz, "/readyz": health.readyz}
        if counted is not None:
            routes["/metrics"] = counted.scrape
        front.routes = routes if metrics_port is None else {"/healthz": health.healthz, "/readyz": health.readyz}
        return cls(health=health, metrics=counted, metrics_port=metrics_port, routes=routes)

    async def run(self, host: str, base_url: str, *, task_status: trio.TaskStatus[str | None]) -> None:
        """Count the runtime's events and serve the operator's port, until cancelled.

        Started with the URL of ``/metrics`` (``None`` when metrics are off).
        """
        metrics_url = f"{base_url}/metrics" if self.metrics is not None else None
        async with trio.open_nursery() as nursery:
            if self.metrics is not None:
                await nursery.start(self.metrics.watch)
            if self.metrics_port is not None:
                listeners = await trio.open_tcp_listeners(self.metrics_port, host=host)
                bound = listeners[0].socket.getsockname()
                shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                await nursery.start(serve_ops, listeners, self.routes)
                if metrics_url is not None:
                    metrics_url = f"http://{shown}:{bound[1]}/metrics"
            task_status.started(metrics_url)
