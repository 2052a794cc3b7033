"""``benchmarks.integrations``: contenders read without importing, medians, the per-call ratio and its goal."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import integrations


def test_module_constants_are_read_without_importing_the_framework(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module that imports a missing framework still tells its contenders and peer packages."""
    (tmp_path / "fake.py").write_text(
        "import framework_that_is_not_installed\n"
        "CONTENDER_NAMES = ('ours', 'own', 'raw')\n"
        "PEER_PACKAGES: dict[str, tuple[str, ...]] = {'own': ('pkg==1.0',)}\n"
    )
    (tmp_path / "plain.py").write_text("X = 1\n")
    (tmp_path / "_private.py").write_text("")
    monkeypatch.setattr(integrations, "MODULES_DIR", tmp_path)
    assert integrations.framework_modules() == ["fake", "plain"]
    assert integrations.contenders_of("fake") == ["ours", "own", "raw"]
    assert integrations.contenders_of("plain") == ["ours", "own"]
    assert integrations._module_constant("fake", "PEER_PACKAGES") == {"own": ("pkg==1.0",)}


def test_summary_takes_medians_and_judges_the_goal() -> None:
    """Per-call cost of ours over own: sequential latency, and the inverse of calls/s."""
    runs = {
        "ours": [
            {"sequential_ms": 0.2, "calls_per_s": 4000.0},
            {"sequential_ms": 0.3, "calls_per_s": 5000.0},
            {"sequential_ms": 0.25, "calls_per_s": 6000.0},
        ],
        "own": [{"sequential_ms": 0.6, "calls_per_s": 2000.0}, {"error": "exit 1: boom"}],
    }
    summary = integrations.summarize("fw", runs)
    ours, own = summary["contenders"]["ours"], summary["contenders"]["own"]
    assert ours["sequential_ms"] == pytest.approx(0.25) and ours["calls_per_s"] == pytest.approx(5000.0)
    assert own["runs"] == 1 and own["errors"] == ["exit 1: boom"]
    assert summary["sequential_ratio"] == pytest.approx(0.25 / 0.6)
    assert summary["inflight_cost_ratio"] == pytest.approx(2000.0 / 5000.0)
    assert summary["goal_met"] is True
    table = integrations.render([summary], 50)
    assert "goal met" in table and "failed: exit 1: boom" in table


def test_a_slower_ours_misses_the_goal() -> None:
    runs = {
        "ours": [{"sequential_ms": 0.5, "calls_per_s": 3000.0}],
        "own": [{"sequential_ms": 0.6, "calls_per_s": 2000.0}],
    }
    summary = integrations.summarize("fw", runs)
    assert summary["goal_met"] is False
    assert "not met" in integrations.render([summary], 50)


def test_the_floor_says_how_far_above_it_each_client_is_and_whether_the_goal_is_in_reach() -> None:
    """A floor over half of own's total puts the goal out of reach; the table says so."""
    runs = {
        "ours": [{"sequential_ms": 0.5, "calls_per_s": 3000.0}],
        "own": [{"sequential_ms": 0.8, "calls_per_s": 2000.0}],
        "floor": [{"sequential_ms": 0.45, "calls_per_s": 9000.0}],
    }
    summary = integrations.summarize("fw", runs)
    assert summary["floor_sequential_ms"] == pytest.approx(0.45)
    assert summary["ours_above_floor_ms"] == pytest.approx(0.05)
    assert summary["own_above_floor_ms"] == pytest.approx(0.35)
    assert summary["goal_reachable"] is False
    table = integrations.render([summary], 50)
    assert "ours +50 us, own +350 us" in table and "out of reach" in table
    runs["floor"] = [{"sequential_ms": 0.1, "calls_per_s": 9000.0}]
    reachable = integrations.summarize("fw", runs)
    assert reachable["goal_reachable"] is True
    assert "out of reach" not in integrations.render([reachable], 50)


def test_the_higher_of_the_two_floors_decides_whether_the_goal_is_in_reach() -> None:
    """The tool layer alone may be far under half of own's total while the server's round trip is not."""
    runs = {
        "ours": [{"sequential_ms": 0.3, "calls_per_s": 7000.0}],
        "own": [{"sequential_ms": 0.3, "calls_per_s": 3500.0}],
        "floor": [{"sequential_ms": 0.01, "calls_per_s": 90000.0}],
        "wire_floor": [{"sequential_ms": 0.17, "calls_per_s": 30000.0}],
    }
    summary = integrations.summarize("fw", runs)
    assert summary["floor_sequential_ms"] == pytest.approx(0.17)
    assert summary["goal_reachable"] is False
    assert "out of reach" in integrations.render([summary], 50)
    del runs["wire_floor"]
    assert integrations.summarize("fw", runs)["goal_reachable"] is True
