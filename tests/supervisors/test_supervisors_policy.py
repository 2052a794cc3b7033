"""Specs, the restart decision, restart accounting and backoff: pure functions and validation."""

from __future__ import annotations

import ast
import math
import pathlib
import sys

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import supervisors
from supervisors import (
    Backoff,
    ChildKind,
    ChildSpec,
    Intensity,
    Restart,
    Shutdown,
    Strategy,
    SupervisorSpec,
    add_restart,
    backoff_delay,
    should_restart,
)


async def _start(*, task_status: object) -> None:
    """A start function for specs that are never run."""


# ----------------------------------------------------------------------------- exports


def test_all_is_sorted_and_every_name_is_exported() -> None:
    """The package's __all__ is sorted and names exactly the public objects it re-exports."""
    assert supervisors.__all__ == sorted(supervisors.__all__)
    public = {name for name in vars(supervisors) if not name.startswith("_")}
    assert set(supervisors.__all__) == public
    for name in supervisors.__all__:
        assert getattr(supervisors, name).__module__.startswith("supervisors")


def test_the_api_the_lead_codes_against_exists() -> None:
    """Every name the design promises is importable from the package root."""
    promised = (
        "Backoff ChildInfo ChildKind ChildSpec Intensity Mailbox MailboxClosed NoReply Reply "
        "Restart RestartIntensityExceeded Shutdown Strategy Supervisor SupervisorSpec "
        "SupervisorStatistics add_restart backoff_delay open_mailbox open_supervisor run_supervisor"
    ).split()
    missing = [name for name in promised if name not in supervisors.__all__]
    assert missing == []


def test_package_imports_nothing_but_stdlib_attrs_and_trio() -> None:
    """supervisors/ imports no MCP code and no mcp_actors code, only stdlib, attrs and trio."""
    allowed = set(sys.stdlib_module_names) | {"attrs", "trio"}
    package = pathlib.Path(supervisors.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in allowed, f"{path.name} imports {root}"


# ----------------------------------------------------------------------------- specs


def test_defaults_match_the_design() -> None:
    """Defaults: one_for_one, 3 restarts in 5 s, backoff 0.5 s to 30 s with 20 % jitter."""
    spec = SupervisorSpec()
    assert spec.strategy is Strategy.ONE_FOR_ONE
    assert spec.intensity == Intensity(max_restarts=3, period=5.0)
    assert spec.backoff == Backoff(min_delay=0.5, max_delay=30.0, jitter=0.2, reset_after=60.0)
    child = ChildSpec(id="x", start=_start)
    assert child.restart is Restart.PERMANENT
    assert child.shutdown == Shutdown.after(5.0)
    assert child.kind is ChildKind.WORKER
    assert child.start_timeout == 30.0


def test_shutdown_kinds() -> None:
    """Shutdown.BRUTAL has no timeout, Shutdown.after keeps its seconds; both are frozen."""
    assert Shutdown.BRUTAL.is_brutal and Shutdown.BRUTAL.timeout is None
    assert not Shutdown.after(2.5).is_brutal and Shutdown.after(2.5).timeout == 2.5
    assert repr(Shutdown.BRUTAL) == "Shutdown.BRUTAL"
    assert repr(Shutdown.after(2.5)) == "Shutdown.after(2.5)"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Shutdown.BRUTAL.timeout = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("build", "error", "words"),
    [
        (lambda: Intensity(max_restarts=-1), ValueError, "max_restarts must be >= 0"),
        (lambda: Intensity(max_restarts=1.5), TypeError, "max_restarts must be an int"),  # type: ignore[arg-type]
        (lambda: Intensity(max_restarts=True), TypeError, "max_restarts must be an int"),
        (lambda: Intensity(period=0), ValueError, "period must be > 0"),
        (lambda: Intensity(period=math.inf), ValueError, "period must be finite"),
        (lambda: Backoff(min_delay=-0.1), ValueError, "min_delay must be >= 0"),
        (lambda: Backoff(min_delay=2.0, max_delay=1.0), ValueError, "max_delay must be >= min_delay"),
        (lambda: Backoff(jitter=math.nan), ValueError, "jitter must be finite"),
        (lambda: Backoff(reset_after=0), ValueError, "reset_after must be > 0"),
        (lambda: Backoff(min_delay="1"), TypeError, "min_delay must be a number"),  # type: ignore[arg-type]
        (lambda: Shutdown.after(0), ValueError, "timeout must be > 0"),
        (lambda: Shutdown.after(math.inf), ValueError, "timeout must be finite"),
        (lambda: SupervisorSpec(strategy="one_for_one"), TypeError, "strategy"),  # type: ignore[arg-type]
        (lambda: ChildSpec(id="", start=_start), ValueError, "id must not be empty"),
        (lambda: ChildSpec(id=1, start=_start), TypeError, "id must be a str"),  # type: ignore[arg-type]
        (lambda: ChildSpec(id="x", start=None), TypeError, "start must be callable"),  # type: ignore[arg-type]
        (lambda: ChildSpec(id="x", start=_start, restart="permanent"), TypeError, "restart"),  # type: ignore[arg-type]
        (lambda: ChildSpec(id="x", start=_start, shutdown=5.0), TypeError, "shutdown"),  # type: ignore[arg-type]
        (lambda: ChildSpec(id="x", start=_start, start_timeout=0), ValueError, "start_timeout"),
    ],
)
def test_invalid_specs_are_rejected_with_the_rule(build, error, words) -> None:  # type: ignore[no-untyped-def]
    """A spec with a bad field raises ValueError/TypeError naming the field and the rule."""
    with pytest.raises(error, match=words):
        build()


