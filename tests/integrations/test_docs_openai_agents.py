"""The example of docs/integrations/openai_agents.md runs as written on a fresh config and prints the tool output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "integrations" / "openai_agents.md"
RUN_BOUND = 240.0
"""Upper bound of the example's run on a loaded machine; it takes a few seconds."""


def first_python_block() -> str:
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    return blocks[0]


def test_the_example_runs_against_the_demo_server_and_prints_the_tool_output(tmp_path: Path) -> None:
    """The first Python block, run in its own process: exit 0, the scripted model's answer built from echo's output."""
    script = tmp_path / "example.py"
    script.write_text(first_python_block(), encoding="utf-8")
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=RUN_BOUND
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The tool said: hello from the agent\n"
