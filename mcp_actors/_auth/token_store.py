"""Token stores: where OAuth tokens and client registrations live, per server.

Never in the config file, events, logs, reprs or errors. The default is one JSON file,
``oauth-tokens.json`` in the state directory (the process tracker's, ``MCP_ACTORS_STATE_DIR``
or the user state dir), written by the config file's rule (:mod:`mcp_actors._config.atomic`):
mode 0600 from the first byte, a temp file fsynced and renamed over the old one (a symlinked
file is written through to its target), a cross-process lock around every read-modify-write.
A host may plug in its own store (:class:`TokenStore`), or a plain SDK ``TokenStorage`` per
server (:class:`CallableTokenStore`), or the system keyring (:class:`KeyringTokenStore`,
when the ``keyring`` package is installed).

The token file is read by the rule of every file taken as configuration
(:func:`mcp_actors._config.files.read_config_file`): a path that is no regular file (a FIFO,
a device) or a file over 16 MiB is :class:`~mcp_actors.errors.ConfigFileRefused` at once,
on a read and on a write, and is never written over.

Every entry remembers the server URL it was issued for: tokens of a server whose URL changed
are ignored (they are for another resource), so editing ``config.url`` means a new login.

An entry also keeps the server's DPoP key (RFC 9449; :mod:`mcp_actors._auth.dpop`), a private
JWK, and which key the stored tokens were obtained with (:class:`~mcp_actors._auth.dpop.TokenBinding`):
the key is a secret like the tokens, and it must outlive a restart, or every DPoP-bound token
(and refresh token) would be lost with the process. A logout or a new URL forgets it with the
tokens; the next login makes a new one. A host's own SDK ``TokenStorage``
(:class:`CallableTokenStore`) has no place for a key: such servers go without DPoP unless
``config.oauth.dpop`` demands it.
"""

from __future__ import annotations

import abc
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import anyio.to_thread
import attrs
from mcp.client.auth import TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mcp_actors._auth.dpop import TokenBinding
from mcp_actors._config import atomic
from mcp_actors._config.files import read_config_file
from mcp_actors.errors import McpActorsError

__all__ = [
    "CallableTokenStore",
    "DpopTokenStorage",
    "FileTokenStore",
    "KeyringTokenStore",
    "LoginStatus",
    "MemoryTokenStore",
    "ServerTokenStorage",
    "TokenStore",
    "default_token_path",
]

_FILE_NAME: Final = "oauth-tokens.json"
_VERSION: Final = 1


def default_token_path() -> Path:
    """``oauth-tokens.json`` in the state directory the process tracker uses for its ledger."""
    from mcp_actors._process.tracker import _default_state_dir

    return _default_state_dir() / _FILE_NAME


@attrs.frozen(kw_only=True)
class LoginStatus:
    """What may be shown about a server's login: never a token.

    Attributes:
        server_id: The server's record id.
        logged_in: Whether an access token (or a refresh token) is stored.
        expires_at: When the access token expires (Unix time), if known.
        scopes: The granted scopes.
        client_id: The OAuth client id in use, if one is stored.
        has_refresh_token: Whether the login can be renewed without a person.
        server_url: The server URL the tokens were issued for.
        dpop_bound: Whether the access token is DPoP-bound (RFC 9449): usable only with the
            server's DPoP key, which the store keeps.
    """

    server_id: str
    logged_in: bool
    expires_at: float | None = None
    scopes: tuple[str, ...] = ()
    client_id: str | None = None
    has_refresh_token: bool = False
    server_url: str | None = None
    dpop_bound: bool = False

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON form (``auth status --json``)."""
        return {
            "serverId": self.server_id,
            "loggedIn": self.logged_in,
            "expiresAt": self.expires_at,
            "scopes": list(self.scopes),
            "clientId": self.client_id,
            "hasRefreshToken": self.has_refresh_token,
            "dpopBound": self.dpop_bound,
        }


@runtime_checkable
class TokenStore(Protocol):
    """Where a runtime keeps OAuth tokens, one entry per server (by record id)."""

    def storage_for(self, server_id: str, *, server_url: str) -> TokenStorage:
        """The SDK ``TokenStorage`` of one server (tokens for ``server_url`` only)."""
        ...

    async def forget(self, server_id: str) -> bool:
        """Delete the server's tokens and client registration; True if there were any."""
        ...

    async def status(self, server_id: str) -> LoginStatus:
        """What may be shown about the server's login (never a token)."""
        ...


