"""N gateway replicas behind haproxy, for ``benchmarks/gateway.py --replicas``.

Run as the benchmark harness runs an HTTP server (``{"http": argv}``): it starts ``N``
gateway processes (``benchmarks/_gateway_server.py --kind lean``, each with its own
upstream), then haproxy (the Debian package) in front of them on a free loopback port,
prints haproxy's endpoint URL as its first line on stdout, and when its stdin closes stops
haproxy and the replicas::

    python benchmarks/_replicas.py --replicas N -- <upstream argv...>

haproxy balances round-robin, request by request: a 2026-07-28 request stands alone, so any
replica may answer it. A 2025 session is kept on the replica that opened it (a stick table
on the ``Mcp-Session-Id`` header, learnt from the ``initialize`` response). One haproxy
thread: on two cores the replicas need the rest.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
READY_TIMEOUT = 60.0


def haproxy_config(port: int, backends: list[str]) -> str:
    """haproxy's configuration: ``127.0.0.1:port`` in front of ``backends`` (``host:port`` each)."""
    servers = "\n".join(f"    server g{i} {address}" for i, address in enumerate(backends))
    return f"""global
    nbthread 1
    maxconn 4000

defaults
    mode http
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    option http-keep-alive

frontend mcp
    bind 127.0.0.1:{port}
    default_backend gateways

backend gateways
    balance roundrobin
    http-reuse always
    stick-table type string len 64 size 200k expire 30m
    stick on req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
{servers}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"haproxy exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"haproxy did not listen on {port} within {READY_TIMEOUT:g}s")


def main() -> None:
    """Start the replicas and haproxy, announce the URL, stop everything when stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, required=True)
    parser.add_argument("upstream", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    upstream = [a for a in args.upstream if a != "--"]
    argv = [sys.executable, str(HERE / "_gateway_server.py"), "--kind", "lean", "--", *upstream]
    replicas = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(args.replicas)]
    proxy: subprocess.Popen[bytes] | None = None
    workdir = Path(tempfile.mkdtemp(prefix="mcp-actors-bench-replicas-"))
    try:
        backends = []
        for replica in replicas:
            assert replica.stdout is not None
            url = replica.stdout.readline().decode().strip()
            if not url.startswith("http://"):
                raise SystemExit(f"a replica printed no URL (got {url!r})")
            backends.append(url.removeprefix("http://").split("/", 1)[0])
        port = _free_port()
        config = workdir / "haproxy.cfg"
        config.write_text(haproxy_config(port, backends))
        proxy = subprocess.Popen([haproxy, "-f", str(config), "-db", "-q"], stdin=subprocess.DEVNULL)
        _wait_listening(port, proxy)
        sys.stdout.write(f"http://127.0.0.1:{port}/mcp\n")
        sys.stdout.flush()
        sys.stdin.buffer.read()  # until the harness closes it
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait()
        for replica in replicas:
            if replica.stdin is not None:
                replica.stdin.close()
        for replica in replicas:
            try:
                replica.wait(timeout=10)
            except subprocess.TimeoutExpired:
                replica.kill()
                replica.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
