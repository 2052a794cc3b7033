"""A real ``redis-server`` for a test: a free loopback port, a temp directory, stopped after."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

BOUND = 30.0
"""Seconds redis-server may take to answer its first PING on a loaded machine."""


def free_port() -> int:
    """A loopback port free right now (the OS's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_for_ping(url: str) -> None:
    """Poll ``PING`` until Redis at ``url`` answers (bounded)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        with trio.fail_after(BOUND):
            while True:
                try:
                    if await trio.to_thread.run_sync(client.ping):
                        return
                except redis.ConnectionError:
                    pass
                await trio.sleep(0.05)
    finally:
        client.close()


@asynccontextmanager
async def running_redis(directory: Path) -> AsyncIterator[str]:
    """Start ``redis-server`` on a free loopback port with ``directory`` as its home; yield its URL."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed: apt-get install redis-server (README: Run the tests)"
    await trio.Path(directory).mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
    argv += ["--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", str(directory / "redis.log")]
    process = await trio.lowlevel.open_process(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        await wait_for_ping(url)
        yield url
    finally:
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
