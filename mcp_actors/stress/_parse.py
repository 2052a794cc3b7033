"""Parsing of the stress command's small languages: durations, rate schedules, chaos, SLOs.

Each parser is a pure function from text to a frozen value and raises
:class:`~mcp_actors.errors.StressConfigInvalid` naming the option, the value and the
expected form, so the command line and scenario files share one set of rules.
"""

from __future__ import annotations

import enum
import math
import re

import attrs

from mcp_actors.errors import StressConfigInvalid

__all__ = [
    "ChaosKind",
    "ChaosSpec",
    "RateStep",
    "Slo",
    "parse_chaos",
    "parse_duration",
    "parse_rate",
    "parse_slo",
]

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h)?\s*$")


def parse_duration(text: str | float, *, field: str = "duration", allow_zero: bool = True) -> float:
    """Seconds from ``10s``, ``250ms``, ``2m``, ``1h`` or a bare number of seconds.

    Raises:
        StressConfigInvalid: Not a non-negative duration.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _DURATION.match(str(text))
        if match is None:
            raise StressConfigInvalid(
                f"{field}: expected a duration like 10s, 250ms, 2m or 1h, got {text!r}", field=field
            )
        value = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise StressConfigInvalid(f"{field}: must be {'>= 0' if allow_zero else '> 0'}, got {text!r}", field=field)
    return value


@attrs.frozen(kw_only=True)
class RateStep:
    """One piece of an open-model rate schedule: the rate goes linearly from ``start`` to ``end``.

    A constant rate has ``start == end``. ``seconds`` is ``inf`` for the open-ended last
    piece of a plain ``--rate R`` (the run's duration or request count ends it).
    """

    start: float
    end: float
    seconds: float


_NUMBER = r"(\d+(?:\.\d+)?)"
_PLAIN = re.compile(rf"^{_NUMBER}(?:/s)?$")
_STEPS = re.compile(rf"^{_NUMBER}:{_NUMBER}:{_NUMBER}/(.+)$")
_RAMP = re.compile(rf"^{_NUMBER}\.\.{_NUMBER}/(.+)$")
_RATE_FORMS = "R (calls/s), START:END:STEP/EVERY (steps, e.g. 100:2000:100/10s) or START..END/OVER (a linear ramp)"


def parse_rate(text: str) -> tuple[RateStep, ...]:
    """Parse ``--rate``: a constant rate, a step schedule or a linear ramp.

    ``100:2000:100/10s`` holds 100/s for 10 s, then 200/s, ... up to 2000/s for 10 s;
    ``100..2000/60s`` raises the rate linearly from 100/s to 2000/s over 60 s.

    Raises:
        StressConfigInvalid: Not one of the forms, or a rate that is not > 0.
    """
    raw = text.strip().replace(" ", "")
    if match := _PLAIN.match(raw):
        rate = float(match.group(1))
        _check_rate(rate, text)
        return (RateStep(start=rate, end=rate, seconds=math.inf),)
    if match := _STEPS.match(raw):
        first, last, step = (float(match.group(i)) for i in (1, 2, 3))
        every = parse_duration(match.group(4), field="--rate", allow_zero=False)
        _check_rate(first, text)
        _check_rate(last, text)
        if step <= 0:
            raise StressConfigInvalid(f"--rate: the step must be > 0, got {text!r}", field="--rate")
        count = math.floor((last - first) / step + 1e-9) + 1 if last >= first else 0
        if count < 1:
            raise StressConfigInvalid(f"--rate: the end rate must be >= the start rate, got {text!r}", field="--rate")
        if count > 10_000:
            raise StressConfigInvalid(f"--rate: at most 10000 steps, got {count} in {text!r}", field="--rate")
        return tuple(RateStep(start=first + i * step, end=first + i * step, seconds=every) for i in range(count))
    if match := _RAMP.match(raw):
        first, last = float(match.group(1)), float(match.group(2))
        over = parse_duration(match.group(3), field="--rate", allow_zero=False)
        _check_rate(first, text)
        _check_rate(last, text)
        return (RateStep(start=first, end=last, seconds=over),)
    raise StressConfigInvalid(f"--rate: expected {_RATE_FORMS}; got {text!r}", field="--rate")


def _check_rate(rate: float, text: str) -> None:
    if not rate > 0 or not math.isfinite(rate):
        raise StressConfigInvalid(f"--rate: rates must be > 0 calls/s, got {text!r}", field="--rate")


class ChaosKind(enum.StrEnum):
    """What a chaos action does to the target's server processes."""

    KILL = "kill"
    """SIGKILL the server (a crash); the supervisor restarts it on the next call."""
    STOP = "stop"
    """SIGSTOP the server for a while, then SIGCONT (a hang: the process lives, nothing answers)."""


@attrs.frozen(kw_only=True)
class ChaosSpec:
    """A periodic fault: ``kind`` every ``every`` seconds, the first one after ``every``.

    Attributes:
        kind: Kill or stop.
        every: Seconds between two actions.
        stop_for: For ``stop``: how long the process stays stopped.
    """

    kind: ChaosKind
    every: float
    stop_for: float = 1.0


_CHAOS_FORMS = "kill-every=DURATION or stop-every=DURATION[,stop-for=DURATION]"


def parse_chaos(text: str) -> ChaosSpec:
    """Parse one ``--chaos`` value: ``kill-every=10s``, ``stop-every=5s,stop-for=1s``.

    Raises:
        StressConfigInvalid: Not one of the forms.
    """
    parts: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not value.strip():
            raise StressConfigInvalid(f"--chaos: expected {_CHAOS_FORMS}, got {text!r}", field="--chaos")
        parts[key.strip()] = value.strip()
    kinds = [k for k in ("kill-every", "stop-every") if k in parts]
    unknown = sorted(set(parts) - {"kill-every", "stop-every", "stop-for"})
    if len(kinds) != 1 or unknown or ("stop-for" in parts and kinds != ["stop-every"]):
        raise StressConfigInvalid(f"--chaos: expected {_CHAOS_FORMS}, got {text!r}", field="--chaos")
    every = parse_duration(parts[kinds[0]], field="--chaos", allow_zero=False)
    if kinds[0] == "kill-every":
        return ChaosSpec(kind=ChaosKind.KILL, every=every)
    stop_for = parse_duration(parts.get("stop-for", "1s"), field="--chaos stop-for", allow_zero=False)
    if stop_for >= every:
        raise StressConfigInvalid(f"--chaos: stop-for must be shorter than stop-every, got {text!r}", field="--chaos")
    return ChaosSpec(kind=ChaosKind.STOP, every=every, stop_for=stop_for)


@attrs.frozen(kw_only=True)
class Slo:
    """One threshold of ``--slo``: ``metric op value`` (``p99<50ms``, ``errors<0.1%``, ``rate>=1000``).

    Attributes:
        text: The threshold as written.
        metric: ``p50`` ... ``p99.99``, ``max``, ``mean`` (latency, seconds), ``errors``
            (the error ratio, 0..1) or ``rate`` (achieved calls/s).
        op: One of ``<``, ``<=``, ``>``, ``>=``.
        value: Seconds for latencies, a ratio for errors, calls/s for rate.
    """

    text: str
    metric: str
    op: str
    value: float

    def holds(self, actual: float) -> bool:
        """Whether ``actual`` (in this threshold's unit) meets the threshold."""
        match self.op:
            case "<":
                return actual < self.value
            case "<=":
                return actual <= self.value
            case ">":
                return actual > self.value
            case ">=":
                return actual >= self.value
            case _:
                raise TypeError(f"unknown operator {self.op!r}")


_SLO = re.compile(r"^\s*([a-z][a-z0-9.]*)\s*(<=|>=|<|>)\s*(\S+)\s*$")
_LATENCY_METRIC = re.compile(r"^(p\d+(?:\.\d+)?|max|mean)$")
_SLO_FORMS = "METRIC OP VALUE with METRIC p50..p99.99, max, mean, errors or rate; e.g. p99<50ms,errors<0.1%,rate>=1000"


def parse_slo(text: str) -> tuple[Slo, ...]:
    """Parse ``--slo``: comma-separated thresholds, each checked against the final result.

    Raises:
        StressConfigInvalid: A threshold that is not ``METRIC OP VALUE`` with a known metric
            and a value in that metric's unit.
    """
    found: list[Slo] = []
    for item in text.split(","):
        if not item.strip():
            continue
        match = _SLO.match(item)
        if match is None:
            raise StressConfigInvalid(f"--slo: expected {_SLO_FORMS}; got {item.strip()!r}", field="--slo")
        metric, op, raw = match.groups()
        if _LATENCY_METRIC.match(metric):
            if metric.startswith("p") and not 0 < float(metric[1:]) < 100:
                raise StressConfigInvalid(f"--slo: a percentile must be in (0, 100), got {metric!r}", field="--slo")
            value = parse_duration(raw, field=f"--slo {metric}")
        elif metric == "errors":
            value = _ratio(raw, item)
        elif metric == "rate":
            try:
                value = float(raw.removesuffix("/s"))
            except ValueError:
                raise StressConfigInvalid(f"--slo: rate expects calls/s, got {item.strip()!r}", field="--slo") from None
        else:
            raise StressConfigInvalid(f"--slo: unknown metric {metric!r}; expected {_SLO_FORMS}", field="--slo")
        found.append(Slo(text=item.strip(), metric=metric, op=op, value=value))
    if not found:
        raise StressConfigInvalid(f"--slo: expected {_SLO_FORMS}; got {text!r}", field="--slo")
    return tuple(found)


def _ratio(raw: str, item: str) -> float:
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise StressConfigInvalid(
            f"--slo: errors expects a ratio (0.001) or a percentage (0.1%), got {item.strip()!r}", field="--slo"
        ) from None
    if not 0 <= value <= 1:
        raise StressConfigInvalid(f"--slo: an error ratio must be in [0, 1], got {item.strip()!r}", field="--slo")
    return value
