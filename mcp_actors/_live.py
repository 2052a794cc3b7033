"""One established connection and the one path every request takes over it.

A :class:`LiveSession` is created by the connection actor when ``initialize`` succeeds and
ended by it, exactly once, when the connection dies or is closed. Requests
(``tools/call``, ``tools/list``, ``ping``, ...) run in the *caller's* task through
:meth:`LiveSession.request`: the session multiplexes them, so there is nothing for a
mailbox to serialise. Each request registers itself for its duration; ending the session
fails every registered request with the end's error by cancelling its scope.

The ordering rule (DESIGN §5, "state lags failures" fixed): the actor publishes the death
(state ``error`` and its event) *before* it calls :meth:`LiveSession.end`, and a request
that notices a closed stream itself never fails on its own: it marks the transport dead
and waits to be ended by the actor. So no caller sees a failure before the state says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from mcp_actors.errors import (
    ConnectionFailed,
    McpActorsError,
    ServerProtocolError,
    ToolCallFailed,
    ToolCallTimeout,
)
from mcp_actors.transports import TransportLink

__all__ = ["LiveSession", "ProgressDeadline", "SessionEnded"]

T = TypeVar("T")

_END_GRACE = 10.0
"""Seconds a request that found the transport dead waits for the actor to end the session."""


class SessionEnded(Exception):
    """The session ended before the request was registered; nothing was sent, so ask for a fresh one."""


@attrs.define(eq=False)
class _Request:
    """One request in flight: cancelling its scope ends it, ``lost`` says it was the connection's end."""

    scope: trio.CancelScope
    lost: ConnectionFailed | None = None


@attrs.define(eq=False)
class ProgressDeadline:
    """A request deadline that progress pushes back (``resetTimeoutOnProgress``), never past a hard bound.

    Attributes:
        max_total: Seconds from registration after which the request ends however much
            progress it reports.
    """

    max_total: float
    _timeout: float = 0.0
    _start: float = 0.0
    _scope: trio.CancelScope | None = None

    def arm(self, scope: trio.CancelScope, timeout: float) -> None:
        """Bind to the request's scope at registration (``LiveSession.request`` calls it)."""
        self._scope, self._timeout, self._start = scope, timeout, trio.current_time()
        scope.deadline = min(scope.deadline, self._start + self.max_total)

    def touch(self) -> None:
        """Progress arrived: the timeout starts again from now (within the hard bound)."""
        if self._scope is not None:
            self._scope.deadline = min(trio.current_time() + self._timeout, self._start + self.max_total)

    @property
    def hit_max_total(self) -> bool:
        """Whether the hard bound, not the idle timeout, ended the request."""
        return self._scope is not None and self._scope.deadline >= self._start + self.max_total


