"""The helpers of mcp_actors.testing: commands, serve_http, the leftover-process check."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

import psutil
import pytest
import trio

import mcp_actors.testing
from mcp_actors._demo.announce import format_announce, http_url, parse_announce
from mcp_actors.errors import ConnectTimeout, ServerStartFailed
from mcp_actors.testing import (
    ANNOUNCE_PREFIX,
    assert_no_children_left,
    demo_server_command,
    fault_server_command,
    live_descendants,
    serve_http,
)

BOUND = 30


def test_public_names_are_exported_and_sorted() -> None:
    """mcp_actors.testing exports a sorted __all__ whose names all resolve."""
    names = mcp_actors.testing.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(mcp_actors.testing, name) is not None


def test_commands_use_this_interpreter() -> None:
    """The command helpers run the servers as modules of the current interpreter."""
    assert demo_server_command("--transport", "sse") == [
        sys.executable,
        "-m",
        "mcp_actors.demo_server",
        "--transport",
        "sse",
    ]
    assert fault_server_command("--no-ping") == [sys.executable, "-m", "mcp_actors.testing.fault_server", "--no-ping"]


def test_announce_line_round_trip() -> None:
    """An announcement parses back to its URL; other lines do not; IPv6 hosts are bracketed."""
    url = http_url("127.0.0.1", 8123, "/mcp")
    assert url == "http://127.0.0.1:8123/mcp"
    assert format_announce(url) == ANNOUNCE_PREFIX + url
    assert parse_announce(format_announce(url) + "\r\n") == url
    assert parse_announce("INFO: listening on http://x") is None
    assert parse_announce(ANNOUNCE_PREFIX) is None
    assert http_url("::1", 1, "/sse") == "http://[::1]:1/sse"


async def test_serve_http_reports_a_server_that_exits_before_announcing() -> None:
    """serve_http raises ServerStartFailed with the exit code and the server's last stderr line."""
    argv = fault_server_command("--transport", "streamable-http", "--exit-at-start", "5")
    with trio.fail_after(BOUND):
        with pytest.raises(ServerStartFailed, match="exit code 5") as info:
            async with serve_http(argv):
                pytest.fail("the block must not run")
    assert info.value.stderr_tail == ("fault: exiting at start with code 5",)


def _preexisting() -> Callable[[psutil.Process], bool]:
    """Ignore processes that existed before the test (earlier tests' helpers, zombies of others)."""
    before = {p.pid for p in live_descendants()}
    return lambda p: p.pid in before


async def test_serve_http_times_out_and_kills_a_slow_server() -> None:
    """serve_http raises ConnectTimeout when no announcement comes in time, and kills the server."""
    old = _preexisting()
    argv = ["sh", "-c", "echo warming up >&2; exec sleep 60"]
    with trio.fail_after(BOUND):
        with pytest.raises(ConnectTimeout, match=r"^sh: no .* within 2 s") as info:
            async with serve_http(argv, startup_timeout=2):
                pytest.fail("the block must not run")
    assert info.value.stderr_tail == ("warming up",)
    assert live_descendants(ignore=old) == []


async def test_serve_http_kills_the_whole_group_on_exit() -> None:
    """Leaving serve_http reaps the server and kills a grandchild that ignores SIGTERM."""
    script = (
        'trap "" TERM; sleep 60 & echo "grandchild $!" >&2; trap - TERM; '
        'echo "mcp-actors: listening on http://127.0.0.1:9/mcp" >&2; exec sleep 60'
    )
    with trio.fail_after(BOUND):
        async with serve_http(["sh", "-c", script]) as server:
            assert server.url == "http://127.0.0.1:9/mcp"
            line = await server.wait_stderr_line("grandchild ")
            grandchild = psutil.Process(int(line.rsplit(" ", 1)[1]))
            assert grandchild.ppid() == server.pid == server.process.pid
            grandchild.terminate()  # ignored
            assert grandchild.status() != psutil.STATUS_ZOMBIE
    assert server.process.returncode == -signal.SIGTERM
    gone, _ = psutil.wait_procs([grandchild], timeout=BOUND)
    assert gone


async def test_serve_http_rejects_a_non_positive_timeout() -> None:
    """serve_http refuses startup_timeout <= 0 before starting anything."""
    with pytest.raises(ValueError, match="startup_timeout must be > 0"):
        async with serve_http(demo_server_command("--transport", "sse"), startup_timeout=0):
            pass


def test_assert_no_children_left_fails_kills_and_reaps() -> None:
    """A leftover child makes the check fail naming its pid; afterwards it is dead and reaped."""
    old = _preexisting()
    assert_no_children_left(grace=0, ignore=old)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(AssertionError, match=rf"pid {child.pid} .*time.sleep\(60\)"):
            assert_no_children_left(grace=0.1, ignore=old)
        assert child.returncode is not None or not psutil.pid_exists(child.pid)
        assert live_descendants(ignore=old) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_assert_no_children_left_counts_zombies_and_honours_ignore() -> None:
    """An exited but unreaped child counts as left behind, unless ignored."""
    old = _preexisting()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Wait for the exit without reaping it: waitid with WNOWAIT leaves the zombie.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert_no_children_left(grace=0, ignore=lambda p: p.pid == child.pid or old(p))
        with pytest.raises(AssertionError, match=rf"pid {child.pid} \[zombie\]"):
            assert_no_children_left(grace=0.1, ignore=old)
        assert not psutil.pid_exists(child.pid)
    finally:
        child.poll()
