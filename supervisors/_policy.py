"""Specifications and the pure functions behind every supervision decision.

Nothing here awaits or reads a clock: the restart decision, the restart-intensity
accounting (Erlang's ``add_restart``) and the backoff delay (Akka's formula) are pure
functions of their arguments, so they can be property-tested against naive models and
the supervisor only wires them to trio.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import attrs

__all__ = [
    "Backoff",
    "ChildKind",
    "ChildSpec",
    "Intensity",
    "Restart",
    "Shutdown",
    "Strategy",
    "SupervisorSpec",
    "add_restart",
    "backoff_delay",
    "should_restart",
]

#: What a child's ``start`` looks like: called as ``await start(task_status=status)``.
StartFunction = Callable[..., Awaitable[Any]]


class Restart(enum.Enum):
    """When a child that exited on its own is started again (OTP's restart type)."""

    #: Always restarted, whether it returned or raised.
    PERMANENT = "permanent"
    #: Restarted only after an abnormal exit (it raised an ``Exception``).
    TRANSIENT = "transient"
    #: Never restarted; forgotten by the supervisor once it has exited or been stopped.
    TEMPORARY = "temporary"


class Strategy(enum.Enum):
    """Which children a supervisor restarts when one of them must be restarted."""

    #: Only the child that exited.
    ONE_FOR_ONE = "one_for_one"
    #: Every child: the others are stopped (reverse order) and all start again in order.
    ONE_FOR_ALL = "one_for_all"
    #: The child that exited and every child started after it.
    REST_FOR_ONE = "rest_for_one"


class ChildKind(enum.Enum):
    """Whether a child is a worker or a supervisor itself (reported, not acted upon)."""

    WORKER = "worker"
    SUPERVISOR = "supervisor"


def _finite(name: str, value: object, *, minimum: float, strict: bool) -> None:
    """Check that ``value`` is a finite real number ``>= minimum`` (``>`` if ``strict``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if strict and value <= minimum:
        raise ValueError(f"{name} must be > {minimum:g}, got {value!r}")
    if not strict and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {value!r}")


def _non_negative(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _finite(attribute.name, value, minimum=0.0, strict=False)


def _positive(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _finite(attribute.name, value, minimum=0.0, strict=True)


@attrs.frozen(kw_only=True, repr=False)
class Shutdown:
    """How long a child gets to stop once its supervisor cancels it.

    Trio cannot kill a task, only cancel it, so both kinds start by cancelling the
    child's cancel scope; they differ in how long the supervisor waits before it moves on:

    * ``Shutdown.after(seconds)`` waits up to ``seconds`` for the child's task to end,
      which is the time shielded cleanup (closing a subprocess, flushing a file) gets.
    * ``Shutdown.BRUTAL`` gives no clock time: the supervisor waits only while the child
      keeps unwinding without blocking (a bounded number of scheduler passes).

    A child still running after that is *abandoned*: logged, counted in
    ``SupervisorStatistics.abandoned``, marked stopped, and the supervisor goes on
    stopping (or restarting) the others. Its task stays in the supervisor's nursery, so
    the supervisor's own exit still waits for it — a child that shields itself from
    cancellation forever hangs its supervisor's exit, as it would any trio nursery.

    Attributes:
        timeout: Seconds to wait after cancelling, or ``None`` for brutal.
    """

    timeout: float | None = attrs.field(
        validator=attrs.validators.optional(_positive),
    )

    BRUTAL: ClassVar[Shutdown]

    @classmethod
    def after(cls, seconds: float) -> Shutdown:
        """Wait up to ``seconds`` (> 0) for a cancelled child to finish its cleanup.

        Args:
            seconds: The grace period; use :attr:`Shutdown.BRUTAL` for none.

        Returns:
            The shutdown spec.

        Raises:
            ValueError: ``seconds`` is not finite or not > 0.
            TypeError: ``seconds`` is not a number.
        """
        return cls(timeout=seconds)

    @property
    def is_brutal(self) -> bool:
        """True for :attr:`Shutdown.BRUTAL`."""
        return self.timeout is None

    def __repr__(self) -> str:
        if self.timeout is None:
            return "Shutdown.BRUTAL"
        return f"Shutdown.after({self.timeout!r})"


Shutdown.BRUTAL = Shutdown(timeout=None)


def _max_restarts(_: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_restarts must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"max_restarts must be >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class Intensity:
    """Restart intensity: at most ``max_restarts`` restarts within ``period`` seconds.

    Counted per supervisor, over all its children (as in OTP): the restart that would
    make it ``max_restarts + 1`` within the sliding window makes the supervisor give up
    with :class:`RestartIntensityExceeded`. OTP's default is 1 in 5 s; ours is 3 in 5 s,
    which tolerates a short burst (a server crashing during start-up) without masking a
    crash loop.

    Attributes:
        max_restarts: Restarts allowed within the window (0 = give up on the first).
        period: The window in seconds (> 0).
    """

    max_restarts: int = attrs.field(default=3, validator=_max_restarts)
    period: float = attrs.field(default=5.0, validator=_positive)


@attrs.frozen(kw_only=True)
class Backoff:
    """Delay before restarting a child, growing while it keeps crashing (Akka's formula).

    The n-th consecutive restart of a child waits
    ``min(max_delay, min_delay * 2**n) * (1 + random * jitter)`` seconds (n from 0,
    ``random`` uniform in [0, 1)), so a crash-looping child backs off exponentially and
    many children restarting together spread out. ``n`` is reset once the child has run
    ``reset_after`` seconds without exiting. ``jitter=0`` makes delays deterministic.

    Attributes:
        min_delay: Delay of the first restart, seconds (>= 0).
        max_delay: Cap of the exponential part, seconds (>= min_delay).
        jitter: Random extra fraction, >= 0 (0.2 = up to 20 % longer).
        reset_after: Seconds of uninterrupted running that reset n (> 0).
    """

    min_delay: float = attrs.field(default=0.5, validator=_non_negative)
    max_delay: float = attrs.field(default=30.0, validator=_non_negative)
    jitter: float = attrs.field(default=0.2, validator=_non_negative)
    reset_after: float = attrs.field(default=60.0, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if self.max_delay < self.min_delay:
            raise ValueError(
                f"max_delay must be >= min_delay, got max_delay={self.max_delay!r} and min_delay={self.min_delay!r}"
            )


@attrs.frozen(kw_only=True)
class SupervisorSpec:
    """How a supervisor treats its children: strategy, intensity and backoff.

    Attributes:
        strategy: Which children restart together.
        intensity: When the supervisor gives up.
        backoff: How long to wait before each restart.
    """

    strategy: Strategy = attrs.field(default=Strategy.ONE_FOR_ONE, validator=attrs.validators.instance_of(Strategy))
    intensity: Intensity = attrs.field(factory=Intensity, validator=attrs.validators.instance_of(Intensity))
    backoff: Backoff = attrs.field(factory=Backoff, validator=attrs.validators.instance_of(Backoff))


def _child_id(_: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"id must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError("id must not be empty")


def _callable(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise TypeError(f"start must be callable, got {type(value).__name__}")


@attrs.frozen(kw_only=True)
class ChildSpec:
    """One child of a supervisor: how to start it, when to restart it, how to stop it.

    ``start`` is called as ``await start(task_status=status)`` (bind other arguments
    with :func:`functools.partial`) and must call ``status.started(value)`` exactly once
    when it is ready; ``value`` (often a handle such as a :class:`Mailbox`) is what
    :meth:`Supervisor.start_child` returns and :meth:`Supervisor.child_value` reports.
    Returning or raising before ``started()`` is a failed start. After ``started()``,
    returning is a normal exit and raising an ``Exception`` an abnormal one.

    A child with ``started_at_spawn`` has no start to wait for: the supervisor counts it
    as running as soon as it spawns its task, and ``start_child`` returns ``None`` without
    a scheduling round trip (trio's ``nursery.start`` costs a nursery, a cancel scope and
    two task switches per child; a registry starting a slot per server pays that per
    server). Its ``start`` may still call ``started(value)`` to report a value to
    :meth:`Supervisor.child_value` (``None`` there and in ``which_children`` until its task
    has run that far); returning or raising is then an exit like any other, restarted by
    its restart type, never a failed start.

    Attributes:
        id: Unique among the supervisor's children.
        start: The async function that runs the child.
        restart: When it is restarted after exiting on its own.
        shutdown: How long it gets to stop once cancelled.
        kind: Worker or supervisor (informational).
        start_timeout: Seconds ``start`` may take to call ``started()`` (> 0); a start
            that is slower is cancelled and fails with :class:`ChildStartFailed`. Not
            used with ``started_at_spawn``.
        started_at_spawn: Count the child as started when its task is spawned (see above).
    """

    id: str = attrs.field(validator=_child_id)
    start: StartFunction = attrs.field(validator=_callable)
    restart: Restart = attrs.field(default=Restart.PERMANENT, validator=attrs.validators.instance_of(Restart))
    shutdown: Shutdown = attrs.field(
        factory=lambda: Shutdown.after(5.0), validator=attrs.validators.instance_of(Shutdown)
    )
    kind: ChildKind = attrs.field(default=ChildKind.WORKER, validator=attrs.validators.instance_of(ChildKind))
    start_timeout: float = attrs.field(default=30.0, validator=_positive)
    started_at_spawn: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))


def should_restart(restart: Restart, *, abnormal: bool) -> bool:
    """Decide whether a child that exited on its own is restarted (OTP semantics).

    Args:
        restart: The child's restart type.
        abnormal: True if it raised an ``Exception``, False if it returned.

    Returns:
        True for a permanent child, for a transient child that raised, else False.
    """
    match restart:
        case Restart.PERMANENT:
            return True
        case Restart.TRANSIENT:
            return abnormal
        case Restart.TEMPORARY:
            return False
    raise TypeError(f"restart must be a Restart, got {restart!r}")  # pragma: no cover


def add_restart(restarts: Sequence[float], now: float, period: float) -> tuple[float, ...]:
    """Record a restart at ``now`` and forget those older than ``period`` (OTP).

    This is Erlang's ``supervisor:add_restart/3``::

        add_restart(Restarts0, Now, Period) ->
            Threshold = Now - Period,
            Restarts1 = lists:takewhile(fun (R) -> R >= Threshold end, Restarts0),
            [Now | Restarts1].

    The supervisor gives up when the result holds more than ``max_restarts`` entries.

    Args:
        restarts: Earlier restart times, newest first (as returned by this function).
        now: The time of this restart, not earlier than any in ``restarts``.
        period: The intensity window in seconds.

    Returns:
        The restart times within the window ending at ``now``, newest first, starting
        with ``now``.
    """
    threshold = now - period
    kept: list[float] = [now]
    for when in restarts:
        if when < threshold:
            break
        kept.append(when)
    return tuple(kept)


def backoff_delay(backoff: Backoff, n: int, rand: float) -> float:
    """Return the delay before the ``n``-th consecutive restart of a child (Akka).

    ``min(max_delay, min_delay * 2**n) * (1 + rand * jitter)``, computed without
    overflow for any ``n``.

    Args:
        backoff: The supervisor's backoff parameters.
        n: How many times in a row the child was restarted before (0 for the first).
        rand: A number in [0, 1], normally ``random.random()``; 0 gives the base delay.

    Returns:
        The delay in seconds.

    Raises:
        ValueError: ``n`` < 0 or ``rand`` outside [0, 1].
        TypeError: ``n`` is not an int.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, not {type(n).__name__}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    if not 0.0 <= rand <= 1.0:
        raise ValueError(f"rand must be in [0, 1], got {rand!r}")
    if backoff.min_delay == 0.0:
        grown = 0.0
    else:
        try:
            grown = math.ldexp(backoff.min_delay, n)  # exact min_delay * 2**n
        except OverflowError:  # past the float range: the cap applies anyway
            grown = math.inf
    return min(backoff.max_delay, grown) * (1.0 + rand * backoff.jitter)
