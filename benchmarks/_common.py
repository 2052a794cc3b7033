"""What every benchmark shares: options, rounds, statistics, tables and JSON.

A benchmark is a list of :class:`Metric` s. Each metric is measured in ``rounds``; in every
round each contender runs once, in a fresh driver process, and the contenders' order
rotates from round to round so that a burst of load on the machine does not always hit
the same one. A contender's value is the median over its rounds; the spread (max - min
over the rounds, as a percentage of the median) says how noisy it was.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from benchmarks._peers import (
    BENCH_DIR,
    CONTENDERS,
    Contender,
    DriverError,
    PeerUnavailable,
    contender_python,
    installed_versions,
    run_driver,
    select_contenders,
)

__all__ = [
    "BenchOptions",
    "Bench",
    "Metric",
    "compare_with_baseline",
    "demo_server",
    "fault_server",
    "format_metric",
    "load_baseline",
    "machine_info",
    "parse_options",
    "run_main",
    "summarize",
    "toolserver",
    "write_json",
]

RESULTS_DIR: Final = BENCH_DIR / "results"
RAW_KEY: Final = "raw"
FLOOR_KEY: Final = "floor"


def demo_server() -> list[str]:
    """The demo server (the SDK's MCPServer), run with our interpreter."""
    return [sys.executable, "-m", "mcp_actors.demo_server"]


def fault_server(*flags: str) -> list[str]:
    """The project's fault-injection server (well-behaved without flags; starts in ~0.3 s)."""
    return [sys.executable, "-m", "mcp_actors.testing.fault_server", *flags]


def toolserver(tools: int = 1) -> list[str]:
    """The benchmarks' light stdlib server with ``tools`` tools (echo first)."""
    return [sys.executable, str(BENCH_DIR / "_toolserver.py"), "--tools", str(tools)]


# --------------------------------------------------------------------------- options


@attrs.frozen(kw_only=True)
class BenchOptions:
    """The command line every benchmark accepts.

    Attributes:
        quick: Smoke mode: ours and the raw SDK only, tiny counts, one round, no installs.
        json_path: Where to write the JSON result (``None``: nowhere).
        rounds: Rounds per metric (``None``: the benchmark's default).
        contenders: ``all``, ``local`` or a comma-separated list of keys.
        baseline: A saved result (this benchmark's ``--json``, or a ``benchmarks.all`` file)
            to compare the medians with, e.g. a run on the code before a change.
    """

    quick: bool = False
    json_path: Path | None = None
    rounds: int | None = None
    contenders: str = "all"
    baseline: Path | None = None


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--quick``, ``--json``, ``--rounds`` and ``--contenders`` to a parser."""
    parser.add_argument("--quick", action="store_true", help="smoke mode: ours + raw SDK, tiny counts, no installs")
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="write the result as JSON here")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per metric (default: the benchmark's)")
    parser.add_argument(
        "--contenders",
        default="all",
        help="'all' (default; installs peers into benchmarks/.venvs on first use), 'local' (no peer venvs), "
        "or a comma-separated list of: ours, raw, raw-asyncio, session-group, langchain, fastmcp, openai-agents",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a saved --json result (or a benchmarks.all file) to compare this run's medians with",
    )


def parse_options(description: str, argv: Sequence[str] | None = None) -> BenchOptions:
    """Parse a benchmark's command line."""
    parser = argparse.ArgumentParser(description=description)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    return BenchOptions(
        quick=args.quick,
        json_path=args.json_path,
        rounds=args.rounds,
        contenders=args.contenders,
        baseline=args.baseline,
    )


# --------------------------------------------------------------------------- statistics


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max and spread (max - min as % of the median) of per-round values."""
    median = statistics.median(values)
    low, high = min(values), max(values)
    spread = (high - low) / median * 100 if median else 0.0
    return {"median": median, "min": low, "max": high, "spread_pct": spread}


@attrs.define(eq=False)
class Metric:
    """One measured quantity, for every contender.

    Attributes:
        key: Stable id in JSON (``latency_us``).
        title: What the table is headed with.
        unit: Unit of the values.
        better: ``"lower"`` or ``"higher"``.
        results: Per contender key: ``values`` (one per round), the summary, ``status``
            (``ok``, ``unavailable``, ``failed``, ``n/a``), ``error``/``note``, ``extra``.
    """

    key: str
    title: str
    unit: str
    better: str = "lower"
    results: dict[str, dict[str, Any]] = attrs.field(factory=dict)

    def add_value(self, contender: str, value: float, extra: Mapping[str, Any] | None = None) -> None:
        """Record one round's value."""
        entry = self.results.setdefault(contender, {"status": "ok", "values": [], "extra": []})
        entry["values"].append(value)
        if extra:
            entry["extra"].append(dict(extra))

    def mark(self, contender: str, status: str, message: str) -> None:
        """Record that a contender has no value here (and why)."""
        entry = self.results.setdefault(contender, {"status": status, "values": [], "extra": []})
        if not entry["values"]:
            entry["status"] = status
        entry.setdefault("errors", []).append(message)

    def finish(self) -> None:
        """Compute summaries and the ratios to the raw SDK."""
        for entry in self.results.values():
            if entry["values"]:
                entry["status"] = "ok"
                entry.update(summarize(entry["values"]))
        raw = self.results.get(RAW_KEY, {}).get("median")
        floor = self.results.get(FLOOR_KEY, {}).get("median")
        for entry in self.results.values():
            if "median" in entry and raw:
                entry["ratio_to_raw"] = entry["median"] / raw
            if "median" in entry and floor:
                entry["ratio_to_floor"] = entry["median"] / floor
        ours = self.results.get("ours", {}).get("median")
        if ours is not None:
            self.results["ours"]["ours_vs"] = {
                key: ours / e["median"] for key, e in self.results.items() if key != "ours" and e.get("median")
            }

    def to_json(self) -> dict[str, Any]:
        """The metric as JSON-ready data."""
        return {"key": self.key, "title": self.title, "unit": self.unit, "better": self.better, "results": self.results}


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x" if 0.1 <= ratio < 100 else f"{ratio:.3g}x"


def format_metric(metric: Metric, labels: Mapping[str, str]) -> str:
    """A plain-text table of one metric, one row per contender.

    The optional columns appear when some contender has their value: "p90" (a benchmark
    that records each contender's 90th percentile), "vs raw" (the raw SDK ran) and "vs
    floor" (the floor ran).
    """
    head = f"{metric.title} [{metric.unit}, {metric.better} is better]"
    entries = metric.results.values()
    p90 = any("p90" in entry for entry in entries)
    raw = any("ratio_to_raw" in entry for entry in entries)
    floor = any("ratio_to_floor" in entry for entry in entries)
    ratios = tuple(name for name, shown in (("vs raw", raw), ("vs floor", floor)) if shown)
    rows: list[tuple[str, ...]] = [
        ("contender", "median", *(("p90",) if p90 else ()), "min..max", "spread", *ratios, "note")
    ]
    for key, entry in metric.results.items():
        label = labels.get(key, key)
        if "median" in entry:
            rows.append(
                (
                    label,
                    _fmt(entry["median"]),
                    *((_fmt(entry["p90"]) if "p90" in entry else "-",) if p90 else ()),
                    f"{_fmt(entry['min'])}..{_fmt(entry['max'])}",
                    f"{entry['spread_pct']:.0f}%",
                    *((_ratio(entry.get("ratio_to_raw")),) if raw else ()),
                    *((_ratio(entry.get("ratio_to_floor")),) if floor else ()),
                    entry.get("note", ""),
                )
            )
        else:
            message = "; ".join(dict.fromkeys(entry.get("errors", [])))[:90]
            blanks = ("",) * (2 + p90 + len(ratios))
            rows.append((label, entry["status"], *blanks, message))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head, "-" * len(head)]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------- machine


