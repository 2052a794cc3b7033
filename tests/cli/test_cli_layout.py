"""What the tables and summary lines look like: whole words at 80 columns, right plurals, an import's source.

Run in this process (``clikit.invoke``) at ``COLUMNS=80``, the width of a default terminal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from clikit import invoke, stdio, write_config

from mcp_actors.testing import fault_server_command

pytestmark = pytest.mark.usefixtures("servers_in_memory")

NARROW = {"COLUMNS": "80"}


def _cells(output: str) -> list[str]:
    """Every table cell's text on every line (borders dropped, each cell stripped)."""
    return [cell.strip() for line in output.splitlines() for cell in re.split(r"[│┃]", line) if cell.strip()]


def test_tables_at_80_columns_keep_names_and_ids_whole(tmp_path: Path) -> None:
    """At 80 columns a table wraps its long text between words; a name or a tool id is never cut."""
    config = write_config(
        tmp_path / "mcp-config.json",
        stdio("filesystem-tools", fault_server_command(), trusted=True),
        stdio("github-enterprise-server", ["npx", "-y", "server-github", "--url", "https://example.com/api/v3"]),
    )
    listed = invoke(config, "servers", "list", env=NARROW)
    assert listed.rc == 0, listed.stderr
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    cells = _cells(listed.stdout)
    assert "github-enterprise-server" in cells and "filesystem-tools" in cells, listed.stdout
    assert "TRUSTED" in cells and "SOURCE" in cells
    tools = invoke(config, "tools", "--server", "filesystem-tools", env=NARROW)
    assert tools.rc == 0, tools.stderr
    assert max(len(line) for line in tools.stdout.splitlines()) <= 80
    cells = _cells(tools.stdout)
    for name in ("echo", "add", "sleep", "big", "fail"):
        assert f"mcp__filesystem_tools__{name}" in cells, tools.stdout
    words = {w for cell in cells for w in cell.split()}
    # The descriptions wrap between words: each of their words is whole on some line.
    for word in ("unchanged.", "progress", "(isError:", "results."):
        assert word in words, tools.stdout


def test_counts_read_in_the_right_number(tmp_path: Path) -> None:
    """One tool, one server, one call: no "1 tools", "server(s)" or "1 calls were"."""
    config = write_config(tmp_path / "mcp-config.json", stdio("fs", fault_server_command(), trusted=True))
    tools = invoke(config, "tools", "--server", "fs")
    assert "5 tools from 1 server" in tools.stdout and "(s)" not in tools.stdout, tools.stdout
    tested = invoke(config, "test", "fs")
    assert "  5 tools: echo" in tested.stdout and "(s)" not in tested.stdout, tested.stdout
    listed = invoke(config, "servers", "tools", "fs")
    assert "server fs: 5 tools" in listed.stdout and "(s)" not in listed.stdout, listed.stdout
    source = tmp_path / "two.json"
    source.write_text(json.dumps({"mcpServers": {"ok": {"command": "x"}, "bad": {"command": 42}}}), encoding="utf-8")
    imported = invoke(config, "servers", "import", str(source))
    assert "1 of 2 servers was rejected" in imported.stderr, imported.stderr

    from mcp_actors.stress._report import _late_text

    late: dict[str, Any] = {"late_sends": 1, "max_send_lag_ms": 12.0}
    assert _late_text(late).startswith("1 call was sent more than 10 ms after its intended time")
    assert _late_text({**late, "late_sends": 3}).startswith("3 calls were sent more than 10 ms after their intended")


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
