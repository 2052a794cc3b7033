"""Instructions per call: the client's cost counted by valgrind, where CPU time is too noisy to compare.

On a shared machine the CPU time of the same client, per call, moves by a factor of up to
two from run to run (docs/performance.md and 7). The number of instructions the
client executes does not: ``valgrind --tool=cachegrind`` counts them, and the difference
between a short and a long run of the same loop (50 calls in flight on the light server,
after the handshake and 20 warm-up calls) divided by the difference in calls is the
instructions of one call, start-up and imports cancelled out. Kernel time (the socket and
pipe system calls) is not counted: this compares what the client's own code does, for an
A/B of a change or against the floor. Each measurement runs the contender's driver (see
``benchmarks/drivers``) under valgrind, about 20-60 s each; the servers run natively.

    python -m benchmarks.instructions [--contenders ours,floor] [--transports stdio,http] [--calls 500,2500]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from benchmarks._common import toolserver

__all__ = ["instructions_per_call", "main"]

IN_FLIGHT = 50
WARMUP = 20
_REFS = re.compile(rb"I\s+refs:\s+([\d,]+)")


async def _loop(key: str, server: Any, calls: int) -> None:
    from benchmarks.profile_call import _driver

    driver = _driver(key)
    driver.prepare([server])
    async with driver.open([server]) as session:
        await session.tool_names(0)
        for _ in range(WARMUP):
            await session.call(0, "echo", {"text": "hello"})

        async def worker(count: int) -> None:
            for _ in range(count):
                await session.call(0, "echo", {"text": "hello"})

        async with trio.open_nursery() as nursery:
            for _ in range(IN_FLIGHT):
                nursery.start_soon(worker, calls // IN_FLIGHT)


def _count(key: str, server: Any, calls: int) -> int:
    """The instructions of one child run of ``calls`` calls under cachegrind."""
    with tempfile.TemporaryDirectory() as state:
        env = {**os.environ, "MCP_ACTORS_STATE_DIR": state, "MCP_ACTORS_CONFIG": str(Path(state) / "config.json")}
        server_arg = json.dumps(server)
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                sys.executable,
                "-m",
                "benchmarks.instructions",
                "--child",
                key,
                server_arg,
                str(calls),
            ],
            env=env,
            capture_output=True,
            timeout=1800,
            check=False,
        )
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{key}: the run under valgrind failed:\n{done.stderr.decode(errors='replace')[-2000:]}")
    return int(found.group(1).replace(b",", b""))


def instructions_per_call(key: str, server: Any, short: int, long: int) -> float:
    """``(count(long) - count(short)) / (long - short)``: one call's instructions."""
    return (_count(key, server, long) - _count(key, server, short)) / (long - short)


def main(argv: list[str] | None = None) -> None:
    """Print the instructions per call of each contender on each transport."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--contenders", default="ours,floor", help="ours, raw, floor (comma-separated)")
    parser.add_argument("--transports", default="stdio,http", help="stdio, http (comma-separated)")
    parser.add_argument("--calls", default="500,2500", help="the short and the long run's calls")
    parser.add_argument("--child", nargs=3, metavar=("KEY", "SERVER", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        key, server_arg, calls = args.child
        server: Any = json.loads(server_arg)
        trio.run(_loop, key, server, int(calls))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    short, long = (int(n) for n in args.calls.split(","))
    for transport in args.transports.split(","):
        http: subprocess.Popen[bytes] | None = None
        if transport == "http":
            http = subprocess.Popen([*toolserver(), "--http"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert http.stdout is not None
            server: Any = http.stdout.readline().decode().strip()
        else:
            server = toolserver()
        try:
            for key in args.contenders.split(","):
                per_call = instructions_per_call(key, server, short, long)
                print(f"{transport:5s} {key:6s} {per_call:>10,.0f} instructions per call", flush=True)
        finally:
            if http is not None:
                assert http.stdin is not None
                http.stdin.close()
                http.wait(timeout=10)


if __name__ == "__main__":
    main()
