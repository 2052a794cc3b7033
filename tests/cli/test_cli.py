"""The ``mcp-actors`` command against temporary configs, run in this process (``clikit.invoke``).

Each test writes its own config file and points ``MCP_ACTORS_CONFIG`` at it; the fault
servers of the ``config`` fixture (and the demo server) are served in memory. What needs a
real process (the entry points, Ctrl-C, a terminal, a real server spawn) is in
``test_cli_process.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from clikit import invoke, invoke_each, stdio, write_config

from mcp_actors._config.store import ConfigStore
from mcp_actors.formats import fetch_mcp_tools, setup_mcp_tools
from mcp_actors.runtime import open_runtime
from mcp_actors.testing import fault_server_command


@pytest.fixture
def config(tmp_path: Path, servers_in_memory: Any) -> Path:
    """fs: a trusted fault server; guarded: the same, untrusted; broken: a command that does not exist.

    The fault servers (and a demo server a test adds) are served in memory.
    """
    return write_config(
        tmp_path / "mcp-config.json",
        stdio("fs", fault_server_command(), trusted=True),
        stdio("guarded", fault_server_command()),
        stdio("broken", ["mcp-actors-no-such-command"], trusted=True),
    )


# --------------------------------------------------------------------------- servers


def test_servers_import_list_and_edit(tmp_path: Path) -> None:
    """import keeps good entries, rejects bad ones (exit 2); add/disable/enable/trust/untrust/remove edit the file."""
    config = tmp_path / "mcp-config.json"
    document = {
        "mcpServers": {
            "fs": {"command": sys.executable, "args": ["-m", "x"], "env": {"TOKEN": "s3cret-env"}},
            "remote": {"url": "http://127.0.0.1:9/mcp?token=s3cret-q", "headers": {"Authorization": "Bearer s3cret-h"}},
            "bad": {"command": 42},
        }
    }
    imported = invoke(config, "servers", "import", "-", "--json", stdin=json.dumps(document))
    assert imported.rc == 2
    by_name = {entry["name"]: entry for entry in imported.json()}
    assert by_name["fs"]["ok"] and by_name["remote"]["ok"] and not by_name["bad"]["ok"]
    assert "command" in by_name["bad"]["error"]
    assert "'bad'" in imported.error_line()

    listed = invoke(config, "servers", "list", "--json")
    assert listed.rc == 0
    assert "s3cret" not in listed.stdout
    servers = {s["name"]: s for s in listed.json()["servers"]}
    assert list(servers) == ["demo", "fs", "remote"]  # a fresh install's demo server is kept
    assert servers["fs"]["config"]["env"] == {"TOKEN": "***"}
    assert servers["remote"]["config"]["headers"] == {"Authorization": "***"}

    add_local, add_web, disabled, trusted, removed = invoke_each(
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
    assert add_local.json()["config"]["cwd"] == str(tmp_path.resolve())
    assert add_local.json()["config"]["env"] == {"A": "***"}
    assert add_web.rc == 0 and add_web.json()["type"] == "sse" and add_web.json()["isTrusted"]
    assert disabled.rc == 0 and "Disabled server 'fs'" in disabled.stdout
    assert trusted.rc == 0 and trusted.json()["isTrusted"] is True
    assert removed.rc == 0 and "Removed server 'demo'" in removed.stdout

    enabled, untrusted = invoke_each(config, ["servers", "enable", "fs", "--json"], ["servers", "untrust", "web"])
    assert enabled.rc == 0 and enabled.json()["isActive"] is True
    assert untrusted.rc == 0

    final = {s["name"]: s for s in (invoke(config, "servers", "list", "--json")).json()["servers"]}
    assert sorted(final) == ["fs", "local", "remote", "web"]
    assert final["fs"]["isActive"] and final["remote"]["isTrusted"] and not final["web"]["isTrusted"]
    table = invoke(config, "servers", "list")
    assert table.rc == 0 and "(env: A)" in table.stdout and "s3cret" not in table.stdout


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    """Bad options are one stderr line, exit 2, and never echo a secret value."""
    config = tmp_path / "mcp-config.json"
    both, no_equals, missing_name, bad_format, unknown_server = invoke_each(
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


def test_corrupt_config_is_one_line_unless_debug(tmp_path: Path) -> None:
    """A corrupt config names its path in one line; --debug adds the traceback."""
    config = tmp_path / "mcp-config.json"
    config.write_text('{"mcpServers": [', encoding="utf-8")
    plain, debug = invoke_each(config, ["servers", "list"], ["--debug", "servers", "list"])
    assert plain.rc == 2 and str(config) in plain.error_line()
    assert debug.rc == 2 and "Traceback" in debug.stderr
    assert config.read_text(encoding="utf-8") == '{"mcpServers": ['


def test_a_config_under_proc_fails_add_with_exit_3() -> None:
    """servers add with a config under /proc/self (not even root can write there): one line, exit 3, bounded.

    (An unwritable config by a file-size limit is in test_cli_process.py: the limit is per process.)
    """
    done = invoke(Path("/proc/self/mcp-actors-test/mcp-config.json"), "servers", "add", "x", "--command", "x-server")
    assert done.rc == 3, done.stderr
    assert "/proc/self/mcp-actors-test/mcp-config.json" in done.error_line()


# --------------------------------------------------------------------------- tools


def test_tools_in_every_format_match_setup_mcp_tools(config: Path) -> None:
    """tools --format prints setup_mcp_tools' definitions; a failing server goes to stderr and the others print."""
    formats = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}
    *provider_results, table, partial = invoke_each(
        config,
        *(["tools", "--format", name] for name in formats),
        ["tools"],
        ["tools", "--format", "mcp", "--server", "fs", "--server", "nope"],
    )

    # The same config in this process: what setup_mcp_tools gives an agent (broken is skipped).
    async def definitions() -> tuple[dict[str, Any], list[Any]]:
        async with open_runtime(config) as runtime:
            expected = {}
            for name, api_format in formats.items():
                setup = await setup_mcp_tools(runtime.service, {"enabled": True}, api_format=api_format)
                assert setup is not None
                expected[name] = json.loads(json.dumps(setup[0]))
            return expected, await fetch_mcp_tools(runtime.service, {"enabled": True})

    expected, mcp_tools = trio.run(definitions)

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


