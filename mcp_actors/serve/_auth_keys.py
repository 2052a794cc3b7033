"""The gateway's API keys: random bearer secrets, stored only as digests, each opening one profile or all.

A key is ``mcpa_`` and 32 random bytes (URL-safe base64): shown once when it is made
(:func:`create_api_key`), never stored, logged or shown again. The table keeps its SHA-256
digest (a random 256-bit secret needs no slow hash: there is nothing to guess), its name, the
profile it opens (``None``: every profile), its creation time and its optional expiry. A
request's key is found by its digest and the digests compared again in constant time.

The table is a small async ABC (:class:`ApiKeyTable`: lookup by digest, add, remove, list)
so another store (a shared one for several gateway processes) needs no change elsewhere.
Two are here: :class:`MemoryApiKeyTable`, and :class:`FileApiKeyTable`, one JSON file in the
state directory (``gateway-keys.json``) written by the config file's rules (mode 0600 from the
first byte, a temp file renamed over the old one, a cross-process lock around every
read-modify-write). A serving gateway re-reads the file when it changes (checked at most once
a second, off the event loop), so ``mcp-actors serve keys add`` and ``keys rm`` take effect
without a restart.
"""

from __future__ import annotations

import abc
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio.to_thread
import attrs

from mcp_actors._config import atomic
from mcp_actors._config.files import read_config_file
from mcp_actors.errors import ConfigError, McpActorsError

__all__ = [
    "KEY_PREFIX",
    "ApiKey",
    "ApiKeyTable",
    "FileApiKeyTable",
    "MemoryApiKeyTable",
    "create_api_key",
    "default_key_path",
    "key_digest",
]

KEY_PREFIX: Final = "mcpa_"
"""What every gateway API key starts with (a bearer token that does not is not a key: OAuth's)."""
_FILE_NAME: Final = "gateway-keys.json"
_VERSION: Final = 1
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_RECHECK: Final = 1.0
"""Seconds a serving gateway trusts its copy of the key file before it looks for a change."""


def default_key_path(config_path: str | os.PathLike[str] | None = None) -> Path:
    """``gateway-keys.json`` in the state directory of ``config_path`` (the one rule: ``state_dir``)."""
    from mcp_actors._config.paths import state_dir

    return state_dir(config_path) / _FILE_NAME


def key_digest(key: str) -> str:
    """The stored form of a key: the hex SHA-256 of its text."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _check_name(instance: Any, attribute: Any, value: str) -> None:
    if not _NAME.match(value):
        raise ValueError(f"a key name is 1-64 letters, digits and '_.@-', starting alphanumeric; got {value!r}")


def _check_digest(instance: Any, attribute: Any, value: str) -> None:
    if len(value) != 64 or not all(c in "0123456789abcdef" for c in value):
        raise ValueError("digest must be 64 lowercase hex digits (a SHA-256)")


@attrs.frozen(kw_only=True)
class ApiKey:
    """One key as stored: never the key itself.

    Attributes:
        name: The key's name (unique in its table): who or what holds it.
        digest: The SHA-256 of the key (hex); kept out of reprs all the same.
        profile: The profile it opens; ``None``: every profile and the whole gateway.
        created_at: Unix time it was made.
        expires_at: Unix time it stops opening anything; ``None``: never.
    """

    name: str = attrs.field(validator=_check_name)
    digest: str = attrs.field(validator=_check_digest, repr=False)
    profile: str | None = None
    created_at: float
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        """Whether the key is past its expiry at Unix time ``now``."""
        return self.expires_at is not None and now >= self.expires_at

    def to_json(self) -> dict[str, Any]:
        """The stored JSON form (camelCase; the digest, never a key)."""
        return {
            "name": self.name,
            "digest": self.digest,
            "profile": self.profile,
            "createdAt": self.created_at,
            "expiresAt": self.expires_at,
        }

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> ApiKey:
        """Read one stored entry (raises ``ValueError``/``TypeError``/``KeyError`` on a bad one)."""
        expires = entry.get("expiresAt")
        return cls(
            name=str(entry["name"]),
            digest=str(entry["digest"]),
            profile=entry.get("profile"),
            created_at=float(entry["createdAt"]),
            expires_at=None if expires is None else float(expires),
        )


class ApiKeyTable(abc.ABC):
    """Where a gateway's API keys are kept, by digest. Every method may be called from the trio loop."""

    @abc.abstractmethod
    async def lookup(self, digest: str) -> ApiKey | None:
        """The key with this digest, or ``None`` (expired keys are returned: the caller decides)."""

    @abc.abstractmethod
    async def add(self, key: ApiKey) -> None:
        """Store ``key``.

        Raises:
            ConfigError: A key of that name exists already (remove it first).
        """

    @abc.abstractmethod
    async def remove(self, name: str) -> bool:
        """Delete the key named ``name``; True if there was one."""

    @abc.abstractmethod
    async def list(self) -> list[ApiKey]:
        """Every key, by name."""


async def create_api_key(
    table: ApiKeyTable, name: str, *, profile: str | None = None, expires_at: float | None = None
) -> tuple[str, ApiKey]:
    """Make a new random key, store its digest in ``table``, return ``(the key, its entry)``.

    The key is returned once, here: show it to the person who asked and forget it.

    Raises:
        ConfigError: The name is taken.
        ValueError: The name is not a valid key name.
    """
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    entry = ApiKey(name=name, digest=key_digest(secret), profile=profile, created_at=time.time(), expires_at=expires_at)
    await table.add(entry)
    return secret, entry


