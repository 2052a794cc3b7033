"""``mcp-actors serve``: every enabled server as one MCP server (a gateway), over HTTP or stdio.

Kept apart from :mod:`mcp_actors.cli._app`, which registers the command::

    mcp-actors serve [--host 127.0.0.1] [--port N] [--path /mcp] [--separator __] [--naming tool] [--grace S]
                     [--api-keys] [--oauth-issuer URL [--oauth-audience URL] [--oauth-scope S]...]
                     [--metrics/--no-metrics] [--metrics-port N]
    mcp-actors serve --stdio [--profile NAME]
    mcp-actors serve keys add|list|rm ...     (cli/_serve_keys.py)
    mcp-actors serve --session-key-file key --redis-url redis://redis:6379/0   # one of N replicas

Over HTTP the endpoint's URL is the first line on stdout (a script reads it; ``--port 0``
picks a free port), and SIGINT or SIGTERM stop it gracefully: no new connections, event
streams ended, ``/readyz`` answering 503, requests in flight given ``--grace`` seconds; then every server is closed
and its process reaped (the runtime's kill ladder). A second signal stops at once. Over
stdio the protocol owns stdout: the command points file descriptor 1 at stderr, so nothing
but the protocol can reach the client, and the end of stdin stops it.

Inbound authentication (HTTP only) comes from the options, else from the config file's
``"gateway": {"auth": {...}}`` (:meth:`mcp_actors.serve.GatewayAuth.from_json`); options win.

Imports nothing of the SDK, trio or the gateway until the command runs.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from mcp_actors.cli._run import _Options, _run_async
from mcp_actors.cli._serve_keys import keys_app
from mcp_actors.cli._support import CliError, ExitCode

if TYPE_CHECKING:
    from mcp_actors.serve import GatewayAuth

__all__ = ["serve", "serve_app"]

serve_app = typer.Typer(
    help="Serve every enabled server as one MCP server (a gateway); 'serve keys' manages its API keys.",
    invoke_without_command=True,
)
serve_app.add_typer(keys_app, name="keys")

NAMINGS: Final = ("prefixed", "tool")
"""``--naming``: ``prefixed`` joins server and name with ``--separator``; ``tool`` keeps the item's own name."""


def _own_name(server: str, name: str) -> str:
    """``--naming tool``: a gateway in front of one server serves its tools under their own names."""
    return name


