"""The gateway's instructions per ``tools/call``: callgrind on the gateway process alone, around the calls only.

CPU time per call moves by 2x with the load of a shared machine; the instructions a process
executes do not. The gateway (``benchmarks/_gateway_server.py --kind lean`` in front of the
light server over stdio) runs under ``valgrind --tool=callgrind`` with instrumentation off;
after a session is opened and a warm-up wave of calls, ``callgrind_control -i on`` switches it
on, ``--calls`` echo calls are made (``--in-flight`` keep-alive connections of the standard
library's ``http.client``, each in a thread of its own), and a dump is taken. The count is of
the gateway's user space only (not the kernel, not the upstream, not the client) and repeats
within ~0.1 % from run to run::

    python -m benchmarks.gateway_instructions [--calls 1000] [--in-flight 10]
"""

from __future__ import annotations

import argparse
import glob
import http.client
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from benchmarks._common import toolserver
from benchmarks._peers import BENCH_DIR

__all__ = ["count", "main"]

_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
_VERSION = "2025-11-25"


def _session(url: urllib.parse.SplitResult) -> dict[str, str]:
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=600)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": _VERSION, "capabilities": {}, "clientInfo": {"name": "count", "version": "1"}},
    }
    conn.request("POST", url.path, json.dumps(init), _HEADERS)
    response = conn.getresponse()
    response.read()
    conn.close()
    return {**_HEADERS, "mcp-session-id": response.getheader("mcp-session-id") or "", "mcp-protocol-version": _VERSION}


def _calls(url: urllib.parse.SplitResult, headers: dict[str, str], count: int, errors: list[str]) -> None:
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=600)
    try:
        for i in range(count):
            call = {
                "jsonrpc": "2.0",
                "id": i + 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hello"}},
            }
            conn.request("POST", url.path, json.dumps(call), headers)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200 or b'"hello"' not in body:
                errors.append(f"{response.status}: {body[:200]!r}")
                return
    finally:
        conn.close()


def _wave(url: urllib.parse.SplitResult, headers: dict[str, str], calls: int, in_flight: int) -> None:
    errors: list[str] = []
    threads = [
        threading.Thread(target=_calls, args=(url, headers, calls // in_flight, errors)) for _ in range(in_flight)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"a call failed: {errors[0]}")


def count(calls: int, in_flight: int) -> float:
    """The gateway's instructions per call over ``calls`` calls (a multiple of ``in_flight``)."""
    workdir = Path(tempfile.mkdtemp(prefix="mcp-actors-bench-instructions-"))
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={workdir}/cg.%p",
        sys.executable,
        str(BENCH_DIR / "_gateway_server.py"),
        "--kind",
        "lean",
        "--",
        *toolserver(),
    ]
    gateway = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert gateway.stdout is not None
        url = urllib.parse.urlsplit(gateway.stdout.readline().decode().strip())
        headers = _session(url)
        _wave(url, headers, in_flight * 20, in_flight)  # warm-up: connections, caches, the tool table
        pid = str(gateway.pid)
        subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
        _wave(url, headers, calls, in_flight)
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
    finally:
        if gateway.stdin is not None:
            gateway.stdin.close()
        gateway.wait()
    try:
        for dump in glob.glob(f"{workdir}/cg.*.1"):
            for line in Path(dump).read_text().splitlines():
                if line.startswith("summary:"):
                    return int(line.split()[1]) / calls
        raise SystemExit("callgrind wrote no dump")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls counted (default 1000)")
    parser.add_argument("--in-flight", type=int, default=10, help="connections calling at once (default 10)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.error("needs valgrind (Debian: apt-get install valgrind)")
    if args.in_flight < 1 or args.calls < args.in_flight or args.calls % args.in_flight:
        parser.error("--calls must be a positive multiple of --in-flight")
    per_call = count(args.calls, args.in_flight)
    print(f"gateway instructions per tools/call: {per_call:,.0f} ({args.calls} calls, {args.in_flight} in flight)")


if __name__ == "__main__":
    main()
