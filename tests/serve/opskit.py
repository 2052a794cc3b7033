"""What the gateway's operations tests share: a gateway over in-memory servers, a scrape, a raw GET."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio
from prometheus_client.parser import text_string_to_metric_families

from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType
from mcp_actors._config.store import ConfigStore
from mcp_actors.runtime import Runtime, open_runtime
from mcp_actors.serve import HttpGateway, serve_http
from mcp_actors.testing import demo_server_command, fault_server_command

BOUND = 30.0
"""Upper bound of any one step: real sockets, a loaded machine."""


def config(path: Path, *names: str) -> Path:
    """A config with stdio records: ``alpha`` a fault server, every other name a demo server (no pings)."""
    records = []
    for name in names:
        argv = fault_server_command() if name == "alpha" else demo_server_command()
        settings = ServerConfig(command=argv[0], args=tuple(argv[1:]), ping_interval=0)
        records.append(McpServerRecord(name=name, type=ServerType.STDIO, config=settings))
    ConfigStore(path).save(records)
    return path


@attrs.define(eq=False)
class Ops:
    """A runtime and its gateway."""

    runtime: Runtime
    gateway: HttpGateway


@contextlib.asynccontextmanager
async def open_gateway(cfg: Path, **options: Any) -> AsyncIterator[Ops]:
    """A runtime over ``cfg`` served by a gateway on a free loopback port; stopped at the end."""
    async with open_runtime(cfg) as runtime, trio.open_nursery() as nursery:
        gateway: HttpGateway = await nursery.start(functools.partial(serve_http, runtime.service, **options))
        yield Ops(runtime, gateway)
        with trio.fail_after(BOUND):
            await gateway.stop(1.0)


async def get(url: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    """One GET on a fresh connection."""
    with trio.fail_after(BOUND):
        async with httpx2.AsyncClient() as client:
            return await client.get(url, headers=headers)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(url: str) -> Samples:
    """``/metrics`` parsed by prometheus_client's own parser: ``{(sample name, labels): value}``."""
    response = await get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample named ``name`` with exactly ``labels``, or ``None``."""
    return samples.get((name, frozenset(labels.items())))


def series(samples: Samples, name: str) -> list[dict[str, str]]:
    """The label sets of every sample named ``name``."""
    return [dict(labels) for sample, labels in samples if sample == name]
