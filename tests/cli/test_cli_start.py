"""The command answers ``--version``, ``--help`` and a usage error without importing the world.

Each case runs ``mcp-actors`` in a fresh interpreter, entered the way the console script
enters it, and reads the modules loaded at exit: a deterministic check of what the start
costs (how long it takes is ``benchmarks.cli_start``'s business, not a test's). The MCP
SDK, pydantic, httpx, anyio and trio are imported only by the commands that talk to
servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_actors import __version__

_PROBE = """
import atexit, json, os, sys

def _record():
    with open(os.environ["MCP_ACTORS_PROBE_OUT"], "w") as f:
        json.dump(sorted(sys.modules), f)

atexit.register(_record)
sys.argv = ["mcp-actors", *sys.argv[1:]]
from mcp_actors.cli import main
raise SystemExit(main())
"""

SDK_AND_FRIENDS = ("mcp", "mcp_types", "pydantic", "pydantic_core", "httpx", "anyio", "trio")
"""What a command that talks to no server never needs (pydantic aside: typer's own coercion brings it)."""


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``mcp-actors ARGS``; its result and the top-level packages it had imported at exit."""
    out = tmp_path / "modules.json"
    env = {**os.environ, "MCP_ACTORS_CONFIG": str(tmp_path / "mcp-config.json"), "MCP_ACTORS_PROBE_OUT": str(out)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    modules = json.loads(out.read_text())
    return done, {name.partition(".")[0] for name in modules}


def test_version_imports_neither_the_sdk_nor_rich(tmp_path: Path) -> None:
    done, loaded = _start(tmp_path, "--version")
    assert (done.returncode, done.stdout) == (0, f"mcp-actors {__version__}\n"), done.stderr
    assert loaded.isdisjoint(SDK_AND_FRIENDS), sorted(loaded & set(SDK_AND_FRIENDS))
    assert loaded.isdisjoint({"rich", "attrs", "attr", "cattrs"}), sorted(loaded)


def test_help_imports_neither_the_sdk_nor_rich(tmp_path: Path) -> None:
    """The help is plain (click's formatter): typer's rich help would import rich's markdown and more."""
    done, loaded = _start(tmp_path, "--help")
    assert done.returncode == 0 and "servers" in done.stdout and "call" in done.stdout, done.stderr
    assert "[default: " in done.stdout and "\\[" not in done.stdout  # no rich markup escape left in the text
    assert loaded.isdisjoint(SDK_AND_FRIENDS), sorted(loaded & set(SDK_AND_FRIENDS))
    assert loaded.isdisjoint({"rich", "attrs", "attr", "cattrs"}), sorted(loaded)


@pytest.mark.parametrize(
    ("args", "message"),
    [(("servers", "add"), "Missing argument"), (("no-such-command",), "No such command")],
    ids=["missing-argument", "unknown-command"],
)
def test_a_usage_error_imports_no_sdk(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done, loaded = _start(tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert loaded.isdisjoint(set(SDK_AND_FRIENDS) - {"pydantic", "pydantic_core"}), sorted(loaded)


def test_a_group_run_bare_prints_its_help_and_exits_2(tmp_path: Path) -> None:
    done, loaded = _start(tmp_path, "servers")
    assert done.returncode == 2 and done.stdout.startswith("Usage: mcp-actors servers "), done.stdout + done.stderr
    assert "enable-tool" in done.stdout
    assert loaded.isdisjoint({*SDK_AND_FRIENDS, "rich"} - {"pydantic", "pydantic_core"}), sorted(loaded)


def test_servers_list_reads_the_config_without_the_sdk(tmp_path: Path) -> None:
    """A command that only reads the config file pays for the records, not for the SDK."""
    done, loaded = _start(tmp_path, "servers", "list", "--json")
    assert done.returncode == 0, done.stderr
    assert [server["name"] for server in json.loads(done.stdout)["servers"]] == ["demo"]
    assert loaded.isdisjoint(set(SDK_AND_FRIENDS) - {"pydantic", "pydantic_core"}), sorted(loaded)


def test_the_type_choices_are_the_remote_server_types() -> None:
    """``--type``'s choices are spelled out in the CLI (no attrs at start-up); they stay ServerType's."""
    from mcp_actors._config.record import ServerType
    from mcp_actors.cli._app import _RemoteType

    assert {t.value for t in _RemoteType} == {t.value for t in ServerType if t is not ServerType.STDIO}
