"""The fault-injection suite: its ``bed`` fixture and the one-line summary.

The scenarios and their guarantees are described in ``fault_bed.py`` and ``docs/faults.md``.
At the end of a run that included them, a line ``faults: N tried, N survived`` is printed:
N tried counts the scenarios of this directory that ran, N survived those whose every
phase (setup, call, teardown) passed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from fault_bed import SIBLING, FaultBed

from mcp_actors.errors import McpActorsError
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService
from mcp_actors.testing import fault_server_command

_FAULTS_DIR = Path(__file__).parent


@pytest.fixture
async def bed(tmp_path: Path, no_leaked_tasks: None) -> AsyncIterator[FaultBed]:
    """A runtime on a fresh config with the healthy sibling (``SIBLING``) starting in the background.

    After the test the runtime is closed and the file checked once more: closing (with
    the fault still active) must not lose a record either.
    """
    config_path = tmp_path / "mcp-config.json"
    async with open_runtime(config_path) as runtime:
        fault_bed = FaultBed(runtime=runtime, config_path=config_path)
        fault_bed.expected.update({r.id: r.name for r in await runtime.service.list()})
        argv = fault_server_command()
        await fault_bed.add({"name": SIBLING, "type": "stdio", "config": {"command": argv[0], "args": argv[1:]}})
        async with trio.open_nursery() as nursery:
            # The sibling starts while the scenario sets up its faulty server.
            nursery.start_soon(_warm_sibling, runtime.service)
            yield fault_bed
            nursery.cancel_scope.cancel()
    if len(fault_bed.expected) > 1:  # only a change writes the file
        assert fault_bed.records_on_disk().items() >= fault_bed.expected.items()


async def _warm_sibling(service: McpService) -> None:
    try:
        await service.connect(SIBLING)
    except McpActorsError:
        pass  # reported by the scenario's own sibling check


# ---------------------------------------------------------------------- the summary

_TRIED: set[str] = set()
_CALL_PASSED: set[str] = set()
_FAILED: set[str] = set()


def _in_suite(report: pytest.TestReport) -> bool:
    return Path(str(report.fspath)).resolve().is_relative_to(_FAULTS_DIR)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record each scenario's phases: it survived if its call passed and no phase failed."""
    if not _in_suite(report):
        return
    _TRIED.add(report.nodeid)
    if report.failed:
        _FAILED.add(report.nodeid)
    if report.when == "call" and report.passed:
        _CALL_PASSED.add(report.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print ``faults: N tried, N survived`` when scenarios of this suite ran."""
    if _TRIED:
        survived = len(_CALL_PASSED - _FAILED)
        terminalreporter.write_line(f"faults: {len(_TRIED)} tried, {survived} survived")
