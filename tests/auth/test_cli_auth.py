"""``mcp-actors auth login/status/logout`` as a user runs them, with a test that plays the browser.

The command runs in this process (``clikit.invoke``: milliseconds instead of the ~3 s a
process spends importing the MCP SDK), in a worker thread, because the command's
``trio.run`` cannot nest in the test's: the test's loop meanwhile plays the browser and
drains the test authorization server, a real process on a real port. The login reads the
URL the command prints on stderr and delivers the redirect to the command's loopback
listener or pastes it on the command's stdin (a pipe). Nothing here depends on the
command being a process of its own; the entry points are tested in
``tests/cli/test_cli_process.py``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import httpx2
import pytest
import trio
from testkit import Result

from mcp_actors._config.codec import document_from_records
from mcp_actors._config.record import McpServerRecord, OAuthConfig, ServerConfig, ServerType
from tests.auth.conftest import AuthServer, fail_after
from tests.cli.clikit import invoke

_TOKEN_PREFIXES = ("at-", "rt-")  # every token the test authorization server issues starts so


def _env(tmp_path: Path) -> dict[str, str | None]:
    return {"MCP_ACTORS_STATE_DIR": str(tmp_path / "state"), "MCP_ACTORS_NO_BROWSER": "1"}


def _write_config(tmp_path: Path, server: AuthServer, oauth: OAuthConfig | None = None) -> Path:
    record = McpServerRecord(
        name="guarded", type=ServerType.HTTP, config=ServerConfig(url=server.url, oauth=oauth), is_trusted=True
    )
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(document_from_records([record])))
    return path


async def _cli(
    tmp_path: Path,
    config: Path,
    *args: str,
    stdin: bytes | BinaryIO = b"",
    watch: Any = None,
) -> Result:
    """``mcp-actors --config CONFIG ARGS`` in a worker thread (every command here bounds its own waits)."""
    run = functools.partial(invoke, None, "--config", str(config), *args, stdin=stdin, env=_env(tmp_path), watch=watch)
    return await trio.to_thread.run_sync(run)


def _no_tokens(*texts: str) -> None:
    for text in texts:
        for prefix in _TOKEN_PREFIXES:
            assert prefix not in text, text


@contextlib.contextmanager
def _stdin_pipe() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """A pipe for the command's stdin: its read end and the end a test pastes to."""
    read_end, write_end = os.pipe()
    with open(read_end, "rb") as reader, open(write_end, "wb", buffering=0) as writer:
        yield reader, writer


async def _login(tmp_path: Path, config: Path, *, paste: bool) -> Result:
    """Run `auth login` and play the browser: follow the URL, deliver the redirect (loopback or pasted)."""
    printed: list[io.BytesIO] = []
    done: list[Result] = []
    # The command's stdin stays open while it waits, as a terminal's does: in the loopback case
    # nothing is pasted and the redirect must arrive at the listener.
    with _stdin_pipe() as (stdin, paste_to):
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                args = ("auth", "login", "guarded", "--no-browser", "--timeout", "60", "--json")
                done.append(await _cli(tmp_path, config, *args, stdin=stdin, watch=printed.append))

            nursery.start_soon(run)
            with fail_after():
                while "/authorize?" not in (err := printed[0].getvalue().decode() if printed else ""):
                    assert not done, f"login ended before printing the URL: {done}"
                    await trio.sleep(0.01)
            url = next(line.strip() for line in err.splitlines() if "/authorize?" in line)
            async with httpx2.AsyncClient() as client:
                redirect = (await client.get(url)).headers["location"]
                if paste:
                    paste_to.write(redirect.encode() + b"\n")
                else:
                    page = await client.get(redirect)
                    assert "Logged in" in page.text
        paste_to.close()  # ends the command's stdin reader (abandoned by the loopback case) before the read end closes
    return done[0]


