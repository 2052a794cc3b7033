"""The ``mcp-actors`` command, run for real in subprocesses against temporary configs.

Each test writes its own config file and points ``MCP_ACTORS_CONFIG`` at it. Commands
that do not depend on each other run concurrently (``trio.run_process`` in a nursery):
every command pays for importing the MCP SDK, and running them side by side keeps the
file fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import psutil
import pytest
import trio
from testkit import Result, cli_env

from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType, builtin_demo_record
from mcp_actors._config.store import ConfigStore
from mcp_actors.formats import fetch_mcp_tools, setup_mcp_tools
from mcp_actors.runtime import open_runtime
from mcp_actors.testing import fault_server_command

_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]
RUN_BOUND = 120.0
"""Upper bound of one command under a loaded CI machine; commands normally take 1-3 s."""


async def cli(config: Path, *args: str, stdin: str | None = None) -> Result:
    """Run one command to completion (bounded) and capture its output."""
    with trio.fail_after(RUN_BOUND):
        done = await trio.run_process(
            [*CLI, *args],
            stdin=stdin.encode() if stdin is not None else b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=cli_env(config),
        )
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


async def cli_many(config: Path, *commands: Sequence[str]) -> list[Result]:
    """Run independent commands concurrently; results in the order given."""
    results: list[Result | None] = [None] * len(commands)

    async def one(i: int, args: Sequence[str]) -> None:
        results[i] = await cli(config, *args)

    async with trio.open_nursery() as nursery:
        for i, args in enumerate(commands):
            nursery.start_soon(one, i, args)
    return [r for r in results if r is not None]


def stdio(name: str, argv: Sequence[str], *, trusted: bool = False) -> McpServerRecord:
    return McpServerRecord(
        name=name,
        type=ServerType.STDIO,
        config=ServerConfig(command=argv[0], args=tuple(argv[1:]), ping_interval=0),
        is_trusted=trusted,
    )


def write_config(path: Path, *records: McpServerRecord) -> Path:
    ConfigStore(path).save(records)
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """fs: a trusted fault server; guarded: the same, untrusted; broken: a command that does not exist."""
    return write_config(
        tmp_path / "mcp-config.json",
        stdio("fs", fault_server_command(), trusted=True),
        stdio("guarded", fault_server_command()),
        stdio("broken", ["mcp-actors-no-such-command"], trusted=True),
    )


# --------------------------------------------------------------------------- servers


async def test_servers_import_list_and_edit(tmp_path: Path) -> None:
    """import keeps good entries, rejects bad ones (exit 2); add/disable/enable/trust/untrust/remove edit the file."""
    config = tmp_path / "mcp-config.json"
    document = {
        "mcpServers": {
            "fs": {"command": sys.executable, "args": ["-m", "x"], "env": {"TOKEN": "s3cret-env"}},
            "remote": {"url": "http://127.0.0.1:9/mcp?token=s3cret-q", "headers": {"Authorization": "Bearer s3cret-h"}},
            "bad": {"command": 42},
        }
    }
    imported = await cli(config, "servers", "import", "-", "--json", stdin=json.dumps(document))
    assert imported.rc == 2
    by_name = {entry["name"]: entry for entry in imported.json()}
    assert by_name["fs"]["ok"] and by_name["remote"]["ok"] and not by_name["bad"]["ok"]
    assert "command" in by_name["bad"]["error"]
    assert "'bad'" in imported.error_line()

    listed = await cli(config, "servers", "list", "--json")
    assert listed.rc == 0
    assert "s3cret" not in listed.stdout
    servers = {s["name"]: s for s in listed.json()["servers"]}
    assert list(servers) == ["demo", "fs", "remote"]  # a fresh install's demo server is kept
    assert servers["fs"]["config"]["env"] == {"TOKEN": "***"}
    assert servers["remote"]["config"]["headers"] == {"Authorization": "***"}

    add_local, add_web, disabled, trusted, removed = await cli_many(
        config,
        [
            *("servers", "add", "local", "--command", "srv", "--arg", "-m", "--arg", "x"),
            *("--env", "A=s3cret-a", "--cwd", str(tmp_path), "--json"),
        ],
        ["servers", "add", "web", "--url", "http://127.0.0.1:9/sse", "--header", "K=s3cret-k", "--trust", "--json"],
        ["servers", "disable", "fs"],
        ["servers", "trust", "remote", "--json"],
        ["servers", "remove", "demo"],
    )
    assert add_local.rc == 0 and add_local.json()["type"] == "stdio"
    assert add_local.json()["config"]["args"] == ["-m", "x"] and "s3cret" not in add_local.stdout
    assert add_local.json()["config"]["cwd"] == str(await trio.Path(tmp_path).resolve())
    assert add_local.json()["config"]["env"] == {"A": "***"}
    assert add_web.rc == 0 and add_web.json()["type"] == "sse" and add_web.json()["isTrusted"]
    assert disabled.rc == 0 and "Disabled server 'fs'" in disabled.stdout
    assert trusted.rc == 0 and trusted.json()["isTrusted"] is True
    assert removed.rc == 0 and "Removed server 'demo'" in removed.stdout

    enabled, untrusted = await cli_many(config, ["servers", "enable", "fs", "--json"], ["servers", "untrust", "web"])
    assert enabled.rc == 0 and enabled.json()["isActive"] is True
    assert untrusted.rc == 0

    final = {s["name"]: s for s in (await cli(config, "servers", "list", "--json")).json()["servers"]}
    assert sorted(final) == ["fs", "local", "remote", "web"]
    assert final["fs"]["isActive"] and final["remote"]["isTrusted"] and not final["web"]["isTrusted"]
    table = await cli(config, "servers", "list")
    assert table.rc == 0 and "(env: A)" in table.stdout and "s3cret" not in table.stdout


async def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    """Bad options are one stderr line, exit 2, and never echo a secret value."""
    config = tmp_path / "mcp-config.json"
    both, no_equals, missing_name, bad_format, unknown_server = await cli_many(
        config,
        ["servers", "add", "x", "--command", "a", "--url", "http://127.0.0.1:9/mcp"],
        ["servers", "add", "x", "--command", "a", "--env", "s3cret-no-equals"],
        ["servers", "add"],
        ["tools", "--format", "xml"],
        ["servers", "remove", "nope"],
    )
    for result in (both, no_equals, missing_name, bad_format, unknown_server):
        assert result.rc == 2, result
        assert result.stdout == ""
        result.error_line()
    assert "exactly one of --command" in both.error_line()
    assert "--env" in no_equals.error_line() and "s3cret" not in no_equals.stderr
    assert "'nope'" in unknown_server.error_line()
    assert not config.exists()  # nothing was written


async def test_corrupt_config_is_one_line_unless_debug(tmp_path: Path) -> None:
    """A corrupt config names its path in one line; --debug adds the traceback."""
    config = tmp_path / "mcp-config.json"
    config.write_text('{"mcpServers": [', encoding="utf-8")
    plain, debug = await cli_many(config, ["servers", "list"], ["--debug", "servers", "list"])
    assert plain.rc == 2 and str(config) in plain.error_line()
    assert debug.rc == 2 and "Traceback" in debug.stderr
    assert config.read_text(encoding="utf-8") == '{"mcpServers": ['


# --------------------------------------------------------------------------- tools


async def test_tools_in_every_format_match_setup_mcp_tools(config: Path) -> None:
    """tools --format prints setup_mcp_tools' definitions; a failing server goes to stderr and the others print."""
    formats = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}
    *provider_results, table, partial = await cli_many(
        config,
        *(["tools", "--format", name] for name in formats),
        ["tools"],
        ["tools", "--format", "mcp", "--server", "fs", "--server", "nope"],
    )

    # The same config in this process: what setup_mcp_tools gives an agent (broken is skipped).
    async with open_runtime(config) as runtime:
        expected = {}
        for name, api_format in formats.items():
            setup = await setup_mcp_tools(runtime.service, {"enabled": True}, api_format=api_format)
            assert setup is not None
            expected[name] = json.loads(json.dumps(setup[0]))
        mcp_tools = await fetch_mcp_tools(runtime.service, {"enabled": True})

    for name, result in zip(formats, provider_results, strict=True):
        assert result.rc == 3, result
        assert result.json() == expected[name]
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "broken" in lines[0] and "not found on PATH" in lines[0]
    assert table.rc == 3 and "mcp__fs__echo" in table.stdout and "mcp__guarded__echo" in table.stdout
    assert partial.rc == 2 and "'nope'" in partial.error_line()
    assert partial.json() == [
        {
            "id": t.id,
            "name": t.name,
            "description": t.description,
            "inputSchema": t.input_schema,
            "serverId": t.server_id,
            "serverName": t.server_name,
        }
        for t in mcp_tools
        if t.server_name == "fs"
    ]


