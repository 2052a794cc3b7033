"""``open_runtime()``: the supervision tree of DESIGN §3, for trio hosts.

::

    root supervisor            rest_for_one, intensity 3 / 60 s
    ├─ process tracker         permanent   (one worker thread: the runtime's first config read,
    │                                       then the reaper sidecar, then the sweep of the PID
    │                                       ledger of crashed earlier runs; all in the background)
    ├─ connections supervisor  permanent   one_for_one, a slot child per active server
    └─ registry actor          permanent   records, tool cache, tool ids; last, so its
                                           crash restarts only itself

The connections supervisor starts before the registry (the registry starts its
children), so the registry stops first on the way out. A registry crash restarts the
registry alone: it rebuilds its view from the store and the live slots, and the facade
(:attr:`Runtime.service`) keeps working across the restart. On exit every server is closed
*concurrently* (close stdin → bounded wait → SIGTERM → SIGKILL), so shutting down fifty
servers takes about as long as the slowest one, not their sum.

Sync and asyncio hosts use :mod:`mcp_actors.portal` instead.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Final

import attrs
import outcome
import trio

from mcp_actors import events
from mcp_actors._auth.assertion_grants import AssertionHandler
from mcp_actors._auth.oauth import AuthorizationHandler, AuthSettings, open_auth_settings
from mcp_actors._auth.token_store import FileTokenStore, TokenStore
from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._config.store import ConfigStore
from mcp_actors._connection.callbacks import (
    DEFAULT_CALLBACK_TIMEOUT,
    ElicitationHandler,
    HostCallbacks,
    RootsSource,
    SamplingHandler,
)
from mcp_actors._connection.handle import ConnectionHandle
from mcp_actors._process.tracker import ProcessTracker
from mcp_actors._registry.actor import (
    DEFAULT_CONFIG_POLL_INTERVAL,
    DEFAULT_TOOL_CACHE_TTL,
    RegistryRef,
    run_registry,
    stop_slot,
)
from mcp_actors.service import McpService
from supervisors import (
    Backoff,
    ChildSpec,
    Intensity,
    Restart,
    Shutdown,
    Strategy,
    Supervisor,
    SupervisorSpec,
    open_supervisor,
)

__all__ = [
    "DEFAULT_CALLBACK_TIMEOUT",
    "ElicitationHandler",
    "NET_WAIT_BOUND",
    "RootsSource",
    "Runtime",
    "SamplingHandler",
    "open_runtime",
]

logger = logging.getLogger(__name__)

ROOT_SPEC = SupervisorSpec(
    strategy=Strategy.REST_FOR_ONE,
    intensity=Intensity(max_restarts=3, period=60.0),
    backoff=Backoff(min_delay=0.1, max_delay=5.0, jitter=0.2, reset_after=60.0),
)
CONNECTIONS_SPEC = SupervisorSpec(
    strategy=Strategy.ONE_FOR_ONE,
    # Slots restart their own actors; a slot itself only crashes on a bug of ours.
    intensity=Intensity(max_restarts=50, period=60.0),
    backoff=Backoff(min_delay=0.1, max_delay=5.0, jitter=0.2, reset_after=60.0),
)


@attrs.define(eq=False)
class Runtime:
    """A running tree. Use :attr:`service`; the rest is for introspection and tests.

    Attributes:
        bus: The event bus (also reachable as ``service.subscribe()``).
        tracker: This process's process tracker.
        root: The root supervisor.
        service: The McpService facade; one object for the runtime's whole life (it
            survives registry restarts).
    """

    bus: events.EventBus
    tracker: ProcessTracker
    root: Supervisor
    service: McpService

    @property
    def connections(self) -> Supervisor:
        """The supervisor whose children are the servers' connection slots."""
        sup: Supervisor = self.root.child_value("connections")
        return sup


_Read = tuple[list[McpServerRecord], tuple[int, int, int, int] | None]


@attrs.define(eq=False)
class _FirstRead:
    """The runtime's first config read, run by the tracker child's worker job just before the net.

    One job for both: side by side they fight for the GIL, and the first server waits for
    both (see :meth:`ProcessTracker.start_safety_net_after`). The result comes back to the
    loop as soon as it is read, while the same thread goes on to start the net.
    """

    store: ConfigStore
    token: trio.lowlevel.TrioToken = attrs.field(factory=trio.lowlevel.current_trio_token)
    _done: trio.Event = attrs.field(factory=trio.Event)
    _result: outcome.Outcome[_Read] | None = None
    _taken: bool = False

    def take(self) -> Callable[[], None] | None:
        """The blocking read to run, once: a restarted tracker child runs none."""
        if self._taken:
            return None
        self._taken = True
        return self._run

    def _run(self) -> None:  # in the worker thread
        result = outcome.capture(self.store.load_with_fingerprint)
        with contextlib.suppress(trio.RunFinishedError):
            self.token.run_sync_soon(self._deliver, result)

    def _deliver(self, result: outcome.Outcome[_Read]) -> None:
        if self._result is None:
            self._result = result
            self._done.set()

    def abandon(self) -> None:
        """Answer the waiter if the read never ran (its task ended first); a no-op once read.

        Delivered before the worker job's own result (both by the same queue), a read that
        ran is always in before its task can call this.
        """
        self._deliver(outcome.Error(RuntimeError("the runtime stopped before its config was read")))

    async def wait(self) -> _Read:
        """The records and their fingerprint; raises what the read raised."""
        await self._done.wait()
        assert self._result is not None
        return self._result.unwrap()


