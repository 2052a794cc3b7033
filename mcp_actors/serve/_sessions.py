"""Session ids that carry their session, signed: any replica of a gateway continues a session it never saw.

A 2025 session (``initialize`` … ``DELETE``) is little state: the negotiated revision, what the
client said about itself (its capabilities and name) and when the session began and ends.
:class:`SessionKeys` puts that state in the session id itself, as agentgateway and Envoy's AI
gateway do: ``s1.<payload>.<signature>``, the payload compact JSON in URL-safe base64 and the
signature its HMAC-SHA256 under a key the replicas share (visible ASCII only, as the
``Mcp-Session-Id`` header requires). A replica handed an id it has no record of verifies it and
rebuilds the session from it; no sticky routing, no shared session table.

The key comes from ``--session-key-file`` or ``MCP_ACTORS_SESSION_KEY`` (:meth:`SessionKeys.load`).
Without one, a process makes a random key of its own: its ids verify nowhere else, and it never
rebuilds a session from an id (the one-replica behaviour: an id it has forgotten is unknown).
A key file may hold several keys, one a line: the first signs, every one verifies (rotation).

The payload is signed, not encrypted: it holds nothing secret (a revision, capability flags, a
client's name), and a client may read its own id. It holds the session's **expiry**: an id past
it verifies nowhere. Ending a session everywhere (``DELETE``) needs the replicas' shared store
(:mod:`mcp_actors.serve._store`): the id's nonce is recorded there until the expiry.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import trio

from mcp_actors.errors import ConfigError, SharedStoreUnavailable
from mcp_actors.serve._store import GatewayStore

__all__ = ["DEFAULT_SESSION_LIFETIME", "SESSION_KEY_ENV", "SessionBook", "SessionKeys", "SessionState"]

logger = logging.getLogger("mcp_actors.serve")

SESSION_KEY_ENV: Final = "MCP_ACTORS_SESSION_KEY"
"""The environment variable holding the shared session key (when no key file is given)."""
DEFAULT_SESSION_LIFETIME: Final = 24 * 3600.0
"""Seconds a session lives from its ``initialize`` at most (the expiry signed into its id)."""
MIN_KEY_BYTES: Final = 32
"""The shortest key accepted: 32 bytes (256 bits), HMAC-SHA256's own block of strength."""
_PREFIX: Final = "s1."
_CONTEXT: Final = b"mcp-actors session v1\x00"
"""Bound into every signature: a key shared with something else cannot sign our ids by accident."""
_MAX_ID: Final = 4096
"""The longest id even looked at (a header of garbage costs no decoding)."""
_MAX_CAPABILITIES: Final = 1024
"""Bytes of client capabilities kept in an id; more keeps only their names (a header stays small)."""
_CAPABILITY_NAMES: Final = ("roots", "sampling", "elicitation", "tasks", "extensions", "experimental")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@attrs.frozen(kw_only=True)
class SessionState:
    """What a session id carries: everything a replica needs to continue the session.

    Attributes:
        version: The negotiated protocol revision.
        capabilities: The client's capabilities as it declared them (trimmed to their names
            when large), for what the gateway may later ask of the client.
        client_name: The client's ``clientInfo.name``, if it gave one.
        client_version: The client's ``clientInfo.version``, if it gave one.
        issued_at: Unix time of the ``initialize``.
        expires_at: Unix time after which the id verifies nowhere.
        nonce: 128 random bits (hex): the session's identity in the shared store's revocations.
        profile: The profile whose path opened it (``None``: the default path); the session
            is named only on that path.
    """

    version: str
    capabilities: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    client_name: str | None = None
    client_version: str | None = None
    issued_at: float
    expires_at: float
    nonce: str = attrs.field(factory=lambda: secrets.token_hex(16))
    profile: str | None = None

    @classmethod
    def from_initialize(
        cls,
        version: str,
        params: Any,
        *,
        lifetime: float = DEFAULT_SESSION_LIFETIME,
        now: float | None = None,
        profile: str | None = None,
    ) -> SessionState:
        """The state of a session opened by an ``initialize`` with these (already validated) params."""
        params = params if isinstance(params, dict) else {}
        info = params.get("clientInfo")
        info = info if isinstance(info, dict) else {}
        now = time.time() if now is None else now
        return cls(
            version=version,
            capabilities=_kept_capabilities(params.get("capabilities")),
            client_name=info.get("name") if isinstance(info.get("name"), str) else None,
            client_version=info.get("version") if isinstance(info.get("version"), str) else None,
            issued_at=float(int(now)),
            expires_at=float(int(now + lifetime)),
            profile=profile,
        )

    def expired(self, now: float | None = None) -> bool:
        """Whether the session is past its expiry (at Unix time ``now``, default the clock's)."""
        return (time.time() if now is None else now) >= self.expires_at

    def to_json(self) -> dict[str, Any]:
        """The payload's compact form (short keys: the id travels in every request's headers)."""
        payload: dict[str, Any] = {
            "v": self.version,
            "t": int(self.issued_at),
            "e": int(self.expires_at),
            "n": self.nonce,
        }
        if self.capabilities:
            payload["c"] = dict(self.capabilities)
        if self.client_name is not None or self.client_version is not None:
            payload["i"] = [self.client_name, self.client_version]
        if self.profile is not None:
            payload["p"] = self.profile
        return payload

    @classmethod
    def from_json(cls, payload: Any) -> SessionState | None:
        """Read a payload back; ``None`` when it is not one of ours (a signed payload always is)."""
        if not isinstance(payload, dict):
            return None
        version, issued, expires, nonce = payload.get("v"), payload.get("t"), payload.get("e"), payload.get("n")
        info = payload.get("i") or [None, None]
        capabilities = payload.get("c") or {}
        profile = payload.get("p")
        if not (
            isinstance(version, str)
            and isinstance(issued, int)
            and isinstance(expires, int)
            and isinstance(nonce, str)
            and isinstance(capabilities, dict)
            and isinstance(info, list)
            and len(info) == 2
            and (profile is None or isinstance(profile, str))
        ):
            return None
        name, client_version = info
        return cls(
            version=version,
            capabilities=capabilities,
            client_name=name if isinstance(name, str) else None,
            client_version=client_version if isinstance(client_version, str) else None,
            issued_at=float(issued),
            expires_at=float(expires),
            nonce=nonce,
            profile=profile,
        )