# --------------------------------------------------------------------------- call


async def test_call_exit_codes(config: Path) -> None:
    """call: 0 success, 1 tool error, 2 usage, 3 timeout; --json prints the whole MCP result."""
    echo, added, failed, timed_out, unknown_tool, bad_args, needs_yes = await cli_many(
        config,
        ["call", "mcp__fs__echo", "--args", '{"text": "hi there"}'],
        ["call", "guarded/add", "--args", '{"a": 2, "b": 3}', "--yes", "--json"],
        ["call", "mcp__fs__fail", "--args", '{"message": "boom"}'],
        ["call", "fs/sleep", "--args", '{"seconds": 60}', "--timeout", "0.5"],
        ["call", "mcp__fs__nope"],
        ["call", "fs/echo", "--args", "[1, 2]"],
        ["call", "guarded/echo", "--args", '{"text": "x"}'],
    )
    assert (echo.rc, echo.stdout, echo.stderr) == (0, "hi there\n", "")
    assert added.rc == 0 and added.stderr == ""
    assert added.json()["content"] == [{"type": "text", "text": "5"}] and added.json()["isError"] is False
    assert failed.rc == 1 and failed.stdout == "" and "boom" in failed.error_line()
    assert timed_out.rc == 3 and "within 0.5s" in timed_out.error_line()
    assert unknown_tool.rc == 2 and "mcp__fs__nope" in unknown_tool.error_line()
    assert bad_args.rc == 2 and "JSON object" in bad_args.error_line()
    assert needs_yes.rc == 2 and "--yes" in needs_yes.error_line() and needs_yes.stdout == ""


