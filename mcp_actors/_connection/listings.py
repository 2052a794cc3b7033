"""A connection's listings (tools, resources, templates, prompts): one owner, coalesced misses.

Why: a listing is shared state of one connection. If callers' tasks wrote it, two of them
could race (a slow, stale answer landing after a fresh one), and N concurrent misses would
send N requests. So the rule of docs/architecture.md holds here too: the connection actor
owns :class:`ListingCache`. Its fill tasks, run in the actor's nursery, are the only
writers; callers read the published, frozen :class:`Listing` (a hit costs no round trip)
or, on a miss, send the actor a :class:`~mcp_actors._connection.messages.FillListing` and wait for
the one fill under way, whose outcome (the listing or its error) every waiter gets.

A fill belongs to the connection, not to the caller that started it: a waiter that gives
up leaves it running for the others. It is bounded by the server's call timeout, and it
ends with its connection (the session's end fails it like any request).

A listing is current for one connection (:class:`~mcp_actors._connection.live.LiveSession`, by
identity) and one *epoch* of its kind: ``tools_epoch`` for tools, ``resources_epoch`` for
resources and templates, ``prompts_epoch`` for prompts; a ``list_changed`` notification
bumps the epoch. A fill that ends after its epoch moved on answers its waiters but is not
published: it may already be stale.

At 2026-07-28 a server also says how long a list stays fresh (``ttlMs``) and whom it may be
served to (``cacheScope``): :class:`Freshness`, read from every page by :func:`fetch_listing`.
Its word replaces the caller's own ``max_age`` (longer or shorter; ``0`` is stale at once), a
``private`` listing is current only for the principal it was listed as (the identity of the
credential requests go out with, :attr:`~mcp_actors._wire.link.TransportLink.principal`), and a
``list_changed`` still ends it at once. A server that says nothing (every revision before
2026-07-28) keeps the caller's rule: see docs/protocol/caching.md.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

import attrs
import mcp.types as mcp_types
import pydantic
import trio
from mcp import ClientSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_actors._connection.live import LiveSession
from mcp_actors._sdk import absorb_tool_listing
from supervisors import Reply

_log = logging.getLogger(__name__)

SendRaw = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Sends one request stamped as the SDK would and returns its raw result (``LiveSession.send_raw``)."""

__all__ = [
    "FETCH_NOW",
    "MAX_FRESH",
    "CacheScope",
    "Freshness",
    "Listing",
    "ListingCache",
    "ListingKind",
    "fetch_listing",
]

MAX_PAGES: Final = 1000
"""Pages one listing may take; a server that pages forever is cut off there."""

MAX_FRESH: Final = 24 * 3600.0
"""Seconds a server's ``ttlMs`` may keep a listing fresh at most (the SDK's own cap); a longer
word is cut to it, so a typo of a server cannot pin a listing for a year."""

FETCH_NOW: Final = -math.inf
"""A ``max_age`` no listing meets, whatever its server said: the caller wants a request
(``mcp-actors test`` times one)."""

CacheScope = Literal["public", "private"]
"""Who a listing may be served to: anyone, or only the principal it was listed as."""


class ListingKind(enum.Enum):
    """What a listing lists; the value is the MCP method that fetches it."""

    TOOLS = "tools/list"
    RESOURCES = "resources/list"
    RESOURCE_TEMPLATES = "resources/templates/list"
    PROMPTS = "prompts/list"

    # Members are singletons, so identity is their equality: hash them in C, not with
    # Enum's Python-level ``hash(self._name_)`` (a look-up per tool call keys on TOOLS).
    __hash__ = object.__hash__


_CAPABILITY: Final = {
    ListingKind.RESOURCES: "resources",
    ListingKind.RESOURCE_TEMPLATES: "resources",
    ListingKind.PROMPTS: "prompts",
}
"""The server capability a kind needs; without it the listing is empty (and no request is sent)."""


