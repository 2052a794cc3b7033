"""``mcp-actors serve`` as a real process: the entry point, the URL it prints, and how signals stop it.

What only a process shows: the installed script serving HTTP, SIGTERM and SIGINT ending it
gracefully (a call in flight finishes first) and every server process it started gone
after it exits. Its requests and answers are tested in process (``tests/serve``).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import trio
from clikit import invoke, stdio, write_config
from mcp import Client
from testkit import cli_env

from mcp_actors.testing import fault_server_command

_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]
BOUND = 120.0
"""Start-up, a call and the stop, on a loaded two-core machine."""


def _text(result: object) -> str:
    return "".join(getattr(block, "text", "") for block in getattr(result, "content", []))


async def _started(config: Path) -> tuple[trio.Process, str]:
    process = await trio.lowlevel.open_process(
        [*CLI, "serve", "--port", "0", "--grace", "30", "--config", str(config)],
        stdout=subprocess.PIPE,
        env=cli_env(config),
    )
    assert process.stdout is not None
    line = b""
    with trio.fail_after(BOUND):
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, "mcp-actors serve ended before printing its URL"
            line += chunk
    return process, line.decode().strip()


class _KeptConnection:
    """One keep-alive HTTP connection to the gateway, for a probe's GETs (a load balancer keeps its own)."""

    def __init__(self, stream: trio.SocketStream, host: str) -> None:
        self.stream, self.host, self.buffer = stream, host, b""

    @classmethod
    async def open(cls, url: str) -> _KeptConnection:
        host = url.split("/")[2]
        name, port = host.rsplit(":", 1)
        return cls(await trio.open_tcp_stream(name, int(port)), host)

    async def get(self, path: str) -> tuple[int, bytes]:
        """``(status, body)`` of one GET; ``(0, b"")`` once the gateway has closed the connection."""
        await self.stream.send_all(f"GET {path} HTTP/1.1\r\nhost: {self.host}\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buffer:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                return 0, b""
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        while len(self.buffer) < length:
            self.buffer += await self.stream.receive_some(65536)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(head.split()[1]), body


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


async def test_serve_prints_its_url_serves_and_stops_on_sigterm_reaping_its_servers(tmp_path: Path) -> None:
    """SIGTERM mid-call: /readyz turns 503, the call finishes, the process exits 0, the server it spawned is gone."""
    config = write_config(tmp_path / "cfg.json", stdio("alpha", fault_server_command()))
    process, url = await _started(config)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    answers: list[str] = []
    servers: list[psutil.Process] = []
    probe = await _KeptConnection.open(url)
    readiness: list[int] = []
    answered_when_unready = -1
    try:
        with trio.fail_after(BOUND):
            readiness.append((await probe.get("/readyz"))[0])
        # No assertion in this block: the client's own close (its DELETE) may meet the stopped
        # gateway and fail, which says nothing about the gateway; what matters is checked after.
        with contextlib.suppress(Exception):
            async with Client(url, mode="legacy") as client:
                with trio.fail_after(BOUND):
                    answers.append(_text(await client.call_tool("alpha__echo", {"text": "through"})))
                    servers += [p for p in _descendants(process.pid) if "fault_server" in " ".join(p.cmdline())]

                    async def slow_call() -> None:
                        answers.append(_text(await client.call_tool("alpha__sleep", {"seconds": 3.0})))

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(slow_call)
                        await trio.sleep(0.3)  # the call is in flight
                        process.send_signal(signal.SIGTERM)
                        while readiness[-1] == 200:  # until the signal is handled: then unready, the call still running
                            readiness.append((await probe.get("/readyz"))[0])
                            await trio.sleep(0.01)
                        answered_when_unready = len(answers)
        assert readiness[0] == 200 and readiness[-1] == 503
        assert answered_when_unready == 1  # unready while the slow call was still in flight
        assert answers == ["through", "slept 3 s"]  # the call in flight finished within the grace
        assert servers, "the upstream server should be a child of the gateway"
        with trio.fail_after(BOUND):
            assert await process.wait() == 0
        _, alive = psutil.wait_procs(servers, timeout=10)
        assert not alive, f"left running: {alive}"
    finally:
        await probe.stream.aclose()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_sigint_stops_serve_too(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) is a graceful stop as well: exit 0, nothing left running."""
    config = write_config(tmp_path / "cfg.json", stdio("alpha", fault_server_command()))
    process, url = await _started(config)
    try:
        with contextlib.suppress(Exception):  # only the listing matters, not the client's close
            async with Client(url, mode="legacy") as client:
                with trio.fail_after(BOUND):
                    await client.list_tools()
        children = _descendants(process.pid)
        process.send_signal(signal.SIGINT)
        with trio.fail_after(BOUND):
            assert await process.wait() == 0
        _, alive = psutil.wait_procs(children, timeout=10)
        assert not [p for p in alive if "fault_server" in " ".join(p.cmdline())]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_serve_refuses_bad_options_before_starting(tmp_path: Path) -> None:
    """A path without a leading slash, an empty separator or an unknown naming is a usage error (exit 2)."""
    config = write_config(tmp_path / "cfg.json")
    bad_path = invoke(config, "serve", "--path", "mcp")
    assert bad_path.rc == 2 and "--path must start with '/'" in bad_path.stderr
    bad_separator = invoke(config, "serve", "--separator", "")
    assert bad_separator.rc == 2 and "--separator must not be empty" in bad_separator.stderr
    bad_naming = invoke(config, "serve", "--naming", "server")
    assert bad_naming.rc == 2 and "--naming must be one of prefixed, tool" in bad_naming.stderr
    stdio_metrics = invoke(config, "serve", "--stdio", "--metrics-port", "0")
    assert stdio_metrics.rc == 2 and "--stdio serves no metrics" in stdio_metrics.stderr


def test_serve_metrics_without_prometheus_client_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--metrics`` where prometheus-client cannot be imported: exit 2 naming the extra, nothing started."""
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # what an environment without it imports
    result = invoke(write_config(tmp_path / "cfg.json"), "serve", "--metrics")
    assert result.rc == 2 and "pip install 'mcp-actors[gateway]'" in result.stderr


async def test_serve_stdio_is_a_desktop_apps_only_server(tmp_path: Path) -> None:
    """``serve --stdio`` under the SDK's stdio client: tools listed and called; closing stdin ends it all."""
    from mcp import StdioServerParameters

    config = write_config(tmp_path / "cfg.json", stdio("alpha", fault_server_command()))
    params = StdioServerParameters(
        command=CLI[0], args=[*CLI[1:], "serve", "--stdio", "--config", str(config)], env=cli_env(config)
    )
    async with Client(params, mode="legacy") as client:
        with trio.fail_after(BOUND):
            assert "alpha__echo" in {tool.name for tool in (await client.list_tools()).tools}
            assert _text(await client.call_tool("alpha__echo", {"text": "piped"})) == "piped"
    # The autouse no_leaked_processes fixture fails the test if the gateway or its server is left.


async def test_serve_naming_tool_keeps_the_tools_own_names(tmp_path: Path) -> None:
    """``--naming tool``: a gateway in front of one server serves its tools as that server names them."""
    from mcp import StdioServerParameters

    config = write_config(tmp_path / "cfg.json", stdio("alpha", fault_server_command()))
    params = StdioServerParameters(
        command=CLI[0],
        args=[*CLI[1:], "serve", "--stdio", "--naming", "tool", "--config", str(config)],
        env=cli_env(config),
    )
    async with Client(params, mode="legacy") as client:
        with trio.fail_after(BOUND):
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo", "sleep"} <= names and not any("__" in name for name in names)
            assert _text(await client.call_tool("echo", {"text": "own name"})) == "own name"
