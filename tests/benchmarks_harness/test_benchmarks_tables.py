"""The benchmarks' bookkeeping, without running a benchmark: ratios, tables, guard lines, baselines.

The numbers a reader compares (ratios to the raw SDK and to the floor, a run against a
saved baseline) are computed here; a mistake in them would mislead every report, so they
are checked on hand-made metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._common import (
    Bench,
    BenchOptions,
    Metric,
    compare_with_baseline,
    format_metric,
    load_baseline,
    parse_options,
)
from benchmarks._report import markdown_report
from benchmarks.hot_path import NOT_ON_THE_HOT_PATH, _guard_line


def metric(values: dict[str, float], *, key: str = "m", better: str = "lower", unit: str = "us") -> Metric:
    """A finished metric with one round per contender."""
    m = Metric(key=key, title=f"title of {key}", unit=unit, better=better)
    for contender, value in values.items():
        m.add_value(contender, value)
    m.finish()
    return m


def test_ratios_to_raw_and_floor() -> None:
    """Every contender gets its median over the raw SDK's and over the floor's."""
    m = metric({"floor": 100.0, "ours": 300.0, "raw": 400.0})
    assert m.results["ours"]["ratio_to_raw"] == pytest.approx(0.75)
    assert m.results["ours"]["ratio_to_floor"] == pytest.approx(3.0)
    assert m.results["raw"]["ratio_to_floor"] == pytest.approx(4.0)


def test_floor_column_only_when_the_floor_ran() -> None:
    """The text table has a "vs floor" column exactly when the floor was measured."""
    with_floor = format_metric(metric({"floor": 100.0, "ours": 300.0, "raw": 400.0}), {"ours": "mcp-actors"})
    without = format_metric(metric({"ours": 300.0, "raw": 400.0}), {"ours": "mcp-actors"})
    assert "vs floor" in with_floor and "3.00x" in with_floor
    assert "vs floor" not in without


def test_p90_and_vs_raw_columns_only_when_there_are_values() -> None:
    """A p90 column when the benchmark recorded one (cli_start); "vs raw" only when the raw SDK ran."""
    m = metric({"floor": 10.0, "ours": 30.0})
    for entry, p90 in zip(m.results.values(), (12.0, 35.0), strict=True):
        entry["p90"] = p90
    table = format_metric(m, {"ours": "mcp-actors"})
    header, ours_row = table.splitlines()[2], table.splitlines()[4]
    assert header.split() == ["contender", "median", "p90", "min..max", "spread", "vs", "floor", "note"]
    assert ours_row.split() == ["mcp-actors", "30.0", "35.0", "30.0..30.0", "0%", "3.00x"]
    assert "p90" not in format_metric(metric({"ours": 300.0, "raw": 400.0}), {})


def test_guard_line_names_raw_and_floor() -> None:
    """The CI guard line gives mcp-actors' latency, calls/s and CPU against the raw SDK and the floor."""
    latency = metric({"floor": 100.0, "ours": 300.0, "raw": 400.0})
    rate = metric({"floor": 8000.0, "ours": 4000.0, "raw": 2000.0}, better="higher")
    cpu = metric({"floor": 50.0, "ours": 150.0, "raw": 300.0})
    line = _guard_line("light", latency.results["ours"], rate.results["ours"], cpu.results["ours"])
    assert line == (
        "light: latency 0.75x raw, 3.00x floor; calls/s 2.00x raw, 0.50x floor;"
        " CPU/call 150 us (0.50x raw, 3.00x floor)"
    )
    assert _guard_line("light", {}, rate.results["ours"], cpu.results["ours"]) is None


def test_described_contender_is_one_row_and_never_run(tmp_path: Path) -> None:
    """A described peer (langchain on the hot path) is an n/a row with its reason, and is never installed."""
    options = BenchOptions(contenders="ours", json_path=tmp_path / "out.json")
    bench = Bench("t", "T", "goal", options, default_rounds=1, described=NOT_ON_THE_HOT_PATH)
    assert [c.key for c in bench.contenders] == ["ours"] and "langchain" not in bench._pythons
    bench.measure(Metric(key="m", title="M", unit="us"), lambda _c, _r: None, float, timeout=1)
    document = bench.report()
    row = document["metrics"][0]["results"]["langchain"]
    assert row["status"] == "n/a" and "new server process" in row["errors"][0]
    assert document["contenders"]["langchain"]["label"] == "langchain-mcp-adapters"
    table = markdown_report({"benchmarks": {"t": {**document, "status": "ok"}}, "machine": document["machine"]})
    assert "| langchain-mcp-adapters | n/a |" in table


def test_baseline_comparison_marks_a_worse_median(tmp_path: Path) -> None:
    """Against a saved run, each metric shows ours' and raw's medians then and now; a >5% rise is "worse"."""
    then = {"benchmark": "memory", "metrics": [metric({"ours": 100.0, "raw": 80.0}, key="servers_200").to_json()]}
    now = {"metrics": [metric({"ours": 110.0, "raw": 80.0}, key="servers_200", unit="KiB").to_json()]}
    [line] = compare_with_baseline(now, then)
    assert line == (
        "servers_200: ours 100 -> 110 KiB (1.10x, worse); raw 80.0 -> 80.0 KiB (1.00x); ours/raw 1.25x -> 1.38x"
    )
    faster = {"metrics": [metric({"ours": 104.0}, key="servers_200", better="higher").to_json()]}
    assert "worse" not in compare_with_baseline(faster, then)[0]
    suite = tmp_path / "all.json"
    suite.write_text(json.dumps({"benchmarks": {"memory": then}}))
    assert load_baseline(suite, "memory") == then
    with pytest.raises(ValueError, match="no result of benchmark 'hot_path'"):
        load_baseline(suite, "hot_path")


def test_baseline_option_parsed() -> None:
    """``--baseline PATH`` reaches the options of every benchmark."""
    assert parse_options("x", ["--baseline", "b.json"]).baseline == Path("b.json")
