"""Everyday use of the ``mcp-actors`` command, run in this process (``clikit.invoke``).

Fixing imported servers without editing JSON (show / update / tools / tool switches),
placeholders, big arguments, one JSON document on failure, tool ids in the tool's own
spelling, the state directory, versions and the small messages. Each test writes its own
config and points ``MCP_ACTORS_CONFIG`` at it. The ``config`` fixture's servers (the fault
server and the probe server) are served in memory; the placeholder and demo-record tests
start real servers, because what a process is given is what they check. (Inputs asked
on a terminal, and where a fresh process keeps its state: ``test_cli_process.py``.)
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import invoke, invoke_each, stdio, write_config

from mcp_actors import __version__
from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._config.store import ConfigStore
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.testing import fault_server_command
from mcp_actors.testing.memory import memory_params_for_argv

PROBE_SERVER = '''
"""A tiny stdio MCP server: a tool with a hyphenated name, and what the process was given."""
import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool(name="get-tiny-image", description="Return 'tiny'.", structured_output=False)
def tiny() -> str:
    return "tiny"


@server.tool(name="env-value", description="One environment variable.", structured_output=False)
def env_value(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.tool(name="where", description="The working directory and the arguments.", structured_output=False)
def where() -> str:
    return os.getcwd() + "|" + " ".join(sys.argv[1:])


@server.tool(name="length", description="The length of a text.", structured_output=False)
def length(text: str) -> str:
    return str(len(text))


anyio.run(server.run_stdio_async, backend="trio")
'''


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    script = tmp_path / "probe_server.py"
    script.write_text(PROBE_SERVER, encoding="utf-8")
    return script


_PROBE_RUN = 'anyio.run(server.run_stdio_async, backend="trio")\n'


def memory_probe() -> Any:
    """The server of ``PROBE_SERVER`` as an object (its tools answer from this process)."""
    namespace: dict[str, Any] = {}
    exec(PROBE_SERVER.replace(_PROBE_RUN, ""), namespace)
    return namespace["server"]


@contextlib.contextmanager
def served_in_memory(probe: Path) -> Iterator[None]:
    """Serve the probe, demo and fault server records in memory while the block runs.

    As :func:`mcp_actors.testing.memory.records_in_memory`, plus the probe script at
    ``probe``; a record with its own env or cwd keeps its real process.
    """
    made: dict[tuple[str, tuple[str, ...]], TransportParams] = {}

    def from_record(record: McpServerRecord) -> TransportParams:
        params = StdioParams.from_record(record)
        argv = (params.command, *params.args)
        if params.env or params.cwd is not None:
            return params
        if (record.name, argv) not in made:  # one object per record: equal settings across reloads
            twin: TransportParams | None = memory_params_for_argv(argv)
            if argv == (sys.executable, str(probe)):
                twin = MemoryParams(server=memory_probe)
            made[record.name, argv] = twin or params
        return made[record.name, argv]

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        yield
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


@pytest.fixture
def config(tmp_path: Path, probe: Path) -> Iterator[Path]:
    """fs: a trusted fault server; everything: the trusted probe server; guarded: the probe, untrusted.

    All three are served in memory.
    """
    with served_in_memory(probe):
        yield write_config(
            tmp_path / "mcp-config.json",
            stdio("fs", fault_server_command(), trusted=True),
            stdio("everything", [sys.executable, str(probe)], trusted=True),
            stdio("guarded", [sys.executable, str(probe)]),
        )


def records(config: Path) -> dict[str, McpServerRecord]:
    return {r.name: r for r in ConfigStore(config).load()}


# --------------------------------------------------------------------------- 1. show / update / tools


def test_servers_show_and_update_edit_a_record_through_the_add_validation(config: Path) -> None:
    """show prints the record (secrets hidden, placeholders shown); update edits it in place, id kept, validated."""
    before = records(config)["everything"]
    updated = invoke(
        config,
        "servers",
        "update",
        "everything",
        "--env",
        "TOKEN=s3cret-value",
        "--env",
        "TZ=${input:tz}",
        "--call-timeout",
        "7",
        "--rename",
        "probe",
        "--json",
    )
    assert updated.rc == 0, updated.stderr
    assert updated.json()["config"]["env"] == {"TOKEN": "***", "TZ": "${input:tz}"}
    after = records(config)["probe"]
    assert after.id == before.id and after.created_at == before.created_at
    assert after.config.env == {"TOKEN": "s3cret-value", "TZ": "${input:tz}"}
    assert after.config.call_timeout == 7.0 and after.config.args == before.config.args
    show, show_json, unset, args, bad_timeout, taken, slash, nothing, unknown_key = invoke_each(
        config,
        ["servers", "show", "probe"],
        ["servers", "show", "probe", "--json"],
        ["servers", "update", "guarded", "--unset-env", "NOPE"],
        ["servers", "update", "guarded", "--arg", "-u", "--arg", str(before.config.args[0]), "--json"],
        ["servers", "update", "fs", "--call-timeout", "-1"],
        ["servers", "update", "fs", "--rename", "guarded"],
        ["servers", "update", "fs", "--rename", "a/b"],
        ["servers", "update", "fs"],
        ["servers", "update", "fs", "--header", "A=b"],
    )
    assert show.rc == 0 and "s3cret-value" not in show.stdout and "${input:tz}" in show.stdout
    assert "${input:tz} in config.env.TZ has no value now" in show.stderr
    assert show_json.json()["unresolved"] == [{"field": "config.env.TZ", "placeholder": "${input:tz}"}]
    assert unset.rc == 2 and "--unset-env NOPE" in unset.error_line()
    assert args.rc == 0 and args.json()["config"]["args"] == ["-u", str(before.config.args[0])]
    assert bad_timeout.rc == 2 and "callTimeout" in bad_timeout.error_line()
    assert taken.rc == 2 and "already exists" in taken.error_line()
    assert slash.rc == 2 and "contains '/'" in slash.error_line()
    assert nothing.rc == 2 and "nothing to change" in nothing.error_line()
    assert unknown_key.rc == 2 and "--header" in unknown_key.error_line()
    assert records(config)["fs"].name == "fs" and records(config)["fs"].config.call_timeout == 120.0


def test_servers_update_unsets_env_and_switches_transport(config: Path) -> None:
    """--unset-env removes a variable; --url turns a stdio server into a remote one (stdio fields dropped)."""
    write_config(config, stdio("x", ["prog", "a"], env={"A": "1", "B": "2"}))
    added = invoke(config, "servers", "add", "y", "--command", "prog", "--env-file", "${HOME}/y.env", "--json")
    assert added.rc == 0 and added.json()["config"]["envFile"] == "${HOME}/y.env", added.stderr
    unset = invoke(config, "servers", "update", "x", "--unset-env", "A", "--cwd", str(config.parent))
    assert unset.rc == 0, unset.stderr
    assert records(config)["x"].config.env == {"B": "2"}
    assert records(config)["x"].config.cwd == str(config.parent.resolve())
    remote = invoke(config, "servers", "update", "x", "--url", "https://example.com/sse", "--header", "K=v")
    assert remote.rc == 0, remote.stderr
    record = records(config)["x"]
    assert record.type is ServerType.SSE and record.config.url == "https://example.com/sse"
    assert record.config.command is None and not record.config.env and record.config.headers == {"K": "v"}


def test_servers_tools_and_the_tool_switches(config: Path) -> None:
    """servers tools lists every tool with its state; enable-tool/disable-tool/auto-approve edit the record."""
    disabled, no_auto = invoke_each(
        config,
        ["servers", "disable-tool", "everything", "where"],
        ["servers", "auto-approve", "guarded", "length", "off"],
    )
    assert disabled.rc == 0 and no_auto.rc == 0, disabled.stderr + no_auto.stderr
    listing, call_disabled, call_disabled_by_id, again = invoke_each(
        config,
        ["servers", "tools", "everything", "--json"],
        ["call", "everything/where"],
        ["call", "mcp__everything__where"],
        ["servers", "disable-tool", "everything", "where", "--json"],
    )
    tools = {t["name"]: t for t in listing.json()["tools"]}
    assert tools["where"]["enabled"] is False and tools["get-tiny-image"]["enabled"] is True
    assert tools["get-tiny-image"]["id"] == "mcp__everything__get_tiny_image"
    assert all(t["autoApprove"] for t in tools.values())
    assert call_disabled.rc == 2 and "disabled" in call_disabled.error_line()
    assert call_disabled_by_id.rc == 2 and "disabled" in call_disabled_by_id.error_line()
    assert again.rc == 0 and again.json()["disabledTools"] == ["where"]
    assert records(config)["guarded"].disabled_auto_approve_tools == ("length",)
    enabled, auto_on = invoke_each(
        config,
        ["servers", "enable-tool", "everything", "where"],
        ["servers", "auto-approve", "guarded", "length", "on"],
    )
    assert enabled.rc == 0 and auto_on.rc == 0
    assert records(config)["everything"].disabled_tools == ()
    assert records(config)["guarded"].disabled_auto_approve_tools == ()
    called = invoke(config, "call", "everything/where")
    assert called.rc == 0 and called.stdout.startswith("/")


def test_the_tool_switches_resolve_either_spelling_of_the_tool(config: Path, tmp_path: Path) -> None:
    """disable-tool / enable-tool / auto-approve take the tool-id spelling and store the tool's real name.

    Before, `disable-tool everything get_tiny_image` stored 'get_tiny_image' and said the tool
    was disabled, while 'get-tiny-image' stayed listed and callable. A name the reachable
    server does not offer is refused with a suggestion; an unreachable server's tool is
    stored as given, and the output says it was not checked.
    """
    disabled, no_auto = invoke_each(
        config,
        ["servers", "disable-tool", "everything", "get_tiny_image"],
        ["servers", "auto-approve", "guarded", "get_tiny_image", "off"],
    )
    assert disabled.rc == 0 and no_auto.rc == 0, disabled.stderr + no_auto.stderr
    assert "'get-tiny-image'" in disabled.stdout and "not checked" not in disabled.stdout
    assert records(config)["everything"].disabled_tools == ("get-tiny-image",)
    assert records(config)["guarded"].disabled_auto_approve_tools == ("get-tiny-image",)
    listing, called = invoke_each(
        config, ["servers", "tools", "everything", "--json"], ["call", "everything/get-tiny-image"]
    )
    rows = [t for t in listing.json()["tools"] if t["id"] == "mcp__everything__get_tiny_image"]
    assert [(t["name"], t["enabled"]) for t in rows] == [("get-tiny-image", False)]
    assert called.rc == 2 and "is disabled" in called.error_line()
    before = records(config)
    near = invoke(config, "servers", "disable-tool", "everything", "get-tiny-imag")
    assert near.rc == 2 and "did you mean 'get-tiny-image'" in near.error_line()
    assert records(config) == before
    enabled = invoke(config, "servers", "enable-tool", "everything", "get_tiny_image")
    assert enabled.rc == 0, enabled.stderr
    assert records(config)["everything"].disabled_tools == ()
    gone = write_config(tmp_path / "gone.json", stdio("gone", [str(tmp_path / "no-such-program")]))
    unchecked = invoke(gone, "servers", "disable-tool", "gone", "some_tool")
    assert unchecked.rc == 0, unchecked.stderr
    assert "'some_tool'" in unchecked.stdout and "not checked" in unchecked.stdout
    assert records(gone)["gone"].disabled_tools == ("some_tool",)


# --------------------------------------------------------------------------- 2. variables


def test_placeholders_expand_at_start_from_the_host_environment(tmp_path: Path) -> None:
    """${env:NAME} and ${NAME} in command, args, env and cwd expand at start; the record keeps the placeholders."""
    env_file = tmp_path / "probe.env"
    env_file.write_text("# comment\nexport FROM_FILE='file value'\nOVERRIDDEN=file\n", encoding="utf-8")
    config = write_config(
        tmp_path / "mcp-config.json",
        stdio(
            "p",
            ["${mcpActors:python}", "${env:PROBE_DIR}/probe_server.py", "--flag=${FLAG}"],
            trusted=True,
            env={"SECRET": "${env:PROBE_SECRET}", "OVERRIDDEN": "record"},
            cwd="${PROBE_DIR}",
            env_file="${PROBE_DIR}/probe.env",
        ),
    )
    (tmp_path / "probe_server.py").write_text(PROBE_SERVER, encoding="utf-8")
    env = {"PROBE_DIR": str(tmp_path), "FLAG": "on", "PROBE_SECRET": "tok-123456"}
    results = {
        "where": invoke(config, "call", "p/where", env=env),
        "secret": invoke(config, "call", "p/env-value", "--args", '{"name": "SECRET"}', env=env),
        "file": invoke(config, "call", "p/env-value", "--args", '{"name": "FROM_FILE"}', env=env),
        "wins": invoke(config, "call", "p/env-value", "--args", '{"name": "OVERRIDDEN"}', env=env),
    }
    assert results["where"].stdout == f"{tmp_path}|--flag=on\n", results["where"].stderr
    assert results["secret"].stdout == "tok-123456\n"
    assert results["file"].stdout == "file value\n"
    assert results["wins"].stdout == "record\n"
    saved = json.loads(config.read_text())["mcpServers"][0]["config"]
    assert saved["env"]["SECRET"] == "${env:PROBE_SECRET}" and saved["cwd"] == "${PROBE_DIR}"


def test_an_unresolved_placeholder_is_a_clear_error_naming_it(tmp_path: Path, probe: Path) -> None:
    """A variable unset at start fails the call at once with the placeholder, its field and the fix."""
    config = write_config(
        tmp_path / "mcp-config.json",
        stdio("p", [sys.executable, str(probe)], trusted=True, env={"KEY": "${env:MCP_ACTORS_TEST_UNSET_VAR}"}),
    )
    failed = invoke(config, "call", "p/where", "--json", env={"MCP_ACTORS_TEST_UNSET_VAR": None})
    assert failed.rc == 3
    error = failed.json()["error"]
    assert error["type"] == "UnresolvedPlaceholder" and error["server"] == "p"
    assert "${env:MCP_ACTORS_TEST_UNSET_VAR}" in error["message"] and "config.env.KEY" in error["message"]
    assert "MCP_ACTORS_TEST_UNSET_VAR is not set" in failed.error_line()


# --------------------------------------------------------------------------- 3, 4. big arguments, --json failures


def test_call_reads_big_arguments_from_a_file_or_stdin(config: Path, tmp_path: Path) -> None:
    """--args @file.json and --args - carry arguments far beyond the ~128 KiB command-line limit."""
    text = "x" * (300 * 1024)
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"text": text}), encoding="utf-8")
    from_file, missing = invoke_each(
        config,
        ["call", "everything/length", "--args", f"@{args_file}"],
        ["call", "everything/length", "--args", f"@{tmp_path / 'nope.json'}"],
    )
    from_stdin = invoke(config, "call", "everything/length", "--args", "-", stdin=json.dumps({"text": text}).encode())
    assert (from_file.rc, from_file.stdout) == (0, f"{len(text)}\n"), from_file.stderr
    assert (from_stdin.rc, from_stdin.stdout) == (0, f"{len(text)}\n"), from_stdin.stderr
    assert missing.rc == 2 and "cannot read" in missing.error_line()


def test_json_failures_print_exactly_one_document(config: Path) -> None:
    """call --json prints one {"ok": false, "error": ...} document on a timeout, an unknown server, a usage error."""
    timed_out, unknown_server, usage, bad_args, unknown_list = invoke_each(
        config,
        ["call", "fs/sleep", "--args", '{"seconds": 60}', "--timeout", "0.5", "--json"],
        ["call", "nosuch/echo", "--json"],
        ["call", "--json"],
        ["call", "fs/echo", "--args", "[1]", "--json"],
        ["tools", "--server", "nosuch", "--json"],
    )
    for result, code, kind in (
        (timed_out, 3, "ToolCallTimeout"),
        (unknown_server, 2, "ServerNotFound"),
        (usage, 2, "UsageError"),
        (bad_args, 2, "CliError"),
    ):
        document = result.json()  # exactly one JSON document: json.loads fails on anything more
        assert result.rc == code and document["ok"] is False, result
        assert document["error"]["type"] == kind and document["error"]["exitCode"] == code
        assert set(document["error"]) == {"type", "message", "server", "tool", "exitCode"}
        assert document["error"]["message"] in result.stderr
    assert timed_out.json()["error"]["server"] == "fs" and timed_out.json()["error"]["tool"] == "sleep"
    assert unknown_list.rc == 2 and unknown_list.json() == []  # the listing's one document, failure on stderr


def test_watch_json_is_documented_as_json_lines(tmp_path: Path) -> None:
    """watch --help and docs/cli.md say that watch --json prints JSON Lines."""
    helped = invoke(tmp_path / "c.json", "watch", "--help")
    assert "JSON Lines" in helped.stdout
    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "JSON Lines" in docs and '"ok": false' in docs


# --------------------------------------------------------------------------- 5. tool ids


def test_tool_ids_resolve_from_the_tools_own_spelling(config: Path) -> None:
    """Ids with the tool's own spelling resolve; near misses get a suggestion; disabled is said either way."""
    own, provider, slash_other, near, near_slash = invoke_each(
        config,
        ["call", "mcp__everything__get-tiny-image"],
        ["call", "mcp__everything__get_tiny_image"],
        ["call", "everything/get_tiny_image"],
        ["call", "mcp__everything__get_tiny_imag"],
        ["call", "everything/get-tiny-imag"],
    )
    assert (own.rc, own.stdout) == (0, "tiny\n"), own.stderr
    assert (provider.rc, provider.stdout) == (0, "tiny\n")
    assert (slash_other.rc, slash_other.stdout) == (0, "tiny\n")
    assert near.rc == 2 and "did you mean 'mcp__everything__get_tiny_image'" in near.error_line()
    assert near_slash.rc == 2 and "did you mean 'get-tiny-image'" in near_slash.error_line()
    invoke(config, "servers", "disable-tool", "everything", "get-tiny-image")
    invoke(config, "servers", "disable", "fs")
    by_own, by_provider, server_off = invoke_each(
        config,
        ["call", "mcp__everything__get-tiny-image"],
        ["call", "mcp__everything__get_tiny_image"],
        ["call", "mcp__fs__echo", "--args", '{"text": "x"}'],
    )
    assert by_own.rc == 2 and "'get-tiny-image' of server 'everything' is disabled" in by_own.error_line()
    assert by_provider.rc == 2 and "is disabled" in by_provider.error_line()
    assert server_off.rc == 2 and "server 'fs' is disabled" in server_off.error_line()


