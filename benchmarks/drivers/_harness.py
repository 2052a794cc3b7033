"""The scenarios every driver runs, written once: standard library + anyio only.

This module is imported by driver scripts that run in *other* virtual environments (each
peer pins its own ``mcp``), so it must not import ``mcp_actors``, ``benchmarks`` or
anything but the standard library and ``anyio`` (every MCP client library depends on it).

A driver supplies a :class:`Driver`: ``open(servers)`` is an async context manager that
connects to every server (each an argv list for stdio, or a URL string for a
streamable-HTTP server the harness started from a ``{"http": argv}`` job entry) and
yields a :class:`Session` with two operations, ``call`` and ``tool_names``. The harness
reads one JSON job on stdin, runs the scenario it names with the driver, prints one JSON
line with the result on stdout, and kills any server process of its own that is still
alive when it is done (counted in the result as ``leftover_processes``, so a leak is reported, never hidden).

Timing is ``time.perf_counter``; memory is the resident set size of this process from
``/proc/self/statm`` (Linux), so the servers' own processes are never counted.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import anyio

__all__ = ["Driver", "Session", "main", "server_env"]

SERVER_MARKERS = ("mcp_actors.demo_server", "fault_server", "_toolserver.py", "server-everything")
"""Substrings of a server's command line: how a driver finds its own server processes."""


def server_env() -> dict[str, str]:
    """The environment every contender starts a stdio server with: this driver's whole one.

    A server's start must cost the same whichever client starts it, or a start-up figure
    compares the servers and not the clients. mcp-actors gives a stdio server the host's
    whole environment (../shared/DESIGN.md); the SDK, left to itself, gives a short list
    (``HOME``, ``PATH``, ``SHELL``, ``TERM``, ...). The two differ in what a server does at
    start: with ``NODE_EXTRA_CA_CERTS`` set, as on our benchmark machine, every Node server
    parses a CA bundle (~40 ms of CPU), which made twenty everything servers start 1.15x
    slower under mcp-actors than under the raw SDK on two cores, and 0.98x with the same
    environment for both (docs/performance.md). So every driver that builds the
    SDK's server parameters (its own or a peer's) passes this explicitly.
    """
    return dict(os.environ)


CALL_TIMEOUT = 60.0
"""Upper bound of any single call in a scenario: a wedged contender fails the run, never hangs it."""


class Session(Protocol):
    """What a driver's client looks like to the scenarios."""

    async def call(self, server: int, tool: str, arguments: dict[str, Any]) -> None:
        """Call ``tool`` on server number ``server``; raise on any failure (tool errors too)."""
        ...

    async def tool_names(self, server: int) -> list[str]:
        """The tool names of server number ``server`` (as the library lists them)."""
        ...

    # Optional: ``async def all_tool_names(self) -> list[list[str]]``, every server's tool
    # names from one listing, for libraries whose listing covers all servers at once
    # (listing per server there would list everything N times).


class Driver(Protocol):
    """One client library."""

    def prepare(self, servers: list[list[str]]) -> None:
        """Untimed set-up (write a config file, build parameter objects)."""
        ...

    def open(self, servers: list[list[str]]) -> contextlib.AbstractAsyncContextManager[Session]:
        """Connect to every server; exiting closes them all."""
        ...


# --------------------------------------------------------------------------- processes


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[1])


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :].split()[0].decode()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants() -> list[int]:
    """PIDs of every live process below this one (children, grandchildren, ...)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            ppid = _ppid(int(name))
            if ppid is not None:
                parents.setdefault(ppid, []).append(int(name))
    found: list[int] = []
    stack = [os.getpid()]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def server_pids(pids: list[int] | None = None) -> list[int]:
    """Our server processes (by command line) among ``pids`` (default: all descendants)."""
    return [p for p in (descendants() if pids is None else pids) if any(m in _cmdline(p) for m in SERVER_MARKERS)]


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not)."""
    state = _state(pid)
    return state is not None and state not in ("Z", "X")


