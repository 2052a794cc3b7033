"""The conformance runner's own logic: the suite's list output, the expectations file, the verdicts.

The suite run itself (Node, npm, the mock servers) is ``python tests/conformance/run.py``, run by
``.ci/run``; nothing here installs or starts anything.
"""

from __future__ import annotations

import pytest

from tests.conformance import run as runner

LIST_OUTPUT = """Client scenarios (test against a client):
  - initialize [2025-06-18,2025-11-25]
  - sse-retry [2025-11-25]
  - auth/dpop [extension]
  - http-custom-headers [2026-07-28]
"""


def _outcome(scenario: str, passed: bool) -> runner.Outcome:
    return runner.Outcome(scenario=scenario, client=runner.OURS, passed=passed)


def test_the_list_output_gives_each_scenario_with_its_tags() -> None:
    """`conformance list --client` lines become names with their revision or extension tags; headings are skipped."""
    scenarios = runner.parse_scenario_list(LIST_OUTPUT)
    assert [s.name for s in scenarios] == ["initialize", "sse-retry", "auth/dpop", "http-custom-headers"]
    assert scenarios[0].tags == ("2025-06-18", "2025-11-25")
    assert scenarios[2].tags == ("extension",)


def test_a_list_output_without_scenarios_is_an_error_not_an_empty_run() -> None:
    """A changed output format must never turn into a run of nothing that passes."""
    with pytest.raises(ValueError, match="no scenario"):
        runner.parse_scenario_list("Client scenarios (test against a client):\n")


def test_a_scenario_listed_twice_is_an_error() -> None:
    """Two lines with one name would run it twice and count it twice."""
    with pytest.raises(ValueError, match="twice: initialize"):
        runner.parse_scenario_list("  - initialize [2025-11-25]\n  - initialize [2026-07-28]\n")


def test_expected_failures_read_reasons_per_role_on_one_line() -> None:
    """Each entry maps a scenario to its reason, its lines joined, in the [client] or [server] table."""
    expected = runner.parse_expected_failures('[client]\n"auth/dpop" = """\nno DPoP\nproofs\n"""\n[server]\n')
    assert expected.client == {"auth/dpop": "no DPoP proofs"}
    assert expected.server == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[client]\n"sse-retry" = ""\n', "needs a reason"),
        ('[client]\n"sse-retry" = 3\n', "needs a reason"),
        ('[clients]\n"sse-retry" = "x"\n', "unknown table"),
        ('client = "x"\n', "must be a table"),
        ("[client\n", "not TOML"),
    ],
)
def test_expected_failures_refuse_an_entry_without_a_reason_or_a_stray_table(text: str, message: str) -> None:
    """An excuse must say why; a misspelt table must not silently excuse nothing."""
    with pytest.raises(ValueError, match=message):
        runner.parse_expected_failures(text)


def test_the_checked_in_expectations_parse_and_each_gives_a_reason() -> None:
    """tests/conformance/expected_failures.toml is valid and every entry has a reason."""
    expected = runner.parse_expected_failures(runner.EXPECTED_FAILURES.read_text())
    assert all(reason.strip() for reason in [*expected.client.values(), *expected.server.values()])


def test_the_gateways_expectations_parse_and_each_gives_a_reason() -> None:
    """tests/conformance/expected_failures_gateway.toml is valid, server entries only, each with a reason."""
    expected = runner.parse_expected_failures(runner.GATEWAY_EXPECTED_FAILURES.read_text())
    assert expected.client == {}
    assert all(reason.strip() for reason in expected.server.values())


def _ran(label: str, **passed: bool) -> list[runner.Outcome]:
    return [runner.Outcome(scenario=name, client=label, passed=ok) for name, ok in passed.items()]


def test_the_gateway_fails_the_run_when_it_loses_a_scenario_that_passes_directly() -> None:
    """Passes directly, fails (or has no result) through the gateway, not excused: unexpected; both ways fine: ok."""
    direct = _ran(runner.DIRECT, kept=True, lost=True, missing=True)
    through = _ran(runner.GATEWAY, kept=True, lost=False)
    verdict = runner.compare_through_gateway(direct, through, {}, ["kept", "lost", "missing"])
    assert verdict.unexpected == ("lost", "missing")
    assert not verdict.ok
    assert runner.compare_through_gateway(direct[:1], through[:1], {}, ["kept"]).ok


