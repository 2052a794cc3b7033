"""The JSON config store: ``mcp-config.json``, which never loses a record.

The file holds ``{"version": 1, "mcpServers": [<record>, ...]}`` (see
:mod:`mcp_actors._config.record` for a record's keys). Where it lives: the ``path`` argument, else
the ``MCP_ACTORS_CONFIG`` environment variable, else
``platformdirs.user_data_dir("mcp-actors")/mcp-config.json``.

Guarantees:

* **Atomic.** A write goes to a temporary file in the same directory (created with mode
  0600 before any byte is written), is fsynced, renamed over the file with ``os.replace``,
  and the directory is fsynced. A crash at any point leaves either the old file or the new
  one, never a mix; temporary files a crashed writer left behind are removed by the next
  writer (under the lock, where no other writer can be mid-write). The rule is
  :mod:`mcp_actors._config.atomic`'s, shared with the token file.
* **No lost updates.** :meth:`ConfigStore.modify` holds a cross-process lock
  (``mcp-config.json.lock``, via ``filelock``) around read-modify-write and re-reads the
  file inside it, so concurrent writers in many processes each see the others' records.
* **Private.** The file is mode 0600: it holds API keys and tokens. A directory created for it
  (missing parents too) is 0700 whatever the umask (:func:`mcp_actors._config.paths.make_private_dir`).
* **Never clobbers what it cannot read.** A file that is not valid JSON, fails the schema,
  or has a newer ``version`` raises :class:`~mcp_actors.errors.ConfigFileCorrupt` (with the
  path and the line/column, or the entry index and field) on every read *and* every write,
  and is left untouched until a person fixes or moves it.
* **Reads only a regular file of sane size.** A path naming a FIFO, a device or a directory,
  or a file over 16 MiB, is :class:`~mcp_actors.errors.ConfigFileRefused` at once, before a
  byte is read (:func:`mcp_actors._config.files.read_config_file`): never a reader blocked
  on a pipe, never a file read whole into memory.
* **Writes through links.** When the config path is a symlink (a dotfile manager's link into
  a repository, possibly a chain of links), the lock, the temporary file and the rename are
  beside the link's final target, resolved afresh for every write: the link stays a link and
  its target receives every change. Opening the store by the link or by the target shares
  one lock.
* **Keeps what it does not know.** Top-level keys other than ``version`` and ``mcpServers``
  are written back unchanged.

A missing file is a fresh install: it reads as ``[builtin_demo_record()]`` and is not
created until the first change.

The methods are synchronous, small and bounded (the lock wait by ``lock_timeout``): trio code
calls them with ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
import platformdirs

from mcp_actors._config import atomic
from mcp_actors._config.codec import document_from_records, records_from_document
from mcp_actors._config.files import read_config_file
from mcp_actors._config.paths import CONFIG_ENV_VAR as CONFIG_ENV_VAR
from mcp_actors._config.record import McpServerRecord, builtin_demo_record, check_record_set
from mcp_actors.errors import ConfigError, ConfigFileCorrupt, ConfigFileLocked, ConfigWriteFailed, McpActorsError

__all__ = [
    "CONFIG_ENV_VAR",
    "CONFIG_FILE_NAME",
    "ConfigFileLocked",
    "ConfigStore",
    "SectionChange",
    "default_config_path",
    "resolve_config_path",
]


CONFIG_FILE_NAME: Final = "mcp-config.json"
"""The config file's name inside the user data directory."""

_T = TypeVar("_T")


def default_config_path() -> Path:
    """Return ``<user data dir>/mcp-config.json`` (the platform's per-user data directory)."""
    return Path(platformdirs.user_data_dir("mcp-actors", appauthor=False)) / CONFIG_FILE_NAME


def resolve_config_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Return the config file to use: ``path``, else ``$MCP_ACTORS_CONFIG``, else the default.

    ``~`` is expanded and the result made absolute now, so a later ``chdir`` does not move
    the store. An empty ``MCP_ACTORS_CONFIG`` counts as unset.
    """
    if path is None:
        path = os.environ.get(CONFIG_ENV_VAR) or default_config_path()
    return Path(path).expanduser().absolute()


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of byte ``offset`` in ``data``."""
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, column


@attrs.frozen
class SectionChange:
    """What a :meth:`ConfigStore.modify_section` change returns: the section's new value and a result.

    Attributes:
        value: The section's new JSON value (``None`` removes the key).
        result: What :meth:`ConfigStore.modify_section` returns to its caller.
    """

    value: Any
    result: Any = None


