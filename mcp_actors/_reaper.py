"""The reaper sidecar: a tiny process that kills a crashed host's servers.

The host starts it in its own session on the first registration, keeps the write end of
a pipe to the sidecar's stdin and sends one line per change::

    track <pid> <create_time> <pgid> [<tag>]
    untrack <pid> <create_time>
    exit

When the pipe reaches end-of-file without an ``exit`` line — the host died, even by
SIGKILL, because the kernel closes a dead process's descriptors — the sidecar kills every
still-tracked tree and every process carrying the host's marker (``--marker``), with the
one kill ladder (:mod:`mcp_actors._kill`); deletes the host's ledger file once nothing of
the host is left; and exits. ``exit`` means a clean host shutdown that already killed
everything: the sidecar leaves at once and kills nothing.

The sidecar imports only the standard library, psutil and :mod:`mcp_actors._kill`, and the
host starts it with ``python -I -S <this file>`` (psutil's directory passed with
``--site``), so it never imports this package's ``__init__`` and starts in tens of
milliseconds.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # pragma: no cover - the sidecar's start
    # The sidecar runs with -S (no site-packages) for a fast start; the host passes the
    # directory psutil lives in. The only import this module needs beyond the stdlib.
    for _i, _arg in enumerate(sys.argv[:-1]):
        if _arg == "--site":
            sys.path.append(sys.argv[_i + 1])

import importlib
import signal
from collections.abc import Sequence

# ``typing`` is too slow an import for the sidecar; mypy treats any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING or __package__:
    from mcp_actors import _kill
else:  # pragma: no cover - run as a script: the package's __init__ is far too heavy
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    _kill = importlib.import_module("_kill")

MARKER_ENV = _kill.MARKER_ENV
Target = _kill.Target

__all__ = ["MARKER_ENV", "SIDECAR_TAG", "Target", "main"]

#: The sidecar's first argument, so it is recognisable in ``ps`` and by test guards.
SIDECAR_TAG = "mcp_actors._reaper"


# ----------------------------------------------------------------------------- sidecar


def _parse_args(argv: Sequence[str]) -> tuple[str | None, str | None, float]:
    ledger: str | None = None
    marker: str | None = None
    term_grace = _kill.TERM_GRACE
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == SIDECAR_TAG:
            continue
        if arg in ("--site", "--ledger", "--marker", "--term-grace") and args:
            value = args.pop(0)
            if arg == "--ledger":
                ledger = value
            elif arg == "--marker":
                marker = value
            elif arg == "--term-grace":
                term_grace = float(value)
            continue
        raise SystemExit(f"mcp_actors._reaper: unexpected argument {arg!r}")
    return ledger, marker, term_grace


def _parse_line(line: bytes) -> tuple[str, Target | None]:
    """One protocol line → (command, target); malformed lines come back as ("", None)."""
    parts = line.split()
    try:
        if len(parts) in (4, 5) and parts[0] == b"track":
            tag = parts[4].decode() if len(parts) == 5 else None
            return "track", Target(int(parts[1]), float(parts[2]), int(parts[3]), tag)
        if len(parts) == 3 and parts[0] == b"untrack":
            return "untrack", Target(int(parts[1]), float(parts[2]), 0)
        if parts == [b"exit"]:
            return "exit", None
    except ValueError:
        pass
    return "", None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sidecar: follow the host's lines on stdin; on end-of-file kill what is tracked.

    Args:
        argv: ``[SIDECAR_TAG] [--site DIR] [--ledger PATH] [--marker MARKER] [--term-grace SECONDS]``.

    Returns:
        The exit status: 0.
    """
    ledger, marker, term_grace = _parse_args(sys.argv[1:] if argv is None else argv)
    # The sidecar lives in its own session, so terminal signals do not reach it; ignoring
    # SIGINT also covers a host that forwards it to every child.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tracked: dict[tuple[int, float], _kill.Target] = {}
    for line in sys.stdin.buffer:
        command, target = _parse_line(line)
        if command == "exit":
            return 0
        if target is None:
            continue
        if command == "track":
            tracked[target.pid, target.create_time] = target
        else:
            tracked.pop((target.pid, target.create_time), None)
    # End of file without "exit": the host is gone.
    _kill.kill_trees(tracked.values(), term_grace=term_grace, marker=marker, reap=False)
    # The ledger stays while anything of the host is left (stuck in the kernel, say): the
    # next start's sweep gets another chance at it.
    if ledger is not None and not (marker is not None and _kill.marker_carriers(marker)):
        try:
            os.unlink(ledger)
        except OSError:
            pass
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through real host processes
    sys.exit(main())
