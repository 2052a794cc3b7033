"""The CLI's host callbacks: the terminal elicitation prompt, non-interactive decline, sampling refused clearly."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import mcp.types as mcp_types
import pytest
import trio
from rich.console import Console

from mcp_actors import events
from mcp_actors._connection.callbacks import HostCallbacks
from mcp_actors._connection.handle import open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._demo.callbacks import ASK_USER_SCHEMA, CONSENT_URL
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.cli._callbacks import (
    SAMPLING_DECLINED,
    TerminalElicitor,
    cli_callbacks,
    decline_elicitation,
    decline_sampling,
)
from mcp_actors.demo_server import create_demo_server
from mcp_actors.errors import ToolCallFailed

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

FORM = mcp_types.ElicitRequestFormParams(message="Tell me about yourself", requested_schema=ASK_USER_SCHEMA)
URL = mcp_types.ElicitRequestURLParams(message="Approve access", url=CONSENT_URL, elicitation_id="e1")


def terminal(lines: list[str], opened: list[str] | None = None) -> tuple[TerminalElicitor, io.StringIO]:
    """An elicitor reading the scripted lines (then end of input), printing into a buffer."""
    out = io.StringIO()
    feed: Iterator[str] = iter([line + "\n" for line in lines])

    def open_url(url: str) -> bool:
        if opened is not None:
            opened.append(url)
        return False

    elicitor = TerminalElicitor(Console(file=out, width=120), lambda: next(feed, ""), open_url)
    return elicitor, out


def test_form_prompt_fields_defaults_enums_and_retries() -> None:
    """The form prompt asks every field, shows defaults and choices, re-asks a bad number, fills defaults."""
    # accept; name; age "old" (asked again) then 41; colour by number; size by title; toppings by number and
    # value; subscribe left empty (default).
    elicitor, out = terminal(["y", "Ada", "old", "41", "3", "Medium", "1, olives", ""])
    result = elicitor.ask("id-demo", FORM)
    assert result.action == "accept"
    assert result.content == {
        "name": "Ada",
        "age": 41,
        "colour": "blue",
        "size": "m",
        "toppings": ["cheese", "olives"],
        "subscribe": False,
    }
    shown = out.getvalue()
    assert "Tell me about yourself" in shown and "Favourite colour" in shown and "[30]" in shown
    assert "'old' is not a whole number" in shown and "2. Medium" in shown
    assert "Answer? [y]es / [n]o (decline) / [c]ancel: " in shown  # literal brackets, not rich markup


def test_form_prompt_required_field_left_empty_is_asked_again() -> None:
    """A required field left empty fails the schema check; the whole form is asked again."""
    elicitor, out = terminal(["", "", "", "", "", "", "", "Bo", "", "", "", "", ""])
    result = elicitor.ask("id-demo", FORM)
    assert result.action == "accept" and result.content is not None and result.content["name"] == "Bo"
    assert "'name' is a required property" in out.getvalue()


@pytest.mark.parametrize(("lines", "action"), [(["n"], "decline"), (["c"], "cancel"), ([], "cancel")])
def test_form_prompt_decline_cancel_and_end_of_input(lines: list[str], action: str) -> None:
    """'n' declines, 'c' cancels, end of input (Ctrl-D) cancels."""
    elicitor, _ = terminal(lines)
    assert elicitor.ask("id-demo", FORM).action == action


def test_url_mode_opens_or_prints_the_url() -> None:
    """URL mode shows the URL; yes tries the browser (and says to open it by hand when none), no declines."""
    opened: list[str] = []
    elicitor, out = terminal(["y"], opened)
    assert elicitor.ask("id-demo", URL).action == "accept"
    assert opened == [CONSENT_URL] and CONSENT_URL in out.getvalue() and "open the URL above yourself" in out.getvalue()
    elicitor, _ = terminal(["n"], opened)
    assert elicitor.ask("id-demo", URL).action == "decline" and opened == [CONSENT_URL]


def test_not_a_terminal_or_no_input_declines() -> None:
    """Under a pipe (as here) or with --no-input the CLI's elicitation handler is the decliner."""
    assert cli_callbacks(no_input=True)["elicitation_handler"] is decline_elicitation
    assert cli_callbacks()["elicitation_handler"] is decline_elicitation  # pytest's stdin is not a TTY
    assert cli_callbacks()["sampling_handler"] is decline_sampling


def settings(host: HostCallbacks) -> ConnectionSettings:
    return ConnectionSettings(
        server_id="id-demo",
        server_name="demo",
        transport=MemoryParams(server=create_demo_server, raise_exceptions=False),
        ping_interval=0,
        host=host,
        negotiate="legacy",  # ask_user / ask_model are server-to-client requests: 2025-11-25 only
    )


async def call(
    host: HostCallbacks, tool: str, args: dict[str, Any] | None = None
) -> mcp_types.CallToolResult | ToolCallFailed:
    handle, start = open_connection(settings(host), events.EventBus())
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            return await handle.call_tool(tool, args or {})
        except ToolCallFailed as exc:
            return exc
        finally:
            await handle.aclose()


async def test_cli_handlers_over_a_connection() -> None:
    """Through a real session the prompt's answer, a decline and the sampling refusal reach the tool."""
    elicitor, _ = terminal(["y", "Cy", "", "", "", "", ""])
    result = await call(HostCallbacks(elicitation=elicitor), "ask_user")
    assert isinstance(result, mcp_types.CallToolResult)
    answered = json.loads("".join(getattr(c, "text", "") for c in result.content))
    assert answered["action"] == "accept" and answered["content"]["name"] == "Cy" and answered["content"]["age"] == 30

    result = await call(HostCallbacks(**_host(cli_callbacks(no_input=True))), "ask_user")
    assert isinstance(result, mcp_types.CallToolResult)
    assert json.loads("".join(getattr(c, "text", "") for c in result.content))["action"] == "decline"

    refused = await call(HostCallbacks(**_host(cli_callbacks(no_input=True))), "ask_model", {"prompt": "hi"})
    assert isinstance(refused, ToolCallFailed)
    assert SAMPLING_DECLINED in str(refused) and "-32600" in str(refused)


def _host(options: dict[str, Any]) -> dict[str, Any]:
    return {"sampling": options["sampling_handler"], "elicitation": options["elicitation_handler"]}
