"""URL-mode elicitation completion (2025-11-25): the event, and the CLI prompt's wait ending on it."""

from __future__ import annotations

import io
from collections.abc import Iterator

import mcp.types as mcp_types
import pytest
import trio
from protocol_bed import BOUND, next_event
from rich.console import Console

from mcp_actors import events
from mcp_actors._connection.callbacks import HostCallbacks
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._demo.callbacks import CONSENT_URL
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.cli._callbacks import TerminalElicitor
from mcp_actors.demo_server import create_demo_server

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

URL = mcp_types.ElicitRequestURLParams(message="Approve access", url=CONSENT_URL, elicitation_id="e1")


def terminal(lines: list[str]) -> tuple[TerminalElicitor, io.StringIO]:
    """An elicitor reading the scripted lines (then end of input), printing into a buffer, opening no browser."""
    out = io.StringIO()
    feed: Iterator[str] = iter([line + "\n" for line in lines])
    return TerminalElicitor(Console(file=out, width=120), lambda: next(feed, ""), lambda url: True), out


def settings(host: HostCallbacks) -> ConnectionSettings:
    """The demo server in memory, with ``host``'s callbacks."""
    return ConnectionSettings(
        server_id="id-demo",
        server_name="demo",
        transport=MemoryParams(server=create_demo_server, raise_exceptions=False),
        ping_interval=0,
        host=host,
        negotiate="legacy",  # notifications/elicitation/complete exists at 2025-11-25 only
    )


async def test_completion_notification_is_an_event() -> None:
    """notifications/elicitation/complete is emitted as elicitation:complete with the server and elicitation id."""
    seen: list[str] = []

    async def accept(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        assert isinstance(params, mcp_types.ElicitRequestURLParams)
        seen.append(params.elicitation_id)
        return mcp_types.ElicitResult(action="accept")

    bus = events.EventBus()
    handle, start = open_connection(settings(HostCallbacks(elicitation=accept)), bus)
    with bus.subscribe() as sub, trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            await handle.call_tool("ask_user_url")
            event = await next_event(sub, events.ELICITATION_COMPLETE, lambda e: True)
            await handle.aclose()
    assert dict(event.data) == {"serverId": "id-demo", "serverName": "demo", "elicitationId": seen[0]}


async def test_a_declined_url_elicitation_is_not_completed() -> None:
    """The demo reports completion only for an accepted consent; a decline sends none."""

    async def decline(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="decline")

    bus = events.EventBus()
    handle, start = open_connection(settings(HostCallbacks(elicitation=decline)), bus)
    with bus.subscribe() as sub, trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            await handle.call_tool("ask_user_url")
            await handle.aclose()
    kinds = set()
    while True:
        try:
            kinds.add(sub.receive_nowait().type)
        except (trio.WouldBlock, trio.EndOfChannel):  # drained (the subscription closed with its block)
            break
    assert events.ELICITATION_COMPLETE not in kinds


def test_url_prompt_waits_until_the_server_completes() -> None:
    """After accept the prompt says it waits; the completion of that id ends the wait, other ids are ignored."""
    elicitor, out = terminal(["y"])
    assert elicitor.ask("id-demo", URL).action == "accept"
    assert elicitor.waiting == {"e1": CONSENT_URL}
    assert "waiting for the server to confirm" in out.getvalue()
    assert elicitor.completed("someone-else") is False
    assert elicitor.completed("e1") is True
    assert elicitor.waiting == {}
    assert "the server confirms the page is done" in out.getvalue()
    assert elicitor.completed("e1") is False, "an already-completed id is ignored"


def test_a_declined_url_prompt_waits_for_nothing() -> None:
    """A declined URL elicitation leaves nothing to wait for."""
    elicitor, out = terminal(["n"])
    assert elicitor.ask("id-demo", URL).action == "decline"
    assert elicitor.waiting == {}
    assert "waiting" not in out.getvalue()


async def test_the_cli_prompt_follows_completions_from_the_bus() -> None:
    """Through a real session, the prompt's wait ends when the demo server reports the page done."""
    elicitor, out = terminal(["y"])
    bus = events.EventBus()
    handle, start = open_connection(settings(HostCallbacks(elicitation=elicitor)), bus)
    with bus.subscribe() as sub, trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(start)
            nursery.start_soon(elicitor.follow, sub)
            await handle.call_tool("ask_user_url")
            await elicitor.wait_idle()
            await handle.aclose()
            nursery.cancel_scope.cancel()
    assert elicitor.waiting == {}
    assert "the server confirms the page is done" in out.getvalue()
