"""The in-memory transport: an SDK server object run in this process, inside trio.

Why: registry and connection behaviour (calls, crashes, timeouts, reconnects) does not
depend on pipes or sockets, and over memory streams it runs in milliseconds on trio's
virtual clock (``autojump_clock``). Spawn, kill, stderr and orphan behaviour stays tested
with real processes, in files of their own.

The server runs as a task of the transport's nursery. When that task ends on its own, the
link dies exactly as a stdio link dies when its process exits: with an exception the
reason names it ("the in-memory server crashed: ..."), which is how tests model a crash.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import anyio
import attrs
import mcp.types as mcp_types
import trio
from mcp.shared.message import SessionMessage

from mcp_actors._sdk import lowlevel_server
from mcp_actors._wire.link import STREAM_BUFFER, TransportLink

__all__ = ["MemoryParams", "open_memory_transport"]

_SHUTDOWN_GRACE: Final = 2.0
_EXIT_GRACE: Final = 0.2


def _describe_server(server: object) -> str:
    name = getattr(server, "name", None) or getattr(server, "__qualname__", None) or type(server).__name__
    return f"<{name}>"


@attrs.frozen(kw_only=True)
class MemoryParams:
    """Reach an SDK server object in this process over in-memory streams.

    Attributes:
        server: An ``mcp.server.mcpserver.MCPServer``, a low-level ``mcp.server.Server``,
            or a zero-argument callable returning either. A callable gives every
            connection (every reconnect) a fresh server, as a new process would be.
        raise_exceptions: Let an exception escaping a handler end the server task (the
            in-process equivalent of the process dying). With ``False`` the SDK turns it
            into an error reply instead.
        principal: Who the link's requests go out as (:attr:`TransportLink.principal`). An
            in-process server has no credential; a test of credential-scoped caches gives one
            that it changes, as a refreshed or re-issued OAuth token would.
    """

    server: Any = attrs.field(repr=_describe_server)
    raise_exceptions: bool = True
    principal: Callable[[], str | None] | None = attrs.field(default=None, repr=False)

    def open(self, *, label: str) -> contextlib.AbstractAsyncContextManager[TransportLink]:
        """Start the server as a task and yield the link (see :func:`open_memory_transport`)."""
        return open_memory_transport(self, label=label)

    def secret_values(self) -> tuple[str, ...]:
        """Nothing: an in-process server has no configured secrets."""
        return ()


def _lowlevel_server(spec: Any) -> Any:
    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

    server = spec
    if not isinstance(server, MCPServer | Server) and callable(server):
        factory: Callable[[], Any] = server
        server = factory()
    if isinstance(server, MCPServer):
        # The SDK's own InMemoryTransport unwraps it the same way.
        return lowlevel_server(server)
    if isinstance(server, Server):
        return server
    raise TypeError(
        f"MemoryParams.server must be an MCPServer, a Server or a factory of one, got {type(server).__name__}"
    )


def _is_shutdown_reply(item: SessionMessage | Exception) -> bool:
    return (
        isinstance(item, SessionMessage)
        and isinstance(item.message, mcp_types.JSONRPCError)
        and item.message.error.code == mcp_types.CONNECTION_CLOSED
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _crash_reason(exc: BaseException) -> str | None:
    """Why the server task ended, or None when it was cancelled (or interrupted) from outside."""
    leaves = _leaves(exc)
    if not all(isinstance(leaf, Exception | SystemExit) for leaf in leaves):
        return None
    for leaf in leaves:
        if isinstance(leaf, SystemExit):
            return f"the in-memory server exited with code {leaf.code}"
    leaf = leaves[0]
    return f"the in-memory server crashed: {type(leaf).__name__}: {leaf}"


@contextlib.asynccontextmanager
async def open_memory_transport(params: MemoryParams, *, label: str) -> AsyncIterator[TransportLink]:
    """Run ``params.server`` as a task over in-memory streams and yield its link.

    The link dies when the server task ends (an exception or a clean stop), and leaving
    the block closes the client's stream, gives the server a bounded moment to finish,
    then cancels it.

    Raises:
        TypeError: ``params.server`` is not a server or a factory of one.
    """
    server = _lowlevel_server(params.server)
    to_server, server_inbox = anyio.create_memory_object_stream[SessionMessage](STREAM_BUFFER)
    server_outbox, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](STREAM_BUFFER)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](STREAM_BUFFER)
    link = TransportLink(read_stream=read_stream, write_stream=to_server, label=label)
    if params.principal is not None:
        link.principal = params.principal
    link._closers.append(read_writer)

    async def run_server() -> None:
        try:
            await server.run(
                server_inbox,
                server_outbox,
                server.create_initialization_options(),
                raise_exceptions=params.raise_exceptions,
            )
        except BaseException as exc:
            reason = _crash_reason(exc)
            if reason is None:
                raise
            link.die(reason)
        else:
            link.die("the in-memory server stopped")
        finally:
            link.exited.set()

    async def relay() -> None:
        # The server's stream ends as its task unwinds: wait (bounded) for the task's end,
        # so the link dies with the crash's reason, not a bare "stream closed" (as stdio
        # waits for the exit status after stdout EOF).
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for item in from_server:
                if _is_shutdown_reply(item):
                    # The SDK's server answers its in-flight requests "connection closed"
                    # while it unwinds: let the task end (and the link die with the real
                    # reason) first, so no caller hears a reasonless failure.
                    with trio.move_on_after(_EXIT_GRACE):
                        await link.exited.wait()
                    if link.dead.is_set():
                        continue
                await read_writer.send(item)
        with trio.move_on_after(_EXIT_GRACE):
            await link.exited.wait()
        link.die("the in-memory server closed its stream")

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_server)
            nursery.start_soon(relay)
            try:
                yield link
            finally:
                link.die(link.death_reason or "closed by the client")
                to_server.close()
                with trio.move_on_after(_SHUTDOWN_GRACE) as scope:
                    scope.shield = True
                    await link.exited.wait()
                nursery.cancel_scope.cancel()
    finally:
        for stream in (to_server, server_inbox, server_outbox, from_server, read_writer, read_stream):
            stream.close()
