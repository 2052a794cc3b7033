"""Running a gateway: over streamable HTTP on a port, or over stdio, for as long as the caller wants."""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
from collections.abc import Sequence

import attrs
import trio

from mcp_actors.serve._authn import Authenticator, GatewayAuth
from mcp_actors.serve._gateway import DEFAULT_LIST_TIMEOUT, Gateway, connect_all, relay_changes
from mcp_actors.serve._health import Health
from mcp_actors.serve._http import HttpLimits
from mcp_actors.serve._names import Naming
from mcp_actors.serve._ops import Operations
from mcp_actors.serve._reload import DEFAULT_RELOAD_INTERVAL, start_profiles, watch_config
from mcp_actors.serve._sessions import SessionBook
from mcp_actors.serve._stdio import DEFAULT_MAX_MESSAGE, StdioFront
from mcp_actors.serve._streamable import DEFAULT_GRACE, LOOPBACK_HOSTS, LOOPBACK_ORIGINS, HttpFront
from mcp_actors.serve._tracing import Tracing, tracing_enabled
from mcp_actors.service import McpService

__all__ = ["HttpGateway", "serve_http", "serve_stdio"]

logger = logging.getLogger("mcp_actors.serve")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@attrs.define(eq=False)
class HttpGateway:
    """A gateway serving over HTTP (what :func:`serve_http` hands to ``nursery.start``).

    Attributes:
        url: The endpoint clients connect to (``http://127.0.0.1:8000/mcp``).
        gateway: The core that answers (its name tables, its listeners).
        metrics_url: Where ``/metrics`` is served (``None``: metrics are off).
        health: Its liveness and readiness (``/healthz``, ``/readyz``).
    """

    url: str
    gateway: Gateway
    _front: HttpFront = attrs.field(repr=False)
    metrics_url: str | None = None
    health: Health | None = attrs.field(default=None, repr=False)

    async def stop(self, grace: float = DEFAULT_GRACE) -> None:
        """Stop accepting and give the requests in flight ``grace`` seconds; then :func:`serve_http` returns.

        Event streams (GET, ``subscriptions/listen``) end at once; a request still running
        after ``grace`` is cancelled, and so is its upstream call. ``/readyz`` answers 503 from the start.
        """
        if self.health is not None:
            self.health.drain()
        await self._front.stop(grace)


