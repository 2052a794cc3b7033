"""Fixtures of the process-tracker tests: a private tracker and state directory per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_actors._process.tracker import ProcessTracker


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A state directory of the test's own (never the user's, never another test's)."""
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def tracker(state_dir: Path) -> Iterator[ProcessTracker]:
    """A tracker with its own ledger and sidecar; whatever it still tracks is killed after."""
    instance = ProcessTracker(state_dir=state_dir, term_grace=0.3)
    yield instance
    instance.kill_all_sync()
