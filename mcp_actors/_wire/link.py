"""The transport seam: what every transport kind yields and how a kind is chosen.

A transport kind is one frozen params class with an ``open(label=...)`` async context
manager that yields a :class:`TransportLink` (the trio-parallel way: a small protocol
plus a registry, so a new kind needs no ``isinstance`` branch anywhere). Server records
map to params through :func:`params_for_record`, keyed by the record's server type.
"""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import attrs
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from mcp_actors._config.redact import redact_text
from mcp_actors._process.tracker import ProcessIdentity
from mcp_actors._wire.base import Wire
from mcp_actors.errors import InvalidServerConfig
from mcp_actors.naming import plural

if TYPE_CHECKING:
    from mcp_actors._config.record import McpServerRecord, ServerType

__all__ = [
    "StderrTail",
    "TransportLink",
    "TransportParams",
    "params_for_record",
    "register_transport_kind",
    "server_logger",
]

# The transports' one logger: "server x: transport closed: ..." lines keep their old name.
logger = logging.getLogger("mcp_actors._wire.transports")


def server_logger(label: str) -> logging.Logger:
    """The logger of a server's own lines (its stderr, its ``notifications/message``): ``mcp_actors.server.<name>``.

    Looked up when a line comes, never at a server's start: the logging module keeps
    every logger it made for good, and a silent server needs none.
    """
    return logging.getLogger(f"mcp_actors.server.{label}")


STREAM_BUFFER: Final = 64
_STDERR_LINES: Final = 200
_STDERR_LINE_MAX: Final = 2000


@runtime_checkable
class TransportParams(Protocol):
    """How to reach one server: a frozen value whose ``open`` yields a live link.

    Implementations are frozen ``attrs`` classes (values: comparable, hashable, safe to
    log because their reprs hide secrets). ``open`` must leave nothing behind however the
    block ends (normally, by error or by cancellation): processes are killed, streams closed.
    """

    def open(self, *, label: str) -> contextlib.AbstractAsyncContextManager[TransportLink]:
        """Open the transport for the server named ``label`` and yield its link."""
        ...

    def secret_values(self) -> tuple[str, ...]:
        """Values that must never appear in any text we produce (env values, header values, ...)."""
        ...


@attrs.define(eq=False)
class StderrTail:
    """The last lines a server wrote to stderr, bounded in count and length."""

    _lines: collections.deque[str] = attrs.field(factory=lambda: collections.deque(maxlen=_STDERR_LINES))
    _changed: trio.Event = attrs.field(factory=trio.Event)
    total_bytes: int = 0
    secrets: tuple[str, ...] = attrs.field(default=(), repr=False)

    def add(self, line: str) -> str:
        """Keep one line (cut to a sane length, secrets redacted), wake waiters, return it.

        Redacted here, once, because the tail is quoted by error messages, statuses and logs:
        a server that prints its own API key must not get it copied into ours.
        """
        if len(line) > _STDERR_LINE_MAX:
            line = line[:_STDERR_LINE_MAX] + "…"
        line = redact_text(line, self.secrets)
        self._lines.append(line)
        self._changed.set()
        return line

    async def wait_for(self, predicate: Callable[[str], bool]) -> str:
        """Wait until a kept line satisfies ``predicate``; return it.

        Unbounded by design: callers bound it (``trio.fail_after``). Fault-injection tests
        use it to wait for a server's own report ("fault: cancelled 7") without polling.
        """
        while True:
            for line in self._lines:
                if predicate(line):
                    return line
            self._changed = trio.Event()
            await self._changed.wait()

    def lines(self, n: int = 20) -> tuple[str, ...]:
        """The last ``n`` non-empty lines, oldest first."""
        return tuple(line for line in self._lines if line.strip())[-n:]


class _Closer(Protocol):
    """Anything the link closes when it dies (a stream end, a scope's canceller)."""

    def close(self) -> None: ...


@attrs.frozen
class _CancelOnDeath:
    """A link closer (see :meth:`TransportLink.die`) that cancels a scope."""

    scope: trio.CancelScope

    def close(self) -> None:
        self.scope.cancel()


def _one_principal() -> str | None:
    """The principal of a link with one fixed identity for its life (see :attr:`TransportLink.principal`)."""
    return None


