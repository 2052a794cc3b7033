"""HDR tallies: exact merging across workers and machines, the wire form, the result document."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_actors.errors import StressConfigInvalid
from mcp_actors.stress import Histogram, Tally, build_document, compare_documents, merge_documents
from mcp_actors.stress._result import tally_of

latencies = st.lists(st.floats(min_value=1e-6, max_value=100.0), min_size=1, max_size=200)


def _tally(values: list[float], *, error_every: int = 0, offset: float = 0.0) -> Tally:
    tally = Tally()
    for i, v in enumerate(values):
        error = "timeout" if error_every and i % error_every == 0 else None
        tally.record(op="echo", intended=offset + i * 0.01, latency=v, service=v, error=error, measured=True)
    tally.measured_seconds = len(values) * 0.01
    return tally


@settings(max_examples=50, deadline=None)
@given(a=latencies, b=latencies, p=st.sampled_from([50.0, 90.0, 99.0, 99.9, 100.0]))
def test_merged_percentiles_equal_those_of_the_union(a: list[float], b: list[float], p: float) -> None:
    """Merging two histograms gives exactly the histogram of all values together."""
    whole, left, right = Histogram(), Histogram(), Histogram()
    for v in a + b:
        whole.record(v)
    for v in a:
        left.record(v)
    for v in b:
        right.record(v)
    left.add(right)
    assert left.count == whole.count
    assert left.percentile(p) == whole.percentile(p)
    assert left.max == whole.max


def test_merge_is_not_an_average_of_percentiles() -> None:
    """A fast worker and a slow one: the merged p50 is that of the union, not the mean of the two p50s."""
    fast = _tally([0.001] * 90)
    slow = _tally([1.0] * 10)
    merged = Tally.merged([fast, slow])
    assert merged.latency.percentile(50) == pytest.approx(0.001, rel=1e-3)
    assert merged.latency.percentile(95) == pytest.approx(1.0, rel=1e-3)


def test_histogram_is_accurate_to_three_digits() -> None:
    """A recorded latency comes back within 0.1 %."""
    h = Histogram()
    h.record(0.123456)
    assert h.percentile(50) == pytest.approx(0.123456, rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(values=latencies, every=st.integers(0, 5))
def test_wire_form_round_trips(values: list[float], every: int) -> None:
    """to_wire / from_wire keep every count and every histogram exactly (through JSON)."""
    tally = _tally(values, error_every=every)
    back = Tally.from_wire(json.loads(json.dumps(tally.to_wire())))
    assert back.to_wire() == tally.to_wire()


def test_bad_histogram_text_is_refused() -> None:
    """A corrupted histogram in a result is an error naming the histograms, not a crash."""
    doc = build_document(_tally([0.01]), meta={"start_time": 0.0, "target": {}, "settings": {"workers": 1}})
    doc["histograms"]["latency"] = "not-base64!"
    with pytest.raises(StressConfigInvalid, match="histograms"):
        tally_of(doc)


def _doc(tally: Tally, start: float, workers: int = 1) -> dict:
    return build_document(tally, meta={"start_time": start, "target": {"name": "t"}, "settings": {"workers": workers}})


def test_merge_documents_is_exact_and_aligns_seconds() -> None:
    """Two machines' results merge into the union: counts add, seconds align on the earliest start."""
    a = _doc(_tally([0.002] * 100, error_every=10), start=1000.0)
    b = _doc(_tally([0.5] * 100), start=1002.0)
    merged = merge_documents([json.loads(json.dumps(a)), json.loads(json.dumps(b))])
    s = merged["summary"]
    assert s["requests"] == 200
    assert s["errors"] == 10
    assert merged["errors"] == {"timeout": 10}
    assert merged["runs"] == 2
    assert merged["settings"]["workers"] == 2
    assert s["latency_ms"]["p50"] == pytest.approx(2.0, rel=1e-3)
    assert s["latency_ms"]["p99"] == pytest.approx(500.0, rel=1e-3)
    ts = [row["t"] for row in merged["series"]]
    assert ts == [0, 2]  # b's second 0 is the merged second 2
    assert merged["series"][1]["p50_ms"] == pytest.approx(500.0, rel=1e-3)


def test_compare_marks_better_and_worse() -> None:
    """Compare: lower latency is better, more errors is worse, the change is relative."""
    a = _doc(_tally([0.010] * 100), start=0.0)
    b = _doc(_tally([0.005] * 100, error_every=50), start=0.0)
    rows = {r["metric"]: r for r in compare_documents(a, b)}
    assert rows["latency p50 (ms)"]["better"] is True
    assert rows["latency p50 (ms)"]["change"] == pytest.approx(-0.5, rel=1e-2)
    assert rows["errors: timeout"]["better"] is False
    assert rows["throughput"]["better"] is None
