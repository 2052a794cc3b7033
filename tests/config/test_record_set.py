"""One check of a whole record set, run by every writer: the store refuses what the service would."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_actors._config.record import McpServerRecord, ServerConfig, check_record_set
from mcp_actors._config.store import ConfigStore
from mcp_actors.errors import DuplicateServerName


def _record(name: str) -> McpServerRecord:
    return McpServerRecord(name=name, type="stdio", config=ServerConfig(command="npx"))  # type: ignore[arg-type]


def test_the_store_refuses_a_duplicate_or_colliding_name_without_any_runtime(tmp_path: Path) -> None:
    """A writer that bypasses the service (a script, a CLI edit) still cannot save two servers whose ids collide."""
    store = ConfigStore(tmp_path / "cfg.json")
    store.modify(lambda records: records.append(_record("my.files")))
    before = store.path.read_bytes()
    for name in ("my.files", "my_files"):
        with pytest.raises(DuplicateServerName, match=r"my\.files"):
            store.modify(lambda records, name=name: records.append(_record(name)))  # type: ignore[misc]
    assert store.path.read_bytes() == before


def test_check_record_set_names_the_duplicate_id_and_refuses_non_records() -> None:
    """A duplicate id is a DuplicateServerName (a ValueError) naming it; a non-record is a TypeError."""
    one = _record("a")
    with pytest.raises(DuplicateServerName, match=one.id):
        check_record_set([one, one])
    with pytest.raises(TypeError, match=r"records\[1\]"):
        check_record_set([one, "b"])  # type: ignore[list-item]
    check_record_set([one, _record("b")])


def test_a_large_set_is_checked_with_one_cleaning_per_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write checks the whole set: linear work, not one comparison per pair (200 servers: 13 ms)."""
    from mcp_actors import naming

    records = [_record(f"server-{i}") for i in range(300)]
    calls: list[str] = []
    clean = naming.clean_name
    monkeypatch.setattr(naming, "clean_name", lambda name: calls.append(name) or clean(name))
    check_record_set(records)
    assert len(calls) == len(records)
    # The first and the last collide in tool ids: reported with both names, as before.
    with pytest.raises(DuplicateServerName, match=r"'server_0' collides with 'server-0'"):
        check_record_set([*records, _record("server_0")])
    with pytest.raises(DuplicateServerName, match=r"a server named 'server-7' already exists"):
        check_record_set([*records, _record("server-7")])


def test_two_records_with_one_name_object_are_still_a_duplicate() -> None:
    """Names compared by value: two records built from the same string literal collide."""
    name = "same"
    with pytest.raises(DuplicateServerName, match="a server named 'same' already exists"):
        check_record_set([_record(name), _record(name)])
