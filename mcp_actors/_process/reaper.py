"""The reaper sidecar: a tiny process that kills a crashed host's servers.

The host starts it in its own session before its first server is spawned (see
``ProcessTracker.start_safety_net``), keeps the write end of
a pipe to the sidecar's stdin and sends one line per change::

    track <pid> <create_time> <pgid> [<tag>]
    untrack <pid> <create_time>
    exit

When the pipe reaches end-of-file without an ``exit`` line — the host died, even by
SIGKILL, because the kernel closes a dead process's descriptors — the sidecar kills every
still-tracked tree, every process carrying the host's marker (``--marker``) and every
process in the host's cgroup (``--cgroup``, where it has one), with the
one kill ladder (:mod:`mcp_actors._process.kill`); then kills what the host was spawning as it
died, once it execs (:func:`_kill_late_spawns`); deletes the host's ledger file once
nothing of the host is left; and exits. ``exit`` means a clean host shutdown that already
killed everything: the sidecar leaves at once and kills nothing.

While the host lives, the sidecar is a POSIX shell (:data:`SHELL_FRONT`) that only keeps
the lines. It starts exactly when the host's first servers start, on the same cores, and a
shell starts in a fraction of an interpreter's CPU time. At end-of-file it replaces itself
(same PID) with ``python -I -S <this file>`` (psutil's directory passed with ``--site``, so
this package's ``__init__`` is never imported) and hands it the lines; the kill ladder
(:mod:`mcp_actors._process.kill`, with psutil) is imported only then. Where there is no
``/bin/sh`` the host starts the interpreter directly.
"""

from __future__ import annotations

import os
import sys
import time

# ``typing`` is too slow an import for the sidecar; mypy treats any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType
if TYPE_CHECKING or __package__:
    from mcp_actors._process.kill import MARKER_ENV, Target

__all__ = ["MARKER_ENV", "SIDECAR_TAG", "Target", "main"]

#: The sidecar's first argument, so it is recognisable in ``ps`` and by test guards.
SIDECAR_TAG = "mcp_actors._process.reaper"

#: The shell that follows the host: ``sh -c SHELL_FRONT SIDECAR_TAG python -I -S <this file> ...``.
#: It keeps every line; ``exit`` ends it; at end-of-file it ``exec``\ s the interpreter
#: (``"$@"``) with the kept lines on its stdin, which then ends the same way as if it had
#: followed the host itself. SIGINT stays ignored across the ``exec``.
SHELL_FRONT = """trap '' INT
kept=
while IFS= read -r line; do
  [ "$line" = exit ] && exit 0
  kept="$kept$line
"
done
exec "$@" <<KEPT
$kept$line
KEPT
"""

#: Seconds the sidecar waits after the host's death for the children the host was spawning
#: to exec, and so to carry its marker (:func:`_kill_late_spawns`); past it, it gives up on them.
LATE_EXEC_BOUND = 10.0

#: A tracked process as the protocol names it: (pid, create_time, pgid, tag).
_Entry = tuple[int, float, int, "str | None"]


def _load_kill() -> ModuleType:
    """The kill ladder, imported when the host is gone (psutil's import is most of its cost)."""
    if __package__:
        from mcp_actors._process import kill as _kill

        return _kill
    # Run as a script (``python -I -S``): psutil from --site, kill.py from this directory;
    # the package's __init__ is far too heavy.
    import importlib

    args = sys.argv[1:]
    for i, arg in enumerate(args[:-1]):
        if arg == "--site":
            sys.path.append(args[i + 1])
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    return importlib.import_module("kill")


# ----------------------------------------------------------------------------- sidecar


def _parse_args(argv: Sequence[str]) -> tuple[str | None, str | None, float, str | None, str | None]:
    ledger: str | None = None
    marker: str | None = None
    host_command: str | None = None
    cgroup: str | None = None
    term_grace = 1.0  # _kill.TERM_GRACE, not imported yet
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == SIDECAR_TAG:
            continue
        if arg in ("--site", "--ledger", "--marker", "--term-grace", "--host-command", "--cgroup") and args:
            value = args.pop(0)
            if arg == "--ledger":
                ledger = value
            elif arg == "--marker":
                marker = value
            elif arg == "--term-grace":
                term_grace = float(value)
            elif arg == "--host-command":
                host_command = value
            elif arg == "--cgroup":
                cgroup = value
            continue
        raise SystemExit(f"mcp_actors._process.reaper: unexpected argument {arg!r}")
    return ledger, marker, term_grace, host_command, cgroup