@attrs.define(eq=False)
class TransportLink:
    """An open transport: the SDK stream pair and the signals the actor watches.

    Attributes:
        read_stream: Messages (or transport exceptions) from the server, for ``ClientSession``
            (``None`` when the link offers a :attr:`wire` instead).
        write_stream: Messages to the server, for ``ClientSession`` (``None`` with a wire).
        wire: The link's :class:`~mcp_actors._wire.base.Wire`, for ``WireDispatcher``:
            one write per message from the caller's task, one reader delivering to the waiter.
        dead: Set once the transport is observed dead; :attr:`death_reason` says why.
        process: The stdio server's process identity (``None`` for HTTP).
        stderr: The stdio server's stderr tail (``None`` for HTTP).
        garbage_lines: Non-JSON lines the server wrote to stdout (skipped, not fatal).
        garbage_sample: The first such line, shortened (and redacted), for error messages.
        secrets: The params' known secret values, redacted from every text the link produces.
        principal: Who requests go out as *now*: an opaque digest of the credential they carry
            (an OAuth access token), never the credential itself. Caches of ``private`` answers
            (2026-07-28 ``cacheScope``) are keyed by it. ``None`` for a link whose identity is
            fixed for its life (stdio, static headers, no auth): a new credential there means a
            new link, and every cache of a link is the link's own.
    """

    label: str
    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception] | None = None
    write_stream: MemoryObjectSendStream[SessionMessage] | None = None
    wire: Wire | None = None
    dead: trio.Event = attrs.field(factory=trio.Event)
    exited: trio.Event = attrs.field(factory=trio.Event)
    death_reason: str | None = None
    process: ProcessIdentity | None = None
    stderr: StderrTail | None = None
    garbage_lines: int = 0
    garbage_sample: str | None = None
    secrets: tuple[str, ...] = attrs.field(default=(), repr=False)
    principal: Callable[[], str | None] = attrs.field(default=_one_principal, repr=False)
    abandoned: bool = False
    """The session never finished connecting: the transport's close kills at once, with no
    graceful close first (nothing was established to end gracefully, and the connect
    timeout's error must not wait for one)."""
    _closers: list[_Closer] = attrs.field(factory=list)
    """Closed when the link dies: the session's read stream, the stdio reader's cancel scope."""

    def die(self, reason: str) -> None:
        """Record the first death reason (secrets redacted), wake watchers, end the session's read stream."""
        if self.death_reason is None:
            reason = redact_text(reason, self.secrets)
            self.death_reason = reason
            logger.info("server %s: transport closed: %s", self.label, reason)
        self.dead.set()
        for stream in self._closers:
            stream.close()

    def cancel_on_death(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` when the link dies (at once if it is dead already).

        How a task that waits on the link's answers, not on :attr:`dead`, learns of its
        death without a watcher task: the stdio reader, and the session task's first
        listings (:mod:`mcp_actors._connection.actor`).
        """
        self._closers.append(_CancelOnDeath(scope))
        if self.dead.is_set():
            scope.cancel()

    def redact(self, text: str) -> str:
        """``text`` with this link's secrets (and secret-looking parts) replaced by ``***``."""
        return redact_text(text, self.secrets)

    def stderr_tail(self, n: int = 20) -> tuple[str, ...]:
        """The last stderr lines (empty for HTTP)."""
        return self.stderr.lines(n) if self.stderr is not None else ()

    def describe_garbage(self) -> str:
        """A note about non-JSON stdout output, or ``""`` when there was none."""
        if not self.garbage_lines:
            return ""
        return (
            f"the server wrote {plural(self.garbage_lines, 'non-JSON line')} to stdout "
            f"(first: {self.garbage_sample!r}); stdout must carry only JSON-RPC — log to stderr"
        )


_KINDS: dict[str, Callable[[McpServerRecord], TransportParams]] = {}


def register_transport_kind(
    server_type: ServerType | str, from_record: Callable[[McpServerRecord], TransportParams]
) -> None:
    """Say how records of ``server_type`` are reached (a later registration replaces an earlier one).

    Args:
        server_type: The record's ``type`` (``"stdio"``, ``"sse"``, ``"http"``, ...).
        from_record: Builds the transport params from a validated record.
    """
    _KINDS[str(server_type)] = from_record


def params_for_record(record: McpServerRecord) -> TransportParams:
    """The transport params a server record implies, through its kind's registered builder.

    Raises:
        InvalidServerConfig: No transport kind is registered for the record's type.
    """
    try:
        build = _KINDS[str(record.type)]
    except KeyError:
        known = ", ".join(sorted(_KINDS)) or "none"
        raise InvalidServerConfig(
            f"server {record.name!r}: no transport for type {str(record.type)!r} (known: {known}); fix its type",
            server=record.name,
            field="type",
        ) from None
    return build(record)
