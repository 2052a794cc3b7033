"""A host that never configures logging gets nothing on stderr from mcp-actors.

Python's "last resort" handler prints WARNING and above to stderr when a logger has no
handler anywhere up its tree. A library must not rely on that: it adds a ``NullHandler`` to
its top-level loggers and leaves the decision to the host.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import forkrun

_HOST = textwrap.dedent(
    """
    import logging, sys
    import trio
    from mcp_actors import open_runtime
    from mcp_actors.errors import McpActorsError

    async def main(path):
        async with open_runtime(path, sweep_ledger=False, connect_on_add=False) as rt:
            record = await rt.service.add({
                "name": "crasher", "type": "stdio",
                "config": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
            })
            for _ in range(3):
                try:
                    await rt.service.list_server_tools(record.id)
                except McpActorsError as exc:
                    print("typed", type(exc).__name__)
        # Our loggers, asked directly: still silent without a host configuration.
        logging.getLogger("mcp_actors.service").warning("a warning the host did not ask to see")
        logging.getLogger("supervisors").warning("a supervisor warning the host did not ask to see")

    trio.run(main, sys.argv[1])
    """
)


def test_unconfigured_host_gets_no_log_lines_on_stderr(tmp_path: Path) -> None:
    """Restarts of a crashing server and library warnings write nothing to an unconfigured host's stderr."""
    host = tmp_path / "host.py"
    host.write_text(_HOST)
    # ``python host.py CONFIG``, forked from an interpreter that has the MCP SDK imported (forkrun)
    done = forkrun.run_script(host, str(tmp_path / "cfg.json"), env=dict(os.environ), cwd=tmp_path, bound=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["typed", "ServerStartFailed"] * 3
    assert done.stderr == ""


def test_a_host_that_configures_logging_still_sees_warnings(tmp_path: Path) -> None:
    """The NullHandler silences nothing once the host configures logging (basicConfig)."""
    host = tmp_path / "host.py"
    host.write_text(
        "import logging, mcp_actors.service, supervisors; logging.basicConfig(format='%(name)s %(message)s');"
        "logging.getLogger('mcp_actors.service').warning('visible');"
        "logging.getLogger('supervisors').warning('visible too')"
    )
    done = forkrun.run_script(host, env=dict(os.environ), cwd=tmp_path, bound=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["mcp_actors.service visible", "supervisors visible too"]