def _taken(name: str) -> ConfigError:
    return ConfigError(f"an API key named {name!r} exists already; remove it first (keys rm {name})", field="name")


class MemoryApiKeyTable(ApiKeyTable):
    """Keys in this process's memory (tests, a host that keeps its keys elsewhere)."""

    def __init__(self) -> None:
        self._by_digest: dict[str, ApiKey] = {}

    def __repr__(self) -> str:
        return f"MemoryApiKeyTable({len(self._by_digest)} keys)"

    async def lookup(self, digest: str) -> ApiKey | None:
        found = self._by_digest.get(digest)
        return found if found is not None and hmac.compare_digest(found.digest, digest) else None

    async def add(self, key: ApiKey) -> None:
        if any(existing.name == key.name for existing in self._by_digest.values()):
            raise _taken(key.name)
        self._by_digest[key.digest] = key

    async def remove(self, name: str) -> bool:
        for digest, key in list(self._by_digest.items()):
            if key.name == name:
                del self._by_digest[digest]
                return True
        return False

    async def list(self) -> list[ApiKey]:
        return sorted(self._by_digest.values(), key=lambda key: key.name)


@attrs.frozen
class _Snapshot:
    stamp: tuple[int, int, int] | None
    """``(inode, size, mtime_ns)`` of the file read; ``None``: there was no file."""
    by_digest: dict[str, ApiKey]
    checked: float


class FileApiKeyTable(ApiKeyTable):
    """Keys in one 0600 JSON file, written atomically under a cross-process lock.

    Lookups use a copy of the file, re-read when the file changes (looked at at most once a
    second, in a worker thread): a serving gateway sees keys added or removed by another
    process within about a second.

    Args:
        path: The file; default :func:`default_key_path`.
        lock_timeout: Seconds to wait for another process's lock.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, lock_timeout: float = 10.0) -> None:
        self.path = Path(path) if path is not None else default_key_path()
        self.lock_timeout = lock_timeout
        self._snapshot: _Snapshot | None = None

    def __repr__(self) -> str:
        return f"FileApiKeyTable(path={str(self.path)!r})"

    async def lookup(self, digest: str) -> ApiKey | None:
        snapshot = self._snapshot
        if snapshot is None or time.monotonic() - snapshot.checked >= _RECHECK:
            snapshot = self._snapshot = await anyio.to_thread.run_sync(self._refresh, snapshot)
        found = snapshot.by_digest.get(digest)
        return found if found is not None and hmac.compare_digest(found.digest, digest) else None

    async def add(self, key: ApiKey) -> None:
        def modify(keys: dict[str, ApiKey]) -> bool:
            if key.name in keys:
                raise _taken(key.name)
            keys[key.name] = key
            return True

        await anyio.to_thread.run_sync(self._modify, modify)

    async def remove(self, name: str) -> bool:
        def modify(keys: dict[str, ApiKey]) -> bool:
            return keys.pop(name, None) is not None

        return await anyio.to_thread.run_sync(self._modify, modify)

    async def list(self) -> list[ApiKey]:
        keys = await anyio.to_thread.run_sync(self._read)
        return [keys[name] for name in sorted(keys)]

    # ---------------------------------------------------------------- blocking internals

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _refresh(self, previous: _Snapshot | None) -> _Snapshot:
        stamp = self._stamp()
        if previous is not None and previous.stamp == stamp:
            return _Snapshot(stamp, previous.by_digest, time.monotonic())
        keys = self._read()
        return _Snapshot(stamp, {key.digest: key for key in keys.values()}, time.monotonic())

    def _read(self) -> dict[str, ApiKey]:
        try:
            data = read_config_file(
                self.path, what="API key file", fix="move it away (its keys stop working) or set MCP_ACTORS_STATE_DIR"
            )
        except FileNotFoundError:
            return {}
        try:
            document = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ConfigError(
                f"the API key file {self.path} is not valid JSON; move it away and add the keys again", field="keys"
            ) from None
        entries = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise ConfigError(f"the API key file {self.path} has no 'keys' list; move it away", field="keys")
        keys: dict[str, ApiKey] = {}
        for index, entry in enumerate(entries):
            try:
                key = ApiKey.from_json(entry)
            except (ValueError, TypeError, KeyError, AttributeError):
                raise ConfigError(
                    f"the API key file {self.path} has a bad entry at keys[{index}]; remove it (keys rm) or move"
                    " the file away",
                    field=f"keys[{index}]",
                ) from None
            keys[key.name] = key
        return keys

    def _modify(self, modify: Callable[[dict[str, ApiKey]], bool]) -> bool:
        try:
            target = atomic.real_target(self.path)
            with atomic.locked(target, timeout=self.lock_timeout, what="API key file", shown=self.path):
                keys = self._read()
                changed = modify(keys)
                if changed:
                    entries = [keys[name].to_json() for name in sorted(keys)]
                    payload = json.dumps({"version": _VERSION, "keys": entries}, indent=2, sort_keys=True) + "\n"
                    atomic.replace(target, payload.encode(), shown=self.path)
                    self._snapshot = None
                return changed
        except McpActorsError:
            raise
        except OSError as exc:
            raise atomic.write_failed(
                exc,
                what="API key file",
                shown=self.path,
                then="the previous file is intact; fix permissions or set MCP_ACTORS_STATE_DIR, then retry",
            ) from None
