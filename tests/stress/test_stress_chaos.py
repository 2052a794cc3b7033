"""Chaos and cancellation: killed and stopped servers, Ctrl-C; no process is ever left behind."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from stress_cli import cli_argv, run_cli

from mcp_actors.testing import fault_server_command

FAULT = shlex.join(fault_server_command())
REPO = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code = run_cli(["stress", *args, "--no-live", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict = json.loads(out)
    return doc


def test_kill_every_reports_outages_and_recovery(capsys: pytest.CaptureFixture[str]) -> None:
    """kill-every=1s in a worker process: each kill is an outage with a recovery time; no call outlives its timeout."""
    doc = _run(
        capsys, "--command", FAULT, "--tool", "sleep", "--args", '{"seconds": 0.05}',
        "--rate", "40", "--duration", "2.5s", "--workers", "1", "--timeout", "5s", "--chaos", "kill-every=1s",
    )  # fmt: skip
    outages = doc["chaos"]["outages"]
    # At 1 s and 2 s; one may be skipped when the server is still restarting (no process to kill).
    assert 1 <= len(outages) <= 2 and all(o["kind"] == "kill" for o in outages)
    assert round(outages[0]["at"]) == 1 and all(o["at"] < 2.5 for o in outages)
    for outage in outages:
        # Calls in flight at the kill fail at once (not at their timeout), then a restarted server answers.
        assert outage["time_to_recovery"] is not None and outage["time_to_recovery"] < 5
        if outage["errors"]:
            assert outage["time_to_first_failure"] < 1.0
    assert doc["chaos"]["calls_over_timeout"] == 0
    assert doc["summary"]["latency_ms"]["max"] < 5000 + 1000
    assert set(doc["errors"]) <= {"server_connection_lost", "connection_failed", "server_start_failed"}


def test_a_stopped_server_shows_in_p99_of_the_open_model(capsys: pytest.CaptureFixture[str]) -> None:
    """A server stopped (SIGSTOP) for 1 s under open load: the stall is in p99, then it is continued."""
    doc = _run(
        capsys, "--command", FAULT, "--tool", "echo", "--args", '{"text": "x"}',
        "--rate", "40", "--duration", "3s", "--workers", "0", "--timeout", "10s",
        "--chaos", "stop-every=1.5s,stop-for=1s",
    )  # fmt: skip
    (outage,) = doc["chaos"]["outages"]
    # Never shorter than asked (figures rounded to the ms); longer by however late a loaded
    # machine runs the loop after the 1 s sleep (1.21 s once, under two suites at once).
    assert outage["kind"] == "stop" and 0.99 <= outage["resumed_at"] - outage["at"] < 3.0
    assert outage["errors"] == 0 and outage["time_to_recovery"] >= 0.9
    # About a third of the calls were intended while it was stopped: p90 and p99 carry the queue.
    assert doc["summary"]["latency_ms"]["p99"] > 800
    assert doc["summary"]["service_ms"]["p50"] < 200
    assert doc["summary"]["errors"] == 0


def test_chaos_needs_a_process(capsys: pytest.CaptureFixture[str]) -> None:
    """--chaos against a URL is refused: there is no process to kill."""
    code = run_cli(["stress", "--url", "http://127.0.0.1:9/mcp", "--tool", "echo", "--chaos", "kill-every=1s"])
    assert code == 2
    assert "--chaos kills or stops the server's process" in capsys.readouterr().err


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _running(proc: psutil.Process, argv_head: list[str]) -> list[psutil.Process]:
    """``proc``'s descendants whose argv starts with ``argv_head``.

    The whole argv is compared, not searched: a child the host has forked but not yet
    exec'd (trio runs ``ldconfig`` at import, multiprocessing spawns its workers) still
    shows the host's own command line, which names the fault server inside ``--command``.
    """
    found = []
    for child in _descendants(proc):
        try:
            if child.cmdline()[: len(argv_head)] == argv_head:
                found.append(child)
        except psutil.Error:
            continue
    return found


def _servers(proc: psutil.Process) -> list[psutil.Process]:
    return _running(proc, fault_server_command())


def _workers(proc: psutil.Process) -> list[psutil.Process]:
    """The host's trio-parallel worker processes (multiprocessing's spawn_main)."""
    try:
        return [p for p in _running(proc, [sys.executable, "-B", "-c"]) if "spawn_main" in p.cmdline()[3]]
    except (psutil.Error, IndexError):
        return []


def _start_stress(tmp_path: Path, workers: int) -> subprocess.Popen[bytes]:
    argv = cli_argv(
        "stress", "--command", FAULT, "--tool", "echo", "--args", '{"text": "x"}',
        "--rate", "20", "--duration", "60s", "--workers", str(workers), "--json", "--no-live",
    )  # fmt: skip
    # TMPDIR puts the run's control directory (progress files) where the test can read it.
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), TMPDIR=str(tmp_path)
    )
    # The host gets SIGHUP's default action whatever this process has: a suite started under
    # nohup ignores SIGHUP, the host inherited that, and a "closed terminal" did not kill it.
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        return subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
    finally:
        signal.signal(signal.SIGHUP, hangup)


def _wait_until(
    proc: subprocess.Popen[bytes], found: Callable[[], list[psutil.Process]], what: str, *, interval: float = 0.05
) -> None:
    """Poll ``found`` every ``interval`` s (bounded).

    Each poll walks the whole process table (about a millisecond of CPU): a short interval
    only where the test must catch a process within milliseconds of its start.
    """
    deadline = time.monotonic() + 60
    while not found():
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, f"{what} did not start"
        time.sleep(interval)


def _start_and_wait_for_servers(tmp_path: Path, count: int) -> tuple[subprocess.Popen[bytes], list[psutil.Process]]:
    proc = _start_stress(tmp_path, count)
    host = psutil.Process(proc.pid)
    _wait_until(proc, lambda: _servers(host)[count - 1 :], "the servers")
    return proc, _descendants(host)


def _wait_for_calls(tmp_path: Path, proc: subprocess.Popen[bytes]) -> None:
    """Wait (bounded) until a worker's progress file shows finished calls."""
    deadline = time.monotonic() + 60
    while True:
        for path in tmp_path.glob("mcp-actors-stress-control-*/progress-*.json"):
            try:
                if json.loads(path.read_text())["finished"] > 0:
                    return
            except (OSError, ValueError, KeyError):
                continue
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline, "no call was made"
        time.sleep(0.1)