def test_call_exit_codes(config: Path) -> None:
    """call: 0 success, 1 tool error, 2 usage, 3 timeout; --json prints the whole MCP result."""
    echo, added, failed, timed_out, unknown_tool, bad_args, needs_yes = invoke_each(
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


def test_call_refuses_what_json_cannot_carry(tmp_path: Path) -> None:
    """NaN, Infinity, -Infinity and numbers too large for a double in --args are a usage error naming the field.

    Inline, from @FILE and from stdin alike, and in stress --args too (one parser). A
    --timeout that is not a positive finite number is refused with the config's wording.
    Before, Python's json read them as floats, the call went out with null in their place
    (exit 0), and --timeout inf was accepted.
    """
    config = tmp_path / "mcp-config.json"
    (tmp_path / "args.json").write_text('{"text": "x", "more": {"items": [1, 1e400]}}')
    results = invoke_each(
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
    piped = invoke(config, "call", "demo/echo", "--args", "-", stdin='{"text": ["a", NaN]}')
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


# --------------------------------------------------------------------------- test, discover


def test_test_and_discover(config: Path) -> None:
    """test prints tool names and timing; discover finds the demo's tools, prompts and resources."""
    write_config(config, *ConfigStore(config).load(), stdio("demo", [sys.executable, "-m", "mcp_actors.demo_server"]))
    tested, broken, discovered = invoke_each(
        config, ["test", "fs"], ["test", "broken", "--json"], ["discover", "demo", "--json"]
    )
    assert tested.rc == 0 and "5 tools: echo, add, sleep, big, fail" in tested.stdout
    assert "connected in" in tested.stdout and "mcp-actors-fault" in tested.stdout
    assert broken.rc == 3 and "not found on PATH" in broken.error_line()
    assert broken.json()["ok"] is False and broken.json()["tools"] == [] and "not found" in broken.json()["error"]
    found = discovered.json()
    assert discovered.rc == 0 and found["errors"] == {}
    assert "mcp__demo__echo" in [t["id"] for t in found["tools"]]
    assert "greeting" in [p["name"] for p in found["prompts"]]
    assert "demo://readme" in [r["uri"] for r in found["resources"]]


# --------------------------------------------------------------------------- demo, entry points


def test_demo_runs_every_step_without_touching_the_config(tmp_path: Path) -> None:
    """demo starts, converts, calls, times out, survives a kill and reconnects; the user's config is untouched."""
    config = tmp_path / "mcp-config.json"
    as_json, for_people = invoke_each(config, ["demo", "--json"], ["demo"])
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
