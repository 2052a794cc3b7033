"""The JSON config store: fresh installs, atomic writes, locking across processes, corrupt files."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcp_actors._config import store as store_module
from mcp_actors._config.codec import document_from_records, record_to_json_dict
from mcp_actors._config.record import McpServerRecord, ServerConfig, builtin_demo_record
from mcp_actors._config.store import CONFIG_ENV_VAR, ConfigFileLocked, ConfigStore, default_config_path
from mcp_actors.errors import ConfigFileCorrupt

_SECRET = "SECRET-store-7c1e"


def _record(name: str, **config: object) -> McpServerRecord:
    return McpServerRecord(name=name, type="stdio", config=ServerConfig(command="npx", **config))  # type: ignore[arg-type]


def _append(record: McpServerRecord) -> Callable[[list[McpServerRecord]], None]:
    return lambda records: records.append(record)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "cfg" / "mcp-config.json"


@pytest.fixture
def store(path: Path) -> ConfigStore:
    return ConfigStore(path)


def _snapshot(path: Path) -> tuple[bytes, int, int]:
    info = path.stat()
    return path.read_bytes(), info.st_ino, info.st_mtime_ns


def _temp_files(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f".{path.name}.*.tmp"))


# ----------------------------------------------------------------------------- fresh install, paths


def test_missing_file_is_a_fresh_install_with_the_demo_server_and_is_not_written(store: ConfigStore) -> None:
    """A missing file reads as [demo]; reading and a no-op modify create nothing."""
    assert store.load() == [builtin_demo_record()]
    assert store.modify(len) == 1
    assert not store.path.exists()


def test_first_change_writes_the_document_with_the_demo_server(store: ConfigStore) -> None:
    """The first modify writes {"version": 1, "mcpServers": [demo, new]}."""
    new = _record("files")
    store.modify(_append(new))
    document = json.loads(store.path.read_text("utf-8"))
    assert document == document_from_records([builtin_demo_record(), new])
    assert store.load() == [builtin_demo_record(), new]


def test_removing_the_demo_server_is_remembered(store: ConfigStore) -> None:
    """An empty server list is saved as such and does not bring the demo back."""
    store.modify(lambda records: records.clear())
    assert store.load() == []


def test_env_var_overrides_the_default_path_and_an_argument_overrides_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Path resolution: argument, else MCP_ACTORS_CONFIG, else the user data dir."""
    monkeypatch.setenv(CONFIG_ENV_VAR, str(tmp_path / "from-env.json"))
    assert ConfigStore().path == tmp_path / "from-env.json"
    assert ConfigStore(tmp_path / "arg.json").path == tmp_path / "arg.json"
    ConfigStore().modify(_append(_record("files")))
    assert (tmp_path / "from-env.json").exists()
    monkeypatch.setenv(CONFIG_ENV_VAR, "")
    assert ConfigStore().path == default_config_path()
    monkeypatch.delenv(CONFIG_ENV_VAR)
    assert ConfigStore().path == default_config_path()
    assert default_config_path().name == "mcp-config.json"
    assert "mcp-actors" in default_config_path().parts


def test_paths_are_expanded_and_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`~` is expanded and a relative path is fixed at construction, so a later chdir does not move it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ConfigStore("~/x.json").path == tmp_path / "x.json"
    monkeypatch.chdir(tmp_path)
    store = ConfigStore("rel.json")
    monkeypatch.chdir("/")
    assert store.path == tmp_path / "rel.json"


# ----------------------------------------------------------------------------- writes


def test_file_mode_is_0600_even_when_it_was_world_readable(store: ConfigStore) -> None:
    """Every write leaves the file readable by its owner only (it holds tokens)."""
    store.modify(_append(_record("a")))
    store.path.chmod(0o644)
    store.modify(_append(_record("b")))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_modify_returns_fn_result_and_fn_sees_a_fresh_read(store: ConfigStore) -> None:
    """fn gets the current records (re-read inside the lock) and its return value comes back."""
    store.modify(_append(_record("a")))
    other = ConfigStore(store.path)
    other.modify(_append(_record("b")))  # a second handle (think: another process) writes
    assert store.modify(lambda records: [r.name for r in records]) == ["demo", "a", "b"]


