"""When each call is meant to be sent: pure functions of the load model, no clock.

Open model: the rate is a piecewise-linear function ``r(t)``; the ``n``-th call of the
whole run (0-based, across every worker) is intended at the time ``t`` where the expected
count ``N(t) = integral of r from 0 to t`` equals ``n``. Worker ``w`` of ``W`` sends the
calls ``n = w, w + W, w + 2W, ...``, so the workers interleave exactly and their rates add
up to the schedule. Latency is measured from these intended times, so a server that
stalls cannot hide the queue it causes (no coordinated omission).

Closed model: virtual user ``u`` of ``U`` starts at ``u * ramp_up / U``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import attrs

from mcp_actors.stress._parse import RateStep

__all__ = ["RateSchedule", "user_start_times"]


@attrs.frozen(kw_only=True)
class _Piece:
    start_time: float
    seconds: float
    r0: float
    r1: float
    count_before: float  # expected calls before start_time

    def count(self, dt: float) -> float:
        """Expected calls in [start_time, start_time + dt]."""
        if math.isinf(self.seconds):
            return self.r0 * dt
        slope = (self.r1 - self.r0) / self.seconds
        return self.r0 * dt + slope * dt * dt / 2

    def time_of(self, k: float) -> float:
        """Offset in this piece where the expected count inside it reaches ``k``."""
        if math.isinf(self.seconds) or self.r1 == self.r0:
            return k / self.r0 if self.r0 > 0 else math.inf
        slope = (self.r1 - self.r0) / self.seconds
        # r0 dt + slope dt^2 / 2 = k  ->  dt = (-r0 + sqrt(r0^2 + 2 slope k)) / slope
        disc = self.r0 * self.r0 + 2 * slope * k
        return (-self.r0 + math.sqrt(max(disc, 0.0))) / slope


@attrs.frozen(kw_only=True)
class RateSchedule:
    """An open-model arrival schedule: ramp-up, then the steps of ``--rate``, cut at ``length``.

    Attributes:
        pieces: The schedule's linear pieces, in time order.
        length: Seconds after which no call is sent (``inf``: until the request budget).
    """

    pieces: tuple[_Piece, ...]
    length: float

    @classmethod
    def build(cls, steps: Sequence[RateStep], *, ramp_up: float = 0.0, duration: float | None = None) -> RateSchedule:
        """Ramp linearly from 0 to the first rate over ``ramp_up``, then follow ``steps``.

        Args:
            steps: From :func:`~mcp_actors.stress._parse.parse_rate`.
            ramp_up: Seconds of the initial ramp.
            duration: Seconds of the schedule after the ramp (``None``: the steps' own
                length; a last step shorter than that is held).
        """
        pieces: list[_Piece] = []
        t = 0.0
        done = 0.0

        def add(seconds: float, r0: float, r1: float) -> None:
            nonlocal t, done
            piece = _Piece(start_time=t, seconds=seconds, r0=r0, r1=r1, count_before=done)
            pieces.append(piece)
            if not math.isinf(seconds):
                done += piece.count(seconds)
            t += seconds

        if ramp_up > 0:
            add(ramp_up, 0.0, steps[0].start)
        for step in steps:
            add(step.seconds, step.start, step.end)
        natural = t
        if duration is None:
            length = natural
        else:
            length = ramp_up + duration
            if length > natural:  # hold the last rate for the rest of the duration
                add(math.inf, steps[-1].end, steps[-1].end)
        return cls(pieces=tuple(pieces), length=length)

    def expected_count(self, t: float) -> float:
        """Expected calls intended in ``[0, t)`` (the integral of the rate)."""
        t = min(t, self.length)
        for piece in reversed(self.pieces):
            if t >= piece.start_time:
                return piece.count_before + piece.count(t - piece.start_time)
        return 0.0

    def rate_at(self, t: float) -> float:
        """The intended rate at time ``t`` (calls/s)."""
        if t >= self.length:
            return 0.0
        for piece in reversed(self.pieces):
            if t >= piece.start_time:
                if math.isinf(piece.seconds) or piece.r0 == piece.r1:
                    return piece.r0
                return piece.r0 + (piece.r1 - piece.r0) * (t - piece.start_time) / piece.seconds
        return 0.0

    def time_of(self, n: int) -> float | None:
        """The intended time of call ``n`` (0-based), or ``None`` when it falls after the end."""
        for piece in self.pieces:
            end_count = math.inf if math.isinf(piece.seconds) else piece.count_before + piece.count(piece.seconds)
            if n < end_count or piece is self.pieces[-1]:
                t = piece.start_time + piece.time_of(n - piece.count_before)
                return t if t < self.length else None
        return None  # pragma: no cover - the last piece always answers

    def times(self, *, worker: int = 0, workers: int = 1, limit: int | None = None) -> Iterator[tuple[int, float]]:
        """``(n, intended time)`` of every call worker ``worker`` of ``workers`` sends, in order.

        Args:
            worker: This worker's index.
            workers: How many workers share the schedule.
            limit: The run's request budget (calls ``n >= limit`` are not sent).
        """
        n = worker
        while limit is None or n < limit:
            t = self.time_of(n)
            if t is None:
                return
            yield n, t
            n += workers


def user_start_times(users: int, ramp_up: float) -> list[float]:
    """Start offsets of ``users`` closed-model virtual users spread evenly over ``ramp_up``."""
    return [u * ramp_up / users for u in range(users)]
