"""Idle sessions opened with raw HTTP, and the memory of the process tree that holds them.

What a gateway holds per idle session is read as the growth of its processes' RSS while a
client opens ``N`` sessions and leaves them: each an ``initialize`` (and, by default, its
``notifications/initialized``), a few keep-alive connections at a time, from threads of the
standard library's ``http.client`` (no SDK client: its own cost would be the measurement's).
Standard library only, so a test can use it too.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import time
import urllib.parse
from collections.abc import Iterable

__all__ = ["INITIALIZE", "open_sessions", "tree_rss", "wait_settled"]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench-sessions", "version": "1.0"},
    },
}
_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
_BODY = json.dumps(INITIALIZE).encode()
_INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()


def _open_some(url: str, count: int, initialized: bool) -> list[str]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=60)
    ids: list[str] = []
    try:
        for _ in range(count):
            conn.request("POST", parts.path, _BODY, _HEADERS)
            response = conn.getresponse()
            response.read()
            sid = response.getheader("mcp-session-id")
            if response.status != 200 or not sid:
                raise RuntimeError(f"initialize answered {response.status} without a session id")
            ids.append(sid)
            if initialized:
                headers = {**_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
                conn.request("POST", parts.path, _INITIALIZED, headers)
                done = conn.getresponse()
                done.read()
                if done.status not in (200, 202):
                    raise RuntimeError(f"notifications/initialized answered {done.status}")
    finally:
        conn.close()
    return ids


def open_sessions(url: str, count: int, *, connections: int = 8, initialized: bool = True) -> list[str]:
    """Open ``count`` sessions at ``url`` over ``connections`` keep-alive connections; their ids.

    Raises:
        RuntimeError: An ``initialize`` was not answered with 200 and a session id.
    """
    shares = [count // connections + (1 if i < count % connections else 0) for i in range(connections)]
    with concurrent.futures.ThreadPoolExecutor(connections) as pool:
        futures = [pool.submit(_open_some, url, share, initialized) for share in shares if share]
        return [sid for future in futures for sid in future.result()]


def _children(pid: int) -> Iterable[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its descendants (Linux ``/proc``; 0 for a gone one)."""
    total = 0
    stack = [pid]
    page = os.sysconf("SC_PAGE_SIZE")
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/statm") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            continue
        stack.extend(_children(current))
    return total


def wait_settled(pid: int, *, period: float = 0.2, rounds: int = 3, limit: float = 10.0) -> int:
    """The tree's RSS once it stops moving (``rounds`` equal reads ``period`` apart, at most ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    last, same = tree_rss(pid), 0
    while same < rounds and time.monotonic() < deadline:
        time.sleep(period)
        now = tree_rss(pid)
        same = same + 1 if abs(now - last) < 64 * 1024 else 0
        last = now
    return last
