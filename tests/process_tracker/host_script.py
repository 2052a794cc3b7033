"""A host process for the process-tracker tests.

``python host_script.py MODE [--forge PID]``

Modes ``exit``, ``raise`` and ``wait`` start four tracked servers (one with a grandchild
that ignores SIGTERM, one whose grandchild double-forks into a session of its own, none
with a parent-death signal, as the stdio transport spawns them), print one JSON line
describing every process, and wait for stdin to close; then ``exit`` returns normally,
``raise`` raises an unhandled exception, and ``wait`` (meant to be killed before) returns.
``--forge PID`` also registers PID with a create_time that is wrong by seven seconds: the
tracker must never touch that process.

Mode ``sweep`` only sweeps the ledger and prints the killed processes as JSON.
The state directory comes from ``MCP_ACTORS_STATE_DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from pt_support import spawn_server

from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker


def _pair(identity: ProcessIdentity) -> list[float]:
    return [identity.pid, identity.create_time]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["exit", "raise", "wait", "sweep"])
    parser.add_argument("--forge", type=int)
    args = parser.parse_args()
    tracker = ProcessTracker.get_instance()
    if args.mode == "sweep":
        print(json.dumps([_pair(i) for i in tracker.sweep_ledger()]), flush=True)
        return

    servers = []
    grandchild = escapee = None
    for n in range(4):
        _proc, identity, grand = spawn_server(
            grandchild=n == 0,
            escapee=n == 3,
            env={**os.environ, **tracker.child_env()},
            label=f"server{n}",
        )
        tracker.register(identity)
        servers.append(identity)
        if n == 0:
            grandchild = grand
        elif n == 3:
            escapee = grand
    if args.forge is not None:
        real = ProcessIdentity.of(args.forge)
        tracker.register(ProcessIdentity(pid=real.pid, create_time=real.create_time - 7.0, pgid=real.pgid))
    reaper_pid = tracker.reaper_pid
    assert grandchild is not None and escapee is not None and reaper_pid is not None
    report = {
        "host": _pair(ProcessIdentity.of(os.getpid())),
        "reaper": _pair(ProcessIdentity.of(reaper_pid)),
        "servers": [_pair(i) for i in servers],
        "grandchild": _pair(grandchild),
        "escapee": _pair(escapee),
        "marker": tracker.marker,
        "ledger": str(tracker.ledger_path),
    }
    print(json.dumps(report), flush=True)
    sys.stdin.buffer.read()  # until the test closes it (or kills this host)
    if args.mode == "raise":
        raise RuntimeError("host_script: unhandled on purpose")


if __name__ == "__main__":
    main()
