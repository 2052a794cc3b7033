"""A gateway replica holds its whole table of idle sessions (10,000, the cap) within 1 GiB of memory.

A real gateway process (a runtime with no servers, :func:`serve_http`), so its resident set is
its own; the sessions are opened with minimal raw HTTP ``initialize`` requests
(``benchmarks/_sessions.py``), not an SDK client each. The session after the cap is refused
with 503, so the bound holds whatever a client opens.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._sessions import INITIALIZE, open_sessions, wait_settled

CAP = 10_000
BOUND_BYTES = 1 << 30
SERVE = """
import sys, trio
from mcp_actors.runtime import open_runtime
from mcp_actors.serve import serve_http

async def main():
    async with open_runtime(sys.argv[1]) as runtime, trio.open_nursery() as nursery:
        gateway = await nursery.start(serve_http, runtime.service)
        print(gateway.url, flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)
        await gateway.stop(1.0)

trio.run(main)
"""


@pytest.fixture
def gateway_process(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """``(pid, url)`` of a gateway process over an empty runtime; stopped by closing its stdin."""
    config = tmp_path / "cfg.json"
    config.write_text('{"mcpServers": []}')
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(config)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        yield proc.pid, url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _one_more(url: str) -> int:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.request(
            "POST",
            parts.path,
            json.dumps(INITIALIZE),
            {"content-type": "application/json", "accept": "application/json"},
        )
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.timeout(600)
def test_ten_thousand_idle_sessions_fit_in_one_gib(gateway_process: tuple[int, str]) -> None:
    """10,000 sessions open: the process stays under 1 GiB resident, and the next session is refused."""
    pid, url = gateway_process
    before = wait_settled(pid)
    assert len(set(open_sessions(url, CAP, initialized=False))) == CAP
    after = wait_settled(pid)
    assert after <= BOUND_BYTES, f"{after / 2**20:.0f} MiB resident with {CAP} sessions"
    per_session = (after - before) / CAP
    print(f"RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB: {per_session / 1024:.2f} KiB per idle session")
    assert _one_more(url) == 503