def test_a_server_name_with_a_slash_is_refused(tmp_path: Path) -> None:
    """servers add and import refuse a name containing '/', which would make SERVER/TOOL ambiguous."""
    config = write_config(tmp_path / "mcp-config.json")
    added = invoke(config, "servers", "add", "a/b", "--command", "x")
    imported = invoke(config, "servers", "import", "-", stdin=b'{"mcpServers": {"c/d": {"command": "x"}}}')
    assert added.rc == 2 and "contains '/'" in added.error_line()
    assert imported.rc == 2 and "contains '/'" in imported.stdout
    assert records(config) == {}


def test_a_server_name_with_control_characters_is_refused_everywhere(tmp_path: Path) -> None:
    """add, import, update --rename and the file's own read refuse control characters in a name.

    Before, `servers add $'\\x1b]0;pwned\\x07x'` saved the name and printed it raw (a terminal
    title change), and so did every table showing it. Nothing raw reaches the terminal now.
    """
    config = write_config(tmp_path / "mcp-config.json", stdio("ok", ["x"]))
    source = json.dumps({"mcpServers": {"\u001b[2Jevil\nline": {"command": "x"}, "good": {"command": "y"}}})
    added, renamed = invoke_each(
        config,
        ["servers", "add", "\x1b]0;pwned\x07x", "--command", "x"],
        ["servers", "update", "ok", "--rename", "tab\tname"],
    )
    imported = invoke(config, "servers", "import", "-", "--json", stdin=source.encode())
    assert added.rc == 2 and added.stdout == ""
    assert "name contains the control character U+001B at position 0" in added.error_line()
    assert renamed.rc == 2 and "U+0009 at position 3" in renamed.error_line() and "'ok'" in renamed.error_line()
    assert imported.rc == 2
    by_ok = {entry["ok"]: entry for entry in imported.json()}
    assert "U+001B at position 0" in by_ok[False]["error"] and by_ok[True]["name"] == "good"
    for result in (added, imported, renamed):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", result.stdout + result.stderr), result
    assert sorted(records(config)) == ["good", "ok"]
    document = json.loads(config.read_text(encoding="utf-8"))
    document["mcpServers"][0]["name"] = "bell\x07"
    config.write_text(json.dumps(document), encoding="utf-8")
    listed = invoke(config, "servers", "list")
    assert listed.rc == 2 and "mcpServers[0]" in listed.error_line() and "U+0007 at position 4" in listed.error_line()


