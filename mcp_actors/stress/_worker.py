"""One worker of a stress run: its own runtime, its own connections, its share of the load.

A worker runs in a process of its own (started by trio-parallel) or, with ``workers=0``,
inside the caller's trio loop. It talks to the parent through files in a control
directory, which needs nothing but a shared disk and survives any worker crash:

* ``ready-W``  — written when its connections are up;
* ``go``       — written by the parent: the wall-clock start time of the load;
* ``stop``     — written by the parent (Ctrl-C): stop starting calls, finish, report;
* ``progress-W.json`` — rewritten twice a second: counters and the latency histogram.

A worker process also watches its host: when the host is gone (killed, crashed) the
worker ends its run at once and closes its servers, instead of driving load until the
run's duration ends.

Only the public library API is used on the target side: ``open_runtime`` and the
``McpService`` methods.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs
import trio

from mcp_actors.adapters import flatten_content
from mcp_actors.errors import McpActorsError, StressConfigInvalid
from mcp_actors.stress._engine import LoadPlan, OutageTracker, Progress, drive
from mcp_actors.stress._parse import ChaosKind, ChaosSpec
from mcp_actors.stress._scenario import Operation, OpKind, Scenario
from mcp_actors.stress._tally import Tally

__all__ = ["WorkerJob", "error_kind", "raise_failure", "run_worker", "worker_main"]

PROGRESS_INTERVAL = 0.5
GO_POLL = 0.005
HOST_POLL = 0.2
"""Seconds between checks that the host process lives, where no pidfd can say it at once."""

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class WorkerJob:
    """Everything a worker needs; picklable (it crosses into the worker process).

    Attributes:
        plan: The load share.
        scenario: The operation mix.
        records: The target's server records (camelCase JSON), one per connection.
        control_dir: The directory shared with the parent (``None``: start at once, no files).
        start_timeout: Seconds to wait for the connections and for the ``go`` file.
        slack: Seconds a call may outlive its timeout before it counts as over time.
        host_pid: The parent's PID when the worker runs in a process of its own: the worker
            ends its run as soon as that process is gone (see :func:`_end_with_host`).
    """

    plan: LoadPlan
    scenario: Scenario
    records: tuple[Mapping[str, Any], ...]
    control_dir: str | None = None
    start_timeout: float = 120.0
    slack: float = 1.0
    host_pid: int | None = None


def run_worker(job: WorkerJob) -> dict[str, Any]:
    """The worker process's entry point (for ``trio_parallel.run_sync``): the tally, JSON-able.

    A failure comes back as ``{"failed": {...}}`` rather than as a raised exception: our
    errors (and the exception groups around them) do not survive pickling, and the parent
    only needs the leaf's class, message and server to report it (see :func:`raise_failure`).
    """
    root = logging.getLogger()
    if not root.handlers:
        # A spawned worker has no logging set up; Python's last-resort handler would print
        # every supervisor warning (a chaos kill makes several) over the parent's output.
        root.addHandler(logging.NullHandler())
    try:
        return trio.run(worker_main, job)
    except Exception as exc:
        leaf = _leaf(exc)
        return {
            "failed": {
                "type": type(leaf).__name__,
                "message": str(leaf) or type(leaf).__name__,
                "server": getattr(leaf, "server", None),
            }
        }


def _leaf(exc: BaseException) -> BaseException:
    """The one exception worth reporting inside exception groups (our typed errors first)."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        else:
            leaves.append(e)

    walk(exc)
    for leaf in leaves:
        if isinstance(leaf, McpActorsError):
            return leaf
    return leaves[0] if leaves else exc


def raise_failure(failed: Mapping[str, Any]) -> NoReturn:
    """Raise, in the parent, the error a worker reported (its class when it can be rebuilt)."""
    from mcp_actors import errors

    cls = getattr(errors, str(failed.get("type")), None)
    message, server = str(failed.get("message")), failed.get("server")
    rebuilt: McpActorsError | None = None
    if isinstance(cls, type) and issubclass(cls, McpActorsError):
        try:
            rebuilt = cls(message, server=server)
        except TypeError:
            rebuilt = None  # a class with other required fields: reported as a start failure below
    if rebuilt is not None:
        raise rebuilt
    raise errors.ServerStartFailed(f"a stress worker failed: {message}", server=server)


def error_kind(exc: BaseException) -> str:
    """The failure kind of an exception: its class name in snake case (``tool_call_timeout``)."""
    name = type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