def test_the_gateways_expected_failures_excuse_only_what_still_fails_through_it_alone() -> None:
    """An entry excuses a loss; an entry that passes through the gateway, or fails directly too, is stale."""
    direct = _ran(runner.DIRECT, relayed=True, fixed=True, broken=False, both=False)
    through = _ran(runner.GATEWAY, relayed=False, fixed=True, broken=False, both=False)
    expected = {"relayed": "not relayed yet", "fixed": "was not relayed", "broken": "why", "gone": "why"}
    verdict = runner.compare_through_gateway(direct, through, expected, ["relayed", "fixed", "broken", "both"])
    assert verdict.excused == ("both", "relayed")  # "both": the fixture's own failure, judged by the direct run
    assert verdict.stale == ("broken", "fixed")
    assert verdict.unknown == ("gone",)
    assert verdict.unexpected == ()
    assert not verdict.ok


def test_the_gateway_passes_when_its_only_losses_are_excused() -> None:
    """The run a lead wants to see: every loss listed with its reason, nothing else."""
    direct = _ran(runner.DIRECT, a=True, b=True)
    through = _ran(runner.GATEWAY, a=True, b=False)
    verdict = runner.compare_through_gateway(direct, through, {"b": "not relayed yet"}, ["a", "b"])
    assert verdict.ok and verdict.excused == ("b",)
    lines = runner.verdict_lines(verdict, {"b": "not relayed yet"}, runner.GATEWAY_EXPECTED_FAILURES)
    assert lines == ["expected failure: b: not relayed yet"]


def test_the_verdict_fails_on_an_unexpected_failure_a_stale_entry_and_an_unknown_name() -> None:
    """A failure not excused, an excused scenario that passes, an excuse for no scenario: each fails the run."""
    outcomes = [_outcome("a", False), _outcome("b", True), _outcome("c", False), _outcome("d", True)]
    verdict = runner.verdict(outcomes, {"b": "why", "c": "why", "gone": "why"}, ["a", "b", "c", "d"])
    assert verdict.unexpected == ("a",)
    assert verdict.stale == ("b",)
    assert verdict.excused == ("c",)
    assert verdict.unknown == ("gone",)
    assert not verdict.ok


def test_the_verdict_passes_when_only_excused_scenarios_fail() -> None:
    """Expected failures that fail, everything else passing: the run passes."""
    verdict = runner.verdict([_outcome("a", True), _outcome("c", False)], {"c": "why"}, ["a", "c", "not-run"])
    assert verdict.ok and verdict.excused == ("c",)


def test_a_scenario_not_run_is_neither_stale_nor_unexpected() -> None:
    """With --scenario, an excuse for a scenario that did not run judges nothing."""
    verdict = runner.verdict([_outcome("a", True)], {"c": "why"}, ["a", "c"])
    assert verdict.ok


def test_failed_and_warning_checks_are_reported_with_their_messages() -> None:
    """A FAILURE and a WARNING both fail a scenario (as in the suite); INFO and SUCCESS checks are not reported."""
    checks = [
        {"id": "incoming-request", "status": "INFO", "description": "GET"},
        {"id": "client-sse-graceful-reconnect", "status": "SUCCESS"},
        {"id": "client-sse-retry-timing", "status": "FAILURE", "errorMessage": "Client reconnected\n too early"},
        {"id": "client-sse-last-event-id", "status": "WARNING", "errorMessage": "no Last-Event-ID"},
    ]
    passed, failed, vacuous, note = runner.judge_checks(checks, 1, "")
    assert not passed and not vacuous and note == ""
    assert failed == (
        runner.FailedCheck(id="client-sse-retry-timing", message="Client reconnected too early"),
        runner.FailedCheck(id="client-sse-last-event-id", message="no Last-Event-ID"),
    )


def test_a_pass_with_every_check_skipped_is_vacuous() -> None:
    """A scenario whose checks were all skipped passes in the suite; the runner says it proved nothing."""
    passed, failed, vacuous, _ = runner.judge_checks([{"id": "x", "status": "SKIPPED"}], 0, "")
    assert passed and vacuous and failed == ()


@pytest.mark.parametrize(
    ("output", "note"),
    [
        ("⚠️  CLIENT TIMED OUT - Test incomplete", "the client timed out"),
        (
            "Traceback (most recent call last):\nmcp_actors.errors.ServerConnectionLost: gone\n"
            "⚠️  CLIENT EXITED WITH ERROR (code 1) - Test may be incomplete",
            "the client exited with status 1: mcp_actors.errors.ServerConnectionLost: gone",
        ),
    ],
)
def test_a_failure_without_a_failed_check_says_why(output: str, note: str) -> None:
    """A client that timed out or crashed fails with a note read from the suite's log."""
    passed, failed, _, got = runner.judge_checks([{"id": "x", "status": "SUCCESS"}], 1, output)
    assert not passed and failed == () and got == note