def _parse_line(line: bytes) -> tuple[str, _Entry | None]:
    """One protocol line → (command, entry); malformed lines come back as ("", None)."""
    parts = line.split()
    try:
        if len(parts) in (4, 5) and parts[0] == b"track":
            tag = parts[4].decode() if len(parts) == 5 else None
            return "track", (int(parts[1]), float(parts[2]), int(parts[3]), tag)
        if len(parts) == 3 and parts[0] == b"untrack":
            return "untrack", (int(parts[1]), float(parts[2]), 0, None)
        if parts == [b"exit"]:
            return "exit", None
    except ValueError:
        pass
    return "", None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sidecar: follow the host's lines on stdin; on end-of-file kill what is tracked.

    Args:
        argv: ``[SIDECAR_TAG] [--site DIR] [--ledger PATH] [--marker MARKER] [--term-grace SECONDS]
            [--host-command DIGEST] [--cgroup DIR]`` (the host's
            :func:`~mcp_actors._process.kill.command_digest`, its cgroup directory).

    Returns:
        The exit status: 0.
    """
    ledger, marker, term_grace, host_command, cgroup = _parse_args(sys.argv[1:] if argv is None else argv)
    # The sidecar lives in its own session, so terminal signals do not reach it; ignoring
    # SIGINT also covers a host that forwards it to every child. (``_signal``: the
    # ``signal`` module would import ``enum``, a tenth of a bare interpreter's start.)
    import _signal  # type: ignore[import-not-found]  # (no stubs: the C half of signal)

    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    tracked: dict[tuple[int, float], _Entry] = {}
    for line in sys.stdin.buffer:
        command, entry = _parse_line(line)
        if command == "exit":
            return 0
        if entry is None:
            continue
        if command == "track":
            tracked[entry[0], entry[1]] = entry
        else:
            tracked.pop((entry[0], entry[1]), None)
    # End of file without "exit": the host is gone.
    kill = _load_kill()
    targets = [kill.Target(*entry) for entry in tracked.values()]
    # The host's spawns that had not exec'd, found before the first look: one that execs
    # between the two is then either found by the look or seen to exec by the wait after it.
    late: set[int] = set()
    if marker is not None and host_command is not None:
        late = kill.unexeced_children(host_command)
    kill.kill_trees(targets, term_grace=term_grace, marker=marker, reap=False, cgroup=cgroup)
    if late and marker is not None and host_command is not None:
        _kill_late_spawns(kill, marker, host_command, term_grace, late)
    # The ledger stays while anything of the host is left (stuck in the kernel, say): the
    # next start's sweep gets another chance at it.
    left = (marker is not None and kill.marker_carriers(marker)) or (cgroup is not None and kill.cgroup_members(cgroup))
    if ledger is not None and not left:
        try:
            os.unlink(ledger)
        except OSError:
            pass
    return 0


def _kill_late_spawns(kill: ModuleType, marker: str, host_command: str, term_grace: float, waiting: set[int]) -> None:
    """Kill the servers the host was spawning as it died, as they exec.

    A spawn's child closes its copies of the host's descriptors, this pipe's end among them,
    just before its exec. So the pipe can reach its end, and the first look find nothing to
    kill, while such a child still runs the host's program and carries no marker (see
    :func:`~mcp_actors._process.kill.unexeced_children`). Under load that last step took long enough
    for a server to outlive its SIGKILLed host (CI, with two copies of the
    suite at once). While any
    such child lives (``waiting``, found before the first look), look again each time one of
    them has exec'd or died; at most :data:`LATE_EXEC_BOUND` seconds. A host that had none
    costs the sidecar one walk of the process table.
    """
    deadline = time.monotonic() + LATE_EXEC_BOUND
    while waiting and time.monotonic() < deadline:
        time.sleep(0.01)
        left = kill.unexeced_children(host_command, among=waiting)
        if left != waiting:  # some exec'd (they carry the marker now) or died
            kill.kill_trees([], term_grace=term_grace, marker=marker, reap=False)
        waiting = left


if __name__ == "__main__":  # pragma: no cover - exercised through real host processes
    sys.exit(main())
