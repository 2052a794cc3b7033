"""asyncio hosts: ``async with mcp_actors.asyncio.open_runtime() as rt``.

The runtime is a trio supervision tree; an asyncio program reaches it through
:func:`open_runtime`, which starts it without blocking the loop (the start and the stop
are awaited) and yields an :class:`AsyncioRuntime`:

* ``rt.service`` — :class:`AsyncioMcpService`: every ``McpService`` operation as a
  coroutine, plus ``subscribe`` (events), ``set_approver``, ``run_in_runtime`` and
  ``relay_progress``; the helpers that take a service (``fetch_mcp_tools``,
  ``setup_mcp_tools``, ``load_mcp_tools``, the adapters) take it too.
* ``rt.session(server)`` — :class:`ServerSession`, one server shaped like the SDK's
  ``mcp.ClientSession``, for libraries that take a session.
* ``rt.portal`` — the :class:`~mcp_actors.portal.RuntimePortal` behind a thread runtime
  (``None`` for a guest one).

Two ways to run the tree, chosen by ``mode`` (docs/asyncio.md has the measurements):

* ``"guest"`` (the default): trio runs as a guest on this asyncio loop, in this thread;
  its I/O waits on the loop's own selector. No call crosses a thread. The runtime may
  only be used from this loop (elsewhere: ``RuntimeError``), and a thread holds one
  trio run, so a second runtime in the same thread needs ``"thread"``.
* ``"thread"``: the tree runs on a thread of its own (a portal); its facade may be used
  from any asyncio loop in any thread, and the portal's blocking facade
  (``rt.portal.sync_service()``) from plain threads. Each call crosses two threads.

Either way typed errors cross unchanged, cancelling an asyncio task cancels its call on
the server (``notifications/cancelled``), and leaving the block — normally, by an
exception, or by the task's cancellation — closes every server and reaps every process
before the block is left.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any, Literal

import trio

from mcp_actors._hosts.facade import (
    AsyncioApprover,
    AsyncioMcpService,
    AsyncioProgressCallback,
    AsyncioSubscription,
    bridge_options,
)
from mcp_actors._hosts.guest import open_guest_runtime
from mcp_actors._hosts.session import ServerSession
from mcp_actors.portal import RuntimePortal, start_portal_async

__all__ = [
    "AsyncioApprover",
    "AsyncioMcpService",
    "AsyncioProgressCallback",
    "AsyncioRuntime",
    "AsyncioSubscription",
    "Mode",
    "ServerSession",
    "open_runtime",
]

Mode = Literal["guest", "thread"]
"""How :func:`open_runtime` runs the tree: on this loop as a trio guest, or on a thread of its own."""


class AsyncioRuntime:
    """A running runtime, as :func:`open_runtime` yields it to an asyncio host.

    Attributes:
        service: The asyncio facade (every ``McpService`` operation as a coroutine).
        portal: The portal behind a ``"thread"`` runtime; ``None`` for a ``"guest"`` one.
        mode: ``"guest"`` or ``"thread"``: how the tree runs.
    """

    def __init__(self, service: AsyncioMcpService, mode: Mode) -> None:
        self.service = service
        self.mode: Mode = mode

    def __repr__(self) -> str:
        return f"AsyncioRuntime(mode={self.mode!r})"

    @property
    def portal(self) -> RuntimePortal | None:
        """The portal behind a ``"thread"`` runtime (for its blocking facade); ``None`` for a guest one."""
        return self.service.portal

    def session(self, server: str) -> ServerSession:
        """One server shaped like the SDK's ``mcp.ClientSession`` (see :class:`ServerSession`).

        For libraries that take a session (Anthropic's ``async_mcp_tool``, LlamaIndex's
        ``McpToolSpec``): they share this runtime's connection, its process and its one
        handshake, with the runtime's timeouts, approval and restarts.
        """
        return self.service.session(server)


@contextlib.asynccontextmanager
async def open_runtime(
    config_path: str | os.PathLike[str] | None = None,
    *,
    mode: Mode | None = None,
    **runtime_options: Any,
) -> AsyncIterator[AsyncioRuntime]:
    """Start the runtime for this asyncio program; yield an :class:`AsyncioRuntime`; stop it on exit.

    Neither the start nor the stop blocks the loop: both are awaited. Leaving the block
    cancels the calls still running (they raise ``ActorStopped``), closes every server and
    reaps every process, and only then returns; a cancellation of the task meanwhile is
    re-raised once that is done.

    Args:
        config_path: The config file (default: ``MCP_ACTORS_CONFIG`` or the user data dir).
        mode: ``"guest"`` (trio as a guest on this loop; the runtime is used from this loop
            only) or ``"thread"`` (the tree on a thread of its own; usable from any loop or
            thread). Default: ``"guest"``, or ``"thread"`` when this thread already runs
            trio (another guest runtime), which allows one trio run per thread.
        **runtime_options: The other options of :func:`mcp_actors.runtime.open_runtime`
            (``tool_cache_ttl``, ``connect_on_add``, ...). The host callbacks
            (``sampling_handler``, ``elicitation_handler``, ``assertion_handler``,
            ``authorization_handler``, a ``roots`` callable) may be coroutine functions, run
            on this loop, or plain functions, run in a worker thread (they may block).

    Raises:
        ValueError: ``mode`` is not ``"guest"`` or ``"thread"``.
        RuntimeError: ``mode="guest"`` where this thread already runs trio.
        ConfigFileCorrupt: The config file cannot be parsed.
        TimeoutError: The runtime did not start within 60 s.

    Example::

        async with mcp_actors.asyncio.open_runtime() as rt:
            result = await rt.service.call_tool("demo", "echo", {"text": "hi"})
    """
    if mode is None:
        mode = "thread" if trio.lowlevel.in_trio_run() else "guest"
    if mode not in ("guest", "thread"):
        raise ValueError(f"mode must be 'guest' or 'thread', got {mode!r}")
    if mode == "guest":
        async with open_guest_runtime(**bridge_options({"config_path": config_path, **runtime_options})) as hop:
            yield AsyncioRuntime(AsyncioMcpService(hop), "guest")
        return
    portal = await start_portal_async(os.fspath(config_path) if config_path is not None else None, **runtime_options)
    try:
        yield AsyncioRuntime(portal.asyncio_service(), "thread")
    finally:
        await portal.aclose()
