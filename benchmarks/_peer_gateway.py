"""A peer's gateway for ``benchmarks/gateway.py``: fastmcp's proxy or ``mcp-proxy`` in front of one stdio upstream.

Run as the benchmark harness runs an HTTP server (``{"http": argv}``), with our interpreter
and the standard library only: it picks a free loopback port, starts the peer on it with the
peer's own interpreter (its venv under ``benchmarks/.venvs/``: the peers pin other ``mcp``
versions than ours), waits until the port accepts connections, prints the endpoint URL as
its first line on stdout and, when its stdin closes, ends the peer's process group::

    python benchmarks/_peer_gateway.py --kind fastmcp|mcp-proxy --python PEER_PY -- <upstream argv...>

Kinds:

* ``fastmcp``: ``fastmcp.server.create_proxy`` with an ``mcpServers`` config of the one
  upstream, run over streamable HTTP (``benchmarks/_fastmcp_proxy.py``, in fastmcp's venv):
  its documented way to put a stdio server behind HTTP.
* ``mcp-proxy``: the ``mcp-proxy`` command (PyPI) exposing the stdio upstream over
  streamable HTTP (``mcp-proxy --port P -- <upstream argv>``; endpoint ``/mcp``).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
READY_TIMEOUT = 120.0
"""Seconds a peer may take to accept connections (its imports, on a loaded machine)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the peer exited with {proc.returncode} before it listened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the peer did not listen on port {port} within {READY_TIMEOUT:g}s")


def peer_argv(kind: str, python: str, port: int, upstream: list[str]) -> list[str]:
    """The command line that starts the peer ``kind`` on ``port`` in front of ``upstream``."""
    if kind == "fastmcp":
        return [python, str(HERE / "_fastmcp_proxy.py"), str(port), "--", *upstream]
    if kind == "mcp-proxy":
        command = str(Path(python).parent / "mcp-proxy")
        return [command, "--port", str(port), "--host", "127.0.0.1", "--log-level", "WARNING", "--", *upstream]
    raise SystemExit(f"unknown kind {kind!r}")


def main() -> None:
    """Start the peer, announce its URL, end it when stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("fastmcp", "mcp-proxy"), required=True)
    parser.add_argument("--python", required=True, help="the peer venv's interpreter")
    parser.add_argument("upstream", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    upstream = [a for a in args.upstream if a != "--"]
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    proc = subprocess.Popen(
        peer_argv(args.kind, args.python, port, upstream), env=env, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        _wait_ready(port, proc)
        sys.stdout.write(f"http://127.0.0.1:{port}/mcp\n")
        sys.stdout.flush()
        sys.stdin.buffer.read()  # until the harness closes it
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


if __name__ == "__main__":
    main()
