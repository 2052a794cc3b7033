"""Placeholders, env files and the state directory, below the command line.

The CLI tests (``tests/cli/test_cli_everyday.py``) show what a person sees; these pin the rules:
what expands from where, what counts as a secret, that an unresolved placeholder opens the
circuit at once, and where state lives.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from mcp_actors import events
from mcp_actors._config import variables as _variables
from mcp_actors._config.paths import state_dir
from mcp_actors._wire.transports import HttpParams, StdioParams
from mcp_actors.errors import ConnectionFailed, ServerMisconfigured, UnresolvedPlaceholder
from mcp_actors.runtime import open_runtime

BOUND = 60.0
"""Generous bound for a server start on a loaded machine (it takes well under a second)."""


def test_expand_reads_the_environment_and_names_what_is_missing() -> None:
    """${env:X} and ${X} read the given environment; ${mcpActors:python} is this interpreter; misses are named."""
    env = {"TOKEN": "t0k3n-value", "DIR": "/srv"}
    value, used = _variables.expand("${DIR}/x --t=${env:TOKEN}", field="config.args[0]", server="s", environ=env)
    assert (value, used) == ("/srv/x --t=t0k3n-value", ["/srv", "t0k3n-value"])
    assert _variables.expand("${mcpActors:python}", field="f", server="s", environ={}) == (sys.executable, [])
    with pytest.raises(UnresolvedPlaceholder) as missing:
        _variables.expand("${env:NOPE}", field="config.env.KEY", server="gh", environ=env)
    assert missing.value.placeholder == "${env:NOPE}" and missing.value.field == "config.env.KEY"
    assert "NOPE is not set" in str(missing.value) and "servers update gh" in str(missing.value)
    assert isinstance(missing.value, ServerMisconfigured)
    for import_only in ("${input:tz}", "${workspaceFolder}"):
        with pytest.raises(UnresolvedPlaceholder, match="import"):
            _variables.expand(import_only, field="f", server="s", environ={"workspaceFolder": "/not/this"})


def test_dotenv_files_are_read_like_dotenv(tmp_path: Path) -> None:
    """envFile: comments, export, quotes, escapes and inline comments; a missing file is ServerMisconfigured."""
    (tmp_path / "a.env").write_text(
        "# a comment\n\nexport A=1\nB = 'two words' \nC=\"line\\nbreak\"\nD=plain # trailing comment\nnot a pair\n",
        encoding="utf-8",
    )
    assert _variables.load_env_file("a.env", server="s", base=str(tmp_path)) == {
        "A": "1",
        "B": "two words",
        "C": "line\nbreak",
        "D": "plain",
    }
    with pytest.raises(ServerMisconfigured, match="envFile"):
        _variables.load_env_file(str(tmp_path / "missing.env"), server="s")


def test_expanded_values_are_secrets_of_the_transport(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """secret_values() holds the expanded env/header values and the env file's, not the placeholders only."""
    monkeypatch.setenv("MCP_ACTORS_T_TOKEN", "expanded-secret-1")
    (tmp_path / "s.env").write_text("FILE_KEY=file-secret-22\n", encoding="utf-8")
    stdio = StdioParams(
        command="x", env={"KEY": "${env:MCP_ACTORS_T_TOKEN}"}, env_file=str(tmp_path / "s.env"), args=("${HOME}",)
    )
    assert {"expanded-secret-1", "file-secret-22"} <= set(stdio.secret_values())
    resolved = stdio.resolved(label="s")
    assert resolved.env == {"FILE_KEY": "file-secret-22", "KEY": "expanded-secret-1"}
    http = HttpParams(
        url="https://example.com/${env:MCP_ACTORS_T_PATH}",
        headers={"Authorization": "Bearer ${env:MCP_ACTORS_T_TOKEN}"},
    )
    with pytest.raises(UnresolvedPlaceholder, match=r"config\.url"):
        http.resolved(label="remote")
    assert "Bearer expanded-secret-1" in http.secret_values()  # best effort while the URL cannot expand
    monkeypatch.setenv("MCP_ACTORS_T_PATH", "mcp")
    assert http.resolved(label="remote").url == "https://example.com/mcp"
    assert "expanded-secret-1" in http.secret_values()


