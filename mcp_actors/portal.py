"""Embedding in sync and asyncio hosts: the trio runtime in a background thread.

Most agent runtimes are asyncio or plain threads. :func:`start_portal` runs
:func:`~mcp_actors.runtime.open_runtime` on a trio loop in a daemon thread and gives two
facades over the same :class:`~mcp_actors.registry.McpService` operations:

* :class:`SyncMcpService` — blocking methods, callable from any thread.
* :class:`AsyncioMcpService` — coroutines for asyncio. A call is handed to the trio loop
  (``run_sync_soon``) and its result comes back through the asyncio loop
  (``call_soon_threadsafe``): no executor thread is held per call, so a thousand
  concurrent calls cost a thousand small tasks, not a thousand threads. Cancelling the
  asyncio task cancels the trio side too (and so the call on the server).

Closing the portal (``close()``, or leaving its ``with`` block) shuts the runtime down the
normal way: every server is closed and every process reaped before ``close`` returns.
Typed errors cross the thread boundary unchanged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar

import outcome
import trio

from mcp_actors.errors import ActorStopped
from mcp_actors.events import Event
from mcp_actors.registry import McpService
from mcp_actors.runtime import Runtime, open_runtime

__all__ = ["AsyncioMcpService", "RuntimePortal", "SyncMcpService", "start_portal"]

T = TypeVar("T")

_START_TIMEOUT: Final = 60.0
_CLOSE_TIMEOUT: Final = 120.0

_ASYNC_METHODS: Final = (
    "add",
    "add_json",
    "update",
    "remove",
    "list_server_tools",
    "list_all_active_server_tools",
    "list_tools_detailed",
    "call_tool",
    "call_tool_by_id",
    "test",
    "discover",
    "connect",
    "disconnect",
    "reconnect",
    "cleanup",
)
_SYNC_METHODS: Final = ("list", "get", "status", "resolve_tool_id", "is_auto_approved", "set_approver")


class RuntimePortal:
    """A trio runtime running in a background thread, and the way in.

    Create it with :func:`start_portal`. Thread-safe; usable from any number of threads
    and asyncio loops at once.
    """

    def __init__(self, **runtime_options: Any) -> None:
        self._options = runtime_options
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._runtime: Runtime | None = None
        self._stop: trio.Event | None = None
        self._startup_error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._thread_main, name="mcp-actors-runtime", daemon=True)
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT):
            raise TimeoutError(f"the mcp-actors runtime did not start within {_START_TIMEOUT:g}s")
        if self._startup_error is not None:
            raise self._startup_error

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to the starting thread; nothing else to do
            if not self._ready.is_set():
                self._startup_error = exc
                self._ready.set()

    async def _main(self) -> None:
        self._stop = trio.Event()
        async with open_runtime(**self._options) as runtime, trio.open_nursery() as nursery:
            self._runtime = runtime
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    @property
    def service(self) -> McpService:
        """The trio-side facade (only for use on the portal's own thread)."""
        assert self._runtime is not None
        return self._runtime.service

    def _check_open(self) -> trio.lowlevel.TrioToken:
        if self._closed or self._token is None:
            raise ActorStopped("the mcp-actors portal is closed")
        return self._token

    def submit(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args, **kwargs)`` on the runtime's loop; a future for its outcome.

        Cancelling the future (``future.cancel()``) cancels the trio task.
        """
        token = self._check_open()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        scope = trio.CancelScope()

        async def runner() -> None:
            with scope:
                result = await outcome.acapture(fn, *args, **kwargs)
                if not future.cancelled():
                    if isinstance(result, outcome.Value):
                        future.set_result(result.value)
                    else:
                        future.set_exception(result.error)
            if scope.cancelled_caught and not future.done():
                future.cancel()

        def start() -> None:
            if self._nursery is None or self._closed:
                future.set_exception(ActorStopped("the mcp-actors portal is closed"))
                return
            future.set_running_or_notify_cancel()
            self._nursery.start_soon(runner)

        def on_done(f: concurrent.futures.Future[T]) -> None:
            if f.cancelled():
                try:
                    token.run_sync_soon(scope.cancel)
                except trio.RunFinishedError:
                    pass

        future.add_done_callback(on_done)
        try:
            token.run_sync_soon(start)
        except trio.RunFinishedError:
            raise ActorStopped("the mcp-actors portal is closed") from None
        return future

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the runtime's loop and block until it finishes (from a non-trio thread)."""
        future = self.submit(fn, *args, **kwargs)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain function on the runtime's thread (for reading its state safely)."""
        token = self._check_open()
        return trio.from_thread.run_sync(fn, *args, trio_token=token)

    def close(self) -> None:
        """Close every server and stop the runtime; returns when all processes are reaped."""
        if self._closed:
            return
        token = self._token
        self._closed = True
        if token is not None and self._stop is not None:
            try:
                token.run_sync_soon(self._stop.set)
            except trio.RunFinishedError:
                pass
        self._thread.join(_CLOSE_TIMEOUT)

    def __enter__(self) -> RuntimePortal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sync_service(self) -> SyncMcpService:
        """A blocking facade over this portal."""
        return SyncMcpService(self)

    def asyncio_service(self) -> AsyncioMcpService:
        """An asyncio facade over this portal."""
        return AsyncioMcpService(self)


def start_portal(config_path: str | None = None, **runtime_options: Any) -> RuntimePortal:
    """Start the runtime in a background thread.

    Args:
        config_path: The config file, as for :func:`~mcp_actors.runtime.open_runtime`.
        **runtime_options: Other ``open_runtime`` options (``tool_cache_ttl``, ...).

    Example::

        with start_portal() as portal:
            service = portal.sync_service()
            print(service.call_tool("demo", "echo", {"text": "hi"}))
    """
    return RuntimePortal(config_path=config_path, **runtime_options)


def _service_call(portal: RuntimePortal, name: str) -> Callable[..., Awaitable[Any]]:
    async def call(*args: Any, **kwargs: Any) -> Any:
        return await getattr(portal.service, name)(*args, **kwargs)

    return call


class SyncMcpService:
    """The McpService operations as blocking methods (thread-safe).

    Every coroutine method of :class:`~mcp_actors.registry.McpService` is here with the
    same arguments and errors; the plain ones (``list``, ``status``, ...) too.
    """

    def __init__(self, portal: RuntimePortal) -> None:
        self._portal = portal

    def __getattr__(self, name: str) -> Any:
        if name in _ASYNC_METHODS:
            call = _service_call(self._portal, name)
            wrapper = functools.wraps(getattr(McpService, name))(lambda *a, **k: self._portal.run(call, *a, **k))
            return wrapper
        if name in _SYNC_METHODS:
            return lambda *a, **k: self._portal.run_sync(lambda: getattr(self._portal.service, name)(*a, **k))
        raise AttributeError(name)

    def subscribe(self, *, buffer: int = 1024) -> SyncSubscription:
        """Events from now on, as a blocking iterator."""
        return SyncSubscription(self._portal, buffer)


class SyncSubscription:
    """A blocking view of an event subscription (``for event in sub``; ``close()`` to stop)."""

    def __init__(self, portal: RuntimePortal, buffer: int) -> None:
        self._portal = portal
        self._sub = portal.run_sync(lambda: portal.service.subscribe(buffer=buffer))

    def get(self, timeout: float | None = None) -> Event:
        """The next event; raises ``TimeoutError`` after ``timeout`` seconds."""

        async def receive() -> Event:
            if timeout is None:
                return await self._sub.receive()
            with trio.fail_after(timeout):
                return await self._sub.receive()

        try:
            return self._portal.run(receive)
        except trio.TooSlowError:
            raise TimeoutError(f"no event within {timeout:g}s") from None

    def close(self) -> None:
        """Stop receiving."""
        self._portal.run_sync(self._sub.close)


class AsyncioMcpService:
    """The McpService operations as asyncio coroutines.

    ``await service.call_tool("demo", "echo", {"text": "hi"})`` from any asyncio loop.
    Cancelling the awaiting task cancels the call on the trio side (and on the server).
    """

    def __init__(self, portal: RuntimePortal) -> None:
        self._portal = portal

    async def _run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        future = self._portal.submit(fn, *args, **kwargs)
        return await asyncio.wrap_future(future, loop=loop)

    def __getattr__(self, name: str) -> Any:
        if name in _ASYNC_METHODS:
            call = _service_call(self._portal, name)

            @functools.wraps(getattr(McpService, name))
            async def method(*args: Any, **kwargs: Any) -> Any:
                return await self._run(call, *args, **kwargs)

            return method
        if name in _SYNC_METHODS:
            return lambda *a, **k: self._portal.run_sync(lambda: getattr(self._portal.service, name)(*a, **k))
        raise AttributeError(name)

    async def subscribe(self, *, buffer: int = 1024) -> AsyncIterator[Event]:
        """Events from now on, as an asyncio async iterator."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        sub = self._portal.run_sync(lambda: self._portal.service.subscribe(buffer=buffer))

        async def pump() -> None:
            async for event in sub:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        future = self._portal.submit(pump)
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            future.cancel()
            self._portal.run_sync(sub.close)
