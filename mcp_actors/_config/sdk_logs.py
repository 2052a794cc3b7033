"""The MCP SDK's log records about our connections: re-emitted under ``mcp_actors.sdk.*`` at DEBUG.

Why: the SDK's client modules log on loggers of their own (``mcp.client.sse``,
``mcp.client.auth.oauth2``, ...) with no handler, and log a broken SSE stream or a failed
OAuth flow at ERROR with a traceback. In a host that never configured logging, Python's
last-resort handler printed those to stderr, although the failure had already reached
the caller as a typed error (and the connection's state as an event). A library must not
configure the root logger, nor silence another library's loggers for the whole process.

So the rule is narrow: while the SDK works for a connection of ours (inside
:func:`sdk_logs_owned`: a transport, a request, an OAuth flow), each record logged on one
of :data:`SDK_LOGGERS` is taken off the SDK's logger and logged again on
``mcp_actors.sdk.<its name>`` at DEBUG (its text redacted, the SDK's level named in it),
where our ``NullHandler`` keeps an unconfigured host silent and a configured host finds
it. The same loggers used by the host's own SDK code, outside our connections, are
untouched.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Final

from mcp_actors._config.redact import SecretFilter

__all__ = ["SDK_LOGGERS", "SDK_LOGGER_PREFIX", "SDK_LOGS_OWNED", "install_sdk_log_routing", "sdk_logs_owned"]

SDK_LOGGER_PREFIX: Final = "mcp_actors.sdk"
"""Where the SDK's records about our connections are logged again: ``mcp_actors.sdk.<SDK logger name>``."""

SDK_LOGGERS: Final = (
    "client",  # mcp/client/session.py logs on getLogger("client")
    "mcp.client.auth.oauth2",
    "mcp.client.auth.utils",
    "mcp.client.auth.extensions.client_credentials",
    "mcp.client.caching",
    "mcp.client.client",
    "mcp.client.session",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.shared.direct_dispatcher",
    "mcp.shared.dispatcher",
    "mcp.shared.jsonrpc_dispatcher",
    "mcp.shared.session",
    "mcp.shared.tool_name_validation",
)
"""The SDK's client-side loggers our connections drive (a logger's filter sees only its own records)."""

SDK_LOGS_OWNED: Final[contextvars.ContextVar[bool]] = contextvars.ContextVar("mcp_actors_sdk_logs_owned", default=False)
"""True while the SDK works for a connection of ours; hot paths set and reset it directly."""
_REDACT: Final = SecretFilter()


class _Reroute(logging.Filter):
    """Takes a record about one of our connections off the SDK's logger and logs it again on ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not SDK_LOGS_OWNED.get():
            return True
        target = logging.getLogger(f"{SDK_LOGGER_PREFIX}.{record.name}")
        if target.isEnabledFor(logging.DEBUG):
            again = logging.makeLogRecord(record.__dict__)
            if record.levelno > logging.DEBUG:
                again.msg = f"{record.getMessage()} (the SDK logged it at {record.levelname})"
                again.args = ()
            again.name, again.levelno, again.levelname = target.name, logging.DEBUG, "DEBUG"
            _REDACT.filter(again)
            target.handle(again)
        return False


_ROUTE: Final = _Reroute()


def install_sdk_log_routing() -> None:
    """Put the routing filter on every logger of :data:`SDK_LOGGERS` (idempotent).

    Asking for a logger by name creates it before the SDK module that uses it is imported
    (the module's own ``getLogger`` then returns the same object), so a lazily imported
    module (``mcp.client.sse``) is covered from its first record.
    """
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _ROUTE not in logger.filters:
            logger.addFilter(_ROUTE)


@contextlib.contextmanager
def sdk_logs_owned() -> Iterator[None]:
    """While the block runs (and in tasks it starts), the SDK's records are about our connection."""
    token = SDK_LOGS_OWNED.set(True)
    try:
        yield
    finally:
        SDK_LOGS_OWNED.reset(token)


install_sdk_log_routing()