async def test_an_unresolved_placeholder_opens_the_circuit_at_once(tmp_path: Path) -> None:
    """Connecting with an unset variable fails with UnresolvedPlaceholder; no restart is spent on it."""
    # connect_on_add=False: the explicit connect below is the first attempt, not a background one.
    async with open_runtime(tmp_path / "cfg.json", connect_on_add=False) as rt:
        svc = rt.service
        sub = svc.subscribe()
        await svc.add(
            {
                "name": "needs-var",
                "type": "stdio",
                "config": {"command": "${mcpActors:python}", "args": ["${env:MCP_ACTORS_TEST_NEVER_SET}"]},
            }
        )
        with pytest.raises(UnresolvedPlaceholder, match=r"'\$\{env:MCP_ACTORS_TEST_NEVER_SET\}' in config\.args\[0\]"):
            await svc.connect("needs-var")
        with trio.fail_after(BOUND):
            async for event in sub:
                if event.type == events.CONNECTION_STATE and event.data.get("circuitOpen"):
                    break
        status = svc.status("needs-var")
        assert status.circuit_open and status.restarts == 0 and status.pid is None


async def test_an_expanded_secret_is_redacted_from_the_stderr_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that prints its expanded token: the error quoting its stderr shows *** instead."""
    monkeypatch.setenv("MCP_ACTORS_T_SECRET", "very-secret-token-42")
    script = "import os, sys; sys.stderr.write('token=' + os.environ['T'] + '\\n'); sys.stderr.flush(); sys.exit(2)"
    async with open_runtime(tmp_path / "cfg.json") as rt:
        await rt.service.add(
            {
                "name": "leaky",
                "type": "stdio",
                "config": {
                    "command": sys.executable,
                    "args": ["-c", script],
                    "env": {"T": "${env:MCP_ACTORS_T_SECRET}"},
                },
            }
        )
        with trio.fail_after(BOUND), pytest.raises(ConnectionFailed) as failed:
            await rt.service.connect("leaky")
    assert "very-secret-token-42" not in str(failed.value)
    assert "token=***" in str(failed.value)


def test_state_dir_follows_an_explicit_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MCP_ACTORS_STATE_DIR wins; else next to the given config, else next to MCP_ACTORS_CONFIG; else per user."""
    monkeypatch.setenv("MCP_ACTORS_STATE_DIR", str(tmp_path / "forced"))
    assert state_dir(tmp_path / "a" / "mcp-config.json") == tmp_path / "forced"
    monkeypatch.delenv("MCP_ACTORS_STATE_DIR")
    assert state_dir(tmp_path / "a" / "mcp-config.json") == tmp_path / "a" / "mcp-config.state"
    monkeypatch.setenv("MCP_ACTORS_CONFIG", str(tmp_path / "b" / "team.json"))
    assert state_dir() == tmp_path / "b" / "team.state"
    monkeypatch.delenv("MCP_ACTORS_CONFIG")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "xdg" / "mcp-actors"


def test_env_file_is_a_stdio_field_in_the_config_file() -> None:
    """envFile round-trips on a stdio record and is refused on a remote one, by its camelCase name."""
    from mcp_actors._config.codec import record_from_json_dict, record_to_json_dict
    from mcp_actors.errors import InvalidServerConfig

    entry = {"id": "mcp_1_a", "name": "x", "type": "stdio", "config": {"command": "npx", "envFile": "${HOME}/.env"}}
    record = record_from_json_dict(entry)
    assert record.config.env_file == "${HOME}/.env"
    assert record_to_json_dict(record)["config"]["envFile"] == "${HOME}/.env"
    remote = {"id": "mcp_1_b", "name": "y", "type": "http", "config": {"url": "https://h/mcp", "envFile": "a.env"}}
    with pytest.raises(InvalidServerConfig, match=r"config\.envFile is only for stdio servers"):
        record_from_json_dict(remote)
