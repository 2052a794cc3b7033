"""The registry's rules of server records that need no runtime: look a server up, make a new
record, check a new name.

The registry actor (``actor.py``) and the service apply them to the records they own; the
command line applies the same rules to the config file when it edits it without a runtime
(``servers add``, ``servers enable``, ...). Kept apart from the actor so that those commands
load the records, not the MCP SDK.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mcp_actors._config.codec import record_from_json_dict
from mcp_actors._config.record import McpServerRecord, check_name_free, new_server_id
from mcp_actors.errors import InvalidServerConfig, ServerNotFound

__all__ = ["check_new_name", "find_server", "server_not_found", "to_record"]


def find_server(records: Iterable[McpServerRecord], server: str) -> McpServerRecord | None:
    """The record whose id is ``server``, else the one whose name is ``server``, else ``None``.

    The one look-up of a server used by the service and the CLI: ids win over names, so
    a server named like another's id can never shadow it.
    """
    by_name = None
    for record in records:
        if record.id == server:
            return record
        if by_name is None and record.name == server:
            by_name = record
    return by_name


def server_not_found(server: str, records: Iterable[McpServerRecord], *, hint: str = "") -> ServerNotFound:
    """The error for a look-up miss: names the server, lists the configured ones, says what to do."""
    known = ", ".join(sorted(r.name for r in records)) or "none"
    return ServerNotFound(
        f"no server named or with id {server!r} (configured: {known}); {hint or 'add it first or check the spelling'}",
        server=server,
    )


def to_record(input: McpServerRecord | Mapping[str, Any]) -> McpServerRecord:
    """A new record from a record or a JSON-style mapping (id and timestamps made when absent)."""
    if isinstance(input, McpServerRecord):
        return input
    if not isinstance(input, Mapping):
        raise InvalidServerConfig(f"a server must be a record or a mapping, got {type(input).__name__}")
    data = dict(input)
    data.setdefault("id", new_server_id())
    now = _dt.datetime.now(_dt.UTC).isoformat().replace("+00:00", "Z")
    data.setdefault("createdAt", now)
    data.setdefault("updatedAt", data["createdAt"])
    return record_from_json_dict(data)


def check_new_name(records: Sequence[McpServerRecord], name: str, own_id: str) -> None:
    """The rules for a name being given (add, rename): free (:func:`check_name_free`) and without ``/``.

    ``/`` is refused only here, where a name is chosen, not in every write of the set: a
    config written before the rule keeps working.

    Raises:
        InvalidServerConfig: The name contains ``/`` (``SERVER/TOOL`` would be ambiguous).
        DuplicateServerName: The name is taken, or collides after cleaning.
    """
    if "/" in name:
        raise InvalidServerConfig(
            f"server name {name!r} contains '/', which makes SERVER/TOOL ambiguous; choose a name without '/'",
            server=name,
            field="name",
        )
    check_name_free(records, name, own_id)
