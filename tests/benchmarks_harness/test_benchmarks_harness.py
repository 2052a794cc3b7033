"""The benchmark harness bounds every measured call without a cancel scope per call.

``benchmarks/drivers/_harness.py`` runs every contender's loops. Its per-call bound is a
watch task (``_CallWatch``) that ends a worker whose call outlived the bound, so a wedged
contender is reported (concurrent) or fails the run (sequential), never hangs it. These
tests drive the two measured scenarios with an in-process driver whose calls are plain
trio waits, on trio's autojump clock: the bound is virtual time.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "drivers"))
import _harness


class _Session:
    """Every call answers at once, except that the ``wedge_at``-th call (1-based) never does."""

    def __init__(self, wedge_at: int | None) -> None:
        self.wedge_at = wedge_at
        self.calls = 0

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        self.calls += 1
        if self.calls == self.wedge_at:
            await trio.sleep_forever()
        await trio.sleep(0.001)

    async def tool_names(self, server: int) -> list[str]:
        return ["echo"]


class _Driver:
    def __init__(self, wedge_at: int | None) -> None:
        self.session = _Session(wedge_at)

    def prepare(self, servers: list[Any]) -> None:
        pass

    @contextlib.asynccontextmanager
    async def open(self, servers: list[Any]) -> AsyncIterator[_Session]:
        yield self.session


def _job(**more: Any) -> dict[str, Any]:
    return {"servers": [["unused"]], "call_timeout": 60.0, **more}


async def test_a_wedged_concurrent_call_is_a_failure_after_the_bound(autojump_clock: trio.abc.Clock) -> None:
    driver = _Driver(wedge_at=20)  # in the measured run (the warm-up makes 5 calls)
    start = trio.current_time()
    result = await _harness.concurrent(driver, _job(calls_per_server=100, in_flight=5))
    waited = trio.current_time() - start
    assert result["failures"] == 1
    assert result["failure_sample"] == ["TimeoutError: echo call took longer than 60s"]
    assert driver.session.calls == 105  # the other workers made the wedged worker's remaining calls too
    assert 60.0 < waited <= 121.0  # ended between one and two bounds after it wedged


async def test_a_wedged_call_in_the_sequential_loop_fails_the_run(autojump_clock: trio.abc.Clock) -> None:
    driver = _Driver(wedge_at=30)  # after the 20 warm-up calls
    start = trio.current_time()
    with pytest.raises(TimeoutError, match="echo call took longer than 60s"):
        await _harness.sequential(driver, _job(calls=50, warmup=20))
    assert 60.0 < trio.current_time() - start <= 121.0


async def test_calls_that_answer_are_never_ended_by_the_watch(autojump_clock: trio.abc.Clock) -> None:
    """Calls of 1 ms over seconds of virtual time, eight times the bound: the watch looks many times and ends none."""
    driver = _Driver(wedge_at=None)
    result = await _harness.concurrent(driver, _job(calls_per_server=4000, in_flight=1, call_timeout=0.5))
    assert result["failures"] == 0
    assert driver.session.calls == 4001
    latencies = await _harness.sequential(_Driver(wedge_at=None), _job(calls=3000, warmup=0, call_timeout=0.5))
    assert len(latencies["latencies"]) == 3000


_BURN = """
import sys, time
end = float(sys.argv[1])
while time.thread_time() < end:
    pass
print("burnt", flush=True)
time.sleep(60)
"""


def test_descendants_cpu_splits_the_servers_cpu_from_the_clients_helpers() -> None:
    """``descendants_cpu``: a server (its command line names a server) and a helper, each burning known CPU.

    Real child processes: one whose command line carries a server marker burns 0.4 s of
    CPU, one without burns 0.1 s. Each figure grows by at least its own burn and the
    server's is not counted with the helper's (other tests' processes below this one are
    in both readings, and only their growth in the meantime counts).
    """
    import subprocess

    servers_before, helpers_before = _harness.descendants_cpu()
    server = subprocess.Popen([sys.executable, "-c", _BURN, "0.4", "_toolserver.py"], stdout=subprocess.PIPE)
    helper = subprocess.Popen([sys.executable, "-c", _BURN, "0.1", "helper"], stdout=subprocess.PIPE)
    try:
        for child in (server, helper):
            assert child.stdout is not None and child.stdout.readline() == b"burnt\n"
        servers_cpu, helpers_cpu = _harness.descendants_cpu()
        assert servers_cpu - servers_before >= 0.4
        assert 0.1 <= helpers_cpu - helpers_before < 0.4
        assert _harness.cpu_seconds_of(server.pid) >= 0.4
    finally:
        for child in (server, helper):
            child.kill()
            child.wait()
    assert _harness.cpu_seconds_of(server.pid) == 0.0  # gone: nothing, not an error
