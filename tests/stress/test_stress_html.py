"""The HTML report in a real headless browser (Debian's chromium): plots render, no console error, no network."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_actors.stress import Tally, build_document, render_html

if TYPE_CHECKING:
    from playwright.sync_api import PlaywrightContextManager


def sync_playwright() -> PlaywrightContextManager:
    """playwright's own entry point, imported when a test opens the browser rather than when the file is collected."""
    from playwright.sync_api import sync_playwright as start

    return start()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _document() -> dict[str, Any]:
    """A five-second run with a stall in second 2, errors in second 3 and one chaos event."""
    tally = Tally()
    for second in range(5):
        for i in range(100):
            t = second + i / 100
            latency = 0.8 if second == 2 else 0.005 + i * 1e-5
            error = "server_connection_lost" if second == 3 and i < 7 else None
            tally.record(op="echo", intended=t, latency=latency, service=0.005, error=error, measured=True)
    tally.measured_seconds = 5.0
    tally.outages.append(
        {
            "kind": "kill",
            "at": 3.0,
            "worker": 0,
            "pid": 1234,
            "resumed_at": None,
            "errors": 7,
            "time_to_first_failure": 0.001,
            "time_to_recovery": 0.31,
            "max_latency": 0.3,
        }
    )
    settings = {
        "model": "open",
        "rate": [{"start": 100.0, "end": 100.0, "seconds": None}],
        "users": None,
        "think": 0.0,
        "warmup": 1.0,
        "workers": 2,
        "connections": 1,
        "chaos": [{"kind": "kill", "every": 3.0, "stop_for": 1.0}],
    }
    target = {"name": "fault <server>", "type": "stdio", "where": "python -m mcp_actors.testing.fault_server"}
    return build_document(tally, meta={"start_time": 1_700_000_000.0, "target": target, "settings": settings})


def test_report_renders_offline_in_chromium(tmp_path: Path) -> None:
    """Every plot draws with real geometry, nothing is fetched, and the console stays clean."""
    report = tmp_path / "report.html"
    report.write_text(render_html(_document()), encoding="utf-8")
    requests: list[str] = []
    console: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 1400})
            page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
            page.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
            page.on("request", lambda req: requests.append(req.url))
            page.goto(report.as_uri(), wait_until="load", timeout=60_000)
            figures = page.evaluate(
                """() => [...document.querySelectorAll('figure svg')].map(svg => ({
                    width: svg.getBoundingClientRect().width,
                    lines: [...svg.querySelectorAll('polyline')].map(l => l.getBBox().width),
                    bars: [...svg.querySelectorAll('rect.ok, rect.err')].map(r => r.getBBox().height),
                    points: svg.querySelectorAll('circle').length,
                    marks: svg.querySelectorAll('line.chaos, rect.warmup').length,
                }))"""
            )
            title = page.title()
            text = page.inner_text("body")
        finally:
            browser.close()
    assert requests == [report.as_uri()]  # the page itself, nothing else
    assert [c for c in console if not c.startswith(("debug", "verbose"))] == []
    assert title == "mcp-actors stress: fault <server>"
    latency, spectrum, throughput = figures
    assert all(f["width"] > 500 for f in figures)
    assert len(latency["lines"]) == 4 and all(w > 300 for w in latency["lines"])
    assert latency["points"] == 4 * 5
    assert latency["marks"] == throughput["marks"] == 2  # the warmup band and the kill
    assert spectrum["lines"][0] > 300 and spectrum["points"] > 10
    assert len(throughput["bars"]) == 5 + 1 and all(h > 0 for h in throughput["bars"])  # 5 ok bars, 1 error bar
    assert "server_connection_lost" in text and "recovered after" in text


def test_charts_use_the_full_width_of_the_page(tmp_path: Path) -> None:
    """Each chart is as wide as the page's content, on a wide window and a narrow one (and keeps its proportions)."""
    report = tmp_path / "report.html"
    report.write_text(render_html(_document()), encoding="utf-8")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, timeout=60_000)
        try:
            sizes = {}
            for width in (1600, 700):
                page = browser.new_page(viewport={"width": width, "height": 1400})
                page.goto(report.as_uri(), wait_until="load", timeout=60_000)
                sizes[width] = page.evaluate(
                    """() => ({
                        body: document.body.getBoundingClientRect().width,
                        charts: [...document.querySelectorAll('figure svg')].map(svg => {
                            const box = svg.getBoundingClientRect();
                            return {width: box.width, height: box.height};
                        }),
                    })"""
                )
                page.close()
        finally:
            browser.close()
    for width, seen in sizes.items():
        assert len(seen["charts"]) == 3
        for chart in seen["charts"]:
            assert chart["width"] >= seen["body"] - 1, (width, seen)
            assert abs(chart["height"] / chart["width"] - 260 / 760) < 0.02, (width, chart)
