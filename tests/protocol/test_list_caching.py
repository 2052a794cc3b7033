"""List caching by the server's word (2026-07-28 ``ttlMs`` / ``cacheScope``), on virtual time.

A server of our own sets the hints (the SDK's ``cache_hints``, changed per test) and counts
the requests it answers; the client's listings (connection) and tool cache (registry) must
re-list exactly when the word says, per principal for ``private`` answers, and keep
today's rule when there is no word.
"""

from __future__ import annotations

import collections
import contextlib
import math
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from testkit import running, wait_event

from mcp_actors import events
from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._connection.handle import ConnectionHandle
from mcp_actors._connection.status import RESOURCE_CACHE_TTL, ConnectionSettings
from mcp_actors._sdk import lowlevel_server
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind
from mcp_actors.errors import ServerProtocolError

TOOLS = "tools/list"
PROMPTS = "prompts/list"
RESOURCES = "resources/list"
TEMPLATES = "resources/templates/list"


class HintedServer:
    """A factory of servers that say what the test says (``hints``) and count what they answer.

    Every connection gets a fresh server sharing ``counts`` and ``hints``, as a restarted
    process would share its configuration.
    """

    def __init__(self, **hints: CacheHint) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.hints: dict[str, CacheHint] = {method.replace("_", "/"): hint for method, hint in hints.items()}
        self.pages: list[tuple[int, str]] | None = None
        """``tools/list`` in these pages: each a (``ttlMs``, ``cacheScope``), one tool per page."""
        self.on_page: Callable[[int], None] | None = None
        """Called with each page's index as it is answered."""

    def __call__(self) -> MCPServer[Any]:
        server: MCPServer[Any] = MCPServer("hinted")

        @server.tool(description="Echo.", structured_output=False)
        def echo(text: str) -> str:
            return text

        @server.tool(description="Say that the tool list changed.", structured_output=False)
        async def announce(ctx: Context) -> str:
            await ctx.session.send_notification(
                types.ToolListChangedNotification(), related_request_id=ctx.request_context.request_id
            )
            await ctx.notify_tools_changed()
            return "announced"

        @server.prompt(description="Hello.")
        def hello() -> str:
            return "hello"

        @server.resource("mem://one", name="one")
        def one() -> str:
            return "1"

        @server.resource("mem://note/{name}", name="note")
        def note(name: str) -> str:
            return name

        lowlevel = lowlevel_server(server)
        lowlevel.cache_hints = self.hints  # shared: a test changes the word between requests

        async def count(ctx: Any, call_next: Any) -> Any:
            self.counts[ctx.method] += 1
            return await call_next(ctx)

        lowlevel.middleware.append(count)
        if self.pages is not None:
            pages = self.pages

            async def paged(ctx: Any, params: types.PaginatedRequestParams) -> types.ListToolsResult:
                index = int(params.cursor or 0)
                if self.on_page is not None:
                    self.on_page(index)
                ttl, scope = pages[index]
                tool = types.Tool(name=f"t{index}", input_schema={"type": "object"})
                more = str(index + 1) if index + 1 < len(pages) else None
                return types.ListToolsResult(tools=[tool], next_cursor=more, ttl_ms=ttl, cache_scope=scope)  # type: ignore[arg-type]

            lowlevel.add_request_handler(TOOLS, types.PaginatedRequestParams, paged)
        return server


def settings(server: HintedServer, **overrides: Any) -> ConnectionSettings:
    return ConnectionSettings(
        server_id="id-hinted",
        server_name="hinted",
        transport=MemoryParams(server=server, principal=overrides.pop("principal", None)),
        ping_interval=0,
        **overrides,
    )


@contextlib.asynccontextmanager
async def one(server: HintedServer, **overrides: Any) -> AsyncIterator[tuple[ConnectionHandle, events.Subscription]]:
    async with running(settings(server, **overrides)) as (handles, sub):
        yield handles[0], sub


async def at(when: float) -> None:
    """Sleep until virtual time ``when``."""
    await trio.sleep_until(when)


# ---------------------------------------------------------------------- the connection's listings


