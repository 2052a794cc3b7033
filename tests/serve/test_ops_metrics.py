"""The gateway's ``/metrics``: scraped over HTTP and read with prometheus_client's own parser.

The SDK's client calls through a gateway in process (upstreams in memory: ``alpha`` a fault
server, ``beta`` a demo server); what a scrape says is what the calls did.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opskit import BOUND, Samples, config, get, open_gateway, scrape, series, value
from test_gateway import until, upstreams_in_memory

from mcp_actors.connection import ConnectionState
from mcp_actors.serve import MetricsUnavailable, serve_http

P = "mcp_actors_gateway"


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def _scrape_until(url: str, name: str, wanted: float, **labels: str) -> Samples:
    """Scrape until the sample reads ``wanted`` (a call in flight is seen once it has started)."""
    with trio.fail_after(BOUND):
        while True:
            samples = await scrape(url)
            if value(samples, name, **labels) == wanted:
                return samples
            await trio.sleep(0.01)


async def test_calls_errors_latency_in_flight_and_sessions_are_counted(tmp_path: Path, servers_in_memory: Any) -> None:
    """Calls by server and tool, errors by kind, latency histograms, calls in flight and sessions by revision."""
    async with open_gateway(config(tmp_path / "cfg.json", "alpha", "beta")) as ops:
        url = ops.gateway.metrics_url
        assert url == ops.gateway.url.removesuffix("/mcp") + "/metrics"
        async with Client(ops.gateway.url, mode="legacy") as client:
            with trio.fail_after(BOUND):
                await client.list_tools()
                for word in ("a", "b", "c"):
                    assert _text(await client.call_tool("alpha__echo", {"text": word})) == word
                assert (await client.call_tool("alpha__fail", {})).is_error
                with pytest.raises(MCPError):
                    await client.call_tool("nobody__nothing", {})

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.call_tool, "alpha__sleep", {"seconds": 2.0})
                    during = await _scrape_until(url, f"{P}_tool_calls_in_flight", 1.0)
                assert value(during, f"{P}_requests_in_flight") == 1.0
                assert value(during, f"{P}_upstream_requests_in_flight", server="alpha") == 1.0

            samples = await scrape(url)
            sessions = series(samples, f"{P}_sessions")
            assert len(sessions) == 1 and sessions[0]["revision"] in HANDSHAKE_PROTOCOL_VERSIONS
            assert value(samples, f"{P}_sessions", **sessions[0]) == 1.0

        assert value(samples, f"{P}_requests_total", method="tools/call") == 6.0
        assert value(samples, f"{P}_requests_total", method="tools/list") == 1.0
        assert value(samples, f"{P}_request_errors_total", method="tools/call", kind="tool_error") == 1.0
        assert value(samples, f"{P}_request_errors_total", method="tools/call", kind="invalid_params") == 1.0
        echo = {"server": "alpha", "tool": "echo"}
        assert value(samples, f"{P}_tool_calls_total", **echo) == 3.0
        assert value(samples, f"{P}_tool_call_duration_seconds_count", **echo) == 3.0
        assert value(samples, f"{P}_tool_call_duration_seconds_bucket", **echo, le="+Inf") == 3.0
        assert 0 < (value(samples, f"{P}_tool_call_duration_seconds_sum", **echo) or 0) < BOUND
        assert value(samples, f"{P}_tool_call_errors_total", server="alpha", tool="fail", kind="tool_error") == 1.0
        assert value(samples, f"{P}_tool_calls_total", server="alpha", tool="sleep") == 1.0
        sleep_fast = value(samples, f"{P}_tool_call_duration_seconds_bucket", server="alpha", tool="sleep", le="0.25")
        assert sleep_fast == 0.0  # it slept 2 s: the histogram put it above
        # A name the gateway never listed has no series of its own.
        unlisted = {"server": "_unlisted", "tool": "_unlisted"}
        assert value(samples, f"{P}_tool_call_errors_total", **unlisted, kind="invalid_params") == 1.0
        assert value(samples, f"{P}_upstream_state", server="alpha", state="connected") == 1.0
        assert value(samples, f"{P}_upstream_state", server="alpha", state="error") == 0.0
        assert value(samples, f"{P}_upstream_circuit_open", server="beta") == 0.0
        assert (value(samples, f"{P}_upstream_state_changes_total", server="alpha", state="connected") or 0) >= 1
        assert value(samples, "process_open_fds") is not None  # the process's own metrics ride along
        after = await scrape(url)
        assert series(after, f"{P}_sessions") == []  # the client's session ended with it


async def test_made_up_tool_names_grow_no_series(tmp_path: Path, servers_in_memory: Any) -> None:
    """Calls to fifty names nobody listed, under a real server's prefix, all count under ``_unlisted``."""
    async with open_gateway(config(tmp_path / "cfg.json", "alpha")) as ops, Client(ops.gateway.url) as client:
        with trio.fail_after(BOUND):
            await client.list_tools()
            for i in range(50):
                with pytest.raises(MCPError):
                    await client.call_tool(f"nobody__made_up_{i}", {})
                result = await client.call_tool(f"alpha__made_up_{i}", {})  # the server's prefix: relayed to it
                assert result.is_error
        samples = await scrape(ops.gateway.metrics_url or "")
    tools = {labels["tool"] for labels in series(samples, f"{P}_tool_calls_total")}
    assert tools == {"_unlisted"}
    assert value(samples, f"{P}_tool_calls_total", server="_unlisted", tool="_unlisted") == 100.0