@attrs.frozen(kw_only=True)
class Freshness:
    """What a server said about a listing's life (2026-07-28 ``ttlMs`` and ``cacheScope``), over all its pages.

    Each page is fresh for its own ``ttlMs`` from the moment it arrived; a listing is all its
    pages, so it is fresh until the first of them goes stale, and ``private`` when any page
    is (a server must give every page one scope; one that does not gets the narrower).

    Attributes:
        expires_at: ``trio.current_time()`` from which the listing is stale.
        scope: ``public``: it may be served whoever asks; ``private``: only to the principal
            it was listed as.
    """

    expires_at: float
    scope: CacheScope

    def joined(self, other: Freshness | None) -> Freshness:
        """This page's word together with the pages' before it (``other``): the earliest end, the narrower scope."""
        if other is None:
            return self
        scope: CacheScope = "private" if "private" in (self.scope, other.scope) else "public"
        return Freshness(expires_at=min(self.expires_at, other.expires_at), scope=scope)


def page_freshness(result: mcp_types.Result, version: str | None, received_at: float) -> Freshness | None:
    """The server's word on one listing page, or ``None`` when it said nothing we may use.

    Only a 2026-07-28 session's word counts (the revision that defines it; the SDK drops the
    fields from older revisions' results anyway), and only a ``ttlMs`` that is on the wire: an
    absent one leaves the caller's own rule. A ``ttlMs`` without a ``cacheScope`` is
    ``private``, the safe side (the SDK's default too).
    """
    if version not in MODERN_PROTOCOL_VERSIONS or "ttl_ms" not in result.model_fields_set:
        return None
    ttl = getattr(result, "ttl_ms", 0)
    scope: CacheScope = "public" if getattr(result, "cache_scope", "private") == "public" else "private"
    return Freshness(expires_at=received_at + min(max(ttl, 0) / 1000, MAX_FRESH), scope=scope)


@attrs.frozen(kw_only=True)
class Listing:
    """One complete listing, as published by the connection actor.

    Attributes:
        kind: What it lists.
        live: The connection it was listed on (compared by identity).
        epoch: The kind's epoch when the fill started.
        listed_at: ``trio.current_time()`` when the answer arrived.
        items: Every item, all pages, in the server's order.
        by_name: The items by name (tools and prompts are looked up by name per call).
        word: The server's word on its life (2026-07-28), or ``None`` when it gave none.
        principal: Who it was listed as (the link's principal when the fill began).
    """

    kind: ListingKind
    live: LiveSession = attrs.field(eq=False, repr=False)
    epoch: int
    listed_at: float
    items: tuple[Any, ...]
    by_name: Mapping[str, Any] = attrs.field(eq=False, repr=False)
    word: Freshness | None = None
    principal: str | None = attrs.field(default=None, repr=False)

    def current(self, live: LiveSession, epoch: int, max_age: float) -> bool:
        """Whether it may answer a demand now: same connection and epoch, and fresh.

        Fresh by the server's word when it gave one (a ``private`` listing only for the
        principal it was listed as), else younger than ``max_age``. :data:`FETCH_NOW` is never
        answered from the cache.
        """
        if self.live is not live or self.epoch != epoch or max_age == FETCH_NOW:
            return False
        word = self.word
        if word is None:
            return trio.current_time() - self.listed_at < max_age
        if word.scope == "private" and self.principal != live.link.principal():
            return False
        return trio.current_time() < word.expires_at


@attrs.define(eq=False)
class _Fill:
    """One fetch under way and the replies waiting for it."""

    waiters: list[Reply[Listing]] = attrs.field(factory=list)


_Key = tuple[ListingKind, LiveSession, int]


