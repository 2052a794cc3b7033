"""The benchmarks still work: ``python -m benchmarks.all --quick`` runs end to end.

Quick mode measures mcp-actors and the raw SDK only, with tiny counts and no peer
installs; this test proves the suite runs and writes a well-formed result, not how fast
anything is.

Where its time goes: nothing is installed and no virtualenv is made in quick mode; the
whole minute is the suite's own work, eight benchmark processes one after another, each
starting a fresh driver interpreter per contender (ours, raw SDK) that imports the SDK and
spawns its servers. The benchmarks are independent, so the suite runs as two
``benchmarks.all --quick --only ...`` halves side by side, one per core: every benchmark
still runs through ``benchmarks.all``, in about half the time on an idle 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOUND = 420.0
"""Upper bound of each half of the quick run (a half takes under half a minute on an idle 2-core machine)."""

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

QuickRun = tuple[list[subprocess.CompletedProcess[str]], dict[str, Any]]
"""What the quick run gives the tests: each half's completed process, and the merged JSON document."""

HEAVY = ("fault_recovery", "concurrency", "startup")
"""The first half: together about as long as all the others (measured on a 2-core machine)."""


def halves() -> list[list[str]]:
    """The suite split in two: the heavy benchmarks, and every other one ``benchmarks.all`` knows."""
    from benchmarks.all import BENCHMARKS

    return [[name for name in BENCHMARKS if name in HEAVY], [name for name in BENCHMARKS if name not in HEAVY]]


@pytest.fixture(scope="module")
def quick_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> QuickRun:
    """Run the quick suite once for every test of this module, as two halves at the same time."""
    base = tmp_path_factory.mktemp("bench")
    started: list[tuple[subprocess.Popen[str], Path]] = []
    for index, names in enumerate(halves()):
        out = base / f"half{index}.json"
        env = dict(os.environ)
        env["MCP_ACTORS_STATE_DIR"] = str(base / f"state{index}")
        env["MCP_ACTORS_CONFIG"] = str(base / f"state{index}" / "mcp-config.json")
        command = [sys.executable, "-m", "benchmarks.all", "--quick", "--only", ",".join(names), "--json", str(out)]
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        started.append((process, out))
    runs: list[subprocess.CompletedProcess[str]] = []
    document: dict[str, Any] = {"benchmarks": {}}
    for process, out in started:
        try:
            stdout, stderr = process.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        runs.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
        if out.exists():
            half = json.loads(out.read_text())
            document["benchmarks"].update(half.pop("benchmarks"))
            document.update(half)
    return runs, document


def test_quick_suite_exits_zero(quick_run: QuickRun) -> None:
    """The quick suite exits 0 and prints its summary (each half), and the halves cover every benchmark."""
    runs, _ = quick_run
    for done in runs:
        assert done.returncode == 0, f"stdout tail: {done.stdout[-2000:]}\nstderr tail: {done.stderr[-3000:]}"
        assert "== Summary" in done.stdout
    from benchmarks.all import BENCHMARKS

    assert sorted(name for half in halves() for name in half) == sorted(BENCHMARKS)


def test_quick_suite_writes_valid_json(
    quick_run: QuickRun,
) -> None:
    """The JSON result names the quick mode, the machine and every benchmark of the suite."""
    _, document = quick_run
    assert document["quick"] is True
    assert document["machine"]["cpus"] >= 1
    for name in OWN_BENCHMARKS:
        assert document["benchmarks"][name]["status"] == "ok", (name, document["benchmarks"][name])
    assert "conversion" in document["benchmarks"]


def test_quick_suite_measures_ours_and_raw(
    quick_run: QuickRun,
) -> None:
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
    quick_run: QuickRun,
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


def test_quick_hot_path_prints_its_guard(quick_run: QuickRun) -> None:
    """The quick hot path measures the floor too and notes the guard line: mcp-actors vs raw SDK and floor."""
    _, document = quick_run
    hot = document["benchmarks"]["hot_path"]
    assert all(m["results"]["floor"]["status"] == "ok" for m in hot["metrics"])
    [guard] = [n for n in hot["notes"] if n.startswith("regression guard")]
    assert "x raw" in guard and "x floor" in guard and "CPU/call" in guard


def test_quick_startup_pairs_the_clients_cpu_with_the_raw_sdks(quick_run: QuickRun) -> None:
    """Every start-up round reports the client's CPU and the servers'; the run notes ours against the raw SDK's."""
    _, document = quick_run
    startup = document["benchmarks"]["startup"]
    for metric in startup["metrics"]:
        for key in ("ours", "raw"):
            extras = metric["results"][key]["extra"]
            assert extras and all(0 < e["cpu_seconds"] < e["seconds"] * 2 for e in extras), (key, extras)
            # The servers' own CPU (their interpreters' start), read from their processes.
            assert all(e["servers_cpu_seconds"] > 0.005 for e in extras), (key, extras)
            # The event loop's thread is part of the process: some of its CPU, never more.
            assert all(0 < e["loop_cpu_seconds"] <= e["cpu_seconds"] for e in extras), (key, extras)
        # Our reaper sidecar is the client's helper; the raw SDK has none.
        assert all(e["helpers_cpu_seconds"] > 0 for e in metric["results"]["ours"]["extra"])
        assert all(e["helpers_cpu_seconds"] == 0 for e in metric["results"]["raw"]["extra"])
    [note] = [n for n in startup["notes"] if "client CPU over the start" in n]
    assert "for mcp-actors" in note and "for the raw SDK" in note and "95 % interval" in note
    [split] = [n for n in startup["notes"] if "client CPU by thread" in n]
    assert "the event loop's thread" in split and "the other threads" in split
