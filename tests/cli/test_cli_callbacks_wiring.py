"""The mcp-actors command answers what a server asks: off a terminal (or with --no-input) it declines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]


@pytest.mark.parametrize("flags", [[], ["--no-input"]], ids=["not-a-terminal", "no-input"])
def test_an_elicitation_from_a_tool_is_declined_off_a_terminal(tmp_path: Path, flags: list[str]) -> None:
    """A tool that asks the user gets a proper decline (not an error) from the CLI, and the call completes."""
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "cfg.json")}
    done = subprocess.run(
        [*CLI, *flags, "call", "demo/ask_user", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    text = "".join(item.get("text", "") for item in document["content"])
    assert json.loads(text)["action"] == "decline"


def test_sampling_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    """A tool that samples the host's model learns that the CLI has no model, in words."""
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "cfg.json")}
    done = subprocess.run(
        [*CLI, "call", "demo/ask_model", "--args", '{"prompt": "hi"}', "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    combined = done.stdout + done.stderr
    assert "has no language model" in combined and "sampling_handler" in combined


_ADD_PROBE = """
import sys
from mcp_actors.cli._app import main
code = main(sys.argv[1:])
print("runtime imported:", "mcp_actors.runtime" in sys.modules, "exit:", code)
"""


def test_servers_add_edits_the_config_without_starting_a_runtime(tmp_path: Path) -> None:
    """`servers add` writes through the store's rules without a supervision tree; a taken name is still refused."""
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "cfg.json"), "COLUMNS": "200"}
    argv = [sys.executable, "-c", _ADD_PROBE, "servers", "add", "probe", "--command", "true"]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert first.stdout.strip().endswith("runtime imported: False exit: 0"), first.stdout + first.stderr
    saved = json.loads((tmp_path / "cfg.json").read_text())
    assert [s["name"] for s in saved["mcpServers"]] == ["demo", "probe"]
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert "exit: 2" in again.stdout and "already exists" in again.stderr, again.stdout + again.stderr
