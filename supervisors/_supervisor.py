"""OTP-style supervisors on trio.

A supervisor starts its children in order, watches them, restarts them according to
their restart type and its strategy, gives up when restarts exceed its intensity, and
stops its children in reverse start order — on exit, on cancellation, and when it gives
up. Semantics follow Erlang/OTP's ``supervisor`` module; the differences forced by trio
(tasks can be cancelled but not killed) are spelled out on :class:`Shutdown`.

How it is built:

* Every child runs in its own task in the supervisor's nursery, inside its own cancel
  scope. Once started, that scope is shielded, so only the supervisor stops a child:
  cancelling the supervisor from outside does not reach the children all at once; the
  supervisor stops them itself, one by one, in reverse start order, each bounded by its
  shutdown spec.
* A child that exits on its own reports the exit to a *manager* task, which decides (with
  the pure functions of :mod:`supervisors._policy`) whether to restart it and which
  siblings go with it, and schedules the restart after the backoff delay.
* Every operation that changes the set of running children (manager decisions and the
  dynamic ``start_child``/``start_children``/``terminate_child``/``restart_child``) holds
  one lock, so they never interleave.
"""

from __future__ import annotations

import enum
import logging
import math
import random
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import attrs
import trio

from ._errors import ChildStartFailed, RestartIntensityExceeded
from ._policy import (
    ChildKind,
    ChildSpec,
    Restart,
    Strategy,
    SupervisorSpec,
    add_restart,
    backoff_delay,
    should_restart,
)

__all__ = [
    "ChildInfo",
    "Supervisor",
    "SupervisorStatistics",
    "open_supervisor",
    "run_supervisor",
]

_log = logging.getLogger("supervisors")

# How many scheduler passes a brutally stopped child gets to finish unwinding. A task
# that unwinds without blocking needs a handful; one blocked in shielded cleanup never
# finishes, and is abandoned once these are used up (no clock time passes meanwhile).
_BRUTAL_PASSES = 100