def is_zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but was never reaped."""
    return _state(pid) == "Z"


def cpu_seconds_of(pid: int) -> float:
    """CPU time ``pid`` has used so far, every live thread, user and system; 0.0 when it is gone.

    From ``/proc/<pid>/task/*/schedstat`` (the scheduler's nanoseconds), not from
    ``/proc/<pid>/stat``: that one counts in clock ticks of 10 ms, as much as a light
    server's whole start. A thread that already exited is not counted (a Python server has
    one thread; Node's live as long as the server). Without schedstat (a kernel built
    without it), the ticks of ``/proc/<pid>/stat``.
    """
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def descendants_cpu() -> tuple[float, float]:
    """CPU seconds so far of our server processes, and of every other process below us.

    The others are the client's helpers (mcp-actors' reaper sidecar): their CPU is the
    client's, not the servers'.
    """
    below = descendants()
    servers = set(server_pids(below))
    return (
        sum(cpu_seconds_of(p) for p in below if p in servers),
        sum(cpu_seconds_of(p) for p in below if p not in servers),
    )


def rss_bytes() -> int:
    """Resident set size of this process."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def kill_leftovers() -> int:
    """SIGKILL every server process still below us; return how many there were."""
    pids = [p for p in server_pids() if alive(p)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


# --------------------------------------------------------------------------- helpers


async def _bounded(what: str, coro: Awaitable[Any], timeout: float = CALL_TIMEOUT) -> Any:
    with anyio.fail_after(timeout):
        try:
            return await coro
        except TimeoutError:
            raise TimeoutError(f"{what} took longer than {timeout:g}s") from None


class _Lane:
    """One worker's loop of calls, as the :class:`_CallWatch` sees it."""

    __slots__ = ("calls", "in_call", "overdue", "scope")

    def __init__(self) -> None:
        self.calls = 0
        """Calls started so far."""
        self.in_call = False
        self.overdue = False
        """The watch ended this lane: a call of it took longer than the bound."""
        self.scope = anyio.CancelScope()


class _CallWatch:
    """Every call of a measured loop bounded by ``timeout``, for two attribute stores per call.

    A per-call ``anyio.fail_after`` (:func:`_bounded`) cost every contender 15-45 µs of CPU
    per call on the 2-core machine (a cancel scope with a deadline entered and left, in a
    generator context manager: docs/performance.md), about a third of the floor
    client's whole cost, so the loops measured the harness as much as the client. Here each
    worker runs its loop in one cancel scope (a :class:`_Lane`); a watch task looks every
    ``timeout`` seconds and ends a lane that has been in one call since its last look, so a
    wedged call ends after ``timeout`` to ``2 * timeout`` seconds and is reported, never hangs.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._lanes: list[_Lane] = []

    def lane(self) -> _Lane:
        """A new lane: run the loop in ``with lane.scope:``, bump ``calls`` and set ``in_call`` around each call."""
        lane = _Lane()
        self._lanes.append(lane)
        return lane

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Run the watch for the block's duration."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def _watch(self) -> None:
        seen: dict[int, int] = {}
        while True:
            await anyio.sleep(self.timeout)
            for index, lane in enumerate(self._lanes):
                if lane.in_call and seen.get(index) == lane.calls:
                    lane.overdue = True
                    lane.scope.cancel()
                seen[index] = lane.calls


async def _all_tool_names(session: Session, count: int) -> list[int]:
    """List every server's tools: one aggregate listing where the library has one, else per server."""
    aggregate = getattr(session, "all_tool_names", None)
    if aggregate is not None:
        names: list[list[str]] = await _bounded("tool listing of every server", aggregate())
        return [len(n) for n in names]
    sizes = [0] * count

    async def one(i: int) -> None:
        sizes[i] = len(await _bounded(f"tool listing of server {i}", session.tool_names(i)))

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return sizes


ECHO_ARGS = {"text": "hello"}


# --------------------------------------------------------------------------- scenarios


async def sequential(driver: Driver, job: dict[str, Any]) -> dict[str, Any]:
    """Latency of ``calls`` sequential echo calls on one server (after ``warmup`` calls)."""
    servers = job["servers"][:1]
    driver.prepare(servers)
    arguments = job.get("arguments", ECHO_ARGS)
    latencies: list[float] = []
    timeout = job.get("call_timeout", CALL_TIMEOUT)
    watch = _CallWatch(timeout)
    lane = watch.lane()
    async with driver.open(servers) as session, watch.watching():
        await _all_tool_names(session, 1)
        for _ in range(job.get("warmup", 20)):
            await _bounded("warm-up call", session.call(0, "echo", arguments))
        cpu = time.process_time()
        with lane.scope:
            for _ in range(job["calls"]):
                lane.calls += 1
                lane.in_call = True
                start = time.perf_counter()
                await session.call(0, "echo", arguments)
                latencies.append(time.perf_counter() - start)
                lane.in_call = False
        cpu = time.process_time() - cpu
    if lane.overdue:
        raise TimeoutError(f"echo call took longer than {timeout:g}s")
    # The client's own CPU (every thread of this process; the server is another process).
    return {"latencies": latencies, "cpu_per_call": cpu / max(1, job["calls"])}


async def concurrent(driver: Driver, job: dict[str, Any]) -> dict[str, Any]:
    """Throughput of ``calls_per_server`` echo calls per server, ``in_flight`` at a time per server."""
    servers = job["servers"]
    per_server = job["calls_per_server"]
    in_flight = job["in_flight"]
    arguments = job.get("arguments", ECHO_ARGS)
    driver.prepare(servers)
    failures: list[str] = []
    timeout = job.get("call_timeout", CALL_TIMEOUT)
    watch = _CallWatch(timeout)
    async with driver.open(servers) as session, watch.watching():
        await _all_tool_names(session, len(servers))

        async def run_all(count: int) -> None:
            async def worker(server: int, remaining: list[int]) -> None:
                lane = watch.lane()
                with lane.scope:
                    while remaining[0] > 0:
                        remaining[0] -= 1
                        lane.calls += 1
                        lane.in_call = True
                        try:
                            await session.call(server, "echo", arguments)
                        except Exception as exc:
                            failures.append(f"{type(exc).__name__}: {exc}"[:200])
                        lane.in_call = False
                if lane.overdue:
                    failures.append(f"TimeoutError: echo call took longer than {timeout:g}s")

            async with anyio.create_task_group() as tg:
                for server in range(len(servers)):
                    remaining = [count]
                    for _ in range(min(in_flight, count)):
                        tg.start_soon(worker, server, remaining)

        await run_all(min(in_flight, per_server))  # warm-up: one wave per server
        failures.clear()
        start = time.perf_counter()
        cpu = time.process_time()
        await run_all(per_server)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
    total = per_server * len(servers)
    return {
        "seconds": elapsed,
        "cpu_per_call": cpu / total,
        "calls": total,
        "calls_per_s": total / elapsed,
        "failures": len(failures),
        "failure_sample": failures[:3],
    }


async def startup(driver: Driver, job: dict[str, Any]) -> dict[str, Any]:
    """Seconds from nothing running until every server is connected and its tools listed.

    ``cpu_seconds`` is this process's CPU time (every thread) over the same span: the
    client's own work, which on a machine with fewer cores than servers slows the servers'
    start as much as it costs, and which varies far less between rounds than the wall time.
    ``loop_cpu_seconds`` is the part of it spent by this job's own thread, the event
    loop's; the rest is worker threads' (spawns, file reads and writes).
    ``servers_cpu_seconds`` is what the servers' processes used until then (their whole
    start: they are idle once listed), ``helpers_cpu_seconds`` what the client's other
    processes used (read just after the span; see :func:`descendants_cpu`): with both, a
    start's core-time splits into servers, client and idle (``benchmarks.startup``).
    """
    servers = job["servers"]
    driver.prepare(servers)
    cpu_start = time.process_time()
    loop_start = time.thread_time()
    start = time.perf_counter()
    async with driver.open(servers) as session:
        sizes = await _all_tool_names(session, len(servers))
        elapsed = time.perf_counter() - start
        loop_cpu = time.thread_time() - loop_start
        cpu = time.process_time() - cpu_start
        servers_cpu, helpers_cpu = descendants_cpu()
    return {
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "loop_cpu_seconds": loop_cpu,
        "servers_cpu_seconds": servers_cpu,
        "helpers_cpu_seconds": helpers_cpu,
        "tools": sizes,
    }


async def memory(driver: Driver, job: dict[str, Any]) -> dict[str, Any]:
    """Resident memory this process gains per idle, connected server."""
    servers = job["servers"]
    driver.prepare(servers)
    gc.collect()
    before = rss_bytes()
    async with driver.open(servers) as session:
        await _all_tool_names(session, len(servers))
        gc.collect()
        # Let connection tasks reach their idle state (buffers trimmed, pings scheduled).
        await anyio.sleep(job.get("settle", 0.5))
        gc.collect()
        after = rss_bytes()
    return {
        "rss_before": before,
        "rss_after": after,
        "per_server_bytes": (after - before) / len(servers),
        "servers": len(servers),
    }


async def shutdown(driver: Driver, job: dict[str, Any]) -> dict[str, Any]:
    """Seconds for the client's context to exit with every server running, and what is left."""
    servers = job["servers"]
    driver.prepare(servers)
    running: list[int] = []
    with anyio.fail_after(job.get("timeout", 120.0)):
        async with driver.open(servers) as session:
            await _all_tool_names(session, len(servers))
            running = [p for p in server_pids() if alive(p)]
            start = time.perf_counter()
        elapsed = time.perf_counter() - start
    remaining = [p for p in running if alive(p)]
    zombies = [p for p in running if is_zombie(p)]
    return {
        "seconds": elapsed,
        "servers_running": len(running),
        "remaining": len(remaining),
        "zombies": len(zombies),
    }


async def crash(driver: Driver, job: dict[str, Any]) -> dict[str, Any]:
    """Kill the server under an in-flight call; time the call's failure and the first success after.

    ``fail_fast`` is the time from SIGKILL to the in-flight call raising (``None``: it did
    not fail within ``fail_limit``). ``recovered`` is the time from SIGKILL to the first
    successful echo (``None``: none within ``recover_limit``); calls are retried in a
    loop, each bounded by ``attempt_timeout`` (1 s; one that hits it counts in
    ``hung_attempts``), with a 10 ms pause after each failure. A client that cannot close cleanly after
    its server died is reported in ``close_error``, not failed.
    """
    servers = job["servers"][:1]
    fail_limit = job.get("fail_limit", 10.0)
    recover_limit = job.get("recover_limit", 20.0)
    driver.prepare(servers)
    before = set(descendants())
    result: dict[str, Any] = {"fail_fast": None, "recovered": None, "attempts": 0, "inflight_error": None}
    measured = False
    with anyio.move_on_after(fail_limit + recover_limit + 60.0) as overall:
        try:
            async with driver.open(servers) as session:
                await _measure_crash(session, before, fail_limit, recover_limit, result, job)
                measured = True
        except Exception as exc:
            if not measured:
                raise
            result["close_error"] = f"{type(exc).__name__}: {exc}"[:200]
    if overall.cancelled_caught:
        result["close_error"] = "the client did not close within its bound"
    return result


async def _measure_crash(
    session: Session,
    before: set[int],
    fail_limit: float,
    recover_limit: float,
    result: dict[str, Any],
    job: dict[str, Any],
) -> None:
    await _all_tool_names(session, 1)
    await _bounded("warm-up call", session.call(0, "echo", ECHO_ARGS))
    failed = anyio.Event()
    failed_at: list[float] = []

    async def inflight() -> None:
        try:
            await session.call(0, "sleep", {"seconds": 30})
            result["inflight_error"] = "the call returned"
        except Exception as exc:
            result["inflight_error"] = type(exc).__name__
        failed_at.append(time.perf_counter())
        failed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(inflight)
        # Give the request time to reach the server; the newest server process is the
        # one serving it (for libraries that spawn a process per call, too).
        await anyio.sleep(job.get("inflight_delay", 0.5))
        candidates = [p for p in server_pids() if p not in before and alive(p)]
        if not candidates:
            raise RuntimeError("no server process found to kill")
        victim = max(candidates, key=_start_time)
        killed = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
        with anyio.move_on_after(fail_limit):
            await failed.wait()
        if failed_at:
            result["fail_fast"] = failed_at[0] - killed
        else:
            result["inflight_error"] = f"still waiting after {fail_limit:g}s"
        tg.cancel_scope.cancel()
    deadline = killed + recover_limit
    attempt_limit = job.get("attempt_timeout", 1.0)
    errors: list[str] = []
    result["hung_attempts"] = 0
    while time.perf_counter() < deadline:
        result["attempts"] += 1
        try:
            with anyio.fail_after(max(0.01, min(attempt_limit, deadline - time.perf_counter()))):
                await session.call(0, "echo", ECHO_ARGS)
            result["recovered"] = time.perf_counter() - killed
            break
        except TimeoutError:
            result["hung_attempts"] += 1
            errors.append("TimeoutError")
        except Exception as exc:
            errors.append(type(exc).__name__)
            await anyio.sleep(0.01)
    result["recovery_errors"] = sorted(set(errors))


def _start_time(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return 0
    return int(data[data.rfind(b")") + 2 :].split()[19])


SCENARIOS: dict[str, Callable[[Driver, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "sequential": sequential,
    "concurrent": concurrent,
    "startup": startup,
    "memory": memory,
    "shutdown": shutdown,
    "crash": crash,
}


def _start_http(server: dict[str, Any], started: list[subprocess.Popen[bytes]]) -> str:
    """Start a streamable-HTTP server (``{"http": argv}``) and return its URL (its first stdout line).

    The harness owns an HTTP server's process (a client library only gets the URL); it
    runs until its stdin closes. Started before the scenario, so no clock sees it.
    """
    proc = subprocess.Popen(server["http"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    started.append(proc)
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    if not url.startswith("http"):
        raise RuntimeError(f"the http server {server['http']} printed no URL (got {url!r})")
    return url


def _stop_http(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(
    driver: Driver,
    extra: dict[str, Callable[[Driver, dict[str, Any]], Awaitable[dict[str, Any]]]] | None = None,
) -> None:
    """Read a job on stdin, run it, print the result as one JSON line, clean up."""
    job = json.load(sys.stdin)
    scenarios = {**SCENARIOS, **(extra or {})}
    scenario = scenarios.get(job["scenario"])
    if scenario is None:
        raise SystemExit(f"unknown scenario {job['scenario']!r}; known: {sorted(scenarios)}")
    import logging

    # Peers log every connection at INFO; the benchmark wants their cost, not their logs.
    logging.disable(logging.WARNING)
    http_servers: list[subprocess.Popen[bytes]] = []
    try:
        job["servers"] = [_start_http(s, http_servers) if isinstance(s, dict) else s for s in job.get("servers", [])]
        result = anyio.run(scenario, driver, job, backend=job.get("backend", "asyncio"))
    finally:
        for proc in http_servers:
            _stop_http(proc)
        leftovers = kill_leftovers()
    result["leftover_processes"] = leftovers
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