@attrs.define(eq=False)
class LiveSession:
    """An initialized MCP session over an open transport, with the requests running on it.

    Attributes:
        session: The SDK's client session.
        link: The transport under it (death signal, stderr tail, process).
        label: The server's name, for messages.
        lost: Why the session ended (``None`` while it lives); set once, by :meth:`end`.
    """

    session: ClientSession
    link: TransportLink
    label: str
    lost: ConnectionFailed | None = None
    offered: frozenset[str] = frozenset()
    """The host callbacks declared to the server in this session's handshake (issue 12 item 1)."""
    _requests: set[_Request] = attrs.field(factory=set, init=False)
    _ended: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def requests_in_flight(self) -> int:
        """How many requests are registered right now."""
        return len(self._requests)

    def end(self, error: ConnectionFailed) -> None:
        """End the session: no request registers any more, every registered one fails with ``error``.

        Called only by the connection actor, after it has published the state. Idempotent.
        """
        if self.lost is not None:
            return
        self.lost = error
        self._ended.set()
        requests, self._requests = self._requests, set()
        for request in requests:
            request.lost = error
            request.scope.cancel()

    async def request(
        self,
        what: str,
        op: Callable[[ClientSession], Awaitable[T]],
        *,
        timeout: float,
        tool: str | None = None,
        die_on_timeout: bool = False,
        progress: ProgressDeadline | None = None,
    ) -> T:
        """Run one request in the caller's task, bounded by ``timeout`` seconds.

        Cancelling the caller cancels the request on the server too (the SDK sends
        ``notifications/cancelled``); so does the timeout.

        Args:
            what: The MCP method, for messages (``"tools/call"``).
            op: Sends the request on the session and returns its result.
            timeout: Seconds from registration to the answer.
            tool: The tool's name, for a ``tools/call``.
            die_on_timeout: A timeout means the server is dead (pings): mark the transport so.
            progress: Lets progress notifications push the deadline back (within its bound).

        Raises:
            SessionEnded: The session had already ended; nothing was sent.
            ServerConnectionLost: The connection ended during the request (or another
                ``ConnectionFailed`` given to :meth:`end`).
            ToolCallTimeout: A tool call got no answer within ``timeout``.
            ToolCallFailed: The server answered a tool call with a JSON-RPC error.
            ServerProtocolError: The server answered with an error or with something that is not MCP.
            ConnectionFailed: Another request got no answer within ``timeout``.
        """
        if self.lost is not None:
            raise SessionEnded(self.label)
        request = _Request(scope=trio.CancelScope(deadline=trio.current_time() + timeout))
        self._requests.add(request)
        if progress is not None:
            progress.arm(request.scope, timeout)
        try:
            with request.scope:
                try:
                    return await op(self.session)
                except MCPError as exc:
                    if exc.error.code != mcp_types.CONNECTION_CLOSED:
                        raise
                except Exception:
                    if not self.link.dead.is_set():
                        raise
                # The connection closed under the request. The actor declares the death (state
                # first), then ends this request with the error: wait for it, never fail alone.
                self.link.die("the connection closed")
                await trio.sleep_forever()
        except MCPError as exc:
            if tool is not None:
                raise ToolCallFailed(
                    f"server {self.label!r} rejected the call to {tool!r}: {exc.error.message} (code {exc.error.code})",
                    server=self.label,
                    tool=tool,
                ) from None
            raise ServerProtocolError(
                f"server {self.label!r}: {what} failed: {exc.error.message}", server=self.label
            ) from None
        except McpActorsError:
            raise
        except Exception as exc:
            # The reply did not parse (pydantic) or the SDK choked: the server's fault, this request only.
            raise ServerProtocolError(
                f"server {self.label!r}: {what} returned something that is not valid MCP: {type(exc).__name__}: {exc}",
                server=self.label,
            ) from exc
        finally:
            self._requests.discard(request)
        # Only two things cancel request.scope: the session's end and the deadline.
        if request.lost is not None:
            raise request.lost
        if die_on_timeout:
            # Silence means death here: let the actor declare it (state first), then report it.
            self.link.die(f"the server did not answer a {what} within {timeout:g}s")
            with trio.move_on_after(_END_GRACE):
                await self._ended.wait()
            if self.lost is not None:
                raise self.lost
        if tool is not None and progress is not None and progress.hit_max_total:
            raise ToolCallTimeout(
                f"server {self.label!r}: tool {tool!r} did not finish within its hard bound of"
                f" {progress.max_total:g}s (maxTotalTimeout), progress or not; the server was asked to"
                " cancel it (raise config.maxTotalTimeout if the tool is legitimately slow)",
                server=self.label,
                tool=tool,
                timeout=progress.max_total,
            )
        if tool is not None:
            raise ToolCallTimeout(
                f"server {self.label!r}: tool {tool!r} did not finish within {timeout:g}s; the server was asked to"
                " cancel it (raise the call timeout if the tool is legitimately slow)",
                server=self.label,
                tool=tool,
                timeout=timeout,
            )
        raise ConnectionFailed(f"server {self.label!r}: {what} timed out after {timeout:g}s", server=self.label)
