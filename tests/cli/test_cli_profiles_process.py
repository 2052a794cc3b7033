"""``mcp-actors serve --stdio --profile NAME`` as a real process: one profile, made with ``mcp-actors profile``."""

from __future__ import annotations

import sys
from pathlib import Path

import trio
from clikit import invoke, stdio, write_config
from mcp import Client, StdioServerParameters
from testkit import cli_env

from mcp_actors.testing import fault_server_command

_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]
BOUND = 120.0
"""Start-up and a call, on a loaded two-core machine."""


async def test_serve_stdio_profile_serves_only_that_profile(tmp_path: Path) -> None:
    """A profile added by the CLI, served over stdio: only its tool, under its own name, callable."""
    config = write_config(tmp_path / "cfg.json", stdio("alpha", fault_server_command()))
    added = invoke(config, "profile", "add", "one", "--tool", "alpha/echo", "--naming", "tool")
    assert added.rc == 0, added.stderr
    params = StdioServerParameters(
        command=CLI[0],
        args=[*CLI[1:], "serve", "--stdio", "--profile", "one", "--config", str(config)],
        env=cli_env(config),
    )
    async with Client(params, mode="legacy") as client:
        with trio.fail_after(BOUND):
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
            result = await client.call_tool("echo", {"text": "profiled"})
            assert "".join(getattr(block, "text", "") for block in result.content) == "profiled"
