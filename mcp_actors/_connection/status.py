"""A connection's published state: what a server's actor writes and everyone else reads.

The state machine, the settings a connection runs with, the frozen status snapshot and the
cell that holds it (written only by the actor and its slot), and the constants they share.
"""

from __future__ import annotations

import enum
import importlib.metadata
import logging
import operator
from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
import mcp.types as mcp_types
from mcp import ClientSession

from mcp_actors import events
from mcp_actors._config.record import DEFAULT_MAX_SERVER_REQUESTS
from mcp_actors._connection.callbacks import HostCallbacks
from mcp_actors._connection.listen import Listener
from mcp_actors._connection.listings import ListingCache, ListingKind
from mcp_actors._connection.live import LiveSession
from mcp_actors._connection.tasks import TaskStatusWatch
from mcp_actors._process.tracker import ProcessIdentity
from mcp_actors._wire.transports import StderrTail, TransportParams
from supervisors import (
    Backoff,
    Intensity,
)

__all__ = ["ConnectionSettings", "ConnectionState", "ConnectionStatus", "ProgressCallback", "RESOURCE_CACHE_TTL"]

logger = logging.getLogger(__name__)


def _package_version() -> str:
    try:
        return importlib.metadata.version("mcp-actors")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


CLIENT_INFO: Final = mcp_types.Implementation(name="mcp-actors", version=_package_version())
"""What we announce in ``initialize``: our name and the installed version."""

STOP_BOUND: Final = 15.0
"""Seconds one session may take to stop: close_grace + term_grace + reaping, with room to spare."""
_LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO + 5,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 5,
    "emergency": logging.CRITICAL + 10,
}
"""MCP log levels (RFC 5424) as stdlib levels; notice, alert and emergency fall between or above."""
RESOURCE_CACHE_TTL: Final = 300.0
"""Seconds a server's resource list stays cached (invalidated earlier by list_changed)."""

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""Called with ``(progress, total, message)`` for each progress notification of a call."""


class ConnectionState(enum.Enum):
    """Where a server's connection is."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    ERROR = "error"