def test_unchanged_modify_does_not_rewrite_the_file(store: ConfigStore) -> None:
    """A modify that changes nothing leaves the very same file (same inode, same bytes)."""
    store.modify(_append(_record("a")))
    before = _snapshot(store.path)
    store.modify(lambda records: None)
    assert _snapshot(store.path) == before


def test_a_failing_fn_writes_nothing(store: ConfigStore) -> None:
    """If fn raises, the file is unchanged and the error propagates."""
    store.modify(_append(_record("a")))
    before = _snapshot(store.path)

    def fail(records: list[McpServerRecord]) -> None:
        records.clear()
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        store.modify(fail)
    assert _snapshot(store.path) == before


def test_modify_rejects_non_records_and_duplicate_ids(store: ConfigStore) -> None:
    """A list with a foreign object or a repeated id is refused before anything is written."""
    store.modify(_append(_record("a")))
    before = _snapshot(store.path)
    with pytest.raises(TypeError, match=r"records\[2\] must be a McpServerRecord, got dict"):
        store.modify(lambda records: records.append({"name": "x"}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="another record already uses"):
        store.modify(lambda records: records.append(records[0]))
    assert _snapshot(store.path) == before


def test_save_replaces_every_record(store: ConfigStore) -> None:
    """save() writes exactly the given records."""
    store.modify(_append(_record("a")))
    replacement = [_record("x"), _record("y")]
    store.save(replacement)
    assert store.load() == replacement


def test_unknown_top_level_keys_are_kept(store: ConfigStore) -> None:
    """Keys we do not know at the top level survive a read-modify-write."""
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({"mcpServers": [], "x-team": {"owner": "ops"}}), "utf-8")
    store.modify(_append(_record("a")))
    document = json.loads(store.path.read_text("utf-8"))
    assert document["x-team"] == {"owner": "ops"}
    assert document["version"] == 1


def test_non_ascii_and_unencodable_text_round_trip(store: ConfigStore) -> None:
    """Names in any script are written readably; a lone surrogate falls back to escapes."""
    readable = McpServerRecord(name="Файлы 文件", type="stdio", config=ServerConfig(command="npx"))
    odd = McpServerRecord(name="odd \ud800", type="stdio", config=ServerConfig(command="npx"))
    store.save([readable])
    assert "Файлы 文件" in store.path.read_text("utf-8")
    store.save([readable, odd])
    assert store.load() == [readable, odd]


