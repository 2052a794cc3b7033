"""docs/asyncio.md as a reader meets it: every Python example runs as written, against the demo server."""

from __future__ import annotations

import os
import re
from pathlib import Path

import forkrun
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "asyncio.md"
RUN_BOUND = 240.0
"""Upper bound of one example run on a loaded machine; each takes a few seconds."""


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_doc_has_examples_that_are_whole_programs() -> None:
    """Each example runs its own loop (no top-level await) with mcp_actors.asyncio.open_runtime."""
    found = examples()
    assert len(found) >= 3
    for code in found:
        compile(code, "docs/asyncio.md", "exec")
        assert "asyncio.run(" in code and "mcp_actors.asyncio.open_runtime(" in code, code


@pytest.mark.parametrize("index", range(len(examples())))
def test_example_runs(index: int, tmp_path: Path) -> None:
    """Example number ``index`` of docs/asyncio.md runs as written, on a fresh config."""
    script = tmp_path / "example.py"
    script.write_text(examples()[index], encoding="utf-8")
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"), "PYTHONPATH": str(ROOT)}
    # ``python example.py``, forked from an interpreter that has the MCP SDK imported (forkrun)
    done = forkrun.run_script(script, env=env, cwd=tmp_path, bound=RUN_BOUND)
    assert done.returncode == 0, f"example {index}:\n{examples()[index]}\n{done.stderr}"
    assert done.stdout.strip()
