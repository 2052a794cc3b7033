"""The parent side of a stress run: target records, workers, the start barrier, live progress.

Workers are processes started with trio-parallel, one job each (``retire`` after it), so
nothing stays behind when the run ends. The parent starts them, waits until every one has
its connections up, writes the common wall-clock start time, reads their progress files
for the live view, and adds their tallies when they return. ``stop`` (Ctrl-C) asks every
worker to stop starting calls and report what it has; cancelling the run kills the worker
processes, whose servers the process tracker's reaper then kills.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from mcp_actors._config.codec import record_from_json_dict, record_to_json_dict
from mcp_actors._config.record import new_server_id, redact_url
from mcp_actors.errors import ServerNotFound, StressConfigInvalid, StressWorkerDied
from mcp_actors.stress._engine import LoadPlan
from mcp_actors.stress._parse import Slo
from mcp_actors.stress._result import build_document, evaluate_slos
from mcp_actors.stress._scenario import Scenario
from mcp_actors.stress._tally import Histogram, Tally
from mcp_actors.stress._worker import WorkerJob, check_chaos_target, raise_failure, run_worker, worker_main

__all__ = ["LiveStats", "StressSettings", "adhoc_target", "configured_target", "run_stress"]


def adhoc_target(
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    kind: str | None = None,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> dict[str, Any]:
    """A server record (camelCase JSON) for ``--command ...`` or ``--url ...``, validated like ``servers add``.

    Args:
        command: The stdio server's argv (executable first).
        url: The remote server's URL.
        kind: ``sse`` or ``http`` for ``url`` (default: ``sse`` when the path ends in ``/sse``).
        env: Environment of a stdio server.
        headers: HTTP headers of a remote server.
        cwd: Working directory of a stdio server.

    Raises:
        StressConfigInvalid: Neither or both of ``command`` and ``url``.
        InvalidServerConfig: The record is invalid (the message names the field).
    """
    if (not command) == (url is None):
        raise StressConfigInvalid(
            "give exactly one target: --server NAME, --command 'CMD ARGS...' or --url URL", field="target"
        )
    config: dict[str, Any]
    if command:
        server_type = "stdio"
        config = {"command": command[0], "args": list(command[1:]), "env": dict(env or {})}
        if cwd is not None:
            config["cwd"] = cwd
    else:
        assert url is not None
        if kind is None:
            kind = "sse" if url.split("?", 1)[0].rstrip("/").endswith("/sse") else "http"
        server_type = kind
        config = {"url": url, "headers": dict(headers or {})}
    entry = {"id": new_server_id(), "name": "stress-target", "type": server_type, "config": config, "isTrusted": True}
    return record_to_json_dict(record_from_json_dict(entry))


def configured_target(records: Sequence[Any], server: str) -> dict[str, Any]:
    """The record (camelCase JSON) of a configured server, by name or id.

    Raises:
        ServerNotFound: No such server (the message lists the configured names).
    """
    for record in records:
        if server in (record.name, record.id):
            return record_to_json_dict(record)
    names = ", ".join(r.name for r in records) or "none"
    raise ServerNotFound(
        f"no server named {server!r} is configured (configured: {names}); add it with "
        "'mcp-actors servers add' or give --command / --url",
        server=server,
    )


def describe_target(record: Mapping[str, Any], label: str) -> dict[str, str]:
    """What the report says about the target (no env or header values, URL credentials redacted)."""
    config = record.get("config", {})
    if record.get("type") == "stdio":
        where = " ".join([str(config.get("command", "")), *map(str, config.get("args", []))])
    else:
        where = redact_url(str(config.get("url", "")))
    return {"name": label, "type": str(record.get("type")), "where": where}


@attrs.frozen(kw_only=True)
class StressSettings:
    """A whole run.

    Attributes:
        target: The target's record (camelCase JSON, from :func:`adhoc_target` or
            :func:`configured_target`).
        target_label: How reports name the target.
        scenario: The operation mix.
        plan: The load (its ``worker`` / ``workers`` are set per worker).
        workers: Worker processes; 0 runs the load in this trio loop (no process).
        connections: Connections per worker (for stdio: server processes per worker).
        slos: Thresholds judged on the result.
        start_timeout: Seconds the workers may take to start and connect.
    """

    target: Mapping[str, Any]
    target_label: str
    scenario: Scenario
    plan: LoadPlan
    workers: int = 1
    connections: int = 1
    slos: tuple[Slo, ...] = ()
    start_timeout: float = 120.0

    def __attrs_post_init__(self) -> None:
        if self.workers < 0:
            raise StressConfigInvalid(f"--workers must be >= 0, got {self.workers}", field="--workers")
        if self.connections < 1:
            raise StressConfigInvalid(f"--connections must be >= 1, got {self.connections}", field="--connections")
        check_chaos_target([self.target], self.plan.chaos)

    def records(self) -> tuple[dict[str, Any], ...]:
        """The target records of one worker: one per connection, each with its own name."""
        out = []
        for k in range(self.connections):
            entry = dict(self.target)
            entry.update(id=new_server_id(), name=f"stress-{k + 1}", isActive=True, isTrusted=True)
            out.append(entry)
        return tuple(out)

    def settings_json(self) -> dict[str, Any]:
        """The settings part of the result document."""
        plan = self.plan
        return {
            "model": "open" if plan.rate is not None else "closed",
            # seconds: null for the open-ended step of a plain --rate (JSON has no infinity).
            "rate": [
                {"start": step.start, "end": step.end, "seconds": None if math.isinf(step.seconds) else step.seconds}
                for step in plan.rate
            ]
            if plan.rate is not None
            else None,
            "users": plan.users if plan.rate is None else None,
            "think": plan.think,
            "ramp_up": plan.ramp_up,
            "duration": plan.duration,
            "requests": plan.requests,
            "warmup": plan.warmup,
            "timeout": plan.timeout,
            "workers": self.workers,
            "connections": self.connections,
            "chaos": [attrs.asdict(c) for c in plan.chaos],
            "scenario": [
                {"name": op.name, "kind": op.kind.value, "weight": op.weight} for op in self.scenario.operations
            ],
            "slo": [s.text for s in self.slos],
        }


@attrs.frozen(kw_only=True)
class LiveStats:
    """A snapshot for the live view, merged over the workers."""

    elapsed: float
    started: int
    finished: int
    in_flight: int
    rate: float
    errors: Mapping[str, int]
    latency: Histogram
    workers_ready: int
    workers: int


async def run_stress(
    settings: StressSettings,
    *,
    stop: trio.Event | None = None,
    on_progress: Callable[[LiveStats], None] | None = None,
) -> dict[str, Any]:
    """Run the load; return the result document (see ``_result``), SLOs judged.

    Args:
        settings: The run.
        stop: Set it to stop early (Ctrl-C): calls in flight finish and are reported. The
            run sets it too when a worker process died of SIGINT while starting (a Ctrl-C
            sent to the process group reaches workers that do not ignore it yet): check
            ``stop.is_set()`` afterwards to know the run was interrupted.
        on_progress: Called about twice a second with merged live counters.

    Raises:
        StressConfigInvalid, McpActorsError: The run could not start (bad target, the
            server could not be connected, an unsupported operation).
        StressWorkerDied: A worker process died of anything else (the OOM killer, a kill).
    """
    stop = stop if stop is not None else trio.Event()
    from mcp_actors.service import McpService  # the parent checks before any worker or server starts

    settings.scenario.check_supported(McpService)
    workers = max(settings.workers, 1)
    records = settings.records()
    start_wall = time.time()
    if settings.workers == 0:
        plan = attrs.evolve(settings.plan, worker=0, workers=1)
        job = WorkerJob(plan=plan, scenario=settings.scenario, records=records, start_timeout=settings.start_timeout)
        start_wall = time.time()
        wires = [await worker_main(job, stop=stop)]
    else:
        wires, start_wall = await _run_workers(settings, records, workers, stop, on_progress)
    tally = Tally.merged(Tally.from_wire(w) for w in wires)
    meta = {
        "start_time": start_wall,
        "target": describe_target(settings.target, settings.target_label),
        "settings": settings.settings_json(),
    }
    doc = build_document(tally, meta=meta)
    if settings.slos:
        doc["slo"] = evaluate_slos(doc, settings.slos)
    return doc


_CTRL_C_GRACE = 1.0
"""Seconds a dead worker's death waits for the host's own Ctrl-C (see ``_died_of_ctrl_c``)."""


def _retire_after_one() -> bool:
    """trio-parallel ``retire``: a worker process serves one job, then exits (nothing lingers)."""
    return True


async def _run_workers(
    settings: StressSettings,
    records: tuple[dict[str, Any], ...],
    workers: int,
    stop: trio.Event,
    on_progress: Callable[[LiveStats], None] | None,
) -> tuple[list[dict[str, Any]], float]:
    import trio_parallel  # type: ignore[import-untyped]

    control = Path(tempfile.mkdtemp(prefix="mcp-actors-stress-control-"))
    wires: list[dict[str, Any] | None] = [None] * workers
    interrupted = [False] * workers
    all_done = trio.Event()
    start_wall = [time.time()]
    try:
        async with trio_parallel.open_worker_context(retire=_retire_after_one, grace_period=30.0) as ctx:

            async def one(index: int) -> None:
                plan = attrs.evolve(settings.plan, worker=index, workers=workers)
                job = WorkerJob(
                    plan=plan,
                    scenario=settings.scenario,
                    records=records,
                    control_dir=str(control),
                    start_timeout=settings.start_timeout,
                    host_pid=os.getpid(),
                )
                try:
                    wire = await ctx.run_sync(run_worker, job, kill_on_cancel=True)
                except trio_parallel.BrokenWorkerError as exc:
                    exit_code = _exit_code(exc)
                    if not await _died_of_ctrl_c(exit_code, stop):
                        raise _worker_died(index, exit_code) from None
                    stop.set()  # the others stop too: the run is interrupted
                    interrupted[index] = True
                else:
                    if "failed" in wire:
                        raise_failure(wire["failed"])
                    wires[index] = wire
                if all(w is not None or gone for w, gone in zip(wires, interrupted, strict=True)):
                    all_done.set()

            async with trio.open_nursery() as nursery:
                for index in range(workers):
                    nursery.start_soon(one, index)
                nursery.start_soon(_barrier, control, workers, settings.start_timeout, start_wall, stop)
                nursery.start_soon(_forward_stop, control, stop)
                nursery.start_soon(_progress_loop, control, workers, start_wall, on_progress, wires)
                await all_done.wait()
                nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(control, ignore_errors=True)
    return [w for w in wires if w is not None], start_wall[0]


async def _died_of_ctrl_c(exit_code: int | None, stop: trio.Event) -> bool:
    """Whether a dead worker was killed by a Ctrl-C rather than by a fault.

    A worker ignores SIGINT only once trio-parallel's loop runs in it; a Ctrl-C sent to the
    process group (a terminal's) kills a worker still starting: by the signal, or with
    status 1 when the interrupt hit the interpreter's own start. The host got the same
    Ctrl-C, and its handler sets ``stop`` within a pass or two of the loop: the worker's
    death may be seen first, so ``stop`` is waited for, briefly (``_CTRL_C_GRACE``).
    """
    if exit_code == -signal.SIGINT:
        return True
    with trio.move_on_after(_CTRL_C_GRACE):
        await stop.wait()
    return stop.is_set()


def _exit_code(exc: BaseException) -> int | None:
    """The exit status of the worker behind trio-parallel's ``BrokenWorkerProcessError``."""
    for arg in exc.args:
        code = getattr(arg, "exitcode", None)  # its multiprocessing Process
        if isinstance(code, int):
            return code
    return None


def _worker_died(index: int, exit_code: int | None) -> StressWorkerDied:
    if exit_code is None:
        how = "died"
    elif exit_code < 0:
        try:
            how = f"was killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            how = f"was killed by signal {-exit_code}"
    else:
        how = f"exited with status {exit_code}"
    return StressWorkerDied(
        f"stress worker {index} {how}; its calls are lost. Check the machine's memory (dmesg names the "
        "OOM killer's victims) and run again, with fewer --workers if memory is short",
        worker=index,
        exit_code=exit_code,
    )


async def _barrier(control: Path, workers: int, bound: float, start_wall: list[float], stop: trio.Event) -> None:
    """Once every worker is connected, write the common start time (a moment ahead)."""
    with trio.fail_after(bound):
        while sum(1 for i in range(workers) if (control / f"ready-{i}").exists()) < workers:
            if stop.is_set():
                return
            await trio.sleep(0.01)
    start_wall[0] = time.time() + 0.05
    tmp = control / "go.tmp"
    tmp.write_text(repr(start_wall[0]), encoding="utf-8")
    os.replace(tmp, control / "go")


async def _forward_stop(control: Path, stop: trio.Event) -> None:
    await stop.wait()
    (control / "stop").write_text("stop", encoding="utf-8")


async def _progress_loop(
    control: Path,
    workers: int,
    start_wall: list[float],
    on_progress: Callable[[LiveStats], None] | None,
    wires: list[dict[str, Any] | None],
) -> None:
    if on_progress is None:
        return
    last_finished, last_t = 0, time.monotonic()
    while True:
        await trio.sleep(0.5)
        docs = []
        for i in range(workers):
            try:
                docs.append(json.loads((control / f"progress-{i}.json").read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
        latency = Histogram()
        errors: dict[str, int] = {}
        for doc in docs:
            latency.add(Histogram.decode(doc["latency"]))
            for kind, n in doc["errors"].items():
                errors[kind] = errors.get(kind, 0) + n
        finished = sum(d["finished"] for d in docs)
        now = time.monotonic()
        rate = (finished - last_finished) / (now - last_t) if now > last_t else 0.0
        last_finished, last_t = finished, now
        ready = sum(1 for i in range(workers) if (control / f"ready-{i}").exists())
        on_progress(
            LiveStats(
                elapsed=max(0.0, time.time() - start_wall[0]) if (control / "go").exists() else 0.0,
                started=sum(d["started"] for d in docs),
                finished=finished,
                in_flight=sum(d["in_flight"] for d in docs),
                rate=rate,
                errors=errors,
                latency=latency,
                workers_ready=ready,
                workers=workers,
            )
        )