def test_failed_write_leaves_the_old_file_and_no_temp_file(store: ConfigStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Disk full mid-write: the error says the old file is intact, and it is; the 0600 temp file is gone."""
    store.modify(_append(_record("a")))
    before = _snapshot(store.path)
    real_write = os.write
    seen: list[tuple[str, int, int]] = []

    def disk_full(fd: int, data: bytes) -> int:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if not target.startswith(str(store.path.parent)):
            return real_write(fd, data)
        info = os.fstat(fd)
        seen.append((target, stat.S_IMODE(info.st_mode), info.st_size))
        real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(OSError) as caught:
        store.modify(_append(_record("b")))
    monkeypatch.undo()
    assert caught.value.errno == errno.ENOSPC
    assert any("previous file is intact" in note for note in caught.value.__notes__)
    # The temp file was private before the first byte went in.
    assert len(seen) == 1
    temp_name, mode, size = seen[0]
    assert (mode, size) == (0o600, 0)
    assert Path(temp_name).parent == store.path.parent
    assert _snapshot(store.path) == before
    assert _temp_files(store.path) == []


_CRASH_WRITER = """
import os, signal, sys
from mcp_actors._config.record import McpServerRecord, ServerConfig
from mcp_actors._config.store import ConfigStore

def crash(src, dst):
    os.kill(os.getpid(), signal.SIGKILL)  # die between the fsynced temp file and the rename

os.replace = crash
record = McpServerRecord(name="lost", type="stdio", config=ServerConfig(command="npx"))
ConfigStore(sys.argv[1]).modify(lambda records: records.append(record))
"""


def test_a_writer_killed_before_the_rename_leaves_the_old_file(store: ConfigStore) -> None:
    """A real SIGKILL mid-write keeps the old file; the next writer cleans up and is not blocked."""
    store.modify(_append(_record("a")))
    before = _snapshot(store.path)
    child = subprocess.run(
        [sys.executable, "-c", _CRASH_WRITER, str(store.path)], capture_output=True, timeout=60, check=False
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert _snapshot(store.path) == before
    leftovers = _temp_files(store.path)
    assert len(leftovers) == 1
    assert stat.S_IMODE(leftovers[0].stat().st_mode) == 0o600
    assert "lost" in leftovers[0].read_text("utf-8")  # the temp file was complete, just never renamed
    store.modify(_append(_record("b")))  # the dead writer's lock died with it
    assert [r.name for r in store.load()] == ["demo", "a", "b"]
    assert _temp_files(store.path) == []


_CONCURRENT_WRITER = """
import sys
from mcp_actors._config.record import McpServerRecord, ServerConfig
from mcp_actors._config.store import ConfigStore

path, worker = sys.argv[1], int(sys.argv[2])
store = ConfigStore(path, lock_timeout=60)
print("ready", flush=True)
sys.stdin.readline()
for n in range(5):
    record = McpServerRecord(name=f"w{worker}-{n}", type="stdio", config=ServerConfig(command="npx"))
    store.modify(lambda records: records.append(record))
"""


def test_ten_processes_adding_at_once_lose_no_record(store: ConfigStore) -> None:
    """10 real processes x 5 adds each, released together: all 50 records (and the demo) are kept."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT_WRITER, str(store.path), str(worker)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker in range(10)
    ]
    try:
        for proc in procs:  # a barrier: every child is imported and waiting
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            _out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    names = [record.name for record in store.load()]
    expected = {"demo"} | {f"w{worker}-{n}" for worker in range(10) for n in range(5)}
    assert len(names) == 51
    assert set(names) == expected
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


@pytest.fixture
def held_lock(store: ConfigStore) -> Iterator[None]:
    """Hold the store's lock through a separate open file, as another process would."""
    store.path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(store.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def test_a_lock_held_too_long_is_a_clear_bounded_error(store: ConfigStore, held_lock: None) -> None:
    """While another holder keeps the lock, modify gives up after lock_timeout with ConfigFileLocked."""
    impatient = ConfigStore(store.path, lock_timeout=0.1)
    with pytest.raises(ConfigFileLocked, match=r"was not released within 0\.1 s") as caught:
        impatient.modify(_append(_record("a")))
    assert caught.value.path == str(store.path)
    assert not store.path.exists()
    assert impatient.load() == [builtin_demo_record()]  # reads need no lock


# ----------------------------------------------------------------------------- corrupt files


def _assert_untouched_by_every_operation(store: ConfigStore) -> ConfigFileCorrupt:
    before = _snapshot(store.path)
    errors = []
    for operation in (store.load, lambda: store.modify(_append(_record("x"))), lambda: store.save([])):
        with pytest.raises(ConfigFileCorrupt) as caught:
            operation()
        errors.append(caught.value)
    assert _snapshot(store.path) == before
    assert _temp_files(store.path) == []
    for error in errors:
        assert error.path == str(store.path)
        assert str(store.path) in str(error)
        assert "left untouched" in str(error)
    return errors[0]


def _write_raw(store: ConfigStore, text: str | bytes) -> None:
    store.path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    store.path.write_bytes(data)


def test_invalid_json_is_reported_with_line_and_column_and_never_overwritten(store: ConfigStore) -> None:
    """A syntax error gives path, line and column; load, modify and save all leave the file alone."""
    text = '{"version": 1, "mcpServers": [\n  {"id": "mcp_1_a", "name": "x",}\n]}\n'
    _write_raw(store, text)
    error = _assert_untouched_by_every_operation(store)
    assert (error.line, error.column) == (2, text.splitlines()[1].index("}") + 1)
    assert "line 2, column" in str(error)


def test_schema_errors_name_the_entry_index_and_field(store: ConfigStore) -> None:
    """A valid JSON file with a bad entry names mcpServers[i], the server and the field."""
    good = record_to_json_dict(_record("good"))
    bad = record_to_json_dict(_record("bad")) | {"config": {"command": "npx", "callTimeout": -5}}
    _write_raw(store, json.dumps({"version": 1, "mcpServers": [good, bad]}))
    error = _assert_untouched_by_every_operation(store)
    assert error.field == "mcpServers[1].config.callTimeout"
    assert error.server == "bad"
    assert "mcpServers[1]" in str(error) and "'bad'" in str(error)


def test_a_newer_schema_version_is_refused_and_kept(store: ConfigStore) -> None:
    """A file from a newer mcp-actors is not read and never downgraded by a write."""
    _write_raw(store, json.dumps({"version": 7, "mcpServers": [], "futureKey": True}))
    error = _assert_untouched_by_every_operation(store)
    assert "newer mcp-actors" in str(error)
    assert error.field == "version"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"[]",
        b'{"mcpServers": {"x": {"command": "npx"}}}',
        b'{"mcpServers": [], "version": "1"}',
        b'{"mcpServers": [\n  "npx"\n]}',
    ],
)
def test_other_broken_shapes_are_corrupt_not_empty(store: ConfigStore, content: bytes) -> None:
    """An empty file, a non-object, the desktop shape or a bad entry are errors, never 'no servers'."""
    _write_raw(store, content)
    _assert_untouched_by_every_operation(store)