def _check_server_requests(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_server_requests must be an integer >= 1, got {value!r}")


@attrs.frozen(kw_only=True)
class ConnectionSettings:
    """Everything a connection actor needs to know about its server.

    Attributes:
        server_id: The server record's id.
        server_name: Its name (used in messages, events and logs).
        transport: How to reach it.
        connect_timeout: Bound for spawn/connect + ``initialize``, seconds.
        call_timeout: Default bound for one request (tool call, listing), seconds.
        ping_interval: Seconds between health pings while connected; 0 disables them, the
            periodic ones and the one sent as soon as a request times out.
        ping_timeout: Bound for one ping, seconds. Silence past it is a death only when
            no request sent before the ping is still within its own timeout (the rule:
            ``_ConnectionActor._ping``).
        intensity: Restarts allowed per period before the circuit opens.
        backoff: Delay policy between restarts.
        mailbox_capacity: Requests that may queue before senders wait.
        negotiate: ``"auto"`` (default, as the SDK's ``Client``): probe ``server/discover``
            first and speak 2026-07-28 with a server that offers it, falling back to the
            handshake; ``"legacy"``: only the ``initialize`` handshake (2025-06-18 / 2025-11-25).
        host: The runtime's host callbacks (sampling, elicitation, roots); ``None`` offers none.
        allow_sampling: The record lets this server sample through the host (``config.allowSampling``).
        allow_elicitation: The record lets this server elicit (``config.allowElicitation``).
        allow_roots: The record lets this server list the host's roots (``config.allowRoots``).
        reset_timeout_on_progress: Progress restarts a tool call's timeout (bounded by
            ``max_total_timeout``).
        max_total_timeout: Hard bound on one tool call, seconds, whatever its progress.
        log_level: The server log level asked for: sent as ``logging/setLevel`` on every
            connect when the server can log (handshake revisions), or stamped on every
            request as its log opt-in (2026-07-28).
        max_server_requests: Requests the server may have in flight to us at once (sampling,
            elicitation, roots, ping); one past it is answered at once with a JSON-RPC error.
    """

    server_id: str
    server_name: str
    transport: TransportParams
    connect_timeout: float = 30.0
    call_timeout: float = 120.0
    ping_interval: float = 30.0
    ping_timeout: float = 10.0
    intensity: Intensity = Intensity(max_restarts=5, period=60.0)
    backoff: Backoff = Backoff(min_delay=0.5, max_delay=30.0, jitter=0.2, reset_after=60.0)
    mailbox_capacity: int = 256
    negotiate: str = attrs.field(default="auto", validator=attrs.validators.in_(("legacy", "auto")))
    # -- host callbacks: what the host offers, and what this server's record allows
    host: HostCallbacks | None = None
    allow_sampling: bool = True
    allow_elicitation: bool = True
    allow_roots: bool = True
    reset_timeout_on_progress: bool = False
    max_total_timeout: float = 3600.0
    log_level: str | None = None
    max_server_requests: int = attrs.field(default=DEFAULT_MAX_SERVER_REQUESTS, validator=_check_server_requests)

    def session_bound(self) -> float:
        """Seconds a caller may wait for a live session.

        The worst case is a caller arriving just after a crash: it sits out the longest
        restart backoff (with its jitter) while the old connection is closed, then one
        connect attempt of the next incarnation. A request's own timeout starts after that.
        """
        backoff = self.backoff
        return backoff.max_delay * (1 + backoff.jitter) + STOP_BOUND + self.connect_timeout


@attrs.frozen(kw_only=True)
class ConnectionStatus:
    """A snapshot of one server's connection.

    Attributes:
        state: The connection state.
        error: Why the last attempt or connection failed, if it did.
        circuit_open: The server exceeded its restart intensity and waits for a reconnect.
        process: The stdio server's process (PID with its create time) while it runs.
        restarts: How many times the actor was restarted since the slot (re)started.
        tools_epoch: Increases whenever the server's tool list may have changed
            (every new connection, every ``tools/list_changed``); caches compare it.
        calls_in_flight: Requests (tool calls, listings, pings) running on the live session.
        stderr_tail: The server's last stderr lines (stdio only).
        server_info: The server's name/version from ``initialize``, if connected once.
        resources_epoch: Like ``tools_epoch``, for resources and templates (``resources/list_changed``).
        prompts_epoch: Like ``tools_epoch``, for prompts (``prompts/list_changed``).
    """

    server_id: str
    server_name: str
    state: ConnectionState = ConnectionState.DISCONNECTED
    error: str | None = None
    circuit_open: bool = False
    process: ProcessIdentity | None = None
    restarts: int = 0
    tools_epoch: int = 0
    calls_in_flight: int = 0
    stderr_tail: tuple[str, ...] = ()
    server_info: tuple[str, str] | None = None
    resources_epoch: int = 0
    prompts_epoch: int = 0

    @property
    def pid(self) -> int | None:
        """The stdio server's PID while it runs (``process.pid``); pair it with ``process.create_time``."""
        return self.process.pid if self.process is not None else None


_STATUS_FIELDS: Final = tuple(field.name for field in attrs.fields(ConnectionStatus))
_status_values: Final = operator.attrgetter(*_STATUS_FIELDS)


def _evolved(status: ConnectionStatus, changes: dict[str, Any]) -> ConnectionStatus:
    """``attrs.evolve`` for the status at a third of its cost: every connect changes it twice."""
    values = dict(zip(_STATUS_FIELDS, _status_values(status), strict=True))
    values.update(changes)
    return ConnectionStatus(**values)


@attrs.define(eq=False)
class _StatusCell:
    """The server's published state: written only by its actor and slot; handles read it.

    Attributes:
        status: The latest snapshot.
        bus: Where state changes are emitted.
        live: The connected session, exactly while the state is ``connected``: the
            handle's way to a session without a mailbox round trip.
        stderr: The running server's stderr (stdio), for live tails and waits.
    """

    status: ConnectionStatus
    bus: events.EventBus
    live: LiveSession | None = None
    stderr: StderrTail | None = None
    listings: ListingCache = attrs.field(factory=ListingCache)
    """The connection's listings: written by its actor only (:mod:`mcp_actors._connection.listings`)."""
    tasks: TaskStatusWatch = attrs.field(factory=TaskStatusWatch)
    """The task calls running on the connection, for the server's pushed statuses."""
    listener: Listener | None = None
    """The 2026-07-28 session's ``subscriptions/listen`` owner (``None`` on the handshake revisions)."""
    log_level: tuple[ClientSession, str] | None = None
    """A run-time ``set_log_level`` for that session (2026-07-28): it lasts until the next connect,
    as on legacy. Written by the actor when the handle asks (``SetLogLevel``)."""
    stop_reason: str | None = None
    """Why the slot is being stopped (``"the server was disabled"``): what its ending calls and
    waiters are told. Whoever closes the mailbox (:meth:`ConnectionHandle.aclose`) sends it;
    the slot records it here."""

    def set(self, **changes: Any) -> None:
        self.status = _evolved(self.status, changes)

    def transition(self, state: ConnectionState, *, error: str | None = None, **changes: Any) -> None:
        previous = self.status.state
        changes["state"] = state
        changes["error"] = error
        self.status = _evolved(self.status, changes)
        if previous is state and state is not ConnectionState.ERROR:
            return
        data = {"serverId": self.status.server_id, "serverName": self.status.server_name}
        self.bus.emit(
            events.CONNECTION_STATE,
            **data,
            state=state.value,
            previous=previous.value,
            error=error,
            circuitOpen=self.status.circuit_open,
        )
        if state is ConnectionState.CONNECTED:
            self.bus.emit(events.SERVER_CONNECTED, **data)

    def bump_tools_epoch(self) -> None:
        self.status = attrs.evolve(self.status, tools_epoch=self.status.tools_epoch + 1)

    def bump_resources_epoch(self) -> None:
        self.status = attrs.evolve(self.status, resources_epoch=self.status.resources_epoch + 1)

    def bump_prompts_epoch(self) -> None:
        self.status = attrs.evolve(self.status, prompts_epoch=self.status.prompts_epoch + 1)

    def epoch(self, kind: ListingKind) -> int:
        """The current epoch of a listing kind (a ``list_changed`` moves it on)."""
        status = self.status
        if kind is ListingKind.TOOLS:
            return status.tools_epoch
        if kind is ListingKind.PROMPTS:
            return status.prompts_epoch
        return status.resources_epoch