def test_a_config_file_with_one_name_twice_is_reported_and_left_alone(tmp_path: Path) -> None:
    """Two entries named 'a' make every command fail with one line naming the entry; the file is not touched.

    Before, the file was read: `servers list` showed both, `show a` one record while `call`
    and `test` used the other, and `remove a` silently removed the first.
    """
    config = write_config(tmp_path / "mcp-config.json", stdio("a", fault_server_command()))
    document = json.loads(config.read_text(encoding="utf-8"))
    document["mcpServers"].append({**document["mcpServers"][0], "id": "i2"})
    text = json.dumps(document)
    config.write_text(text, encoding="utf-8")
    listed, removed = invoke_each(config, ["servers", "list"], ["servers", "remove", "a", "--json"])
    for result in (listed, removed):
        assert result.rc == 2, result
        line = result.error_line()
        assert "mcpServers[1]: name 'a' is already used by mcpServers[0]" in line and str(config) in line
    assert removed.json()["error"]["type"] == "ConfigFileCorrupt"
    assert config.read_text(encoding="utf-8") == text


def test_import_refuses_a_name_that_collides_with_another_once_cleaned(tmp_path: Path) -> None:
    """An import holding 'my-srv' and 'my_srv' saves the first and rejects the second, naming the clash."""
    config = write_config(tmp_path / "mcp-config.json")
    source = b'{"mcpServers": {"my-srv": {"command": "x"}, "my_srv": {"command": "y"}}}'
    imported = invoke(config, "servers", "import", "-", "--json", stdin=source)
    assert imported.rc == 2
    by_name = {entry["name"]: entry for entry in imported.json()}
    assert by_name["my-srv"]["ok"] and not by_name["my_srv"]["ok"]
    assert "collides with 'my-srv'" in by_name["my_srv"]["error"]
    assert list(records(config)) == ["my-srv"]


