"""Human outputs of a result document: the final table, the CSV series, the HTML report.

The HTML report is one self-contained file: inline CSS and inline SVG drawn here, no
script, no font, no image fetched from anywhere, so it opens offline and can be attached
to a CI run as is.
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from mcp_actors.naming import plural

__all__ = ["render_csv", "render_html", "render_tables", "render_compare"]

_SERIES_COLUMNS = ("t", "sent", "ok", "errors", "p50_ms", "p90_ms", "p99_ms", "max_ms")


def _ms(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def render_tables(doc: Mapping[str, Any]) -> Group:
    """The final tables: summary and latency percentiles, errors by kind, per operation, chaos, SLOs."""
    s = doc["summary"]
    parts: list[Any] = []
    head = Table(title=f"stress: {doc['target']['name']} ({doc['target']['type']})", show_header=False, box=None)
    head.add_column(style="bold")
    head.add_column()
    settings = doc["settings"]
    if settings["model"] == "open":
        rates = settings["rate"]
        load = f"open model, {rates[0]['start']:g}" + (f"..{rates[-1]['end']:g}" if len(rates) > 1 else "") + " calls/s"
    else:
        load = f"closed model, {settings['users']} users" + (
            f", think {settings['think']:g}s" if settings["think"] else ""
        )
    workers, connections = plural(settings["workers"], "worker"), plural(settings["connections"], "connection")
    head.add_row("load", f"{load}, {workers} x {connections}")
    head.add_row(
        "requests", f"{s['requests']} in {s['measured_seconds']:.2f} s ({s['warmup_calls']} warmup calls excluded)"
    )
    head.add_row("throughput", f"{s['throughput']:.1f} calls/s")
    head.add_row("errors", f"{s['errors']} ({s['error_ratio'] * 100:.3f} %)")
    if s.get("late_sends"):
        head.add_row("[yellow]warning[/]", Text(_late_text(s), style="yellow"))
    parts.append(head)

    lat = Table(title="latency (from intended send time)")
    for key in s["latency_ms"]:
        lat.add_column(key, justify="right")
    lat.add_row(*(_ms(v) for v in s["latency_ms"].values()))
    lat.add_row(*(_ms(v) for v in s["service_ms"].values()), style="dim")
    parts.append(lat)
    parts.append(Text("  dim row: service time (from actual send); they differ when calls queued", style="dim"))

    if doc["operations"]:
        ops = Table(title="by operation")
        for col in ("operation", "requests", "errors", "p50", "p99", "max", "errors by kind"):
            ops.add_column(col, justify="left" if col in ("operation", "errors by kind") else "right")
        for name, op in doc["operations"].items():
            kinds = ", ".join(f"{k}: {n}" for k, n in op["errors"].items()) or "-"
            ops.add_row(
                name,
                str(op["requests"]),
                str(sum(op["errors"].values())),
                _ms(op["latency_ms"]["p50"]),
                _ms(op["latency_ms"]["p99"]),
                _ms(op["latency_ms"]["max"]),
                kinds,
            )
        parts.append(ops)
    if doc["errors"]:
        errs = Table(title="errors by kind")
        errs.add_column("kind")
        errs.add_column("count", justify="right")
        for kind, n in doc["errors"].items():
            errs.add_row(kind, str(n))
        parts.append(errs)
    outages = doc["chaos"]["outages"]
    if outages or settings.get("chaos"):
        chaos = Table(title=f"chaos (calls over their timeout: {doc['chaos']['calls_over_timeout']})")
        for col in ("at", "kind", "worker", "errors", "first failure after", "recovered after", "max latency"):
            chaos.add_column(col, justify="right")
        for o in outages:
            chaos.add_row(
                f"{o['at']:.2f} s",
                o["kind"],
                str(o["worker"]),
                str(o["errors"]),
                "-" if o["time_to_first_failure"] is None else _ms(o["time_to_first_failure"] * 1e3),
                "not recovered" if o["time_to_recovery"] is None else _ms(o["time_to_recovery"] * 1e3),
                _ms(o["max_latency"] * 1e3),
            )
        parts.append(chaos)
    if doc["series"]:
        series = Table(title="per second")
        for col in ("t", "calls", "ok", "errors", "p50", "p99", "max"):
            series.add_column(col, justify="right")
        for row in doc["series"]:
            series.add_row(
                str(row["t"]),
                str(row["sent"]),
                str(row["ok"]),
                str(row["errors"]),
                _ms(row["p50_ms"]),
                _ms(row["p99_ms"]),
                _ms(row["max_ms"]),
            )
        parts.append(series)
    if doc.get("slo"):
        slo = Table(title="thresholds")
        slo.add_column("threshold")
        slo.add_column("actual", justify="right")
        slo.add_column("result")
        for item in doc["slo"]:
            slo.add_row(item["threshold"], f"{item['actual']:.6g}", "[green]pass[/]" if item["ok"] else "[red]FAIL[/]")
        parts.append(slo)
    return Group(*parts)


def _late_text(s: Mapping[str, Any]) -> str:
    return (
        f"{plural(s['late_sends'], 'call')} {'was' if s['late_sends'] == 1 else 'were'} sent more than 10 ms after"
        f" {'its' if s['late_sends'] == 1 else 'their'} intended time (up to "
        f"{_ms(s['max_send_lag_ms'])}): the load generator could not keep the schedule; their latency still "
        "counts from the intended time, but use more workers or machines (or a larger --max-in-flight)"
    )


def render_compare(rows: Sequence[Mapping[str, Any]], a_name: str, b_name: str) -> Table:
    """A table of :func:`~mcp_actors.stress.compare_documents` rows."""
    table = Table(title=f"{b_name} against {a_name}")
    for col in ("metric", a_name, b_name, "change"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in rows:
        change = "-" if row["change"] is None else f"{row['change'] * 100:+.1f} %"
        style = "" if row["better"] is None else ("green" if row["better"] else "red")
        table.add_row(row["metric"], f"{row['a']:.6g}", f"{row['b']:.6g}", Text(change, style=style))
    return table


def render_csv(doc: Mapping[str, Any]) -> str:
    """The per-second series as CSV (``t`` is seconds since the start, by intended send time)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_SERIES_COLUMNS)
    for row in doc["series"]:
        writer.writerow([row[c] for c in _SERIES_COLUMNS])
    return out.getvalue()