# ----------------------------------------------------------------------------- restart decision


@pytest.mark.parametrize(
    ("restart", "abnormal", "expected"),
    [
        (Restart.PERMANENT, False, True),
        (Restart.PERMANENT, True, True),
        (Restart.TRANSIENT, False, False),
        (Restart.TRANSIENT, True, True),
        (Restart.TEMPORARY, False, False),
        (Restart.TEMPORARY, True, False),
    ],
)
def test_should_restart_follows_otp(restart: Restart, abnormal: bool, expected: bool) -> None:
    """Permanent always restarts, transient only after a crash, temporary never."""
    assert should_restart(restart, abnormal=abnormal) is expected


# ----------------------------------------------------------------------------- add_restart

_times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
_gaps = st.lists(st.floats(min_value=0.0, max_value=50.0, allow_nan=False), max_size=40)
_periods = st.floats(min_value=1e-3, max_value=100.0, allow_nan=False)


def _timeline(start: float, gaps: list[float]) -> list[float]:
    times, now = [], start
    for gap in gaps:
        now += gap
        times.append(now)
    return times


@given(start=_times, gaps=_gaps, period=_periods)
def test_add_restart_keeps_exactly_the_restarts_within_the_window(
    start: float, gaps: list[float], period: float
) -> None:
    """Folding add_restart equals the naive model: every restart time >= now - period, newest first."""
    restarts: tuple[float, ...] = ()
    seen: list[float] = []
    for now in _timeline(start, gaps):
        restarts = add_restart(restarts, now, period)
        seen.append(now)
        model = [when for when in reversed(seen) if when >= now - period]
        assert list(restarts) == model
        assert restarts[0] == now


@given(
    start=_times,
    gaps=_gaps,
    period=_periods,
    max_restarts=st.integers(min_value=0, max_value=6),
)
def test_intensity_gives_up_exactly_on_the_n_plus_first_restart_in_a_window(
    start: float, gaps: list[float], period: float, max_restarts: int
) -> None:
    """The supervisor's give-up test (len > max_restarts) matches counting restarts per window."""
    restarts: tuple[float, ...] = ()
    timeline = _timeline(start, gaps)
    for index, now in enumerate(timeline):
        restarts = add_restart(restarts, now, period)
        in_window = sum(1 for when in timeline[: index + 1] if when >= now - period)
        assert (len(restarts) > max_restarts) == (in_window > max_restarts)


def test_add_restart_matches_erlang_examples() -> None:
    """Concrete cases: restarts older than the period are dropped, equal to the threshold kept."""
    assert add_restart((), 10.0, 5.0) == (10.0,)
    assert add_restart((9.0, 5.0, 4.0), 10.0, 5.0) == (10.0, 9.0, 5.0)
    assert add_restart((4.9,), 10.0, 5.0) == (10.0,)


# ----------------------------------------------------------------------------- backoff_delay

_backoffs = st.builds(
    lambda low, extra, jitter: Backoff(min_delay=low, max_delay=low + extra, jitter=jitter, reset_after=60.0),
    st.floats(min_value=0.0, max_value=1e3, allow_nan=False),
    st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
    st.floats(min_value=0.0, max_value=2.0, allow_nan=False),
)


def _naive_delay(backoff: Backoff, n: int, rand: float) -> float:
    delay = backoff.min_delay
    for _ in range(n):
        delay *= 2.0  # overflows to inf, which the cap turns into max_delay
    return min(backoff.max_delay, delay) * (1.0 + rand * backoff.jitter)


@given(backoff=_backoffs, n=st.integers(min_value=0, max_value=1500), rand=st.floats(0.0, 1.0))
def test_backoff_delay_matches_the_naive_doubling_model(backoff: Backoff, n: int, rand: float) -> None:
    """backoff_delay equals min(max, min * 2**n) * (1 + rand * jitter) computed by doubling."""
    assert backoff_delay(backoff, n, rand) == _naive_delay(backoff, n, rand)


@given(backoff=_backoffs, n=st.integers(min_value=0, max_value=200), rand=st.floats(0.0, 1.0))
def test_backoff_delay_grows_and_stays_within_its_jitter_band(backoff: Backoff, n: int, rand: float) -> None:
    """Delays never shrink with n, and jitter only lengthens a delay by at most jitter times."""
    base = backoff_delay(backoff, n, 0.0)
    assert backoff_delay(backoff, n + 1, 0.0) >= base
    assert base <= backoff.max_delay
    assert base <= backoff_delay(backoff, n, rand) <= base * (1.0 + backoff.jitter)


def test_backoff_delay_examples_and_huge_n() -> None:
    """0.5, 1, 2 ... capped at max; astronomically large n neither overflows nor loses the cap."""
    backoff = Backoff(min_delay=0.5, max_delay=30.0, jitter=0.2)
    assert [backoff_delay(backoff, n, 0.0) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_delay(backoff, 10**30, 0.0) == 30.0
    assert backoff_delay(backoff, 0, 1.0) == pytest.approx(0.6)
    assert backoff_delay(Backoff(min_delay=0.0, max_delay=1.0), 10**30, 0.0) == 0.0


@pytest.mark.parametrize(
    ("n", "rand", "error"),
    [(-1, 0.0, ValueError), (1.0, 0.0, TypeError), (0, 1.5, ValueError), (0, -0.1, ValueError)],
)
def test_backoff_delay_rejects_bad_arguments(n: object, rand: float, error: type) -> None:
    """A negative or non-int n, or rand outside [0, 1], is refused."""
    with pytest.raises(error):
        backoff_delay(Backoff(), n, rand)  # type: ignore[arg-type]