async def test_call_refuses_what_json_cannot_carry(tmp_path: Path) -> None:
    """NaN, Infinity, -Infinity and numbers too large for a double in --args are a usage error naming the field.

    Inline, from @FILE and from stdin alike, and in stress --args too (one parser). A
    --timeout that is not a positive finite number is refused with the config's wording.
    Before, Python's json read them as floats, the call went out with null in their place
    (exit 0), and --timeout inf was accepted.
    """
    config = tmp_path / "mcp-config.json"
    (tmp_path / "args.json").write_text('{"text": "x", "more": {"items": [1, 1e400]}}')
    results = await cli_many(
        config,
        ["call", "demo/echo", "--args", '{"text": NaN}'],
        ["call", "demo/add", "--args", '{"a": Infinity, "b": 1}'],
        ["call", "demo/add", "--args", '{"a": 1, "b": -Infinity}', "--json"],
        ["call", "demo/echo", "--args", f"@{tmp_path / 'args.json'}"],
        ["stress", "--command", "true", "--tool", "echo", "--args", '{"text": NaN}'],
        ["call", "demo/add", "--args", '{"a": 1, "b": 2}', "--timeout", "inf"],
        ["call", "demo/add", "--args", '{"a": 1, "b": 2}', "--timeout", "1e309"],
        ["call", "demo/add", "--args", '{"a": 1, "b": 2}', "--timeout", "nan"],
    )
    piped = await cli(config, "call", "demo/echo", "--args", "-", stdin='{"text": ["a", NaN]}')
    nan, inf, minus_inf, from_file, stress, *timeouts = results
    for result in (*results, piped):
        assert result.rc == 2, result
        result.error_line()
    for result, path, token in (
        (nan, "arguments.text", "NaN"),
        (inf, "arguments.a", "Infinity"),
        (minus_inf, "arguments.b", "-Infinity"),
        (from_file, "arguments.more.items[1]", "1e400"),
        (stress, "arguments.text", "NaN"),
        (piped, "arguments.text[1]", "NaN"),
    ):
        line = result.error_line()
        assert f"--args: {path} is {token}, not a finite JSON number" in line, line
    assert minus_inf.json()["error"]["type"] == "CliError" and minus_inf.json()["error"]["exitCode"] == 2
    for result, shown in zip(timeouts, ("inf", "inf", "nan"), strict=True):
        assert f"--timeout must be a finite number of seconds > 0, got {shown}" in result.error_line()