# ----------------------------------------------------------------------------- HTML

_W, _H = 760, 260
_L, _R, _T, _B = 64, 36, 16, 40
_COLORS = {"p50": "#2b6cb0", "p90": "#38a169", "p99": "#dd6b20", "max": "#c53030"}


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(value))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= m * exp:
            return float(m * exp)
    return float(10 * exp)


def _axes(x_ticks: Sequence[tuple[float, str]], y_max: float, y_unit: str, x_label: str) -> list[str]:
    pw, ph = _W - _L - _R, _H - _T - _B
    out = [f'<rect x="{_L}" y="{_T}" width="{pw}" height="{ph}" class="plot"/>']
    for i in range(5):
        v = y_max * i / 4
        y = _T + ph - ph * i / 4
        out.append(f'<line x1="{_L}" x2="{_L + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{_L - 6}" y="{y + 4:.1f}" class="ytick">{v:g}{html.escape(y_unit)}</text>')
    for x, label in x_ticks:
        out.append(f'<text x="{x:.1f}" y="{_T + ph + 16}" class="xtick">{html.escape(label)}</text>')
    out.append(f'<text x="{_L + pw / 2}" y="{_H - 6}" class="xlabel">{html.escape(x_label)}</text>')
    return out


def _svg(title: str, body: Sequence[str], legend: Sequence[tuple[str, str]]) -> str:
    items = "".join(
        f'<span class="key"><span class="swatch" style="background:{c}"></span>{html.escape(n)}</span>'
        for n, c in legend
    )
    return (
        f'<figure><figcaption>{html.escape(title)}<span class="legend">{items}</span></figcaption>'
        # The viewBox keeps the drawing's proportions; CSS makes it as wide as the page.
        f'<svg viewBox="0 0 {_W} {_H}" role="img" aria-label="{html.escape(title)}">'
        + "".join(body)
        + "</svg></figure>"
    )


def _time_ticks(t_max: float) -> list[tuple[float, str]]:
    pw = _W - _L - _R
    step = max(1, math.ceil(t_max / 10))
    return [(_L + pw * t / max(t_max, 1), f"{t}s") for t in range(0, int(t_max) + 1, step)]


def _marks(doc: Mapping[str, Any], t_max: float) -> list[str]:
    """The warmup (shaded) and every chaos event (a dashed line), on a time axis."""
    pw, ph = _W - _L - _R, _H - _T - _B
    out = []
    warmup = float(doc["settings"].get("warmup") or 0.0)
    if warmup > 0:
        w = pw * min(warmup, t_max) / t_max
        out.append(f'<rect x="{_L}" y="{_T}" width="{w:.1f}" height="{ph}" class="warmup"><title>warmup</title></rect>')
        out.append(f'<text x="{_L + 4}" y="{_T + 12}" class="mark">warmup</text>')
    seen: set[tuple[str, float]] = set()
    for o in doc["chaos"]["outages"]:
        key = (str(o["kind"]), round(float(o["at"]), 1))
        if key in seen:
            continue
        seen.add(key)
        x = _L + pw * min(float(o["at"]), t_max) / t_max
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_T}" y2="{_T + ph}" class="chaos">'
            f"<title>{html.escape(key[0])} at {key[1]:g}s</title></line>"
        )
        out.append(f'<text x="{x + 3:.1f}" y="{_T + 12}" class="mark">{html.escape(key[0])}</text>')
    return out


