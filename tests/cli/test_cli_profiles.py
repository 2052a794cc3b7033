"""``mcp-actors profile``: the gateway's profiles edited from the command line, run in this process.

Each test writes a config with two servers (``github``, ``fs``: records only, nothing is
started) and edits its ``profiles`` section; what the file holds afterwards is read back
through the validating reader, and unknown sections and the server records survive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import invoke, stdio, write_config

from mcp_actors._config.profiles import ProfileNaming, load_profiles
from mcp_actors._config.store import ConfigStore


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = write_config(tmp_path / "cfg.json", stdio("github", ["gh-mcp"]), stdio("fs", ["fs-mcp"]))
    document = json.loads(path.read_text())
    document["someoneElses"] = {"kept": True}
    path.write_text(json.dumps(document))
    return path


def test_add_show_list_and_rm_a_profile(config: Path) -> None:
    """add writes a validated profile (servers, tool globs, renames, descriptions); show, list, rm."""
    added = invoke(
        config,
        "profile",
        "add",
        "coder",
        "--server",
        "fs",
        "--tool",
        "github/search_*",
        "--rename",
        "github/search_code=search",
        "--describe",
        "github/search_code=Search our code",
        "--naming",
        "tool",
        "--description",
        "the coding agent",
    )
    assert added.rc == 0, added.stderr
    assert "served at /mcp/coder" in added.stderr
    profiles, _ = load_profiles(ConfigStore(config))
    coder = profiles["coder"]
    assert coder.naming is ProfileNaming.TOOL
    assert coder.description == "the coding agent"
    assert coder.servers["fs"].tools is None
    assert coder.servers["github"].tools == ("search_*",)
    assert coder.servers["github"].rename == {"search_code": "search"}
    assert coder.servers["github"].describe == {"search_code": "Search our code"}
    document = json.loads(config.read_text())
    assert document["someoneElses"] == {"kept": True}
    assert [entry["name"] for entry in document["mcpServers"]] == ["github", "fs"]

    shown = invoke(config, "profile", "show", "coder", "--json")
    assert shown.rc == 0
    assert shown.json()["servers"]["github"]["rename"] == {"search_code": "search"}
    text = invoke(config, "profile", "show", "coder")
    assert "search_code -> search" in text.stdout
    listed = invoke(config, "profile", "list")
    assert "/mcp/coder" in listed.stdout and "the coding agent" in listed.stdout
    assert set(invoke(config, "profile", "list", "--json").json()) == {"coder"}

    removed = invoke(config, "profile", "rm", "coder")
    assert removed.rc == 0
    assert load_profiles(ConfigStore(config))[0] == {}
    assert "profiles" not in json.loads(config.read_text())
    assert json.loads(config.read_text())["someoneElses"] == {"kept": True}


def test_edit_adds_and_removes_servers_and_tools_and_undoes_a_rename(config: Path) -> None:
    """edit applies removals, then additions; an empty --rename value undoes the rename."""
    assert invoke(config, "profile", "add", "ops", "--tool", "github/get_issue", "--rename", "github/a=b").rc == 0
    edited = invoke(
        config,
        "profile",
        "edit",
        "ops",
        "--tool",
        "github/list_*",
        "--remove-tool",
        "github/get_issue",
        "--server",
        "fs",
        "--rename",
        "github/a=",
    )
    assert edited.rc == 0, edited.stderr
    ops = load_profiles(ConfigStore(config))[0]["ops"]
    assert ops.servers["github"].tools == ("list_*",)
    assert ops.servers["github"].rename == {}
    assert set(ops.servers) == {"github", "fs"}
    assert invoke(config, "profile", "edit", "ops", "--remove-server", "fs").rc == 0
    assert set(load_profiles(ConfigStore(config))[0]["ops"].servers) == {"github"}


def test_mistakes_are_one_line_naming_what_to_do(config: Path) -> None:
    """Unknown servers, duplicate or missing profiles, bad names and option shapes exit 2 with a clear line."""
    unknown = invoke(config, "profile", "add", "x", "--server", "nope")
    assert unknown.rc == 2
    assert "no server named 'nope'" in unknown.error_line() and "github" in unknown.error_line()
    assert invoke(config, "profile", "add", "x", "--server", "fs").rc == 0
    again = invoke(config, "profile", "add", "x")
    assert again.rc == 2 and "profile edit x" in again.error_line()
    missing = invoke(config, "profile", "edit", "y", "--server", "fs")
    assert missing.rc == 2 and "no profile 'y'" in missing.error_line()
    assert invoke(config, "profile", "rm", "y").rc == 2
    bad_name = invoke(config, "profile", "add", "a/b")
    assert bad_name.rc == 2 and "URL path" in bad_name.error_line()
    bad_tool = invoke(config, "profile", "edit", "x", "--tool", "github")
    assert bad_tool.rc == 2 and "SERVER/TOOL" in bad_tool.error_line()
    narrowing = invoke(config, "profile", "edit", "x", "--tool", "fs/read_*")
    assert narrowing.rc == 2 and "--remove-server fs" in narrowing.error_line()
    bad_rename = invoke(config, "profile", "edit", "x", "--rename", "fs/read=has space")
    assert bad_rename.rc == 2
    assert "profiles.x.servers.fs.rename.read" in bad_rename.error_line()
    assert load_profiles(ConfigStore(config))[0]["x"].servers["fs"].rename == {}


def test_a_malformed_section_is_reported_and_left_untouched(config: Path) -> None:
    """A hand-broken profiles section: list names the profile and field, edit refuses to write."""
    document = json.loads(config.read_text())
    document["profiles"] = {"coder": {"naming": "camel"}}
    config.write_text(json.dumps(document))
    before = config.read_bytes()
    listed = invoke(config, "profile", "list")
    assert listed.rc == 2
    assert "profiles.coder.naming" in listed.error_line() and "'server', 'tool'" in listed.error_line()
    assert invoke(config, "profile", "add", "other", "--server", "fs").rc == 2
    assert config.read_bytes() == before


def test_serve_profile_is_for_stdio(config: Path) -> None:
    """``serve --profile`` without ``--stdio`` is a usage error saying where profiles are served over HTTP."""
    result = invoke(config, "serve", "--profile", "coder")
    assert result.rc == 2
    assert "/mcp/<profile>" in result.error_line()


def test_serve_does_not_start_on_a_malformed_profiles_section(tmp_path: Path) -> None:
    """``serve`` with a hand-broken profile exits 2 naming the profile's field, before listening."""
    path = write_config(tmp_path / "cfg.json")
    document = json.loads(path.read_text())
    document["profiles"] = {"default": {"servers": {"x": {"tools": "all"}}}}
    path.write_text(json.dumps(document))
    result = invoke(path, "serve", "--port", "0")
    assert result.rc == 2
    assert "profiles.default.servers.x.tools" in result.error_line()
    assert result.stdout == ""  # no URL: nothing was served
