"""Every example in docs/protocol/*.md runs as written and prints what its page says."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import forkrun
import pytest
import trio

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocol"
PAGES = sorted(DOCS.glob("*.md"))
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_every_protocol_page_has_an_example() -> None:
    """Each feature page carries one runnable Python example."""
    assert {p.stem for p in PAGES} >= {"progress", "resources", "prompts", "completion", "logging", "tasks"}
    for page in PAGES:
        assert len(_BLOCK.findall(page.read_text())) == 1, page.name


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
async def test_example_runs(page: Path, tmp_path: Path) -> None:
    """The page's example exits 0 and prints what the page's comments promise."""
    [code] = _BLOCK.findall(await trio.Path(page).read_text())
    script = tmp_path / "example.py"
    await trio.Path(script).write_text(code)
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "unused.json")}
    # ``python example.py``, forked from an interpreter that has the MCP SDK imported (forkrun)
    run = functools.partial(forkrun.run_script, script, env=env, cwd=Path.cwd(), bound=120)
    done = await trio.to_thread.run_sync(run)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    for promised in re.findall(r"# (\[.*\]|\{.*\})$", code, re.MULTILINE):
        assert promised in out, (promised, out)
    expected = {
        "progress": "slept 2 s",
        "resources": "updated: demo://counter",
        "prompts": "Write a formal paragraph about supervision trees.",
        "completion": "['beta']",
        "logging": "not logged: info is below warning",
        "tasks": "modern research on actors: done",
        "caching": "[1, 2, 4]",
        "structured-output": "breaks its outputSchema",
        "callbacks": "servers told the roots changed:",
        "dpop": "proved",
        "token-exchange": "signed in once, at the IdP",
        "wif": "no login, no client secret",
    }[page.stem]
    assert expected in out + err
    if page.stem == "logging":
        assert "mcp_actors.server.demo ERROR disk almost full" in err
