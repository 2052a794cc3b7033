"""The ``mcp-actors`` command as real processes: what only a process shows.

Everything else about the command runs in the test process (``clikit.invoke``, ~100x
faster). These few stay processes because the behaviour lives at the process boundary:

* the real entry points: the installed ``mcp-actors`` script and ``python -m mcp_actors``,
  and their exit statuses;
* Ctrl-C (SIGINT) ending ``watch``, which streams a real stdio server's events (its
  process is killed mid-run);
* a terminal (a pseudo-terminal): ``call`` asking before an untrusted tool and drawing
  progress, ``servers import`` asking for inputs without echoing a password;
* what a fresh interpreter imports (``servers add`` starts no runtime), where a process
  keeps its state (chosen once per process) and a per-process file-size limit (an
  unwritable config). These run as scripts in a process of their own, forked from an
  interpreter that has the MCP SDK imported (``forkrun``): nothing of mcp-actors is
  imported ahead, and the process is spared the SDK's import.

The servers are the fault server (``mcp_actors.testing.fault_server``, no MCP SDK) wherever the
behaviour is not about a server built on the MCP SDK.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pty
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import forkrun
import psutil
from clikit import invoke, stdio, write_config
from testkit import cli_env

from mcp_actors import __version__
from mcp_actors._config.store import ConfigStore
from mcp_actors.testing import fault_server_command

_SCRIPT = Path(sys.executable).with_name("mcp-actors")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mcp_actors"]
RUN_BOUND = 120.0
"""Upper bound of one command under a loaded machine; commands normally take 1-3 s."""


# --------------------------------------------------------------------------- entry points


def _run(argv: Sequence[str], env: dict[str, str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=RUN_BOUND, check=False, **kwargs)


def test_the_script_and_python_dash_m_are_the_command(tmp_path: Path) -> None:
    """The installed script prints the version; ``python -m mcp_actors`` is the same command.

    With no arguments it shows the help and exits 2.
    """
    env = cli_env(tmp_path / "mcp-config.json")
    commands = [[*CLI, "--version"], [sys.executable, "-m", "mcp_actors"]]
    with concurrent.futures.ThreadPoolExecutor(len(commands)) as pool:
        version, bare = pool.map(lambda argv: _run(argv, env), commands)
    assert (version.returncode, version.stdout) == (0, f"mcp-actors {__version__}\n"), version.stderr
    shown = bare.stdout + bare.stderr
    assert bare.returncode == 2 and "Usage" in shown and "servers" in shown and "demo" in shown


# --------------------------------------------------------------------------- watch and Ctrl-C


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
    off = attrs.evolve(stdio("off", fault_server_command()), is_active=False)
    config = write_config(tmp_path / "mcp-config.json", stdio("fs", fault_server_command()), off)

    def edit(*args: str) -> None:  # this test's process is the other process
        done = invoke(config, *args)
        assert done.rc == 0, done.stderr

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
        edit("servers", "enable", "off")
        list(run.reader.until(connected("d2", "off"), run.deadline))
        edit("servers", "update", "d2", "--rename", "d3")
        list(run.reader.until(connected("d3"), run.deadline))
    assert run.rc == 0, run.stderr


# --------------------------------------------------------------------------- terminals


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


def test_call_asks_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal a call of an untrusted tool shows progress, asks, and obeys the answer."""
    config = write_config(tmp_path / "mcp-config.json", stdio("guarded", fault_server_command()))
    args = ["call", "mcp__guarded__echo", "--args", '{"text": "ok"}']
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        yes, no = pool.map(lambda answer: _run_on_terminal(config, args, answer), [b"y\n", b"n\n"])
    (yes_rc, yes_out, yes_screen), (no_rc, no_out, no_screen) = yes, no
    assert "Connecting guarded" in yes_screen
    assert "Call tool 'echo' of server 'guarded'" in yes_screen
    assert (yes_rc, yes_out) == (0, "ok\n")
    assert (no_rc, no_out) == (1, "")
    assert "declined" in no_screen


