"""What the gateway calls each server's tools, prompts and resources, and the way back.

Tools and prompts get one name space for all servers: ``<server>__<name>`` by default
(:class:`Joined`), or any function of ``(server name, item name)``. Two items whose names
come out equal (servers ``a-b`` and ``a.b`` under a naming that cleans them alike, or a
function that ignores the server) are told apart by :func:`~mcp_actors.naming.claim_name`,
the project's one collision rule: the first claim keeps the name, a later one gets a short
hash of its server id and item name. A name, once given, stays with its item for the
gateway's life: a server that goes down and comes back gets its old names, so a client's
cached listing stays right, and a name never moves to another server's tool.

Resources keep their URIs (a URI is an address a client may have from elsewhere). When two
servers list the same URI, the first to list it keeps it (configuration order, when both come
in one listing, as they do while both are up); each other one
is offered as ``<server>+<uri>`` (``weather+file:///data.json``), which is still a URI
(``weather+file`` is a scheme). Templates follow the same rule, so a URI a client expands
from a renamed template carries the prefix and routes to its server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final

import attrs

from mcp_actors.naming import claim_name

__all__ = ["Joined", "Naming", "NameTable", "UriTable", "uri_prefix"]

Naming = Callable[[str, str], str]
"""``(server name, item name) -> public name`` for tools and prompts."""

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")
_SCHEME_UNSAFE: Final = re.compile(r"[^a-z0-9.-]")
_MAX_NAME: Final = 128
"""The longest tool name MCP allows (SEP-986)."""


@attrs.frozen
class Joined:
    """The default naming: the server's name, a separator, the item's own name (``github__search``).

    The server's name keeps ASCII letters, digits, ``_``, ``-`` and ``.``; any other
    character becomes ``_`` (tool names allow no more, SEP-986). The item's own name is kept
    as its server wrote it.

    Args:
        separator: What joins the two (default ``__``); a non-empty string.
    """

    separator: str = attrs.field(default="__")

    @separator.validator
    def _check(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError(f"separator must be a non-empty string, got {value!r}")

    def __call__(self, server: str, item: str) -> str:
        """``<server><separator><item>``."""
        return f"{self.server_part(server)}{self.separator}{item}"

    def server_part(self, server: str) -> str:
        """The server's name as it starts a public name."""
        return _UNSAFE.sub("_", server)

    def split(self, name: str) -> tuple[str, str] | None:
        """``(server part, item)`` of a name this naming could have made, or ``None``."""
        server, sep, item = name.partition(self.separator)
        return (server, item) if sep and server and item else None


@attrs.define(eq=False)
class NameTable:
    """Public names of one kind (tools, or prompts) and the ``(server id, item name)`` each stands for.

    Owned by the gateway; written only between awaits, so every reader sees it whole.
    """

    naming: Naming
    _targets: dict[str, tuple[str, str]] = attrs.field(factory=dict, init=False)
    _names: dict[tuple[str, str], str] = attrs.field(factory=dict, init=False)

    def claim(self, server_id: str, server_name: str, item: str) -> str:
        """The public name of ``item`` of server ``server_id``: the one it had, or a new unique one.

        Raises:
            ValueError: The naming function returned no usable name.
        """
        key = (server_id, item)
        name = self._names.get(key)
        if name is not None:
            return name
        candidate = self.naming(server_name, item)
        if not isinstance(candidate, str) or not candidate or len(candidate) > _MAX_NAME:
            raise ValueError(
                f"the naming function must return a non-empty string of at most {_MAX_NAME} characters,"
                f" got {candidate!r} for ({server_name!r}, {item!r})"
            )
        name = claim_name(candidate, self._targets, server_id, item)
        self._targets[name] = key
        self._names[key] = name
        return name

    def resolve(self, name: str) -> tuple[str, str] | None:
        """``(server id, item name)`` for a public name handed out, or ``None``."""
        return self._targets.get(name)

    def keep_only(self, server_ids: Iterable[str]) -> None:
        """Forget the names of servers that are gone from the configuration."""
        keep = set(server_ids)
        for key in [key for key in self._names if key[0] not in keep]:
            del self._targets[self._names.pop(key)]


def uri_prefix(server_name: str) -> str:
    """The URI scheme prefix that marks a server's renamed URIs: lower case, a letter first."""
    prefix = _SCHEME_UNSAFE.sub("-", server_name.lower()).strip("-.") or "server"
    return prefix if prefix[0].isalpha() else f"s{prefix}"


@attrs.define(eq=False)
class UriTable:
    """Public URIs (of resources, or of templates) and the ``(server id, original URI)`` each stands for."""

    _targets: dict[str, tuple[str, str]] = attrs.field(factory=dict, init=False)
    _public: dict[tuple[str, str], str] = attrs.field(factory=dict, init=False)

    def claim(self, server_id: str, server_name: str, uri: str) -> str:
        """The public URI of ``uri`` of server ``server_id``: itself when free, else ``<server>+<uri>``."""
        key = (server_id, uri)
        public = self._public.get(key)
        if public is not None:
            return public
        public = uri
        if public in self._targets:
            public = f"{uri_prefix(server_name)}+{uri}"
            n = 2
            while public in self._targets:
                public = f"{uri_prefix(server_name)}{n}+{uri}"
                n += 1
        self._targets[public] = key
        self._public[key] = public
        return public

    def resolve(self, uri: str) -> tuple[str, str] | None:
        """``(server id, original URI)`` for a public URI handed out, or ``None``."""
        return self._targets.get(uri)

    def public(self, server_id: str, uri: str) -> str:
        """The public form of a server's URI (itself when it was never renamed)."""
        return self._public.get((server_id, uri), uri)

    def items(self) -> list[tuple[str, tuple[str, str]]]:
        """Every ``(public URI, (server id, original URI))``."""
        return list(self._targets.items())

    def keep_only(self, server_ids: Iterable[str]) -> None:
        """Forget the URIs of servers that are gone from the configuration."""
        keep = set(server_ids)
        for key in [key for key in self._public if key[0] not in keep]:
            del self._targets[self._public.pop(key)]