# --------------------------------------------------------------------------- 6. state and paths


def test_the_demo_record_is_written_with_a_symbolic_command(tmp_path: Path) -> None:
    """The first write of a fresh config stores the demo's command as ${mcpActors:python}, which still runs."""
    config = tmp_path / "mcp-config.json"
    changed = invoke(config, "servers", "untrust", "demo")
    assert changed.rc == 0, changed.stderr
    saved = json.loads(config.read_text())["mcpServers"][0]
    assert saved["config"]["command"] == "${mcpActors:python}" and sys.executable not in config.read_text()
    tested = invoke(config, "test", "demo")
    assert tested.rc == 0, tested.stderr


# --------------------------------------------------------------------------- 7, 8. versions and messages


def test_version_and_short_help(tmp_path: Path) -> None:
    """--version prints mcp_actors.__version__; -h is --help, also for subcommands."""
    config = tmp_path / "c.json"
    version, short, long, sub = invoke_each(config, ["--version"], ["-h"], ["--help"], ["servers", "update", "-h"])
    assert (version.rc, version.stdout) == (0, f"mcp-actors {__version__}\n")
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", __version__)
    assert short.rc == 0 and short.stdout == long.stdout
    assert sub.rc == 0 and "--unset-env" in sub.stdout and "--rename" in sub.stdout


