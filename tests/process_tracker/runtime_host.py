"""A host that runs the real runtime with four stdio servers, for the kill-on-exit tests.

One server's grandchild ignores SIGTERM; another's double-forks into a session of its own
(``setsid_server.py``).

Usage: runtime_host.py CONFIG MODE [cleared], MODE in {exit, raise, wait}. With ``cleared``
a fifth server's escaped grandchild also clears its environment (it carries no marker),
and the report names it as ``cleared``. Prints one JSON line with
the servers', the grandchild's and the escaped grandchild's (pid, create_time), then: ``exit`` returns normally
after stdin closes, ``raise`` raises an unhandled error from inside the runtime after
stdin closes, ``wait`` blocks until killed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import psutil
import trio

from mcp_actors.runtime import open_runtime
from mcp_actors.testing import fault_server_command

SETSID_SERVER = Path(__file__).with_name("setsid_server.py")


def server(
    name: str, *flags: str, argv: list[str] | None = None, env: dict[str, str] | None = None
) -> dict[str, object]:
    argv = argv or fault_server_command(*flags)
    spec: dict[str, object] = {"command": argv[0], "args": argv[1:], "pingInterval": 0}
    if env:
        spec["env"] = env
    return {"name": name, "type": "stdio", "config": spec}


async def main(config: str, mode: str, *extra: str) -> None:
    async with open_runtime(config, connect_on_add=False) as rt:
        svc = rt.service
        await svc.update("demo", is_active=False)
        pidfile = Path(config).with_name("escapee.txt")
        escaping = server("four", argv=[sys.executable, str(SETSID_SERVER), str(pidfile)])
        specs = [server("one"), server("two"), server("three", "--spawn-grandchild"), escaping]
        cleared_file = Path(config).with_name("cleared.txt")
        if "cleared" in extra:
            argv = [sys.executable, str(SETSID_SERVER), str(cleared_file)]
            specs.append(server("five", argv=argv, env={"SETSID_SERVER_CLEAR_ENV": "1"}))
        for spec in specs:
            await svc.add(spec)
        async with trio.open_nursery() as nursery:  # side by side: the report waits for the slowest, not the sum
            for spec in specs:
                nursery.start_soon(svc.connect, spec["name"])
        handle = svc._registry.snapshot.handles[svc.get("three").id]
        with trio.fail_after(20):
            line = await handle.wait_for_stderr(lambda text: "fault: grandchild" in text)
        grandchild = int(re.search(r"grandchild (\d+)", line).group(1))  # type: ignore[union-attr]
        pids = [svc.status(name).pid for name in ("one", "two", "three", "four")]
        escapee, escapee_ctime = pidfile.read_text().split()
        report = {
            "servers": [[pid, psutil.Process(pid).create_time()] for pid in pids],
            "grandchild": [grandchild, psutil.Process(grandchild).create_time()],
            "escapee": [int(escapee), float(escapee_ctime)],
        }
        if "cleared" in extra:
            with trio.fail_after(20):
                while not cleared_file.exists() or not cleared_file.read_text().endswith("\n"):  # noqa: ASYNC110
                    await trio.sleep(0.01)
            cleared, cleared_ctime = cleared_file.read_text().split()
            report["cleared"] = [int(cleared), float(cleared_ctime)]
        print(json.dumps(report), flush=True)
        if mode == "wait":
            await trio.sleep_forever()
        await trio.to_thread.run_sync(sys.stdin.read)
        if mode == "raise":
            raise RuntimeError("the host crashed on purpose")


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