@attrs.define(eq=False)
class ListingCache:
    """A connection's listings: published snapshots for everyone, fills written by its actor only.

    Attributes:
        published: The latest current listing per kind; replaced (never changed in
            place) by the actor, so a reader holding it sees a consistent value.
    """

    published: Mapping[ListingKind, Listing] = attrs.field(factory=lambda: MappingProxyType({}))
    _fills: dict[_Key, _Fill] = attrs.field(factory=dict, init=False)

    def lookup(self, kind: ListingKind, live: LiveSession, epoch: int, max_age: float) -> Listing | None:
        """The published listing of ``kind`` if it is current (see :meth:`Listing.current`); for any task."""
        listing = self.published.get(kind)
        return listing if listing is not None and listing.current(live, epoch, max_age) else None

    # -- the actor's side

    def demand(self, key: _Key, reply: Reply[Listing], max_age: float) -> bool:
        """Answer ``reply`` from the cache, or add it to the fill of ``key``; True when a fill must start.

        Only the connection actor calls this (from its mailbox loop).
        """
        kind, live, epoch = key
        listing = self.lookup(kind, live, epoch, max_age)
        if listing is not None:
            reply.send(listing)  # a fill ended between the caller's look and this message
            return False
        fill = self._fills.get(key)
        if fill is not None:
            fill.waiters.append(reply)
            return False
        self._fills[key] = _Fill(waiters=[reply])
        return True

    def settle(self, key: _Key, outcome: Listing | Exception, *, publish: bool) -> None:
        """End the fill of ``key``: publish a listing that is still current, answer every waiter.

        Only the connection actor's fill task calls this.
        """
        fill = self._fills.pop(key, None)
        if publish and isinstance(outcome, Listing):
            self.published = MappingProxyType({**self.published, outcome.kind: outcome})
        for reply in fill.waiters if fill is not None else ():
            if isinstance(outcome, Listing):
                reply.send(outcome)
            else:
                reply.fail(outcome)

    def forget(self) -> None:
        """Drop every published listing (a new connection: none of them is current)."""
        self.published = MappingProxyType({})


