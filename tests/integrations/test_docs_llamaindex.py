"""The example of docs/integrations/llamaindex.md runs as written, against the built-in demo server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations" / "llamaindex.md"
RUN_BOUND = 240.0
"""Upper bound of the example's run on a loaded machine; it takes a few seconds."""


def first_python_block() -> str:
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    return blocks[0]


def printed_output() -> str:
    """The ```text block right after the example: what the page says it prints."""
    texts: list[str] = re.findall(r"It prints:\n\n```text\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    [text] = texts
    return text


def test_the_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    """The page's first Python block, run in a fresh process on a fresh config, prints the page's output."""
    script = tmp_path / "example.py"
    script.write_text(first_python_block(), encoding="utf-8")
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=RUN_BOUND, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == printed_output()
