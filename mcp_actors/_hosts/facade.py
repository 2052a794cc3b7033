"""The asyncio facade: every ``McpService`` operation as a coroutine, over a hop to the runtime's trio loop.

A *hop* (:class:`Hop`) is how a call crosses: :meth:`Hop.run` runs trio code on the
runtime's loop and hands its outcome (value or typed error, unchanged) to the awaiting
asyncio task, and cancelling that task cancels the trio side; :meth:`Hop.read` answers the
synchronous reads (records, statuses, tool ids) from the runtime's published snapshots.
Two hops exist: the portal's (the runtime on a thread of its own, :mod:`mcp_actors.portal`)
and the guest's (the runtime as a trio guest on the host's loop, :mod:`mcp_actors._hosts.guest`).
The facade is written once over either.

Host callbacks go the other way, from the runtime to the host: the bridges here run them
on the host's asyncio loop (a coroutine function, or the approver) or in a worker thread (a
plain handler function, which may block), whichever hop is in use.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import mcp.types as mcp_types
import trio

from mcp_actors._config.record import McpServerRecord
from mcp_actors._connection.status import ConnectionStatus
from mcp_actors.errors import ActorStopped
from mcp_actors.events import Event, Subscription
from mcp_actors.service import AddJsonEntryResult, ApprovalRequest, Discovery, McpService, ServerTestResult, ToolListing
from mcp_actors.tools import McpTool

if TYPE_CHECKING:
    from mcp_actors._hosts.session import ServerSession
    from mcp_actors.portal import RuntimePortal

__all__ = [
    "AsyncioApprover",
    "AsyncioMcpService",
    "AsyncioProgressCallback",
    "AsyncioSubscription",
    "Hop",
    "bridge_options",
    "bridge_roots",
    "on_loop",
]

T = TypeVar("T")

AsyncioProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""``on_progress`` of the asyncio facade: a function or coroutine function, run on the caller's loop."""

AsyncioApprover = Callable[[ApprovalRequest], Awaitable[bool] | bool]
"""An approver for asyncio hosts: a function or coroutine function, run on the host's loop."""

_CALLBACK_OPTIONS = ("sampling_handler", "elicitation_handler", "assertion_handler", "authorization_handler")


class Hop(Protocol):
    """How the facade reaches the runtime's trio loop (the portal's thread, or a guest run on the caller's loop)."""

    @property
    def portal(self) -> RuntimePortal | None:
        """The portal behind the hop, if a portal backs it."""
        ...

    async def run(self, fn: Callable[[McpService], Awaitable[T]], /) -> T:
        """Run ``fn(service)`` on the runtime's loop; its outcome here; cancelling the caller cancels it."""
        ...

    def read(self, fn: Callable[[McpService], T], /) -> T:
        """Call a quick synchronous read ``fn(service)`` where the runtime's state may be read."""
        ...


