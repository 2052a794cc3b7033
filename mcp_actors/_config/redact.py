"""The one home of secret redaction: URLs, secret-looking text, and a record's known secrets.

Secrets reach text we produce by more paths than a record's ``repr``: a URL with
``user:pass@`` or ``?key=...`` (in a repr, an error, the SDK's DEBUG "connecting to" line),
a server that prints its own API key to stderr (our error messages quote the stderr tail),
an exception text that quotes a request. Every such path runs its text through
:func:`redact_text` with the secrets it knows (env values, header values), and the SDK's
and httpx's loggers get :class:`SecretFilter`, which knows the secrets of every open
transport.

Redaction replaces with ``***``; it never drops a line, so the shape of a message (and
what a person needs to recognise the server: scheme, host, port, path) stays.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Final

__all__ = [
    "MIN_SECRET_LENGTH",
    "SecretFilter",
    "install_log_filter",
    "redact_text",
    "redact_url",
    "registered_secrets",
]

MIN_SECRET_LENGTH: Final = 6
"""Known secret values shorter than this are not searched for in text (``"1"`` or ``"true"``
would mangle every line and protect nothing)."""

MASK: Final = "***"

_URL: Final = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>`]+")
# The words of a name that mark its value as secret (names are split on ``_``, ``-``, ``.``
# and camelCase: ``apiKey``, ``X-Api-Key``, ``db_password``, ``authToken``, ``sig``).
_SECRET_WORDS: Final = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "apikey",
        "key",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "signature",
        "sig",
        "cookie",
        "session",
    }
)
# ``api_key=abc``, ``"password": "abc"``, ``X-Api-Key: abc``: a name, then its value.
_ASSIGNMENT: Final = re.compile(r"(\b[A-Za-z][\w.-]*)([\"']?[ \t]*[=:][ \t]*[\"']?)(?!\*\*\*)([^\s\"'&,;]+)")
_NAME_WORD: Final = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# ``Bearer abc``, ``Basic abc`` (an Authorization value without its header name).
_SCHEME_TOKEN: Final = re.compile(r"(?i)\b(bearer|basic|token)(\s+)(?!\*\*\*)([A-Za-z0-9._~+/=-]{6,})")

_LOGGER_PREFIXES: Final = ("mcp", "mcp_actors", "httpx", "httpx2", "httpcore", "sse_starlette", "uvicorn")


def redact_url(url: str) -> str:
    """Return ``url`` fit for logs, reprs and error messages.

    User info (``user:password@``) and the query string often carry tokens, so both are
    replaced by ``***``; the fragment is dropped. Scheme, host, port and path stay, because
    they are what a person needs to recognise the server.

    Args:
        url: Any string; it need not be a valid URL.

    Returns:
        The redacted URL, or ``'<unparsable url>'`` when it cannot be split at all.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rpartition("@")[2]
        query = MASK if parts.query else ""
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<unparsable url>"


def _secret_parts(values: Iterable[str]) -> list[str]:
    """Each known value, and each long word of it (``Bearer abc`` leaks as ``abc`` too), longest first."""
    parts: set[str] = set()
    for value in values:
        if len(value) >= MIN_SECRET_LENGTH:
            parts.add(value)
        parts.update(word for word in value.split() if len(word) >= MIN_SECRET_LENGTH)
    return sorted(parts, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Return ``text`` with known secret values and secret-looking parts replaced by ``***``.

    Replaced: every known value (and every word of it) at least :data:`MIN_SECRET_LENGTH`
    long; URL user info and query strings (as :func:`redact_url`); values assigned to a
    secret-looking name (``api_key=...``, ``"token": "..."``); ``Bearer``/``Basic`` tokens.

    Args:
        text: Any text we are about to show, log or raise.
        secrets: Values known to be secret (a record's env values and header values).
    """
    for value in _secret_parts(secrets):
        text = text.replace(value, MASK)
    text = _URL.sub(lambda match: redact_url(match.group(0)), text)
    text = _SCHEME_TOKEN.sub(lambda match: match.group(1) + match.group(2) + MASK, text)
    return _ASSIGNMENT.sub(_mask_assignment, text)


def _is_secret_name(name: str) -> bool:
    """A name whose value is a secret: its last word says so (``db_password``, ``authToken``).

    Only the last word counts: ``AuthorizationRequired`` (an error's name) and
    ``token_count`` name things that are not secrets.
    """
    words = [word.lower() for word in _NAME_WORD.findall(name)]
    if not words:
        return False
    return words[-1] in _SECRET_WORDS or "".join(words[-2:]) == "apikey"


def _mask_assignment(match: re.Match[str]) -> str:
    name, separator, value = match.groups()
    if value.startswith("//") or not _is_secret_name(name):
        return match.group(0)  # ``http://``, or a name that is not a secret's
    return name + separator + MASK


# ----------------------------------------------------------------------------- logging

_lock = threading.Lock()
_active: collections.Counter[str] = collections.Counter()


@contextmanager
def registered_secrets(values: Iterable[str]) -> Iterator[None]:
    """Make :class:`SecretFilter` redact ``values`` for the length of the block.

    Transports register their params' secrets while they are open, because the SDK and
    httpx log on their own loggers, far from any record.
    """
    parts = _secret_parts(values)
    with _lock:
        _active.update(parts)
    try:
        yield
    finally:
        with _lock:
            _active.subtract(parts)
            for part in parts:
                if _active[part] <= 0:
                    del _active[part]


class SecretFilter(logging.Filter):
    """A logging filter that redacts every record's message (never drops a record).

    The message is formatted once, redacted with the secrets of every open transport, and
    stored back without arguments; a traceback (``exc_info``) is formatted and redacted too.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always keep it."""
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's business, not ours
            return True
        with _lock:
            secrets = list(_active)
        redacted = redact_text(message, secrets)
        if redacted != message:
            record.msg = redacted
            record.args = ()
        if record.exc_info and not record.exc_text:
            # Formatters reuse a cached exc_text: fill it, redacted, so tracebacks are covered too.
            record.exc_text = redact_text(_FORMATTER.formatException(record.exc_info), secrets)
        return True


_FORMATTER: Final = logging.Formatter()


_FILTER: Final = SecretFilter()
_loggers_seen = 0


def install_log_filter() -> None:
    """Attach :class:`SecretFilter` to the MCP SDK's and the HTTP stack's loggers (idempotent).

    A logger's filters see only the records logged on that very logger, so the filter goes on
    every existing logger under those names; it is called again whenever a transport opens,
    which catches loggers created by a late import.
    """
    global _loggers_seen
    manager = logging.Logger.manager
    # Loggers are never removed and a new name is added at the end of the dict: an unchanged
    # count means no logger is new since the last pass, and a pass looks only at the names
    # after those it saw (a server's first stderr line adds its logger, mcp_actors.server.<name>:
    # a scan of every logger at each such start cost ~1,200 look-ups for 20 servers). A placeholder
    # (a parent made for a child) is turned into its logger by the look-up, so no name a pass
    # has seen can become a logger later without the filter. A shorter dict (someone removed
    # loggers) is scanned whole.
    if len(manager.loggerDict) == _loggers_seen:
        return
    names = list(manager.loggerDict)
    start = _loggers_seen if len(names) > _loggers_seen else 0
    for name in names[start:]:
        if name.split(".", 1)[0] not in _LOGGER_PREFIXES:
            continue
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    _loggers_seen = len(names)