class _State(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"  # waiting for its backoff delay
    STOPPED = "stopped"


@attrs.frozen(kw_only=True)
class ChildInfo:
    """A snapshot of one child, as returned by :meth:`Supervisor.which_children`.

    Attributes:
        id: The child's id.
        kind: Worker or supervisor.
        running: True while its task runs (started and not exited).
        value: The value it passed to ``started()``; ``None`` when not running.
        restarts: How many times the supervisor restarted it automatically.
        restarting: True while it waits for its backoff delay before a restart.
    """

    id: str
    kind: ChildKind
    running: bool
    value: Any
    restarts: int
    restarting: bool = False


@attrs.frozen(kw_only=True)
class SupervisorStatistics:
    """A snapshot of a supervisor, as returned by :meth:`Supervisor.statistics`.

    Attributes:
        name: The supervisor's name.
        strategy: Its restart strategy.
        children: Child specs it holds (running or not).
        running: Children whose task runs.
        restarting: Children waiting for their backoff delay.
        restarts_total: Restarts it decided since it started (each exit that led to a
            restart counts once, however many siblings the strategy restarted with it).
        restarts_in_period: Restarts within the current intensity window.
        max_restarts: Its intensity's ``max_restarts``.
        period: Its intensity's ``period`` in seconds.
        abandoned: Children that did not stop within their shutdown spec (see
            :class:`Shutdown`).
    """

    name: str
    strategy: Strategy
    children: int
    running: int
    restarting: int
    restarts_total: int
    restarts_in_period: int
    max_restarts: int
    period: float
    abandoned: int


@attrs.define(eq=False)
class _Run:
    """One incarnation of a child: its task's scope and completion."""

    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    stopping: bool = False  # set by the supervisor before it cancels the scope
    started: bool = False
    value: Any = None
    task: trio.lowlevel.Task | None = None  # the child's own task


@attrs.define(eq=False)
class _Child:
    spec: ChildSpec
    state: _State = _State.STOPPED
    run: _Run | None = None
    restarts: int = 0
    backoff_n: int = 0  # consecutive restarts, for the backoff delay
    running_since: float | None = None  # None: has not run since its last exit
    restart_at: float | None = None


@attrs.frozen
class _Exit:
    child: _Child
    run: _Run
    error: Exception | None  # None: it returned


class _ChildStatus:
    """The ``task_status`` a child gets: records ``started()`` and shields the child."""

    def __init__(
        self,
        status: trio.TaskStatus[Any],
        run: _Run,
        nursery: trio.Nursery,
        child_id: str,
    ) -> None:
        self._status = status
        self._run = run
        self._nursery = nursery
        self._child_id = child_id

    def started(self, value: Any = None) -> None:
        if self._run.started:
            raise RuntimeError(f"child {self._child_id!r} called started() twice")
        self._run.started = True
        self._run.value = value
        self._status.started(value)
        # Moved into the supervisor's nursery now (unless the starter was cancelled,
        # in which case the child must stay cancellable). From here on only the
        # supervisor may stop it, so that stops happen in order and within bounds.
        task = self._run.task
        if task is not None and task.parent_nursery is self._nursery:
            self._run.scope.shield = True


@attrs.define(eq=False)
class Supervisor:
    """A running supervisor; get one from :func:`open_supervisor` or :func:`run_supervisor`.

    All methods must be called from trio tasks of the same run. The dynamic operations
    are serialized with the supervisor's own restart handling, so they may wait while
    it restarts children.

    Attributes:
        spec: Strategy, intensity and backoff.
        name: Used in logs and errors.
    """

    spec: SupervisorSpec
    name: str
    _nursery: trio.Nursery = attrs.field(repr=False)
    _children: list[_Child] = attrs.field(init=False, factory=list, repr=False)  # start order
    _by_id: dict[str, _Child] = attrs.field(init=False, factory=dict, repr=False)
    _lock: trio.Lock = attrs.field(init=False, factory=trio.Lock, repr=False)
    _exits: deque[_Exit] = attrs.field(init=False, factory=deque, repr=False)
    _wakeup: trio.Event = attrs.field(init=False, factory=trio.Event, repr=False)
    _manager_scope: trio.CancelScope = attrs.field(init=False, factory=trio.CancelScope, repr=False)
    _restart_times: tuple[float, ...] = attrs.field(init=False, default=(), repr=False)
    _restarts_total: int = attrs.field(init=False, default=0, repr=False)
    _abandoned: int = attrs.field(init=False, default=0, repr=False)
    _last_error: Exception | None = attrs.field(init=False, default=None, repr=False)
    _closing: bool = attrs.field(init=False, default=False, repr=False)
    _random: random.Random = attrs.field(init=False, factory=random.Random, repr=False)

    # ------------------------------------------------------------------ public API

    async def start_child(self, spec: ChildSpec) -> Any:
        """Add a child and start it; it is then supervised like the initial children.

        Cancellation: cancelling the caller cancels the child's start; the child is
        then not added.

        Args:
            spec: The child; its id must be new to this supervisor.

        Returns:
            The value the child passed to ``task_status.started()`` (``None`` for a child
            ``started_at_spawn``, which is running once spawned).

        Raises:
            ValueError: A child with this id exists.
            ChildStartFailed: The start failed; the child is not added.
            RuntimeError: The supervisor is stopping or stopped.
        """
        (value,) = await self.start_children([spec])
        return value

    async def start_children(self, specs: Sequence[ChildSpec]) -> list[Any]:
        """Add children and start them in order, under one hold of the supervisor's lock.

        What :meth:`start_child` does for each spec in turn, with one wait for the lock for
        all of them: children ``started_at_spawn`` start with no yield between them, so
        that N of them begin in one scheduler step rather than N. A registry starting
        twenty connection slots so begins twenty server spawns at once; one after another,
        each behind its own wait, they spread over ~150 ms of the loop's other work, which
        cost the loop ~15 ms more CPU per 20-server start (docs/performance.md).

        Every id is checked before any child starts, so a bad id starts none of them.

        Cancellation: as for :meth:`start_child`, the child being started is not added;
        the children started before it stay, and those after it are not added.

        Args:
            specs: The children; their ids must be distinct and new to this supervisor.

        Returns:
            Each child's value, as :meth:`start_child` returns it, in the order of ``specs``.

        Raises:
            ValueError: An id exists already or appears twice in ``specs``; nothing started.
            ChildStartFailed: A child's start failed: it is not added; the children before
                it stay started and supervised, the ones after it are not added.
            RuntimeError: The supervisor is stopping or stopped.
        """
        specs = list(specs)
        for spec in specs:
            if not isinstance(spec, ChildSpec):
                raise TypeError(f"spec must be a ChildSpec, not {type(spec).__name__}")
        self._check_open()
        async with self._lock:
            self._check_open()
            seen: set[str] = set()
            for spec in specs:
                if self._find(spec.id) is not None:
                    raise ValueError(f"child id {spec.id!r} already exists in supervisor {self.name!r}")
                if spec.id in seen:
                    raise ValueError(f"child id {spec.id!r} is given twice to supervisor {self.name!r}")
                seen.add(spec.id)
            values: list[Any] = []
            for spec in specs:
                child = _Child(spec)
                self._add(child)
                try:
                    values.append(await self._start(child))
                except BaseException:
                    self._remove(child)
                    raise
            return values

    async def terminate_child(self, child_id: str) -> None:
        """Stop a child by its shutdown spec and keep it stopped.

        Its spec is kept, so :meth:`restart_child` can start it again — except for a
        temporary child, which is forgotten (as in OTP). A pending automatic restart is
        cancelled. Terminating a stopped child does nothing.

        Args:
            child_id: The child's id.

        Raises:
            KeyError: No child has this id.
            RuntimeError: The supervisor is stopping or stopped.
        """
        self._check_open()
        async with self._lock:
            self._check_open()
            child = self._get(child_id)
            if child.state is _State.RUNNING:
                await self._stop(child)
            child.state = _State.STOPPED
            child.restart_at = None
            if child.spec.restart is Restart.TEMPORARY:
                self._remove(child)

    async def restart_child(self, child_id: str) -> Any:
        """Start a terminated child again (with its backoff count reset).

        Args:
            child_id: The child's id.

        Returns:
            The value the child passed to ``task_status.started()``.

        Raises:
            KeyError: No child has this id.
            RuntimeError: The child is running or waiting to restart, or the supervisor
                is stopping or stopped.
            ChildStartFailed: The start failed; the child stays stopped.
        """
        self._check_open()
        async with self._lock:
            self._check_open()
            child = self._get(child_id)
            self._settle(child)
            if child.state is not _State.STOPPED:
                raise RuntimeError(
                    f"child {child_id!r} of supervisor {self.name!r} is {child.state.value}; terminate it first"
                )
            child.backoff_n = 0
            return await self._start(child)

    def delete_child(self, child_id: str) -> None:
        """Forget a stopped child's spec.

        Args:
            child_id: The child's id.

        Raises:
            KeyError: No child has this id.
            RuntimeError: The child is not stopped; terminate it first.
        """
        child = self._get(child_id)
        self._settle(child)
        if child.state is not _State.STOPPED:
            raise RuntimeError(
                f"child {child_id!r} of supervisor {self.name!r} is {child.state.value}; "
                "terminate it before deleting it"
            )
        self._remove(child)

    def which_children(self) -> list[ChildInfo]:
        """Return a snapshot of every child, in start order."""
        return [self._info(child) for child in self._children]

    def child_value(self, child_id: str) -> Any:
        """Return the value a running child passed to ``started()``.

        A restart replaces it, so look it up again after a restart rather than keeping it.

        Args:
            child_id: The child's id.

        Raises:
            KeyError: No child has this id.
            RuntimeError: The child is not running.
        """
        child = self._get(child_id)
        if child.state is not _State.RUNNING or child.run is None:
            raise RuntimeError(f"child {child_id!r} of supervisor {self.name!r} is {child.state.value}, not running")
        return child.run.value

    def statistics(self) -> SupervisorStatistics:
        """Return a frozen snapshot of the supervisor's children and restarts."""
        intensity = self.spec.intensity
        threshold = trio.current_time() - intensity.period
        return SupervisorStatistics(
            name=self.name,
            strategy=self.spec.strategy,
            children=len(self._children),
            running=sum(self._is_running(child) for child in self._children),
            restarting=sum(child.state is _State.RESTARTING for child in self._children),
            restarts_total=self._restarts_total,
            restarts_in_period=sum(when >= threshold for when in self._restart_times),
            max_restarts=intensity.max_restarts,
            period=intensity.period,
            abandoned=self._abandoned,
        )

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closing:
            raise RuntimeError(f"supervisor {self.name!r} is stopping or stopped")

    def _find(self, child_id: str) -> _Child | None:
        return self._by_id.get(child_id)

    def _add(self, child: _Child) -> None:
        self._children.append(child)
        self._by_id[child.spec.id] = child

    def _remove(self, child: _Child) -> None:
        self._children.remove(child)
        del self._by_id[child.spec.id]

    def _get(self, child_id: str) -> _Child:
        child = self._find(child_id)
        if child is None:
            raise KeyError(f"no child {child_id!r} in supervisor {self.name!r}")
        return child

    @staticmethod
    def _settle(child: _Child) -> None:
        """Mark a child whose task has ended as stopped before the manager saw the exit.

        The pending exit report then no longer matches the child and is ignored, so an
        explicit operation on a child that just exited wins over an automatic restart.
        """
        if child.state is _State.RUNNING and child.run is not None and child.run.done.is_set():
            child.run = None
            child.state = _State.STOPPED
            child.running_since = None

    @staticmethod
    def _is_running(child: _Child) -> bool:
        return child.state is _State.RUNNING and child.run is not None and not child.run.done.is_set()

    def _info(self, child: _Child) -> ChildInfo:
        running = self._is_running(child)
        return ChildInfo(
            id=child.spec.id,
            kind=child.spec.kind,
            running=running,
            value=child.run.value if running and child.run is not None else None,
            restarts=child.restarts,
            restarting=child.state is _State.RESTARTING,
        )

    async def _start(self, child: _Child) -> Any:
        """Start ``child`` (the caller holds the lock or is the initial start)."""
        spec = child.spec
        run = _Run()
        child.run = run
        child.state = _State.STARTING
        child.restart_at = None
        if spec.started_at_spawn:
            # Nothing to wait for: the task starts in the supervisor's nursery, shielded from
            # the first step (only the supervisor stops it), and is running from here on.
            run.scope.shield = True
            self._nursery.start_soon(self._run_child, child, run)
            child.state = _State.RUNNING
            child.running_since = trio.current_time()
            return None
        try:
            with trio.move_on_after(spec.start_timeout) as deadline:
                value = await self._nursery.start(self._run_child, child, run)
        except Exception as exc:
            self._start_failed(child, run)
            raise ChildStartFailed(
                f"child {spec.id!r} of supervisor {self.name!r} failed to start: {type(exc).__name__}: {exc}",
                supervisor=self.name,
                child_id=spec.id,
            ) from exc
        except BaseException:
            self._start_failed(child, run)
            raise
        if deadline.cancelled_caught:
            self._start_failed(child, run)
            raise ChildStartFailed(
                f"child {spec.id!r} of supervisor {self.name!r} did not call "
                f"task_status.started() within its start_timeout of {spec.start_timeout:g} s; "
                "it was cancelled — make it start faster or raise start_timeout",
                supervisor=self.name,
                child_id=spec.id,
            ) from TimeoutError(f"no started() within {spec.start_timeout:g} s")
        child.state = _State.RUNNING
        child.running_since = trio.current_time()
        return value

    def _start_failed(self, child: _Child, run: _Run) -> None:
        if child.run is run:
            child.run = None
            child.state = _State.STOPPED
        child.running_since = None

    async def _run_child(
        self, child: _Child, run: _Run, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The task of one incarnation of a child."""
        run.task = trio.lowlevel.current_task()
        status = _ChildStatus(task_status, run, self._nursery, child.spec.id)
        at_spawn = child.spec.started_at_spawn
        error: Exception | None = None
        try:
            try:
                with run.scope:
                    await child.spec.start(task_status=status)
            except Exception as exc:
                if not run.started and not at_spawn:
                    raise  # a failed start: nursery.start() re-raises it to the starter
                error = exc
            if not run.started and not at_spawn:
                if run.scope.cancelled_caught:
                    raise RuntimeError("stopped while starting: the supervisor is stopping")
                raise RuntimeError("returned before calling task_status.started()")
            if run.stopping:
                if error is not None:
                    _log.warning(
                        "child %r of supervisor %r raised while stopping: %s: %s",
                        child.spec.id,
                        self.name,
                        type(error).__name__,
                        error,
                    )
            else:
                self._exits.append(_Exit(child, run, error))
                self._wakeup.set()
        finally:
            run.done.set()
            if run.stopping and child.run is run:
                # Stopped while the supervisor was interrupted (or by itself).
                child.run = None
                child.state = _State.STOPPED

    async def _start_initial(self, specs: list[ChildSpec]) -> None:
        for spec in specs:
            child = _Child(spec)
            self._add(child)
            await self._start(child)

    async def _manage(self) -> None:
        """Handle exits and due restarts until cancelled (or the intensity is exceeded)."""
        with self._manager_scope:
            while True:
                deadline = min(
                    (
                        child.restart_at
                        for child in self._children
                        if child.state is _State.RESTARTING and child.restart_at is not None
                    ),
                    default=math.inf,
                )
                with trio.move_on_at(deadline):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                async with self._lock:
                    await self._process()

    async def _process(self) -> None:
        while not self._closing:
            if self._exits:
                await self._on_exit(self._exits.popleft())
                continue
            now = trio.current_time()
            due = next(
                (
                    child
                    for child in self._children
                    if child.state is _State.RESTARTING and child.restart_at is not None and child.restart_at <= now
                ),
                None,
            )
            if due is None:
                return
            try:
                await self._start(due)
            except ChildStartFailed as exc:
                _log.warning("supervisor %r: restart of child %r failed", self.name, due.spec.id)
                await self._on_failure(due, exc)
            else:
                due.restarts += 1
                _log.info("supervisor %r restarted child %r", self.name, due.spec.id)

    async def _on_exit(self, exit_: _Exit) -> None:
        child = exit_.child
        if child.run is not exit_.run or child.state is not _State.RUNNING:
            return  # stale: it was stopped, restarted or deleted meanwhile
        child.run = None
        child.state = _State.STOPPED
        if exit_.error is None:
            _log.info("child %r of supervisor %r returned", child.spec.id, self.name)
        else:
            _log.warning(
                "child %r of supervisor %r crashed: %s: %s",
                child.spec.id,
                self.name,
                type(exit_.error).__name__,
                exit_.error,
            )
        await self._on_failure(child, exit_.error)

    async def _on_failure(self, child: _Child, error: Exception | None) -> None:
        """Decide what follows the exit (or failed restart) of ``child``."""
        now = trio.current_time()
        if error is not None:
            self._last_error = error
        if not should_restart(child.spec.restart, abnormal=error is not None):
            child.running_since = None
            if child.spec.restart is Restart.TEMPORARY:
                self._remove(child)
            return
        intensity = self.spec.intensity
        self._restart_times = add_restart(self._restart_times, now, intensity.period)
        self._restarts_total += 1
        if len(self._restart_times) > intensity.max_restarts:
            _log.error(
                "supervisor %r gives up: %d restarts within %g s",
                self.name,
                len(self._restart_times),
                intensity.period,
            )
            raise RestartIntensityExceeded(
                supervisor=self.name,
                child_id=child.spec.id,
                restarts=len(self._restart_times),
                max_restarts=intensity.max_restarts,
                period=intensity.period,
            ) from (error if error is not None else self._last_error)

        backoff = self.spec.backoff
        if child.running_since is not None and now - child.running_since >= backoff.reset_after:
            child.backoff_n = 0
        child.running_since = None
        delay = backoff_delay(backoff, child.backoff_n, self._random.random())
        child.backoff_n += 1

        group = self._restart_group(child)
        restart_at = now + delay
        for sibling in reversed(group):
            if sibling is child or sibling.state is _State.STOPPED:
                continue  # a terminated sibling stays terminated
            if sibling.state is _State.RUNNING:
                await self._stop(sibling)
            if sibling.spec.restart is Restart.TEMPORARY:
                self._remove(sibling)
            else:
                sibling.state = _State.RESTARTING
                sibling.restart_at = restart_at
        child.state = _State.RESTARTING
        child.restart_at = restart_at

    def _restart_group(self, child: _Child) -> list[_Child]:
        match self.spec.strategy:
            case Strategy.ONE_FOR_ONE:
                return [child]
            case Strategy.ONE_FOR_ALL:
                return list(self._children)
            case Strategy.REST_FOR_ONE:
                return self._children[self._children.index(child) :]
        raise TypeError(f"unknown strategy {self.spec.strategy!r}")  # pragma: no cover

    async def _stop(self, child: _Child) -> None:
        """Cancel a child's task and wait for it as its shutdown spec allows."""
        run = child.run
        if run is None or run.done.is_set():
            child.run = None
            child.state = _State.STOPPED
            return
        run.stopping = True
        run.scope.cancel()
        timeout = child.spec.shutdown.timeout
        if timeout is None:
            for _ in range(_BRUTAL_PASSES):
                if run.done.is_set():
                    break
                await trio.lowlevel.checkpoint()
        else:
            with trio.move_on_after(timeout):
                await run.done.wait()
        if not run.done.is_set():
            self._abandoned += 1
            _log.warning(
                "child %r of supervisor %r did not stop within its shutdown spec %r; "
                "abandoned (the supervisor's exit will still wait for it)",
                child.spec.id,
                self.name,
                child.spec.shutdown,
            )
        if child.run is run:
            child.run = None
            child.state = _State.STOPPED

    async def _close(self) -> None:
        """Stop everything in reverse start order; call shielded, once."""
        self._closing = True
        self._manager_scope.cancel()
        for child in self._children:
            if child.state is _State.STARTING and child.run is not None:
                child.run.stopping = True
                child.run.scope.cancel()
        async with self._lock:
            for child in reversed(self._children):
                if child.run is not None and not child.run.done.is_set():
                    await self._stop(child)
                child.state = _State.STOPPED
                child.run = None
                child.restart_at = None


def raise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise the one meaningful exception of a nursery's group, keeping its context.

    A context manager's own nursery is an implementation detail: callers should see the
    body's own exception (or :class:`RestartIntensityExceeded`), not a group around it.
    ``Cancelled`` siblings are not meaningful; with more than one meaningful exception
    the group itself is raised.
    """
    meaningful = [exc for exc in group.exceptions if not isinstance(exc, trio.Cancelled)]
    if len(meaningful) > 1:
        raise group
    single = meaningful[0] if meaningful else group.exceptions[0]
    context = single.__context__
    try:
        raise single
    finally:
        single.__context__ = context
        del single, context


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    return name


def _check_children(children: Iterable[ChildSpec]) -> list[ChildSpec]:
    specs = list(children)
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"children must be ChildSpecs, got {type(spec).__name__}")
        if spec.id in seen:
            raise ValueError(f"child ids must be unique, {spec.id!r} appears twice")
        seen.add(spec.id)
    return specs


@asynccontextmanager
async def open_supervisor(
    spec: SupervisorSpec,
    children: Iterable[ChildSpec] = (),
    *,
    name: str = "",
) -> AsyncIterator[Supervisor]:
    """Run a supervisor for the duration of an ``async with`` block.

    The children are started in order before the body runs; if one fails to start, the
    ones already started are stopped in reverse order and :class:`ChildStartFailed` is
    raised. Leaving the body — normally, by an exception, or by cancellation — stops
    every child in reverse start order, each bounded by its shutdown spec. If the
    restart intensity is exceeded, all children are stopped, the body is cancelled and
    :class:`RestartIntensityExceeded` is raised from the ``async with``. An exception
    from the body propagates as is (not wrapped in an exception group).

    Args:
        spec: Strategy, intensity and backoff.
        children: The initial children, started in this order.
        name: The supervisor's name for logs and errors.

    Yields:
        The :class:`Supervisor`.

    Raises:
        ChildStartFailed: An initial child failed to start.
        RestartIntensityExceeded: The supervisor gave up.
        ValueError: Two children share an id.
    """
    if not isinstance(spec, SupervisorSpec):
        raise TypeError(f"spec must be a SupervisorSpec, not {type(spec).__name__}")
    name = _check_name(name)
    specs = _check_children(children)
    try:
        async with trio.open_nursery() as nursery:
            supervisor = Supervisor(spec, name, nursery)
            try:
                await supervisor._start_initial(specs)
                nursery.start_soon(supervisor._manage, name=f"supervisor {name!r} manager")
                yield supervisor
            finally:
                with trio.CancelScope(shield=True):
                    await supervisor._close()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_single(group)


async def run_supervisor(
    spec: SupervisorSpec,
    children: Iterable[ChildSpec] = (),
    *,
    name: str = "",
    task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a supervisor as a task, e.g. as the child of another supervisor.

    Use it as a child's start function
    (``ChildSpec(id=..., start=functools.partial(run_supervisor, spec, children),
    kind=ChildKind.SUPERVISOR)``) or with ``nursery.start``. It calls
    ``task_status.started(supervisor)`` once its children are up, then runs until
    cancelled, which stops its children in reverse order.

    Args:
        spec: Strategy, intensity and backoff.
        children: The initial children, started in this order.
        name: The supervisor's name for logs and errors.
        task_status: Receives the :class:`Supervisor` once its children are up.

    Raises:
        ChildStartFailed: An initial child failed to start.
        RestartIntensityExceeded: The supervisor gave up (its children are stopped).
    """
    async with open_supervisor(spec, children, name=name) as supervisor:
        task_status.started(supervisor)
        await trio.sleep_forever()