# ---------------------------------------------------------------------- callbacks of the host


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def bridge_callable(fn: Callable[..., Any], loop: asyncio.AbstractEventLoop | None, what: str) -> Callable[..., Any]:
    """A trio coroutine function running the host's ``fn`` where the host can run it.

    A coroutine function runs on the host's asyncio ``loop``; a plain function runs in a
    worker thread (it may block: ask a person, call a model synchronously). Cancelling the
    trio side (the server gave up, the handler timed out) cancels the asyncio task; a
    blocked thread is abandoned. Works whether the runtime runs on a thread of its own or
    as a guest on ``loop`` (the wait for the host's answer is in a worker thread either way).

    Raises:
        TypeError: ``fn`` is a coroutine function and no loop is running here.
    """
    if inspect.iscoroutinefunction(fn):
        if loop is None:
            raise TypeError(
                f"{what} is a coroutine function but no asyncio loop runs here: call start_portal (or set_roots)"
                " from the loop it must run on, or pass a plain function (it runs in a worker thread)"
            )
        host_loop = loop

        async def on_host_loop(*args: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(fn(*args), host_loop)
            try:
                return await trio.to_thread.run_sync(future.result, abandon_on_cancel=True)
            finally:
                if not future.done():
                    future.cancel()

        return on_host_loop

    async def in_worker_thread(*args: Any) -> Any:
        return await trio.to_thread.run_sync(lambda: fn(*args), abandon_on_cancel=True)

    return in_worker_thread


def bridge_roots(roots: Any, loop: asyncio.AbstractEventLoop | None) -> Any:
    """Roots for the trio side: a list passes as is, a callable is bridged like a handler."""
    return bridge_callable(roots, loop, "roots") if callable(roots) else roots


def bridge_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``open_runtime`` options with the host's handlers and roots callable bridged to trio.

    Raises:
        TypeError: A handler is not callable, or is a coroutine function with no loop running here.
    """
    loop = _running_loop()
    bridged = dict(options)
    for name in _CALLBACK_OPTIONS:
        handler = bridged.get(name)
        if handler is not None:
            if not callable(handler):
                raise TypeError(f"{name} must be a function or coroutine function (server_id, params), got {handler!r}")
            bridged[name] = bridge_callable(handler, loop, name)
    if bridged.get("roots") is not None:
        bridged["roots"] = bridge_roots(bridged["roots"], loop)
    return bridged


def on_loop(
    loop: asyncio.AbstractEventLoop, callback: AsyncioProgressCallback
) -> Callable[[float, float | None, str | None], None]:
    """A progress callback for the trio side that runs ``callback`` on the caller's asyncio ``loop``.

    ``callback`` may be a function, a coroutine function or any callable returning an
    awaitable (the SDK's ``ProgressFnT`` objects): what it returns is run as a task on
    ``loop``. Each call is scheduled, never awaited: a slow callback never holds up the call
    it watches.
    """
    running: set[asyncio.Future[Any]] = set()  # strong references: a bare task may be collected mid-run

    def on_host(progress: float, total: float | None, message: str | None) -> None:
        outcome = callback(progress, total, message)
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(outcome)
            running.add(task)
            task.add_done_callback(running.discard)

    def relay(progress: float, total: float | None, message: str | None) -> None:
        try:
            loop.call_soon_threadsafe(on_host, progress, total, message)
        except RuntimeError:
            pass  # the caller's loop is closed: nobody is left to tell

    return relay


def _approver_on(loop: asyncio.AbstractEventLoop, approver: AsyncioApprover) -> Callable[[ApprovalRequest], Any]:
    """The trio-side approver that asks ``approver`` on the host's ``loop`` (a plain function runs there too)."""

    async def on_host_loop(request: ApprovalRequest) -> bool:
        verdict = approver(request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict)

    async def via_host_loop(request: ApprovalRequest) -> bool:
        try:
            host_future = asyncio.run_coroutine_threadsafe(on_host_loop(request), loop)
        except RuntimeError:  # the host's loop is closed: nobody can approve
            return False
        token = trio.lowlevel.current_trio_token()
        answered = trio.Event()

        def wake(_: concurrent.futures.Future[bool]) -> None:
            try:
                token.run_sync_soon(answered.set)
            except trio.RunFinishedError:
                pass

        host_future.add_done_callback(wake)
        try:
            await answered.wait()
        except trio.Cancelled:
            host_future.cancel()
            raise
        if host_future.cancelled():
            return False
        return host_future.result()

    return via_host_loop


# ---------------------------------------------------------------------- the facade


class AsyncioMcpService:
    """The McpService operations as asyncio coroutines.

    ``await service.call_tool("demo", "echo", {"text": "hi"})``, concurrently, from
    asyncio. Same arguments, results and typed errors as
    :class:`~mcp_actors.service.McpService`. No executor thread is used per call.
    Cancelling the awaiting task cancels the call on the trio side (and on the server).
    The reads (``get``, ``status``, ...) are plain methods answered in microseconds.

    Where it may be called from depends on what runs the runtime: a portal's facade
    (``portal.asyncio_service()``, ``mcp_actors.asyncio.open_runtime(mode="thread")``)
    from any asyncio loop in any thread; a guest runtime's only from its own loop.
    """

    def __init__(self, hop: Hop) -> None:
        self._hop = hop

    @property
    def portal(self) -> RuntimePortal | None:
        """The portal this facade runs on (``None`` for a guest runtime, which has none)."""
        return self._hop.portal

    async def _run(self, fn: Callable[[McpService], Awaitable[T]]) -> T:
        return await self._hop.run(fn)

    # ---------------------------------------------------------- the hop itself

    async def run_in_runtime(self, fn: Callable[[McpService], Awaitable[T]], /) -> T:
        """Run trio code on the runtime's loop and await its result here, on asyncio.

        ``fn`` gets the runtime's :class:`~mcp_actors.service.McpService`. The helpers
        that take a service (``fetch_mcp_tools``, ``setup_mcp_tools``, ``load_mcp_tools``,
        the registry tool adapters) call this themselves when given this facade; call it
        for trio code of your own. Cancelling the awaiting task cancels ``fn``.

        Raises:
            ActorStopped: The runtime is closed, or closed while ``fn`` ran.
        """
        return await self._hop.run(fn)

    def relay_progress(self, callback: AsyncioProgressCallback, /) -> Callable[[float, float | None, str | None], None]:
        """``callback`` (a function or coroutine function) as a progress callback for the runtime's side.

        Each call from the runtime runs ``callback`` on the asyncio loop running now. Call
        it on that loop.
        """
        return on_loop(asyncio.get_running_loop(), callback)

    # ---------------------------------------------------------- reads

    def get(self, server: str) -> McpServerRecord:
        """One server's record by id or name (see :meth:`McpService.get`)."""
        return self._hop.read(lambda s: s.get(server))

    def status(self, server: str) -> ConnectionStatus:
        """One server's connection status (see :meth:`McpService.status`)."""
        return self._hop.read(lambda s: s.status(server))

    def is_connected(self, server: str) -> bool:
        """Whether the server's connection is up now (see :meth:`McpService.is_connected`)."""
        return self._hop.read(lambda s: s.is_connected(server))

    def call_goes_straight(self, server: str, tool_name: str) -> bool:
        """Whether a call of the tool now goes straight to its request (see :meth:`McpService.call_goes_straight`)."""
        return self._hop.read(lambda s: s.call_goes_straight(server, tool_name))

    def resolve_tool_id(self, tool_id: str) -> tuple[McpServerRecord, str]:
        """``(record, tool name)`` for a tool id (see :meth:`McpService.resolve_tool_id`)."""
        return self._hop.read(lambda s: s.resolve_tool_id(tool_id))

    def is_auto_approved(self, server: str, tool_name: str) -> bool:
        """Whether a call needs no approval (see :meth:`McpService.is_auto_approved`)."""
        return self._hop.read(lambda s: s.is_auto_approved(server, tool_name))

    @property
    def tool_list_requests(self) -> int:
        """How many ``tools/list`` requests were sent so far (cache misses)."""
        return self._hop.read(lambda s: s.tool_list_requests)

    def stderr_tail(self, server: str, n: int = 20) -> tuple[str, ...]:
        """The server's last stderr lines (see :meth:`McpService.stderr_tail`)."""
        return self._hop.read(lambda s: s.stderr_tail(server, n))

    # ---------------------------------------------------------- records

    async def list(self) -> builtins.list[McpServerRecord]:
        """Every configured server's record, current with the file (see :meth:`McpService.list`)."""
        return await self._run(lambda s: s.list())

    async def add(self, input: McpServerRecord | Mapping[str, Any]) -> McpServerRecord:
        """Add a server and save it (see :meth:`McpService.add`)."""
        return await self._run(lambda s: s.add(input))

    async def add_json(self, text: str) -> builtins.list[AddJsonEntryResult]:
        """Add every server of an ``mcpServers`` document (see :meth:`McpService.add_json`)."""
        return await self._run(lambda s: s.add_json(text))

    async def update(self, server: str, changes: Mapping[str, Any] | None = None, /, **more: Any) -> McpServerRecord:
        """Change fields of a record, snake_case or camelCase (see :meth:`McpService.update`)."""
        return await self._run(lambda s: s.update(server, changes, **more))

    async def remove(self, server: str) -> McpServerRecord:
        """Remove a server and stop its process (see :meth:`McpService.remove`)."""
        return await self._run(lambda s: s.remove(server))

    # ---------------------------------------------------------- tools

    async def list_server_tools(self, server: str) -> builtins.list[McpTool]:
        """One server's tools (see :meth:`McpService.list_server_tools`)."""
        return await self._run(lambda s: s.list_server_tools(server))

    async def list_tool_definitions(self, server: str) -> builtins.list[mcp_types.Tool]:
        """One server's tools as ``mcp.types.Tool`` (see :meth:`McpService.list_tool_definitions`)."""
        return await self._run(lambda s: s.list_tool_definitions(server))

    async def list_all_active_server_tools(self) -> builtins.list[McpTool]:
        """Tools of every active server (see :meth:`McpService.list_all_active_server_tools`)."""
        return await self._run(lambda s: s.list_all_active_server_tools())

    async def list_tools_detailed(self, servers: Sequence[str] | None = None) -> ToolListing:
        """Tools plus per-server failures (see :meth:`McpService.list_tools_detailed`)."""
        return await self._run(lambda s: s.list_tools_detailed(servers))

    async def call_tool(
        self,
        server: str,
        tool_name: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
        on_progress: AsyncioProgressCallback | None = None,
        as_task: bool | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool (see :meth:`McpService.call_tool`); cancelling the task cancels the call.

        ``on_progress(progress, total, message)`` (a function or a coroutine function) runs
        on the calling asyncio loop.
        """
        relay = on_loop(asyncio.get_running_loop(), on_progress) if on_progress is not None else None
        return await self._run(
            lambda s: s.call_tool(
                server, tool_name, arguments, call_id, timeout=timeout, on_progress=relay, as_task=as_task, meta=meta
            )
        )

    async def call_tool_by_id(
        self,
        tool_id: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
        on_progress: AsyncioProgressCallback | None = None,
        as_task: bool | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool by its listed id (see :meth:`McpService.call_tool_by_id`)."""
        relay = on_loop(asyncio.get_running_loop(), on_progress) if on_progress is not None else None
        return await self._run(
            lambda s: s.call_tool_by_id(
                tool_id, arguments, call_id, timeout=timeout, on_progress=relay, as_task=as_task
            )
        )

    # ---------------------------------------------------------- connections

    async def test(self, server: str) -> ServerTestResult:
        """Connect and list tools, timing both (see :meth:`McpService.test`)."""
        return await self._run(lambda s: s.test(server))

    async def health(self, server: str, *, timeout: float = 10.0) -> float:
        """Ping the server now; the round trip in seconds (see :meth:`McpService.health`)."""
        return await self._run(lambda s: s.health(server, timeout=timeout))

    async def discover(self, server: str) -> Discovery:
        """Tools, prompts and resources (see :meth:`McpService.discover`)."""
        return await self._run(lambda s: s.discover(server))

    async def connect(self, server: str) -> None:
        """Connect now (see :meth:`McpService.connect`)."""
        await self._run(lambda s: s.connect(server))

    async def initialize_result(self, server: str) -> mcp_types.InitializeResult:
        """The server's handshake answer, connecting if needed (see :meth:`McpService.initialize_result`)."""
        return await self._run(lambda s: s.initialize_result(server))

    async def disconnect(self, server: str) -> None:
        """Close the server's connection (see :meth:`McpService.disconnect`)."""
        await self._run(lambda s: s.disconnect(server))

    async def reconnect(self, server: str) -> None:
        """Close and reconnect (see :meth:`McpService.reconnect`)."""
        await self._run(lambda s: s.reconnect(server))

    async def cleanup(self) -> None:
        """Disconnect every server, keeping the records (see :meth:`McpService.cleanup`)."""
        await self._run(lambda s: s.cleanup())

    async def wait_for_stderr(self, server: str, predicate: Callable[[str], bool]) -> str:
        """Wait for a stderr line satisfying ``predicate`` (see :meth:`McpService.wait_for_stderr`).

        ``predicate`` runs on the runtime's side: keep it a quick pure function. Unbounded:
        wrap it in ``asyncio.timeout``.
        """
        return await self._run(lambda s: s.wait_for_stderr(server, predicate))

    # ---------------------------------------------------------- host callbacks

    def set_approver(self, approver: AsyncioApprover | None) -> None:
        """Install (or remove) the approver of calls that are not auto-approved.

        Call it from a running asyncio loop: the approver (a function or a coroutine
        function) runs on that loop. If the loop has closed when a call needs approval,
        the call is denied (``ToolCallDenied``).

        Raises:
            RuntimeError: No asyncio loop is running in this thread.
        """
        if approver is None:
            self._hop.read(lambda s: s.set_approver(None))
            return
        bridged = _approver_on(asyncio.get_running_loop(), approver)
        self._hop.read(lambda s: s.set_approver(bridged))

    async def set_roots(self, roots: Any) -> int:
        """Replace the host's roots and notify the servers that can hear it (see :meth:`McpService.set_roots`).

        ``roots``: a list of ``file://`` URIs / ``Root`` values, a function or coroutine
        function ``(server_id) -> list`` (a coroutine runs on this loop), or ``None``.
        Returns how many servers were notified.
        """
        bridged = bridge_roots(roots, asyncio.get_running_loop())
        return await self._run(lambda s: s.set_roots(bridged))

    def subscribe(self, *, buffer: int = 1024) -> AsyncioSubscription:
        """Events from now on (subscribed at once), as an asyncio async iterator.

        ``async for event in service.subscribe(): ...``; see :meth:`McpService.subscribe`.
        """
        return AsyncioSubscription(self._hop, buffer)

    # ---------------------------------------------------------- resources, prompts, completion, logging

    async def list_resources(self, server: str) -> builtins.list[mcp_types.Resource]:
        """The server's resources (see :meth:`McpService.list_resources`)."""
        return await self._run(lambda s: s.list_resources(server))

    async def list_resource_templates(self, server: str) -> builtins.list[mcp_types.ResourceTemplate]:
        """The server's resource templates (see :meth:`McpService.list_resource_templates`)."""
        return await self._run(lambda s: s.list_resource_templates(server))

    async def read_resource(self, server: str, uri: str) -> mcp_types.ReadResourceResult:
        """Read one resource (see :meth:`McpService.read_resource`)."""
        return await self._run(lambda s: s.read_resource(server, uri))

    async def subscribe_resource(self, server: str, uri: str) -> None:
        """Get ``resource:updated`` events for ``uri`` (see :meth:`McpService.subscribe_resource`)."""
        await self._run(lambda s: s.subscribe_resource(server, uri))

    async def unsubscribe_resource(self, server: str, uri: str) -> None:
        """End a resource subscription (see :meth:`McpService.unsubscribe_resource`)."""
        await self._run(lambda s: s.unsubscribe_resource(server, uri))

    async def list_prompts(self, server: str) -> builtins.list[mcp_types.Prompt]:
        """The server's prompts (see :meth:`McpService.list_prompts`)."""
        return await self._run(lambda s: s.list_prompts(server))

    async def list_tasks(self, server: str) -> builtins.list[mcp_types.Task]:
        """The server's tasks (see :meth:`McpService.list_tasks`)."""
        return await self._run(lambda s: s.list_tasks(server))

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """One prompt rendered with its arguments (see :meth:`McpService.get_prompt`)."""
        return await self._run(lambda s: s.get_prompt(server, name, arguments))

    async def complete(
        self,
        server: str,
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference | Mapping[str, Any],
        argument: Mapping[str, str] | tuple[str, str],
        context: Mapping[str, str] | None = None,
    ) -> mcp_types.Completion:
        """Completion values for an argument (see :meth:`McpService.complete`)."""
        return await self._run(lambda s: s.complete(server, ref, argument, context))

    async def set_log_level(self, server: str, level: str) -> None:
        """Send ``logging/setLevel`` now (see :meth:`McpService.set_log_level`)."""
        await self._run(lambda s: s.set_log_level(server, level))

    # ---------------------------------------------------------- one server as a session

    def session(self, server: str) -> ServerSession:
        """A ``ClientSession``-shaped view of one server, for libraries that take an SDK session.

        It shares this runtime's connection (no second process, no second handshake); see
        :class:`~mcp_actors._hosts.session.ServerSession`. The server is named by id or name
        and looked up on each call.
        """
        from mcp_actors._hosts.session import ServerSession

        return ServerSession(self, server)


class AsyncioSubscription:
    """An asyncio view of an event subscription.

    ``async for event in sub`` yields events until the subscription or the runtime
    closes. Each event is fetched from the trio side when asked for, so the buffer stays
    the bounded one of the trio subscription (a slow reader loses the oldest events,
    counted in :attr:`dropped`); nothing piles up in between.
    """

    def __init__(self, hop: Hop, buffer: int) -> None:
        self._hop = hop
        self._sub: Subscription = hop.read(lambda s: s.subscribe(buffer=buffer))

    @property
    def dropped(self) -> int:
        """How many events were lost because this reader fell behind."""
        return self._sub.dropped

    async def receive(self) -> Event:
        """Wait for the next event.

        Raises:
            ActorStopped: The subscription or the runtime is closed (and drained).
        """
        sub = self._sub
        try:
            return await self._hop.run(lambda _: sub.receive())
        except trio.EndOfChannel:
            raise ActorStopped("the event subscription is closed") from None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            try:
                event = await self.receive()
            except ActorStopped:
                return
            yield event

    def close(self) -> None:
        """Stop receiving; a waiting :meth:`receive` ends once the buffer is drained."""
        sub = self._sub
        try:
            self._hop.read(lambda _: sub.close())
        except ActorStopped:
            pass  # the runtime closed: the subscription ended with it

    async def __aenter__(self) -> AsyncioSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
