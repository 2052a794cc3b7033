"""The example of docs/integrations/pydantic_ai.md runs as written, in a fresh interpreter on a fresh config."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations" / "pydantic_ai.md"


def first_python_block() -> str:
    """The first python code block of the page."""
    match = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert match is not None, f"{DOC} has no python block"
    return match.group(1)


def test_the_example_runs_against_the_demo_server(tmp_path: Path) -> None:
    """The example exits 0 and prints what the scripted model saw the demo tools return."""
    script = tmp_path / "example.py"
    script.write_text(first_python_block(), encoding="utf-8")
    env = dict(os.environ)
    env["MCP_ACTORS_CONFIG"] = str(tmp_path / "mcp-config.json")
    env["MCP_ACTORS_STATE_DIR"] = str(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "echo said 'hello from pydantic-ai'; 2 + 3 = 5"
