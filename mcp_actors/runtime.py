"""``open_runtime()``: the supervision tree of DESIGN §3, for trio hosts.

::

    root supervisor            one_for_all, intensity 3 / 60 s
    ├─ process tracker         permanent   (sweeps the PID ledger of crashed earlier runs)
    ├─ connections supervisor  permanent   one_for_one, a slot child per active server
    └─ registry actor          permanent   records, tool cache, the McpService facade

The connections supervisor starts before the registry (the registry starts its
children), so the registry stops first on the way out. On exit every server is closed
*concurrently* (close stdin → bounded wait → SIGTERM → SIGKILL), so shutting down fifty
servers takes about as long as the slowest one, not their sum.

Sync and asyncio hosts use :mod:`mcp_actors.portal` instead.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

from mcp_actors import events
from mcp_actors.process_tracker import ProcessTracker
from mcp_actors.registry import DEFAULT_TOOL_CACHE_TTL, McpService, run_registry
from mcp_actors.store import ConfigStore
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

__all__ = ["Runtime", "open_runtime"]

ROOT_SPEC = SupervisorSpec(
    strategy=Strategy.ONE_FOR_ALL,
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
    """

    bus: events.EventBus
    tracker: ProcessTracker
    root: Supervisor
    _holder: dict[str, Any]

    @property
    def service(self) -> McpService:
        """The McpService facade of the current registry incarnation."""
        service: McpService = self.root.child_value("registry")
        return service

    @property
    def connections(self) -> Supervisor:
        """The supervisor whose children are the servers' connection slots."""
        sup: Supervisor = self._holder["connections"]
        return sup


async def _run_tracker(
    tracker: ProcessTracker, sweep: bool, *, task_status: trio.TaskStatus[ProcessTracker] = trio.TASK_STATUS_IGNORED
) -> None:
    if sweep:
        await trio.to_thread.run_sync(tracker.sweep_ledger)
    task_status.started(tracker)
    await trio.sleep_forever()


@contextlib.asynccontextmanager
async def open_runtime(
    config_path: str | os.PathLike[str] | None = None,
    *,
    store: ConfigStore | None = None,
    tool_cache_ttl: float = DEFAULT_TOOL_CACHE_TTL,
    sweep_ledger: bool = True,
    connect_on_add: bool = True,
) -> AsyncIterator[Runtime]:
    """Start the tree; yield a :class:`Runtime`; on exit close every server and stop.

    Args:
        config_path: The config file (default: ``MCP_ACTORS_CONFIG`` or the user data dir).
        store: A store to use instead of opening ``config_path``.
        tool_cache_ttl: Seconds a server's tool list stays cached.
        sweep_ledger: Kill leftovers of crashed earlier runs at start (PID + create_time checked).
        connect_on_add: Start connecting a newly added active server in the background
            (it never blocks the add). Off, servers connect on first use only.

    Servers connect lazily: nothing is spawned until a server is first used.
    """
    tracker = ProcessTracker.get_instance()
    bus = events.EventBus()
    store = store or ConfigStore(config_path)
    # Read the config once up front so a corrupt file fails here, with its own typed
    # error (path, line, column), rather than as a registry start failure.
    first_records = await trio.to_thread.run_sync(store.load)
    # The registry's first start reuses that read; a restart (one_for_all) reads afresh.
    holder: dict[str, Any] = {"records": first_records}

    async def start_connections(*, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED) -> None:
        async with open_supervisor(CONNECTIONS_SPEC, children=[], name="connections") as sup:
            holder["connections"] = sup
            task_status.started(sup)
            await trio.sleep_forever()

    async def start_registry(*, task_status: trio.TaskStatus[McpService] = trio.TASK_STATUS_IGNORED) -> None:
        await run_registry(
            store,
            holder["connections"],
            bus,
            tool_cache_ttl=tool_cache_ttl,
            connect_on_add=connect_on_add,
            initial_records=holder.pop("records", None),
            task_status=task_status,
        )

    children = [
        ChildSpec(id="process-tracker", start=functools.partial(_run_tracker, tracker, sweep_ledger)),
        ChildSpec(id="connections", start=start_connections, restart=Restart.PERMANENT, shutdown=Shutdown.after(60.0)),
        ChildSpec(id="registry", start=start_registry, restart=Restart.PERMANENT, shutdown=Shutdown.after(10.0)),
    ]
    async with open_supervisor(ROOT_SPEC, children=children, name="root") as root:
        runtime = Runtime(bus=bus, tracker=tracker, root=root, holder=holder)
        try:
            yield runtime
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(60.0):
                await _close_all_servers(runtime)
            bus.close()


async def _close_all_servers(runtime: Runtime) -> None:
    """Close every server at once, so shutdown takes as long as the slowest, not the sum."""
    try:
        service = runtime.service
    except Exception:
        return
    handles = list(service._registry.snapshot.handles.values())
    async with trio.open_nursery() as nursery:
        for handle in handles:
            nursery.start_soon(service._registry.stop_connection, handle.server_id, handle)
