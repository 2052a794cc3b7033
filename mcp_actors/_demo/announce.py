"""The one-line announcement an HTTP server writes to stderr once it accepts connections.

Servers started with ``--port 0`` bind a free port chosen by the kernel, so whoever
started them cannot know the URL in advance. The demo server and the fault server both
write exactly one line ``mcp-actors: listening on <url>`` to stderr when their socket
accepts connections; :func:`mcp_actors.testing.serve_http` waits for it.

Standard library only: the stdio fault server imports this package and must start fast.
"""

from __future__ import annotations

ANNOUNCE_PREFIX = "mcp-actors: listening on "
"""What the announcement line starts with; the URL follows it up to the end of the line."""


def format_announce(url: str) -> str:
    """Return the announcement line for ``url``, without the trailing newline."""
    return f"{ANNOUNCE_PREFIX}{url}"


def parse_announce(line: str) -> str | None:
    """Return the URL announced by ``line``, or ``None`` when it is not an announcement.

    Args:
        line: One stderr line, with or without its line ending.
    """
    text = line.rstrip("\r\n")
    if not text.startswith(ANNOUNCE_PREFIX):
        return None
    url = text[len(ANNOUNCE_PREFIX) :].strip()
    return url or None


def http_url(host: str, port: int, path: str) -> str:
    """Return ``http://host:port/path``, bracketing an IPv6 literal host.

    Args:
        host: The address the socket is bound to (``127.0.0.1``, ``::1``, a name).
        port: The bound port.
        path: The endpoint path, starting with ``/``.
    """
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}{path}"
