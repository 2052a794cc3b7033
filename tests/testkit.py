"""Helpers shared by the test modules (importable everywhere: ``from testkit import text_of``).

One home for what tests kept writing again: the text of a tool result, draining an event
subscription, a runtime on the test's own config file, connection slots run for a block
(``running``) with their event waits, how often the scheduler ran a task
(``counting_steps``), in which scheduler pass a supervisor's children were spawned
(``child_spawn_passes``), and an HTTP server in a thread of the test process
(``serve_in_thread``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import forkrun
import trio

from mcp_actors import events


def text_of(result: Any) -> str:
    """The text items of a ``CallToolResult``, joined."""
    return "".join(getattr(item, "text", "") for item in result.content)


def drain(sub: events.Subscription) -> list[events.Event]:
    """Every event already buffered in ``sub``, without waiting."""
    out = []
    while True:
        try:
            out.append(sub.receive_nowait())
        except trio.WouldBlock:
            return out


class StepCount(trio.abc.Instrument):
    """Counts the steps of the tasks named ``name``: how often the scheduler ran them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name == self.name:
            self.count += 1


@contextlib.contextmanager
def counting_steps(name: str) -> Iterator[StepCount]:
    """Count the steps of the tasks named ``name`` while the block runs (start them with ``name=``)."""
    counter = StepCount(name)
    trio.lowlevel.add_instrument(counter)
    try:
        yield counter
    finally:
        trio.lowlevel.remove_instrument(counter)


class ChildSpawnPasses(trio.abc.Instrument):
    """In which scheduler pass each child task of a supervisor was spawned (``spawned``, in spawn order)."""

    def __init__(self) -> None:
        self.passes = 0
        self.spawned: list[int] = []

    def before_io_wait(self, timeout: float) -> None:
        self.passes += 1

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("Supervisor._run_child"):
            self.spawned.append(self.passes)


@contextlib.contextmanager
def child_spawn_passes() -> Iterator[ChildSpawnPasses]:
    """Record the scheduler pass of every supervisor child spawned while the block runs."""
    passes = ChildSpawnPasses()
    trio.lowlevel.add_instrument(passes)
    try:
        yield passes
    finally:
        trio.lowlevel.remove_instrument(passes)


@contextlib.asynccontextmanager
async def runtime_at(tmp_path: Path, **kwargs: Any) -> AsyncIterator[Any]:
    """``open_runtime`` on the test's own config file, ``tmp_path / "cfg.json"``."""
    from mcp_actors.runtime import open_runtime

    async with open_runtime(tmp_path / "cfg.json", **kwargs) as rt:
        yield rt


@contextlib.asynccontextmanager
async def running(*settings: Any) -> AsyncIterator[tuple[list[Any], events.Subscription]]:
    """Run connection slots for the block; close their mailboxes and wait for them after."""
    from mcp_actors._connection.handle import open_connection

    bus = events.EventBus()
    sub = bus.subscribe(buffer=10_000)
    handles = []
    async with trio.open_nursery() as nursery:
        for s in settings:
            handle, start = open_connection(s, bus)
            await nursery.start(start)
            handles.append(handle)
        try:
            yield handles, sub
        finally:
            for handle in handles:
                await handle.aclose()


async def wait_event(
    sub: events.Subscription, predicate: Callable[[events.Event], bool], *, timeout: float = 30.0
) -> events.Event:
    """The next event satisfying ``predicate`` (bounded)."""
    with trio.fail_after(timeout):
        async for event in sub:
            if predicate(event):
                return event
    raise AssertionError("event stream ended")


def state_is(state: str, **data: object) -> Callable[[events.Event], bool]:
    """A predicate: a ``connection:state`` event to ``state`` whose data has these values."""
    return lambda e: (
        e.type == events.CONNECTION_STATE
        and e.data["state"] == state
        and all(e.data.get(k) == v for k, v in data.items())
    )