async def test_a_server_that_dies_shows_as_unavailable_calls_and_state_changes(tmp_path: Path) -> None:
    """A killed upstream: its calls count as ``unavailable``; its state, state changes and restarts say so."""
    with upstreams_in_memory() as upstreams:
        async with open_gateway(config(tmp_path / "cfg.json", "alpha", "beta")) as ops:
            async with Client(ops.gateway.url) as client:
                with trio.fail_after(BOUND):
                    await client.list_tools()
                    upstreams.kill_for_good("alpha")
                    await until(lambda: ops.runtime.service.status("alpha").state is ConnectionState.ERROR)
                    assert (await client.call_tool("alpha__echo", {"text": "x"})).is_error
            samples = await scrape(ops.gateway.metrics_url or "")
    assert value(samples, f"{P}_tool_call_errors_total", server="alpha", tool="echo", kind="unavailable") == 1.0
    assert value(samples, f"{P}_upstream_state", server="alpha", state="connected") == 0.0
    assert (value(samples, f"{P}_upstream_state_changes_total", server="alpha", state="error") or 0) >= 1
    assert value(samples, f"{P}_upstream_state", server="beta", state="connected") == 1.0
    assert (value(samples, f"{P}_upstream_restarts_total", server="alpha") or 0) >= 1


async def test_metrics_on_their_own_port_answer_through_the_drain(tmp_path: Path, servers_in_memory: Any) -> None:
    """``metrics_port``: /metrics, /healthz, /readyz there; the endpoint's listener keeps only the health paths."""
    async with open_gateway(config(tmp_path / "cfg.json", "alpha"), metrics_port=0) as ops:
        url = ops.gateway.metrics_url or ""
        base = ops.gateway.url.removesuffix("/mcp")
        assert url.endswith("/metrics") and not url.startswith(base)
        assert (await get(base + "/metrics")).status_code == 404
        assert (await get(url.removesuffix("/metrics") + "/healthz")).status_code == 200
        assert (await get(base + "/healthz")).status_code == 200
        assert value(await scrape(url), f"{P}_requests_in_flight") == 0.0


async def test_without_prometheus_client_the_gateway_serves_without_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers_in_memory: Any
) -> None:
    """No prometheus-client: metrics are off (404, no URL) and asking for them says what to install."""
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # what an environment without it imports
    cfg = config(tmp_path / "cfg.json", "alpha")
    async with open_gateway(cfg) as ops:
        assert ops.gateway.metrics_url is None
        assert (await get(ops.gateway.url.removesuffix("/mcp") + "/metrics")).status_code == 404
        async with Client(ops.gateway.url) as client:
            with trio.fail_after(BOUND):
                assert _text(await client.call_tool("alpha__echo", {"text": "still"})) == "still"
        with pytest.raises(MetricsUnavailable, match=r"pip install 'mcp-actors\[gateway\]'"):
            await serve_http(ops.runtime.service, metrics=True)  # refused before it listens


def test_the_cost_benchmark_times_each_wrapper(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m benchmarks.gateway_ops`` prints the bare, metrics and tracing cost per request."""
    from benchmarks import gateway_ops

    gateway_ops.main(["--requests", "200", "--blocks", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["bare", "metrics", "tracing"]
    assert all("us CPU per request" in line for line in lines[1:])


async def test_a_call_through_a_profile_counts_once_under_the_servers_own_tool(tmp_path: Path) -> None:
    """A profile's renamed tool: one request counted, labelled with the server and the tool's own name."""
    from test_profiles import profiled_gateway

    profiles = {"coder": {"servers": {"alpha": {"tools": ["echo"], "rename": {"echo": "say"}}}}}
    async with profiled_gateway(tmp_path, profiles) as rig, Client(rig.url("coder")) as client:
        with trio.fail_after(BOUND):
            await client.list_tools()
            assert _text(await client.call_tool("say", {"text": "once"})) == "once"
        samples = await scrape(rig.gateway.metrics_url or "")
    assert value(samples, f"{P}_requests_total", method="tools/call") == 1.0
    assert value(samples, f"{P}_requests_total", method="tools/list") == 1.0
    assert value(samples, f"{P}_tool_calls_total", server="alpha", tool="echo") == 1.0
