"""Process trees for the process-tracker tests, and bounded checks on them.

Shared by the test modules and by ``host_script.py`` (which imports it from its own
directory). A "server" is a plain Python process that sleeps; one kind also starts a
grandchild that ignores SIGTERM, so only a SIGKILL escalation can end it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping

import psutil

from mcp_actors._process.reaper import MARKER_ENV
from mcp_actors._process.tracker import ProcessIdentity

# Every process here ends by itself after ten minutes, so a broken test cannot leak
# forever; the tests themselves require them gone within seconds.
LIFETIME = 600

GRANDCHILD_CODE = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    f"time.sleep({LIFETIME})\n"
)

SERVER_CODE = f"import time\ntime.sleep({LIFETIME})\n"

# Starts the grandchild (in the server's own process group), waits until it ignores
# SIGTERM, prints its PID and sleeps. With "stdin" as argv[1] it exits when stdin closes
# instead, leaving the grandchild behind as an orphan in its group.
SERVER_WITH_GRANDCHILD_CODE = (
    "import subprocess, sys, time\n"
    f"child = subprocess.Popen([sys.executable, '-c', {GRANDCHILD_CODE!r}], stdout=subprocess.PIPE)\n"
    "assert child.stdout.readline().strip() == b'ready'\n"
    "print(child.pid, flush=True)\n"
    "if sys.argv[1:] == ['stdin']:\n"
    "    sys.stdin.buffer.read()\n"
    "else:\n"
    f"    time.sleep({LIFETIME})\n"
)

# Double-forks a grandchild that calls setsid (it leaves the server's process group and
# session, and is reparented to init at once), ignores SIGTERM and sleeps; prints its PID,
# then sleeps. Only the inherited environment still ties the grandchild to the host.
SERVER_WITH_ESCAPEE_CODE = (
    "import os, signal, sys, time\n"
    "r, w = os.pipe()\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "        os.write(w, f'{os.getpid()}\\n'.encode())\n"
    f"        time.sleep({LIFETIME})\n"
    "    os._exit(0)\n"
    "os.close(w)\n"
    "os.wait()\n"
    "print(os.read(r, 64).decode().strip(), flush=True)\n"
    f"time.sleep({LIFETIME})\n"
)


def spawn_server(
    *,
    grandchild: bool = False,
    escapee: bool = False,
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    label: str = "server",
) -> tuple[subprocess.Popen[bytes], ProcessIdentity, ProcessIdentity | None]:
    """Start a server in its own session; return it, its identity and its grandchild's.

    ``grandchild``: the grandchild stays in the server's group and ignores SIGTERM.
    ``escapee``: the grandchild double-forks into a session of its own (see above).
    """
    code = SERVER_WITH_GRANDCHILD_CODE if grandchild else SERVER_WITH_ESCAPEE_CODE if escapee else SERVER_CODE
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if grandchild or escapee else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=preexec_fn,
        env=None if env is None else dict(env),
    )
    identity = ProcessIdentity.of(proc.pid, label=label)
    grand = None
    if grandchild or escapee:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        proc.stdout.close()
        grand = ProcessIdentity.of(int(line), label=f"{label}-grandchild")
    return proc, identity, grand


def wait_gone(identities: Iterable[ProcessIdentity], *, timeout: float = 5.0) -> float:
    """Poll (bounded) until none of the processes runs; return the seconds it took.

    Raises:
        AssertionError: Some are still alive after *timeout* seconds.
    """
    pending = list(identities)
    start = time.monotonic()
    deadline = start + timeout
    while True:
        pending = [i for i in pending if i.is_alive()]
        if not pending:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise AssertionError(f"still alive after {timeout} s: {[(i.label, i.pid) for i in pending]}")
        time.sleep(0.005)


def force_kill(identities: Iterable[ProcessIdentity | None]) -> None:
    """Cleanup for a failed test: SIGKILL whatever of these still runs (identity-checked)."""
    for identity in identities:
        if identity is not None and identity.is_alive():
            try:
                os.kill(identity.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def carriers(marker: str) -> list[psutil.Process]:
    """Every live process (zombies excluded) whose environment carries this tracker marker.

    A tracked server's descendants all inherit the marker, wherever they moved (another
    process group, another session, reparented to init), so this finds everything a host
    started, and nothing any other host (another copy of the suite) started.
    """
    found = []
    for proc in psutil.process_iter():
        try:
            value = proc.environ().get(MARKER_ENV)
            if value is not None and value.split("/")[0] == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_no_carriers(marker: str, *, timeout: float = 10.0) -> float:
    """Poll (bounded) until no process carries *marker*; return the seconds it took.

    Raises:
        AssertionError: Some are still alive after *timeout* seconds (they are killed
            then, so a failed test leaks nothing).
    """
    start = time.monotonic()
    while True:
        left = carriers(marker)
        if not left:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            description = [(p.pid, " ".join(p.cmdline())[:80]) for p in left if p.is_running()]
            for proc in left:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            raise AssertionError(f"{len(left)} process(es) outlived their host: {description}")
        time.sleep(0.02)
