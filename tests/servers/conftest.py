"""Wire-level helpers for testing the demo and fault servers as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO

import attrs
import pytest
import trio


@attrs.define(eq=False)
class LineCollector:
    """Lines read from one pipe by a background task, with a way to wait for one."""

    lines: list[str] = attrs.field(factory=list)
    nbytes: int = 0
    closed: bool = False
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def collect(self, stream: trio.abc.ReceiveStream) -> None:
        buffer = b""
        try:
            while chunk := await stream.receive_some(65536):
                self.nbytes += len(chunk)
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                self.lines.extend(line.decode("utf-8", errors="replace") for line in complete)
                self._wake()
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            self.closed = True
            self._wake()

    async def wait_for(self, text: str) -> str:
        """Return the first line containing ``text``, waiting for it (bound it yourself)."""
        while True:
            for line in self.lines:
                if text in line:
                    return line
            if self.closed:
                raise AssertionError(f"pipe closed without a line containing {text!r}: {self.lines[-5:]}")
            await self._changed.wait()

    async def wait_bytes(self, nbytes: int) -> None:
        """Wait until at least ``nbytes`` bytes were read (bound it yourself)."""
        while self.nbytes < nbytes:
            if self.closed:
                raise AssertionError(f"pipe closed after {self.nbytes} of {nbytes} bytes")
            await self._changed.wait()


@attrs.define(eq=False)
class RawServer:
    """A server process spoken to in raw JSON-RPC lines over its stdin and stdout."""

    process: trio.Process
    stderr: LineCollector
    nursery: trio.Nursery
    _buffer: bytes = b""
    _next_id: int = 1
    _draining: bool = False

    def start_draining(self) -> None:
        """Start reading stderr into ``self.stderr`` (once)."""
        if not self._draining:
            self._draining = True
            assert self.process.stderr is not None
            self.nursery.start_soon(self.stderr.collect, self.process.stderr)

    @property
    def stdin(self) -> trio.abc.SendStream:
        assert self.process.stdin is not None
        return self.process.stdin

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send_all(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request and return its id (the answer is read with ``read_message``)."""
        request_id = self._next_id
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return request_id

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def read_line(self) -> bytes | None:
        """Return the next raw stdout line without its newline, or None at EOF."""
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(1 << 20)
            if not chunk:
                rest, self._buffer = self._buffer, b""
                return rest or None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    async def read_message(self) -> dict[str, Any]:
        """Return the next stdout line parsed as JSON; fail on garbage or EOF."""
        line = await self.read_line()
        assert line is not None, "stdout closed"
        message = json.loads(line)
        assert isinstance(message, dict)
        return message

    async def read_until_response(self, request_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Read messages until the response to ``request_id``; return it and what came before."""
        before: list[dict[str, Any]] = []
        while True:
            message = await self.read_message()
            if message.get("id") == request_id and "method" not in message:
                return message, before
            before.append(message)

    async def initialize(self) -> dict[str, Any]:
        request_id = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "tests", "version": "0"},
            },
        )
        response, _ = await self.read_until_response(request_id)
        await self.notify("notifications/initialized")
        return response

    async def call(self, tool: str, arguments: dict[str, Any], **params: Any) -> int:
        return await self.request("tools/call", {"name": tool, "arguments": arguments, **params})


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@asynccontextmanager
async def open_raw_server(argv: Sequence[str], *, drain_stderr: bool = True) -> AsyncIterator[RawServer]:
    """Spawn ``argv`` in its own session with piped stdio; kill its whole group on exit.

    With ``drain_stderr=False`` nobody reads stderr until the test calls
    ``start_draining`` (used to show what a full stderr pipe does).
    """
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        async with trio.open_nursery() as nursery:
            server = RawServer(process=process, stderr=LineCollector(), nursery=nursery)
            if drain_stderr:
                server.start_draining()
            try:
                yield server
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            _kill_group(process.pid)
            with trio.move_on_after(10):
                await process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    await stream.aclose()


@pytest.fixture
def raw_server() -> Callable[..., Any]:
    """Factory: ``async with raw_server(argv) as server`` (see ``open_raw_server``)."""
    return open_raw_server


@asynccontextmanager
async def stderr_pipe() -> AsyncIterator[tuple[TextIO, LineCollector]]:
    """A pipe whose write end is a file to hand to ``stdio_client(errlog=...)``.

    The read end is collected into lines by a background task until the block ends.
    """
    read_fd, write_fd = os.pipe()
    writer = os.fdopen(write_fd, "w")
    reader = trio.lowlevel.FdStream(read_fd)
    collector = LineCollector()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collector.collect, reader)
            try:
                yield writer, collector
            finally:
                nursery.cancel_scope.cancel()
    finally:
        writer.close()
        await reader.aclose()


@pytest.fixture
def errlog_pipe() -> Callable[[], Any]:
    """Factory: ``async with errlog_pipe() as (errlog, lines)``."""
    return stderr_pipe
