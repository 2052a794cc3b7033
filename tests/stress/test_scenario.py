"""Scenario files and the option languages: every bad input is refused with its path and the expected form."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from mcp_actors.errors import StressConfigInvalid
from mcp_actors.stress import (
    ChaosKind,
    OpKind,
    build_document,
    evaluate_slos,
    load_scenario,
    parse_chaos,
    parse_duration,
    parse_rate,
    parse_slo,
    scenario_from_dict,
)
from mcp_actors.stress._scenario import render
from mcp_actors.stress._tally import Tally

TOML = """
[[operations]]
tool = "echo"
weight = 3
arguments = { text = { "$random_string" = 8 }, n = { "$seq" = { start = 10, step = 2 } } }
expect = { text_contains = "a" }

[[operations]]
kind = "tools/list"

[[operations]]
name = "pick"
tool = "add"
timeout = "250ms"
arguments = { a = { "$choice" = [1, 2] }, b = { "$random_int" = [5, 6] }, c = { "$file" = "values.txt" } }
"""


def test_toml_scenario_is_read_and_rendered(tmp_path: Path) -> None:
    """A TOML scenario with every template: kinds, weights, timeouts and argument values come out right."""
    (tmp_path / "values.txt").write_text('first\n{"k": 1}\n\n', encoding="utf-8")
    path = tmp_path / "s.toml"
    path.write_text(TOML, encoding="utf-8")
    scenario = load_scenario(path)
    echo, listing, pick = scenario.operations
    assert (echo.kind, echo.weight, echo.expect.text_contains) == (OpKind.CALL, 3.0, "a")
    assert listing.kind is OpKind.LIST and listing.name == "tools/list"
    assert pick.timeout == 0.25
    rng = random.Random(1)
    args = render(echo.arguments, 3, rng)
    assert len(args["text"]) == 8 and args["n"] == 16
    values = [render(pick.arguments, n, rng) for n in range(3)]
    assert {v["a"] for v in values} <= {1, 2} and {v["b"] for v in values} <= {5, 6}
    assert [v["c"] for v in values] == ["first", {"k": 1}, "first"]


def test_json_scenario_is_read(tmp_path: Path) -> None:
    """A JSON scenario is read like a TOML one."""
    path = tmp_path / "s.json"
    path.write_text('{"operations": [{"tool": "echo", "arguments": {"text": "hi"}}]}', encoding="utf-8")
    assert load_scenario(path).operations[0].arguments == {"text": "hi"}


@pytest.mark.parametrize(
    ("doc", "where", "says"),
    [
        ({}, "operations", "non-empty list"),
        ({"operations": [], "x": 1}, "x", "unknown key"),
        ({"operations": [{"kind": "tools/call"}]}, "operations[0].tool", "needs a non-empty string 'tool'"),
        ({"operations": [{"tool": "a", "weight": 0}]}, "operations[0].weight", "number > 0"),
        ({"operations": [{"tool": "a", "weight": True}]}, "operations[0].weight", "number > 0"),
        ({"operations": [{"kind": "nope"}]}, "operations[0].kind", "expected one of tools/call"),
        ({"operations": [{"tool": "a", "colour": 1}]}, "operations[0].colour", "unknown key"),
        ({"operations": [{"kind": "tools/list", "tool": "a"}]}, "operations[0].tool", "not used by tools/list"),
        ({"operations": [{"kind": "ping", "arguments": {"a": 1}}]}, "operations[0].arguments", "not used by ping"),
        ({"operations": [{"kind": "resources/read"}]}, "operations[0].uri", "needs a non-empty string 'uri'"),
        ({"operations": [{"tool": "a", "timeout": "soon"}]}, "operations[0].timeout", "expected a duration"),
        (
            {"operations": [{"tool": "a", "expect": {"is_error": "no"}}]},
            "operations[0].expect.is_error",
            "true or false",
        ),
        (
            {"operations": [{"tool": "a", "arguments": {"x": {"$seq": {"start": 1.5}}}}]},
            "operations[0].arguments.x",
            "integers",
        ),
        (
            {"operations": [{"tool": "a", "arguments": {"x": {"$choice": []}}}]},
            "operations[0].arguments.x",
            "non-empty list",
        ),
        (
            {"operations": [{"tool": "a", "arguments": {"x": {"$random_int": [3, 1]}}}]},
            "operations[0].arguments.x",
            "low <= high",
        ),
        (
            {"operations": [{"tool": "a", "arguments": {"x": {"$random_string": -1}}}]},
            "operations[0].arguments.x",
            "size",
        ),
        (
            {"operations": [{"tool": "a", "arguments": {"x": {"$magic": 1}}}]},
            "operations[0].arguments.x",
            "a template is one key",
        ),
        (
            {"operations": [{"tool": "a", "arguments": {"x": [{"$file": "/nonexistent/v.txt"}]}}]},
            "operations[0].arguments.x[0]",
            "cannot read",
        ),
        ({"operations": [{"tool": "a"}, {"tool": "a"}]}, "operations[1].name", "used twice"),
    ],
)
def test_invalid_scenarios_name_the_field(doc: Any, where: str, says: str) -> None:
    """Each invalid scenario is refused with the field's path and what is expected."""
    with pytest.raises(StressConfigInvalid) as info:
        scenario_from_dict(doc, origin="s.toml")
    assert info.value.field == where
    assert says in str(info.value)
    assert str(info.value).startswith("s.toml: ")


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    """A missing file and broken TOML are reported with the path."""
    with pytest.raises(StressConfigInvalid, match="cannot read"):
        load_scenario(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[operations]\n", encoding="utf-8")
    with pytest.raises(StressConfigInvalid, match="not valid TOML"):
        load_scenario(bad)


def test_unsupported_operations_are_refused_before_the_run() -> None:
    """resources/read on a service without read_resource() is a clear validation error."""

    class Service:
        async def call_tool(self) -> None: ...

    scenario = scenario_from_dict({"operations": [{"tool": "a"}, {"kind": "resources/read", "uri": "demo://readme"}]})
    with pytest.raises(StressConfigInvalid, match=r"operations\[1\]: resources/read is not supported .*read_resource"):
        scenario.check_supported(Service)

    class Newer(Service):
        async def read_resource(self) -> None: ...

    scenario.check_supported(Newer)


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("250ms", 0.25), ("2m", 120), ("1.5", 1.5), ("1h", 3600)])
def test_durations(text: str, seconds: float) -> None:
    """Durations take us/ms/s/m/h or bare seconds."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10 parsecs", "-1s", "s"])
def test_bad_durations(text: str) -> None:
    """A bad duration names the option and the expected form."""
    with pytest.raises(StressConfigInvalid, match="--duration: "):
        parse_duration(text, field="--duration")


@pytest.mark.parametrize("text", ["0", "fast", "100:50:10/1s", "1:10:0/1s", "100:200:10/0s", "5..10"])
def test_bad_rates(text: str) -> None:
    """A bad --rate is refused with the forms it takes."""
    with pytest.raises(StressConfigInvalid, match="--rate"):
        parse_rate(text)


def test_chaos_specs() -> None:
    """kill-every and stop-every(+stop-for) parse; mixtures and bad stop-for are refused."""
    assert parse_chaos("kill-every=10s").kind is ChaosKind.KILL
    stop = parse_chaos("stop-every=5s,stop-for=1s")
    assert (stop.kind, stop.every, stop.stop_for) == (ChaosKind.STOP, 5.0, 1.0)
    for bad in ["kill-every", "explode-every=1s", "kill-every=1s,stop-for=1s", "stop-every=1s,stop-for=2s"]:
        with pytest.raises(StressConfigInvalid, match="--chaos"):
            parse_chaos(bad)


def test_slos_parse_and_judge() -> None:
    """p99<50ms, errors<0.1%, rate>=1000 are judged against the result in their own units."""
    slos = parse_slo("p99<50ms, errors<0.1%,rate>=90, max<=1s")
    tally = Tally()
    for i in range(100):
        tally.record(op="a", intended=i / 100, latency=0.010, service=0.010, error=None, measured=True)
    tally.measured_seconds = 1.0
    doc = build_document(tally, meta={"start_time": 0.0, "target": {}, "settings": {}})
    verdicts = evaluate_slos(doc, slos)
    assert [v["ok"] for v in verdicts] == [True, True, True, True]
    assert verdicts[0]["actual"] == pytest.approx(0.010, rel=1e-3)
    failing = evaluate_slos(doc, parse_slo("p50<5ms,rate>100"))
    assert [v["ok"] for v in failing] == [False, False]


@pytest.mark.parametrize("text", ["p99", "p99<", "latency<5ms", "p100<1s", "errors<150%", "rate>=fast", ","])
def test_bad_slos(text: str) -> None:
    """A bad --slo is refused with the form it takes."""
    with pytest.raises(StressConfigInvalid, match="--slo"):
        parse_slo(text)
