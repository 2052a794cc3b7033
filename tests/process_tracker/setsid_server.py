"""A real stdio MCP server whose grandchild escapes into a session of its own.

``python setsid_server.py PIDFILE [fault-server flags...]``

Double-forks a grandchild that calls ``setsid`` (so it is in neither the server's process
group nor its session, and is reparented away from the server at once), ignores SIGTERM
and sleeps; appends the grandchild's ``<pid> <create_time>`` to PIDFILE; then execs the
fault server (``mcp_actors.testing.fault_server``) with the remaining arguments, so the
process the client talks to is a real MCP server. Only the environment, and with it the
host's tracker marker, still ties the grandchild to its host. With
``SETSID_SERVER_IGNORE_SIGTERM`` set in its environment the server ignores SIGTERM too.
With ``SETSID_SERVER_CLEAR_ENV`` set the grandchild then execs a sleeping interpreter with
an empty environment (``os.execve(..., {})``): it carries no marker either, and nothing
but its cgroup ties it to its host; the server then escapes only once it is in its cgroup.
With ``SETSID_SERVER_LEAVE_CGROUP`` set the grandchild leaves the server's cgroup at once,
as a daemon forked before the server was moved into it: only its marker ties it to its host.
"""

from __future__ import annotations

import os
import signal
import sys
import time

LIFETIME = 600  # the grandchild ends by itself, so a broken test cannot leak forever


def leave_own_cgroup() -> None:
    """Move this process to the cgroup above the host's ``mcp-actors-*`` one, as if forked before the move."""
    with open("/proc/self/cgroup") as own:
        line = next(row for row in own.read().splitlines() if row.startswith("0::"))
    path = line[3:]
    if "/mcp-actors-" not in path:
        return  # not (yet) in a cgroup of the runtime's: already outside
    outside = path[: path.index("/mcp-actors-")] or "/"
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        procs = os.path.join(root + outside, "cgroup.procs")
        if os.path.exists(procs):
            with open(procs, "w") as out:
                out.write("0")
            return


def escape() -> int:
    """Fork twice; the grandchild runs in a new session, ignoring SIGTERM, with no stdio."""
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(read_end)
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            if os.environ.get("SETSID_SERVER_LEAVE_CGROUP"):
                leave_own_cgroup()
            os.write(write_end, f"{os.getpid()}\n".encode())
            os.close(write_end)
            if os.environ.get("SETSID_SERVER_CLEAR_ENV"):
                # SIGTERM stays ignored across the exec; the create_time stays the same.
                code = f"import time; time.sleep({LIFETIME})"
                os.execve(sys.executable, [sys.executable, "-I", "-S", "-c", code], {})
            time.sleep(LIFETIME)
        os._exit(0)
    os.close(write_end)
    os.waitpid(first, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return int(pipe.readline())


def wait_for_own_cgroup(bound: float = 10.0) -> None:
    """Wait (bounded) until the runtime has moved this server into a cgroup of its own.

    The move happens as the spawn returns; what a server forks before it stays outside its
    cgroup (the documented limit). A daemon without marker is caught only by its cgroup, so
    it is forked once the server is in one, as a running server forks its helpers.
    """
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        with open("/proc/self/cgroup") as own:
            if "/mcp-actors-" in own.read():
                return
        time.sleep(0.002)


def main() -> None:
    if os.environ.get("SETSID_SERVER_CLEAR_ENV"):
        wait_for_own_cgroup()
    pid = escape()
    import psutil  # after the fork: the grandchild stays a lean copy

    with open(sys.argv[1], "a") as out:
        out.write(f"{pid} {psutil.Process(pid).create_time()!r}\n")
    if os.environ.get("SETSID_SERVER_IGNORE_SIGTERM"):
        # An ignored disposition survives exec: the server then leaves only by SIGKILL,
        # which makes every kill of it wait out its full SIGTERM grace.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.execv(sys.executable, [sys.executable, "-m", "mcp_actors.testing.fault_server", *sys.argv[2:]])


if __name__ == "__main__":
    main()
