"""The two measuring tools of round 7 run: ``benchmarks.scope_cost`` and ``benchmarks.instructions``.

``instructions`` runs each contender's loop under valgrind; here its loop runs natively
(the ``--child`` mode valgrind would run) against the real light server, and its refusal
without valgrind is checked. What the numbers are is docs/performance.md's business.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instructions, scope_cost
from benchmarks._common import toolserver

ROOT = Path(__file__).resolve().parent.parent


def test_scope_cost_prints_every_shape_three_times(capsys: pytest.CaptureFixture[str]) -> None:
    scope_cost.main(["--iterations", "500"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 * len(scope_cost.SHAPES)
    assert all("us of CPU per iteration" in line for line in lines)


@pytest.mark.parametrize("key", ["ours", "floor"])
def test_the_measured_loop_runs_each_contender_on_the_light_server(key: str, tmp_path: Path) -> None:
    """The child mode: connect, warm up, 100 calls 50 in flight, exit 0 (no valgrind needed)."""
    env = {**os.environ, "MCP_ACTORS_STATE_DIR": str(tmp_path), "MCP_ACTORS_CONFIG": str(tmp_path / "c.json")}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.instructions", "--child", key, json.dumps(toolserver()), "100"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]


def test_without_valgrind_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda _name: None)
    with pytest.raises(SystemExit, match="valgrind is not installed"):
        instructions.main([])
