"""``mcp-actors auth``: log in to OAuth-protected servers, see the logins, log out.

``auth login NAME`` runs the authorization-code flow with a loopback redirect on
``127.0.0.1`` (the configured ``redirectPort`` or a free one): it opens the browser when
there is one, always prints the URL on stderr, and accepts either the browser's redirect to
the loopback listener or the redirect URL pasted on stdin (for a browser on another
machine). A ``client_credentials`` server logs in with no person at all. The login is the
MCP handshake itself, so a successful login has also proved that the token works.

``auth status [NAME]`` shows, per server, whether it is logged in, when the token expires,
the scopes and the client id; ``auth logout NAME`` deletes the server's tokens and client
registration. Tokens are never printed, with or without ``--json``.

Registered in :mod:`mcp_actors.cli._app` as ``app.add_typer(auth_app, name="auth")``.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time
import urllib.parse
import webbrowser
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from mcp_actors.cli._support import CliError, ExitCode, print_json, report_failure, root_cause, terminal_safe

if TYPE_CHECKING:
    import trio

    from mcp_actors._auth.token_store import LoginStatus
    from mcp_actors._config.record import McpServerRecord

__all__ = ["auth_app"]

_LOGIN_TIMEOUT: Final = 300.0
_CALLBACK_PATH: Final = "/callback"
_PAGE: Final = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n"
    b"<!doctype html><title>mcp-actors</title><p>Logged in. You can close this window.</p>\n"
)
_NOT_FOUND: Final = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

auth_app = typer.Typer(help="Log in to OAuth-protected servers, show logins, log out.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (and nothing else there).")]
ServerArg = Annotated[str, typer.Argument(metavar="NAME", help="The server's name (or id).")]


def _config_path(ctx: typer.Context) -> Path | None:
    # The root command's options object (mcp_actors.cli._run._Options), read by duck typing: this
    # module is imported by cli.py and must not import it back.
    return getattr(ctx.find_root().obj, "config", None)


def _debug(ctx: typer.Context) -> bool:
    return bool(getattr(ctx.find_root().obj, "debug", False))


def _run(ctx: typer.Context, body: Callable[[], Awaitable[ExitCode | None]], *, as_json: bool) -> None:
    """Run one command's body; a failure is one stderr line (and, with ``as_json``, the failure document)."""
    import trio

    try:
        code = trio.run(body) or ExitCode.OK
    except (SystemExit, typer.Exit):
        raise
    except BaseException as exc:
        if isinstance(root_cause(exc), BrokenPipeError):
            code = ExitCode.FAILED
        else:
            code = report_failure(exc, debug=_debug(ctx), as_json=as_json)
    if code != ExitCode.OK:
        raise typer.Exit(int(code))


async def _records(ctx: typer.Context) -> list[McpServerRecord]:
    import trio

    from mcp_actors._config.store import ConfigStore

    store = ConfigStore(_config_path(ctx))
    return await trio.to_thread.run_sync(store.load)


def _find(records: list[McpServerRecord], name: str) -> McpServerRecord:
    from mcp_actors.errors import ServerNotFound

    for record in records:
        if name in (record.name, record.id):
            return record
    known = ", ".join(sorted(r.name for r in records)) or "none"
    raise ServerNotFound(f"no server named {name!r} (servers: {known}); see `mcp-actors servers list`", server=name)


def _remote(record: McpServerRecord) -> None:
    from mcp_actors._config.record import ServerType

    if record.type is ServerType.STDIO:
        raise CliError(
            f"server {record.name!r} is a stdio server; OAuth is for sse/http servers (a stdio server gets"
            " its credentials through config.env)"
        )


def _status_json(record: McpServerRecord, status: LoginStatus) -> dict[str, Any]:
    document = status.to_json()
    document["server"] = record.name
    if document["clientId"] is None and record.config.oauth is not None:
        document["clientId"] = record.config.oauth.client_id
    grant = record.config.oauth.grant.value if record.config.oauth is not None else "authorization_code"
    document["grant"] = grant
    return document


