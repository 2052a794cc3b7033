"""The gateway's health: ``/healthz`` (alive) and ``/readyz`` (ready for sessions), and the operator's listener.

**Liveness** (``/healthz``): the process is up and its trio loop answers. Answering at all is
the proof (the request is served by the same loop as every MCP request); it looks at nothing
else, so a restart is never asked for because of a server behind the gateway.

**Readiness** (``/readyz``): the gateway takes new sessions. Ready when it has started
(listening, its relay of list changes running), its config can be read (``service.list()``:
one ``stat`` of the file), and it is not draining. A stop (SIGTERM) makes it unready first,
so a load balancer stops sending new clients while the requests in flight finish.

Whether any upstream server is connected is **not** part of readiness: the gateway is built
so that a server that is down costs only its own tools (listings leave it out, its calls are
tool errors naming it), servers connect lazily and reconnect on their own, and one broken
server shared by every replica would otherwise take all of them out of the load balancer at
once, the working servers with them. The body of ``/readyz`` tells how many of the enabled
servers are connected, for a human; the metrics have each server's state.

**The operator's listener** (:func:`serve_ops`): the same routes (and ``/metrics``) on a port of
their own, outside the MCP endpoint's ``Host``/``Origin`` rules, answering until the gateway
has stopped: readiness reads 503 there for the whole drain.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import trio

from mcp_actors._wire.codec import encode
from mcp_actors.connection import ConnectionState
from mcp_actors.errors import McpActorsError
from mcp_actors.serve._http import ConnectionWatch, HttpConnection, HttpLimits, HttpRequest
from mcp_actors.service import McpService

__all__ = ["Health", "Route", "serve_ops"]

logger = logging.getLogger("mcp_actors.serve")

Route = Callable[[HttpConnection, HttpRequest], Awaitable[None]]
"""Answers one request to an operator's path (``/healthz``, ``/readyz``, ``/metrics``)."""
_JSON: Final = (("content-type", "application/json"), ("cache-control", "no-store"))
_CONFIG_BOUND: Final = 5.0
"""Seconds reading the config may take before readiness says no (a file system that hangs is not ready)."""


@attrs.define(eq=False)
class Health:
    """A gateway's liveness and readiness (see the module's doc); the fronts route to :meth:`healthz`, :meth:`readyz`.

    Args:
        service: The runtime's service (its config read, its servers counted).
    """

    service: McpService
    _started: bool = attrs.field(default=False, init=False)
    _draining: bool = attrs.field(default=False, init=False)

    def started(self) -> None:
        """The gateway listens and relays: ready from now on (unless draining)."""
        self._started = True

    def drain(self) -> None:
        """The gateway stops: unready from now on, for good."""
        self._draining = True

    @property
    def draining(self) -> bool:
        """Whether :meth:`drain` was called."""
        return self._draining

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """``(ready, what the body says)``: started, the config read, not draining."""
        if self._draining:
            return False, {"status": "draining"}
        if not self._started:
            return False, {"status": "starting"}
        try:
            with trio.fail_after(_CONFIG_BOUND):
                records = [record for record in await self.service.list() if record.is_active]
        except McpActorsError as exc:
            return False, {"status": "config unreadable", "error": str(exc)}
        except trio.TooSlowError:
            return False, {"status": "config unreadable", "error": f"reading it took over {_CONFIG_BOUND:g}s"}
        connected = sum(1 for r in records if self.service.status(r.id).state is ConnectionState.CONNECTED)
        return True, {"status": "ready", "servers": len(records), "connected": connected}

    async def healthz(self, conn: HttpConnection, request: HttpRequest) -> None:
        """``GET /healthz``: 200 while the loop answers."""
        if request.method != "GET":
            await conn.respond(405, (("allow", "GET"),))
            return
        await conn.respond(200, _JSON, encode({"status": "ok"}))

    async def readyz(self, conn: HttpConnection, request: HttpRequest) -> None:
        """``GET /readyz``: 200 when ready, 503 when not (starting, draining, the config unreadable)."""
        if request.method != "GET":
            await conn.respond(405, (("allow", "GET"),))
            return
        ready, body = await self.readiness()
        await conn.respond(200 if ready else 503, _JSON, encode(body))


async def serve_ops(
    listeners: list[trio.SocketListener],
    routes: Mapping[str, Route],
    *,
    limits: HttpLimits | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``routes`` (and 404 for any other path) on ``listeners`` until cancelled.

    For a port of the operator's (``--metrics-port``): no ``Host`` or ``Origin`` check, no
    MCP; bounded like the MCP listener (:class:`HttpLimits`). Cancel it after the gateway
    has stopped, so it answers through the drain.
    """
    bounds = limits or HttpLimits()
    watch = ConnectionWatch()

    async def connection(stream: trio.SocketStream) -> None:
        conn = HttpConnection(stream, bounds)

        async def exchange(request: HttpRequest) -> None:
            route = routes.get(request.path)
            if route is None:
                await conn.respond(404, _JSON, encode({"error": f"not found; this port serves {sorted(routes)}"}))
                return
            await route(conn, request)

        watch.add(conn)
        try:
            await conn.serve(exchange)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        except Exception:
            logger.exception("the operator's listener failed on a connection; it is closed")
        finally:
            watch.discard(conn)
            with trio.CancelScope(shield=True):
                await conn.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        await nursery.start(trio.serve_listeners, connection, listeners)
        task_status.started()