def _kept_capabilities(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        return {}
    kept = {name: raw[name] for name in _CAPABILITY_NAMES if isinstance(raw.get(name), dict)}
    if len(json.dumps(kept, separators=(",", ":"))) > _MAX_CAPABILITIES:
        return {name: {} for name in kept}  # that the client has them, not their details
    return kept


class SessionKeys:
    """The keys that sign and verify session ids: the first signs, every one verifies.

    Args:
        keys: The keys (each at least 32 bytes); ``None``: one random key for this process.

    Attributes:
        shared: Whether the keys were given (replicas share them) rather than made here; only
            then does a front rebuild a session from an id it has no record of.
    """

    keys: tuple[bytes, ...]
    shared: bool

    def __init__(self, keys: Sequence[bytes] | None = None) -> None:
        if keys is None:
            self.keys, self.shared = (secrets.token_bytes(MIN_KEY_BYTES),), False
            return
        if not keys:
            raise ConfigError("no session key given; give at least one (32 bytes or more)", field="session_key")
        for key in keys:
            if len(key) < MIN_KEY_BYTES:
                raise ConfigError(
                    f"a session key must be at least {MIN_KEY_BYTES} bytes, got {len(key)}; make one with"
                    " `openssl rand -hex 32`",
                    field="session_key",
                )
        self.keys, self.shared = tuple(keys), True

    def __repr__(self) -> str:
        return f"SessionKeys({len(self.keys)} keys, shared={self.shared})"  # never a key

    @classmethod
    def load(cls, key_file: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> SessionKeys:
        """The keys from ``key_file`` (one a line; blank lines and ``#`` comments skipped), else from
        ``MCP_ACTORS_SESSION_KEY`` in ``env`` (default ``os.environ``), else a random key of this process.

        Raises:
            ConfigError: The file cannot be read, holds no key, or a key is shorter than 32 bytes.
        """
        if key_file is not None:
            path = Path(key_file)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(
                    f"cannot read the session key file {path}: {getattr(exc, 'strerror', None) or exc}; give a"
                    " readable UTF-8 file with one key a line",
                    field="session_key_file",
                ) from None
            keys = [line.strip().encode() for line in text.splitlines()]
            keys = [key for key in keys if key and not key.startswith(b"#")]
            if not keys:
                raise ConfigError(f"the session key file {path} holds no key", field="session_key_file")
            return cls(keys)
        value = (os.environ if env is None else env).get(SESSION_KEY_ENV, "").strip()
        if value:
            return cls([value.encode()])
        return cls()

    def _signature(self, key: bytes, body: str) -> bytes:
        return hmac.new(key, _CONTEXT + body.encode("ascii"), hashlib.sha256).digest()

    def sign(self, state: SessionState) -> str:
        """The session id carrying ``state``: ``s1.<payload>.<signature>``."""
        body = _b64(json.dumps(state.to_json(), separators=(",", ":"), ensure_ascii=True).encode("ascii"))
        return f"{_PREFIX}{body}.{_b64(self._signature(self.keys[0], body))}"

    def verify(self, session_id: str) -> SessionState | None:
        """The state an id carries, if one of the keys signed it (its expiry is the caller's to check)."""
        if len(session_id) > _MAX_ID or not session_id.startswith(_PREFIX):
            return None
        body, dot, signature = session_id[len(_PREFIX) :].partition(".")
        if not dot:
            return None
        try:
            given = _unb64(signature)
            if not any(hmac.compare_digest(given, self._signature(key, body)) for key in self.keys):
                return None
            payload = json.loads(_unb64(body))
        except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
            return None
        return SessionState.from_json(payload)


@attrs.define(eq=False)
class SessionBook:
    """How a front opens, continues and ends sessions: its keys, the shared store, the lifetime.

    The front keeps its own table of the sessions it serves; the book is asked only when a
    session opens, when an id is not in that table, and when a session ends.

    Args:
        keys: The signing keys (default: a random key of this process: no session is rebuilt).
        store: The replicas' shared store, where ended sessions are recorded; ``None``: a
            ``DELETE`` ends the session on this replica only.
        lifetime: Seconds from ``initialize`` to the expiry signed into the id.
    """

    keys: SessionKeys = attrs.field(factory=SessionKeys)
    store: GatewayStore | None = None
    lifetime: float = DEFAULT_SESSION_LIFETIME

    def open(self, version: str, params: Any, *, profile: str | None = None) -> tuple[str, SessionState]:
        """A new session's id and state, for an ``initialize`` negotiated at ``version`` on ``profile``'s path."""
        state = SessionState.from_initialize(version, params, lifetime=self.lifetime, profile=profile)
        return self.keys.sign(state), state

    async def resume(self, session_id: str) -> SessionState | None:
        """The state of a session this replica has no record of, when another one may have opened it.

        ``None``: the keys are this process's own, the id does not verify, it expired, or a
        replica ended it. A store that does not answer does not stop the session (its id is
        signed and unexpired); that is logged.
        """
        if not self.keys.shared:
            return None
        state = self.keys.verify(session_id)
        if state is None or state.expired():
            return None
        if self.store is not None:
            try:
                if await self.store.session_ended(state.nonce):
                    return None
            except SharedStoreUnavailable as exc:
                logger.warning("continuing session %s unchecked: %s", state.nonce[:8], exc)
        return state

    async def end(self, state: SessionState) -> None:
        """Record everywhere that the session ended (a store that does not answer is logged)."""
        if self.store is None or not self.keys.shared:
            return
        try:
            await self.store.end_session(state.nonce, state.expires_at)
        except SharedStoreUnavailable as exc:
            logger.warning("session %s ended on this replica only: %s", state.nonce[:8], exc)

    async def watch(
        self, ended: Callable[[str], None], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Call ``ended(nonce)`` when another replica ends a session; runs until cancelled."""
        if self.store is None or not self.keys.shared:
            task_status.started()
            await trio.sleep_forever()
        await self.store.watch_ended(ended, task_status=task_status)