async def fetch_listing(
    session: ClientSession, kind: ListingKind, label: str = "", send_raw: SendRaw | None = None
) -> tuple[tuple[Any, ...], Freshness | None]:
    """Every page of a listing (empty when the server lacks the kind's capability), and the server's word on it.

    The word is every page's ``ttlMs``/``cacheScope`` joined (:meth:`Freshness.joined`), each
    counted from when its page arrived; ``None`` when no page carried one. A stale listing is
    fetched again from its first page (the spec's way to a consistent list), never page by page.

    A tool the SDK's types refuse (an ``inputSchema`` with no root ``"type": "object"``, as
    some real servers ship, or one nested deeper than pydantic serializes) is left out with
    a warning naming the server (``label``), the tool and the reason; the rest of the
    listing stands. That needs ``send_raw`` (the page is asked for again, raw); without it
    such a listing fails whole.
    """
    capability = _CAPABILITY.get(kind)
    caps = session.server_capabilities
    if capability is not None and (caps is None or getattr(caps, capability) is None):
        return (), None
    version = session.protocol_version
    word: Freshness | None = None

    def heard(result: mcp_types.Result) -> None:
        nonlocal word
        said = page_freshness(result, version, trio.current_time())
        if said is not None:
            word = said.joined(word)

    page: Callable[[mcp_types.PaginatedRequestParams | None], Awaitable[tuple[list[Any], str | None]]]
    match kind:
        case ListingKind.TOOLS:

            async def page(params: mcp_types.PaginatedRequestParams | None) -> tuple[list[Any], str | None]:
                try:
                    result = await session.list_tools(params=params)
                except ValueError as exc:
                    # pydantic's ValidationError (a tool against the spec), or its "Maximum
                    # serialization depth exceeded" (a schema nested too deep for the SDK's
                    # check of the whole page): either must cost at most that tool, not its siblings.
                    if send_raw is None:
                        raise
                    result = await _list_tools_leniently(session, params, label, send_raw, exc)
                heard(result)
                return list(result.tools), result.next_cursor

        case ListingKind.RESOURCES:

            async def page(params: mcp_types.PaginatedRequestParams | None) -> tuple[list[Any], str | None]:
                result = await session.list_resources(params=params)
                heard(result)
                return list(result.resources), result.next_cursor

        case ListingKind.RESOURCE_TEMPLATES:

            async def page(params: mcp_types.PaginatedRequestParams | None) -> tuple[list[Any], str | None]:
                result = await session.list_resource_templates(params=params)
                heard(result)
                return list(result.resource_templates), result.next_cursor

        case ListingKind.PROMPTS:

            async def page(params: mcp_types.PaginatedRequestParams | None) -> tuple[list[Any], str | None]:
                result = await session.list_prompts(params=params)
                heard(result)
                return list(result.prompts), result.next_cursor

        case _:
            raise TypeError(f"unknown listing kind: {kind!r}")
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        found, cursor = await page(mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        items.extend(found)
        if not cursor:
            break
    return tuple(items), word


def make_listing(
    kind: ListingKind,
    live: LiveSession,
    epoch: int,
    items: tuple[Any, ...],
    *,
    word: Freshness | None = None,
    principal: str | None = None,
) -> Listing:
    """A listing of ``items`` answered now (indexed by name where items have one)."""
    by_name = {name: item for item in items if isinstance(name := getattr(item, "name", None), str)}
    return Listing(
        kind=kind,
        live=live,
        epoch=epoch,
        listed_at=trio.current_time(),
        items=items,
        by_name=MappingProxyType(by_name),
        word=word,
        principal=principal,
    )


async def _list_tools_leniently(
    session: ClientSession,
    params: mcp_types.PaginatedRequestParams | None,
    label: str,
    send_raw: SendRaw,
    refused: ValueError,
) -> mcp_types.ListToolsResult:
    """The page again, raw, each tool checked on its own by the SDK's ``Tool`` type.

    ``refused`` is the negotiated revision's check of the whole page, which failed: its
    complaints are logged once, naming the tools. A tool the ``Tool`` type takes, and
    pydantic can serialize, is kept (a root ``anyOf`` with no ``"type": "object"`` is; the
    provider formats repair it); one it refuses, or one nested too deep to serialize, is
    logged with the reason and left out.
    """
    raw = await send_raw("tools/list", params.model_dump(by_alias=True, exclude_none=True) if params else {})
    items = raw.get("tools")
    if not isinstance(items, list):
        raise TypeError(f"tools/list result has no list of tools: {type(items).__name__}")
    cursor = raw.get("nextCursor")
    if isinstance(refused, pydantic.ValidationError):
        _log.warning(
            "server %r: its tools/list breaks the MCP spec (%s); each tool was checked on its own instead,"
            " so one bad tool does not hide the others; tell the server's author",
            label,
            _complaints(refused, items),
        )
    else:
        _log.info("server %r: its tools/list was refused whole (%s); each tool was checked on its own", label, refused)
    kept: list[mcp_types.Tool] = []
    for item in items:
        name = item.get("name", "?") if isinstance(item, dict) else "?"
        try:
            tool = mcp_types.Tool.model_validate(item)
        except pydantic.ValidationError as exc:
            _log.warning("server %r: tool %r left out of the listing: %s", label, name, _complaints(exc, items))
            continue
        try:
            # What the SDK, the registry and the formats do with a tool: serialize it.
            tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        except ValueError as exc:
            _log.warning(
                "server %r: tool %r left out of the listing: its inputSchema is nested too deep"
                " (%d levels of JSON objects and arrays) for the SDK's JSON model (%s); tell the server's author",
                label,
                name,
                _json_depth(item.get("inputSchema")),
                exc,
            )
            continue
        kept.append(tool)
    hints: dict[str, Any] = {}
    if isinstance(ttl := raw.get("ttlMs"), int) and not isinstance(ttl, bool):
        hints["ttl_ms"] = max(ttl, 0)  # the server's word survives the tool-by-tool check
        hints["cache_scope"] = "public" if raw.get("cacheScope") == "public" else "private"
    result = mcp_types.ListToolsResult(tools=kept, next_cursor=cursor if isinstance(cursor, str) else None, **hints)
    # What the SDK's list_tools does with a listing (2026-07-28 header maps): for the kept tools.
    absorb = absorb_tool_listing(session)
    if absorb is not None:
        complete = (params is None or params.cursor is None) and result.next_cursor is None
        result = absorb(result, complete=complete)
    return result


def _json_depth(value: Any) -> int:
    """How deep ``value`` nests JSON objects and arrays (0 for a scalar); iterative, for hostile input."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _complaints(exc: pydantic.ValidationError, items: list[Any]) -> str:
    """A validation error's complaints, a tool's index replaced by its name (``tools['untyped'].inputSchema.type``)."""
    parts = []
    for error in exc.errors():
        loc = list(error["loc"])
        if len(loc) >= 2 and loc[0] == "tools" and isinstance(loc[1], int) and loc[1] < len(items):
            item = items[loc[1]]
            loc[:2] = [f"tools[{item.get('name', loc[1]) if isinstance(item, dict) else loc[1]!r}]"]
        parts.append(f"{'.'.join(str(part) for part in loc)}: {error['msg']}")
    return "; ".join(parts)