def _type_on_prompts(
    args: Sequence[str],
    env: dict[str, str],
    answers: Sequence[tuple[str, bytes]],
    bound: float = RUN_BOUND,
    think: float = 0.0,
) -> str:
    """Run on a pseudo-terminal; type each answer once its prompt shows; return the whole screen.

    A person takes ``think`` seconds to type each answer after its prompt shows. A prompt
    that has not shown within ``bound`` seconds fails the test (the command is killed).
    Once every answer is typed, the screen is read until the command exits (within
    ``RUN_BOUND``), so what it prints last is on the screen.
    """
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([*CLI, *args], stdin=slave, stdout=slave, stderr=slave, env=env)
    finally:
        os.close(slave)
    screen = bytearray()
    pending = list(answers)
    deadline = time.monotonic() + bound  # for the prompts to show
    exit_deadline = time.monotonic() + RUN_BOUND  # for the command to end once answered
    typed_at = 0  # where the screen was when the last answer was typed
    shown_at: float | None = None  # when the next answer's prompt showed
    try:
        while time.monotonic() < (deadline if pending else exit_deadline):
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the command exited and closed the terminal
                    break
                if not chunk:
                    break
                screen.extend(chunk)
            if pending and pending[0][0].encode() in screen[typed_at:]:
                shown_at = shown_at or time.monotonic()
                if time.monotonic() - shown_at >= think:
                    os.write(master, pending.pop(0)[1])
                    typed_at, shown_at = len(screen), None
            if proc.poll() is not None and not ready:
                break
        assert not pending, f"never shown: {pending[0][0]!r}; the screen: {screen.decode(errors='replace')!r}"
        proc.wait(timeout=RUN_BOUND)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0, screen.decode(errors="replace")
    return screen.decode(errors="replace")


def test_import_resolves_workspace_folder_and_asks_inputs_on_a_terminal(tmp_path: Path) -> None:
    """VS Code import: ${workspaceFolder} from the file's place; inputs asked once (password unechoed), stored."""
    project = tmp_path / "project"
    (project / ".vscode").mkdir(parents=True)
    source = project / ".vscode" / "mcp.json"
    source.write_text(
        json.dumps(
            {
                "inputs": [
                    {"type": "promptString", "id": "api-key", "description": "API key", "password": True},
                    {"type": "promptString", "id": "tz", "description": "Time zone"},
                ],
                "servers": {
                    "app": {
                        "command": "node",
                        "args": ["${workspaceFolder}/server.js"],
                        "cwd": "${workspaceFolder}",
                        "env": {"API_KEY": "${input:api-key}", "TZ": "${input:tz}", "HOME_DIR": "${env:HOME}"},
                    }
                },
            }
        ),
        encoding="utf-8",
    )
    config = tmp_path / "mcp-config.json"
    env = cli_env(config, TERM="dumb")
    screen = _type_on_prompts(
        ["servers", "import", str(source)],
        env,
        [("API key (${input:api-key})", b"hidden-key-987\n"), ("Time zone (${input:tz})", b"Europe/Oslo\n")],
    )
    assert "hidden-key-987" not in screen  # a password input is typed without echo
    assert "Europe/Oslo" in screen
    record = {r.name: r for r in ConfigStore(config).load()}["app"]
    assert record.config.args == (f"{project}/server.js",) and record.config.cwd == str(project)
    assert record.config.env == {"API_KEY": "hidden-key-987", "TZ": "Europe/Oslo", "HOME_DIR": "${env:HOME}"}
    # Not on a terminal: nothing is asked, and the import says what is unresolved and how to fix it.
    other = tmp_path / "other.json"
    write_config(other)
    piped = invoke(other, "servers", "import", str(source), "--json")
    assert piped.rc == 0, piped.stderr
    [entry] = piped.json()
    assert any("unresolved: ${input:api-key} in env.API_KEY" in n and "servers update app" in n for n in entry["notes"])