def _when(expires_at: float | None) -> str:
    if expires_at is None:
        return "-"
    moment = _dt.datetime.fromtimestamp(expires_at, _dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    left = expires_at - time.time()
    return f"{moment} (expired)" if left <= 0 else f"{moment} (in {int(left // 60)} min)"


def _print_statuses(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    from mcp_actors.cli._terminal import TerminalConsole

    table = Table()
    for column in ("server", "logged in", "expires", "scopes", "client id"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["server"],
            ("yes, DPoP-bound" if row["dpopBound"] else "yes") if row["loggedIn"] else "no",
            _when(row["expiresAt"]),
            " ".join(row["scopes"]) or "-",
            row["clientId"] or "-",
        )
    TerminalConsole(highlight=False).print(table)


# --------------------------------------------------------------------------- status / logout


@auth_app.command("status")
def status_command(
    ctx: typer.Context,
    name: Annotated[
        str | None, typer.Argument(metavar="[NAME]", help="One server (default: every remote one).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show each remote server's login: logged in, expiry, scopes, client id (never the tokens)."""

    async def body() -> ExitCode:
        from mcp_actors._auth.token_store import FileTokenStore
        from mcp_actors._config.record import ServerType

        records = await _records(ctx)
        if name is not None:
            chosen = [_find(records, name)]
            _remote(chosen[0])
        else:
            chosen = [r for r in records if r.type is not ServerType.STDIO]
        store = FileTokenStore()
        rows = []
        for record in chosen:
            status = await store.status(record.id)
            if status.server_url not in (None, record.config.url):
                status = type(status)(server_id=record.id, logged_in=False)  # tokens of an old URL
            rows.append(_status_json(record, status))
        if as_json:
            print_json(rows)
        else:
            _print_statuses(rows)
        return ExitCode.OK

    _run(ctx, body, as_json=as_json)


@auth_app.command("logout")
def logout_command(ctx: typer.Context, name: ServerArg, as_json: JsonFlag = False) -> None:
    """Delete the server's tokens and client registration (the config is not touched)."""

    async def body() -> ExitCode:
        from mcp_actors._auth.token_store import FileTokenStore

        record = _find(await _records(ctx), name)
        _remote(record)
        removed = await FileTokenStore().forget(record.id)
        if as_json:
            print_json({"server": record.name, "serverId": record.id, "removed": removed})
        else:
            said = "logged out" if removed else "was not logged in"
            print(f"{record.name}: {said}", file=sys.stderr)
        return ExitCode.OK

    _run(ctx, body, as_json=as_json)


# --------------------------------------------------------------------------- login


async def _serve_callback(listener: trio.SocketListener, got: Callable[[str], None]) -> None:
    """Answer the browser's redirect to the loopback listener; hand its full URL to ``got``."""
    import trio

    port = listener.socket.getsockname()[1]
    while True:
        stream = await listener.accept()
        async with stream:
            data = b""
            with trio.move_on_after(10):
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    data += chunk
            line = data.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            target = parts[1] if len(parts) >= 2 else ""
            if parts[0] == "GET" and urllib.parse.urlsplit(target).path == _CALLBACK_PATH:
                with trio.move_on_after(5):
                    await stream.send_all(_PAGE)
                got(f"http://127.0.0.1:{port}{target}")
                return
            with trio.move_on_after(5):
                await stream.send_all(_NOT_FOUND)


def _open_browser(url: str) -> bool:
    if os.environ.get("MCP_ACTORS_NO_BROWSER") or (sys.platform.startswith("linux") and not _has_display()):
        return False
    try:
        return bool(webbrowser.open(url))
    except webbrowser.Error:
        return False


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("BROWSER"))


def _login_handler(
    listener: trio.SocketListener, *, browser: bool, timeout: float
) -> Callable[[str, str], Awaitable[str]]:
    """The CLI's authorization handler: browser or printed URL; loopback redirect or pasted URL."""

    async def handler(server_id: str, authorization_url: str) -> str:
        import trio

        result: list[str] = []
        done = trio.Event()

        def got(url: str) -> None:
            if not result:
                result.append(url)
            done.set()

        opened = browser and _open_browser(authorization_url)
        where = "Your browser was opened at" if opened else "Open this URL in a browser to log in"
        print(f"{where}:\n\n  {terminal_safe(authorization_url)}\n", file=sys.stderr, flush=True)
        print(
            "Waiting for the redirect… (or paste the URL the browser was redirected to, then Enter)",
            file=sys.stderr,
            flush=True,
        )

        async def read_pasted() -> None:
            while True:
                line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                if not line:
                    return  # no stdin (or it closed): only the loopback redirect counts
                if "code=" in line or "error=" in line:
                    got(line.strip())
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_callback, listener, got)
            nursery.start_soon(read_pasted)
            with trio.move_on_after(timeout):
                await done.wait()
            nursery.cancel_scope.cancel()
        if not result:
            raise CliError(f"no redirect within {timeout:g} s; run the login again", ExitCode.UNAVAILABLE)
        return result[0]

    return handler


@auth_app.command("login")
def login_command(
    ctx: typer.Context,
    name: ServerArg,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", min=0, max=65535, help="Loopback redirect port (default: redirectPort, else a free one)."
        ),
    ] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the URL; do not open a browser.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds to wait for the login.")
    ] = _LOGIN_TIMEOUT,
    as_json: JsonFlag = False,
) -> None:
    """Log in to an OAuth-protected server and store its tokens (0600, in the state directory)."""

    async def body() -> ExitCode:
        import trio

        from mcp_actors._auth.oauth import (
            AuthSettings,
            build_auth,
            oauth_target_for,
            open_authorized_session,
            redirect_uri,
        )
        from mcp_actors._auth.token_store import FileTokenStore
        from mcp_actors._config.record import ServerType

        record = _find(await _records(ctx), name)
        _remote(record)
        target = oauth_target_for(record)
        if target is None:
            raise CliError(
                f"server {record.name!r} sends its own Authorization header; remove it from config.headers"
                " or add config.oauth to use OAuth"
            )
        store = FileTokenStore()
        # A login means a new grant: drop the old tokens, keep the client registration.
        await store.update(record.id, target.url, lambda entry: entry.pop("tokens", None))
        wanted = port if port is not None else (target.config.redirect_port or 0)
        try:
            listener = (await trio.open_tcp_listeners(wanted, host="127.0.0.1"))[0]
        except OSError as exc:
            raise CliError(
                f"cannot listen for the login redirect on 127.0.0.1:{wanted} ({exc.strerror or exc});"
                " pick another port with --port (and config.oauth.redirectPort if the client is registered with it)"
            ) from None
        try:
            bound = listener.socket.getsockname()[1]
            handler = _login_handler(listener, browser=not no_browser, timeout=timeout)
            auth = build_auth(target, AuthSettings(token_store=store), handler=handler, redirect=redirect_uri(bound))
            kind = "sse" if record.type is ServerType.SSE else "http"
            async with open_authorized_session(target, auth, kind=kind, timeout=timeout):
                pass
        finally:
            await listener.aclose()
        status = _status_json(record, await store.status(record.id))
        if as_json:
            print_json(status)
        else:
            print(f"{record.name}: logged in (scopes: {' '.join(status['scopes']) or '-'})", file=sys.stderr)
        return ExitCode.OK

    _run(ctx, body, as_json=as_json)
