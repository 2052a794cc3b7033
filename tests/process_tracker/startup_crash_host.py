"""A host that dies by SIGKILL while its runtime is starting its first servers.

Usage: startup_crash_host.py CONFIG MODE COUNT. Writes COUNT stdio servers into CONFIG
(each a process that sleeps and never reads its stdin, so only a kill ends it), opens the
runtime, starts connecting every server at once, and kills itself with SIGKILL at the
first server's registration with the process tracker: before the tracker records it
(``in-register``: the instant right after the spawn) or right after (``after-register``:
the other servers are still being spawned). Just before dying it prints one JSON line: the
tracker's marker and the first server's (pid, create_time).
"""

from __future__ import annotations

import json
import os
import signal
import sys

import trio
from pt_support import SERVER_CODE

from mcp_actors._config.codec import record_from_json_dict
from mcp_actors._config.record import new_server_id
from mcp_actors._config.store import ConfigStore
from mcp_actors._process.tracker import ProcessIdentity, ProcessTracker
from mcp_actors.errors import McpActorsError
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService


def die_at_first_registration(tracker: ProcessTracker, *, after: bool) -> None:
    register = tracker.register

    def register_then_die(identity: ProcessIdentity, *, tag: str | None = None, cgroup: str | None = None) -> None:
        if after:
            register(identity, tag=tag, cgroup=cgroup)
        report = {"marker": tracker.marker, "spawned": [identity.pid, identity.create_time]}
        print(json.dumps(report), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    tracker.register = register_then_die  # type: ignore[method-assign]


async def connect(service: McpService, name: str) -> None:
    try:
        await service.connect(name)
    except McpActorsError:
        pass


async def main(config: str, mode: str, count: int) -> None:
    names = [f"sleeper{n}" for n in range(count)]
    records = [
        record_from_json_dict(
            {
                "id": new_server_id(),
                "name": name,
                "type": "stdio",
                "config": {"command": sys.executable, "args": ["-c", SERVER_CODE], "pingInterval": 0},
            }
        )
        for name in names
    ]
    ConfigStore(config).save(records)
    die_at_first_registration(ProcessTracker.get_instance(), after=mode == "after-register")
    async with open_runtime(config, connect_on_add=False) as rt, trio.open_nursery() as nursery:
        for name in names:
            nursery.start_soon(connect, rt.service, name)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
