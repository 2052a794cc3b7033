"""A host that dies by SIGKILL while a server it is spawning has not exec'd yet.

Usage: late_exec_host.py DELAY. Starts the kill-on-exit net, then forks a child that does
what a spawn's child does before its exec (its own session, the inherited descriptors
closed, among them the host's end of the sidecar's pipe), waits DELAY seconds, and only
then execs a sleeping server with the host's marker in its environment. The host prints
one JSON line (its marker, the child's PID) and kills itself with SIGKILL at once, so the
sidecar sees its pipe close while the child still runs the host's program and environment.

Under load a spawn's child can be that late between closing its descriptors and its exec
(``tests/process_tracker/test_startup_crash.py`` once left such a server behind, on a
2-core machine running two copies of the suite); the delay makes the race certain.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from pt_support import SERVER_CODE

from mcp_actors._process.tracker import ProcessTracker


def main(delay: float) -> None:
    tracker = ProcessTracker.get_instance()
    tracker.start_safety_net()
    env = {**os.environ, **tracker.child_env()}
    pid = os.fork()
    if pid == 0:  # the child: only system calls until its exec
        os.setsid()
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        time.sleep(delay)
        os.execve(sys.executable, [sys.executable, "-c", SERVER_CODE], env)
    print(json.dumps({"marker": tracker.marker, "child": pid}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(float(sys.argv[1]))