async def _run_tracker(
    tracker: ProcessTracker,
    sweep: bool,
    first_read: _FirstRead,
    *,
    task_status: trio.TaskStatus[ProcessTracker] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The tracker's child: ready at once; the config read, the net and the sweep run beside the rest.

    One worker thread, one job after another: the config read (at the runtime's start), the
    sidecar's start and the ledger, then the sweep. :func:`open_runtime` waits for the net
    after the read (only when a stdio server is configured, and while its loop is idle
    anyway), and the stdio transport waits for it before any spawn. The sweep is on no
    one's path: it only touches the leftovers of dead hosts.
    """
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_in_background, tracker, sweep, first_read)
        task_status.started(tracker)
        await trio.sleep_forever()


async def _in_background(tracker: ProcessTracker, sweep: bool, first_read: _FirstRead) -> None:
    """The tracker child's blocking jobs, in order: the read and the net in one job, then the sweep.

    Whatever happens, the read's waiter is answered (:meth:`_FirstRead.abandon`).
    """
    try:
        # The read never raises (it delivers its outcome): what raises is the net's start.
        await tracker.start_safety_net_after(first_read.take() or _nothing)
    except Exception:
        logger.exception("starting the reaper sidecar failed")
    finally:
        first_read.abandon()
    if sweep:
        await trio.to_thread.run_sync(_logged, tracker.sweep_ledger, "sweeping the process ledger")


def _nothing() -> None:
    """No job ahead of the net (a restarted tracker child: the config was read at the start)."""


def _logged(job: Callable[[], object], what: str) -> None:
    """Run a blocking job of the net; a failure is logged, not raised.

    A safety net that fails weakens the net; it must never restart the tree behind it.
    """
    try:
        job()
    except Exception:
        logger.exception("%s failed", what)


async def _run_connections(*, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED) -> None:
    async with open_supervisor(CONNECTIONS_SPEC, children=[], name="connections") as sup:
        task_status.started(sup)
        await trio.sleep_forever()


NET_WAIT_BOUND: Final = 5.0
"""Seconds :func:`open_runtime` waits for the kill-on-exit net after the config read (it
takes milliseconds; a stuck disk under the ledger must not hold the runtime). Past it the
runtime serves, and a stdio server's spawn still waits for the net itself."""


@contextlib.asynccontextmanager
async def open_runtime(
    config_path: str | os.PathLike[str] | None = None,
    *,
    store: ConfigStore | None = None,
    tool_cache_ttl: float = DEFAULT_TOOL_CACHE_TTL,
    sweep_ledger: bool = True,
    connect_on_add: bool = False,
    config_poll_interval: float = DEFAULT_CONFIG_POLL_INTERVAL,
    authorization_handler: AuthorizationHandler | None = None,
    token_store: TokenStore | None = None,
    sampling_handler: SamplingHandler | None = None,
    elicitation_handler: ElicitationHandler | None = None,
    roots: RootsSource | None = None,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    assertion_handler: AssertionHandler | None = None,
) -> AsyncIterator[Runtime]:
    """Start the tree; yield a :class:`Runtime`; on exit close every server and stop.

    Args:
        config_path: The config file (default: ``MCP_ACTORS_CONFIG`` or the user data dir).
        store: A store to use instead of opening ``config_path``.
        tool_cache_ttl: Seconds a server's tool list stays cached when the server says nothing
            about it (revisions before 2026-07-28); a 2026-07-28 server's ``ttlMs`` replaces it
            (docs/protocol/caching.md). 0 turns the cache off: every listing asks the server.
        sweep_ledger: Kill leftovers of crashed earlier runs at start (PID + create_time
            checked), in the background: it never delays the first connections.
        connect_on_add: Start connecting a newly added active server in the background
            (it never blocks the add). Off by default: a server is connected on its first
            use, whether it was added now (``add``, ``add_json``, another process's edit of
            the config file) or read at start-up. Adding is bookkeeping: importing a desktop
            app's twenty servers must not start twenty processes (package downloads, OAuth
            logins) for servers the host may never call, and a record behaves the same
            whichever way it came in. A failing server shows at its first use, or at once
            with ``service.test(name)``. On, it is a warm-up for hosts that want one.
        config_poll_interval: Seconds between checks (one ``stat``) of the config file for
            changes made by other processes, which are then applied to the running tree;
            0 turns the periodic check off (``list()`` and look-up misses still check).
        authorization_handler: ``async (server_id, authorization_url) -> redirect_url``, asked
            when an OAuth server needs a person to log in (see docs/auth.md). Without one, such
            a server goes to ``error`` with :class:`~mcp_actors.errors.AuthorizationRequired`
            and calls fail fast: the runtime never opens a browser by itself.
        token_store: Where OAuth tokens live (:mod:`mcp_actors.auth`); default: a 0600 JSON
            file in the state directory.
        sampling_handler: ``async (server_id, params) -> CreateMessageResult``: lets servers
            sample the host's model (declared to servers only when given; a record may refuse
            it with ``config.allowSampling: false``). See docs/protocol/callbacks.md.
        elicitation_handler: ``async (server_id, params) -> ElicitResult``: lets servers ask
            the user, form or URL mode (``config.allowElicitation``).
        roots: The host's roots: a list of ``file://`` URIs / ``Root`` values, or
            ``async (server_id) -> list``; change them later with ``service.set_roots``
            (``config.allowRoots``).
        callback_timeout: Seconds any one handler may take before the server gets a timeout
            error (an elicitation: ``cancel``); also the bound on the approver of
            ``service.set_approver``, whose silence denies the call.
        assertion_handler: ``async (server_id, AssertionRequest) -> token``, asked for the
            user's ID token (``grant: identity_assertion``) or the workload's token
            (``workload_identity``) when the record names no ``assertionFile`` or
            ``assertionEnv``: a host that did single sign-on holds the ID token; see
            docs/auth.md. Asked again for every token request; the token is never stored.

    Servers connect lazily: nothing is spawned until a server is first used (unless
    ``connect_on_add`` asks for added servers to be connected at once).
    """
    if config_poll_interval < 0:
        raise ValueError(f"config_poll_interval must be >= 0, got {config_poll_interval!r}")
    tracker = ProcessTracker.get_instance()
    bus = events.EventBus()
    store = store or ConfigStore(config_path)
    host = HostCallbacks(
        sampling=sampling_handler, elicitation=elicitation_handler, roots=roots, timeout=callback_timeout
    )
    ref: RegistryRef | None = None

    async def start_registry(*, task_status: trio.TaskStatus[RegistryRef] = trio.TASK_STATUS_IGNORED) -> None:
        assert ref is not None
        # Looked up at every (re)start: a restarted connections supervisor is a new object.
        connections: Supervisor = root.child_value("connections")
        await run_registry(
            ref,
            connections,
            connect_on_add=connect_on_add,
            config_poll_interval=config_poll_interval,
            task_status=task_status,
        )

    children = [
        ChildSpec(id="connections", start=_run_connections, restart=Restart.PERMANENT, shutdown=Shutdown.after(60.0)),
        ChildSpec(id="registry", start=start_registry, restart=Restart.PERMANENT, shutdown=Shutdown.after(10.0)),
    ]
    auth = AuthSettings(
        token_store=token_store or FileTokenStore(),
        authorization_handler=authorization_handler,
        assertion_handler=assertion_handler,
    )
    # Started one by one once the root exists, so the registry's start can reach its sibling.
    # Every task of the tree inherits the auth settings (the HTTP transports read them).
    async with open_auth_settings(auth), open_supervisor(ROOT_SPEC, children=[], name="root") as root:
        # The tracker first: its worker reads the config, then starts the reaper sidecar.
        # Read once up front so a corrupt file fails here, with its own typed error (path,
        # line, column), rather than as a registry start failure.
        first_read = _FirstRead(store)
        await root.start_child(
            ChildSpec(id="process-tracker", start=functools.partial(_run_tracker, tracker, sweep_ledger, first_read))
        )
        first_records, fingerprint = await first_read.wait()
        if any(r.is_active and r.type is ServerType.STDIO for r in first_records):
            # The sidecar's start follows the read; let it finish while the loop idles anyway.
            # Once the loop builds the tree and starts connections, the net's thread waits for
            # the GIL after each of its system calls (up to the 5 ms switch interval each), and
            # the first spawn, which waits for the net, waited with it: 7-12 ms more in two of
            # five starts of 20 servers (docs/performance.md).
            with trio.move_on_after(NET_WAIT_BOUND):
                await tracker.wait_safety_net(abandon_on_cancel=True)
        # The registry's first start reuses that read; a restart reads afresh.
        ref = RegistryRef(store=store, bus=bus, tool_cache_ttl=tool_cache_ttl, initial_records=first_records, host=host)
        ref.fingerprint = fingerprint
        for spec in children:
            await root.start_child(spec)
        runtime = Runtime(bus=bus, tracker=tracker, root=root, service=McpService(ref))
        try:
            yield runtime
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(60.0):
                await _close_all_servers(runtime)
            ref.close()
            bus.close()


async def _close_all_servers(runtime: Runtime) -> None:
    """Close every slot at once, so shutdown takes as long as the slowest, not the sum."""
    try:
        connections = runtime.connections
    except (KeyError, RuntimeError):
        return
    async with trio.open_nursery() as nursery:
        for info in connections.which_children():
            handle = info.value if isinstance(info.value, ConnectionHandle) else None
            nursery.start_soon(stop_slot, connections, info.id, handle, "the runtime is closing")