@attrs.define(eq=False)
class ConfigStore:
    """The server records of one config file, read and written safely across processes.

    Args:
        path: The config file; ``None`` resolves it as :func:`resolve_config_path` does.
        lock_timeout: Longest wait, in seconds, for another process's write to finish.

    Attributes:
        path: The absolute path of the config file.
        lock_timeout: As above.
    """

    path: Path = attrs.field(default=None, converter=resolve_config_path)
    lock_timeout: float = attrs.field(default=10.0, kw_only=True)

    @property
    def lock_path(self) -> Path:
        """The lock file beside the config file's real target (``mcp-config.json.lock``)."""
        return atomic.lock_path(self.target_path)

    @property
    def target_path(self) -> Path:
        """The file :attr:`path` finally names, every symlink followed (itself when it is no link).

        Resolved on every access: a link re-pointed between two writes redirects the second.
        A dangling link resolves to the file it names, which the first write creates.
        """
        return atomic.real_target(self.path)

    # ------------------------------------------------------------------ public API

    def load(self) -> list[McpServerRecord]:
        """Return the configured records, in file order.

        Takes no lock: writers replace the file atomically, so a reader sees either the old
        or the new version.

        Returns:
            The records; ``[builtin_demo_record()]`` when the file does not exist yet.

        Raises:
            ConfigFileCorrupt: The file cannot be read as a config (path and position in the
                message); it is left untouched. :class:`~mcp_actors.errors.ConfigFileRefused`
                (a subclass) when the path is no regular file or a file over 16 MiB.
            OSError: The file exists but cannot be read (permissions, I/O).
        """
        records, _extras, _exists = self._read()
        return records

    def modify(self, fn: Callable[[list[McpServerRecord]], _T]) -> _T:
        """Read-modify-write the records under the cross-process lock.

        ``fn`` gets a fresh list read inside the lock and may change it in place (append,
        remove, replace items); its return value is returned. The list is then written back
        — only if it changed, so a no-op never creates or rewrites the file. If ``fn`` raises,
        nothing is written and the exception propagates.

        Keep ``fn`` short and free of I/O: other writers wait for it.

        Args:
            fn: The change; called exactly once.

        Returns:
            What ``fn`` returned.

        Raises:
            ConfigFileCorrupt: The current file is unreadable; nothing was written.
            ConfigFileLocked: The lock was not free within ``lock_timeout``.
            TypeError: The list holds something that is not a :class:`McpServerRecord`.
            ValueError: Two records in the list share an id.
            ConfigWriteFailed: The file could not be read, locked or written (disk full,
                read-only, permissions, a size limit); the old file is intact.
        """
        try:
            # Resolved once, so the lock, the read and the rename all concern the same file.
            target = self.target_path
            with atomic.locked(target, timeout=self.lock_timeout, what="config file", shown=self.path):
                records, extras, _exists = self._read()
                working = list(records)
                result = fn(working)
                check_record_set(working)
                if working != records:
                    self._write(working, extras, target)
                return result
        except McpActorsError:
            raise
        except OSError as exc:
            raise self._write_failed(exc) from exc

    def fingerprint(self) -> tuple[int, int, int, int] | None:
        """A cheap token that changes whenever the file is replaced or rewritten (one ``stat``).

        Writers replace the file atomically, so a new inode or size or mtime means new
        content; a reader compares tokens and re-reads only on a change.

        Returns:
            ``(device, inode, size, mtime_ns)``, or ``None`` when the file does not exist.
        """
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def load_with_fingerprint(self) -> tuple[list[McpServerRecord], tuple[int, int, int, int] | None]:
        """:meth:`load`, plus the :meth:`fingerprint` of exactly the version that was read.

        Raises:
            ConfigFileCorrupt, OSError: As :meth:`load`.
        """
        for _ in range(8):
            before = self.fingerprint()
            records, _extras, _exists = self._read()
            # A writer may have replaced the file between the stat and the read: read again.
            if self.fingerprint() == before:
                return records, before
        return records, self.fingerprint()

    def load_section(self, key: str) -> tuple[Any, tuple[int, int, int, int] | None]:
        """One top-level section other than the records (``profiles``), as JSON, with its fingerprint.

        The store keeps such sections as they are; their owner (:mod:`mcp_actors._config.profiles`
        for ``profiles``) validates them.

        Returns:
            The section's JSON value (``None`` when absent) and the :meth:`fingerprint` of the
            version read.

        Raises:
            ConfigFileCorrupt, OSError: As :meth:`load`.
        """
        for _ in range(8):
            before = self.fingerprint()
            _records, extras, _exists = self._read()
            if self.fingerprint() == before:
                break
        return extras.get(key), before

    def modify_section(self, key: str, fn: Callable[[Any], SectionChange]) -> Any:
        """Read-modify-write one top-level section under the same lock as :meth:`modify`.

        ``fn`` gets the section's current JSON value (``None`` when absent) and returns a
        :class:`SectionChange`: the section is written back only when its new value differs
        (``None`` removes the key); the records and every other section are written back
        unchanged. If ``fn`` raises, nothing is written.

        Args:
            key: The top-level key (never ``version`` or ``mcpServers``).
            fn: The change; called exactly once with the current value.

        Returns:
            ``fn``'s :attr:`SectionChange.result`.

        Raises:
            ValueError: ``key`` names the records or the version.
            ConfigFileCorrupt, ConfigFileLocked, ConfigWriteFailed: As :meth:`modify`.
        """
        if key in ("version", "mcpServers"):
            raise ValueError(f"modify_section is for sections other than the records, got {key!r}")
        try:
            target = self.target_path
            with atomic.locked(target, timeout=self.lock_timeout, what="config file", shown=self.path):
                records, extras, _exists = self._read()
                change = fn(extras.get(key))
                if not isinstance(change, SectionChange):
                    raise TypeError(f"fn must return a SectionChange, got {type(change).__name__}")
                if change.value != extras.get(key):
                    updated = {k: v for k, v in extras.items() if k != key}
                    if change.value is not None:
                        updated[key] = change.value
                    self._write(records, updated, target)
                return change.result
        except McpActorsError:
            raise
        except OSError as exc:
            raise self._write_failed(exc) from exc

    def save(self, records: Iterable[McpServerRecord]) -> None:
        """Replace all records with ``records`` (under the lock, atomically).

        Like :meth:`modify`, this refuses to overwrite a file it cannot read: a corrupt file
        is for a person to fix or move away.

        Raises:
            ConfigFileCorrupt: The current file is unreadable; nothing was written.
            ConfigFileLocked: The lock was not free within ``lock_timeout``.
            TypeError: An item is not a :class:`McpServerRecord`.
            ValueError: Two records share an id.
            ConfigWriteFailed: The write failed; the old file is intact.
        """
        new_records = list(records)
        check_record_set(new_records)

        def replace_all(current: list[McpServerRecord]) -> None:
            current[:] = new_records

        self.modify(replace_all)

    # ------------------------------------------------------------------ internals

    def _read(self) -> tuple[list[McpServerRecord], dict[str, Any], bool]:
        """Return (records, unknown top-level keys, whether the file exists)."""
        try:
            data = read_config_file(
                self.path,
                what="config file",
                fix="point --config or MCP_ACTORS_CONFIG at a regular JSON file; this one was left untouched",
            )
        except FileNotFoundError:
            return [builtin_demo_record()], {}, False
        # Tolerate a BOM left by a Windows editor. Stripped here, not by the "utf-8-sig"
        # codec: the codec's first use imports a module (~0.3 ms of a runtime's start), and
        # a bad byte's position must be counted after the BOM, as an editor shows it.
        data = data.removeprefix(codecs.BOM_UTF8)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line, column = _position(data, exc.start)
            raise self._corrupt(f"is not UTF-8 text (line {line}, column {column})", line=line, column=column) from None
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            # exc.msg describes the syntax only ("Expecting ',' delimiter"), never the content.
            raise self._corrupt(
                f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                line=exc.lineno,
                column=exc.colno,
            ) from None
        except (ValueError, RecursionError) as exc:
            # Valid syntax the decoder still refuses: a 4300+ digit integer, absurd nesting.
            problem = "nests too deeply" if isinstance(exc, RecursionError) else "holds a number too long to read"
            raise self._corrupt(problem) from None
        try:
            records = records_from_document(document)
        except ConfigError as exc:
            corrupt = self._corrupt(f"does not match the config schema: {exc}")
            corrupt.field = exc.field
            corrupt.server = exc.server
            raise corrupt from None
        extras = {key: value for key, value in document.items() if key not in ("version", "mcpServers")}
        return records, extras, True

    def _write_failed(self, exc: OSError) -> ConfigWriteFailed:
        return atomic.write_failed(
            exc,
            what="config file",
            shown=self.path,
            then="nothing was changed and the saved servers are intact; free space or fix permissions, or choose"
            " another config file (--config or MCP_ACTORS_CONFIG), then retry",
        )

    def _corrupt(self, problem: str, *, line: int | None = None, column: int | None = None) -> ConfigFileCorrupt:
        return ConfigFileCorrupt(
            f"the config file {self.path} {problem}. It was left untouched; fix it by hand, or move "
            f"it away to start from a fresh config",
            path=str(self.path),
            line=line,
            column=column,
        )

    def _write(self, records: list[McpServerRecord], extras: dict[str, Any], target: Path) -> None:
        atomic.replace(target, _encode({**document_from_records(records), **extras}), shown=self.path)


def _encode(document: dict[str, Any]) -> bytes:
    """Readable UTF-8 JSON; ``\\u`` escapes only if a string cannot be UTF-8 (a lone surrogate)."""
    try:
        return (json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(document, indent=2, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")
