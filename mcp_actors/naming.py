"""Tool ids that every LLM provider accepts, and the map from ids back to servers.

OpenAI, Anthropic and Gemini all accept ``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`` (Gemini also
allows dots and colons, the others do not). A server named ``my.files`` with a tool
``read-file`` becomes ``mcp__my_files__read_file``. Ids that would be too long, or that
collide after cleaning, are shortened deterministically and get a short hash suffix, so the
same configuration always yields the same ids (stable across restarts and processes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Sequence
from typing import Final

import attrs

__all__ = [
    "MAX_TOOL_NAME_LENGTH",
    "TOOL_NAME_PATTERN",
    "ToolIdMap",
    "claim_name",
    "clean_name",
    "direct_tool_name",
    "hash_suffixed",
    "is_provider_safe",
    "plural",
    "tool_id",
]

MAX_TOOL_NAME_LENGTH: Final = 64
TOOL_NAME_PATTERN: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
_NOT_ALNUM: Final = re.compile(r"[^a-zA-Z0-9]")
_HASH_LENGTH: Final = 8


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun`` as a person writes them: ``1 tool``, ``5 tools``, ``0 tools``.

    ``many`` is the plural when adding an ``s`` is wrong (``process`` -> ``processes``).
    The one rule for counts in messages and tables; never ``tool(s)``.
    """
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def clean_name(name: str) -> str:
    """Replace every character that is not an ASCII letter or digit with ``_``."""
    return _NOT_ALNUM.sub("_", name)


def is_provider_safe(name: str) -> bool:
    """Whether all three providers accept ``name`` as a tool name."""
    return TOOL_NAME_PATTERN.match(name) is not None


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:_HASH_LENGTH]


def hash_suffixed(base: str, *parts: str) -> str:
    """``base`` cut to leave room, then ``_`` and 8 hex digits of SHA-256 over ``parts``.

    The parts are the original names (joined with NUL), so the result is the same in
    every session and process; it is at most 64 characters.
    """
    return base[: MAX_TOOL_NAME_LENGTH - _HASH_LENGTH - 1] + "_" + _digest(*parts)


def claim_name(candidate: str, taken: Container[str], *parts: str) -> str:
    """The one collision policy for tool ids and direct tool names: the first claim wins.

    ``candidate`` if it is not in ``taken``; otherwise it with a hash suffix of ``parts``;
    should that be taken too (the same pair claimed twice, or another tool's plain name
    that happens to look like it), a counter joins the hashed parts until the name is
    free. The caller records the name it gets.
    """
    name, n = candidate, 0
    while name in taken:
        name = hash_suffixed(candidate, *parts) if n == 0 else hash_suffixed(candidate, *parts, str(n))
        n += 1
    return name


def _fit(candidate: str, *parts: str) -> str:
    """``candidate`` if it fits, else its head plus a hash of ``parts`` (still <= 64)."""
    if len(candidate) <= MAX_TOOL_NAME_LENGTH:
        return candidate
    return hash_suffixed(candidate, *parts)


def tool_id(server_name: str, tool_name: str) -> str:
    """The registry's id for a tool: ``mcp__<server>__<tool>``, provider-safe.

    Deterministic; an id over 64 characters is cut and given a hash of the original
    names, so two long names that share a prefix still differ.
    """
    return _fit(f"mcp__{clean_name(server_name)}__{clean_name(tool_name)}", server_name, tool_name)


def direct_tool_name(server_name: str, tool_name: str) -> str:
    """The name of a directly connected (built-in) server's tool: ``<server>__<tool>``."""
    candidate = f"{clean_name(server_name)}__{clean_name(tool_name)}"
    if not candidate[0].isalpha() and candidate[0] != "_":
        candidate = "_" + candidate
    return _fit(candidate, server_name, tool_name)


@attrs.define(eq=False)
class ToolIdMap:
    """Assigns unique tool ids and maps them back to ``(server_id, tool_name)``.

    Owned by the registry actor. Two tools whose cleaned names collide (``a.b`` and ``a_b``
    on one server, or servers ``x-y`` and ``x_y``) get distinct ids: the second gets a hash
    suffix derived from its server id and tool name, so the result does not depend on
    which was listed first only when there is no collision.
    """

    _by_id: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    _by_server: dict[str, dict[str, str]] = attrs.field(factory=dict)
    """Each server's tools' ids, by tool name: what a server's listing or removal touches is
    its own ids only (a walk of every server's ids made N listings of N servers quadratic)."""

    def assign(self, server_id: str, server_name: str, tool_name: str) -> str:
        """The id of this server's tool, assigning a new unique one if needed."""
        own = self._by_server.setdefault(server_id, {})
        existing = own.get(tool_name)
        if existing is not None:
            return existing
        candidate = claim_name(tool_id(server_name, tool_name), self._by_id, server_id, tool_name)
        self._by_id[candidate] = (server_id, tool_name)
        own[tool_name] = candidate
        return candidate

    def assign_server(self, server_id: str, server_name: str, tool_names: Sequence[str]) -> dict[str, str]:
        """Ids for a server's current tools; ids of its tools that are gone are dropped.

        A server whose tool names keep changing therefore holds only its current ids, and
        an id of a tool it no longer has stops resolving.
        """
        own = self._by_server.get(server_id, {})
        keep = set(tool_names)
        for name in [name for name in own if name not in keep]:
            del self._by_id[own.pop(name)]
        return {name: self.assign(server_id, server_name, name) for name in tool_names}

    def __len__(self) -> int:
        return len(self._by_id)

    def resolve(self, tool_id: str) -> tuple[str, str] | None:
        """``(server_id, tool_name)`` for an id, or ``None`` when unknown."""
        return self._by_id.get(tool_id)

    def forget_server(self, server_id: str) -> None:
        """Drop every id of a server (removed, renamed, or its tools re-listed)."""
        for candidate in self._by_server.pop(server_id, {}).values():
            del self._by_id[candidate]
