"""The example of docs/integrations/google_adk.md runs as written, in a process of its own, on a fresh config."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import trio

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "google_adk.md"


async def test_the_pages_example_runs_and_prints_what_the_tool_returned(tmp_path: Path) -> None:
    """The first python block exits 0 and prints the demo server's echo as the agent's final answer."""
    code = re.findall(r"```python\n(.*?)```", await trio.Path(PAGE).read_text(), flags=re.DOTALL)[0]
    script = tmp_path / "example.py"
    await trio.Path(script).write_text(code)
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, str(script)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json")},
        )
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err
    assert out.splitlines() == ["the tool said: hello from ADK"], (out, err)
