"""Where start-up's CPU goes, by layer: the raw SDK, our layer under the actors, the whole runtime.

N light servers (``benchmarks/_toolserver.py``) are started and listed concurrently in one
fresh interpreter per start, by three clients:

- ``raw``: the SDK's ``mcp.Client`` per server, all opened at once;
- ``layer``: what the connection actor runs on, without the actors: ``open_transport`` (the
  process tracker, the stderr pumps, the registration), ``WireDispatcher`` and the SDK's
  ``ClientSession`` (``initialize``, ``tools/list``);
- ``runtime``: ``open_runtime`` and ``McpService.list_server_tools`` per server.

The clock and the CPU counters start inside ``trio.run`` (imports excluded) and stop when
every tool list is in hand; the servers' CPU is read then (they are idle once listed).
The three run in turn, round after round; each client's figures are medians, and its wall
time is also given as a ratio to the raw SDK's paired by round, as measured and with the
servers' CPU held equal (:func:`table_lines`; docs/performance.md: the layer
costs what the raw SDK costs, the actors add the rest).

    python -m benchmarks.startup_layers [--servers N] [--rounds R] [--by-task] [--idle]
    python -m benchmarks.startup_layers --instructions [--servers N]
    python -m benchmarks.startup_layers --footprint [--servers N]
    python -m benchmarks.startup_layers --opcodes [--servers N]

``--by-task`` also splits each client's loop CPU by task (a trio instrument reads the
thread's CPU clock around every task step; the tasks are named by their function): which
task of ours costs what the raw SDK's do not. The instrument costs ~1 µs a step, so those
runs' totals are a little higher; the table without it is the one to quote.

``--idle`` also reads how long the machine's cores stood idle over each start (the kernel's
``cpuidle`` counters, microseconds per core, where the machine has them) and the CPU of the
client's helper processes (the reaper sidecar), and splits each client's wall time with the
servers' CPU taken out into what fills the cores (:func:`core_time_lines`): a start
keeps ``cores`` cores for its wall time, so ``cores x wall = servers' CPU + the client's CPU +
its helpers' CPU + idle core time + everything else the machine ran``. With more servers than
cores the servers' CPU is the bulk and is held equal; what a client changes is the rest.

``--instructions`` counts instead of timing: each client's start runs once under
``valgrind --tool=callgrind``, which counts the instructions the client process executes (its
user space, every thread) between two marker calls around the same span as the clock; the
servers run natively and are not counted, nor is the kernel's side of the system calls. The
count repeats within ~1-2 % from run to run where the client's CPU time on this shared
2-core machine moves by ~10 %, so one run compares the clients' own work. Each client runs
with N servers and with one, which splits its count into a fixed part and a part per server.
Each run takes ~30-60 s; two run at a time.

``--footprint`` counts what the instructions cost in memory: each client's start
with N servers runs once under callgrind with its cache simulation, the event loop's thread
counted on its own, with a last-level cache of 1 MiB (:data:`FOOTPRINT_CACHE`). It prints
the loop thread's instructions and its last-level misses (code, data read, data written),
with their ratios to the raw SDK's. A read from memory costs ~120 ns here against ~0.3 ns
an instruction, so a client can execute fewer instructions than another and still spend
more CPU: in one measured run the runtime's loop executed 0.90x the raw SDK's instructions, missed
1.3-1.8x as often and spent ~1.13x its CPU. ~1-2 minutes a client.

``--opcodes`` counts the Python opcodes the event loop's thread executes over the same span,
per function (:class:`OpcodeCounter`, ``sys.settrace`` with opcode events). Each client
starts with N servers and with one, which
splits its count into a part per server and a fixed part, as ``--instructions`` does; then
the runtime's opcodes less our layer's, per server and fixed, by module and by function, with
each function's calls: where the actors' cost is, named. Unlike callgrind it sees Python
functions, not the C they call (an opcode that calls into C counts once), and not the other
threads. The counts repeat within ~1-3 % (trio shuffles each scheduler pass's order and the
servers' answers arrive when they arrive), with no valgrind and in ~10 s for the six starts.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from benchmarks._common import toolserver

__all__ = [
    "IDLE_ROOT",
    "KINDS",
    "OpcodeCounter",
    "TaskCpu",
    "by_task_lines",
    "core_time_lines",
    "idle_core_ms",
    "idle_counters",
    "main",
    "measure",
    "opcode_lines",
    "settled_idle_core_ms",
    "table_lines",
    "task_kind",
]

KINDS = ("raw", "layer", "runtime")
"""The clients, in the order each round runs them."""
CHILD_TIMEOUT = 300.0
VALGRIND_TIMEOUT = 1800.0
ZERO_MARK = "getresuid"
"""The C function a child calls as the counted span starts (callgrind zeroes its counters there)."""
DUMP_MARK = "getresgid"
"""The C function a child calls as the span ends (callgrind writes the span's counts there).

Both are system calls nothing else in a start makes (os.getresuid, os.getresgid)."""
FOOTPRINT_CACHE = "1048576,16,64"
"""The simulated last-level cache of ``--footprint`` (callgrind's ``--LL``: size, ways, line).

1 MiB: a core's own L2 on this machine (AMD EPYC), the shared L3 being taken by the twenty
interpreters that start beside the client. Callgrind's default, the host's whole 32 MiB L3,
holds a start's every line and shows almost no miss for any client."""
LOOP_EVENTS = ("Ir", "ILmr", "DLmr", "DLmw")
"""The events ``--footprint`` reads for the loop's thread: instructions, last-level misses
fetching code, reading data and writing data."""
IDLE_ROOT = Path("/sys/devices/system/cpu")
"""Where the kernel keeps each CPU's ``cpuidle`` counters (``cpuN/cpuidle/stateM/time``, microseconds)."""
_REPO = str(Path(__file__).resolve().parent.parent)
_EVENTS = re.compile(r"^events:\s+(.+?)\s*$", re.MULTILINE)
_SUMMARY = re.compile(r"^summary:\s+([\d ]+?)\s*$", re.MULTILINE)


async def _hold_all(
    count: int,
    ready: trio.Event,
    stop: trio.Event,
    listed: Callable[[int], contextlib.AbstractAsyncContextManager[object]],
) -> None:
    """Enter ``listed(n)`` for every server at once; set ``ready`` once all are in, hold them until ``stop``."""
    done = 0

    async def hold(n: int) -> None:
        nonlocal done
        async with listed(n):
            done += 1
            if done == count:
                ready.set()
            await stop.wait()

    async with trio.open_nursery() as nursery:
        for n in range(count):
            nursery.start_soon(hold, n)


async def _raw(server: list[str], count: int, ready: trio.Event, stop: trio.Event) -> None:
    from mcp import Client, StdioServerParameters

    @contextlib.asynccontextmanager
    async def listed(_n: int) -> AsyncIterator[object]:
        params = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
        async with Client(params, mode="legacy") as client:
            await client.list_tools()
            yield client

    await _hold_all(count, ready, stop, listed)


async def _layer(server: list[str], count: int, ready: trio.Event, stop: trio.Event) -> None:
    from mcp.client.session import ClientSession

    from mcp_actors._process.tracker import ProcessTracker
    from mcp_actors._wire.dispatch import WireDispatcher
    from mcp_actors._wire.transports import StdioParams, open_transport

    # As the runtime does before its first spawn (in the background there).
    await trio.to_thread.run_sync(ProcessTracker.get_instance().start_safety_net)

    @contextlib.asynccontextmanager
    async def listed(n: int) -> AsyncIterator[object]:
        async with open_transport(StdioParams(command=server[0], args=server[1:]), label=f"s{n}") as link:
            assert link.wire is not None
            async with ClientSession(dispatcher=WireDispatcher(link.wire)) as session:
                await session.initialize()
                await session.list_tools()
                yield session

    await _hold_all(count, ready, stop, listed)


def _config_path() -> Path:
    return Path(os.environ["MCP_ACTORS_STATE_DIR"]) / "servers.json"


def _write_config(server: list[str], count: int) -> None:
    """The runtime's servers, in its config file before the clock starts (as in benchmarks.startup)."""
    from mcp_actors._config.codec import record_from_json_dict
    from mcp_actors._config.record import new_server_id
    from mcp_actors._config.store import ConfigStore

    config = {"command": server[0], "args": server[1:], "protocol": "legacy"}
    records = [
        record_from_json_dict({"id": new_server_id(), "name": f"s{n}", "type": "stdio", "config": config})
        for n in range(count)
    ]
    ConfigStore(_config_path()).save(records)


async def _runtime(server: list[str], count: int, ready: trio.Event, stop: trio.Event) -> None:
    from mcp_actors.runtime import open_runtime

    async with open_runtime(_config_path(), connect_on_add=False) as runtime:
        async with trio.open_nursery() as nursery:
            for n in range(count):
                nursery.start_soon(runtime.service.list_server_tools, f"s{n}")
        ready.set()
        await stop.wait()


def task_kind(name: str) -> str:
    """A trio task's name without its instance details: the function it runs (``"(unnamed)"`` if none)."""
    kind = name.split(" ", 1)[0].split("<", 1)[0].rstrip(".")
    return kind or "(unnamed)"


class TaskCpu(trio.abc.Instrument):
    """The loop thread's CPU time per task kind (:func:`task_kind`), summed over task steps while :attr:`on`."""

    def __init__(self) -> None:
        self.on = True
        self.cpu: dict[str, float] = {}
        self._since = 0.0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._since = time.thread_time()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.on:
            kind = task_kind(task.name)
            self.cpu[kind] = self.cpu.get(kind, 0.0) + time.thread_time() - self._since


class OpcodeCounter:
    """The Python opcodes the installing thread executes, per function, while installed (``sys.settrace``).

    A function is named ``path:first line(qualified name)``, its path relative to the
    packages' directory, this repository or the standard library (:func:`function_key`).
    The tracer is called for every opcode, so whatever it traces runs some 10-30x slower:
    it counts work, it does not time it. It sees frames that start (or resume) after
    :meth:`start`, only on the thread that called it.
    """

    def __init__(self) -> None:
        self.opcodes: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self._by_code: dict[int, list[int]] = {}
        self._codes: dict[int, types.CodeType] = {}
        self._previous: Any = None

    def start(self) -> None:
        """Count from here, on this thread (a tracer already there, such as coverage's, waits meanwhile)."""
        self._previous = sys.gettrace()
        sys.settrace(self._trace)

    def stop(self) -> None:
        """Stop counting, put back the tracer there was, and name what was counted (:attr:`opcodes`,
        :attr:`calls`: per function)."""
        sys.settrace(self._previous)
        for key, (opcodes, calls) in self._by_code.items():
            name = function_key(self._codes[key])
            self.opcodes[name] = self.opcodes.get(name, 0) + opcodes
            self.calls[name] = self.calls.get(name, 0) + calls

    def _trace(self, frame: types.FrameType, event: str, arg: object) -> Any:
        key = id(frame.f_code)
        counts = self._by_code.get(key)
        if counts is None:
            counts = self._by_code[key] = [0, 0]
            self._codes[key] = frame.f_code  # kept alive, so its id stays its own
        if event == "opcode":
            counts[0] += 1
        elif event == "call":  # a call, or a generator or coroutine resuming
            counts[1] += 1
            frame.f_trace_opcodes = True
        return self._trace


def function_key(code: types.CodeType) -> str:
    """``path:first line(qualified name)`` for a function, its path relative to where it was installed from."""
    path = code.co_filename
    for marker in ("site-packages/", f"{_REPO}/", f"python{sys.version_info[0]}.{sys.version_info[1]}/"):
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    return f"{path}:{code.co_firstlineno}({code.co_qualname})"


def idle_counters(root: Path = IDLE_ROOT) -> list[Path]:
    """The kernel's ``cpuidle`` time counters under ``root``: one per CPU and idle state (none: ``[]``)."""
    return sorted(root.glob("cpu[0-9]*/cpuidle/state[0-9]*/time"))


def idle_core_ms(counters: Sequence[Path]) -> float | None:
    """How long, in ms, the CPUs have stood idle so far, summed over ``counters`` (microseconds each).

    A counter counts an idle period once it has ended (see :func:`settled_idle_core_ms`).
    ``None`` without counters (a kernel or a virtual machine without ``cpuidle``) or when one
    cannot be read: the caller then reports no idle time rather than a wrong one.
    """
    if not counters:
        return None
    try:
        return sum(int(path.read_text()) for path in counters) / 1000
    except (OSError, ValueError):
        return None


def settled_idle_core_ms(counters: Sequence[Path]) -> float | None:
    """:func:`idle_core_ms` once this thread has run on every CPU it may use, so no CPU is idle uncounted.

    A ``cpuidle`` counter adds an idle period when the period ends: a core that sat idle
    through this interpreter's imports would add all of it to the span its period ends in.
    Running on each CPU for a moment ends its period first. Where the thread cannot be moved
    (no ``sched_setaffinity``), the plain read; without counters, nothing is read or moved.
    """
    if not counters:
        return None
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return idle_core_ms(counters)
    try:
        for cpu in sorted(allowed):
            os.sched_setaffinity(0, {cpu})
    except OSError:
        pass
    finally:
        os.sched_setaffinity(0, allowed)
    return idle_core_ms(counters)


def _child(
    kind: str, count: int, *, by_task: bool = False, idle: bool = False, opcodes: bool = False
) -> dict[str, Any]:
    """One start in this interpreter: its wall time and CPU (process, and the loop's thread).

    With ``by_task``, also ``tasks``: the loop's CPU (ms) per task kind until every list is in.
    With ``idle``, where the machine has ``cpuidle`` counters, also ``idle_ms``: the idle time
    of all its cores over the same span (read just outside it, :func:`settled_idle_core_ms`;
    only when asked, since the read moves this thread across the cores just before the clock).
    With ``opcodes``, also ``opcodes`` and ``calls``: the loop thread's Python opcodes and
    calls per function over the span (:class:`OpcodeCounter`; its times are then not the
    client's).
    """
    import anyio._backends._trio  # noqa: F401  # the SDK's session imports it at its first use: not timed
    import mcp  # noqa: F401

    import mcp_actors.runtime  # noqa: F401
    from benchmarks.drivers._harness import descendants_cpu

    run = {"raw": _raw, "layer": _layer, "runtime": _runtime}[kind]
    server = toolserver()
    if kind == "runtime":
        _write_config(server, count)
    figures: dict[str, Any] = {}
    tasks = TaskCpu() if by_task else None
    counters = idle_counters() if idle else []
    counter = OpcodeCounter() if opcodes else None

    async def main() -> None:
        ready, stop = trio.Event(), trio.Event()
        idle = settled_idle_core_ms(counters)
        os.getresuid()  # ZERO_MARK: --instructions counts from here
        wall, cpu, loop = time.perf_counter(), time.process_time(), time.thread_time()
        if counter is not None:
            counter.start()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, server, count, ready, stop)
            await ready.wait()
            if counter is not None:
                counter.stop()
                figures["opcodes"], figures["calls"] = counter.opcodes, counter.calls
            os.getresgid()  # DUMP_MARK: to here
            figures["wall_ms"] = (time.perf_counter() - wall) * 1000
            figures["cpu_ms"] = (time.process_time() - cpu) * 1000
            figures["loop_cpu_ms"] = (time.thread_time() - loop) * 1000
            idle_after = settled_idle_core_ms(counters)
            if idle is not None and idle_after is not None:
                figures["idle_ms"] = idle_after - idle
            servers_cpu, helpers_cpu = descendants_cpu()  # the servers are idle once listed
            figures["servers_cpu_ms"] = servers_cpu * 1000
            figures["helpers_cpu_ms"] = helpers_cpu * 1000
            if tasks is not None:
                tasks.on = False
                figures["tasks"] = {k: v * 1000 for k, v in tasks.cpu.items()}
            stop.set()

    trio.run(main, instruments=[tasks] if tasks is not None else [])
    return figures


def _run_child(
    kind: str, count: int, state: str, *, under: Sequence[str] = (), extra: Sequence[str] = (), timeout: float
) -> subprocess.CompletedProcess[str]:
    """One start of ``kind`` in a fresh interpreter (``under`` a tool such as valgrind), state in ``state``.

    Raises:
        RuntimeError: The child failed (its stderr's end is in the message).
    """
    done = subprocess.run(
        [*under, sys.executable, "-m", "benchmarks.startup_layers", "--child", kind, str(count), *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "MCP_ACTORS_STATE_DIR": state},
        check=False,
    )
    if done.returncode != 0:
        how = f" under {under[0]}" if under else ""
        raise RuntimeError(f"{kind}: exited with {done.returncode}{how}: {done.stderr.strip()[-2000:]}")
    return done


def measure(
    kind: str, count: int, *, by_task: bool = False, idle: bool = False, opcodes: bool = False
) -> dict[str, Any]:
    """Run one start of ``kind`` with ``count`` servers in a fresh interpreter (its own state directory)."""
    with tempfile.TemporaryDirectory(prefix="mcp-actors-layers-") as state:
        extra = (["--by-task"] if by_task else []) + (["--idle"] if idle else []) + (["--opcodes"] if opcodes else [])
        done = _run_child(kind, count, state, extra=extra, timeout=CHILD_TIMEOUT)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def read_span_count(directory: Path) -> int:
    """The instructions of the marked span, from the callgrind files a child left in ``directory``.

    Callgrind writes the span's counts when the child calls the dump mark (``cg.<pid>.1``)
    and the rest at its exit (``cg.<pid>``).

    Raises:
        RuntimeError: No span was written, or more than one (the mark was called again
            inside the span, so the count would be of part of it).
    """
    spans = sorted(directory.glob("cg.*.[0-9]*"))
    if len(spans) != 1:
        raise RuntimeError(f"expected one counted span, found {len(spans)}: {[p.name for p in spans]}")
    found = _SUMMARY.search(spans[0].read_text(errors="replace"))
    if found is None:
        raise RuntimeError(f"{spans[0]}: no 'summary:' line")
    return int(found.group(1).split()[0])  # Ir, the first event


def _callgrind(state: str, *options: str) -> list[str]:
    """Callgrind counting from the zero mark to the dump mark, its files in ``state`` (``cg.<pid>...``)."""
    return [
        "valgrind",
        "--tool=callgrind",
        *options,
        f"--zero-before={ZERO_MARK}",
        f"--dump-before={DUMP_MARK}",
        f"--callgrind-out-file={state}/cg.%p",
    ]


def count_instructions(kind: str, count: int) -> int:
    """One start of ``kind`` with ``count`` servers under callgrind; the instructions of its span."""
    with tempfile.TemporaryDirectory(prefix="mcp-actors-layers-") as state:
        _run_child(kind, count, state, under=_callgrind(state), timeout=VALGRIND_TIMEOUT)
        return read_span_count(Path(state))


def read_loop_span(directory: Path) -> dict[str, int]:
    """The loop thread's counts over the marked span, by event, from a ``--separate-threads`` run.

    Callgrind writes each thread's counts to its own file; the span's, written at the dump
    mark, is ``cg.<pid>.1-01`` for the first thread (the one that runs ``trio.run``).

    Raises:
        RuntimeError: Not exactly one such file, one without its events or summary, or one
            without every event of :data:`LOOP_EVENTS` (a run without the cache simulation).
    """
    spans = sorted(directory.glob("cg.*.[0-9]*-01"))
    if len(spans) != 1:
        raise RuntimeError(
            f"expected one counted span of the loop's thread, found {len(spans)}: {[p.name for p in spans]}"
        )
    text = spans[0].read_text(errors="replace")
    events, summary = _EVENTS.search(text), _SUMMARY.search(text)
    if events is None or summary is None:
        raise RuntimeError(f"{spans[0]}: no 'events:' or 'summary:' line")
    values = [int(value) for value in summary.group(1).split()]
    names = events.group(1).split()
    missing = [event for event in LOOP_EVENTS if event not in names]
    if missing:
        raise RuntimeError(f"{spans[0]}: no {', '.join(missing)} counted (was the cache simulated?)")
    # Callgrind drops trailing zeros from a cost line.
    return {name: values[i] if i < len(values) else 0 for i, name in enumerate(names)}


def count_footprint(kind: str, count: int) -> dict[str, int]:
    """One start of ``kind`` with ``count`` servers under callgrind's cache simulation; the loop's counts."""
    with tempfile.TemporaryDirectory(prefix="mcp-actors-layers-") as state:
        callgrind = _callgrind(state, "--separate-threads=yes", "--cache-sim=yes", f"--LL={FOOTPRINT_CACHE}")
        _run_child(kind, count, state, under=callgrind, timeout=VALGRIND_TIMEOUT)
        return read_loop_span(Path(state))


def footprint_lines(counts: dict[str, dict[str, int]], servers: int) -> list[str]:
    """The table of ``--footprint``: each client's loop instructions (millions), its last-level
    misses (thousands: code, data read, data written, all), misses per thousand instructions,
    and its instructions and misses over the raw SDK's (when it was counted)."""
    kinds = [kind for kind in KINDS if kind in counts]
    lines = [
        f"the event loop's thread over a start of {servers} servers, callgrind with a "
        f"{FOOTPRINT_CACHE.split(',')[0]} B last-level cache; load {_load()}",
        f"{'client':8s} {'instr. M':>9s} {'code k':>7s} {'read k':>7s} {'write k':>8s} {'misses k':>9s} "
        f"{'per k instr.':>13s} {'instr. ÷ raw':>13s} {'misses ÷ raw':>13s}",
    ]
    raw = counts.get("raw")

    def misses(c: dict[str, int]) -> int:
        return c["ILmr"] + c["DLmr"] + c["DLmw"]

    for kind in kinds:
        c = counts[kind]
        ratios = (
            f"{c['Ir'] / raw['Ir']:12.3f}x {misses(c) / misses(raw):12.3f}x"
            if raw is not None
            else f"{'-':>13s} {'-':>13s}"
        )
        lines.append(
            f"{kind:8s} {c['Ir'] / 1e6:9.1f} {c['ILmr'] / 1e3:7.1f} {c['DLmr'] / 1e3:7.1f} {c['DLmw'] / 1e3:8.1f} "
            f"{misses(c) / 1e3:9.1f} {misses(c) / c['Ir'] * 1000:13.2f} {ratios}"
        )
    return lines


def _footprint(kinds: Sequence[str], servers: int) -> None:
    _need_valgrind()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # one per core
        futures = {kind: pool.submit(count_footprint, kind, servers) for kind in kinds}
        counts = {kind: future.result() for kind, future in futures.items()}
    for line in footprint_lines(counts, servers):
        print(line)


def _need_valgrind() -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")


def instruction_lines(counts: dict[tuple[str, int], int], servers: int) -> list[str]:
    """The table of ``--instructions``: each client's count (millions) at ``servers`` and at one
    server, the part per server and the fixed part they imply, and the count at ``servers`` over
    the raw SDK's (when it was counted)."""
    kinds = [kind for kind in KINDS if (kind, servers) in counts]
    lines = [
        f"instructions the client executes to start and list (millions; callgrind, every thread of the "
        f"client, not the servers nor the kernel); load {_load()}",
        f"{'client':8s} {f'{servers} servers':>11s} {'1 server':>9s} {'per server':>11s} {'fixed':>7s} {'÷ raw':>7s}",
    ]
    for kind in kinds:
        many, one = counts[kind, servers] / 1e6, counts[kind, 1] / 1e6
        per_server = (many - one) / (servers - 1)
        ratio = f"{counts[kind, servers] / counts['raw', servers]:6.3f}x" if ("raw", servers) in counts else "-"
        lines.append(f"{kind:8s} {many:11.1f} {one:9.1f} {per_server:11.2f} {one - per_server:7.1f} {ratio:>7s}")
    return lines


def _instructions(kinds: Sequence[str], servers: int) -> None:
    _need_valgrind()
    if servers < 2:
        raise SystemExit("--instructions needs --servers 2 or more (it also counts one server)")
    jobs = [(kind, n) for kind in kinds for n in (servers, 1)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # one per core
        futures = {job: pool.submit(count_instructions, *job) for job in jobs}
        counts = {job: future.result() for job, future in futures.items()}
    for line in instruction_lines(counts, servers):
        print(line)


Counts = dict[str, int]
"""A count per function, named as :func:`function_key` names it."""


def opcode_lines(counts: dict[tuple[str, int], tuple[Counts, Counts]], servers: int, *, top: int = 12) -> list[str]:
    """The tables of ``--opcodes``.

    ``counts[kind, n]`` is a start's ``(opcodes, calls)`` per function (:class:`OpcodeCounter`)
    with ``n`` servers, for ``n`` in ``servers`` and 1. First each client's total (thousands)
    at both, the part per server and the fixed part they imply, and the total over the raw
    SDK's; then, when both were counted, the runtime's opcodes less our layer's, per server
    and fixed, each by module and by function (the ``top`` largest each, a function with its
    calls).
    """
    kinds = [kind for kind in KINDS if (kind, servers) in counts and (kind, 1) in counts]
    lines = [
        f"Python opcodes the event loop's thread executes to start and list (thousands; sys.settrace); load {_load()}",
        f"{'client':8s} {f'{servers} servers':>11s} {'1 server':>9s} {'per server':>11s} {'fixed':>7s} {'÷ raw':>7s}",
    ]
    totals = {key: sum(opcodes.values()) for key, (opcodes, _) in counts.items()}
    for kind in kinds:
        many, one = totals[kind, servers] / 1e3, totals[kind, 1] / 1e3
        per_server = (many - one) / (servers - 1)
        ratio = f"{totals[kind, servers] / totals['raw', servers]:6.3f}x" if ("raw", servers) in totals else "-"
        lines.append(f"{kind:8s} {many:11.1f} {one:9.1f} {per_server:11.2f} {one - per_server:7.1f} {ratio:>7s}")
    if "runtime" not in kinds or "layer" not in kinds:
        return lines

    def split(kind: str, which: int) -> tuple[dict[str, float], dict[str, float]]:
        """Per function: its part per server and its fixed part (``which``: 0 opcodes, 1 calls)."""
        many, one = counts[kind, servers][which], counts[kind, 1][which]
        per = {name: (many.get(name, 0) - one.get(name, 0)) / (servers - 1) for name in many.keys() | one.keys()}
        return per, {name: one.get(name, 0) - part for name, part in per.items()}

    def less(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {name: a.get(name, 0.0) - b.get(name, 0.0) for name in a.keys() | b.keys()}

    parts = [less(ours, layer) for ours, layer in zip(split("runtime", 0), split("layer", 0), strict=True)]
    calls = [less(ours, layer) for ours, layer in zip(split("runtime", 1), split("layer", 1), strict=True)]
    for what, opcodes, called in (("per server", parts[0], calls[0]), ("fixed", parts[1], calls[1])):
        modules: dict[str, float] = {}
        for name, value in opcodes.items():
            module = name.split(":", 1)[0]
            modules[module] = modules.get(module, 0.0) + value
        lines.append(
            f"the runtime's opcodes {what} less our layer's: {sum(opcodes.values()):+.0f}; "
            f"the {top} largest parts by module, then by function (with its calls {what})"
        )
        lines += [f"{value:+9.0f}  {module}" for module, value in sorted(modules.items(), key=lambda m: -m[1])[:top]]
        lines += [
            f"{value:+9.0f}  {called.get(name, 0.0):+7.1f}  {name}"
            for name, value in sorted(opcodes.items(), key=lambda f: -f[1])[:top]
        ]
    return lines


def _opcodes(kinds: Sequence[str], servers: int) -> None:
    if servers < 2:
        raise SystemExit("--opcodes needs --servers 2 or more (it also counts one server)")
    counts: dict[tuple[str, int], tuple[Counts, Counts]] = {}
    for kind in kinds:
        for n in (servers, 1):
            figures = measure(kind, n, opcodes=True)
            counts[kind, n] = (figures["opcodes"], figures["calls"])
    for line in opcode_lines(counts, servers):
        print(line)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup_layers", description=__doc__)
    parser.add_argument("--servers", type=int, default=20, help="light servers per start (default 20)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of the three clients (default 8)")
    parser.add_argument("--by-task", action="store_true", help="also split each client's loop CPU by task")
    parser.add_argument(
        "--idle", action="store_true", help="also split each client's time into CPU, helpers, idle cores and the rest"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count each client's instructions under valgrind instead"
    )
    parser.add_argument(
        "--footprint",
        action="store_true",
        help="count the loop thread's instructions and last-level cache misses under valgrind instead",
    )
    parser.add_argument(
        "--opcodes",
        action="store_true",
        help="count the loop thread's Python opcodes per function instead, and name the actors' per server",
    )
    parser.add_argument("--child", nargs=2, metavar=("KIND", "COUNT"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child is not None:
        kind, count = options.child
        figures = _child(kind, int(count), by_task=options.by_task, idle=options.idle, opcodes=options.opcodes)
        print(json.dumps(figures), flush=True)
        return
    if options.opcodes:
        _opcodes(KINDS, options.servers)
        return
    if options.instructions:
        _instructions(KINDS, options.servers)
        return
    if options.footprint:
        _footprint(KINDS, options.servers)
        return
    rounds: list[dict[str, dict[str, Any]]] = []
    for n in range(options.rounds):
        print(f"[startup_layers] round {n + 1}/{options.rounds}", file=sys.stderr, flush=True)
        rounds.append(
            {kind: measure(kind, options.servers, by_task=options.by_task, idle=options.idle) for kind in KINDS}
        )
    print(f"{options.servers} light servers started and listed, {options.rounds} rounds; load {_load()}")
    for line in table_lines(rounds, os.cpu_count() or 1):
        print(line)
    if options.by_task:
        for line in by_task_lines(rounds):
            print(line)
    if options.idle:
        for line in core_time_lines(rounds, os.cpu_count() or 1) or [
            "no idle time: this machine has no cpuidle counters"
        ]:
            print(line)


def table_lines(rounds: Sequence[dict[str, dict[str, Any]]], cores: int) -> list[str]:
    """Each client's medians (wall, CPU, the loop's CPU, the servers' CPU) and its wall time
    over the raw SDK's, paired by round: as measured, and with the servers' CPU held equal.

    Held equal is :func:`benchmarks.startup.held_equal_ratios` at the median servers' CPU
    of every start of the run, with its bootstrap interval: with more servers than cores
    that is the figure the start-up goal is read by (a round's wall time moves by ~10 %
    with its servers' CPU, whichever client started them). It is shown only when every
    start reports its servers' CPU.
    """
    from benchmarks.startup import held_equal_ratios, median_interval

    fields = ("wall_ms", "cpu_ms", "loop_cpu_ms", "servers_cpu_ms")
    held = all("servers_cpu_ms" in r[kind] for r in rounds for kind in KINDS)
    reference = statistics.median(r[kind]["servers_cpu_ms"] for r in rounds for kind in KINDS) if held else 0.0
    lines = [
        f"{'client':8s} {'wall ms':>8s} {'CPU ms':>8s} {'loop CPU ms':>12s} {'servers CPU ms':>15s} "
        f"{'wall / raw, paired':>19s} {'held equal, 95 % interval':>34s}"
    ]
    for kind in KINDS:
        values = {key: statistics.median(r[kind].get(key, 0.0) for r in rounds) for key in fields}
        paired = statistics.median(r[kind]["wall_ms"] / r["raw"]["wall_ms"] for r in rounds)
        line = (
            f"{kind:8s} {values['wall_ms']:8.1f} {values['cpu_ms']:8.1f} {values['loop_cpu_ms']:12.1f} "
            f"{values['servers_cpu_ms']:15.1f} {paired:18.3f}x"
        )
        if held:
            ratios = held_equal_ratios(
                [(r[kind]["wall_ms"], r[kind]["servers_cpu_ms"]) for r in rounds],
                [(r["raw"]["wall_ms"], r["raw"]["servers_cpu_ms"]) for r in rounds],
                cores,
                reference,
            )
            low, high = median_interval(ratios)
            line += f" {statistics.median(ratios):13.3f}x [{low:.3f}, {high:.3f}]"
        lines.append(line)
    return lines


def by_task_lines(rounds: Sequence[dict[str, dict[str, Any]]]) -> list[str]:
    """Each client's loop CPU per task kind (medians over the rounds, a kind absent from a round counting 0).

    The rest of the loop's CPU, between task steps (trio's scheduler, I/O waits' set-up),
    is the last line of each client.
    """
    lines = ["loop CPU by task (ms, medians):"]
    for kind in KINDS:
        names = sorted({name for r in rounds for name in r[kind].get("tasks", {})})
        per_task = {name: statistics.median(r[kind].get("tasks", {}).get(name, 0.0) for r in rounds) for name in names}
        between = statistics.median(r[kind]["loop_cpu_ms"] - sum(r[kind].get("tasks", {}).values()) for r in rounds)
        lines.append(f"{kind}:")
        for name, ms in sorted(per_task.items(), key=lambda item: -item[1]):
            lines.append(f"  {ms:7.2f}  {name}")
        lines.append(f"  {between:7.2f}  (between task steps: the scheduler)")
    return lines


_CORE_PARTS = ("cpu_ms", "helpers_cpu_ms", "idle_ms")


def core_time_lines(rounds: Sequence[dict[str, dict[str, Any]]], cores: int) -> list[str]:
    """Each client's wall time with its servers' CPU taken out, split into what filled the cores (ms of wall).

    A start keeps ``cores`` cores for its wall time: ``cores x wall`` is the servers' CPU,
    the client's (every thread), its helpers' (processes below it that are not servers: the
    reaper sidecar), the cores' idle time and what else the machine ran (other processes,
    the kernel's own threads). Less the servers' CPU, over ``cores``: the first column, the
    client's cost in wall time, whose ratio is the held-equal one; then each part over
    ``cores``, and the rest. Medians over the rounds; a second table gives each client's
    parts less the raw SDK's, paired by round. Empty when a start has no idle time.
    """
    if not rounds or not all("idle_ms" in r[kind] for r in rounds for kind in KINDS):
        return []

    def parts(figures: dict[str, Any]) -> list[float]:
        cost = figures["wall_ms"] - figures["servers_cpu_ms"] / cores
        shares = [figures.get(key, 0.0) / cores for key in _CORE_PARTS]
        return [cost, *shares, cost - sum(shares)]

    names = ["wall - servers/cores", "CPU/cores", "helpers/cores", "idle/cores", "rest"]
    head = f"{'client':8s} " + " ".join(f"{name:>20s}" for name in names)
    lines = [f"each client's time less its servers' CPU, by what filled the {cores} cores (ms of wall, medians):", head]
    for kind in KINDS:
        columns = zip(*(parts(r[kind]) for r in rounds), strict=True)
        lines.append(f"{kind:8s} " + " ".join(f"{statistics.median(column):20.2f}" for column in columns))
    lines += ["the same less the raw SDK's, paired by round:", head]
    for kind in KINDS[1:]:
        deltas = [[a - b for a, b in zip(parts(r[kind]), parts(r["raw"]), strict=True)] for r in rounds]
        lines.append(
            f"{kind:8s} " + " ".join(f"{statistics.median(column):+20.2f}" for column in zip(*deltas, strict=True))
        )
    return lines


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
