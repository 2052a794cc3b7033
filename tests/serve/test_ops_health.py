"""``/healthz`` and ``/readyz``: alive while the loop answers; ready when started, config read, not draining."""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path
from typing import Any

import trio
from mcp import Client
from opskit import BOUND, config, get, open_gateway
from test_gateway import until
from test_http_front import Raw, connect

from mcp_actors.runtime import open_runtime
from mcp_actors.serve import HttpGateway, serve_http


async def test_healthz_and_readyz_answer_on_the_endpoints_listener(tmp_path: Path, servers_in_memory: Any) -> None:
    """Both 200 once started; readiness counts the enabled servers; only GET is allowed."""
    async with open_gateway(config(tmp_path / "cfg.json", "alpha", "beta")) as ops:
        base = ops.gateway.url.removesuffix("/mcp")
        alive = await get(base + "/healthz")
        assert (alive.status_code, alive.json()) == (200, {"status": "ok"})
        ready = await get(base + "/readyz")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready" and ready.json()["servers"] == 2
        raw = await connect(ops.gateway)
        status, headers, _ = await raw.request("POST", {}, {"content-type": "application/json"}, path="/readyz")
        assert (status, headers["allow"]) == (405, "GET")


async def test_health_paths_keep_the_endpoints_host_check_and_the_operators_port_has_none(
    tmp_path: Path, servers_in_memory: Any
) -> None:
    """A foreign Host gets 421 on the endpoint's listener (DNS rebinding); the operator's port answers it."""
    async with open_gateway(config(tmp_path / "cfg.json", "alpha"), metrics_port=0) as ops:
        raw = await connect(ops.gateway)
        await raw.send(b"GET /readyz HTTP/1.1\r\nhost: evil.example\r\n\r\n")
        status, _, _ = await raw.answer()
        assert status == 421
        ops_base = (ops.gateway.metrics_url or "").removesuffix("/metrics")
        assert (await get(ops_base + "/readyz", headers={"host": "evil.example"})).status_code == 200
        assert (await get(ops_base + "/nothing")).status_code == 404


async def test_a_config_broken_after_start_leaves_the_gateway_ready_on_the_last_good_one(
    tmp_path: Path, servers_in_memory: Any
) -> None:
    """Readiness needs the config read once (the runtime cannot start without it), not every edit to be valid."""
    cfg = config(tmp_path / "cfg.json", "alpha")
    async with open_gateway(cfg) as ops, Client(ops.gateway.url) as client:
        base = ops.gateway.url.removesuffix("/mcp")
        cfg.write_text("{ not json")
        ready = await get(base + "/readyz")
        assert (ready.status_code, ready.json()["servers"]) == (200, 1)
        with trio.fail_after(BOUND):
            assert not (await client.call_tool("alpha__echo", {"text": "on"})).is_error


async def test_a_stop_makes_readyz_503_while_the_call_in_flight_finishes(
    tmp_path: Path, servers_in_memory: Any
) -> None:
    """The drain: readyz 503 on a kept-alive connection and on the operator's port; the call in flight completes."""
    cfg = config(tmp_path / "cfg.json", "alpha")
    async with open_runtime(cfg) as runtime, trio.open_nursery() as nursery:
        gateway: HttpGateway = await nursery.start(functools.partial(serve_http, runtime.service, metrics_port=0))
        ops_readyz = (gateway.metrics_url or "").removesuffix("/metrics") + "/readyz"
        kept: Raw = await connect(gateway)
        status, _, _ = await kept.request("GET", path="/readyz")
        assert status == 200
        answers: list[str] = []
        seen: dict[str, Any] = {}
        # The client's own close (its DELETE) meets a stopped gateway and may fail: that says nothing
        # about the gateway, so the block records what it saw and the assertions come after it.
        with contextlib.suppress(Exception):
            async with Client(gateway.url, mode="legacy") as client:
                with trio.fail_after(BOUND):
                    await client.list_tools()  # what the client checks a result against, known before the stop

                    async def slow_call() -> None:
                        result = await client.call_tool("alpha__sleep", {"seconds": 3.0})
                        answers.append("".join(getattr(block, "text", "") for block in result.content))

                    async with trio.open_nursery() as calls:
                        calls.start_soon(slow_call)
                        await until(lambda: runtime.service.status("alpha").calls_in_flight == 1)
                        calls.start_soon(gateway.stop, 30.0)
                        await until(lambda: gateway.health is not None and gateway.health.draining)
                        draining = await get(ops_readyz)
                        seen["ops port"] = (draining.status_code, draining.json())
                        status, _, body = await kept.request("GET", path="/readyz")
                        seen["kept connection"] = (status, json.loads(body))
                        seen["answers while unready"] = list(answers)
    assert seen == {
        "ops port": (503, {"status": "draining"}),
        "kept connection": (503, {"status": "draining"}),
        "answers while unready": [],
    }
    assert answers == ["slept 3 s"]  # the call in flight finished within the grace


async def test_with_inbound_auth_the_endpoint_asks_credentials_and_the_operators_port_does_not(
    tmp_path: Path,
) -> None:
    """Auth on: /readyz and /metrics on the endpoint's listener need a key (401 without); the operator's port not."""
    from authkit import auth_gateway

    from mcp_actors.serve import GatewayAuth, MemoryApiKeyTable, create_api_key

    table = MemoryApiKeyTable()
    key, _ = await create_api_key(table, "probe")
    async with auth_gateway(tmp_path, GatewayAuth(api_keys=table), metrics_port=0) as gateway:
        base = gateway.url.removesuffix("/mcp")
        assert (await get(base + "/readyz")).status_code == 401
        assert (await get(base + "/readyz", headers={"authorization": f"Bearer {key}"})).status_code == 200
        ops_base = (gateway.metrics_url or "").removesuffix("/metrics")
        assert (await get(ops_base + "/readyz")).status_code == 200
        assert (await get(ops_base + "/metrics")).status_code == 200
