"""The stdio transport's shutdown goes through the one kill ladder: closing one server
kills its whole tree, a grandchild that escaped with setsid included, and nothing of any
other server."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import trio

from mcp_actors.process_tracker import ProcessIdentity, ProcessTracker
from mcp_actors.transports import StdioParams, open_stdio_transport

SETSID_SERVER = Path(__file__).with_name("setsid_server.py")


def escapees(pidfile: Path) -> list[ProcessIdentity]:
    result = []
    for line in pidfile.read_text().splitlines():
        pid, create_time = line.split()
        result.append(ProcessIdentity(pid=int(pid), create_time=float(create_time), pgid=int(pid), label="escapee"))
    return result


def lines(pidfile: Path) -> int:
    return len(pidfile.read_text().splitlines()) if pidfile.exists() else 0


async def wait_for_line(pidfile: Path, count: int) -> None:
    """Wait (bounded) until the server wrote its escaped grandchild down (before its exec)."""
    with trio.fail_after(30):
        while lines(pidfile) < count:  # noqa: ASYNC110 - a file written by another process
            await trio.sleep(0.01)


async def test_closing_a_stdio_server_kills_its_escaped_grandchild_only(
    tracker: ProcessTracker, tmp_path: Path
) -> None:
    """Leaving the transport kills its server's setsid grandchild; another server's stays alive."""
    pidfiles = [tmp_path / "a.txt", tmp_path / "b.txt"]
    params = [
        StdioParams(command=sys.executable, args=[str(SETSID_SERVER), str(pidfile)], close_grace=0.5, term_grace=0.3)
        for pidfile in pidfiles
    ]
    try:
        async with open_stdio_transport(params[1], label="b", tracker=tracker):
            await wait_for_line(pidfiles[1], 1)
            async with open_stdio_transport(params[0], label="a", tracker=tracker) as link:
                await wait_for_line(pidfiles[0], 1)
                (escaped_a,) = escapees(pidfiles[0])
                assert escaped_a.is_alive() and link.process is not None
                server_a = link.process
            assert not escaped_a.is_alive() and not server_a.is_alive()
            (escaped_b,) = escapees(pidfiles[1])
            assert escaped_b.is_alive()
        assert not escaped_b.is_alive()
        assert tracker.tracked() == ()
    finally:
        for pidfile in pidfiles:
            for identity in escapees(pidfile) if pidfile.exists() else []:
                if identity.is_alive():
                    psutil.Process(identity.pid).kill()
