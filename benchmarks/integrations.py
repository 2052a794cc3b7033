"""Tool calls through each agent framework: our toolset against the framework's own MCP client.

For every framework module in ``benchmarks/_integrations/`` (one per integration in
:mod:`mcp_actors.integrations`, plus ``asyncio_road``: the asyncio road against the trio
road and the raw SDK on asyncio), each contender is measured in a fresh process of its own,
in alternating order, ``--rounds`` times, against the same light stdio server
(``benchmarks/_toolserver.py``): the median per-call latency of sequential calls and the
calls/s with ``--inflight`` calls in flight for ``--seconds``. A contender whose client
pins other packages than ours (a framework's own MCP client on ``mcp<2``, say) runs in a
venv of its own under ``benchmarks/.venvs/`` (its module's ``PEER_PACKAGES``), made on first
use like the other peers'.

The goal line per framework: our per-call cost (sequential latency, and 1 / calls/s at
``--inflight``) at most ``GOAL_RATIO`` times the framework's own client's. A module may
measure a ``floor`` contender too: the same framework path with a no-op local tool (a plain
function tool of that framework), the cost no MCP client can go under; and a ``wire_floor``:
the same path calling the light server through a hand-written JSON-RPC client
(``_integrations/_wire_floor.py``), the cost no client of that server can go under. The
table then says how far above the floor each client is, and whether the goal is within
reach at all (the higher floor over ``GOAL_RATIO`` times the framework's own client's total
puts it out of reach of any client on this machine).

    python -m benchmarks.integrations [--quick] [--frameworks a,b] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks._common import machine_info, write_json
from benchmarks._peers import Contender, PeerUnavailable, ensure_peer_venv

__all__ = ["GOAL_RATIO", "main"]

BENCH_DIR: Final = Path(__file__).resolve().parent
MODULES_DIR: Final = BENCH_DIR / "_integrations"
REPO: Final = BENCH_DIR.parent
GOAL_RATIO: Final = 0.5
"""Our per-call cost over the framework's own client's, at most."""
RUN_TIMEOUT: Final = 600.0


def framework_modules() -> list[str]:
    """The measured modules (file stems), in name order."""
    return sorted(p.stem for p in MODULES_DIR.glob("*.py") if not p.stem.startswith("_"))


def _module_constant(stem: str, name: str) -> Any:
    """A literal module-level constant, read without importing (the module imports its framework)."""
    tree = ast.parse((MODULES_DIR / f"{stem}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(value)
    return None


def contenders_of(stem: str) -> list[str]:
    """The contender names a module measures (``CONTENDER_NAMES``, else ``ours`` and ``own``)."""
    names = _module_constant(stem, "CONTENDER_NAMES")
    return list(names) if names else ["ours", "own"]


def _python_for(stem: str, contender: str) -> Path:
    packages = (_module_constant(stem, "PEER_PACKAGES") or {}).get(contender)
    if not packages:
        return Path(sys.executable)
    peer = Contender(
        key=f"fw-{stem}-{contender}",
        label=f"{stem} {contender}",
        driver="",
        backend="asyncio",
        packages=tuple(packages),
    )
    return ensure_peer_venv(peer)


def run_one(stem: str, contender: str, *, seconds: float, inflight: int, sequential: int) -> dict[str, Any]:
    """Measure one contender in a fresh process; its JSON result, or ``{"error": ...}``."""
    try:
        python = _python_for(stem, contender)
    except PeerUnavailable as exc:
        return {"error": f"unavailable: {exc}"}
    argv = [
        str(python),
        "-m",
        f"benchmarks._integrations.{stem}",
        "--contender",
        contender,
        "--seconds",
        str(seconds),
        "--inflight",
        str(inflight),
        "--sequential",
        str(sequential),
    ]
    try:
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {RUN_TIMEOUT:g}s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return {"error": f"exit {done.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _median(runs: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in runs if key in r]
    return statistics.median(values) if values else None


def summarize(stem: str, runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Medians per contender, and ours over own per call (sequential and in flight)."""
    rows: dict[str, Any] = {}
    for contender, results in runs.items():
        errors = [r["error"] for r in results if "error" in r]
        rows[contender] = {
            "sequential_ms": _median(results, "sequential_ms"),
            "calls_per_s": _median(results, "calls_per_s"),
            "runs": len(results) - len(errors),
            "errors": errors,
        }
    summary: dict[str, Any] = {"framework": stem, "contenders": rows}
    ours, own = rows.get("ours"), rows.get("own")
    floors = [row for key in ("floor", "wire_floor") if (row := rows.get(key)) and row["sequential_ms"] is not None]
    floor = max(floors, key=lambda row: row["sequential_ms"], default=None)
    if ours and own and ours["sequential_ms"] and own["sequential_ms"] and ours["calls_per_s"] and own["calls_per_s"]:
        seq_ratio = ours["sequential_ms"] / own["sequential_ms"]
        flight_ratio = own["calls_per_s"] / ours["calls_per_s"]  # per-call cost: 1 / (calls/s)
        summary.update(
            sequential_ratio=seq_ratio,
            inflight_cost_ratio=flight_ratio,
            goal_met=seq_ratio <= GOAL_RATIO and flight_ratio <= GOAL_RATIO,
        )
        if floor:
            # The framework's own tool layer with a no-op tool, or with a hand-written client of the
            # server (the higher of the two): no contender's call can cost less.
            floor_ms = floor["sequential_ms"]
            summary.update(
                floor_sequential_ms=floor_ms,
                ours_above_floor_ms=ours["sequential_ms"] - floor_ms,
                own_above_floor_ms=own["sequential_ms"] - floor_ms,
                goal_reachable=floor_ms <= GOAL_RATIO * own["sequential_ms"],
            )
    return summary


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(summaries: Sequence[Mapping[str, Any]], inflight: int) -> str:
    """The markdown table people read: one row per contender, ratios (and the floor's) on the ``ours`` row."""
    lines = [
        f"| framework | contender | sequential ms (median) | calls/s at {inflight} in flight | ours / own per call |",
        "|---|---|---:|---:|---|",
    ]
    for summary in summaries:
        for contender, row in summary["contenders"].items():
            ratio = ""
            if contender == "ours" and "sequential_ratio" in summary:
                verdict = "goal met" if summary["goal_met"] else f"goal (<= {GOAL_RATIO}x) not met"
                ratio = (
                    f"{summary['sequential_ratio']:.2f}x sequential, {summary['inflight_cost_ratio']:.2f}x in"
                    f" flight: {verdict}"
                )
                if "floor_sequential_ms" in summary:
                    ratio += (
                        f"; above the floor: ours +{summary['ours_above_floor_ms'] * 1e3:.0f} us,"
                        f" own +{summary['own_above_floor_ms'] * 1e3:.0f} us"
                    )
                    if not summary["goal_reachable"]:
                        ratio += f" (the floor alone is over {GOAL_RATIO}x own: goal out of reach)"
            if row["errors"]:
                ratio = (ratio + " " if ratio else "") + "failed: " + row["errors"][0][:120]
            lines.append(
                f"| {summary['framework']} | {contender} | {_fmt(row['sequential_ms'], '.3f')} |"
                f" {_fmt(row['calls_per_s'], ',.0f')} | {ratio} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurements, print the table, write ``--json``; 1 if a contender failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short round each (a smoke run)")
    parser.add_argument("--frameworks", default="", help="comma-separated module names (default: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--inflight", type=int, default=50)
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--json", dest="json_path", type=Path, default=None)
    options = parser.parse_args(argv)
    if options.quick:
        options.rounds, options.seconds, options.sequential = 1, 1.0, 50
    stems = [s for s in options.frameworks.split(",") if s] or framework_modules()
    unknown = sorted(set(stems) - set(framework_modules()))
    if unknown:
        parser.error(f"no benchmarks/_integrations module named {', '.join(unknown)}; have {framework_modules()}")
    summaries = []
    for stem in stems:
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in contenders_of(stem)}
        for round_index in range(options.rounds):
            order = list(runs) if round_index % 2 == 0 else list(reversed(runs))
            for contender in order:
                result = run_one(
                    stem, contender, seconds=options.seconds, inflight=options.inflight, sequential=options.sequential
                )
                print(f"[{stem}] round {round_index + 1} {contender}: {result}", file=sys.stderr, flush=True)
                runs[contender].append(result)
        summaries.append(summarize(stem, runs))
    print(render(summaries, options.inflight))
    machine = machine_info()
    print(f"\n{machine['time']}, {machine['cpus']} cores, {machine['load']}")
    if options.json_path is not None:
        write_json(
            options.json_path,
            {
                "name": "integrations",
                "machine": machine,
                "summaries": summaries,
                "options": {k: v for k, v in vars(options).items() if k != "json_path"},
            },
        )
    failed = any(row["errors"] for s in summaries for row in s["contenders"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
