"""The README as a user meets it: its Python snippets run as written, twice; the editable install is typed.

Each snippet runs in its own process against its own temporary config (through
``MCP_ACTORS_CONFIG``), twice in a row, because a reader runs an example again after
changing it: a snippet that only works on a fresh config is a broken example.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import forkrun
import pytest
import trio

import mcp_actors

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
RUN_BOUND = 240.0
"""Upper bound of one snippet run on a loaded machine; each takes a few seconds."""


def readme_snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_readme_has_only_whole_programs() -> None:
    """Every Python snippet of the README is a whole program: no top-level await, it runs its own loop."""
    snippets = readme_snippets()
    assert len(snippets) >= 4
    for code in snippets:
        compile(code, "README.md", "exec")  # top-level await is a SyntaxError here
        assert "trio.run(" in code or "asyncio.run(" in code or "start_portal(" in code, code


@pytest.mark.parametrize("index", range(len(readme_snippets())))
async def test_readme_snippet_runs_twice(index: int, tmp_path: Path) -> None:
    """The README's Python snippet number ``index`` runs as written, twice in a row, on one config."""
    code = readme_snippets()[index]
    script = tmp_path / "snippet.py"
    await trio.Path(script).write_text(code, encoding="utf-8")
    env = {
        **os.environ,
        "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"),
        "PYTHONPATH": str(ROOT),
    }
    # ``python snippet.py``, forked from an interpreter that has the MCP SDK imported (forkrun)
    run_once = functools.partial(forkrun.run_script, script, env=env, cwd=tmp_path, bound=RUN_BOUND)
    for run in (1, 2):
        done = await trio.to_thread.run_sync(run_once)
        assert done.returncode == 0, f"run {run} of snippet {index}:\n{code}\n{done.stderr}"


def test_editable_install_writes_a_path_file(tmp_path: Path) -> None:
    """The editable wheel holds a plain .pth with the project path (mypy follows it), not an import-hook finder."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("mcp_actors", "supervisors"):
        shutil.copytree(ROOT / package, project / package, ignore=ignore)
    out = tmp_path / "dist"
    out.mkdir()
    subprocess.run(
        [sys.executable, "-c", f"import setuptools.build_meta as b; b.build_editable({str(out)!r})"],
        cwd=project,
        check=True,
        capture_output=True,
        timeout=RUN_BOUND,
    )
    [wheel] = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [pth] = [n for n in names if n.endswith(".pth")]
        lines = archive.read(pth).decode().split()
        [metadata] = [n for n in names if n.endswith("METADATA")]
        version = re.search(r"^Version: (.+)$", archive.read(metadata).decode(), flags=re.MULTILINE)
    assert lines == [str(project)]
    assert not any("finder" in n for n in names)
    assert version is not None and version[1] == mcp_actors.__version__
