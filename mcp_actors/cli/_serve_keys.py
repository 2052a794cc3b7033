"""``mcp-actors serve keys``: the gateway's API keys (add, list, remove).

::

    mcp-actors serve keys add NAME [--profile P] [--expires 30d|2027-01-31T00:00]
    mcp-actors serve keys list [--json]
    mcp-actors serve keys rm NAME

``add`` prints the new key once, alone on stdout (a script reads it); only its digest is
stored, in ``gateway-keys.json`` in the state directory, so a lost key is replaced, never
recovered. ``list`` shows names, profiles and times, never a key. A running gateway sees the
change within a second. Keys are used by ``mcp-actors serve --api-keys`` (or
``"gateway": {"auth": {"apiKeys": true}}`` in the config file). With ``MCP_ACTORS_REDIS_URL``
set, the keys are those of that Redis, which replicas of a gateway share (``serve --redis-url``).
"""

from __future__ import annotations

import datetime
import re
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mcp_actors.cli._run import _Options, _run_async
from mcp_actors.cli._support import CliError, ExitCode, print_json

if TYPE_CHECKING:
    from mcp_actors.serve._auth_keys import ApiKeyTable

__all__ = ["keys_app", "parse_expiry"]

keys_app = typer.Typer(
    help="Add, list and remove the gateway's API keys (stored hashed; a key is shown once).", no_args_is_help=True
)
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_expiry(text: str, now: float) -> float:
    """Unix time of ``--expires``: a duration from ``now`` (``90m``, ``12h``, ``30d``, ``2w``) or an ISO 8601 time.

    A time without a zone is UTC.

    Raises:
        CliError: Neither form, or a time already past.
    """
    match = _DURATION.match(text.strip())
    if match is not None:
        return now + int(match.group(1)) * _UNIT[match.group(2)]
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise CliError(
            f"--expires takes a duration (90m, 12h, 30d, 2w) or an ISO 8601 time (2027-01-31T00:00Z), got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    if moment.timestamp() <= now:
        raise CliError(f"--expires {text} is in the past")
    return moment.timestamp()


def _table(opts: _Options) -> ApiKeyTable:
    """The file table, or the Redis one the replicas share when ``MCP_ACTORS_REDIS_URL`` names it."""
    import os

    from mcp_actors.serve._auth_keys import FileApiKeyTable, default_key_path
    from mcp_actors.serve._store import REDIS_URL_ENV, RedisApiKeyTable

    url = os.environ.get(REDIS_URL_ENV)
    if url:
        return RedisApiKeyTable(url)
    return FileApiKeyTable(default_key_path(opts.config))


def _when(moment: float | None) -> str:
    if moment is None:
        return "never"
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


@keys_app.command("add")
def keys_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Who or what holds the key (unique).")],
    profile: Annotated[
        str | None, typer.Option("--profile", help="The one profile it opens (default: the whole gateway).")
    ] = None,
    expires: Annotated[
        str | None, typer.Option("--expires", help="When it stops working: 90m, 12h, 30d, 2w, or an ISO 8601 time.")
    ] = None,
) -> None:
    """Make a new API key and print it once (only its digest is stored)."""

    async def body(opts: _Options) -> ExitCode:
        import time

        from mcp_actors.serve._auth_keys import create_api_key

        expires_at = parse_expiry(expires, time.time()) if expires is not None else None
        table = _table(opts)
        try:
            key, entry = await create_api_key(table, name, profile=profile, expires_at=expires_at)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        sys.stdout.write(key + "\n")
        sys.stdout.flush()
        opens = f"profile {entry.profile!r}" if entry.profile is not None else "the whole gateway"
        print(
            f"mcp-actors: API key {entry.name!r} opens {opens}, expires {_when(entry.expires_at)};"
            " it is shown only now: keep it (send it as 'Authorization: Bearer <key>')",
            file=sys.stderr,
        )
        return ExitCode.OK

    _run_async(ctx, body)


@keys_app.command("list")
def keys_list(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """List the API keys: names, profiles, creation and expiry (never a key)."""

    async def body(opts: _Options) -> ExitCode:
        keys = await _table(opts).list()
        if as_json:
            shown = [
                {"name": k.name, "profile": k.profile, "createdAt": k.created_at, "expiresAt": k.expires_at}
                for k in keys
            ]
            print_json({"keys": shown})
            return ExitCode.OK
        if not keys:
            print("no API keys (mcp-actors serve keys add NAME makes one)")
        for key in keys:
            opens = key.profile if key.profile is not None else "*"
            print(f"{key.name}\tprofile={opens}\tcreated={_when(key.created_at)}\texpires={_when(key.expires_at)}")
        return ExitCode.OK

    _run_async(ctx, body, as_json=as_json)


@keys_app.command("rm")
def keys_rm(ctx: typer.Context, name: Annotated[str, typer.Argument(metavar="NAME", help="The key's name.")]) -> None:
    """Remove an API key: it stops working at once (a running gateway sees it within a second)."""

    async def body(opts: _Options) -> ExitCode:
        if not await _table(opts).remove(name):
            raise CliError(f"no API key named {name!r} (mcp-actors serve keys list shows them)")
        print(f"removed API key {name!r}", file=sys.stderr)
        return ExitCode.OK

    _run_async(ctx, body)