async def serve_http(
    service: McpService,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    path: str = "/mcp",
    naming: str | Naming | None = None,
    list_timeout: float = DEFAULT_LIST_TIMEOUT,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    limits: HttpLimits | None = None,
    connect: bool = True,
    reload_interval: float | None = DEFAULT_RELOAD_INTERVAL,
    auth: GatewayAuth | None = None,
    sessions: SessionBook | None = None,
    metrics: bool | None = None,
    metrics_port: int | None = None,
    task_status: trio.TaskStatus[HttpGateway] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve every enabled server of ``service`` as one MCP server over streamable HTTP, until stopped.

    Run it with ``await nursery.start(serve_http, service)``: the value started is an
    :class:`HttpGateway` with the URL; :meth:`HttpGateway.stop` ends it gracefully, and
    cancelling the task ends it at once. Each profile of the config file is served at
    ``<path>/<profile>`` (docs/gateway.md, Profiles), and changes of the file apply while it
    serves.

    Args:
        service: The runtime's service.
        host: The address to listen on (loopback by default: without ``auth``, anything
            else exposes every server to the network).
        port: The port (0: a free one, see :attr:`HttpGateway.url`).
        path: The endpoint's path.
        naming: ``"__"`` (default) or another separator between server and tool or prompt
            names, or a function ``(server name, name) -> public name``.
        list_timeout: Seconds each server may take to answer a listing before the listing
            goes on without it.
        allowed_hosts: ``Host`` header values accepted (``"name:*"``: any port). Default:
            loopback names when ``host`` is loopback, else any.
        allowed_origins: ``Origin`` values accepted; a request without ``Origin`` is
            always accepted (browsers send one). Default: loopback origins.
        limits: Request size and time bounds (:class:`~mcp_actors.serve.HttpLimits`).
        connect: Connect every enabled server at start, in the background, so the first
            listing finds them up (they connect on first use otherwise).
        reload_interval: Seconds between looks at the config file: a change (servers,
            profiles) is applied while serving (:mod:`~mcp_actors.serve._reload`); ``None``:
            the profiles read at start stay.
        auth: Inbound authentication (API keys, OAuth access tokens; see docs/gateway.md);
            ``None``: anyone who can connect is served.
        sessions: How 2025 sessions are signed and shared between replicas
            (:class:`~mcp_actors.serve.SessionBook`: a shared key, the shared store); default:
            a random key of this process, sessions known to this process only.
        metrics: Serve Prometheus metrics at ``/metrics``: ``None`` (default) when
            ``prometheus-client`` is installed, ``True`` requires it (:class:`MetricsUnavailable`).
        metrics_port: Serve ``/metrics``, ``/healthz`` and ``/readyz`` on this port (of
            ``host``; 0: a free one) instead of the endpoint's, answering through the drain;
            ``None``: on the endpoint's listener (``/healthz`` and ``/readyz`` are always there).

    Raises:
        InvalidProfile: The config file's profiles section is malformed (at start).
    """
    gateway = Gateway(service, naming=naming, list_timeout=list_timeout)
    seen = await start_profiles(gateway)
    if allowed_hosts is None:
        hosts: tuple[str, ...] | None = LOOPBACK_HOSTS if _is_loopback(host) else None
    else:
        hosts = tuple(allowed_hosts)
    front = HttpFront(
        gateway,
        path=path,
        allowed_hosts=hosts,
        allowed_origins=tuple(allowed_origins) if allowed_origins is not None else LOOPBACK_ORIGINS,
        limits=limits or HttpLimits(),
        sessions_book=sessions or SessionBook(),
    )
    ops = Operations.install(front, metrics=metrics, metrics_port=metrics_port)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"http://{shown}:{bound[1]}{path}"
    if auth is not None:
        front.auth = Authenticator(auth, url=url, path=path)
    elif not _is_loopback(host):
        logger.warning("serving %s without inbound authentication: anyone who can connect uses every server", url)
    async with trio.open_nursery() as nursery:
        metrics_url = await nursery.start(ops.run, host, f"http://{shown}:{bound[1]}")
        await nursery.start(relay_changes, gateway)
        if reload_interval is not None:
            nursery.start_soon(
                functools.partial(watch_config, gateway, service.config_store, interval=reload_interval, seen=seen)
            )
        if connect:
            nursery.start_soon(connect_all, service)
        await nursery.start(front.serve, listeners)
        ops.health.started()
        task_status.started(
            HttpGateway(url=url, gateway=gateway, front=front, metrics_url=metrics_url, health=ops.health)
        )
        await front.stopped()
        nursery.cancel_scope.cancel()


async def serve_stdio(
    service: McpService,
    *,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    naming: str | Naming | None = None,
    list_timeout: float = DEFAULT_LIST_TIMEOUT,
    max_message: int = DEFAULT_MAX_MESSAGE,
    grace: float = DEFAULT_GRACE,
    connect: bool = True,
    profile: str | None = None,
    reload_interval: float | None = DEFAULT_RELOAD_INTERVAL,
) -> None:
    """Serve every enabled server of ``service`` as one MCP server to one client on stdin and stdout.

    Returns when stdin ends (requests in flight get ``grace`` seconds first) or when
    cancelled. Nothing else may write to stdout meanwhile: ``mcp-actors serve --stdio``
    points file descriptor 1 at stderr and keeps a private copy for the protocol.

    Args:
        service: The runtime's service.
        stdin: Where the client's messages come from (default: file descriptor 0).
        stdout: Where answers go (default: file descriptor 1).
        naming: As for :func:`serve_http`.
        list_timeout: As for :func:`serve_http`.
        max_message: The largest message accepted from the client, in bytes.
        grace: Seconds requests in flight may run after stdin ends.
        connect: As for :func:`serve_http`.
        profile: The profile served (``None``: the default one, every server unless the
            config defines a ``default`` profile).
        reload_interval: As for :func:`serve_http`.

    Raises:
        InvalidProfile: The config file's profiles section is malformed (at start).
        ProfileNotFound: ``profile`` is not configured.
    """
    owned: list[trio.lowlevel.FdStream] = []
    if stdin is None:
        stdin = trio.lowlevel.FdStream(os.dup(0))
        owned.append(stdin)
    if stdout is None:
        stdout = trio.lowlevel.FdStream(os.dup(1))
        owned.append(stdout)
    gateway = Gateway(service, naming=naming, list_timeout=list_timeout)
    gateway.around = Tracing() if tracing_enabled() else None  # the client's trace, continued upstream
    try:
        seen = await start_profiles(gateway, profile=profile)
        front = StdioFront(gateway, stdin, stdout, max_message=max_message, profile=profile)
        async with trio.open_nursery() as nursery:
            await nursery.start(relay_changes, gateway)
            if reload_interval is not None:
                nursery.start_soon(
                    functools.partial(watch_config, gateway, service.config_store, interval=reload_interval, seen=seen)
                )
            if connect:
                nursery.start_soon(connect_all, service)
            await front.serve(grace)
            nursery.cancel_scope.cancel()
    finally:
        for stream in owned:
            with trio.CancelScope(shield=True):
                await stream.aclose()
