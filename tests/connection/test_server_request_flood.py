"""A server flooding its client with requests (sampling, elicitation, roots, ping): a real stdio process.

The bound of requests a server may have in flight to us holds however many it sends: the
host's handlers are entered at most that many times at once, the run's task count stays
flat, the excess is refused at once with a JSON-RPC error, and every request is answered.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import attrs
import mcp.types as mcp_types
import pytest
import trio
from testkit import count_tasks, running

from mcp_actors._config.codec import record_from_json_dict
from mcp_actors._connection.callbacks import HostCallbacks
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._registry.actor import settings_for
from mcp_actors._wire.transports import StdioParams
from mcp_actors.errors import InvalidServerConfig
from supervisors import Backoff

FLOOD = [sys.executable, "-m", "mcp_actors.testing.hostile.wire_request_flood"]
COUNT = 3000
BOUND = 60.0


def flood_settings(argv: Sequence[str], host: HostCallbacks, **overrides: Any) -> ConnectionSettings:
    settings = ConnectionSettings(
        server_id="id-flood",
        server_name="flood",
        transport=StdioParams(command=argv[0], args=tuple(argv[1:]), close_grace=2.0, term_grace=1.0),
        connect_timeout=20.0,
        call_timeout=BOUND,
        ping_interval=0,
        backoff=Backoff(min_delay=0.05, max_delay=0.2, jitter=0.0, reset_after=60.0),
        host=host,
    )
    return attrs.evolve(settings, **overrides)


@attrs.define
class Entries:
    """How many times the host's handlers are running at once, and the most seen."""

    inside: int = 0
    peak: int = 0

    async def enter(self) -> None:
        self.inside += 1
        self.peak = max(self.peak, self.inside)
        try:
            await trio.sleep(0.002)
        finally:
            self.inside -= 1


def host_of(entries: Entries) -> HostCallbacks:
    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        await entries.enter()
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(type="text", text="ok"), model="host"
        )

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        await entries.enter()
        return mcp_types.ElicitResult(action="decline")

    async def roots(server_id: str) -> list[str]:
        await entries.enter()
        return ["file:///tmp"]

    return HostCallbacks(sampling=sample, elicitation=elicit, roots=roots)


@pytest.mark.parametrize("limit", [None, 4])
async def test_a_request_flood_is_bounded_and_every_request_is_answered(limit: int | None) -> None:
    """3,000 server requests at once: the bound holds (handlers, tasks), the rest are refused at once; all answered."""
    entries = Entries()
    overrides = {} if limit is None else {"max_server_requests": limit}
    expected = 16 if limit is None else limit
    settings = flood_settings(FLOOD, host_of(entries), **overrides)
    async with running(settings) as ([handle], _):
        await handle.connect()
        base = most = count_tasks()

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, count_tasks())
                await trio.sleep(0.001)

        with trio.fail_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                result = await handle.call_tool("flood", {"count": COUNT})
                nursery.cancel_scope.cancel()
    report = result.structured_content
    assert report is not None
    assert report["answered"] == COUNT, report
    assert entries.peak <= expected, f"the host's handlers ran {entries.peak} at once (bound {expected})"
    # The watch itself, the call's task, and one task that writes the refusals: a few more than the bound.
    assert most - base <= expected + 6, f"{most - base} tasks more than before the flood (bound {expected})"
    assert report["errors"] > 0 and report["results"] >= expected, report
    assert any(f"at most {expected} requests in flight" in text for text in report["messages"]), report


def test_the_bound_comes_from_the_record_and_is_checked() -> None:
    """``maxServerRequests`` in a record sets the connection's bound; 0 or a non-integer is refused naming it."""
    stamp = "2026-01-01T00:00:00Z"
    base = {"id": "s-1", "name": "flood", "type": "stdio", "createdAt": stamp, "updatedAt": stamp}
    record = record_from_json_dict({**base, "config": {"command": "x", "maxServerRequests": 4}})
    assert settings_for(record).max_server_requests == 4
    default = record_from_json_dict({**base, "config": {"command": "x"}})
    assert settings_for(default).max_server_requests == 16
    for bad in (0, -1, 1.5, "8", True):
        with pytest.raises(InvalidServerConfig, match="maxServerRequests"):
            record_from_json_dict({**base, "config": {"command": "x", "maxServerRequests": bad}})
