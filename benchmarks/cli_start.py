"""CLI start-up: wall and CPU time of ``mcp-actors --version``, ``--help`` and two usage errors.

Each command runs in a fresh process, the way a person or a script runs it (the
``mcp-actors`` console script beside this interpreter), and so does the floor, ``python -c
pass`` with the same interpreter: what Python costs before any of our code runs. In every
round the floor and each command run once, in an order that rotates from round to round,
so that a burst of load on the machine does not always hit the same one. Wall time is
the parent's clock from spawn to reap; CPU time is the child's user + system time
(``getrusage(RUSAGE_CHILDREN)`` around it). A run that exits with another status than
the command's (0 for ``--version`` and ``--help``, 2 for a usage error) fails the
benchmark: it would measure something else. The runs may write bytecode caches
(``PYTHONDONTWRITEBYTECODE`` is dropped from their environment) and one untimed warm-up
run of each goes first, so no round pays for compiling the source, as no installed
command does.

The tables give, per command and measure, the median over the rounds, the 90th
percentile, min..max, spread, and the median over the floor's. Goals, on a quiet
machine: ``--version`` and ``--help`` at most 0.15 s wall, a usage error at most 0.25 s
(medians).

    python -m benchmarks.cli_start [--quick] [--rounds N] [--json PATH] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from benchmarks._common import (
    FLOOR_KEY,
    Metric,
    compare_with_baseline,
    format_metric,
    load_baseline,
    machine_info,
    write_json,
)

__all__ = ["COMMANDS", "Command", "main", "run"]

NAME: Final = "cli_start"
TITLE: Final = "CLI start-up"
GOAL: Final = "--version and --help <= 0.15 s wall, a usage error <= 0.25 s wall (medians, quiet machine)"
OURS: Final = "ours"
DEFAULT_ROUNDS: Final = 20
QUICK_ROUNDS: Final = 3
RUN_BOUND: Final = 60.0
"""Upper bound of one run, in seconds (the CLI once took 2-3 s to start on a loaded machine)."""


@attrs.frozen
class Command:
    """One measured command line.

    Attributes:
        key: Stable id in JSON (``version``).
        args: The arguments after ``mcp-actors``.
        exit_code: The status a correct run exits with.
        goal_s: The goal for the median wall time, in seconds.
        what: What the run is, when the command line does not say it.
    """

    key: str
    args: tuple[str, ...]
    exit_code: int
    goal_s: float
    what: str = ""

    @property
    def shown(self) -> str:
        """The command line as a person types it (and what it is)."""
        line = " ".join(("mcp-actors", *self.args))
        return f"{line} ({self.what})" if self.what else line


COMMANDS: Final = (
    Command("version", ("--version",), 0, 0.15),
    Command("help", ("--help",), 0, 0.15),
    Command("missing_argument", ("servers", "add"), 2, 0.25, "usage error: NAME missing"),
    Command("unknown_command", ("no-such-command",), 2, 0.25, "usage error: no such command"),
)


def cli_argv() -> list[str]:
    """How ``mcp-actors`` is started: the console script beside this interpreter, else ``-m``."""
    script = Path(sys.executable).with_name("mcp-actors")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcp_actors"]


@attrs.frozen
class Sample:
    """One run: wall and CPU seconds, and how it ended."""

    wall_s: float
    cpu_s: float
    returncode: int
    stderr: str


def run_once(argv: Sequence[str], env: Mapping[str, str]) -> Sample:
    """Run ``argv`` to its end (output captured, no stdin) and measure it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        list(argv), env=dict(env), stdin=subprocess.DEVNULL, capture_output=True, timeout=RUN_BOUND, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu, done.returncode, done.stderr.decode(errors="replace"))


