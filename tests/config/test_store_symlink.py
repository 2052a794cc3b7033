"""A symlinked config file stays a link: writes go through to its real target.

Dotfile managers (stow, chezmoi, home-manager) keep ``mcp-config.json`` as a link into a
repository. ``os.replace`` over the link would swap the link for a regular file, and the
repository's copy would silently stop receiving changes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mcp_actors._config.record import McpServerRecord, ServerConfig, builtin_demo_record
from mcp_actors._config.store import ConfigStore


def _record(name: str) -> McpServerRecord:
    return McpServerRecord(name=name, type="stdio", config=ServerConfig(command="npx"))  # type: ignore[arg-type]


def _names(store: ConfigStore) -> list[str]:
    return [record.name for record in store.load()]


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_a_symlinked_config_stays_a_link_and_its_target_gets_the_change(tmp_path: Path) -> None:
    """modify() through a link writes the target atomically; the link is still a link to it."""
    dotfiles, home = tmp_path / "dotfiles", tmp_path / "home"
    dotfiles.mkdir()
    home.mkdir()
    target = dotfiles / "mcp-config.json"
    ConfigStore(target).save([builtin_demo_record()])
    link = home / "mcp-config.json"
    link.symlink_to(target)

    store = ConfigStore(link)
    store.modify(lambda records: records.append(_record("alpha")))

    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert _names(ConfigStore(target)) == ["demo", "alpha"]
    assert _names(store) == ["demo", "alpha"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    # Temp file, rename and lock live beside the real file, so every path to it shares one lock.
    assert store.lock_path == ConfigStore(target).lock_path == dotfiles / "mcp-config.json.lock"
    assert _leftovers(dotfiles) == []
    assert sorted(p.name for p in home.iterdir()) == ["mcp-config.json"]


def test_a_chain_of_two_relative_links_is_followed_to_the_end(tmp_path: Path) -> None:
    """link -> link -> file (relative targets): both links survive a write and the file gets it."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    target = tmp_path / "c" / "real.json"
    ConfigStore(target).save([builtin_demo_record()])
    middle = tmp_path / "b" / "middle.json"
    middle.symlink_to(Path("..") / "c" / "real.json")
    outer = tmp_path / "a" / "mcp-config.json"
    outer.symlink_to(Path("..") / "b" / "middle.json")

    store = ConfigStore(outer)
    store.modify(lambda records: records.append(_record("one")))
    store.modify(lambda records: records.append(_record("two")))

    assert outer.is_symlink() and middle.is_symlink()
    assert os.readlink(outer) == os.path.join("..", "b", "middle.json")
    assert os.readlink(middle) == os.path.join("..", "c", "real.json")
    assert _names(ConfigStore(target)) == ["demo", "one", "two"]
    assert _leftovers(tmp_path / "a") == _leftovers(tmp_path / "b") == _leftovers(tmp_path / "c") == []


def test_a_dangling_link_is_written_through_to_create_its_target(tmp_path: Path) -> None:
    """A link to a file that does not exist yet: the first write creates the target, not a file over the link."""
    target = tmp_path / "repo" / "mcp-config.json"
    target.parent.mkdir()
    link = tmp_path / "mcp-config.json"
    link.symlink_to(target)

    store = ConfigStore(link)
    assert _names(store) == ["demo"]  # a fresh install, read through the link
    store.modify(lambda records: records.append(_record("first")))

    assert link.is_symlink()
    assert target.is_file()
    assert _names(ConfigStore(target)) == ["demo", "first"]


def test_a_link_retargeted_between_writes_is_followed_anew(tmp_path: Path) -> None:
    """The link is resolved on every write, so re-pointing it redirects the next write."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    ConfigStore(first).save([builtin_demo_record()])
    ConfigStore(second).save([])
    link = tmp_path / "mcp-config.json"
    link.symlink_to(first)
    store = ConfigStore(link)

    store.modify(lambda records: records.append(_record("to-first")))
    link.unlink()
    link.symlink_to(second)
    store.modify(lambda records: records.append(_record("to-second")))

    assert _names(ConfigStore(first)) == ["demo", "to-first"]
    assert _names(ConfigStore(second)) == ["to-second"]
    assert link.is_symlink()


def test_a_link_loop_is_a_typed_write_error_and_nothing_is_created(tmp_path: Path) -> None:
    """Two links naming each other: modify() raises ConfigWriteFailed with the OS reason; both stay links."""
    import pytest

    from mcp_actors.errors import ConfigWriteFailed

    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.symlink_to(second)
    second.symlink_to(first)
    with pytest.raises(ConfigWriteFailed, match="symbolic links") as caught:
        ConfigStore(first).modify(lambda records: records.append(_record("never")))
    assert caught.value.path == str(first)
    assert first.is_symlink() and second.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.json.lock", "b.json"]  # no temp file