def _run_on_terminal(config: Path, args: Sequence[str], answer: bytes) -> tuple[int, str, str]:
    """Run with stdin and stderr on a pseudo-terminal, type ``answer``; return (rc, stdout, terminal)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*CLI, *args],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=cli_env(config, TERM="xterm-256color"),
        )
    finally:
        os.close(slave)
    os.write(master, answer)  # the terminal holds the typed line until the prompt reads it
    screen = bytearray()

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the last holder of the terminal went away
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        stdout, _ = proc.communicate(timeout=RUN_BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        os.close(master)
    return proc.returncode, stdout.decode(), screen.decode(errors="replace")


async def test_call_asks_on_a_terminal(config: Path) -> None:
    """On a terminal a call of an untrusted tool shows progress, asks, and obeys the answer."""

    def both() -> list[tuple[int, str, str]]:
        results: list[tuple[int, str, str]] = [(0, "", ""), (0, "", "")]

        def run(i: int, answer: bytes) -> None:
            results[i] = _run_on_terminal(config, ["call", "mcp__guarded__echo", "--args", '{"text": "ok"}'], answer)

        threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate([b"y\n", b"n\n"])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    (yes_rc, yes_out, yes_screen), (no_rc, no_out, no_screen) = await trio.to_thread.run_sync(both)
    assert "Connecting guarded" in yes_screen
    assert "Call tool 'echo' of server 'guarded'" in yes_screen
    assert (yes_rc, yes_out) == (0, "ok\n")
    assert (no_rc, no_out) == (1, "")
    assert "declined" in no_screen


# --------------------------------------------------------------------------- test, discover


async def test_test_and_discover(config: Path) -> None:
    """test prints tool names and timing; discover finds the demo's tools, prompts and resources."""
    write_config(config, *ConfigStore(config).load(), stdio("demo", [sys.executable, "-m", "mcp_actors.demo_server"]))
    tested, broken, discovered = await cli_many(
        config, ["test", "fs"], ["test", "broken", "--json"], ["discover", "demo", "--json"]
    )
    assert tested.rc == 0 and "5 tool(s): echo, add, sleep, big, fail" in tested.stdout
    assert "connected in" in tested.stdout and "mcp-actors-fault" in tested.stdout
    assert broken.rc == 3 and "not found on PATH" in broken.error_line()
    assert broken.json()["ok"] is False and broken.json()["tools"] == [] and "not found" in broken.json()["error"]
    found = discovered.json()
    assert discovered.rc == 0 and found["errors"] == {}
    assert "mcp__demo__echo" in [t["id"] for t in found["tools"]]
    assert "greeting" in [p["name"] for p in found["prompts"]]
    assert "demo://readme" in [r["uri"] for r in found["resources"]]


# --------------------------------------------------------------------------- watch


@attrs.define
class LineReader:
    """Lines of a pipe, read by a thread, waited for with a deadline (never a sleep)."""

    lines: queue.Queue[str | None] = attrs.field(factory=queue.Queue)

    def start(self, stream: Any) -> None:
        def pump() -> None:
            for raw in stream:
                self.lines.put(raw.decode())
            self.lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def until(self, predicate: Any, deadline: float) -> Iterator[dict[str, Any]]:
        """Yield parsed lines up to and including the first one satisfying ``predicate``."""
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, "the command ended before the expected event"
            event = json.loads(line)
            yield event
            if predicate(event):
                return


@attrs.define
class WatchRun:
    """One ``mcp-actors watch --json`` process: its output lines, and how it ended."""

    proc: subprocess.Popen[bytes]
    reader: LineReader
    deadline: float
    rc: int | None = None
    stderr: str = ""