async def worker_main(job: WorkerJob, *, stop: trio.Event | None = None) -> dict[str, Any]:
    """Run one worker: connect, wait for ``go``, drive the load, report its tally (wire form).

    With ``job.host_pid``, the run ends at once when the host process is gone: its servers
    are closed as at any runtime's exit, and the result says so (nobody is left to read it).
    """
    stop = stop if stop is not None else trio.Event()
    if job.host_pid is None:
        return await _work(job, stop)
    wire: dict[str, Any] | None = None
    async with trio.open_nursery() as guard:
        guard.start_soon(_end_with_host, job.host_pid, guard.cancel_scope)
        wire = await _work(job, stop)
        guard.cancel_scope.cancel()
    if wire is None:
        return {"failed": {"type": "ActorStopped", "message": "the stress host process is gone", "server": None}}
    return wire


async def _end_with_host(host_pid: int, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once the host process is gone (killed, crashed): the run has no one to report to.

    A worker process is its host's child (trio-parallel spawns it), so a host that is gone
    shows as a changed parent PID. On Linux a pidfd wakes the worker the moment the host
    exits; elsewhere the parent PID is checked every ``HOST_POLL`` seconds.
    """
    pidfd = -1
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(host_pid)
    try:
        # Checked after the pidfd is open: it then names our parent, not a reused PID.
        if os.getppid() == host_pid:
            if pidfd >= 0:
                await trio.lowlevel.wait_readable(pidfd)
            else:
                while True:  # no event to wait for: a parent's death is seen by polling
                    await trio.sleep(HOST_POLL)
                    if os.getppid() != host_pid:
                        break
    finally:
        if pidfd >= 0:
            trio.lowlevel.notify_closing(pidfd)
            os.close(pidfd)
    logger.warning("stress worker: the host process %d is gone; ending the run", host_pid)
    scope.cancel()


async def _work(job: WorkerJob, stop: trio.Event) -> dict[str, Any]:
    from mcp_actors.runtime import open_runtime  # not at import: the parent never needs it

    control = Path(job.control_dir) if job.control_dir else None
    index = job.plan.worker
    with tempfile.TemporaryDirectory(prefix="mcp-actors-stress-") as tmp:
        config = Path(tmp) / "mcp-config.json"
        config.write_text(json.dumps({"mcpServers": list(job.records)}), encoding="utf-8")
        async with open_runtime(config, sweep_ledger=False, connect_on_add=False, tool_cache_ttl=0.0) as runtime:
            service = runtime.service
            job.scenario.check_supported(type(service))
            names = [str(r["name"]) for r in job.records]
            with trio.fail_after(job.start_timeout):
                async with trio.open_nursery() as nursery:
                    for name in names:
                        nursery.start_soon(service.connect, name)
            start = await _wait_for_go(control, index, job.start_timeout, stop)
            tally = Tally()
            progress = Progress()
            outages = OutageTracker(worker=index)

            async def execute(n: int, op: Operation, args: Mapping[str, Any], timeout: float) -> str | None:
                return await _execute(service, names[n // job.plan.workers % len(names)], op, args, timeout, job.slack)

            async with trio.open_nursery() as nursery:
                if control is not None:
                    nursery.start_soon(_watch_stop, control, stop)
                    nursery.start_soon(_write_progress, control, index, start, tally, progress)
                for spec in job.plan.chaos:
                    nursery.start_soon(_chaos, spec, service, names, start, job.plan.length, outages, stop)
                await drive(
                    job.plan,
                    job.scenario,
                    execute,
                    start=start,
                    tally=tally,
                    progress=progress,
                    outages=outages,
                    stop=stop,
                    slack=job.slack,
                )
                nursery.cancel_scope.cancel()
            tally.outages.extend(o.to_json() for o in outages.events)
            if control is not None:
                _write_json(control / f"progress-{index}.json", _progress_doc(start, tally, progress, done=True))
            return tally.to_wire()


async def _wait_for_go(control: Path | None, index: int, bound: float, stop: trio.Event) -> float:
    """Tell the parent we are ready; return the trio time matching the parent's wall-clock start."""
    if control is None:
        return trio.current_time()
    (control / f"ready-{index}").write_text("ready", encoding="utf-8")
    go = control / "go"
    with trio.fail_after(bound):
        while not go.exists():
            if (control / "stop").exists():
                stop.set()
                return trio.current_time()
            await trio.sleep(GO_POLL)
    wall_start = float(go.read_text(encoding="utf-8"))
    return trio.current_time() + max(0.0, wall_start - time.time())


async def _watch_stop(control: Path, stop: trio.Event) -> None:
    while not stop.is_set():
        if (control / "stop").exists():
            stop.set()
            return
        await trio.sleep(0.05)


def _write_json(path: Path, doc: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, path)


def _progress_doc(start: float, tally: Tally, progress: Progress, *, done: bool = False) -> dict[str, Any]:
    return {
        "t": trio.current_time() - start,
        "started": progress.started,
        "finished": progress.finished,
        "in_flight": progress.in_flight,
        "errors": dict(tally.errors),
        "latency": tally.latency.encode(),
        "done": done,
    }


async def _write_progress(control: Path, index: int, start: float, tally: Tally, progress: Progress) -> None:
    path = control / f"progress-{index}.json"
    while True:
        _write_json(path, _progress_doc(start, tally, progress))
        await trio.sleep(PROGRESS_INTERVAL)


async def _execute(
    service: Any, server: str, op: Operation, args: Mapping[str, Any], timeout: float, slack: float
) -> str | None:
    """One operation through the public McpService API; a failure is returned as its kind."""
    try:
        # The library bounds the call by ``timeout``; this outer bound only catches a call
        # that outlives it (which the report counts as a broken promise).
        with trio.fail_after(timeout + slack):
            match op.kind:
                case OpKind.CALL:
                    result = await service.call_tool(server, op.tool, dict(args), timeout=timeout)
                    return _check(op, bool(result.is_error), result.content)
                case OpKind.LIST:
                    with trio.fail_after(timeout):
                        await service.list_server_tools(server)
                    return None
                case OpKind.PING:
                    await service.health(server, timeout=timeout)
                    return None
                case OpKind.READ_RESOURCE:
                    with trio.fail_after(timeout):
                        result = await service.read_resource(server, op.uri)
                    return _check(op, False, getattr(result, "contents", ()))
                case OpKind.GET_PROMPT:
                    with trio.fail_after(timeout):
                        result = await service.get_prompt(server, op.prompt, dict(args))
                    return _check(op, False, [m.content for m in getattr(result, "messages", ())])
                case _:
                    raise TypeError(f"unknown operation kind {op.kind!r}")
    except trio.TooSlowError:
        return "timeout"
    except McpActorsError as exc:
        return error_kind(exc)


def _check(op: Operation, is_error: bool, content: Sequence[Any]) -> str | None:
    expect = op.expect
    if expect.is_error is not None and is_error != expect.is_error:
        return "is_error" if is_error else "expectation"
    if expect.text_contains is not None:
        text = flatten_content(content) if op.kind is OpKind.CALL else json.dumps([_plain(c) for c in content])
        if expect.text_contains not in text:
            return "expectation"
    return None


def _plain(item: Any) -> Any:
    dump = getattr(item, "model_dump", None)
    return dump(mode="json") if callable(dump) else str(item)


def _pids(service: Any, names: Sequence[str]) -> list[int]:
    pids = []
    for name in names:
        pid = service.status(name).pid
        if pid is not None:
            pids.append(pid)
    return pids


async def _chaos(
    spec: ChaosSpec,
    service: Any,
    names: Sequence[str],
    start: float,
    length: float,
    outages: OutageTracker,
    stop: trio.Event,
) -> None:
    """Every ``spec.every`` seconds of the load, kill (or stop, then continue) this worker's servers.

    Nothing is injected once the load has stopped starting calls: an outage then could
    never be recovered from, and would only show as "not recovered".
    """
    k = 1
    while start + k * spec.every < start + length:
        with trio.move_on_at(start + k * spec.every):
            await stop.wait()
        if stop.is_set():
            return
        k += 1
        at = trio.current_time() - start
        hit = []
        for pid in _pids(service, names):
            try:
                os.kill(pid, signal.SIGKILL if spec.kind is ChaosKind.KILL else signal.SIGSTOP)
            except ProcessLookupError:
                continue
            hit.append((pid, outages.begin(spec.kind.value, at, pid)))
        if spec.kind is ChaosKind.STOP and hit:
            try:
                with trio.CancelScope(shield=True):  # never leave a process stopped
                    await trio.sleep(spec.stop_for)
            finally:
                for pid, outage in hit:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                    outage.until = trio.current_time() - start


def check_chaos_target(records: Sequence[Mapping[str, Any]], chaos: Sequence[ChaosSpec]) -> None:
    """Chaos acts on server processes: only stdio targets have one.

    Raises:
        StressConfigInvalid: ``--chaos`` with an HTTP or SSE target.
    """
    if chaos and any(r.get("type") != "stdio" for r in records):
        raise StressConfigInvalid(
            "--chaos kills or stops the server's process, so it needs a stdio target (--command or a "
            "stdio server); for a remote server use the fault server's own flags instead",
            field="--chaos",
        )
