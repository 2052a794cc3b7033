"""Counting a run: HDR histograms and per-second counts that merge exactly.

One :class:`Tally` per worker records every call; the parent adds the workers' tallies,
and ``mcp-actors stress merge`` adds the tallies of runs made on several machines. Adding
HDR histograms is exact (the counts per bucket add up), so the merged percentiles are the
percentiles of the union of all calls, never an average of percentiles.

Latencies are recorded in microseconds, from 1 us to one hour, with three significant
digits (an error of at most 0.1 %).
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

__all__ = ["PERCENTILES", "Histogram", "SecondTally", "Tally"]

PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99)
_LOWEST_US = 1
_HIGHEST_US = 3_600_000_000
_DIGITS = 3
LATE = 0.010


@attrs.define(eq=False)
class Histogram:
    """A latency histogram in microseconds (an ``HdrHistogram`` with the run's fixed range)."""

    _h: Any = attrs.field(factory=lambda: HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS))

    def record(self, seconds: float) -> None:
        """Record one latency (clamped to the histogram's range)."""
        self._h.record_value(min(max(round(seconds * 1e6), _LOWEST_US), _HIGHEST_US))

    @property
    def count(self) -> int:
        """How many values were recorded."""
        return int(self._h.get_total_count())

    def add(self, other: Histogram) -> None:
        """Add every value of ``other`` (exact)."""
        if other.count:
            self._h.add(other._h)

    def percentile(self, p: float) -> float:
        """The value at percentile ``p`` (0..100), in seconds; 0 when empty."""
        return float(self._h.get_value_at_percentile(p)) / 1e6 if self.count else 0.0

    @property
    def max(self) -> float:
        """The largest value, in seconds (its bucket's highest equivalent value)."""
        return float(self._h.get_max_value()) / 1e6 if self.count else 0.0

    @property
    def min(self) -> float:
        """The smallest value, in seconds."""
        return float(self._h.get_min_value()) / 1e6 if self.count else 0.0

    @property
    def mean(self) -> float:
        """The mean, in seconds."""
        return float(self._h.get_mean_value()) / 1e6 if self.count else 0.0

    def summary_ms(self) -> dict[str, float]:
        """``{"p50": ms, ..., "p99.99": ms, "max": ms, "min": ms, "mean": ms}``."""
        out = {f"p{p:g}": round(self.percentile(p) * 1e3, 3) for p in PERCENTILES}
        out.update(max=round(self.max * 1e3, 3), min=round(self.min * 1e3, 3), mean=round(self.mean * 1e3, 3))
        return out

    def spectrum_ms(self) -> list[tuple[float, float]]:
        """``(percentile, ms)`` points from p0 to p99.999 and max, for the percentile plot."""
        if not self.count:
            return []
        points = []
        for nines in range(0, 6):
            for frac in (0.0, 0.25, 0.5, 0.75):
                p = 100.0 * (1 - 10.0 ** -(nines + frac))
                if p > 99.9999:
                    break
                points.append((round(p, 5), self.percentile(p) * 1e3))
        points.append((100.0, self.max * 1e3))
        return points

    def encode(self) -> str:
        """The compressed HdrHistogram encoding (base64 text; portable across HdrHistogram libraries)."""
        data = self._h.encode()
        return data.decode("ascii") if isinstance(data, bytes) else str(data)

    @classmethod
    def decode(cls, text: str) -> Histogram:
        """The inverse of :meth:`encode`.

        Raises:
            ValueError: Not an encoded HdrHistogram.
        """
        try:
            base64.b64decode(text, validate=True)
            return cls(HdrHistogram.decode(text))
        except Exception as exc:
            raise ValueError(f"not an encoded HdrHistogram: {exc}") from None


@attrs.define(eq=False)
class SecondTally:
    """The calls whose intended send time falls in one second of the run."""

    sent: int = 0
    ok: int = 0
    errors: int = 0
    latency: Histogram = attrs.Factory(Histogram)

    def add(self, other: SecondTally) -> None:
        """Add ``other``'s counts and latencies."""
        self.sent += other.sent
        self.ok += other.ok
        self.errors += other.errors
        self.latency.add(other.latency)