async def test_ttl_replaces_the_callers_age_both_ways(autojump_clock: trio.abc.Clock) -> None:
    """A 30 s ttlMs re-lists at 30 s though the caller keeps 300 s; a 600 s one outlives the caller's 300 s."""
    server = HintedServer(tools_list=CacheHint(ttl_ms=30_000, scope="public"))
    async with one(server) as (handle, _):
        await handle.connect()
        start = trio.current_time()
        await handle.tools_listing(max_age=300)
        await at(start + 29.9)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 1
        await at(start + 30.0)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 2
        server.hints[TOOLS] = CacheHint(ttl_ms=600_000, scope="public")
        await at(start + 60.0)
        listed = await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 3 and listed.word is not None
        assert listed.word.expires_at == start + 660.0
        await at(start + 659.9)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 3
        await at(start + 660.0)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 4


async def test_zero_ttl_is_stale_at_once(autojump_clock: trio.abc.Clock) -> None:
    """ttlMs 0 (the SDK's default word) re-lists on every use, though the caller would keep it 300 s."""
    server = HintedServer()
    async with one(server) as (handle, _):
        for _ in range(3):
            listed = await handle.tools_listing(max_age=300)
        assert listed.word is not None and listed.word.scope == "private"
        assert server.counts[TOOLS] == 3


async def test_no_word_keeps_todays_rule(autojump_clock: trio.abc.Clock) -> None:
    """No ttlMs (a 2025-11-25 session: the revision has no such word) keeps the caller's age and the old rules."""
    server = HintedServer(tools_list=CacheHint(ttl_ms=1_000, scope="private"))
    async with one(server, negotiate="legacy") as (handle, _):
        await handle.connect()
        start = trio.current_time()
        listed = await handle.tools_listing(max_age=300)
        assert listed.word is None
        await at(start + 299)
        await handle.tools_listing(max_age=300)
        await handle.list_prompts()
        await handle.list_prompts()
        await handle.list_resources()
        await handle.list_resources()
        assert server.counts[TOOLS] == 1 and server.counts[PROMPTS] == 2 and server.counts[RESOURCES] == 1
        await at(start + 300)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 2


async def test_list_changed_ends_a_fresh_listing(autojump_clock: trio.abc.Clock) -> None:
    """A list_changed re-lists at once, however long the server said the list stays fresh."""
    server = HintedServer(tools_list=CacheHint(ttl_ms=3_600_000, scope="public"))
    async with one(server) as (handle, sub):
        await handle.tools_listing(max_age=300)
        await handle.call_tool("announce")
        await wait_event(sub, lambda e: e.type == events.TOOLS_CHANGED)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 2


async def test_prompts_resources_and_templates_follow_the_word(autojump_clock: trio.abc.Clock) -> None:
    """Prompts and templates (fetched every time without a word) and resources (kept 300 s) live exactly ttlMs."""
    hint = CacheHint(ttl_ms=10_000, scope="public")
    server = HintedServer(prompts_list=hint, resources_list=hint, resources_templates_list=hint)
    async with one(server) as (handle, _):
        await handle.connect()
        start = trio.current_time()
        for _ in range(2):
            assert [p.name for p in await handle.list_prompts()] == ["hello"]
            assert [str(r.uri) for r in await handle.list_resources()] == ["mem://one"]
            assert [t.name for t in await handle.list_resource_templates()] == ["note"]
        assert (server.counts[PROMPTS], server.counts[RESOURCES], server.counts[TEMPLATES]) == (1, 1, 1)
        await at(start + 10)
        await handle.list_prompts()
        await handle.list_resources()
        await handle.list_resource_templates()
        assert (server.counts[PROMPTS], server.counts[RESOURCES], server.counts[TEMPLATES]) == (2, 2, 2)
        assert RESOURCE_CACHE_TTL > 10  # the word, not the default, ended the resources' listing


async def test_list_tools_is_always_a_request(autojump_clock: trio.abc.Clock) -> None:
    """list_tools (what `mcp-actors test` times) asks the server even while its last list is fresh."""
    server = HintedServer(tools_list=CacheHint(ttl_ms=600_000, scope="public"))
    async with one(server) as (handle, _):
        await handle.list_tools()
        await handle.list_tools()
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 2