def _uptime() -> str:
    try:
        with open("/proc/loadavg") as f:
            one, five, fifteen = f.read().split()[:3]
    except OSError:
        return "unknown"
    return f"load average {one}, {five}, {fifteen}"


def machine_info() -> dict[str, Any]:
    """Cores, load, Python and platform: what a reader needs to weigh the numbers."""
    return {
        "cpus": os.cpu_count(),
        "load": _uptime(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` as indented JSON, creating the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")


# --------------------------------------------------------------------------- the runner


JobFor = Callable[[Contender, int], Mapping[str, Any] | None]
"""Build the job of one contender in one round, or ``None`` when it does not apply."""


class Bench:
    """Runs one benchmark's metrics over its contenders and reports them."""

    def __init__(
        self,
        name: str,
        title: str,
        goal: str,
        options: BenchOptions,
        *,
        default_rounds: int,
        only: Sequence[str] | None = None,
        described: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.title = title
        self.goal = goal
        self.options = options
        self.rounds = 1 if options.quick and options.rounds is None else (options.rounds or default_rounds)
        chosen = select_contenders(options.contenders, quick=options.quick)
        if only is not None:
            chosen = [c for c in chosen if c.key in only]
        self.contenders = chosen
        # Contenders shown as one "n/a" row with the reason, never run (and never installed).
        self.described = {key: why for key, why in (described or {}).items() if key in {c.key for c in CONTENDERS}}
        self.metrics: list[Metric] = []
        self.params: dict[str, Any] = {}
        self.notes: list[str] = []
        self.verdicts: list[str] = []
        self.machine_before = machine_info()
        self._pythons: dict[str, Path] = {}
        self._unavailable: dict[str, str] = {}
        self._state = Path(tempfile.mkdtemp(prefix=f"mcp-actors-bench-{name}-"))
        for contender in self.contenders:
            try:
                self._pythons[contender.key] = contender_python(contender, log=self.log)
            except PeerUnavailable as exc:
                self._unavailable[contender.key] = str(exc)
                self.log(f"[{name}] {contender.key} unavailable: {exc}")

    def check_goal(self, what: str, value: float | None, limit: float, *, at_most: bool = True) -> None:
        """Record (and later print) whether a goal was met; a missing value is said so."""
        if value is None:
            self.verdicts.append(f"{what}: no value")
            return
        met = value <= limit if at_most else value >= limit
        relation = "<=" if at_most else ">="
        self.verdicts.append(f"{what} = {value:.3g} (goal {relation} {limit:g}): {'met' if met else 'NOT met'}")

    def log(self, message: str) -> None:
        """Progress for people, on stderr (stdout carries the tables)."""
        print(message, file=sys.stderr, flush=True)

    @property
    def labels(self) -> dict[str, str]:
        """Contender key → table label (described contenders too)."""
        return {c.key: c.label for c in [*self.contenders, *select_contenders(",".join(self.described), quick=False)]}

    def measure(
        self,
        metric: Metric,
        job_for: JobFor,
        value_of: Callable[[dict[str, Any]], float],
        *,
        timeout: float,
        not_applicable: Mapping[str, str] | None = None,
        rounds: int | None = None,
    ) -> Metric:
        """Measure one metric: every contender once per round, in rotating order.

        Args:
            metric: Where the values go.
            job_for: The driver job of a contender in a round (``None``: skip it).
            value_of: The metric's value from a driver result.
            timeout: Upper bound of one driver run, in seconds.
            not_applicable: Contender key → why this metric does not apply to it.
            rounds: Rounds of this metric, when not the run's (a figure of a few
                milliseconds needs more samples than one of seconds).
        """
        self.metrics.append(metric)
        skip = dict(not_applicable or {})
        for key, why in self._unavailable.items():
            metric.mark(key, "unavailable", why)
        runnable = [c for c in self.contenders if c.key in self._pythons]
        for c in runnable:
            if c.key in skip:
                metric.mark(c.key, "n/a", skip[c.key])
        runnable = [c for c in runnable if c.key not in skip]
        rounds = self.rounds if rounds is None else rounds
        for round_no in range(rounds):
            shift = round_no % max(1, len(runnable))
            for contender in runnable[shift:] + runnable[:shift]:
                job = job_for(contender, round_no)
                if job is None:
                    continue
                self.log(f"[{self.name}] {metric.key}: {contender.key} (round {round_no + 1}/{rounds})")
                try:
                    result = run_driver(
                        contender,
                        self._pythons[contender.key],
                        job,
                        state_dir=self._state / contender.key,
                        timeout=timeout,
                    )
                except DriverError as exc:
                    metric.mark(contender.key, "failed", str(exc)[:400])
                    self.log(f"[{self.name}]   failed: {str(exc)[:400]}")
                    continue
                try:
                    value = value_of(result)
                except (KeyError, TypeError, ValueError) as exc:
                    metric.mark(contender.key, "failed", f"no value in result: {exc!r}")
                    continue
                extra = {k: v for k, v in result.items() if k != "latencies"}
                metric.add_value(contender.key, value, extra)
        metric.finish()
        # Keep the table order stable: the contenders' order, whatever the rounds did.
        order = [c.key for c in self.contenders]
        metric.results = dict(sorted(metric.results.items(), key=lambda kv: order.index(kv[0])))
        for key, why in self.described.items():
            metric.mark(key, "n/a", why)
        return metric

    def report(self) -> dict[str, Any]:
        """Print every table and return (and write, with ``--json``) the JSON document."""
        versions = {}
        for contender in self.contenders:
            python = self._pythons.get(contender.key)
            if python is not None:
                versions[contender.key] = installed_versions(python, contender.packages)
        document = {
            "benchmark": self.name,
            "title": self.title,
            "goal": self.goal,
            "quick": self.options.quick,
            "rounds": self.rounds,
            "params": self.params,
            "notes": self.notes,
            "verdicts": self.verdicts,
            "machine": {**self.machine_before, "load_after": machine_info()["load"]},
            "contenders": {
                c.key: {"label": c.label, "note": c.note, "backend": c.backend, "versions": versions.get(c.key, {})}
                for c in [*self.contenders, *select_contenders(",".join(self.described), quick=False)]
            },
            "metrics": [m.to_json() for m in self.metrics],
        }
        print(f"\n== {self.title} ==")
        print(f"goal: {self.goal}")
        print(
            f"machine: {self.machine_before['cpus']} cpus; before: {self.machine_before['load']};"
            f" after: {document['machine']['load_after']}; rounds: {self.rounds}"
        )
        for metric in self.metrics:
            print()
            print(format_metric(metric, self.labels))
        for note in self.notes:
            print(f"note: {note}")
        for verdict in self.verdicts:
            print(f"goal check: {verdict}")
        if self.options.baseline is not None:
            document["baseline"] = {"path": str(self.options.baseline)}
            try:
                lines = compare_with_baseline(document, load_baseline(self.options.baseline, self.name))
            except (OSError, ValueError) as exc:
                lines = [f"not compared: {exc}"]
            document["baseline"]["comparison"] = lines
            for line in lines:
                print(f"vs baseline: {line}")
        sys.stdout.flush()
        if self.options.json_path is not None:
            write_json(self.options.json_path, document)
        shutil.rmtree(self._state, ignore_errors=True)
        return document


BASELINE_TOLERANCE: Final = 0.05
"""A median within 5 % of the baseline's is "not worse" (a change smaller than that is noise)."""


def load_baseline(path: Path, name: str) -> dict[str, Any]:
    """Benchmark ``name``'s document from a saved result: its own ``--json``, or a ``benchmarks.all`` file.

    Raises:
        OSError: The file cannot be read.
        ValueError: Not JSON, or it holds no result of ``name``.
    """
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if isinstance(document, dict) and document.get("benchmark") == name:
        return document
    found = document.get("benchmarks", {}).get(name) if isinstance(document, dict) else None
    if not isinstance(found, dict) or "metrics" not in found:
        raise ValueError(f"{path} holds no result of benchmark {name!r}")
    return found


def compare_with_baseline(now: Mapping[str, Any], then: Mapping[str, Any]) -> list[str]:
    """One line per metric both runs have: ours' median then and now, and the same for the raw SDK.

    The raw SDK's change says how much of ours' change is the machine (its load, its
    neighbours) rather than the code; ``ours/raw`` then and now is the comparison that
    survives a different load.
    """
    before = {m["key"]: m for m in then.get("metrics", [])}
    lines = []
    for metric in now.get("metrics", []):
        old = before.get(metric["key"])
        if old is None:
            continue
        higher = metric.get("better") == "higher"
        parts = []
        for key in ("ours", RAW_KEY):
            a = old["results"].get(key, {}).get("median")
            b = metric["results"].get(key, {}).get("median")
            if a and b is not None:
                worse = b < a * (1 - BASELINE_TOLERANCE) if higher else b > a * (1 + BASELINE_TOLERANCE)
                verdict = ", worse" if worse else ""
                parts.append(f"{key} {_fmt(a)} -> {_fmt(b)} {metric['unit']} ({b / a:.2f}x{verdict})")
        a_ratio = old["results"].get("ours", {}).get("ratio_to_raw")
        b_ratio = metric["results"].get("ours", {}).get("ratio_to_raw")
        if a_ratio is not None and b_ratio is not None:
            parts.append(f"ours/raw {a_ratio:.2f}x -> {b_ratio:.2f}x")
        if parts:
            lines.append(f"{metric['key']}: " + "; ".join(parts))
    return lines


CORE: Final = ("ours", RAW_KEY)
"""Contenders whose failure fails the benchmark (peers may not install; ours and raw must run)."""


def core_failures(document: Mapping[str, Any]) -> list[str]:
    """``metric: contender`` for every failed run of ours or the raw SDK in a document."""
    failed = []
    for metric in document.get("metrics", []):
        for key in CORE:
            if metric["results"].get(key, {}).get("status") == "failed":
                failed.append(f"{metric['key']}: {key}")
    return failed


def run_main(
    module_doc: str,
    name: str,
    title: str,
    goal: str,
    run: Callable[[Bench], dict[str, Any]],
    argv: Sequence[str] | None,
    *,
    default_rounds: int,
    only: Sequence[str] | None = None,
) -> None:
    """A benchmark's ``main``: parse, run, report; exit 1 when ours or the raw SDK failed."""
    options = parse_options(module_doc.splitlines()[0], argv)
    document = run(Bench(name, title, goal, options, default_rounds=default_rounds, only=only))
    failed = core_failures(document)
    if failed:
        print(f"{name}: failed runs: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)