def _latency_over_time(doc: Mapping[str, Any]) -> str:
    series = doc["series"]
    pw, ph = _W - _L - _R, _H - _T - _B
    t_max = max((r["t"] for r in series), default=0) + 1
    y_max = _nice_max(max((r["max_ms"] for r in series), default=1.0))
    body = _axes(_time_ticks(t_max), y_max, " ms", "seconds since start (by intended send time)")
    body += _marks(doc, t_max)
    for key, color in _COLORS.items():
        points = " ".join(
            f"{_L + pw * (r['t'] + 0.5) / t_max:.1f},{_T + ph - ph * r[f'{key}_ms'] / y_max:.1f}" for r in series
        )
        body.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2" class="line-{key}"/>')
        for r in series:
            x, y = _L + pw * (r["t"] + 0.5) / t_max, _T + ph - ph * r[f"{key}_ms"] / y_max
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}">'
                f"<title>t={r['t']}s {key}={r[f'{key}_ms']:g} ms</title></circle>"
            )
    return _svg("Latency over time", body, [(k, c) for k, c in _COLORS.items()])


def _spectrum(points: Sequence[Sequence[float]]) -> str:
    pw, ph = _W - _L - _R, _H - _T - _B

    # x: "nines" scale, 0 at p0, 1 at p90, 2 at p99, ... up to p99.999.
    def nx(p: float) -> float:
        return -math.log10(max(1 - p / 100, 1e-5))

    x_max = 5.0
    y_max = _nice_max(max((ms for _, ms in points), default=1.0))
    ticks = [(_L + pw * nx(p) / x_max, f"p{p:g}") for p in (0, 90, 99, 99.9, 99.99, 99.999)]
    body = _axes(ticks, y_max, " ms", "percentile")
    coords = [(_L + pw * min(nx(p), x_max) / x_max, _T + ph - ph * ms / y_max) for p, ms in points]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    body.append(f'<polyline points="{path}" fill="none" stroke="#6b46c1" stroke-width="2.5" class="spectrum"/>')
    for (p, ms), (x, y) in zip(points, coords, strict=True):
        body.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="#6b46c1"><title>p{p:g} = {ms:g} ms</title></circle>'
        )
    return _svg("Latency percentile spectrum", body, [("latency", "#6b46c1")])


def _throughput(doc: Mapping[str, Any]) -> str:
    series = doc["series"]
    pw, ph = _W - _L - _R, _H - _T - _B
    t_max = max((r["t"] for r in series), default=0) + 1
    y_max = _nice_max(max((r["sent"] for r in series), default=1))
    body = _axes(_time_ticks(t_max), y_max, "/s", "seconds since start")
    bar = pw / t_max
    for r in series:
        x = _L + bar * r["t"] + bar * 0.1
        h_ok = ph * r["ok"] / y_max
        h_err = ph * r["errors"] / y_max
        y_ok = _T + ph - h_ok
        body.append(
            f'<rect x="{x:.1f}" y="{y_ok:.1f}" width="{bar * 0.8:.1f}" height="{h_ok:.1f}" fill="#3182ce" class="ok">'
            f"<title>t={r['t']}s ok={r['ok']}</title></rect>"
        )
        if r["errors"]:
            body.append(
                f'<rect x="{x:.1f}" y="{y_ok - h_err:.1f}" width="{bar * 0.8:.1f}" height="{h_err:.1f}" '
                f'fill="#e53e3e" class="err"><title>t={r["t"]}s errors={r["errors"]}</title></rect>'
            )
    body += _marks(doc, t_max)  # over the bars
    return _svg("Throughput and errors per second", body, [("ok", "#3182ce"), ("errors", "#e53e3e")])


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;
  color:#1a202c;background:#fff}