async def test_pages_join_the_earliest_end_and_the_narrower_scope(autojump_clock: trio.abc.Clock) -> None:
    """Each page's ttlMs counts from its arrival; the list is stale at the first page's end, private if one is."""
    server = HintedServer()
    server.pages = [(60_000, "public"), (10_000, "private"), (30_000, "public")]
    async with one(server) as (handle, _):
        await handle.connect()
        start = trio.current_time()
        listed = await handle.tools_listing(max_age=300)
        assert [t.name for t in listed.items] == ["t0", "t1", "t2"]
        assert listed.word is not None and listed.word.scope == "private"
        assert listed.word.expires_at == start + 10
        await at(start + 9.9)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 3
        await at(start + 10)
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 6  # the whole list again, from its first page


@pytest.mark.parametrize("scope", ["private", "public"])
async def test_private_lists_belong_to_their_principal(autojump_clock: trio.abc.Clock, scope: str) -> None:
    """A private list is re-listed when the credential changes; a public one is served to whoever asks."""
    who = ["alice"]
    server = HintedServer(tools_list=CacheHint(ttl_ms=600_000, scope=scope))  # type: ignore[arg-type]
    async with one(server, principal=lambda: who[0]) as (handle, _):
        listed = await handle.tools_listing(max_age=300)
        assert listed.principal == "alice"
        who[0] = "bob"
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == (2 if scope == "private" else 1)
        who[0] = "alice"
        await handle.tools_listing(max_age=300)
        # One principal at a time per connection: the cache keeps the latest one's list only.
        assert server.counts[TOOLS] == (3 if scope == "private" else 1)


async def test_a_credential_changed_mid_listing_is_not_cached(autojump_clock: trio.abc.Clock) -> None:
    """A private list whose pages came as two principals answers its caller but is stale at once."""
    who = ["alice"]
    server = HintedServer()
    server.pages = [(600_000, "private"), (600_000, "private")]
    server.on_page = lambda index: who.__setitem__(0, "bob") if index == 1 else None  # a refresh mid-list
    async with one(server, principal=lambda: who[0]) as (handle, _):
        listed = await handle.tools_listing(max_age=300)
        assert [t.name for t in listed.items] == ["t0", "t1"]
        assert listed.word is not None and listed.word.expires_at == -math.inf
        await handle.tools_listing(max_age=300)
        assert server.counts[TOOLS] == 4


# ---------------------------------------------------------------------- never cached: MRTR


async def test_a_list_that_asks_for_input_is_refused_and_not_cached(autojump_clock: trio.abc.Clock) -> None:
    """tools/list is no multi-round-trip method: an input_required answer is a protocol error, nothing is kept."""
    server = HintedServer(tools_list=CacheHint(ttl_ms=600_000, scope="public"))
    asked = {"n": 0}

    def build() -> MCPServer[Any]:
        made = server()

        async def ask(ctx: Any, call_next: Any) -> Any:
            if ctx.method == TOOLS and asked["n"] < 2:  # the typed request and its raw retry
                asked["n"] += 1
                return {
                    "resultType": "input_required",
                    "inputRequests": {"r": {"method": "roots/list"}},
                    "ttlMs": 600_000,
                    "cacheScope": "public",
                }
            return await call_next(ctx)

        lowlevel_server(made).middleware.insert(0, ask)
        return made

    async with running(
        ConnectionSettings(server_id="id-ask", server_name="ask", transport=MemoryParams(server=build), ping_interval=0)
    ) as (handles, _):
        handle = handles[0]
        with pytest.raises(ServerProtocolError):
            await handle.tools_listing(max_age=300)
        listed = await handle.tools_listing(max_age=300)
        assert [t.name for t in listed.items] == ["echo", "announce"]
        assert server.counts[TOOLS] == 1  # the refused answer was never the server's list