def test_call_shows_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal, `call` draws the tool's progress messages on stderr; stdout gets the result only."""
    config = write_config(tmp_path / "cfg.json", stdio("slow", fault_server_command(), trusted=True))
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(config), "COLUMNS": "120"}
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*CLI, "call", "slow/sleep", "--args", '{"seconds": 1}'],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            env=env,
        )
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            ready, _, _ = select.select([leader], [], [], RUN_BOUND)
            if not ready:
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the pty closed with the process
                break
            if not chunk:
                break
            drawn += chunk
        stdout, _ = proc.communicate(timeout=RUN_BOUND)
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert proc.returncode == 0
    assert stdout == b"slept 1 s\n"
    assert b"slow/sleep: slept" in drawn


_ASKER = """
import anyio
import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer

from mcp_actors._demo.callbacks import _answer, _ask, _modern

NAME = {"type": "object", "properties": {"name": {"type": "string", "title": "Your name"}}, "required": ["name"]}
server = MCPServer(name="asker")


@server.tool(description="Reports progress, then asks the user's name, then reports progress again.")
async def ask(ctx: Context) -> str | types.InputRequiredResult:
    await ctx.report_progress(1, 3, "warming up")
    await anyio.sleep(1.0)  # long enough for the bar to be drawn, and redrawn
    if _modern(ctx):
        answer = _answer(ctx, "name")
        if not isinstance(answer, types.ElicitResult):
            params = types.ElicitRequestFormParams(message="What is your name?", requested_schema=NAME)
            return _ask("name", types.ElicitRequest(params=params))
        content = answer.content or {}
    else:
        result = await ctx.session.elicit_form("What is your name?", NAME, related_request_id=ctx.request_id)
        content = result.content or {}
    await ctx.report_progress(2, 3, "answered")
    await anyio.sleep(0.5)
    return f"hello {content.get('name')}"


server.run()
"""


def test_call_pauses_its_progress_bar_while_a_server_asks_the_user(tmp_path: Path) -> None:
    """On a terminal a question asked mid-call shows, and stays shown, while the user answers; the bar then resumes.

    Before, the progress bar kept redrawing over the question, and a field's prompt (a line
    without its end) never showed at all: the user answered blind.
    """
    script = tmp_path / "asker.py"
    script.write_text(_ASKER, encoding="utf-8")
    config = write_config(tmp_path / "mcp-config.json", stdio("asker", [sys.executable, str(script)], trusted=True))
    screen = _type_on_prompts(
        ["call", "asker/ask"],
        cli_env(config, TERM="xterm-256color"),
        [("[c]ancel: ", b"y\n"), ("string: ", b"Ada\n")],
        bound=60.0,
        think=1.0,
    )
    assert "asker/ask: warming up" in screen  # the bar was up before the question
    # Each answer is echoed right after its prompt: nothing was drawn over the prompt meanwhile.
    assert "[c]ancel: y" in screen and "string: Ada" in screen, repr(screen)
    typed = screen.index("string: Ada")
    assert "What is your name?" in screen[:typed]
    assert "asker/ask: answered" in screen[typed:]  # the bar came back after the answer
    assert "hello Ada" in screen[typed:]


# --------------------------------------------------------------------------- a fresh interpreter, process limits


_ADD_PROBE = """
import sys
from mcp_actors.cli._app import main
code = main(sys.argv[1:])
print("runtime imported:", "mcp_actors.runtime" in sys.modules, "exit:", code)
"""


def test_servers_add_edits_the_config_without_starting_a_runtime(tmp_path: Path) -> None:
    """`servers add` writes through the store's rules without a supervision tree; a taken name is still refused."""
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "cfg.json"), "COLUMNS": "200"}
    probe = tmp_path / "probe.py"
    probe.write_text(_ADD_PROBE, encoding="utf-8")
    first = forkrun.run_script(probe, "servers", "add", "probe", "--command", "true", env=env, cwd=tmp_path, bound=120)
    assert first.stdout.strip().endswith("runtime imported: False exit: 0"), first.stdout + first.stderr
    saved = json.loads((tmp_path / "cfg.json").read_text())
    assert [s["name"] for s in saved["mcpServers"]] == ["demo", "probe"]
    again = invoke(tmp_path / "cfg.json", "servers", "add", "probe", "--command", "true")
    assert again.rc == 2 and "already exists" in again.error_line(), again


