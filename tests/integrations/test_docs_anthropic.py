"""The examples of docs/integrations/anthropic.md run as written, each in its own process on a fresh config."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations" / "anthropic.md"
RUN_BOUND = 120.0
"""Upper bound of one example run on a loaded machine; each takes a few seconds."""


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def run_example(code: str, tmp_path: Path) -> str:
    """Run ``code`` as a script with ``MCP_ACTORS_CONFIG`` in ``tmp_path``; its stdout (exit 0 asserted)."""
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=RUN_BOUND, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_the_first_example_prints_what_the_page_says(tmp_path: Path) -> None:
    """The async tool-runner example calls two demo tools and prints the lines the page shows under it."""
    first = blocks("python")[0]
    assert "async_tools(" in first
    assert run_example(first, tmp_path) == blocks("text")[0]


def test_the_sync_example_runs(tmp_path: Path) -> None:
    """The sync tool-runner example calls the echo tool from a plain thread and prints the model's last word."""
    second = blocks("python")[1]
    assert "sync_tools(" in second
    assert run_example(second, tmp_path) == "echo said hi\n"
