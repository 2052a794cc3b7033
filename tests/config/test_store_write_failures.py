"""The store under a disk that refuses writes: a typed ConfigWriteFailed, nothing half-written, nothing lost."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_actors._config.record import McpServerRecord, ServerConfig
from mcp_actors._config.store import ConfigStore
from mcp_actors.errors import ConfigStoreError, ConfigWriteFailed


def _record(name: str) -> McpServerRecord:
    return McpServerRecord(name=name, type="stdio", config=ServerConfig(command="npx"))  # type: ignore[arg-type]


def test_a_path_that_cannot_be_written_is_a_typed_error_naming_path_and_reason() -> None:
    """A config under /proc cannot be written: ConfigWriteFailed with the path, the OS reason and what to do."""
    store = ConfigStore("/proc/self/mcp-actors-test/mcp-config.json")
    with pytest.raises(ConfigWriteFailed) as caught:
        store.modify(lambda records: records.append(_record("a")))
    error = caught.value
    assert isinstance(error, ConfigStoreError)
    assert isinstance(error, OSError)
    assert error.path == str(store.path)
    assert error.reason
    assert str(store.path) in str(error)
    assert "MCP_ACTORS_CONFIG" in str(error) or "--config" in str(error)


_FSIZE_WRITER = """
import resource, sys
from mcp_actors.errors import ConfigWriteFailed
from mcp_actors._config.record import McpServerRecord, ServerConfig
from mcp_actors._config.store import ConfigStore

store = ConfigStore(sys.argv[1])
size = store.path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, size + 10))  # the next, longer document cannot be written
big = McpServerRecord(name="b" * 200, type="stdio", config=ServerConfig(command="npx"))
try:
    store.modify(lambda records: records.append(big))
except ConfigWriteFailed as exc:
    print("typed", exc.os_errno, exc.reason)
"""


def test_a_file_size_limit_leaves_the_old_file_intact(tmp_path: Path) -> None:
    """A write over the file-size limit (EFBIG) is ConfigWriteFailed, and the saved records are exactly as before."""
    store = ConfigStore(tmp_path / "cfg.json")
    store.modify(lambda records: records.append(_record("kept")))
    before = store.path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE_WRITER, str(store.path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("typed 27 "), done.stdout  # EFBIG
    assert store.path.read_bytes() == before
    assert [r.name for r in store.load()][-1] == "kept"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_fingerprint_changes_when_another_writer_replaces_the_file(tmp_path: Path) -> None:
    """fingerprint() is None before the file exists and changes with every replace, so a reader can re-read cheaply."""
    store = ConfigStore(tmp_path / "cfg.json")
    assert store.fingerprint() is None
    store.modify(lambda records: records.append(_record("a")))
    first = store.fingerprint()
    assert first is not None
    assert store.fingerprint() == first
    other = ConfigStore(tmp_path / "cfg.json")
    other.modify(lambda records: records.append(_record("b")))
    second = store.fingerprint()
    assert second != first
    records, seen = store.load_with_fingerprint()
    assert seen == second
    assert [r.name for r in records][-2:] == ["a", "b"]
    json.loads(store.path.read_text())


def test_a_lock_file_that_cannot_be_created_fails_at_once_not_as_a_held_lock() -> None:
    """A directory refusing the lock file is ConfigWriteFailed at once, not ConfigFileLocked after the timeout."""
    store = ConfigStore("/proc/self/mcp-config.json", lock_timeout=30.0)
    started = time.monotonic()
    with pytest.raises(ConfigWriteFailed) as caught:
        store.modify(lambda records: records.append(_record("a")))
    assert time.monotonic() - started < 10.0
    assert "lock" not in type(caught.value).__name__.lower()
