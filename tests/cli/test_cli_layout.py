"""What the tables and summary lines look like: whole words at 80 columns, right plurals, an import's source.

Run in this process (``clikit.invoke``) at ``COLUMNS=80``, the width of a default terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clikit import invoke, write_config

pytestmark = pytest.mark.usefixtures("servers_in_memory")

NARROW = {"COLUMNS": "80"}


def _cells(output: str) -> list[str]:
    """Every table cell's text on every line (borders dropped, each cell stripped)."""
    return [cell.strip() for line in output.splitlines() for cell in re.split(r"[│┃]", line) if cell.strip()]


def test_an_imported_server_says_it_was_imported_not_added_by_hand(tmp_path: Path) -> None:
    """servers import records installSource "unknown" (it came from another host's file); servers add says "manual"."""
    config = write_config(tmp_path / "mcp-config.json")
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps({"mcpServers": {"fetched": {"command": "uvx", "args": ["mcp-server-fetch"]}}}))
    assert invoke(config, "servers", "import", str(source)).rc == 0
    assert invoke(config, "servers", "add", "typed", "--command", "typed-server").rc == 0
    records = {s["name"]: s for s in invoke(config, "servers", "list", "--json").json()["servers"]}
    assert records["fetched"]["installSource"] == "unknown"
    assert records["typed"]["installSource"] == "manual"
    shown = invoke(config, "servers", "show", "fetched")
    assert re.search(r"source\s+unknown", shown.stdout), shown.stdout