UNAVAILABLE = 3

_COMMAND = """
from mcp_actors.cli import main
raise SystemExit(main())
"""
"""``mcp-actors`` as a script of its own (what the installed script and ``python -m mcp_actors`` run)."""


def test_state_lives_next_to_an_explicit_config(tmp_path: Path) -> None:
    """With --config (or MCP_ACTORS_CONFIG) and no MCP_ACTORS_STATE_DIR, the PID ledger goes next to the config.

    A process: its process tracker (and so its ledger's place) is chosen once per process.
    """
    config = write_config(tmp_path / "team" / "mcp-config.json", stdio("fs", fault_server_command(), trusted=True))
    env = {k: v for k, v in cli_env(tmp_path / "unused.json").items() if k != "MCP_ACTORS_STATE_DIR"}
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    command = tmp_path / "command.py"
    command.write_text(_COMMAND, encoding="utf-8")
    args = ["--config", str(config), "call", "fs/echo", "--args", '{"text": "hi"}']
    called = forkrun.run_script(command, *args, env=env, cwd=tmp_path, bound=RUN_BOUND)
    assert called.returncode == 0, called.stderr
    assert (tmp_path / "team" / "mcp-config.state" / "processes").is_dir()
    assert not (tmp_path / "xdg-state").exists()


_EDIT_WITH_SMALL_FILES = """
import contextlib, io, json, resource, sys
from mcp_actors.cli import main
# Any write past 8 bytes fails with EFBIG: the config (never smaller) cannot be saved,
# the empty lock file can. Python ignores SIGXFSZ, so the write fails instead of killing.
# The limit is lifted again for the report (this process's stdout may be a file).
unlimited = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (8, unlimited[1]))
results = []
for args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    results.append({"rc": code, "stderr": err.getvalue()})
resource.setrlimit(resource.RLIMIT_FSIZE, unlimited)
print(json.dumps(results))
"""


def test_every_editing_command_fails_with_exit_3_when_the_file_cannot_be_written(tmp_path: Path) -> None:
    """servers add / import / disable / untrust / remove on an unwritable config: one line naming the file, exit 3.

    The file-size limit is the process's own (``RLIMIT_FSIZE``), so the commands run in a
    process of their own, one after the other (``main`` as the script calls it).
    """
    config = str(tmp_path / "mcp-config.json")
    source = tmp_path / "import.json"
    source.write_text(json.dumps({"mcpServers": {"imp": {"command": "imp-server"}}}))
    commands = [
        ["servers", "add", "x", "--command", "x-server"],
        ["servers", "import", str(source)],
        ["servers", "disable", "demo"],
        ["servers", "untrust", "demo"],
        ["servers", "remove", "demo"],
    ]
    env = {**os.environ, "MCP_ACTORS_CONFIG": config, "COLUMNS": "200"}
    script = tmp_path / "edit.py"
    script.write_text(_EDIT_WITH_SMALL_FILES, encoding="utf-8")
    done = forkrun.run_script(script, json.dumps(commands), env=env, cwd=tmp_path, bound=RUN_BOUND)
    assert done.returncode == 0, done.stderr
    for args, result in zip(commands, json.loads(done.stdout), strict=True):
        assert result["rc"] == UNAVAILABLE, (args, result)
        lines = result["stderr"].strip().splitlines()
        assert len(lines) == 1, result["stderr"]
        assert "Traceback" not in result["stderr"] and lines[0].startswith("mcp-actors: ")
        assert "mcp-config.json" in lines[0] and "File too large" in lines[0], lines[0]
    assert not Path(config).exists(), "nothing was half-written"