@contextlib.contextmanager
def watching(config: Path) -> Iterator[WatchRun]:
    """Run ``watch --json`` on ``config`` for the block; Ctrl-C (SIGINT) at its end, killed if it outlives that."""
    proc = subprocess.Popen(
        [*CLI, "watch", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(config)
    )
    try:
        run = WatchRun(proc=proc, reader=LineReader(), deadline=time.monotonic() + RUN_BOUND)
        run.reader.start(proc.stdout)
        yield run
        proc.send_signal(signal.SIGINT)
        run.rc = proc.wait(timeout=RUN_BOUND)
        run.stderr = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _state(server: str, state: str) -> Any:
    return lambda e: (
        e["type"] == "connection:state" and e["data"]["serverName"] == server and e["data"]["state"] == state
    )


def test_watch_streams_events_until_interrupted(tmp_path: Path) -> None:
    """watch --json connects the servers, streams their state changes live (a kill included), stops on Ctrl-C."""
    config = write_config(tmp_path / "mcp-config.json", stdio("fs", fault_server_command()))
    with watching(config) as run:
        seen = list(run.reader.until(_state("fs", "connected"), run.deadline))
        [server] = [
            p
            for p in psutil.Process(run.proc.pid).children()
            if "mcp_actors.testing.fault_server" in " ".join(p.cmdline())
        ]
        server.kill()
        seen += list(run.reader.until(_state("fs", "error"), run.deadline))
    assert run.rc == 0, run.stderr
    assert run.stderr == ""
    states = [e["data"]["state"] for e in seen if e["type"] == "connection:state"]
    assert states[:2] == ["connecting", "connected"] and states[-1] == "error"
    # The first sign of the death names it: the exit by SIGKILL, or (when the pipes close
    # first, as they may on a loaded machine) the closed stdout or stdin of the killed server.
    error = seen[-1]["data"]["error"]
    assert any(sign in error for sign in ("killed by SIGKILL", "closed its stdout", "stdout closed", "stdin")), error
    assert [e["seq"] for e in seen] == sorted(e["seq"] for e in seen)


def test_watch_connects_servers_another_process_adds_enables_or_renames(tmp_path: Path) -> None:
    """A server added, enabled or renamed by another mcp-actors command while watch runs is connected by watch.

    Before, watch connected only the servers active at its start: it printed the
    servers:changed event of an added or enabled server but never connected it.
    """
    demo_off = attrs.evolve(builtin_demo_record(), is_active=False)
    config = write_config(tmp_path / "mcp-config.json", stdio("fs", fault_server_command()), demo_off)

    def edit(*args: str) -> None:
        done = subprocess.run([*CLI, *args], env=cli_env(config), capture_output=True, timeout=RUN_BOUND, check=False)
        assert done.returncode == 0, done.stderr

    def connected(*names: str) -> Any:
        waiting = set(names)

        def seen(event: dict[str, Any]) -> bool:
            if _state(event["data"].get("serverName", ""), "connected")(event):
                waiting.discard(event["data"]["serverName"])
            return not waiting

        return seen

    with watching(config) as run:
        list(run.reader.until(connected("fs"), run.deadline))
        command = fault_server_command()
        edit("servers", "add", "d2", "--command", command[0], *(f"--arg={a}" for a in command[1:]))
        edit("servers", "enable", "demo")
        list(run.reader.until(connected("d2", "demo"), run.deadline))
        edit("servers", "update", "d2", "--rename", "d3")
        list(run.reader.until(connected("d3"), run.deadline))
    assert run.rc == 0, run.stderr


# --------------------------------------------------------------------------- demo, entry points


async def test_demo_runs_every_step_without_touching_the_config(tmp_path: Path) -> None:
    """demo starts, converts, calls, times out, survives a kill and reconnects; the user's config is untouched."""
    config = tmp_path / "mcp-config.json"
    as_json, for_people = await cli_many(config, ["demo", "--json"], ["demo"])
    assert as_json.rc == 0, as_json.stderr
    summary = as_json.json()
    assert summary["ok"] is True
    steps = {step["name"]: step for step in summary["steps"]}
    assert list(steps) == [
        "start",
        "format OpenAI",
        "format Anthropic",
        "format Gemini",
        "call echo",
        "call add",
        "tool error",
        "timeout",
        "fail fast",
        "reconnect",
    ]
    assert all(step["ok"] for step in steps.values())
    assert "ToolCallTimeout" in steps["timeout"]["outcome"] and steps["timeout"]["seconds"] < 5
    assert "ServerConnectionLost" in steps["fail fast"]["outcome"] and steps["fail fast"]["seconds"] < 5
    assert for_people.rc == 0, for_people.stderr
    assert "10 of 10 steps behaved as expected" in for_people.stdout
    assert "mcp__demo__add" in for_people.stdout and "functionDeclarations" in for_people.stdout
    assert not config.exists()


def test_python_dash_m_runs_the_command(tmp_path: Path) -> None:
    """``python -m mcp_actors`` is the same command; with no arguments it shows help and exits 2."""
    env = cli_env(tmp_path / "mcp-config.json")
    helped = subprocess.run(
        [sys.executable, "-m", "mcp_actors", "--help"], capture_output=True, text=True, env=env, timeout=RUN_BOUND
    )
    bare = subprocess.run(
        [sys.executable, "-m", "mcp_actors"], capture_output=True, text=True, env=env, timeout=RUN_BOUND
    )
    assert helped.returncode == 0 and "servers" in helped.stdout and "demo" in helped.stdout
    assert bare.returncode == 2 and "Usage" in bare.stdout + bare.stderr
