"""The benchmarks still work: ``python -m benchmarks.all --quick`` runs end to end.

Quick mode measures mcp-actors and the raw SDK only, with tiny counts and no peer
installs; this test proves the suite runs and writes a well-formed result, not how fast
anything is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOUND = 420.0
"""Upper bound of the whole quick run (it takes under a minute on an idle 2-core machine)."""

OWN_BENCHMARKS = (
    "call_overhead",
    "concurrency",
    "startup",
    "tool_setup",
    "memory",
    "shutdown",
    "fault_recovery",
    "hot_path",
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run the quick suite once for every test of this module."""
    out = tmp_path_factory.mktemp("bench") / "all.json"
    env = dict(os.environ)
    env["MCP_ACTORS_STATE_DIR"] = str(out.parent / "state")
    env["MCP_ACTORS_CONFIG"] = str(out.parent / "state" / "mcp-config.json")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.all", "--quick", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    document = json.loads(out.read_text()) if out.exists() else {}
    return done, document


def test_quick_suite_exits_zero(quick_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    """The quick suite exits 0 and prints its summary."""
    done, _ = quick_run
    assert done.returncode == 0, f"stdout tail: {done.stdout[-2000:]}\nstderr tail: {done.stderr[-3000:]}"
    assert "== Summary" in done.stdout


def test_quick_suite_writes_valid_json(quick_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    """The JSON result names the quick mode, the machine and every benchmark of the suite."""
    _, document = quick_run
    assert document["quick"] is True
    assert document["machine"]["cpus"] >= 1
    for name in OWN_BENCHMARKS:
        assert document["benchmarks"][name]["status"] == "ok", (name, document["benchmarks"][name])
    assert "conversion" in document["benchmarks"]


def test_quick_suite_measures_ours_and_raw(quick_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    """Every metric of every own benchmark has a value for mcp-actors, and for the raw SDK where it applies."""
    _, document = quick_run
    for name in OWN_BENCHMARKS:
        doc = document["benchmarks"][name]
        assert doc["metrics"], name
        for metric in doc["metrics"]:
            ours = metric["results"]["ours"]
            assert ours["status"] == "ok", (name, metric["key"], ours)
            assert len(ours["values"]) == document["benchmarks"][name]["rounds"], (name, metric["key"])
            if name != "tool_setup" and metric["key"] != "recovered_ms":
                raw = metric["results"]["raw"]
                assert raw["status"] == "ok", (name, metric["key"], raw)
                if raw["median"] > 0:
                    assert ours["ratio_to_raw"] == pytest.approx(ours["median"] / raw["median"])


def test_quick_suite_leaves_no_server_behind(
    quick_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    """mcp-actors closes every server on shutdown, and no driver had a server left to kill."""
    _, document = quick_run
    remaining = next(m for m in document["benchmarks"]["shutdown"]["metrics"] if m["key"] == "remaining")
    assert remaining["results"]["ours"]["max"] == 0
    for name in OWN_BENCHMARKS:
        for metric in document["benchmarks"][name]["metrics"]:
            for key in ("ours", "raw"):
                for extra in metric["results"].get(key, {}).get("extra", []):
                    assert extra.get("leftover_processes", 0) == 0, (name, metric["key"], key, extra)