@attrs.define(eq=False)
class OpTally:
    """One operation's calls."""

    requests: int = 0
    errors: Counter[str] = attrs.Factory(Counter)
    latency: Histogram = attrs.Factory(Histogram)

    def add(self, other: OpTally) -> None:
        """Add ``other``'s calls."""
        self.requests += other.requests
        self.errors.update(other.errors)
        self.latency.add(other.latency)


@attrs.define(eq=False)
class Tally:
    """Everything counted in a run (or one worker's share of it), mergeable exactly.

    ``latency`` is measured from the intended send time (open model) and includes any
    queueing; ``service`` from the moment the call was actually handed to the library.

    Attributes:
        latency: Every measured call's latency (successes and failures).
        service: Every measured call's service time.
        ops: Per operation name.
        errors: Failures by kind.
        seconds: Per second of the run (by intended send time), including warmup.
        warmup_calls: Calls made during the warmup (not in the histograms).
        over_timeout: Calls whose service time exceeded their timeout by more than the slack.
        outages: Chaos events with what they caused (see ``_worker``).
        measured_seconds: The measured part's length.
        first_sent: The first measured call's actual send time (seconds since the start).
        last_sent: The last measured call's actual send time.
        max_send_lag: The longest a measured call was sent after its intended time.
        late_sends: Measured calls sent more than :data:`LATE` after their intended time:
            the load generator (or ``max_in_flight``) could not keep the schedule.
    """

    latency: Histogram = attrs.Factory(Histogram)
    service: Histogram = attrs.Factory(Histogram)
    ops: dict[str, OpTally] = attrs.Factory(dict)
    errors: Counter[str] = attrs.Factory(Counter)
    seconds: dict[int, SecondTally] = attrs.Factory(dict)
    warmup_calls: int = 0
    over_timeout: int = 0
    outages: list[dict[str, Any]] = attrs.Factory(list)
    measured_seconds: float = 0.0
    first_sent: float | None = None
    last_sent: float | None = None
    max_send_lag: float = 0.0
    late_sends: int = 0

    @property
    def send_rate(self) -> float:
        """The achieved rate of actual sends (calls/s) over the measured calls, 0 if fewer than two."""
        if self.first_sent is None or self.last_sent is None or self.last_sent <= self.first_sent:
            return 0.0
        return (self.requests - 1) / (self.last_sent - self.first_sent)

    @property
    def requests(self) -> int:
        """Measured calls (completed, successful or not)."""
        return self.latency.count

    @property
    def error_count(self) -> int:
        """Measured calls that failed."""
        return sum(self.errors.values())

    def second(self, index: int) -> SecondTally:
        """The tally of second ``index`` (created on first use)."""
        found = self.seconds.get(index)
        if found is None:
            found = self.seconds[index] = SecondTally()
        return found

    def record(
        self,
        *,
        op: str,
        intended: float,
        latency: float,
        service: float,
        error: str | None,
        measured: bool,
        sent: float | None = None,
    ) -> None:
        """Count one finished call.

        Args:
            op: The operation's name.
            intended: Its intended send time, seconds since the run's start.
            latency: Seconds from the intended send time to the end.
            service: Seconds from the actual send to the end.
            error: The failure kind, or ``None`` for a success.
            measured: False during the warmup (only the per-second series sees it).
            sent: When it was actually sent, seconds since the start (default: ``intended``).
        """
        sec = self.second(int(intended))
        sec.sent += 1
        if error is None:
            sec.ok += 1
        else:
            sec.errors += 1
        sec.latency.record(latency)
        if not measured:
            self.warmup_calls += 1
            return
        self.latency.record(latency)
        self.service.record(service)
        sent = intended if sent is None else sent
        lag = sent - intended
        self.max_send_lag = max(self.max_send_lag, lag)
        if lag > LATE:
            self.late_sends += 1
        self.first_sent = sent if self.first_sent is None else min(self.first_sent, sent)
        self.last_sent = sent if self.last_sent is None else max(self.last_sent, sent)
        tally = self.ops.get(op)
        if tally is None:
            tally = self.ops[op] = OpTally()
        tally.requests += 1
        tally.latency.record(latency)
        if error is not None:
            tally.errors[error] += 1
            self.errors[error] += 1

    def add(self, other: Tally) -> None:
        """Add ``other`` (another worker's or another machine's tally of the same time span)."""
        self.latency.add(other.latency)
        self.service.add(other.service)
        for name, op in other.ops.items():
            self.ops.setdefault(name, OpTally()).add(op)
        self.errors.update(other.errors)
        for index, sec in other.seconds.items():
            self.second(index).add(sec)
        self.warmup_calls += other.warmup_calls
        self.over_timeout += other.over_timeout
        self.outages.extend(other.outages)
        self.measured_seconds = max(self.measured_seconds, other.measured_seconds)
        self.max_send_lag = max(self.max_send_lag, other.max_send_lag)
        self.late_sends += other.late_sends
        for mine, theirs, pick in (("first_sent", other.first_sent, min), ("last_sent", other.last_sent, max)):
            if theirs is not None:
                current = getattr(self, mine)
                setattr(self, mine, theirs if current is None else pick(current, theirs))

    @classmethod
    def merged(cls, tallies: Iterable[Tally]) -> Tally:
        """A new tally holding the sum of ``tallies``."""
        total = cls()
        for tally in tallies:
            total.add(tally)
        return total

    # ------------------------------------------------------------------ wire form

    def to_wire(self) -> dict[str, Any]:
        """The exact, JSON-able form (encoded histograms): what workers return and reports embed."""
        return {
            "latency": self.latency.encode(),
            "service": self.service.encode(),
            "operations": {
                name: {"requests": op.requests, "errors": dict(op.errors), "latency": op.latency.encode()}
                for name, op in sorted(self.ops.items())
            },
            "errors": dict(self.errors),
            "seconds": [
                {"t": i, "sent": s.sent, "ok": s.ok, "errors": s.errors, "latency": s.latency.encode()}
                for i, s in sorted(self.seconds.items())
            ],
            "warmup_calls": self.warmup_calls,
            "over_timeout": self.over_timeout,
            "outages": list(self.outages),
            "measured_seconds": self.measured_seconds,
            "first_sent": self.first_sent,
            "last_sent": self.last_sent,
            "max_send_lag": self.max_send_lag,
            "late_sends": self.late_sends,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], *, shift: int = 0) -> Tally:
        """The inverse of :meth:`to_wire`; ``shift`` moves its seconds (to align runs started apart).

        Raises:
            ValueError: A part is missing or malformed (the message names it).
        """
        try:
            tally = cls(
                latency=Histogram.decode(data["latency"]),
                service=Histogram.decode(data["service"]),
                errors=Counter({str(k): int(v) for k, v in data["errors"].items()}),
                warmup_calls=int(data["warmup_calls"]),
                over_timeout=int(data["over_timeout"]),
                outages=list(data["outages"]),
                measured_seconds=float(data["measured_seconds"]),
                first_sent=None if data.get("first_sent") is None else float(data["first_sent"]) + shift,
                last_sent=None if data.get("last_sent") is None else float(data["last_sent"]) + shift,
                max_send_lag=float(data.get("max_send_lag", 0.0)),
                late_sends=int(data.get("late_sends", 0)),
            )
            for name, op in data["operations"].items():
                tally.ops[name] = OpTally(
                    requests=int(op["requests"]),
                    errors=Counter({str(k): int(v) for k, v in op["errors"].items()}),
                    latency=Histogram.decode(op["latency"]),
                )
            for sec in data["seconds"]:
                tally.seconds[int(sec["t"]) + shift] = SecondTally(
                    sent=int(sec["sent"]),
                    ok=int(sec["ok"]),
                    errors=int(sec["errors"]),
                    latency=Histogram.decode(sec["latency"]),
                )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"the histograms part is malformed: missing or wrong {exc}") from None
        return tally