async def test_reads_retried_with_input_are_never_cached(autojump_clock: trio.abc.Clock) -> None:
    """A resources/read answered after an input round carries a long ttlMs; the next read still asks again."""
    server: MCPServer[Any] = MCPServer("asking")
    reads = collections.Counter[str]()

    @server.resource("mem://secret", name="secret")
    async def secret() -> str:  # async: the SDK runs a sync one on a thread, in real time
        return "s3cret"

    lowlevel = lowlevel_server(server)

    async def ask_first(ctx: Any, call_next: Any) -> Any:
        if ctx.method != "resources/read":
            return await call_next(ctx)
        reads["read"] += 1
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if "inputResponses" not in params:
            reads["asked"] += 1
            return {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}
        result = await call_next(ctx)
        return {**result, "ttlMs": 600_000, "cacheScope": "public"}

    lowlevel.middleware.append(ask_first)
    from mcp_actors._connection.callbacks import HostCallbacks

    host = HostCallbacks(roots=["file:///tmp"])
    async with running(
        ConnectionSettings(
            server_id="id-read",
            server_name="read",
            transport=MemoryParams(server=server),
            ping_interval=0,
            host=host,
        )
    ) as (handles, _):
        handle = handles[0]
        for _ in range(2):
            result = await handle.read_resource("mem://secret")
            assert result.contents[0].text == "s3cret"  # type: ignore[union-attr]
        assert reads == {"read": 4, "asked": 2}


# ---------------------------------------------------------------------- the registry's tool cache


@contextlib.contextmanager
def stdio_records_served_by(server: HintedServer, principal: Any = None) -> Iterator[None]:
    """While the block runs, every stdio record is served in memory by ``server`` (the built-in demo's too)."""
    params = MemoryParams(server=server, principal=principal)

    def from_record(record: McpServerRecord) -> TransportParams:
        return params

    register_transport_kind(ServerType.STDIO, from_record)
    try:
        yield
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


@contextlib.asynccontextmanager
async def service(tmp_path: Path, server: HintedServer, principal: Any = None) -> AsyncIterator[Any]:
    from mcp_actors.runtime import open_runtime

    with stdio_records_served_by(server, principal):
        # No config polling: its thread would let the autojump clock leap past the times asserted.
        async with open_runtime(tmp_path / "cfg.json", sweep_ledger=False, config_poll_interval=0) as rt:
            await rt.service.add(
                {"name": "hinted", "type": "stdio", "config": {"command": "unused", "pingInterval": 0}}
            )
            yield rt.service


def expiry(svc: Any) -> float:
    """When the registry's cached tool list of 'hinted' goes stale, by the server's word."""
    [view] = svc._registry.snapshot.tools.values()
    assert view.word is not None
    return float(view.word.expires_at)


async def test_registry_tool_cache_follows_the_word(autojump_clock: trio.abc.Clock, tmp_path: Path) -> None:
    """The registry's 300 s tool cache gives way to a 10 s ttlMs, and a reconnect still drops it."""
    server = HintedServer(tools_list=CacheHint(ttl_ms=10_000, scope="public"))
    async with service(tmp_path, server) as svc:
        await svc.list_server_tools("hinted")
        stale = expiry(svc)
        await at(stale - 0.1)
        await svc.list_server_tools("hinted")
        assert server.counts[TOOLS] == 1
        await at(stale)
        tools = await svc.list_server_tools("hinted")
        assert [t.name for t in tools] == ["echo", "announce"]
        assert server.counts[TOOLS] == 2
        await svc.reconnect("hinted")
        await svc.list_server_tools("hinted")
        assert server.counts[TOOLS] == 3


async def test_registry_private_tools_follow_the_principal(autojump_clock: trio.abc.Clock, tmp_path: Path) -> None:
    """A private tool list in the registry is listed again for a new credential, not served across it."""
    who = ["alice"]
    server = HintedServer(tools_list=CacheHint(ttl_ms=600_000, scope="private"))
    async with service(tmp_path, server, principal=lambda: who[0]) as svc:
        await svc.list_server_tools("hinted")
        await svc.list_server_tools("hinted")
        assert server.counts[TOOLS] == 1
        who[0] = "bob"
        await svc.list_server_tools("hinted")
        await svc.list_server_tools("hinted")
        assert server.counts[TOOLS] == 2
