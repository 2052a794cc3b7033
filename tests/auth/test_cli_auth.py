"""``mcp-actors auth login/status/logout`` as a user runs them: real processes, a test that plays the browser."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from mcp_actors._config.codec import document_from_records
from mcp_actors._config.record import McpServerRecord, OAuthConfig, ServerConfig, ServerType
from tests.auth.conftest import AuthServer, fail_after

_TOKEN_PREFIXES = ("at-", "rt-")  # every token the test authorization server issues starts so


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MCP_ACTORS_STATE_DIR": str(tmp_path / "state"), "MCP_ACTORS_NO_BROWSER": "1"}


def _write_config(tmp_path: Path, server: AuthServer, oauth: OAuthConfig | None = None) -> Path:
    record = McpServerRecord(
        name="guarded", type=ServerType.HTTP, config=ServerConfig(url=server.url, oauth=oauth), is_trusted=True
    )
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(document_from_records([record])))
    return path


async def _cli(tmp_path: Path, config: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    argv = [sys.executable, "-m", "mcp_actors", "--config", str(config), *args]
    with fail_after():
        return await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, env=_env(tmp_path))


def _no_tokens(*texts: bytes | str) -> None:
    for text in texts:
        shown = text.decode() if isinstance(text, bytes) else text
        for prefix in _TOKEN_PREFIXES:
            assert prefix not in shown, shown


async def _login(tmp_path: Path, config: Path, *, paste: bool) -> tuple[int, bytes, bytes]:
    """Run `auth login` and play the browser: follow the URL, deliver the redirect (loopback or pasted)."""
    argv = [sys.executable, "-m", "mcp_actors", "--config", str(config), "auth", "login", "guarded", "--no-browser"]
    argv.append("--json")
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path)
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    err = b""
    out = b""
    try:
        with fail_after():
            while b"/authorize?" not in err:
                chunk = await process.stderr.receive_some()
                assert chunk, err.decode()
                err += chunk
            url = next(line.strip() for line in err.decode().splitlines() if "/authorize?" in line)
            async with httpx2.AsyncClient() as client:
                redirect = (await client.get(url)).headers["location"]
                if paste:
                    await process.stdin.send_all(redirect.encode() + b"\n")
                else:
                    page = await client.get(redirect)
                    assert "Logged in" in page.text
            async with trio.open_nursery() as nursery:

                async def drain_err() -> None:
                    nonlocal err
                    while chunk := await process.stderr.receive_some():  # type: ignore[union-attr]
                        err += chunk

                nursery.start_soon(drain_err)
                while chunk := await process.stdout.receive_some():
                    out += chunk
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
        await process.stdin.aclose()
    return code, out, err


@pytest.mark.parametrize("paste", [False, True], ids=["loopback-redirect", "pasted-url"])
async def test_login_status_call_logout(auth_server: AuthServer, tmp_path: Path, paste: bool) -> None:
    """A new user logs in from the CLI, sees the login, calls a tool with the stored token, logs out."""
    config = _write_config(tmp_path, auth_server)
    code, out, err = await _login(tmp_path, config, paste=paste)
    assert code == 0, err.decode()
    login = json.loads(out)
    assert login["loggedIn"] is True and login["scopes"] == ["mcp"] and login["server"] == "guarded"
    _no_tokens(out, err)

    status = await _cli(tmp_path, config, "auth", "status", "--json")
    assert status.returncode == 0, status.stderr.decode()
    (row,) = json.loads(status.stdout)
    assert row["loggedIn"] and row["expiresAt"] > 0 and row["clientId"]
    _no_tokens(status.stdout, status.stderr)

    table = await _cli(tmp_path, config, "auth", "status")
    assert b"guarded" in table.stdout and b"yes" in table.stdout
    _no_tokens(table.stdout, table.stderr)

    call = await _cli(tmp_path, config, "call", "guarded/echo", "--args", '{"text": "from the cli"}', "--json")
    assert call.returncode == 0, call.stderr.decode()
    assert "from the cli" in call.stdout.decode()
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
    assert call.returncode == 3
    assert "mcp-actors auth login guarded" in call.stderr.decode()
    assert await auth_server.count("authorize") == 0


async def test_client_credentials_login_needs_no_person(tmp_path: Path) -> None:
    """`auth login` of a client_credentials server gets a token without any browser."""
    from tests.auth.conftest import oauth_server

    async with oauth_server(clients={"machine": {"secret": "cli-m2m-secret"}}) as server:
        oauth = OAuthConfig(grant="client_credentials", client_id="machine", client_secret="cli-m2m-secret")  # type: ignore[arg-type]
        config = _write_config(tmp_path, server, oauth)
        login = await _cli(tmp_path, config, "auth", "login", "guarded", "--json")
        assert login.returncode == 0, login.stderr.decode()
        document: dict[str, Any] = json.loads(login.stdout)
        assert document["loggedIn"] and document["clientId"] == "machine"
        assert document["grant"] == "client_credentials"
        for text in (login.stdout, login.stderr):
            assert b"cli-m2m-secret" not in text
        _no_tokens(login.stdout, login.stderr)


async def test_login_of_a_stdio_server_is_a_usage_error(tmp_path: Path) -> None:
    """OAuth is for remote servers: logging in to a stdio server says so (exit 2)."""
    record = McpServerRecord(name="local", type=ServerType.STDIO, config=ServerConfig(command="true"))
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(document_from_records([record])))
    login = await _cli(tmp_path, config, "auth", "login", "local")
    assert login.returncode == 2
    assert "stdio" in login.stderr.decode()


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
        assert status.returncode == 2, status.stderr
        assert len(status.stderr.decode().splitlines()) == 1
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
    assert login.returncode == 2
    assert f"127.0.0.1:{port}" in login.stderr.decode() and "--port" in login.stderr.decode()