def test_bytes_that_are_not_utf8_are_reported_with_their_position(store: ConfigStore) -> None:
    """Undecodable bytes give the line and column of the first bad byte."""
    _write_raw(store, b'{"mcpServers": [],\n  "x": "\xff"}')
    error = _assert_untouched_by_every_operation(store)
    assert (error.line, error.column) == (2, 9)


def test_a_utf8_bom_is_accepted(store: ConfigStore) -> None:
    """A BOM (as some Windows editors write) does not make the file corrupt."""
    _write_raw(store, b"\xef\xbb\xbf" + json.dumps(document_from_records([_record("a")])).encode())
    assert [r.name for r in store.load()] == ["a"]


def test_bytes_that_are_not_utf8_after_a_bom_are_reported_where_an_editor_shows_them(store: ConfigStore) -> None:
    """The BOM is no column of the text: the bad byte's line and column are counted after it."""
    _write_raw(store, b'\xef\xbb\xbf{\n  "a\xff": 1}')
    with pytest.raises(ConfigFileCorrupt, match=r"is not UTF-8 text \(line 2, column 5\)") as caught:
        store.load()
    assert (caught.value.line, caught.value.column) == (2, 5)


def test_corrupt_file_errors_never_show_secrets(store: ConfigStore) -> None:
    """Neither a JSON error nor a schema error quotes the env or header values around it."""
    _write_raw(store, '{"mcpServers": [{"config": {"env": {"TOKEN": "' + _SECRET + '" "X": 1}}}]}')
    with pytest.raises(ConfigFileCorrupt) as caught:
        store.load()
    assert _SECRET not in str(caught.value)
    entry = record_to_json_dict(_record("a", env={"TOKEN": _SECRET}))
    entry["config"]["env"]["BAD=NAME"] = _SECRET
    _write_raw(store, json.dumps({"mcpServers": [entry]}))
    with pytest.raises(ConfigFileCorrupt) as caught:
        store.load()
    assert "env.BAD=NAME" in str(caught.value)
    assert _SECRET not in str(caught.value)


def test_public_names_are_exported_sorted() -> None:
    """The module's __all__ is sorted and every name in it exists."""
    assert store_module.__all__ == sorted(store_module.__all__)
    for name in store_module.__all__:
        assert hasattr(store_module, name)