h1{font-size:20px;margin:0 0 4px} .sub{color:#4a5568;margin-bottom:16px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0 20px}
.card{border:1px solid #e2e8f0;border-radius:8px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px} .card span{color:#4a5568;font-size:12px}
.bad b{color:#c53030} .good b{color:#2f855a}
figure{margin:0 0 18px} figcaption{font-weight:600;margin-bottom:4px}
figure svg{display:block;width:100%;height:auto}
.legend{font-weight:400;margin-left:16px;color:#4a5568}
.key{margin-right:12px}.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
svg .plot{fill:#fbfdff;stroke:#cbd5e0} svg .grid{stroke:#edf2f7}
svg .warmup{fill:#edf2f7;opacity:.7} svg .chaos{stroke:#805ad5;stroke-width:1.5;stroke-dasharray:4 3}
svg .mark{font-size:10px;fill:#553c9a}
svg text{font-size:11px;fill:#4a5568} svg .ytick{text-anchor:end} svg .xtick,svg .xlabel{text-anchor:middle}
table{border-collapse:collapse;margin:6px 0 18px}
th,td{padding:3px 10px;border-bottom:1px solid #edf2f7;text-align:right}
th:first-child,td:first-child{text-align:left} th{background:#f7fafc}
.pass{color:#2f855a;font-weight:600}.fail{color:#c53030;font-weight:600}
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _rate_text(step: Mapping[str, Any]) -> str:
    rate = f"{step['start']:g}/s" if step["start"] == step["end"] else f"{step['start']:g}..{step['end']:g}/s"
    return rate if step["seconds"] is None else f"{rate} for {step['seconds']:g}s"


def render_html(doc: Mapping[str, Any]) -> str:
    """The self-contained HTML report of a result document."""
    s = doc["summary"]
    target = doc["target"]
    e = html.escape
    cards = [
        ("requests", str(s["requests"]), ""),
        ("calls/s", f"{s['throughput']:.1f}", ""),
        ("errors", f"{s['error_ratio'] * 100:.2f} %", "bad" if s["errors"] else "good"),
        ("p50", _ms(s["latency_ms"]["p50"]), ""),
        ("p99", _ms(s["latency_ms"]["p99"]), ""),
        ("p99.99", _ms(s["latency_ms"]["p99.99"]), ""),
        ("max", _ms(s["latency_ms"]["max"]), ""),
    ]
    for item in doc.get("slo", []):
        cards.append((item["threshold"], "pass" if item["ok"] else "FAIL", "good" if item["ok"] else "bad"))
    if s.get("late_sends"):
        cards.append(("calls sent late", str(s["late_sends"]), "bad"))
    card_html = "".join(f'<div class="card {c}"><b>{e(v)}</b><span>{e(k)}</span></div>' for k, v, c in cards)
    pct = _table(
        ["", *s["latency_ms"].keys()],
        [
            ["latency (from intended send)", *(_ms(v) for v in s["latency_ms"].values())],
            ["service time (from actual send)", *(_ms(v) for v in s["service_ms"].values())],
        ],
    )
    ops = _table(
        ["operation", "requests", "errors", "p50", "p99", "max", "errors by kind"],
        [
            [
                e(name),
                op["requests"],
                sum(op["errors"].values()),
                _ms(op["latency_ms"]["p50"]),
                _ms(op["latency_ms"]["p99"]),
                _ms(op["latency_ms"]["max"]),
                e(", ".join(f"{k}: {n}" for k, n in op["errors"].items()) or "-"),
            ]
            for name, op in doc["operations"].items()
        ],
    )
    errors = _table(["error kind", "count"], [[e(k), n] for k, n in doc["errors"].items()]) if doc["errors"] else ""
    chaos = ""
    if doc["chaos"]["outages"]:
        chaos = (
            f"<h2>Chaos</h2><p>calls that outlived their timeout: {doc['chaos']['calls_over_timeout']}</p>"
            + _table(
                ["at", "kind", "worker", "errors", "first failure after", "recovered after", "max latency"],
                [
                    [
                        f"{o['at']:.2f} s",
                        e(o["kind"]),
                        o["worker"],
                        o["errors"],
                        "-" if o["time_to_first_failure"] is None else _ms(o["time_to_first_failure"] * 1e3),
                        "not recovered" if o["time_to_recovery"] is None else _ms(o["time_to_recovery"] * 1e3),
                        _ms(o["max_latency"] * 1e3),
                    ]
                    for o in doc["chaos"]["outages"]
                ],
            )
        )
    settings = doc["settings"]
    rates = ", ".join(_rate_text(r) for r in settings["rate"] or ())
    model = (
        f"open model, rate {e(rates)}" if settings["model"] == "open" else f"closed model, {settings['users']} users"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>mcp-actors stress: {e(target["name"])}</title><style>{_CSS}</style></head>
<body>
<h1>mcp-actors stress: {e(target["name"])}</h1>
<div class="sub">{e(target["type"])} {e(target["where"])} &middot; started {e(doc["started_at"])} &middot; {model}
&middot; {plural(settings["workers"], "worker")} &middot; {s["measured_seconds"]:.2f} s measured</div>
<div class="cards">{card_html}</div>
{f'<p class="fail">{e(_late_text(s))}</p>' if s.get("late_sends") else ""}
{_latency_over_time(doc)}
{_spectrum(doc["spectrum"])}
{_throughput(doc)}
<h2>Latency percentiles</h2>{pct}
<h2>Operations</h2>{ops}
{errors}
{chaos}
</body></html>
"""
