"""The result document of a run: built from a tally, merged across machines, compared, judged.

The document (``--json``) has a stable schema, ``mcp-actors/stress-result/1``; everything
in it is derived from the embedded ``histograms`` part (encoded HDR histograms and
per-second counts) plus the run's settings, which is why ``merge`` is exact: it decodes
the tallies, adds them, and derives the document again.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp_actors.errors import StressConfigInvalid
from mcp_actors.stress._parse import Slo
from mcp_actors.stress._tally import Tally

__all__ = [
    "SCHEMA",
    "build_document",
    "compare_documents",
    "evaluate_slos",
    "load_document",
    "merge_documents",
    "tally_of",
]

SCHEMA = "mcp-actors/stress-result/1"


def build_document(tally: Tally, *, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The result document of ``tally``.

    Args:
        tally: Every worker's calls, merged.
        meta: ``start_time`` (epoch seconds), ``target`` and ``settings`` (JSON-able), and
            optionally ``runs`` (how many runs were merged into this one).
    """
    requests = tally.requests
    errors = tally.error_count
    measured = tally.measured_seconds
    start_time = float(meta["start_time"])
    series = []
    for index in sorted(tally.seconds):
        sec = tally.seconds[index]
        series.append(
            {
                "t": index,
                "sent": sec.sent,
                "ok": sec.ok,
                "errors": sec.errors,
                "p50_ms": round(sec.latency.percentile(50) * 1e3, 3),
                "p90_ms": round(sec.latency.percentile(90) * 1e3, 3),
                "p99_ms": round(sec.latency.percentile(99) * 1e3, 3),
                "max_ms": round(sec.latency.max * 1e3, 3),
            }
        )
    return {
        "schema": SCHEMA,
        "started_at": _dt.datetime.fromtimestamp(start_time, _dt.UTC).isoformat(timespec="milliseconds"),
        "start_time": start_time,
        "runs": int(meta.get("runs", 1)),
        "target": dict(meta["target"]),
        "settings": dict(meta["settings"]),
        "summary": {
            "requests": requests,
            "ok": requests - errors,
            "errors": errors,
            "error_ratio": errors / requests if requests else 0.0,
            "throughput": requests / measured if measured > 0 else 0.0,
            "send_rate": tally.send_rate,
            "late_sends": tally.late_sends,
            "max_send_lag_ms": round(tally.max_send_lag * 1e3, 3),
            "measured_seconds": round(measured, 6),
            "warmup_calls": tally.warmup_calls,
            "over_timeout": tally.over_timeout,
            "latency_ms": tally.latency.summary_ms(),
            "service_ms": tally.service.summary_ms(),
        },
        "errors": dict(sorted(tally.errors.items())),
        "operations": {
            name: {
                "requests": op.requests,
                "errors": dict(sorted(op.errors.items())),
                "error_ratio": sum(op.errors.values()) / op.requests if op.requests else 0.0,
                "latency_ms": op.latency.summary_ms(),
            }
            for name, op in sorted(tally.ops.items())
        },
        "series": series,
        "spectrum": [[p, round(ms, 3)] for p, ms in tally.latency.spectrum_ms()],
        "chaos": {"outages": list(tally.outages), "calls_over_timeout": tally.over_timeout},
        "histograms": tally.to_wire(),
    }


