"""The mcp-actors command answers what a server asks: off a terminal (or with --no-input) it declines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import invoke

pytestmark = pytest.mark.usefixtures("servers_in_memory")


@pytest.mark.parametrize("flags", [[], ["--no-input"]], ids=["not-a-terminal", "no-input"])
def test_an_elicitation_from_a_tool_is_declined_off_a_terminal(tmp_path: Path, flags: list[str]) -> None:
    """A tool that asks the user gets a proper decline (not an error) from the CLI, and the call completes."""
    done = invoke(tmp_path / "cfg.json", *flags, "call", "demo/ask_user", "--json")
    assert done.rc == 0, done.stderr
    document = done.json()
    text = "".join(item.get("text", "") for item in document["content"])
    assert json.loads(text)["action"] == "decline"


def test_sampling_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    """A tool that samples the host's model learns that the CLI has no model, in words."""
    done = invoke(tmp_path / "cfg.json", "call", "demo/ask_model", "--args", '{"prompt": "hi"}', "--json")
    combined = done.stdout + done.stderr
    assert "has no language model" in combined and "sampling_handler" in combined
