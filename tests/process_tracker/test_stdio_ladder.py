"""The stdio transport's shutdown goes through the one kill ladder: closing one server
kills its whole tree, a grandchild that escaped with setsid included, and nothing of any
other server."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import trio

from mcp_actors._process.kill import marker_of
from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker
from mcp_actors._wire.transports import StdioParams, open_stdio_transport

SETSID_SERVER = Path(__file__).with_name("setsid_server.py")


def escapees(pidfile: Path) -> list[ProcessIdentity]:
    result = []
    for line in pidfile.read_text().splitlines():
        pid, create_time = line.split()
        result.append(ProcessIdentity(pid=int(pid), create_time=float(create_time), pgid=int(pid), label="escapee"))
    return result


def lines(pidfile: Path) -> int:
    return len(pidfile.read_text().splitlines()) if pidfile.exists() else 0


def describe(identity: ProcessIdentity, tracker: ProcessTracker) -> str:
    """What the kill ladder saw of a process it should have killed (for a failure's message).

    This test failed once, under two copies of the suite at once, and passed in every
    rerun; the message says enough to tell the possible causes apart next time: the
    process not found by its tag, its create_time read differently (a clock step moves
    psutil's epoch create_time), or a kill that did not land in time.
    """
    try:
        proc = psutil.Process(identity.pid)
        seen = f"status={proc.status()} create_time={proc.create_time()!r} marker={marker_of(identity.pid)!r}"
    except psutil.Error as exc:
        seen = f"gone ({type(exc).__name__})"
    return (
        f"{identity.label} pid={identity.pid} recorded create_time={identity.create_time!r}: {seen}; "
        f"tracker tags {dict(tracker._tags)}; boot_time now {psutil.boot_time()!r}"
    )


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
                tags_while_open = describe(server_a, tracker)
            assert not escaped_a.is_alive(), f"{describe(escaped_a, tracker)}; server while open: {tags_while_open}"
            assert not server_a.is_alive(), describe(server_a, tracker)
            (escaped_b,) = escapees(pidfiles[1])
            assert escaped_b.is_alive()
        assert not escaped_b.is_alive()
        assert tracker.tracked() == ()
    finally:
        for pidfile in pidfiles:
            for identity in escapees(pidfile) if pidfile.exists() else []:
                if identity.is_alive():
                    psutil.Process(identity.pid).kill()