def load_document(path: str | Path) -> dict[str, Any]:
    """Read a result document written by ``--json``.

    Raises:
        StressConfigInvalid: Unreadable, not JSON, or not a stress result of this schema.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise StressConfigInvalid(f"cannot read result {str(path)!r} ({exc.strerror})", field="file") from None
    except json.JSONDecodeError as exc:
        raise StressConfigInvalid(f"result {str(path)!r} is not JSON: {exc}", field="file") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise StressConfigInvalid(
            f"{str(path)!r} is not a stress result of schema {SCHEMA} (found {found!r}); "
            "write it with 'mcp-actors stress --json'",
            field="file",
        )
    return doc


def tally_of(doc: Mapping[str, Any], *, shift: int = 0) -> Tally:
    """The exact tally embedded in a result document.

    Raises:
        StressConfigInvalid: Its histograms part is malformed.
    """
    try:
        return Tally.from_wire(doc["histograms"], shift=shift)
    except (KeyError, ValueError) as exc:
        raise StressConfigInvalid(f"the result's histograms are unusable: {exc}", field="histograms") from None


def merge_documents(docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Combine runs made at the same time on several machines into one exact result.

    Histograms and counts are added (percentiles of the union of all calls); the seconds
    of each run are aligned on the earliest start; the settings are the first run's,
    with the worker counts added up.

    Raises:
        StressConfigInvalid: Fewer than one document, or a malformed one.
    """
    if not docs:
        raise StressConfigInvalid("merge needs at least one result", field="files")
    first = min(float(d["start_time"]) for d in docs)
    tally = Tally.merged(tally_of(d, shift=round(float(d["start_time"]) - first)) for d in docs)
    settings = dict(docs[0]["settings"])
    settings["workers"] = sum(int(d["settings"].get("workers", 1) or 1) for d in docs)
    meta = {
        "start_time": first,
        "target": docs[0]["target"],
        "settings": settings,
        "runs": sum(int(d.get("runs", 1)) for d in docs),
    }
    return build_document(tally, meta=meta)


_SLO_LATENCY = {"max", "mean"}


def slo_actual(doc: Mapping[str, Any], slo: Slo) -> float:
    """The measured value an SLO is judged on (seconds, ratio or calls/s)."""
    summary = doc["summary"]
    if slo.metric == "errors":
        return float(summary["error_ratio"])
    if slo.metric == "rate":
        return float(summary["throughput"])
    if slo.metric in _SLO_LATENCY:
        return float(summary["latency_ms"][slo.metric]) / 1e3
    # Any percentile, straight from the exact histogram.
    return tally_of(doc).latency.percentile(float(slo.metric[1:]))


def evaluate_slos(doc: Mapping[str, Any], slos: Sequence[Slo]) -> list[dict[str, Any]]:
    """Judge every threshold: ``[{"threshold", "actual", "ok"}]`` (actual in the threshold's unit)."""
    return [
        {"threshold": slo.text, "actual": round(actual, 9), "ok": slo.holds(actual)}
        for slo in slos
        for actual in [slo_actual(doc, slo)]
    ]


_COMPARED = [
    ("throughput", ("summary", "throughput"), "calls/s", True),
    ("error ratio", ("summary", "error_ratio"), "", False),
    ("requests", ("summary", "requests"), "", True),
]


def compare_documents(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows ``{"metric", "a", "b", "change", "better"}`` of two runs (``b`` against ``a``).

    ``change`` is the relative change (``b / a - 1``, ``None`` when ``a`` is 0);
    ``better`` says whether the change is an improvement (lower latency, fewer errors,
    more throughput), ``None`` when equal.
    """
    rows: list[dict[str, Any]] = []

    def row(metric: str, va: float, vb: float, higher_is_better: bool) -> None:
        change = (vb / va - 1.0) if va else None
        better = None if vb == va else (vb > va) == higher_is_better
        rows.append({"metric": metric, "a": va, "b": vb, "change": change, "better": better})

    for metric, (part, key), _unit, higher in _COMPARED:
        row(metric, float(a[part][key]), float(b[part][key]), higher)
    for key in a["summary"]["latency_ms"]:
        if key in b["summary"]["latency_ms"]:
            row(f"latency {key} (ms)", a["summary"]["latency_ms"][key], b["summary"]["latency_ms"][key], False)
    kinds = sorted(set(a["errors"]) | set(b["errors"]))
    for kind in kinds:
        row(f"errors: {kind}", float(a["errors"].get(kind, 0)), float(b["errors"].get(kind, 0)), False)
    return rows