def _running_still(proc: psutil.Process) -> bool:
    """Alive and not a zombie: an orphan's zombie waits for an init that may not reap it here."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _assert_all_gone(procs: list[psutil.Process]) -> None:
    deadline = time.monotonic() + 15
    while (alive := [p for p in procs if _running_still(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    described = []
    for p in alive:
        with contextlib.suppress(psutil.Error):
            described.append(" ".join(p.cmdline()))
            p.kill()
    assert not alive, described


def _stopped_mid_run(tmp_path: Path, workers: int, stop: Callable[[int], None]) -> dict:
    """Start a run, wait for calls, ``stop(host_pid)``; check exit 130 and nothing left; the report."""
    proc, family = _start_and_wait_for_servers(tmp_path, workers)
    _wait_for_calls(tmp_path, proc)
    stop(proc.pid)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    _assert_all_gone(family)
    doc: dict = json.loads(out)
    return doc


def test_ctrl_c_stops_gracefully_and_reports(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the group) mid-run: exit 130, the calls made so far reported, no process left."""
    doc = _stopped_mid_run(tmp_path, 2, lambda pid: os.killpg(pid, signal.SIGINT))
    assert doc["summary"]["requests"] > 0
    assert doc["summary"]["measured_seconds"] < 30


def test_sigterm_stops_gracefully_and_reports_like_ctrl_c(tmp_path: Path) -> None:
    """SIGTERM (a service manager's or a CI job's timeout) is a stop request: results printed, exit 130."""
    doc = _stopped_mid_run(tmp_path, 1, lambda pid: os.kill(pid, signal.SIGTERM))
    assert doc["summary"]["requests"] > 0


def test_second_ctrl_c_aborts_and_leaves_nothing(tmp_path: Path) -> None:
    """A second Ctrl-C aborts at once (workers killed); their servers are still killed."""
    proc, family = _start_and_wait_for_servers(tmp_path, 1)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    _assert_all_gone(family)


def test_ctrl_c_reaching_a_starting_worker_interrupts_the_run(tmp_path: Path) -> None:
    """A Ctrl-C that kills a worker process still starting is an interruption (130), not a crash.

    A worker ignores SIGINT only once trio-parallel's loop runs in it; the terminal's Ctrl-C
    reaches the whole process group, so a worker still importing dies of it. The test holds
    the worker (SIGSTOP) as soon as it is exec'd, sends the Ctrl-C, then lets it go on.
    """
    proc = _start_stress(tmp_path, 1)
    host = psutil.Process(proc.pid)
    _wait_until(proc, lambda: _workers(host), "the worker", interval=0.005)
    [worker] = _workers(host)
    worker.suspend()
    family = _descendants(host)
    os.killpg(proc.pid, signal.SIGINT)
    # The host's own Ctrl-C handling may kill the held worker first (SIGKILL needs no resume):
    # then there is nothing to let go on, and the run must still end as interrupted.
    with contextlib.suppress(psutil.NoSuchProcess):
        worker.resume()
    _, err = proc.communicate(timeout=60)
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert "unexpected" not in stderr and "interrupted" in stderr, stderr
    _assert_all_gone(family)


def test_a_worker_killed_mid_run_fails_the_run_with_a_typed_error(tmp_path: Path) -> None:
    """A worker killed from outside (as by the OOM killer) ends the run with StressWorkerDied; its servers die too."""
    proc, family = _start_and_wait_for_servers(tmp_path, 1)
    _wait_for_calls(tmp_path, proc)
    [worker] = _workers(psutil.Process(proc.pid))
    worker.kill()
    _, err = proc.communicate(timeout=60)
    stderr = err.decode()
    assert proc.returncode == 1, stderr
    assert "stress worker 0 was killed by SIGKILL; its calls are lost" in stderr, stderr
    assert "unexpected" not in stderr, stderr
    _assert_all_gone(family)


@pytest.mark.parametrize("how", [signal.SIGHUP, signal.SIGKILL])
def test_a_host_killed_mid_run_takes_its_workers_and_their_servers_along(tmp_path: Path, how: signal.Signals) -> None:
    """The stress host killed (its terminal closed, kill -9, a crash): its workers stop at once, not at --duration.

    The run would last 60 s; the worker processes and their servers must be gone well before.
    """
    proc, family = _start_and_wait_for_servers(tmp_path, 1)
    _wait_for_calls(tmp_path, proc)
    assert _workers(psutil.Process(proc.pid))
    os.kill(proc.pid, how)
    assert proc.wait(timeout=60) == -how
    _assert_all_gone(family)
