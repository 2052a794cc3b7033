"""The CLI when the config file cannot be written: one clear line and exit status 3, never a hang."""

from __future__ import annotations

import concurrent.futures
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]
BOUND = 120.0
"""A command takes 1-3 s (10 s when it waits for the lock); this bound is for a loaded machine."""
UNAVAILABLE = 3


def _small_files() -> None:
    # Any write past 8 bytes fails with EFBIG: the config (never smaller) cannot be saved,
    # the empty lock file can. Python ignores SIGXFSZ, so the write fails instead of killing.
    resource.setrlimit(resource.RLIMIT_FSIZE, (8, 8))


def _run(config: str, *args: str, limit_file_size: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MCP_ACTORS_CONFIG": config, "COLUMNS": "200"}
    return subprocess.run(
        [*CLI, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
        preexec_fn=_small_files if limit_file_size else None,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and lines[0].startswith("mcp-actors: ")
    return lines[0]


def test_every_editing_command_fails_with_exit_3_when_the_file_cannot_be_written(tmp_path: Path) -> None:
    """servers add / import / disable / untrust / remove on an unwritable config: one line naming the file, exit 3."""
    config = str(tmp_path / "mcp-config.json")
    source = tmp_path / "import.json"
    source.write_text(json.dumps({"mcpServers": {"imp": {"command": "imp-server"}}}))
    commands = [
        ("servers", "add", "x", "--command", "x-server"),
        ("servers", "import", str(source)),
        ("servers", "disable", "demo"),
        ("servers", "untrust", "demo"),
        ("servers", "remove", "demo"),
    ]
    with concurrent.futures.ThreadPoolExecutor(len(commands)) as pool:
        results = list(pool.map(lambda args: _run(config, *args, limit_file_size=True), commands))
    for args, done in zip(commands, results, strict=True):
        assert done.returncode == UNAVAILABLE, (args, done.returncode, done.stderr)
        line = _one_line(done)
        assert "mcp-config.json" in line and "File too large" in line, line
    assert not Path(config).exists(), "nothing was half-written"


def test_a_config_under_proc_fails_add_with_exit_3() -> None:
    """servers add with a config under /proc/self (not even root can write there): one line, exit 3, bounded."""
    done = _run("/proc/self/mcp-actors-test/mcp-config.json", "servers", "add", "x", "--command", "x-server")
    assert done.returncode == UNAVAILABLE, done.stderr
    assert "/proc/self/mcp-actors-test/mcp-config.json" in _one_line(done)