@runtime_checkable
class DpopTokenStorage(Protocol):
    """A server's ``TokenStorage`` that can also keep its DPoP key and what its tokens are bound to.

    Our stores' storages are (:class:`ServerTokenStorage`); a host's plain SDK
    ``TokenStorage`` is not, and its servers go without DPoP unless the record demands it.
    """

    async def get_tokens(self) -> OAuthToken | None:
        """The stored token response, or None."""
        ...

    async def set_tokens(self, tokens: OAuthToken, *, binding: TokenBinding | None = None) -> None:
        """Store a token response and the DPoP key it was obtained with (None: none)."""
        ...

    async def get_token_binding(self) -> TokenBinding | None:
        """Which key the stored tokens were obtained with, or None."""
        ...

    async def get_dpop_key(self) -> dict[str, Any] | None:
        """The server's DPoP key, a private JWK, or None."""
        ...

    async def set_dpop_key(self, jwk: Mapping[str, Any]) -> None:
        """Keep the server's DPoP key (a private JWK)."""
        ...


class ServerTokenStorage:
    """One server's entry of a :class:`JsonTokenStore`, as the SDK's ``TokenStorage``.

    Also records when the access token expires (absolute time), which the SDK keeps only in
    memory, so a restarted runtime refreshes an expired token before using it.
    """

    def __init__(self, store: JsonTokenStore, server_id: str, server_url: str) -> None:
        self._store = store
        self.server_id = server_id
        self.server_url = server_url

    def __repr__(self) -> str:
        return f"ServerTokenStorage(server_id={self.server_id!r})"

    async def _entry(self) -> dict[str, Any]:
        entry = await self._store.load(self.server_id)
        if entry is None or entry.get("serverUrl") != self.server_url:
            return {}
        return entry

    async def get_tokens(self) -> OAuthToken | None:
        """The stored token response, or None."""
        raw = (await self._entry()).get("tokens")
        return OAuthToken.model_validate(raw) if isinstance(raw, dict) else None

    async def set_tokens(self, tokens: OAuthToken, *, binding: TokenBinding | None = None) -> None:
        """Store a token response, when it expires, and the DPoP key it was obtained with (``binding``).

        One write for the three: tokens are never stored apart from what they are bound to.
        """
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None

        def change(entry: dict[str, Any]) -> None:
            entry["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
            entry["expiresAt"] = expires_at
            if binding is None:
                entry.pop("tokenBinding", None)
            else:
                entry["tokenBinding"] = binding.to_json()

        await self._store.update(self.server_id, self.server_url, change)

    async def get_token_binding(self) -> TokenBinding | None:
        """Which DPoP key the stored tokens were obtained with, or None (bearer tokens, or none)."""
        return TokenBinding.from_json((await self._entry()).get("tokenBinding"))

    async def get_dpop_key(self) -> dict[str, Any] | None:
        """The server's DPoP key, a private JWK, or None."""
        raw = (await self._entry()).get("dpopKey")
        return dict(raw) if isinstance(raw, dict) else None

    async def set_dpop_key(self, jwk: Mapping[str, Any]) -> None:
        """Keep the server's DPoP key (a private JWK) in its entry."""
        key = dict(jwk)

        def change(entry: dict[str, Any]) -> None:
            entry["dpopKey"] = key

        await self._store.update(self.server_id, self.server_url, change)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The stored client registration, or None."""
        raw = (await self._entry()).get("clientInfo")
        return OAuthClientInformationFull.model_validate(raw) if isinstance(raw, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Store a client registration (dynamic, or a metadata-document client id)."""

        def change(entry: dict[str, Any]) -> None:
            entry["clientInfo"] = client_info.model_dump(mode="json", exclude_none=True)

        await self._store.update(self.server_id, self.server_url, change)

    async def get_expires_at(self) -> float | None:
        """When the stored access token expires (Unix time), if known."""
        value = (await self._entry()).get("expiresAt")
        return float(value) if isinstance(value, int | float) else None


def _status_of(server_id: str, entry: Mapping[str, Any] | None) -> LoginStatus:
    if not entry:
        return LoginStatus(server_id=server_id, logged_in=False)
    raw_tokens, raw_client = entry.get("tokens"), entry.get("clientInfo")
    tokens: dict[str, Any] = raw_tokens if isinstance(raw_tokens, dict) else {}
    client: dict[str, Any] = raw_client if isinstance(raw_client, dict) else {}
    raw_scope = tokens.get("scope")
    scope = raw_scope if isinstance(raw_scope, str) else ""
    expires = entry.get("expiresAt")
    return LoginStatus(
        server_id=server_id,
        logged_in=bool(tokens.get("access_token") or tokens.get("refresh_token")),
        expires_at=float(expires) if isinstance(expires, int | float) else None,
        scopes=tuple(scope.split()),
        client_id=client.get("client_id") if isinstance(client.get("client_id"), str) else None,
        has_refresh_token=bool(tokens.get("refresh_token")),
        server_url=entry.get("serverUrl") if isinstance(entry.get("serverUrl"), str) else None,
        dpop_bound=bool((binding := TokenBinding.from_json(entry.get("tokenBinding"))) and binding.bound),
    )


class JsonTokenStore(abc.ABC):
    """A store of one JSON object per server; subclasses say where the objects live."""

    @abc.abstractmethod
    async def load(self, server_id: str) -> dict[str, Any] | None:
        """The server's entry, or None."""

    @abc.abstractmethod
    async def update(self, server_id: str, server_url: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply ``change`` to the server's entry atomically (a new entry if the URL differs)."""

    @abc.abstractmethod
    async def forget(self, server_id: str) -> bool:
        """Delete the server's entry; True if there was one."""

    def storage_for(self, server_id: str, *, server_url: str) -> ServerTokenStorage:
        """The SDK ``TokenStorage`` of one server."""
        return ServerTokenStorage(self, server_id, server_url)

    async def status(self, server_id: str) -> LoginStatus:
        """What may be shown about the server's login (never a token)."""
        return _status_of(server_id, await self.load(server_id))


def _fresh_entry(entry: dict[str, Any] | None, server_url: str) -> dict[str, Any]:
    if entry is None or entry.get("serverUrl") != server_url:
        return {"serverUrl": server_url}
    return entry


class MemoryTokenStore(JsonTokenStore):
    """Tokens in memory only (tests, and hosts that must not write to disk)."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"MemoryTokenStore(servers={sorted(self._entries)!r})"

    async def load(self, server_id: str) -> dict[str, Any] | None:
        entry = self._entries.get(server_id)
        return json.loads(json.dumps(entry)) if entry is not None else None

    async def update(self, server_id: str, server_url: str, change: Callable[[dict[str, Any]], None]) -> None:
        entry = _fresh_entry(await self.load(server_id), server_url)
        change(entry)
        self._entries[server_id] = entry

    async def forget(self, server_id: str) -> bool:
        return self._entries.pop(server_id, None) is not None


class FileTokenStore(JsonTokenStore):
    """All servers' tokens in one 0600 JSON file, written atomically under a lock.

    Args:
        path: The file; default :func:`default_token_path`.
        lock_timeout: Seconds to wait for another process's lock.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, lock_timeout: float = 10.0) -> None:
        self.path = Path(path) if path is not None else default_token_path()
        self.lock_timeout = lock_timeout

    def __repr__(self) -> str:
        return f"FileTokenStore(path={str(self.path)!r})"

    async def load(self, server_id: str) -> dict[str, Any] | None:
        document = await anyio.to_thread.run_sync(self._read)
        entry = document.get(server_id)
        return entry if isinstance(entry, dict) else None

    async def update(self, server_id: str, server_url: str, change: Callable[[dict[str, Any]], None]) -> None:
        def modify(document: dict[str, Any]) -> bool:
            current = document.get(server_id)
            entry = _fresh_entry(current if isinstance(current, dict) else None, server_url)
            change(entry)
            document[server_id] = entry
            return True

        await anyio.to_thread.run_sync(self._modify, modify)

    async def forget(self, server_id: str) -> bool:
        def modify(document: dict[str, Any]) -> bool:
            return document.pop(server_id, None) is not None

        return await anyio.to_thread.run_sync(self._modify, modify)

    async def server_ids(self) -> list[str]:
        """The ids of every server with an entry."""
        return sorted(await anyio.to_thread.run_sync(self._read))

    # ---------------------------------------------------------------- blocking internals

    def _read(self) -> dict[str, Any]:
        try:
            data = read_config_file(
                self.path,
                what="token file",
                fix="move it away (the servers' logins are then asked for again) or set MCP_ACTORS_STATE_DIR",
            )
        except FileNotFoundError:
            return {}
        try:
            document = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            # A broken token file costs a login, never a crash; it is replaced on the next write.
            return {}
        servers = document.get("servers") if isinstance(document, dict) else None
        return dict(servers) if isinstance(servers, dict) else {}

    def _modify(self, modify: Callable[[dict[str, Any]], bool]) -> bool:
        try:
            target = atomic.real_target(self.path)
            with atomic.locked(target, timeout=self.lock_timeout, what="token file", shown=self.path):
                document = self._read()
                changed = modify(document)
                if changed:
                    payload = json.dumps({"version": _VERSION, "servers": document}, indent=2, sort_keys=True) + "\n"
                    atomic.replace(target, payload.encode(), shown=self.path)
                return changed
        except McpActorsError:
            raise
        except OSError as exc:
            raise atomic.write_failed(
                exc,
                what="token file",
                shown=self.path,
                then="the previous file is intact; fix permissions or set MCP_ACTORS_STATE_DIR, then retry",
            ) from None


class KeyringTokenStore(JsonTokenStore):
    """Tokens in the system keyring (needs the ``keyring`` package), one secret per server.

    Args:
        service: The keyring service name the entries are filed under.

    Raises:
        RuntimeError: The ``keyring`` package is not installed.
    """

    def __init__(self, service: str = "mcp-actors") -> None:
        try:
            import keyring  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise RuntimeError(
                "KeyringTokenStore needs the keyring package; install it (pip install keyring) or use FileTokenStore"
            ) from None
        self._keyring: Any = keyring
        self.service = service

    def __repr__(self) -> str:
        return f"KeyringTokenStore(service={self.service!r})"

    async def load(self, server_id: str) -> dict[str, Any] | None:
        raw = await anyio.to_thread.run_sync(self._keyring.get_password, self.service, server_id)
        if not raw:
            return None
        try:
            entry = json.loads(raw)
        except ValueError:
            return None
        return entry if isinstance(entry, dict) else None

    async def update(self, server_id: str, server_url: str, change: Callable[[dict[str, Any]], None]) -> None:
        entry = _fresh_entry(await self.load(server_id), server_url)
        change(entry)
        await anyio.to_thread.run_sync(self._keyring.set_password, self.service, server_id, json.dumps(entry))

    async def forget(self, server_id: str) -> bool:
        if await self.load(server_id) is None:
            return False
        await anyio.to_thread.run_sync(self._keyring.delete_password, self.service, server_id)
        return True


class CallableTokenStore:
    """A host's own SDK ``TokenStorage`` per server, as a :class:`TokenStore`.

    Args:
        factory: ``(server_id) -> TokenStorage``.
        forget: Optional ``async (server_id) -> bool`` to delete a server's tokens.
    """

    def __init__(
        self,
        factory: Callable[[str], TokenStorage],
        forget: Callable[[str], Any] | None = None,
    ) -> None:
        self._factory = factory
        self._forget = forget

    def storage_for(self, server_id: str, *, server_url: str) -> TokenStorage:
        """The host's storage for the server."""
        return self._factory(server_id)

    async def forget(self, server_id: str) -> bool:
        """Delete through the host's ``forget``, if it gave one."""
        if self._forget is None:
            return False
        return bool(await self._forget(server_id))

    async def status(self, server_id: str) -> LoginStatus:
        """What the host's storage holds (never a token)."""
        storage = self._factory(server_id)
        tokens = await storage.get_tokens()
        client = await storage.get_client_info()
        return LoginStatus(
            server_id=server_id,
            logged_in=tokens is not None,
            scopes=tuple((tokens.scope or "").split()) if tokens is not None else (),
            client_id=client.client_id if client is not None else None,
            has_refresh_token=bool(tokens is not None and tokens.refresh_token),
        )