@serve_app.callback()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option("--host", help="The address to listen on. Loopback by default; elsewhere, turn on auth."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="The port (0: a free one).")] = 8000,
    path: Annotated[str, typer.Option("--path", help="The endpoint's path.")] = "/mcp",
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve one client on stdin/stdout instead of HTTP.")] = False,
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="With --stdio: serve this profile (over HTTP each is at <path>/<profile>)."),
    ] = None,
    separator: Annotated[
        str, typer.Option("--separator", help="What joins server and tool (or prompt) names: <server><sep><name>.")
    ] = "__",
    naming: Annotated[
        str,
        typer.Option(
            "--naming",
            help="prefixed: <server><sep><name> (the default); tool: each tool's and prompt's own name"
            " (for one server behind the gateway; a collision gets a short hash).",
        ),
    ] = "prefixed",
    grace: Annotated[
        float, typer.Option("--grace", min=0.0, help="Seconds requests in flight may finish after a stop signal.")
    ] = 10.0,
    config: Annotated[
        Path | None, typer.Option("--config", help="The config file (overrides the global --config).")
    ] = None,
    api_keys: Annotated[
        bool, typer.Option("--api-keys", help="Require an API key (serve keys add) or, with --oauth-issuer, a token.")
    ] = False,
    oauth_issuer: Annotated[
        str | None, typer.Option("--oauth-issuer", help="Require OAuth access tokens (JWT) of this issuer.")
    ] = None,
    oauth_audience: Annotated[
        str | None,
        typer.Option("--oauth-audience", help="The resource URL tokens are for (default: the gateway's URL)."),
    ] = None,
    oauth_scope: Annotated[
        list[str] | None, typer.Option("--oauth-scope", metavar="SCOPE", help="A scope tokens must have (repeat).")
    ] = None,
    oauth_jwks_uri: Annotated[
        str | None, typer.Option("--oauth-jwks-uri", help="The issuer's JWKS URL (default: from its metadata).")
    ] = None,
    session_key_file: Annotated[
        Path | None,
        typer.Option(
            "--session-key-file",
            dir_okay=False,
            help="Replicas: the key (one a line, 32+ bytes; the first signs) that signs session ids, shared by"
            " every replica so any continues any session. Else $MCP_ACTORS_SESSION_KEY; else a random key.",
        ),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            envvar="MCP_ACTORS_REDIS_URL",
            help="Replicas: the Redis they share (ended sessions, OAuth tokens), e.g. redis://host:6379/0.",
        ),
    ] = None,
    metrics: Annotated[
        bool | None,
        typer.Option(
            "--metrics/--no-metrics",
            help="Serve Prometheus metrics at /metrics (default: when prometheus-client is installed).",
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Serve /metrics, /healthz and /readyz on this port of --host instead of the endpoint's.",
        ),
    ] = None,
) -> None:
    """Serve every enabled server's tools, prompts and resources as one MCP server (a gateway).

    Tools and prompts are named <server>__<name>; resources keep their URIs. Over HTTP the
    endpoint's URL is printed first on stdout; Ctrl-C (or SIGTERM) stops gracefully.
    """
    if ctx.invoked_subcommand is not None:
        return  # serve keys ...: the subcommand runs

    async def body(opts: _Options) -> ExitCode:
        if config is not None:
            from mcp_actors._config.paths import STATE_DIR_ENV, state_dir

            opts = _Options(config=config, debug=opts.debug, no_input=opts.no_input)
            os.environ.setdefault(STATE_DIR_ENV, str(state_dir(config)))
        if not separator:
            raise CliError("--separator must not be empty")
        if not path.startswith("/"):
            raise CliError(f"--path must start with '/', got {path!r}")
        if profile is not None and not stdio:
            raise CliError(f"--profile is for --stdio; over HTTP every profile is served at {path}/<profile>")
        if naming not in NAMINGS:
            raise CliError(f"--naming must be one of {', '.join(NAMINGS)}, got {naming!r}")
        rule: str | Callable[[str, str], str] = separator if naming == "prefixed" else _own_name
        if stdio:
            if metrics or metrics_port is not None:
                raise CliError("--metrics and --metrics-port are for HTTP; --stdio serves no metrics")
            return await _serve_stdio(opts, rule, profile)
        if metrics:
            from mcp_actors.serve._metrics import MetricsUnavailable, metrics_available

            if not metrics_available():
                raise CliError(str(MetricsUnavailable()))
        oauth = {"issuer": oauth_issuer, "audience": oauth_audience, "scopes": oauth_scope, "jwksUri": oauth_jwks_uri}
        auth = _gateway_auth(opts, api_keys, oauth, redis_url)
        return await _serve_http(
            opts, host, port, path, rule, grace, auth, session_key_file, redis_url, metrics, metrics_port
        )

    _run_async(ctx, body)


def _gateway_auth(
    opts: _Options, api_keys: bool, oauth: dict[str, Any], redis_url: str | None = None
) -> GatewayAuth | None:
    """The gateway's inbound auth: from the options when any is given, else the config file's ``gateway.auth``.

    API keys are the Redis ones the replicas share when ``redis_url`` is given, else the key file's.
    """
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.serve import FileApiKeyTable, GatewayAuth
    from mcp_actors.serve._auth_keys import ApiKeyTable, default_key_path
    from mcp_actors.serve._store import RedisApiKeyTable

    table: ApiKeyTable = RedisApiKeyTable(redis_url) if redis_url else FileApiKeyTable(default_key_path(opts.config))
    given = {name: value for name, value in oauth.items() if value}
    if given and "issuer" not in given:
        raise CliError("--oauth-audience, --oauth-scope and --oauth-jwks-uri need --oauth-issuer")
    try:
        if api_keys or given:
            return GatewayAuth.from_json({"apiKeys": api_keys, "oauth": given or None}, api_keys=table)
        section, _ = ConfigStore(opts.config).load_section("gateway")  # a broken file raises: never served open
        auth = section.get("auth") if isinstance(section, dict) else None
        if auth is None:
            return None
        if not isinstance(auth, dict):
            raise ValueError("gateway.auth must be an object")
        return GatewayAuth.from_json(auth, api_keys=table)
    except ValueError as exc:
        raise CliError(f"inbound auth: {exc}") from None


