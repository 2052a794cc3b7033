"""``mcp-actors serve`` with inbound auth as a real process: the config file's ``gateway.auth`` and the key file.

What only a process shows: the command reads ``gateway.auth`` from the config file, opens the
key file the ``serve keys`` commands write (the same state directory), and refuses a request
without a key while serving one with it. The checks themselves are tested in process
(``tests/serve/test_auth_keys.py``, ``test_auth_oauth.py``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio
from clikit import invoke
from testkit import cli_env

_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]
BOUND = 120.0
"""Start-up, a request and the stop, on a loaded two-core machine."""
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def test_serve_takes_gateway_auth_from_the_config_file_and_keys_from_serve_keys(tmp_path: Path) -> None:
    """A key made by `serve keys add` opens the gateway that `gateway.auth.apiKeys` protects; no key: 401."""
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"version": 1, "mcpServers": [], "gateway": {"auth": {"apiKeys": True}}}))
    added = await trio.to_thread.run_sync(invoke, config, "serve", "keys", "add", "ci")  # invoke runs its own trio
    assert added.rc == 0, added.stderr
    key = added.stdout.strip()
    process = await trio.lowlevel.open_process(
        [*CLI, "serve", "--port", "0", "--grace", "1", "--config", str(config)],
        stdout=subprocess.PIPE,
        env=cli_env(config),
    )
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(BOUND):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, "mcp-actors serve ended before printing its URL"
                line += chunk
        url = line.decode().strip()
        headers = {"accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(timeout=BOUND) as http:
            refused = await http.post(url, json=INIT, headers=headers)
            served = await http.post(url, json=INIT, headers={**headers, "authorization": f"Bearer {key}"})
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert served.status_code == 200 and served.json()["result"]["protocolVersion"] == "2025-11-25"
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(BOUND):
            assert await process.wait() == 0


def test_serve_refuses_a_bad_auth_setting_before_serving(tmp_path: Path) -> None:
    """A malformed gateway.auth or config file, or OAuth options without an issuer: exit 2, nothing served."""
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"version": 1, "mcpServers": [], "gateway": {"auth": {"oauth": {"scopes": ["x"]}}}}))
    bad = invoke(config, "serve", "--port", "0")
    assert bad.rc == 2 and "gateway.auth.oauth" in bad.stderr and "issuer" in bad.stderr
    no_issuer = invoke(config, "serve", "--port", "0", "--oauth-scope", "mcp")
    assert no_issuer.rc == 2 and "need --oauth-issuer" in no_issuer.stderr
    unknown = invoke(config, "serve", "--port", "0", "--oauth-issuer", "ftp://idp")
    assert unknown.rc == 2 and "issuer must be an http(s) URL" in unknown.stderr
    config.write_text('{"version": 1, "mcpServers": [], "gateway": {"auth": {"apiKeys": true}}')  # cut short
    broken = invoke(config, "serve", "--port", "0")
    assert broken.rc == 2 and "cfg.json" in broken.stderr  # never served without the auth it asked for
