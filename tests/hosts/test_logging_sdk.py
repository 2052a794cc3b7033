"""The SDK's log records about our connections reach a host only through our loggers.

The SDK logs a failed OAuth flow ("OAuth flow error") at ERROR with a traceback, on its own
loggers, which have no handler: in a host that never configured logging, Python's last
resort printed them to stderr. A real subprocess host, a real SSE demo server killed
mid-stream and the test authorization server refusing registration: an unconfigured host
gets nothing on stderr; a host logging at DEBUG gets the records under ``mcp_actors.sdk.*``,
redacted.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import forkrun

SECRET = "sse-query-secret-4711"

_HOST = textwrap.dedent(
    """
    import json, logging, os, signal, sys
    import trio
    from mcp_actors import open_runtime
    from mcp_actors._auth.token_store import MemoryTokenStore
    from mcp_actors.errors import McpActorsError
    from mcp_actors.testing import demo_server_command, serve_http

    if sys.argv[2] == "debug":
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")

    async def browser(server_id, url):
        raise AssertionError("registration fails first")

    async def call(rt, server, bound):
        try:
            with trio.fail_after(bound):
                await rt.service.call_tool(server, "echo", {"text": "x"})
            print("ok", server)
        except McpActorsError as exc:
            print("typed", type(exc).__name__)

    async def main(path):
        async with open_runtime(
            path, sweep_ledger=False, connect_on_add=False,
            authorization_handler=browser, token_store=MemoryTokenStore(),
        ) as rt:
            async with serve_http(demo_server_command("--transport", "sse")) as sse:
                url = sse.url + "?token=" + sys.argv[3]
                await rt.service.add({"name": "sse", "type": "sse", "config": {"url": url, "callTimeout": 10}})
                await call(rt, "sse", 30)
                os.killpg(sse.process.pid, signal.SIGKILL)  # mid-stream: the GET stream breaks
                await call(rt, "sse", 30)
            argv = [sys.executable, "-m", "mcp_actors.testing._oauth_server", "--options", '{"dcr": false}']
            async with serve_http(argv) as guarded:
                await rt.service.add({"name": "guarded", "type": "http", "config": {"url": guarded.url}})
                await call(rt, "guarded", 30)

    trio.run(main, sys.argv[1])
    """
)


def run_host(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """Run the host script (``mode``: ``plain`` configures no logging, ``debug`` basicConfig at DEBUG)."""
    host = tmp_path / "host.py"
    host.write_text(_HOST)
    # ``python host.py CONFIG MODE SECRET``, forked from an interpreter that has the MCP SDK imported (forkrun)
    return forkrun.run_script(
        host, str(tmp_path / "cfg.json"), mode, SECRET, env=dict(os.environ), cwd=tmp_path, bound=180
    )


def test_an_unconfigured_host_gets_nothing_on_stderr_from_sse_and_oauth_failures(tmp_path: Path) -> None:
    """A broken SSE stream and a failed OAuth flow: typed errors for the caller, an empty stderr."""
    done = run_host(tmp_path, "plain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "sse", "typed", "ServerConnectionLost", "typed", "AuthorizationFailed"]
    assert done.stderr == ""


def test_a_host_logging_at_debug_sees_the_records_under_our_names_redacted(tmp_path: Path) -> None:
    """At DEBUG the SDK's records appear under ``mcp_actors.sdk.*`` (never its own names), with no secret."""
    done = run_host(tmp_path, "debug")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    sdk_lines = [line for line in lines if line.startswith("DEBUG mcp_actors.sdk.")]
    oauth = [
        line for line in sdk_lines if line.startswith("DEBUG mcp_actors.sdk.mcp.client.auth.oauth2: OAuth flow error")
    ]
    assert oauth and "(the SDK logged it at ERROR)" in oauth[0], sdk_lines
    # Legacy SSE runs on our own HTTP client: the break is reported by our transport, under
    # our name, as one line (no SDK record, no traceback).
    sse = [line for line in lines if line.startswith("INFO mcp_actors.") and "server sse: transport closed" in line]
    assert sse, lines
    for name in ("mcp.client.sse", "mcp.client.auth.oauth2"):
        assert not [line for line in lines if line.split(" ", 2)[1:2] == [f"{name}:"]]
    assert SECRET not in done.stderr
