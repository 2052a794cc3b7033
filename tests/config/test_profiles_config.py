"""The config file's ``profiles`` section: validation that names the profile and the field, round trips, one writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_actors._config.profiles import (
    Profile,
    ProfileNaming,
    ServerSelection,
    load_profiles,
    modify_profiles,
    profile_from_json,
    profile_to_json,
    profiles_from_json,
)
from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType
from mcp_actors._config.store import ConfigStore
from mcp_actors.errors import ConfigError, InvalidProfile


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ({"naming": "camel"}, "profiles.p.naming", "must be one of 'server', 'tool'"),
        ({"server": {}}, "profiles.p.server", "is not a known key"),
        ({"servers": {"gh": {"tools": "x"}}}, "profiles.p.servers.gh.tools", "must be a list"),
        ({"servers": {"gh": {"tools": [""]}}}, "profiles.p.servers.gh.tools[0]", "non-empty string"),
        (
            {"servers": {"gh": {"rename": {"a": "no spaces"}}}},
            "profiles.p.servers.gh.rename.a",
            "not a valid tool name",
        ),
        ({"servers": {"gh": {"prompts": "no"}}}, "profiles.p.servers.gh.prompts", "true or false"),
        ({"servers": {"gh": {"toolz": []}}}, "profiles.p.servers.gh.toolz", "is not a known key"),
        (
            {"servers": {"a": {"rename": {"x": "same"}}, "b": {"rename": {"y": "same"}}}},
            "profiles.p.servers.b.rename.y",
            "already the new name of a/x",
        ),
        ([], "profiles.p", "must be an object"),
    ],
)
def test_a_bad_profile_names_the_profile_and_the_field(value: Any, field: str, words: str) -> None:
    """Each malformed field is an InvalidProfile naming the profile, the field's path, and what is expected."""
    with pytest.raises(InvalidProfile) as caught:
        profile_from_json("p", value)
    assert caught.value.profile == "p"
    assert caught.value.field == field
    assert words in str(caught.value)
    assert isinstance(caught.value, ConfigError)


@pytest.mark.parametrize("name", ["", "a/b", "-x", "x" * 65, "a b"])
def test_a_profile_name_must_be_one_path_segment(name: str) -> None:
    """Names that cannot be a URL path segment are refused."""
    with pytest.raises(InvalidProfile, match="URL path"):
        profiles_from_json({name: {}})


def test_a_profile_reads_back_equal_and_selects_as_documented() -> None:
    """JSON -> Profile -> JSON is stable; globs, renames and descriptions select tools; an exact server beats a glob."""
    profile = Profile(
        name="coder",
        description="d",
        naming=ProfileNaming.TOOL,
        servers={
            "gh": ServerSelection(tools=("search_*",), rename={"get_issue": "issue"}, describe={"x": "y"}),
            "*": ServerSelection(prompts=False),
        },
    )
    assert profile_from_json("coder", json.loads(json.dumps(profile_to_json(profile)))) == profile
    gh = profile.selection("gh")
    assert gh is not None
    assert gh.selects("search_code") and gh.selects("get_issue") and gh.selects("x")
    assert not gh.selects("delete_repo")
    other = profile.selection("fs")
    assert other is not None and other.tools is None and not other.prompts


def test_modify_profiles_keeps_records_and_other_sections(tmp_path: Path) -> None:
    """Profiles are written under the lock; the records and unknown sections stay as they were."""
    store = ConfigStore(tmp_path / "cfg.json")
    store.save([McpServerRecord(name="gh", type=ServerType.STDIO, config=ServerConfig(command="gh"))])
    document = json.loads(store.path.read_text())
    document["other"] = [1, 2]
    store.path.write_text(json.dumps(document))
    records = store.load()

    def add(profiles: dict[str, Profile]) -> None:
        profiles["p"] = Profile(name="p", servers={"gh": ServerSelection()})

    modify_profiles(store, add)
    assert store.load() == records
    assert json.loads(store.path.read_text())["other"] == [1, 2]
    assert list(load_profiles(store)[0]) == ["p"]
    before = store.path.stat().st_mtime_ns
    modify_profiles(store, lambda profiles: None)  # no change: no write
    assert store.path.stat().st_mtime_ns == before

    def bad(profiles: dict[str, Profile]) -> None:
        profiles["q"] = Profile(name="q", servers={"gh": ServerSelection(rename={"a": "has space"})})

    with pytest.raises(InvalidProfile, match=r"profiles\.q\.servers\.gh\.rename\.a"):
        modify_profiles(store, bad)
    assert list(load_profiles(store)[0]) == ["p"]