def p90(values: Sequence[float]) -> float:
    """The 90th percentile (inclusive interpolation; the value itself for one run)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def _metrics(command: Command) -> tuple[Metric, Metric]:
    return (
        Metric(key=f"{command.key}_wall_ms", title=f"{command.shown}: wall time", unit="ms"),
        Metric(key=f"{command.key}_cpu_ms", title=f"{command.shown}: CPU time (user + system)", unit="ms"),
    )


def measure(rounds: int, *, log: bool = True) -> tuple[list[Metric], dict[str, Any]]:
    """Run every round; return the finished metrics (two per command) and the run's parameters."""
    floor_argv = [sys.executable, "-c", "pass"]
    ours_argv = cli_argv()
    metrics = {command.key: _metrics(command) for command in COMMANDS}
    runs: list[tuple[str, Command | None]] = [(FLOOR_KEY, None), *((OURS, c) for c in COMMANDS)]
    floor_samples: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="mcp-actors-bench-cli-") as state:
        # None of these commands reads a config; if one did, it would find an empty state dir, not the user's.
        env = {**os.environ, "MCP_ACTORS_STATE_DIR": state, "MCP_ACTORS_CONFIG": str(Path(state, "mcp-config.json"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for _, command in runs:  # the warm-up: bytecode caches written, files in the page cache
            run_once(floor_argv if command is None else [*ours_argv, *command.args], env)
        for round_no in range(rounds):
            shift = round_no % len(runs)
            order = runs[shift:] + runs[:shift]
            if log:
                print(f"[{NAME}] round {round_no + 1}/{rounds}", file=sys.stderr, flush=True)
            for key, command in order:
                if command is None:
                    floor_samples.append(run_once(floor_argv, env))
                    continue
                sample = run_once([*ours_argv, *command.args], env)
                wall, cpu = metrics[command.key]
                if sample.returncode != command.exit_code:
                    why = f"exited {sample.returncode}, not {command.exit_code}: {sample.stderr.strip()[-300:]}"
                    wall.mark(key, "failed", why)
                    cpu.mark(key, "failed", why)
                    continue
                wall.add_value(key, sample.wall_s * 1e3)
                cpu.add_value(key, sample.cpu_s * 1e3)
    finished = []
    for wall, cpu in metrics.values():
        for sample in floor_samples:
            wall.add_value(FLOOR_KEY, sample.wall_s * 1e3)
            cpu.add_value(FLOOR_KEY, sample.cpu_s * 1e3)
        for metric in (wall, cpu):
            metric.finish()
            metric.results = {key: metric.results[key] for key in (FLOOR_KEY, OURS) if key in metric.results}
            for entry in metric.results.values():
                if entry["values"]:
                    entry["p90"] = p90(entry["values"])
            finished.append(metric)
    params = {
        "rounds": rounds,
        "command": ours_argv,
        "floor": floor_argv,
        "commands": {c.key: {"args": list(c.args), "exit_code": c.exit_code, "goal_s": c.goal_s} for c in COMMANDS},
    }
    return finished, params


def verdicts(metrics: Sequence[Metric]) -> list[str]:
    """One line per command: its median wall time against its goal."""
    by_key = {m.key: m for m in metrics}
    lines = []
    for command in COMMANDS:
        median_ms = by_key[f"{command.key}_wall_ms"].results.get(OURS, {}).get("median")
        if median_ms is None:
            lines.append(f"{command.shown}: no value")
            continue
        met = median_ms / 1e3 <= command.goal_s
        lines.append(
            f"{command.shown}: median wall {median_ms / 1e3:.3f} s (goal <= {command.goal_s:g} s):"
            f" {'met' if met else 'NOT met'}"
        )
    return lines


def run(
    *, rounds: int, quick: bool = False, json_path: Path | None = None, baseline: Path | None = None
) -> dict[str, Any]:
    """Measure, print the tables and return (and write, with ``json_path``) the JSON document."""
    machine = machine_info()
    metrics, params = measure(rounds)
    document: dict[str, Any] = {
        "benchmark": NAME,
        "title": TITLE,
        "goal": GOAL,
        "quick": quick,
        "rounds": rounds,
        "params": params,
        "notes": [],
        "verdicts": verdicts(metrics),
        "machine": {**machine, "load_after": machine_info()["load"]},
        "contenders": {
            FLOOR_KEY: {"label": "floor: python -c pass", "note": "the interpreter alone", "versions": {}},
            OURS: {"label": "mcp-actors", "note": "the console script", "versions": {}},
        },
        "metrics": [m.to_json() for m in metrics],
    }
    labels = {key: value["label"] for key, value in document["contenders"].items()}
    print(f"\n== {TITLE} ==")
    print(f"goal: {GOAL}")
    print(
        f"machine: {machine['cpus']} cpus; before: {machine['load']}; after: {document['machine']['load_after']};"
        f" rounds: {rounds}"
    )
    for metric in metrics:
        print()
        print(format_metric(metric, labels))
    for line in document["verdicts"]:
        print(f"goal check: {line}")
    if baseline is not None:
        document["baseline"] = {"path": str(baseline)}
        try:
            lines = compare_with_baseline(document, load_baseline(baseline, NAME))
        except (OSError, ValueError) as exc:
            lines = [f"not compared: {exc}"]
        document["baseline"]["comparison"] = lines
        for line in lines:
            print(f"vs baseline: {line}")
    sys.stdout.flush()
    if json_path is not None:
        write_json(json_path, document)
    return document


def failures(document: Mapping[str, Any]) -> list[str]:
    """``metric: why`` for every metric whose command did not run as it should."""
    failed = []
    for metric in document.get("metrics", []):
        entry = metric["results"].get(OURS, {})
        if entry.get("status") != "ok":
            failed.append(f"{metric['key']}: {'; '.join(dict.fromkeys(entry.get('errors', [])))[:300]}")
    return failed


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point; exits 1 when a command did not exit as it should."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cli_start", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"smoke mode: {QUICK_ROUNDS} rounds")
    parser.add_argument("--rounds", type=int, default=None, help=f"runs of each command (default {DEFAULT_ROUNDS})")
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="write the result as JSON here")
    parser.add_argument("--baseline", type=Path, default=None, help="a saved --json result to compare the medians with")
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    rounds = args.rounds or (QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS)
    document = run(rounds=rounds, quick=args.quick, json_path=args.json_path, baseline=args.baseline)
    failed = failures(document)
    if failed:
        print(f"{NAME}: failed runs: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
