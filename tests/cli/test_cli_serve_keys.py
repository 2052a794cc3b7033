"""`mcp-actors serve keys`: the gateway's API keys made, listed and removed on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import invoke

from mcp_actors.serve._auth_keys import KEY_PREFIX, key_digest


def test_serve_keys_add_list_rm_on_the_command_line(tmp_path: Path) -> None:
    """`keys add` prints the key once on stdout; `keys list` never shows it; `keys rm` removes it."""
    config = tmp_path / "cfg.json"
    env = {"MCP_ACTORS_STATE_DIR": str(tmp_path / "state")}
    added = invoke(config, "serve", "keys", "add", "ci", "--profile", "github", "--expires", "30d", env=env)
    assert added.rc == 0, added.stderr
    key = added.stdout.strip()
    assert key.startswith(KEY_PREFIX) and "\n" not in key
    assert "shown only now" in added.stderr and key not in added.stderr
    listed = invoke(config, "serve", "keys", "list", "--json", env=env)
    assert listed.rc == 0 and key not in listed.stdout
    (entry,) = json.loads(listed.stdout)["keys"]
    assert entry["name"] == "ci" and entry["profile"] == "github"
    assert 29 * 86400 < entry["expiresAt"] - entry["createdAt"] <= 30 * 86400
    plain = invoke(config, "serve", "keys", "list", env=env)
    assert "ci\tprofile=github" in plain.stdout and key not in plain.stdout
    stored = (tmp_path / "state" / "gateway-keys.json").read_text()
    assert key_digest(key) in stored and key not in stored
    again = invoke(config, "serve", "keys", "add", "ci", env=env)
    assert again.rc == 2 and "exists already" in again.stderr
    bad = invoke(config, "serve", "keys", "add", "x", "--expires", "soon", env=env)
    assert bad.rc == 2 and "--expires takes a duration" in bad.stderr
    assert invoke(config, "serve", "keys", "rm", "ci", env=env).rc == 0
    missing = invoke(config, "serve", "keys", "rm", "ci", env=env)
    assert missing.rc == 2 and "no API key named 'ci'" in missing.stderr
