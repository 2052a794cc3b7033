"""Markdown and summary rendering of benchmark results (the README's Performance section).

Re-render a saved run without measuring again::

    python -m benchmarks._report benchmarks/results/all-<time>.json > docs/performance.md
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SHORT: dict[str, str] = {
    "floor": "floor",
    "raw": "raw SDK",
    "raw-asyncio": "raw SDK (asyncio)",
    "session-group": "ClientSessionGroup",
    "langchain": "langchain",
    "fastmcp": "fastmcp",
    "openai-agents": "openai-agents",
}
"""Column headings of the headline table (the full labels are in the detailed tables)."""

TITLES: dict[str, str] = {"conversion": "5. Conversion"}
"""Section titles of benchmarks whose JSON carries none."""

DETAIL_ONLY: frozenset[str] = frozenset({"conversion"})
"""Benchmarks with many single-contender cells: shown in their own section, not the headline."""

__all__ = ["headline_rows", "markdown_report"]


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if 0.1 <= value < 100 else f"{value:.3g}x"


def _label(doc: Mapping[str, Any], key: str) -> str:
    return str(doc.get("contenders", {}).get(key, {}).get("label", key))


def headline_rows(suite: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per metric of every benchmark: ours, raw, and ours relative to each other contender.

    A ratio ``ours / other`` is of the metric's values as they are: below 1 is better for
    ours when lower is better (latency, seconds, memory), above 1 when higher is better
    (calls/s).
    """
    rows: list[dict[str, Any]] = []
    for name, doc in suite.get("benchmarks", {}).items():
        if name in DETAIL_ONLY:
            continue
        for metric in doc.get("metrics", []) if isinstance(doc, Mapping) else []:
            if not isinstance(metric, Mapping) or "results" not in metric:
                continue
            results = metric["results"]
            ours = results.get("ours", {})
            rows.append(
                {
                    "benchmark": name,
                    "metric": metric.get("title", metric.get("key")),
                    "unit": metric.get("unit", ""),
                    "better": metric.get("better", "lower"),
                    "ours": ours.get("median"),
                    "ours_spread_pct": ours.get("spread_pct"),
                    "raw": results.get("raw", {}).get("median"),
                    "ours_vs": dict(ours.get("ours_vs", {})),
                    "others": {k: v.get("median") for k, v in results.items() if k != "ours"},
                    "status": {k: v.get("status") for k, v in results.items()},
                }
            )
    return rows


def _metric_table(doc: Mapping[str, Any], metric: Mapping[str, Any]) -> list[str]:
    results = metric.get("results", {})
    # The hot-path tables carry the hand-written floor: a "vs floor" column beside "vs raw".
    floor = any("ratio_to_floor" in entry for entry in results.values())
    lines = [
        f"**{metric.get('title')}** ({metric.get('unit')}, {metric.get('better', 'lower')} is better)",
        "",
        "| contender | median | min to max | spread | vs raw |" + (" vs floor |" if floor else ""),
        "|---|---:|---:|---:|---:|" + ("---:|" if floor else ""),
    ]
    for key, entry in results.items():
        label = _label(doc, key)
        note = entry.get("note")
        if note:
            label += f" ({note})"
        if "median" in entry:
            low, high = entry.get("min", entry["median"]), entry.get("max", entry["median"])
            lines.append(
                f"| {label} | {_fmt(entry['median'])} | {_fmt(low)} to {_fmt(high)} "
                f"| {entry.get('spread_pct', 0):.0f}% | {_ratio(entry.get('ratio_to_raw'))} |"
                + (f" {_ratio(entry.get('ratio_to_floor'))} |" if floor else "")
            )
        else:
            why = "; ".join(dict.fromkeys(entry.get("errors", [])))[:160].replace("|", "/")
            lines.append(f"| {label} | {entry.get('status')} | {why} | | |" + (" |" if floor else ""))
    lines.append("")
    return lines


def _rows_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A benchmark's own result rows (``conversion``: tools x mode) as one table."""
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---:|" * len(columns)]
    for row in rows:
        cells = [_fmt(v) if isinstance(v, int | float) and not isinstance(v, bool) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def markdown_report(suite: Mapping[str, Any]) -> str:
    """The whole run as Markdown: machine, headline table, then every benchmark's tables."""
    machine = suite.get("machine", {})
    out = [
        "## Performance",
        "",
        f"One full run (`python -m benchmarks.all`) on {machine.get('cpus')} cores, "
        f"{machine.get('platform', '')}, Python {machine.get('python', '')}, {machine.get('time', '')}. "
        f"Load before: {machine.get('load')}; after: {machine.get('load_after')}.",
        "",
        "Medians over rounds; *spread* is (max - min) / median over the rounds. Ratios are "
        "`mcp-actors / other`: below 1 is better for mcp-actors where lower is better, above 1 "
        "where higher is better.",
        "",
        "### Headline",
        "",
    ]
    rows = headline_rows(suite)
    peers: list[str] = []
    for row in rows:
        for key in row["ours_vs"]:
            if key not in peers and key != "raw":
                peers.append(key)
    labels: dict[str, str] = {}
    for doc in suite.get("benchmarks", {}).values():
        if isinstance(doc, Mapping):
            for key, contender in doc.get("contenders", {}).items():
                labels.setdefault(key, contender.get("label", key))
    header = "| benchmark | metric | better | mcp-actors | raw SDK | ÷ raw SDK | " + " | ".join(
        f"÷ {SHORT.get(p, labels.get(p, p))}" for p in peers
    )
    out += [header + " |", "|---|---|---|---:|---:|---:|" + "---:|" * len(peers)]
    for row in rows:
        if row["ours"] is None:
            continue
        unit = row["unit"]
        raw = row["raw"]
        cells = [
            row["benchmark"],
            row["metric"],
            row["better"],
            f"{_fmt(row['ours'])} {unit}",
            f"{_fmt(raw)} {unit}" if raw is not None else "-",
            _ratio(row["ours_vs"].get("raw")),
        ]
        cells += [_ratio(row["ours_vs"].get(p)) for p in peers]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for name, doc in suite.get("benchmarks", {}).items():
        if not isinstance(doc, Mapping):
            continue
        out.append(f"### {doc.get('title', TITLES.get(name, name))}")
        out.append("")
        if doc.get("status") and doc.get("status") != "ok":
            out += [f"Not measured: {doc.get('status')}: {doc.get('error', '')}", ""]
            continue
        if doc.get("goal"):
            out += [f"Goal: {doc['goal']}.", ""]
        metrics = [m for m in doc.get("metrics", []) if isinstance(m, Mapping) and "results" in m]
        result_rows = doc.get("rows")
        if isinstance(result_rows, list) and result_rows and isinstance(result_rows[0], Mapping):
            out += _rows_table(result_rows)
        else:
            for metric in metrics:
                out += _metric_table(doc, metric)
            if not metrics:
                out += ["(see the JSON result for this benchmark's numbers)", ""]
        for note in doc.get("notes", []):
            out.append(f"- {note}")
        for verdict in doc.get("verdicts", []):
            out.append(f"- goal check: {verdict}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Print the Markdown report of a saved ``benchmarks.all`` JSON result."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        raise SystemExit("usage: python -m benchmarks._report RESULT.json")
    sys.stdout.write(markdown_report(json.loads(Path(args[0]).read_text())))


if __name__ == "__main__":
    main()
