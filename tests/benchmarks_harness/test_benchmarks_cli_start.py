"""``benchmarks.cli_start`` runs end to end: every command and the floor measured, a table, a verdict.

Two rounds, so the whole benchmark (each command's exit status checked, the 90th
percentile, the JSON document) runs in a few seconds; what the numbers are is the
benchmark's business, not this test's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.cli_start import COMMANDS, failures

ROOT = Path(__file__).resolve().parents[2]


def test_cli_start_measures_every_command_against_the_floor(tmp_path: Path) -> None:
    out = tmp_path / "cli_start.json"
    env = {**os.environ, "MCP_ACTORS_STATE_DIR": str(tmp_path), "MCP_ACTORS_CONFIG": str(tmp_path / "c.json")}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cli_start", "--rounds", "2", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
    document = json.loads(out.read_text())
    assert document["benchmark"] == "cli_start" and document["rounds"] == 2
    keys = [metric["key"] for metric in document["metrics"]]
    assert keys == [f"{c.key}_{measure}_ms" for c in COMMANDS for measure in ("wall", "cpu")]
    for metric in document["metrics"]:
        for contender in ("floor", "ours"):
            entry = metric["results"][contender]
            assert entry["status"] == "ok" and len(entry["values"]) == 2, (metric["key"], contender, entry)
            assert entry["min"] <= entry["p90"] <= entry["max"]
        assert metric["results"]["ours"]["ratio_to_floor"] > 0
    assert len(document["verdicts"]) == len(COMMANDS)
    assert all(line.endswith((": met", ": NOT met")) for line in document["verdicts"])
    assert "mcp-actors --version: wall time" in done.stdout and "vs floor" in done.stdout and "p90" in done.stdout
    assert failures(document) == []


def test_a_command_that_exits_otherwise_is_a_failure() -> None:
    """A run with another exit status measures something else: the benchmark names it and fails."""
    document = {
        "metrics": [
            {"key": "version_wall_ms", "results": {"ours": {"status": "ok", "values": [1.0]}}},
            {"key": "help_wall_ms", "results": {"ours": {"status": "failed", "errors": ["exited 1, not 0: boom"]}}},
        ]
    }
    assert failures(document) == ["help_wall_ms: exited 1, not 0: boom"]