async def _serve_http(
    opts: _Options,
    host: str,
    port: int,
    path: str,
    naming: str | Callable[[str, str], str],
    grace: float,
    auth: GatewayAuth | None,
    session_key_file: Path | None,
    redis_url: str | None,
    metrics: bool | None = None,
    metrics_port: int | None = None,
) -> ExitCode:
    import functools

    import trio

    from mcp_actors.errors import SharedStoreUnavailable
    from mcp_actors.runtime import open_runtime
    from mcp_actors.serve import SessionBook, SessionKeys, serve_http
    from mcp_actors.serve._store import RedisGatewayStore, open_gateway_store

    keys = SessionKeys.load(session_key_file)
    store: RedisGatewayStore | None = None
    if redis_url:
        try:
            store = await open_gateway_store(redis_url)
        except SharedStoreUnavailable as exc:
            raise CliError(str(exc), ExitCode.UNAVAILABLE) from None
    sessions = SessionBook(keys, store)
    token_store = store.token_store() if store is not None else None
    # No host callbacks: a gateway has no terminal to ask, so servers are offered no elicitation.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with (
            open_runtime(opts.config, connect_on_add=False, token_store=token_store) as runtime,
            trio.open_nursery() as nursery,
        ):
            start = functools.partial(
                serve_http,
                runtime.service,
                host=host,
                port=port,
                path=path,
                naming=naming,
                auth=auth,
                sessions=sessions,
                metrics=metrics,
                metrics_port=metrics_port,
            )
            try:
                gateway = await nursery.start(start)
            except OSError as exc:
                ports = f"{port} or {metrics_port}" if metrics_port is not None else str(port)
                raise CliError(
                    f"cannot listen on {host}:{ports}: {exc.strerror or exc}; pick another --port or --metrics-port"
                ) from None
            sys.stdout.write(gateway.url + "\n")
            sys.stdout.flush()
            active = sum(1 for record in await runtime.service.list() if record.is_active)
            noun = "server" if active == 1 else "servers"
            print(
                f"mcp-actors serve: {active} enabled {noun} at {gateway.url}; Ctrl-C stops", file=sys.stderr, flush=True
            )
            profiles = gateway.gateway.profiles.names() if gateway.gateway.profiles is not None else []
            if profiles:
                shown = ", ".join(f"{gateway.url}/{name}" for name in profiles)
                print(f"mcp-actors serve: profiles at {shown}", file=sys.stderr, flush=True)
            if gateway.metrics_url is not None:
                shown = f"at {gateway.metrics_url}"
            elif metrics is False:
                shown = "off"
            else:
                shown = "off: prometheus-client is not installed (pip install 'mcp-actors[gateway]')"
            print(f"mcp-actors serve: metrics {shown}", file=sys.stderr, flush=True)
            async for _ in signals:
                break
            print(f"mcp-actors serve: stopping (requests in flight get {grace:g}s)", file=sys.stderr, flush=True)
            async with trio.open_nursery() as stopping:

                async def at_second_signal() -> None:
                    async for _ in signals:
                        nursery.cancel_scope.cancel()  # at once: what still runs is cancelled
                        return

                stopping.start_soon(at_second_signal)
                await gateway.stop(grace)
                stopping.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
    # Leaving open_runtime closed every server and reaped its process.
    if store is not None:
        await store.aclose()
    return ExitCode.OK


async def _serve_stdio(opts: _Options, naming: str | Callable[[str, str], str], profile: str | None = None) -> ExitCode:
    import trio

    from mcp_actors.runtime import open_runtime
    from mcp_actors.serve import serve_stdio

    # The protocol owns stdout: keep a private copy of it, and point descriptor 1 (and
    # sys.stdout) at stderr, so a stray print or a library's output never reaches the client.
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdout = trio.lowlevel.FdStream(protocol_fd)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_runtime(opts.config, connect_on_add=False) as runtime, trio.open_nursery() as nursery:

            async def stop_on_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(stop_on_signal)
            await serve_stdio(runtime.service, stdout=stdout, naming=naming, profile=profile)
            nursery.cancel_scope.cancel()
    return ExitCode.OK