@attrs.frozen
class Result:
    """What one ``mcp-actors`` run gave: its exit status and both streams."""

    rc: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """Stdout as the one JSON document ``--json`` promises."""
        return json.loads(self.stdout)

    def error_line(self) -> str:
        """The one stderr line a failure must produce (and no traceback)."""
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1, f"expected one stderr line, got: {self.stderr!r}"
        assert "Traceback" not in self.stderr
        assert lines[0].startswith("mcp-actors: ")
        return lines[0]


def cli_env(config: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI run on ``config``, wide enough that rich never wraps a line."""
    return {**os.environ, "MCP_ACTORS_CONFIG": str(config), "COLUMNS": "200", **extra}


INFRASTRUCTURE = ("mcp_actors._process.reaper", "trio_parallel", "multiprocessing.resource_tracker", "tests/forkrun.py")
"""Long-lived helpers of the test process itself, never servers a test started: the reaper
sidecar, trio-parallel's workers and the resource tracker multiprocessing starts with them
(which lives on for the rest of the run once a stress test has used workers), and the
interpreter that forks docs examples (:mod:`forkrun`)."""


def is_infrastructure(cmdline: str) -> bool:
    """Whether a process with this command line is one of :data:`INFRASTRUCTURE`."""
    return any(marker in cmdline for marker in INFRASTRUCTURE)


@contextlib.asynccontextmanager
async def serve_in_thread(build_app: Callable[[], Any], path: str = "/mcp") -> AsyncIterator[str]:
    """Serve the ASGI app ``build_app()`` on a free loopback port, in a thread; yield its URL (with ``path``).

    As ``python -m mcp_actors.demo_server --transport streamable-http`` serves (uvicorn on
    asyncio, a real socket), without the process: a process spends a second or more of CPU
    importing the MCP SDK, which a test of the client over HTTP does not need. The client under
    test shares nothing with the server but the socket. Tests of the server's process (its
    stderr, its exit, killing it) use :func:`mcp_actors.testing.serve_http`.

    ``build_app`` runs in the server's thread: the SDK's apps make anyio primitives that belong
    to the event loop current when they are made, which must not be the test's trio loop.
    """
    import asyncio

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        None, log_config=None, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            config.app = build_app()
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported by the waits below
            failure.append(exc)

    thread = threading.Thread(target=serve, name=f"test-http-server:{port}", daemon=True)
    thread.start()
    try:
        with trio.fail_after(30):
            while not server.started:
                assert thread.is_alive(), f"the test HTTP server did not start: {failure!r}"
                await trio.sleep(0.01)
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        server.should_exit = True
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(thread.join, 30.0)
        sock.close()
        assert not thread.is_alive(), "the test HTTP server did not stop within 30 s"
    assert not failure, f"the test HTTP server failed: {failure!r}"


def demo_http_app() -> Any:
    """The demo server's streamable HTTP app, as ``--transport streamable-http`` serves it (for ``serve_in_thread``)."""
    from mcp_actors.demo_server import create_demo_server

    return create_demo_server().streamable_http_app(host="127.0.0.1")


def count_tasks() -> int:
    """Every task of the current trio run, from its root down (for tests that bound how many are alive)."""
    count = 0
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


DOCS_ROOT = Path(__file__).resolve().parents[1]
"""The repository root: docs examples run with it on ``PYTHONPATH``."""


def doc_blocks(page: Path, language: str = "python") -> list[str]:
    """The fenced ``language`` blocks of a docs page, in order (what a reader copies)."""
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)


def run_doc_example(code: str, tmp_path: Path, *, bound: float = 240.0) -> subprocess.CompletedProcess[str]:
    """Run a docs example as a reader would: its own process, a fresh config and state dir, bounded.

    The process is forked from one that has imported the MCP SDK already (:mod:`forkrun`), which
    saves each example 1-2 s of CPU; otherwise it is ``python example.py``.
    """
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {
        **os.environ,
        "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"),
        "MCP_ACTORS_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(DOCS_ROOT),
    }
    return forkrun.run_script(script, env=env, cwd=tmp_path, bound=bound)