def test_small_messages_are_tidy(tmp_path: Path) -> None:
    """--format, --config, test and empty-name messages say the right thing."""
    config = write_config(tmp_path / "mcp-config.json", stdio("ex", [sys.executable, "-c", "import sys; sys.exit(3)"]))
    fmt, flag_dir, empty, failing_test = invoke_each(
        config,
        ["tools", "--format", "xml"],
        ["--config", str(tmp_path), "servers", "list"],
        ["servers", "add", "", "--command", "x"],
        ["test", "ex"],
    )
    env_dir = invoke(tmp_path, "servers", "list")
    assert fmt.rc == 2 and "Value error" not in fmt.stderr
    assert "invalid value for --format: 'xml' is not one of" in fmt.error_line()
    assert flag_dir.rc == 2 and f"--config {tmp_path} is a directory" in flag_dir.error_line()
    assert "MCP_ACTORS_CONFIG" not in flag_dir.stderr
    assert env_dir.rc == 2 and f"MCP_ACTORS_CONFIG={tmp_path} is a directory" in env_dir.error_line()
    assert empty.rc == 2 and "NAME must not be empty" in empty.error_line()
    assert "mcp_" not in empty.stderr  # no generated id the user never saw
    assert failing_test.rc == 3 and "exited with code 3" in failing_test.error_line()
    assert "mcp-actors test" not in failing_test.stderr
    assert "servers update ex" in failing_test.stderr
