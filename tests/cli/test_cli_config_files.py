"""The command on a config (or an imported file) that is a FIFO: one line at once, never a hang."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest
from clikit import invoke
from filekit import fifo_at


@pytest.mark.parametrize("command", [["servers", "list"], ["servers", "add", "x", "--command", "npx"], ["tools"]])
def test_a_fifo_config_fails_the_command_at_once_with_one_line(tmp_path: Path, command: list[str]) -> None:
    config = tmp_path / "mcp-config.json"
    with fifo_at(config):
        start = time.monotonic()
        result = invoke(config, *command)
        took = time.monotonic() - start
        assert stat.S_ISFIFO(config.stat().st_mode), "the FIFO was replaced"
    assert took < 2.0, f"the command waited on the FIFO ({took:.1f} s)"
    line = result.error_line()
    assert result.rc == 2, result
    assert f"the config file {config} is a FIFO (named pipe), not a regular file" in line
    assert "MCP_ACTORS_CONFIG" in line


def test_importing_a_fifo_fails_at_once_and_says_to_pipe_it(tmp_path: Path) -> None:
    source = tmp_path / "servers.json"
    with fifo_at(source):
        start = time.monotonic()
        result = invoke(tmp_path / "mcp-config.json", "servers", "import", str(source))
        took = time.monotonic() - start
    assert took < 2.0, f"the import waited on the FIFO ({took:.1f} s)"
    line = result.error_line()
    assert result.rc == 2, result
    assert f"{source} is a FIFO (named pipe), not a regular file" in line
    assert "servers import -" in line
