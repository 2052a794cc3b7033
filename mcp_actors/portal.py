"""Embedding in sync and asyncio hosts: the trio runtime in a background thread.

Most agent runtimes are asyncio or plain threads. :func:`start_portal` runs
:func:`~mcp_actors.runtime.open_runtime` on a trio loop in a daemon thread and gives two
facades over the same :class:`~mcp_actors.service.McpService` operations (asyncio hosts
usually want :func:`mcp_actors.asyncio.open_runtime`, which starts and stops without
blocking their loop, and runs the runtime on their own loop by default):

* :class:`SyncMcpService` — blocking methods, callable from any thread.
* :class:`AsyncioMcpService` — coroutines for asyncio. A call is handed to the trio loop
  (``run_sync_soon``) and its result comes back through the asyncio loop
  (``call_soon_threadsafe``): no executor thread is held per call, so a thousand
  concurrent calls cost a thousand small tasks, not a thousand threads.

Cancellation crosses the boundary: cancelling an asyncio task (or a future from
:meth:`RuntimePortal.submit`) cancels the trio task, and so the call on the server
(``notifications/cancelled``). Typed errors cross it unchanged.

Closing the portal (``close()``, or leaving its ``with`` block) cancels the calls still
running — they fail with :class:`~mcp_actors.errors.ActorStopped` — and shuts the
runtime down the normal way: every server is closed and every process reaped before
``close`` returns. Every call submitted to a portal ends, whatever happens to the trio
thread.

A host that ends without ``close()`` is covered too: an exit hook closes every open
portal the same way (bounded), and it runs before the process tracker's exit hook, so
supervision has stopped — nothing is restarted or reconnected — before anything is
killed; the tracker then kills whatever is left and refuses anything spawned after it
began.
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import concurrent.futures
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import mcp.types as mcp_types
import trio

from mcp_actors._config.record import McpServerRecord
from mcp_actors._connection.status import ConnectionStatus
from mcp_actors._hosts.closing import wait_through_cancellation
from mcp_actors._hosts.facade import (
    AsyncioApprover,
    AsyncioMcpService,
    AsyncioSubscription,
    bridge_options,
    bridge_roots,
)
from mcp_actors._hosts.workers import Job, WorkerPool
from mcp_actors._process.tracker import ProcessTracker
from mcp_actors.errors import ActorStopped
from mcp_actors.events import Event, Subscription
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.service import AddJsonEntryResult, ApprovalRequest, Discovery, McpService, ServerTestResult, ToolListing
from mcp_actors.tools import McpTool

__all__ = [
    "AsyncioApprover",
    "AsyncioMcpService",
    "AsyncioSubscription",
    "RuntimePortal",
    "SyncApprover",
    "SyncMcpService",
    "SyncSubscription",
    "start_portal",
    "start_portal_async",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_START_TIMEOUT: Final = 60.0
_CLOSE_TIMEOUT: Final = 120.0
# At interpreter exit every open portal gets this long, together, to close its runtime the
# normal way (each server: close_grace + term_grace + reaping) before the process
# tracker's own exit hook kills whatever is left.
_EXIT_CLOSE_TIMEOUT: Final = 15.0

# Portals not yet closed, for the exit hook; weak, so a portal dropped without close()
# is still collected (its thread keeps it alive while it runs).
_open_portals: weakref.WeakSet[RuntimePortal] = weakref.WeakSet()
_exit_hook_lock = threading.Lock()
_exit_hook_armed = False

SyncApprover = Callable[[ApprovalRequest], bool]
"""An approver for thread hosts: a plain function, run in a worker thread (it may block)."""

SyncProgressCallback = Callable[[float, float | None, str | None], None]
"""``on_progress(progress, total, message)`` of the blocking facade (runs on the runtime's thread)."""


def _closed_error() -> ActorStopped:
    return ActorStopped("the mcp-actors portal is closed; start a new one with start_portal()")


def _settle(future: concurrent.futures.Future[T], *, value: Any = None, error: BaseException | None = None) -> None:
    """Resolve ``future`` unless it is already done (cancelled by its owner, or failed)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


class RuntimePortal:
    """A trio runtime running in a background thread, and the way in.

    Create it with :func:`start_portal`. Thread-safe: usable from any number of threads
    and asyncio loops at once. Blocking methods must not be called from the portal's
    own thread (that would deadlock); they raise ``RuntimeError`` there.
    """

    def __init__(self, **runtime_options: Any) -> None:
        self._launch(runtime_options)
        if not self._ready.wait(_START_TIMEOUT):
            self.close()
            raise TimeoutError(f"the mcp-actors runtime did not start within {_START_TIMEOUT:g}s")
        if self._startup_error is not None:
            self._thread.join(_CLOSE_TIMEOUT)
            raise self._startup_error

    @classmethod
    def _launched(cls, runtime_options: dict[str, Any]) -> RuntimePortal:
        """A portal whose thread is starting, not waited for (:func:`start_portal_async` awaits it)."""
        portal = cls.__new__(cls)
        portal._launch(runtime_options)
        return portal

    def _launch(self, runtime_options: dict[str, Any]) -> None:
        self._options = runtime_options
        self._ready = threading.Event()
        self._ended = False
        # Called (from the trio thread) when the portal starts or its thread ends: asyncio
        # waiters (start_portal_async, aclose) wake on their own loops, no thread blocked.
        self._watchers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._pool: WorkerPool | None = None
        self._runtime: Runtime | None = None
        self._stop: trio.Event | None = None
        self._startup_error: BaseException | None = None
        self._closed = False
        # Futures not yet resolved: failed with ActorStopped if the trio thread ends first,
        # so no caller waits forever on a runtime that is gone.
        self._pending: set[concurrent.futures.Future[Any]] = set()
        _arm_exit_hook()
        _open_portals.add(self)
        self._thread = threading.Thread(target=self._thread_main, name="mcp-actors-runtime", daemon=True)
        self._thread.start()

    def _notify(self) -> None:
        """Wake every asyncio waiter: the portal started, or its thread is ending."""
        with self._lock:
            watchers, self._watchers = self._watchers, []
        for wake in watchers:
            wake()

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Wait on the calling asyncio loop until ``condition()`` holds (checked at each :meth:`_notify`)."""
        loop = asyncio.get_running_loop()
        while True:
            future: asyncio.Future[None] = loop.create_future()

            def resolve(future: asyncio.Future[None] = future) -> None:
                if not future.done():
                    future.set_result(None)

            def wake(resolve: Callable[[], None] = resolve) -> None:
                try:
                    loop.call_soon_threadsafe(resolve)
                except RuntimeError:
                    pass  # that loop is closed: nobody waits any more

            with self._lock:
                if condition():
                    return
                self._watchers.append(wake)
            await future

    # ------------------------------------------------------------------ the trio thread

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            if not self._ready.is_set():
                self._startup_error = exc  # re-raised by the constructor
                self._ready.set()
            else:
                logger.error("the mcp-actors runtime stopped with an error", exc_info=exc)
        finally:
            _open_portals.discard(self)
            with self._lock:
                self._closed = True
                self._ended = True
                pending, self._pending = self._pending, set()
            for future in pending:
                _settle(future, error=ActorStopped("the mcp-actors runtime stopped before the call finished"))
            self._notify()

    async def _main(self) -> None:
        self._stop = trio.Event()
        async with open_runtime(**self._options) as runtime, trio.open_nursery() as nursery:
            self._runtime = runtime
            self._nursery = nursery
            self._pool = WorkerPool(nursery, runtime.service)
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            self._notify()
            if not self._closed:  # closed already: the constructor timed out waiting for us
                await self._stop.wait()
            # Calls still running fail with ActorStopped; then the runtime closes every server.
            nursery.cancel_scope.cancel()

    # ------------------------------------------------------------------ running things

    @property
    def service(self) -> McpService:
        """The trio-side facade; use it only on the portal's own thread (inside :meth:`run`)."""
        if self._runtime is None:
            raise _closed_error()
        return self._runtime.service

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called or the runtime stopped."""
        return self._closed

    def _check_open(self) -> trio.lowlevel.TrioToken:
        if self._closed or self._token is None:
            raise _closed_error()
        return self._token

    def _refuse_own_thread(self, what: str) -> None:
        if threading.current_thread() is self._thread:
            raise RuntimeError(
                f"{what} blocks until the portal's trio loop answers, and this is that loop's thread; "
                "await portal.service directly here instead"
            )

    def submit(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args, **kwargs)`` as a task on the runtime's loop; return a future for its outcome.

        Does not block. Cancelling the future (``future.cancel()``) cancels the trio task.
        If the portal closes first, the future fails with ``ActorStopped``.

        Raises:
            ActorStopped: The portal is closed.
        """
        token = self._check_open()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        scope = trio.CancelScope()

        async def runner() -> None:
            with scope:
                try:
                    value = await fn(*args, **kwargs)
                except trio.Cancelled:
                    # By the future's owner (then the future is cancelled already and this
                    # is a no-op) or by close(): the call did not finish.
                    _settle(future, error=ActorStopped("the mcp-actors portal closed while the call was running"))
                    raise
                except Exception as exc:
                    _settle(future, error=exc)
                except BaseException as exc:
                    _settle(future, error=exc)
                    raise
                else:
                    _settle(future, value=value)

        def start() -> None:
            # Runs on the trio thread, in order with close()'s stop request.
            if future.done():
                return
            if self._closed or self._nursery is None:
                _settle(future, error=_closed_error())
                return
            try:
                self._nursery.start_soon(runner)
            except RuntimeError:  # the nursery is closed: the runtime is stopping
                _settle(future, error=_closed_error())

        def on_done(done: concurrent.futures.Future[T]) -> None:
            with self._lock:
                self._pending.discard(done)
            if done.cancelled():
                try:
                    token.run_sync_soon(scope.cancel)
                except trio.RunFinishedError:
                    pass

        with self._lock:
            if self._closed:
                raise _closed_error()
            self._pending.add(future)
        future.add_done_callback(on_done)
        try:
            token.run_sync_soon(start)
        except trio.RunFinishedError:
            _settle(future, error=_closed_error())
            raise _closed_error() from None
        return future

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the runtime's loop and block until it finishes; return its result.

        Call from any thread but the portal's own. ``KeyboardInterrupt`` while waiting
        cancels the trio task.

        Raises:
            ActorStopped: The portal is closed, or closed while ``fn`` ran.
            RuntimeError: Called on the portal's own thread.
        """
        self._refuse_own_thread("RuntimePortal.run")
        future = self.submit(fn, *args, **kwargs)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain function on the runtime's thread and return its result (to read state safely).

        Raises:
            ActorStopped: The portal is closed.
            RuntimeError: Called on the portal's own thread.
        """
        self._refuse_own_thread("RuntimePortal.run_sync")
        token = self._check_open()
        try:
            return trio.from_thread.run_sync(fn, *args, trio_token=token)
        except trio.RunFinishedError:
            raise _closed_error() from None

    def close(self) -> None:
        """Cancel running calls, close every server and stop the runtime.

        Returns once every server process has been reaped and the trio thread has ended
        (bounded). Idempotent; safe to call from several threads.

        Raises:
            RuntimeError: Called on the portal's own thread.
            TimeoutError: The runtime did not stop within its bound (not expected: every
                shutdown step is bounded on its own).
        """
        self._refuse_own_thread("RuntimePortal.close")
        self._request_stop()
        self._thread.join(_CLOSE_TIMEOUT)
        if self._thread.is_alive():
            raise TimeoutError(f"the mcp-actors runtime did not stop within {_CLOSE_TIMEOUT:g}s")

    async def aclose(self) -> None:
        """:meth:`close` for asyncio: awaits the stop on the calling loop, never blocking it.

        Returns once every server process has been reaped and the trio thread has ended
        (bounded). A cancellation of the awaiting task meanwhile is re-raised once the
        stop is complete: the servers are never left behind. Idempotent.

        Raises:
            RuntimeError: Called on the portal's own thread.
            TimeoutError: The runtime did not stop within its bound.
        """
        self._refuse_own_thread("RuntimePortal.aclose")
        self._request_stop()
        waiter = asyncio.ensure_future(asyncio.wait_for(self._until(lambda: self._ended), _CLOSE_TIMEOUT))
        cancelled = await wait_through_cancellation(waiter)
        if cancelled is not None:
            raise cancelled
        if isinstance(waiter.exception(), TimeoutError):
            raise TimeoutError(f"the mcp-actors runtime did not stop within {_CLOSE_TIMEOUT:g}s")

    def _request_stop(self) -> None:
        """Refuse new calls and ask the trio thread to shut the runtime down (no waiting)."""
        with self._lock:
            self._closed = True
        _open_portals.discard(self)
        token, stop = self._token, self._stop
        if token is not None and stop is not None:
            try:
                token.run_sync_soon(stop.set)
            except trio.RunFinishedError:
                pass

    def __enter__(self) -> RuntimePortal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sync_service(self) -> SyncMcpService:
        """A blocking facade over this portal, for threads."""
        return SyncMcpService(self)

    def asyncio_service(self) -> AsyncioMcpService:
        """An asyncio facade over this portal, for coroutines on any asyncio loop in any thread."""
        return AsyncioMcpService(_PortalHop(self))

    async def run_asyncio(self, fn: Callable[[McpService], Awaitable[T]], /) -> T:
        """Run ``fn(service)`` on the runtime's loop and await its outcome on the calling asyncio loop.

        The asyncio facade's hop, lean: the job is handed to an idle trio worker
        (:mod:`mcp_actors._hosts.workers`, in the caller's ``contextvars``) by one
        ``run_sync_soon``, and its outcome comes back by one ``loop.call_soon_threadsafe``
        straight into an asyncio future (no ``concurrent.futures.Future``, no lock, no trio
        task spawned per call). Cancelling the awaiting task cancels the job; closing the
        portal fails it with ``ActorStopped``. Every callback handed to ``run_sync_soon`` runs
        before the trio run ends (trio's guarantee), so an outcome always arrives.

        Raises:
            ActorStopped: The portal is closed, or closed while ``fn`` ran.
        """
        token = self._check_open()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def resolve(value: Any, error: BaseException | None) -> None:  # on the caller's loop
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def settle(value: Any, error: BaseException | None) -> None:  # from the trio thread
            try:
                loop.call_soon_threadsafe(resolve, value, error)
            except RuntimeError:
                pass  # the caller's loop is closed: nobody waits any more

        job = Job(fn, settle)

        def start() -> None:  # on the trio thread, in order with close()'s stop request
            pool = self._pool
            if self._closed or pool is None:
                settle(None, _closed_error())
                return
            try:
                pool.hand_over(job)
            except ActorStopped:  # the nursery is closed: the runtime is stopping
                settle(None, _closed_error())

        try:
            token.run_sync_soon(start)
        except trio.RunFinishedError:
            raise _closed_error() from None
        try:
            return await future
        except asyncio.CancelledError:
            try:
                token.run_sync_soon(WorkerPool.cancel, job)
            except trio.RunFinishedError:
                pass
            raise


def _arm_exit_hook() -> None:
    """Register :func:`_close_portals_at_exit` once, after the process tracker's exit hook.

    Exit hooks run last-registered first, so arming the tracker's hook before ours makes
    ours run first: the runtimes close gracefully (supervision stops, servers are closed
    and reaped) before the tracker kills what is left.
    """
    global _exit_hook_armed
    with _exit_hook_lock:
        if _exit_hook_armed:
            return
        ProcessTracker.get_instance().arm_exit_hook()
        atexit.register(_close_portals_at_exit)
        _exit_hook_armed = True


def _close_portals_at_exit() -> None:
    """Close every portal the host left open, together, within ``_EXIT_CLOSE_TIMEOUT``."""
    portals = [portal for portal in list(_open_portals) if threading.current_thread() is not portal._thread]
    for portal in portals:
        portal._request_stop()
    deadline = time.monotonic() + _EXIT_CLOSE_TIMEOUT
    for portal in portals:
        portal._thread.join(max(0.0, deadline - time.monotonic()))
        if portal._thread.is_alive():
            logger.warning(
                "an mcp-actors runtime left open did not stop within %gs at exit; its servers are killed",
                _EXIT_CLOSE_TIMEOUT,
            )


def start_portal(config_path: str | None = None, **runtime_options: Any) -> RuntimePortal:
    """Start the runtime in a background thread and return its portal.

    Args:
        config_path: The config file, as for :func:`~mcp_actors.runtime.open_runtime`.
        **runtime_options: Other ``open_runtime`` options (``tool_cache_ttl``, ...). The host
            callbacks (``sampling_handler``, ``elicitation_handler``, ``assertion_handler``,
            ``authorization_handler``, a ``roots`` callable) may be plain functions, run in a
            worker thread (they may block), or coroutine functions, run on the asyncio loop
            that called ``start_portal``.

    Returns:
        The running portal; close it (or use it as a context manager) to stop the runtime.

    Raises:
        ConfigFileCorrupt: The config file cannot be parsed (as ``open_runtime``).
        TimeoutError: The runtime did not start within 60 s.

    Example::

        with start_portal() as portal:
            service = portal.sync_service()
            print(service.call_tool("demo", "echo", {"text": "hi"}))
    """
    return RuntimePortal(config_path=config_path, **bridge_options(runtime_options))


async def start_portal_async(config_path: str | None = None, **runtime_options: Any) -> RuntimePortal:
    """:func:`start_portal` for asyncio hosts: the start is awaited, the calling loop never blocked.

    Same arguments and errors as :func:`start_portal`; close the portal with
    :meth:`RuntimePortal.aclose`. If the awaiting task is cancelled during the start, the
    runtime is stopped (its servers closed) before the cancellation is re-raised.
    :func:`mcp_actors.asyncio.open_runtime` with ``mode="thread"`` is this in an
    ``async with`` block.
    """
    portal = RuntimePortal._launched({"config_path": config_path, **bridge_options(runtime_options)})
    try:
        async with asyncio.timeout(_START_TIMEOUT):
            await portal._until(portal._ready.is_set)
    except TimeoutError:
        await portal.aclose()
        raise TimeoutError(f"the mcp-actors runtime did not start within {_START_TIMEOUT:g}s") from None
    except BaseException:
        await portal.aclose()
        raise
    if portal._startup_error is not None:
        await portal.aclose()
        raise portal._startup_error
    return portal


# ---------------------------------------------------------------------- facades


class _Reads:
    """The McpService reads shared by both facades: answered on the trio thread, quickly."""

    def __init__(self, portal: RuntimePortal) -> None:
        self._portal = portal

    @property
    def portal(self) -> RuntimePortal:
        """The portal this facade runs on."""
        return self._portal

    def get(self, server: str) -> McpServerRecord:
        """One server's record by id or name (see :meth:`McpService.get`)."""
        return self._portal.run_sync(lambda: self._portal.service.get(server))

    def status(self, server: str) -> ConnectionStatus:
        """One server's connection status (see :meth:`McpService.status`)."""
        return self._portal.run_sync(lambda: self._portal.service.status(server))

    def is_connected(self, server: str) -> bool:
        """Whether the server's connection is up now (see :meth:`McpService.is_connected`)."""
        return self._portal.run_sync(lambda: self._portal.service.is_connected(server))

    def resolve_tool_id(self, tool_id: str) -> tuple[McpServerRecord, str]:
        """``(record, tool name)`` for a tool id (see :meth:`McpService.resolve_tool_id`)."""
        return self._portal.run_sync(lambda: self._portal.service.resolve_tool_id(tool_id))

    def is_auto_approved(self, server: str, tool_name: str) -> bool:
        """Whether a call needs no approval (see :meth:`McpService.is_auto_approved`)."""
        return self._portal.run_sync(lambda: self._portal.service.is_auto_approved(server, tool_name))

    @property
    def tool_list_requests(self) -> int:
        """How many ``tools/list`` requests were sent so far (cache misses)."""
        return self._portal.run_sync(lambda: self._portal.service.tool_list_requests)


class SyncMcpService(_Reads):
    """The McpService operations as blocking methods, for threads (thread-safe).

    Same arguments, results and typed errors as :class:`~mcp_actors.service.McpService`;
    each call blocks its thread only, while the runtime serves every other thread. Do
    not call it from the portal's own thread.
    """

    def _run(self, fn: Callable[[McpService], Awaitable[T]]) -> T:
        portal = self._portal

        async def call() -> T:
            return await fn(portal.service)

        return portal.run(call)

    def list(self) -> builtins.list[McpServerRecord]:
        """Every configured server's record, current with the file (see :meth:`McpService.list`)."""
        return self._run(lambda s: s.list())

    def health(self, server: str, *, timeout: float = 10.0) -> float:
        """Ping the server now; the round trip in seconds (see :meth:`McpService.health`)."""
        return self._run(lambda s: s.health(server, timeout=timeout))

    def add(self, input: McpServerRecord | Mapping[str, Any]) -> McpServerRecord:
        """Add a server and save it (see :meth:`McpService.add`)."""
        return self._run(lambda s: s.add(input))

    def add_json(self, text: str) -> builtins.list[AddJsonEntryResult]:
        """Add every server of an ``mcpServers`` document (see :meth:`McpService.add_json`)."""
        return self._run(lambda s: s.add_json(text))

    def update(self, server: str, changes: Mapping[str, Any] | None = None, /, **more: Any) -> McpServerRecord:
        """Change fields of a record, snake_case or camelCase (see :meth:`McpService.update`)."""
        return self._run(lambda s: s.update(server, changes, **more))

    def remove(self, server: str) -> McpServerRecord:
        """Remove a server and stop its process (see :meth:`McpService.remove`)."""
        return self._run(lambda s: s.remove(server))

    def list_server_tools(self, server: str) -> builtins.list[McpTool]:
        """One server's tools (see :meth:`McpService.list_server_tools`)."""
        return self._run(lambda s: s.list_server_tools(server))

    def list_all_active_server_tools(self) -> builtins.list[McpTool]:
        """Tools of every active server (see :meth:`McpService.list_all_active_server_tools`)."""
        return self._run(lambda s: s.list_all_active_server_tools())

    def list_tools_detailed(self, servers: Sequence[str] | None = None) -> ToolListing:
        """Tools plus per-server failures (see :meth:`McpService.list_tools_detailed`)."""
        return self._run(lambda s: s.list_tools_detailed(servers))

    def call_tool(
        self,
        server: str,
        tool_name: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
        on_progress: SyncProgressCallback | None = None,
        as_task: bool | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool and block for its result (see :meth:`McpService.call_tool`).

        ``on_progress(progress, total, message)`` runs on the runtime's thread: keep it quick.
        """
        return self._run(
            lambda s: s.call_tool(
                server, tool_name, arguments, call_id, timeout=timeout, on_progress=on_progress, as_task=as_task
            )
        )

    def call_tool_by_id(
        self,
        tool_id: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool by its listed id (see :meth:`McpService.call_tool_by_id`)."""
        return self._run(lambda s: s.call_tool_by_id(tool_id, arguments, call_id, timeout=timeout))

    def test(self, server: str) -> ServerTestResult:
        """Connect and list tools, timing both (see :meth:`McpService.test`)."""
        return self._run(lambda s: s.test(server))

    def discover(self, server: str) -> Discovery:
        """Tools, prompts and resources (see :meth:`McpService.discover`)."""
        return self._run(lambda s: s.discover(server))

    def connect(self, server: str) -> None:
        """Connect now (see :meth:`McpService.connect`)."""
        self._run(lambda s: s.connect(server))

    def disconnect(self, server: str) -> None:
        """Close the server's connection (see :meth:`McpService.disconnect`)."""
        self._run(lambda s: s.disconnect(server))

    def reconnect(self, server: str) -> None:
        """Close and reconnect (see :meth:`McpService.reconnect`)."""
        self._run(lambda s: s.reconnect(server))

    def cleanup(self) -> None:
        """Disconnect every server, keeping the records (see :meth:`McpService.cleanup`)."""
        self._run(lambda s: s.cleanup())

    def set_approver(self, approver: SyncApprover | None) -> None:
        """Install (or remove) the approver of calls that are not auto-approved.

        The approver is a plain function; it runs in a worker thread, so it may block
        (ask a person) without stalling the runtime. Returning false denies the call
        with ``ToolCallDenied``.
        """
        if approver is None:
            self._portal.run_sync(lambda: self._portal.service.set_approver(None))
            return
        sync_approver = approver

        async def in_worker_thread(request: ApprovalRequest) -> bool:
            return bool(await trio.to_thread.run_sync(sync_approver, request, abandon_on_cancel=True))

        self._portal.run_sync(lambda: self._portal.service.set_approver(in_worker_thread))

    def set_roots(self, roots: Any) -> int:
        """Replace the host's roots and notify the servers that can hear it (see :meth:`McpService.set_roots`).

        ``roots``: a list of ``file://`` URIs / ``Root`` values, a plain function
        ``(server_id) -> list`` (run in a worker thread), or ``None``. Returns how many
        servers were notified.
        """
        bridged = bridge_roots(roots, None)
        return self._run(lambda s: s.set_roots(bridged))

    def subscribe(self, *, buffer: int = 1024) -> SyncSubscription:
        """Events from now on, as a blocking iterator (see :meth:`McpService.subscribe`)."""
        return SyncSubscription(self._portal, buffer)

    # ---------------------------------------------------------- resources, prompts, completion, logging

    def list_resources(self, server: str) -> builtins.list[mcp_types.Resource]:
        """The server's resources (see :meth:`McpService.list_resources`)."""
        return self._run(lambda s: s.list_resources(server))

    def list_resource_templates(self, server: str) -> builtins.list[mcp_types.ResourceTemplate]:
        """The server's resource templates (see :meth:`McpService.list_resource_templates`)."""
        return self._run(lambda s: s.list_resource_templates(server))

    def read_resource(self, server: str, uri: str) -> mcp_types.ReadResourceResult:
        """Read one resource (see :meth:`McpService.read_resource`)."""
        return self._run(lambda s: s.read_resource(server, uri))

    def subscribe_resource(self, server: str, uri: str) -> None:
        """Get ``resource:updated`` events for ``uri`` (see :meth:`McpService.subscribe_resource`)."""
        self._run(lambda s: s.subscribe_resource(server, uri))

    def unsubscribe_resource(self, server: str, uri: str) -> None:
        """End a resource subscription (see :meth:`McpService.unsubscribe_resource`)."""
        self._run(lambda s: s.unsubscribe_resource(server, uri))

    def list_prompts(self, server: str) -> builtins.list[mcp_types.Prompt]:
        """The server's prompts (see :meth:`McpService.list_prompts`)."""
        return self._run(lambda s: s.list_prompts(server))

    def list_tasks(self, server: str) -> builtins.list[mcp_types.Task]:
        """The server's tasks (see :meth:`McpService.list_tasks`)."""
        return self._run(lambda s: s.list_tasks(server))

    def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """One prompt rendered with its arguments (see :meth:`McpService.get_prompt`)."""
        return self._run(lambda s: s.get_prompt(server, name, arguments))

    def complete(
        self,
        server: str,
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference | Mapping[str, Any],
        argument: Mapping[str, str] | tuple[str, str],
        context: Mapping[str, str] | None = None,
    ) -> mcp_types.Completion:
        """Completion values for an argument (see :meth:`McpService.complete`)."""
        return self._run(lambda s: s.complete(server, ref, argument, context))

    def set_log_level(self, server: str, level: str) -> None:
        """Send ``logging/setLevel`` now (see :meth:`McpService.set_log_level`)."""
        self._run(lambda s: s.set_log_level(server, level))


class SyncSubscription:
    """A blocking view of an event subscription.

    ``for event in sub`` yields events until the subscription or the portal closes;
    :meth:`get` waits for one with a timeout. The buffer is bounded as on the trio side:
    a reader that falls behind loses the oldest events (counted in :attr:`dropped`).
    """

    def __init__(self, portal: RuntimePortal, buffer: int) -> None:
        self._portal = portal
        self._sub: Subscription = portal.run_sync(lambda: portal.service.subscribe(buffer=buffer))

    @property
    def dropped(self) -> int:
        """How many events were lost because this reader fell behind."""
        return self._sub.dropped

    def get(self, timeout: float | None = None) -> Event:
        """Wait for the next event and return it.

        Args:
            timeout: Seconds to wait; ``None`` waits until an event comes or the
                subscription closes.

        Raises:
            TimeoutError: No event within ``timeout``.
            ActorStopped: The subscription or the portal is closed (and drained).
        """

        async def receive() -> Event:
            try:
                return self._sub.receive_nowait()  # a poll (``timeout=0``) gets what is buffered
            except trio.WouldBlock:
                pass
            with trio.fail_after(timeout) if timeout is not None else trio.CancelScope():
                return await self._sub.receive()

        try:
            return self._portal.run(receive)
        except trio.TooSlowError:
            raise TimeoutError(f"no event within {timeout:g}s") from None
        except trio.EndOfChannel:
            raise ActorStopped("the event subscription is closed") from None

    def __iter__(self) -> Iterator[Event]:
        while True:
            try:
                yield self.get()
            except ActorStopped:
                return

    def close(self) -> None:
        """Stop receiving; a waiting :meth:`get` ends once the buffer is drained."""
        try:
            self._portal.run_sync(self._sub.close)
        except ActorStopped:
            pass  # the portal closed: the subscription ended with it

    def __enter__(self) -> SyncSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _PortalHop:
    """The asyncio facade's way onto a portal's trio thread: from any loop, in any thread."""

    def __init__(self, portal: RuntimePortal) -> None:
        self._portal = portal

    @property
    def portal(self) -> RuntimePortal:
        """The portal whose thread runs the runtime."""
        return self._portal

    async def run(self, fn: Callable[[McpService], Awaitable[T]], /) -> T:
        """:meth:`RuntimePortal.run_asyncio`."""
        return await self._portal.run_asyncio(fn)

    def read(self, fn: Callable[[McpService], T], /) -> T:
        """A quick read, run on the portal's thread (where the runtime's state is written)."""
        portal = self._portal
        return portal.run_sync(lambda: fn(portal.service))