@pytest.mark.parametrize("paste", [False, True], ids=["loopback-redirect", "pasted-url"])
async def test_login_status_call_logout(auth_server: AuthServer, tmp_path: Path, paste: bool) -> None:
    """A new user logs in from the CLI, sees the login, calls a tool with the stored token, logs out."""
    config = _write_config(tmp_path, auth_server)
    result = await _login(tmp_path, config, paste=paste)
    assert result.rc == 0, result.stderr
    login = result.json()
    assert login["loggedIn"] is True and login["scopes"] == ["mcp"] and login["server"] == "guarded"
    _no_tokens(result.stdout, result.stderr)

    status = await _cli(tmp_path, config, "auth", "status", "--json")
    assert status.rc == 0, status.stderr
    (row,) = json.loads(status.stdout)
    assert row["loggedIn"] and row["expiresAt"] > 0 and row["clientId"]
    _no_tokens(status.stdout, status.stderr)

    table = await _cli(tmp_path, config, "auth", "status")
    assert table.rc == 0, table.stderr
    assert "guarded" in table.stdout and "yes" in table.stdout
    _no_tokens(table.stdout, table.stderr)

    call = await _cli(tmp_path, config, "call", "guarded/echo", "--args", '{"text": "from the cli"}', "--json")
    assert call.rc == 0, call.stderr
    assert "from the cli" in call.stdout
    _no_tokens(call.stdout, call.stderr)

    token_file = tmp_path / "state" / "oauth-tokens.json"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert "at-" in token_file.read_text()  # the tokens live here, and only here
    assert "at-" not in config.read_text()

    logout = await _cli(tmp_path, config, "auth", "logout", "guarded", "--json")
    assert json.loads(logout.stdout) == {"server": "guarded", "serverId": row["serverId"], "removed": True}
    after = await _cli(tmp_path, config, "auth", "status", "guarded", "--json")
    assert json.loads(after.stdout)[0]["loggedIn"] is False
    assert "at-" not in token_file.read_text()


async def test_call_without_login_names_the_fix(auth_server: AuthServer, tmp_path: Path) -> None:
    """A call to a server nobody logged in to fails at once (exit 3) naming `mcp-actors auth login`."""
    config = _write_config(tmp_path, auth_server)
    call = await _cli(tmp_path, config, "call", "guarded/echo", "--args", '{"text": "x"}')
    assert call.rc == 3
    assert "mcp-actors auth login guarded" in call.stderr
    assert await auth_server.count("authorize") == 0


async def test_client_credentials_login_needs_no_person(tmp_path: Path) -> None:
    """`auth login` of a client_credentials server gets a token without any browser."""
    from tests.auth.conftest import oauth_server

    async with oauth_server(clients={"machine": {"secret": "cli-m2m-secret"}}) as server:
        oauth = OAuthConfig(grant="client_credentials", client_id="machine", client_secret="cli-m2m-secret")  # type: ignore[arg-type]
        config = _write_config(tmp_path, server, oauth)
        login = await _cli(tmp_path, config, "auth", "login", "guarded", "--json")
        assert login.rc == 0, login.stderr
        document: dict[str, Any] = json.loads(login.stdout)
        assert document["loggedIn"] and document["clientId"] == "machine"
        assert document["grant"] == "client_credentials"
        for text in (login.stdout, login.stderr):
            assert "cli-m2m-secret" not in text
        _no_tokens(login.stdout, login.stderr)


async def test_login_of_a_stdio_server_is_a_usage_error(tmp_path: Path) -> None:
    """OAuth is for remote servers: logging in to a stdio server says so (exit 2)."""
    record = McpServerRecord(name="local", type=ServerType.STDIO, config=ServerConfig(command="true"))
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(document_from_records([record])))
    login = await _cli(tmp_path, config, "auth", "login", "local")
    assert login.rc == 2
    assert "stdio" in login.stderr


async def test_status_json_failure_prints_one_document(tmp_path: Path) -> None:
    """`auth status --json` that fails prints the failure document on stdout besides the stderr line.

    Before, stdout stayed empty: an unknown server (exit 2) or a stdio server (exit 2) gave a
    script no JSON document to read.
    """
    record = McpServerRecord(name="local", type=ServerType.STDIO, config=ServerConfig(command="true"))
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(document_from_records([record])))
    for name, kind in (("nosuch", "ServerNotFound"), ("local", "CliError")):
        status = await _cli(tmp_path, config, "auth", "status", name, "--json")
        assert status.rc == 2, status.stderr
        assert len(status.stderr.splitlines()) == 1
        document = json.loads(status.stdout)
        assert document["ok"] is False
        assert (document["error"]["type"], document["error"]["exitCode"]) == (kind, 2)


async def test_login_on_a_busy_port_says_so(auth_server: AuthServer, tmp_path: Path) -> None:
    """A redirect port already in use is a usage error naming the port and --port (exit 2)."""
    config = _write_config(tmp_path, auth_server)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        login = await _cli(tmp_path, config, "auth", "login", "guarded", "--no-browser", "--port", str(port))
    assert login.rc == 2
    assert f"127.0.0.1:{port}" in login.stderr and "--port" in login.stderr
