"""The example of docs/integrations/langchain.md runs as written, against the built-in demo server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "integrations" / "langchain.md"


def first_python_block() -> str:
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    return blocks[0]


def test_the_langchain_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    """A fresh config, a subprocess: the agent's three tool messages are the page's output, exit 0."""
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json")}
    done = subprocess.run(
        [sys.executable, "-c", first_python_block()],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "mcp__demo__echo: hello [success] None",
        "mcp__demo__add: 5.0 [success] {'structured_content': {'result': 5.0}}",
        "mcp__demo__fail: Error: no such city [error] None",
    ]
    assert "It prints:\n\n```\n" + done.stdout + "```" in DOC.read_text(encoding="utf-8")
