"""A sync or asyncio host that runs stdio servers through a portal and exits without close().

``python portal_host.py CONFIG PIDFILE {sync,asyncio,guest}``

``guest`` is the same host on ``mcp_actors.asyncio.open_runtime``'s default, the runtime as a
trio guest on the host's loop, entered and never left: ``asyncio.run`` ends, its loop
closes under the suspended runtime, and the interpreter exits.

Starts a portal, adds five stdio servers — two plain fault servers, one with a grandchild
that ignores SIGTERM in the server's group, one whose grandchild escapes into its own
session (``setsid_server.py``, appending to PIDFILE), one like it that also ignores
SIGTERM — connects them all, keeps calling tools on them from daemon threads, prints one
JSON line (the tracker's marker and the servers' PIDs), waits for its stdin to close, then
returns from ``main`` with the portal still open: only the exit hooks stand between the servers and a leak.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mcp_actors._process.tracker import ProcessTracker
from mcp_actors.portal import RuntimePortal, start_portal
from mcp_actors.testing import fault_server_command

SETSID_SERVER = Path(__file__).with_name("setsid_server.py")


def specs(pidfile: str) -> list[dict[str, Any]]:
    def stdio(name: str, argv: list[str]) -> dict[str, Any]:
        return {"name": name, "type": "stdio", "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0}}

    # Ignores SIGTERM, so a kill at exit waits out the whole SIGTERM grace: time enough
    # for a supervisor that still runs to restart the siblings it saw die.
    stubborn = stdio("five", [sys.executable, str(SETSID_SERVER), pidfile])
    stubborn["config"]["env"] = {"SETSID_SERVER_IGNORE_SIGTERM": "1"}
    return [
        stdio("one", fault_server_command()),
        stdio("two", fault_server_command()),
        stdio("three", fault_server_command("--spawn-grandchild")),
        stdio("four", [sys.executable, str(SETSID_SERVER), pidfile]),
        stubborn,
    ]


def keep_calling(portal: RuntimePortal) -> None:
    """Call a tool on every server, forever, from daemon threads: a busy agent host.

    At exit these calls are still coming: a server killed under them is reconnected on the
    next call unless the exit path stops that first.
    """

    def loop(name: str) -> None:
        service = portal.sync_service()
        while True:
            try:
                service.call_tool(name, "echo", {"text": "busy"})
            except Exception:
                time.sleep(0.01)

    for spec in specs(""):
        threading.Thread(target=loop, args=(spec["name"],), daemon=True).start()


def report(pids: list[int | None]) -> None:
    marker = ProcessTracker.get_instance().marker
    print(json.dumps({"marker": marker, "servers": pids}), flush=True)


def run_sync(config: str, pidfile: str) -> None:
    portal = start_portal(config, connect_on_add=False)
    service = portal.sync_service()
    service.update("demo", is_active=False)
    for spec in specs(pidfile):
        service.add(spec)
        service.connect(spec["name"])
    keep_calling(portal)
    report([service.status(spec["name"]).pid for spec in specs(pidfile)])
    sys.stdin.read()


async def run_asyncio(config: str, pidfile: str) -> None:
    portal = start_portal(config, connect_on_add=False)
    service = portal.asyncio_service()
    await service.update("demo", is_active=False)
    for spec in specs(pidfile):
        await service.add(spec)
    await asyncio.gather(*(service.connect(spec["name"]) for spec in specs(pidfile)))
    keep_calling(portal)
    report([service.status(spec["name"]).pid for spec in specs(pidfile)])
    await asyncio.to_thread(sys.stdin.read)


async def run_guest(config: str, pidfile: str) -> None:
    import mcp_actors.asyncio

    # Entered, never left: only the exit hooks stand between the servers and a leak. The block
    # is held (a dropped one would be closed by the loop's async generator finaliser).
    block = mcp_actors.asyncio.open_runtime(config, connect_on_add=False)
    runtime = await block.__aenter__()
    service = runtime.service
    await service.update("demo", is_active=False)
    for spec in specs(pidfile):
        await service.add(spec)
    await asyncio.gather(*(service.connect(spec["name"]) for spec in specs(pidfile)))

    async def keep_calling(name: str) -> None:
        while True:
            try:
                await service.call_tool(name, "echo", {"text": "busy"})
            except Exception:
                await asyncio.sleep(0.01)

    busy = [asyncio.create_task(keep_calling(spec["name"])) for spec in specs(pidfile)]
    report([service.status(spec["name"]).pid for spec in specs(pidfile)])
    await asyncio.to_thread(sys.stdin.read)
    del busy  # asyncio.run cancels them as it ends
    _held.append(block)


_held: list[object] = []


if __name__ == "__main__":
    config, pidfile, mode = sys.argv[1:4]
    if mode == "sync":
        run_sync(config, pidfile)
    elif mode == "guest":
        asyncio.run(run_guest(config, pidfile))
    else:
        asyncio.run(run_asyncio(config, pidfile))
