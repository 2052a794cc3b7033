"""What a server sends cannot drive the terminal: control characters are shown, never obeyed.

A hostile server (served in memory, run in this process with ``clikit.invoke``) puts
escape sequences in every text the CLI shows a person: its serverInfo name, a tool's
description and result (an error result too), a resource's name, description and text, a
prompt's description and text, a log line. The human output must carry none of the
control bytes (ESC, BEL, backspace, a lone CR, C1 such as ``\\x9b``) and show them as
visible escapes instead; ``[bold]`` in a server's text prints literally (it is not rich
markup). ``--json`` and ``--output`` keep the exact text.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from clikit import invoke, stdio, write_config
from mcp.server.mcpserver import MCPServer

from mcp_actors._config.record import McpServerRecord, ServerType
from mcp_actors._wire.transports import MemoryParams, StdioParams, TransportParams, register_transport_kind

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\x08\x7f\r[bold]loud[/bold]"
"""Sets the window title, clears the screen, a one-byte CSI, backspace, DEL, a lone CR, and markup."""
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x08\\x7f\\x0d[bold]loud[/bold]"
"""How the CLI shows it in plain text (a result, a resource's or prompt's text, an error line)."""
IN_TABLES = "\\x1b]0;pwned\\x1b[2J\\x9b31m\\x7f[bold]loud[/bold]"
"""How rich output (tables, lines) shows it: rich drops BEL, backspace and CR itself, the rest is shown."""
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Any control byte but newline and tab (the CLI's human output is not coloured on a pipe)."""


def hostile_server() -> MCPServer[Any]:
    """A server whose every text carries :data:`HOSTILE`."""
    server = MCPServer(name=f"evil{HOSTILE}", version=f"6{HOSTILE}")

    @server.tool(name="shout", description=f"Shouts{HOSTILE}")
    async def shout() -> str:
        return f"result{HOSTILE}"

    @server.tool(name="sulk", description="Fails")
    async def sulk() -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"error{HOSTILE}")], is_error=True)

    @server.resource("evil://note", name=f"note{HOSTILE}", description=f"about{HOSTILE}", mime_type="text/plain")
    def note() -> str:
        return f"content{HOSTILE}"

    @server.prompt(name="rant", description=f"rants{HOSTILE}")
    def rant() -> str:
        return f"prompt{HOSTILE}"

    return server


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Path]:
    """A config with the trusted server ``evil`` (served in memory) and ``tail``, a process that dies saying HOSTILE."""
    params = MemoryParams(server=hostile_server, raise_exceptions=False)

    def from_record(record: McpServerRecord) -> TransportParams:
        return params if record.name == "evil" else StdioParams.from_record(record)

    register_transport_kind(ServerType.STDIO, from_record)
    dies = [sys.executable, "-c", f"import sys; sys.stderr.write({HOSTILE!r} + '\\n'); sys.exit(3)"]
    try:
        yield write_config(
            tmp_path / "mcp-config.json",
            stdio("evil", ["hostile-server"], trusted=True),
            stdio("tail", dies, trusted=True),
        )
    finally:
        register_transport_kind(ServerType.STDIO, StdioParams.from_record)


def assert_safe(output: str) -> None:
    assert not CONTROL.search(output), repr(output)


