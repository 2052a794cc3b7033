"""Run every benchmark, one after another, and collect their results in one JSON file.

    python -m benchmarks.all --quick                 # smoke mode (CI): ours + raw SDK, tiny counts, < 1 min idle
    python -m benchmarks.all                         # the full run, peers installed on first use
    python -m benchmarks.all --markdown docs/perf.md # also write the Performance section

Each benchmark runs in its own process (``python -m benchmarks.<name>``) with a bound on
its time, so one that fails or hangs is reported and the others still run. The combined
document goes to ``--json`` (default ``benchmarks/results/all-<time>.json``). The exit
status is 1 when any benchmark failed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks._common import RESULTS_DIR, add_common_arguments, machine_info, write_json
from benchmarks._report import headline_rows, markdown_report

__all__ = ["BENCHMARKS", "main"]

BENCHMARKS: Final = (
    "call_overhead",
    "concurrency",
    "startup",
    "tool_setup",
    "conversion",
    "memory",
    "shutdown",
    "fault_recovery",
    "hot_path",
)
"""In the order the benchmarks were written (the oldest first)."""

QUICK_TIMEOUT: Final = 180.0
FULL_TIMEOUT: Final = 3 * 3600.0
OWN_OPTIONS: Final = frozenset({"--contenders", "--rounds", "--baseline"})
"""Options only our own benchmarks take; ``conversion`` gets ``--quick`` and ``--json`` only."""


def _run_one(name: str, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    if importlib.util.find_spec(f"benchmarks.{name}") is None:
        return {"status": "missing", "error": f"benchmarks/{name}.py is not in this checkout"}
    json_path = out_dir / f"{name}.json"
    command = [sys.executable, "-m", f"benchmarks.{name}", "--json", str(json_path)]
    if args.quick:
        command.append("--quick")
    if name != "conversion":
        command += ["--contenders", args.contenders]
        if args.rounds is not None:
            command += ["--rounds", str(args.rounds)]
        if args.baseline is not None:
            command += ["--baseline", str(args.baseline)]
    timeout = QUICK_TIMEOUT if args.quick else FULL_TIMEOUT
    started = time.monotonic()
    try:
        done = subprocess.run(command, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "error": f"did not finish within {timeout:g}s"}
    seconds = time.monotonic() - started
    if done.returncode != 0:
        return {"status": "failed", "error": f"exited with {done.returncode}", "seconds": seconds}
    try:
        document: dict[str, Any] = json.loads(json_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return {"status": "failed", "error": f"wrote no valid JSON: {exc}", "seconds": seconds}
    document.setdefault("status", "ok")
    document["seconds"] = seconds
    return document


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _print_summary(suite: dict[str, Any]) -> None:
    print("\n== Summary: mcp-actors (median) and ours / other ==")
    for row in headline_rows(suite):
        if row["ours"] is None:
            continue
        ratios = ", ".join(f"/{k} {v:.3g}x" for k, v in row["ours_vs"].items())
        print(f"{row['benchmark']:>15}  {row['metric']}: {_fmt(row['ours'])} {row['unit']}  {ratios}")
    for name, doc in suite["benchmarks"].items():
        if doc.get("status") != "ok":
            print(f"{name:>15}  {doc.get('status')}: {doc.get('error', '')}")


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the report as Markdown here")
    args = parser.parse_args(argv)
    names = list(BENCHMARKS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(names) - set(BENCHMARKS))
        if unknown:
            parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    json_path: Path = args.json_path or RESULTS_DIR / f"all-{stamp}{'-quick' if args.quick else ''}.json"
    suite: dict[str, Any] = {"suite": "mcp-actors benchmarks", "quick": args.quick, "machine": machine_info()}
    suite["benchmarks"] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mcp-actors-bench-") as tmp:
        for name in names:
            print(f"\n##### {name}", flush=True)
            suite["benchmarks"][name] = _run_one(name, args, Path(tmp))
            sys.stdout.flush()
    suite["machine"]["load_after"] = machine_info()["load"]
    suite["seconds"] = time.monotonic() - started
    write_json(json_path, suite)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown_report(suite))
    _print_summary(suite)
    print(f"\nall benchmarks: {suite['seconds']:.0f}s; JSON: {json_path}")
    failed = [n for n, d in suite["benchmarks"].items() if d.get("status") == "failed"]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
