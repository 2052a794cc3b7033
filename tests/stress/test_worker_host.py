"""A stress worker ends its run when its host process is gone, with a pidfd or by polling."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mcp_actors.stress._worker import _end_with_host

REPO = Path(__file__).resolve().parents[2]

# The worker's stand-in: waits on its parent as a worker waits on its host, then says so.
WORKER = """
import os, sys, trio
if sys.argv[1] == "poll":
    del os.pidfd_open  # the platforms without pidfds
from mcp_actors.stress._worker import _end_with_host

async def main():
    with trio.CancelScope() as scope:
        await _end_with_host(int(sys.argv[2]), scope)
        await trio.sleep_forever()
    print("ended", flush=True)

trio.run(main)
"""

# The host's stand-in: starts the worker (giving its own pid, as the stress host does), says
# the worker's pid, and lives until it is killed (maybe before the worker waits on it).
HOST = """
import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], str(os.getpid())])
print(worker.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["pidfd", "poll"])
def test_a_worker_ends_its_run_when_its_host_is_killed(how: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, WORKER, how], stdout=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        assert host.stdout is not None
        worker_pid = int(host.stdout.readline())
        host.kill()
        host.wait(timeout=60)
        # The worker inherited the host's stdout: its line arrives once the host is gone.
        assert host.stdout.readline() == b"ended\n"
    finally:
        if host.poll() is None:
            host.kill()
        with contextlib.suppress(ProcessLookupError, UnboundLocalError):
            os.kill(worker_pid, signal.SIGKILL)


async def test_a_worker_whose_parent_is_not_the_host_ends_at_once() -> None:
    """A host already gone when the worker starts (it was re-parented) ends the run without waiting."""
    with trio.CancelScope() as scope:
        await _end_with_host(os.getppid() + 1_000_000, scope)
        await trio.sleep_forever()
    assert scope.cancelled_caught