def test_hostile_server_texts_reach_the_terminal_neutralised(config: Path) -> None:
    """Every human output of a server's text shows the control characters as escapes; none is sent raw."""
    commands: list[tuple[tuple[str, ...], str]] = [
        (("call", "evil/shout"), f"result{SHOWN}"),
        (("tools", "--server", "evil"), "Shouts\\x1b]0;pwned\\x1b[2J\\x9b31m\\x7f"),  # the first line only
        (("discover", "evil"), "Shouts\\x1b]0;pwned\\x1b[2J\\x9b31m\\x7f"),
        (("test", "evil"), f"evil{IN_TABLES} 6{IN_TABLES}"),
        (("resources", "list", "evil"), f"note{IN_TABLES}"),
        (("resources", "read", "evil", "evil://note"), f"content{SHOWN}"),
        (("prompts", "list", "evil"), f"rants{IN_TABLES}"),
        (("prompts", "get", "evil", "rant"), f"prompt{SHOWN}"),
    ]
    for args, expected in commands:
        done = invoke(config, *args, env={"COLUMNS": "400"})
        assert done.rc == 0, (args, done.stderr)
        assert_safe(done.stdout)
        assert_safe(done.stderr)
        assert expected in done.stdout, (args, done.stdout)
    failed = invoke(config, "call", "evil/sulk")
    assert failed.rc == 1
    assert failed.stdout == ""
    assert_safe(failed.stderr)
    assert f"error{SHOWN}" in failed.stderr
    died = invoke(config, "test", "tail")
    assert died.rc == 3
    assert_safe(died.stderr)
    assert "\\x1b]0;pwned\\x07" in died.stderr  # the stderr tail, shown


def test_json_and_output_keep_the_exact_text(config: Path, tmp_path: Path) -> None:
    """--json round-trips every hostile string exactly; --output writes the exact bytes."""
    called = invoke(config, "call", "evil/shout", "--json")
    assert called.rc == 0 and called.json()["content"][0]["text"] == f"result{HOSTILE}"
    tested = invoke(config, "test", "evil", "--json")
    assert tested.json()["serverInfo"] == {"name": f"evil{HOSTILE}", "version": f"6{HOSTILE}"}
    found = invoke(config, "discover", "evil", "--json").json()
    assert {t["name"]: t["description"] for t in found["tools"]}["shout"] == f"Shouts{HOSTILE}"
    assert found["resources"][0]["name"] == f"note{HOSTILE}"
    assert found["prompts"][0]["description"] == f"rants{HOSTILE}"
    read = invoke(config, "resources", "read", "evil", "evil://note", "--json")
    assert read.json()["contents"][0]["text"] == f"content{HOSTILE}"
    prompt = invoke(config, "prompts", "get", "evil", "rant", "--json")
    assert prompt.json()["messages"][0]["content"]["text"] == f"prompt{HOSTILE}"
    target = tmp_path / "note.txt"
    written = invoke(config, "resources", "read", "evil", "evil://note", "--output", str(target))
    assert written.rc == 0 and target.read_bytes() == f"content{HOSTILE}".encode()


def test_a_crlf_line_end_is_a_line_end(config: Path) -> None:
    """A CRLF from a server is a newline, not an escape: only a lone CR could rewrite a line."""
    from mcp_actors.cli._support import terminal_safe

    assert terminal_safe("one\r\ntwo\rthree\tfour\n") == "one\ntwo\\x0dthree\tfour\n"


def test_watch_lines_pass_through_the_same_console() -> None:
    """watch prints each event (a server's log line, a connection error with stderr) through the CLI's console."""
    from mcp_actors.cli import _app, _console
    from mcp_actors.cli._terminal import TerminalConsole
    from mcp_actors.events import Event

    events = [
        Event(type="server:log", data={"serverName": "evil", "level": "warning", "data": f"log{HOSTILE}"}),
        Event(
            type="connection:state", data={"serverName": "evil", "previous": "x", "state": "error", "error": HOSTILE}
        ),
    ]
    assert isinstance(_console.out(), TerminalConsole) and isinstance(_console.err(), TerminalConsole)
    out = io.StringIO()
    console = TerminalConsole(file=out, width=400, highlight=False)
    for event in events:
        console.print(_app._event_line(event), soft_wrap=True)
    assert_safe(out.getvalue())
    assert "\\x1b]0;pwned" in out.getvalue() and "[bold]loud[/bold]" in out.getvalue()
    assert json.loads(json.dumps(events[0].to_json()))["data"]["data"] == f"log{HOSTILE}"