def test_a_crashed_client_is_explained_by_its_own_stderr() -> None:
    """The client's saved stderr names the exception; the suite's summary lines around it do not."""
    output = "Passed: 5/5, 0 failed, 0 warnings\n⚠️  CLIENT EXITED WITH ERROR (code 1) - Test may be incomplete"
    stderr = (
        "2026-12-05 07:04:24,523 conformance.client INFO start\nTraceback (most recent call last):\nKeyError: 'x'\n"
    )
    _, _, _, note = runner.judge_checks([{"id": "x", "status": "SUCCESS"}], 1, output, stderr)
    assert note == "the client exited with status 1: KeyError: 'x'"
    grouped = "  | ValueError: inner\n  +------------------------------------\n"
    _, _, _, note = runner.judge_checks([], 1, output, grouped)
    assert note == "the client exited with status 1: ValueError: inner"


def test_server_checks_fail_on_failures_only() -> None:
    """Server scenarios fail on FAILURE checks; a WARNING does not fail them (the suite's server rule)."""
    passed, failed, _ = runner.judge_server_checks([{"id": "a", "status": "WARNING"}, {"id": "b", "status": "SUCCESS"}])
    assert passed and failed == ()
    passed, failed, _ = runner.judge_server_checks([{"id": "a", "status": "FAILURE", "description": "broke"}])
    assert not passed and failed == (runner.FailedCheck(id="a", message="broke"),)


def test_a_result_directory_names_its_scenario() -> None:
    """The suite's result directories are `<prefix>-<scenario>-<timestamp>`; the scenario is recovered."""
    assert runner.scenario_of_result_dir("server-tools-list-2026-12-05T07-01-43-939Z", "server") == "tools-list"
    assert runner.scenario_of_result_dir("auth/basic-cimd-2026-12-05T07-01-43-939Z") == "auth/basic-cimd"


def test_the_command_line_defaults_to_the_client_command() -> None:
    """`run.py --sdk` is `run.py client --sdk`; `server` needs a URL."""
    args = runner.parse_args(["--sdk", "--scenario", "sse-retry"])
    assert args.command == "client" and args.sdk and args.scenario == ["sse-retry"]
    args = runner.parse_args(["server", "--url", "http://127.0.0.1:1/mcp"])
    assert args.command == "server" and args.url == "http://127.0.0.1:1/mcp"
    with pytest.raises(SystemExit):
        runner.parse_args(["--jobs", "0"])


def test_server_runs_against_a_url_or_the_fixture_never_both_nor_neither() -> None:
    """`server --fixture` starts our fixture server (every scenario by default); `--url` points elsewhere;
    `--gateway` runs the fixture directly and through `mcp-actors serve`, and is exclusive with both."""
    args = runner.parse_args(["server", "--fixture"])
    assert args.fixture and args.url is None and args.suite is None
    for argv in (
        ["server"],
        ["server", "--fixture", "--url", "http://127.0.0.1:1/mcp"],
        ["server", "--gateway", "--fixture"],
    ):
        with pytest.raises(SystemExit):
            runner.parse_args(argv)
    gateway = runner.parse_args(["server", "--gateway", "--spec-version", "2026-07-28"])
    assert gateway.gateway and not gateway.fixture and gateway.spec_version == "2026-07-28"


def test_the_table_shows_each_client_and_the_failing_check() -> None:
    """One row per scenario: a cell per client, the expected failures marked, ours' failing check quoted."""
    failing = runner.Outcome(
        scenario="sse-retry",
        client=runner.OURS,
        passed=False,
        failed=(runner.FailedCheck(id="client-sse-retry-timing", message="too early"),),
    )
    outcomes = {
        (runner.OURS, "sse-retry"): failing,
        (runner.SDK, "sse-retry"): runner.Outcome(scenario="sse-retry", client=runner.SDK, passed=True),
    }
    table = runner.client_table(["sse-retry"], [runner.OURS, runner.SDK], outcomes, {"sse-retry": "why"})
    row = table.splitlines()[2]
    assert row.split()[:4] == ["sse-retry", "fail", "(expected)", "pass"]
    assert row.endswith("client-sse-retry-timing: too early")


def test_a_pass_on_the_solo_run_shows_why_the_first_run_failed() -> None:
    """A scenario rescued by its run alone is marked solo, and the first run's failure stays visible."""
    rescued = runner.Outcome(scenario="s", client=runner.OURS, passed=True, solo=True, first_run="the client timed out")
    table = runner.client_table(["s"], [runner.OURS], {(runner.OURS, "s"): rescued}, {})
    assert table.splitlines()[2].split(None, 3) == ["s", "pass", "(solo)", "first run failed: the client timed out"]
