"""The ``mcp-actors`` command: configure, inspect and call MCP servers from a shell.

Every command works against one config file: ``--config PATH``, else
``$MCP_ACTORS_CONFIG``, else ``<user data dir>/mcp-config.json``. A missing file is a fresh
install holding the built-in demo server, so every command works before any setup.

Two audiences, two outputs. People get tables, colours and a progress display while
servers connect (on stderr, only on a terminal). Scripts pass ``--json`` and get exactly
one JSON document on stdout and nothing else there; messages go to stderr.

Failures are one line on stderr saying what went wrong, which server, and what to do
(``--debug`` adds the traceback and library logs). Exit status:

===  ==========================================================================
0    success
1    the operation ran and failed: a tool returned an error, a call was declined
2    usage: bad options or input, unknown server or tool, invalid config
3    a server could not be reached, died, or did not answer in time
130  interrupted
===  ==========================================================================

Commands that need servers run the supervision tree of :func:`mcp_actors.runtime.open_runtime`
under ``trio.run`` for the length of the command; every server they start is stopped
before the command exits.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer

from mcp_actors._config.paths import CONFIG_ENV_VAR, STATE_DIR_ENV, state_dir
from mcp_actors.cli import _console
from mcp_actors.cli._auth import auth_app
from mcp_actors.cli._profiles import profile_app
from mcp_actors.cli._protocol import prompts_app, resources_app, tasks_app
from mcp_actors.cli._run import _execute, _Options, _run_async, _silence_stdout, _with_service
from mcp_actors.cli._serve import serve_app
from mcp_actors.cli._stress import stress_app
from mcp_actors.cli._support import (
    PROGRAM,
    CliError,
    ExitCode,
    add_columns,
    displays_paused,
    exit_code_for,
    failure_lines,
    forget_json_printed,
    list_tools_with_progress,
    live_display,
    parse_arguments_json,
    parse_timeout,
    print_json,
    record_json,
    record_target,
    report_failure,
    tool_json,
    unresolved_placeholders,
    without_test_advice,
    write_text,
)
from mcp_actors.errors import (
    ConnectionFailed,
    McpActorsError,
    ServerInactive,
    ServerNotFound,
    ServerRequestFailed,
    ToolNotFound,
)

if TYPE_CHECKING:
    from rich.text import Text

    from mcp_actors._config.record import McpServerRecord
    from mcp_actors._config.store import ConfigStore
    from mcp_actors.events import Event
    from mcp_actors.service import McpService
    from mcp_actors.tools import McpTool

# Imported at the top is what parsing the command line needs: typer, the other command
# groups' modules (which import no more) and the errors (plain classes). The SDK, trio, rich
# and the config records (attrs, cattrs) are imported in the bodies of the commands that
# use them, so ``--version``, ``--help`` and a usage error never load them
# (tests/cli/test_cli_start.py holds that).

__all__ = ["ExitCode", "ToolFormat", "app", "main"]

_T = TypeVar("_T")


class ToolFormat(enum.StrEnum):
    """The tool definition formats ``mcp-actors tools --format`` prints."""

    MCP = "mcp"
    """The MCP tools as the registry lists them (id, name, description, inputSchema, server)."""
    OPENAI = "openai"
    """OpenAI chat-completions ``tools``."""
    ANTHROPIC = "anthropic"
    """Anthropic messages ``tools``."""
    GEMINI = "gemini"
    """Gemini ``tools`` (one ``functionDeclarations`` group)."""


class _RemoteType(enum.StrEnum):
    """The choices of ``--type``: the remote values of :class:`~mcp_actors._config.record.ServerType`.

    Only a choice list for the command line (typer needs an enum of exactly the allowed
    values); everywhere else the transport kind is ``ServerType``. Spelled out rather than
    read from ``ServerType``, whose module imports attrs: a test holds the two equal.
    """

    SSE = "sse"
    HTTP = "http"


_HELP_OPTIONS: Final = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name=PROGRAM,
    context_settings=_HELP_OPTIONS,
    help="Supervise many MCP servers: configure them, list their tools in any LLM provider's format, call tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help (click's formatter), for the whole tree: typer's rich help imports rich's
    # markdown, traceback and syntax modules first, ~70 ms that would double --help's start.
    rich_markup_mode=None,
)
servers_app = typer.Typer(
    help="Add, import, show, update, list, remove, enable, disable and trust servers; enable or disable their tools.",
    no_args_is_help=True,
    context_settings=_HELP_OPTIONS,
)
app.add_typer(servers_app, name="servers")
app.add_typer(auth_app, name="auth")
app.add_typer(stress_app, name="stress")
app.add_typer(resources_app, name="resources")  # resources, prompts, tasks: cli/_protocol.py
app.add_typer(prompts_app, name="prompts")
app.add_typer(tasks_app, name="tasks")
app.add_typer(serve_app, name="serve")  # the gateway: cli/_serve.py, its keys: cli/_serve_keys.py
app.add_typer(profile_app, name="profile")  # the gateway's profiles: cli/_profiles.py

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (and nothing else there).")]
ServerArg = Annotated[str, typer.Argument(metavar="NAME", help="The server's name (or id).")]


# --------------------------------------------------------------------------- plumbing


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar=CONFIG_ENV_VAR,
            show_envvar=True,
            help="The config file. [default: <user data dir>/mcp-config.json]",
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="On failure show the traceback; show library logs.")] = False,
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Never prompt: decline every question a server asks (elicitation).")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit."),
    ] = False,
) -> None:
    ctx.obj = _Options(config=config, debug=debug, no_input=no_input)
    _configure_logging(debug)
    if config is not None:
        _check_config_option(ctx, config)
        # The process tracker's PID ledger (and OAuth tokens) live next to an explicit config.
        os.environ.setdefault(STATE_DIR_ENV, str(state_dir(config)))


def _print_version(value: bool) -> None:
    if value:
        from mcp_actors import __version__

        print(f"{PROGRAM} {__version__}")
        raise typer.Exit()


def _check_config_option(ctx: typer.Context, config: Path) -> None:
    """Refuse a config path that is a directory, naming where it came from (flag or variable)."""
    if not config.expanduser().is_dir():
        return
    source = ctx.get_parameter_source("config")  # typer's vendored click enum: matched by name
    from_env = source is not None and source.name == "ENVIRONMENT"
    given = f"{CONFIG_ENV_VAR}={config}" if from_env else f"--config {config}"
    print(
        f"{PROGRAM}: error: {given} is a directory; give the config file's path"
        f" (e.g. {config.expanduser() / 'mcp-config.json'})",
        file=sys.stderr,
    )
    raise typer.Exit(int(ExitCode.USAGE))


def _configure_logging(debug: bool) -> None:
    """Library logs stay off the terminal unless ``--debug``: failures are reported as one line.

    With ``--debug`` only our own loggers go to DEBUG; third-party loggers stay at WARNING,
    because some of them log request details at DEBUG.
    """
    root = logging.getLogger()
    if debug:
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.WARNING)
        for name in ("mcp_actors", "supervisors"):
            logging.getLogger(name).setLevel(logging.DEBUG)
    else:
        handler = logging.NullHandler()
    root.handlers[:] = [handler]


async def _add_without_runtime(opts: _Options, entry: Mapping[str, Any]) -> McpServerRecord:
    """Save a new record the way ``McpService.add`` does, without starting a runtime.

    The same rules apply: the record's own validation (:func:`~mcp_actors._registry.rules.to_record`),
    the rules for a new name, and the store's check of the whole record set under its lock.
    Editing the config needs no supervision tree, no reaper sidecar and no ledger sweep.
    """
    import trio

    from mcp_actors._config.store import ConfigStore
    from mcp_actors._registry.rules import check_new_name, to_record

    record = to_record(entry)

    def write(records: list[McpServerRecord]) -> McpServerRecord:
        check_new_name(records, record.name, record.id)
        records.append(record)
        return record

    return await trio.to_thread.run_sync(ConfigStore(opts.config).modify, write)


def _parse_pairs(values: Sequence[str] | None, option: str) -> dict[str, str]:
    """``KEY=VALUE`` options to a dict; the value is never echoed (it is often a secret)."""
    pairs: dict[str, str] = {}
    for i, item in enumerate(values or (), start=1):
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"{option} expects KEY=VALUE; occurrence {i} of {option} has no '='")
        if not key.strip():
            raise CliError(f"{option} expects KEY=VALUE; occurrence {i} of {option} has nothing before '='")
        pairs[key.strip()] = value
    return pairs


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


# --------------------------------------------------------------------------- servers


@servers_app.command("list")
def servers_list(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the configured servers (secrets such as env and header values are hidden)."""

    def body(opts: _Options) -> None:
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        from mcp_actors._config.store import ConfigStore

        store = ConfigStore(opts.config)
        records = store.load()
        if as_json:
            print_json({"config": str(store.path), "servers": [record_json(r) for r in records]})
            return
        table = Table(title=None, caption=f"config: {escape(str(store.path))}", caption_justify="left")
        add_columns(table, "NAME", "TYPE", "ACTIVE", "TRUSTED", "COMMAND / URL", "SOURCE")
        for r in records:
            table.add_row(
                Text(r.name, style="bold"),
                r.type.value,
                _yes_no(r.is_active),
                _yes_no(r.is_trusted),
                Text(record_target(r)),
                r.install_source.value,
            )
        _console.out().print(table)

    _execute(ctx, body, as_json=as_json)


def _server_entry(
    name: str,
    *,
    command: str | None,
    args: Sequence[str],
    env: Sequence[str],
    cwd: Path | None,
    url: str | None,
    kind: _RemoteType | None,
    headers: Sequence[str],
    connect_timeout: float | None,
    call_timeout: float | None,
    trust: bool,
    env_file: str | None = None,
) -> dict[str, Any]:
    """The config-file entry ``servers add`` asks the registry to add (validated there)."""
    if (command is None) == (url is None):
        raise CliError("give exactly one of --command (a local stdio server) or --url (a remote server)")
    config: dict[str, Any] = {}
    if command is not None:
        if headers or kind is not None:
            raise CliError("--header and --type are for remote servers (--url), not --command")
        server_type = "stdio"
        config.update(command=command, args=list(args), env=_parse_pairs(env, "--env"))
        if cwd is not None:
            config["cwd"] = str(cwd.expanduser().resolve())
        if env_file is not None:
            config["envFile"] = env_file
    else:
        assert url is not None
        if args or env or cwd is not None or env_file is not None:
            raise CliError("--arg, --env, --env-file and --cwd are for local servers (--command), not --url")
        if kind is None:
            kind = _RemoteType.SSE if url.split("?", 1)[0].rstrip("/").endswith("/sse") else _RemoteType.HTTP
        server_type = kind.value
        config.update(url=url, headers=_parse_pairs(headers, "--header"))
    if connect_timeout is not None:
        config["connectTimeout"] = connect_timeout
    if call_timeout is not None:
        config["callTimeout"] = call_timeout
    return {"name": name, "type": server_type, "config": config, "isTrusted": trust, "installSource": "manual"}


@servers_app.command("add")
def servers_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A unique name; it becomes part of the tool ids.")],
    command: Annotated[
        str | None, typer.Option("--command", help="Local server: the executable (npx, uvx, a path).")
    ] = None,
    arg: Annotated[
        list[str] | None, typer.Option("--arg", metavar="ARG", help="Local server: one argument (repeat for more).")
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", metavar="KEY=VALUE", help="Local server: an environment variable (repeatable)."),
    ] = None,
    cwd: Annotated[
        Path | None, typer.Option("--cwd", file_okay=False, help="Local server: its working directory.")
    ] = None,
    env_file: Annotated[
        str | None, typer.Option("--env-file", metavar="PATH", help="Local server: a dotenv file read at start.")
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="Remote server: its http(s) URL.")] = None,
    kind: Annotated[
        _RemoteType | None,
        typer.Option(
            "--type",
            case_sensitive=False,
            help="Remote server: sse, or http (streamable HTTP). [default: sse if the URL ends in /sse, else http]",
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", metavar="KEY=VALUE", help="Remote server: an HTTP header (repeatable)."),
    ] = None,
    connect_timeout: Annotated[
        float | None,
        typer.Option("--connect-timeout", metavar="SECONDS", help="Start + handshake bound. [default: 30]"),
    ] = None,
    call_timeout: Annotated[
        float | None,
        typer.Option("--call-timeout", metavar="SECONDS", help="Default bound of a tool call. [default: 120]"),
    ] = None,
    trust: Annotated[bool, typer.Option("--trust", help="Auto-approve its tool calls.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Add a local (stdio) server with --command, or a remote one with --url."""

    async def body(opts: _Options) -> None:
        from rich.text import Text

        if not name.strip():
            raise CliError(
                "NAME must not be empty: give the server a name such as 'github' (it becomes part of tool ids)"
            )
        entry = _server_entry(
            name,
            command=command,
            args=arg or (),
            env=env or (),
            cwd=cwd,
            url=url,
            kind=kind,
            headers=header or (),
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            trust=trust,
            env_file=env_file,
        )

        record = await _add_without_runtime(opts, entry)
        if as_json:
            print_json(record_json(record))
        else:
            _console.out().print(
                Text.assemble(
                    "Added server ",
                    (record.name, "bold"),
                    f" ({record.type.value}: {record_target(record)}). Check it with: {PROGRAM} test {record.name}",
                )
            )

    _run_async(ctx, body, as_json=as_json)


@servers_app.command("import")
def servers_import(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(metavar="FILE|-", help="A JSON file of servers, or - to read standard input.")
    ],
    workspace_folder: Annotated[
        Path | None,
        typer.Option(
            "--workspace-folder",
            file_okay=False,
            help="What ${workspaceFolder} means. [default: the folder holding .vscode/, else the file's folder]",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Import servers from the JSON of desktop apps and IDEs ("mcpServers", VS Code "servers", {name: config}).

    VS Code's ${workspaceFolder} is replaced from the file's location; its ${input:ID}
    values are asked for once on a terminal (password inputs without echo) and stored in
    the record (env and header values are kept secret). Anything left unresolved is
    reported per server. ${env:NAME} and ${NAME} stay as written: they are read from the
    environment each time the server starts.

    Good entries are saved even when others are rejected; the exit status is 2 if any was.
    """

    def read() -> str:
        if source == "-":
            return sys.stdin.read()
        from mcp_actors._config.files import read_config_file

        try:
            return read_config_file(
                Path(source),
                what="file to import",
                fix=f"give a regular JSON file, or pipe it in: mcp-actors servers import - < {source}",
            ).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CliError(f"cannot read {source!r}: {reason}") from exc

    async def body(opts: _Options, text: str) -> ExitCode:
        from rich.table import Table
        from rich.text import Text

        async def run(service: McpService) -> Any:
            from mcp_actors._config.record import InstallSource

            # Another host's file: who put each server there, and how, is not known here.
            return await service.add_json(text, install_source=InstallSource.UNKNOWN)

        from mcp_actors.naming import plural

        results = await _with_service(opts, run)
        rejected = [r for r in results if not r.ok]
        if as_json:
            print_json(
                [
                    {
                        "name": r.name,
                        "ok": r.ok,
                        "id": r.record.id if r.record is not None else None,
                        "error": str(r.error) if r.error is not None else None,
                        "unknownKeys": list(r.unknown_keys),
                        "notes": list(r.notes),
                    }
                    for r in results
                ]
            )
        else:
            table = Table()
            add_columns(table, "NAME", "RESULT", "DETAILS")
            for r in results:
                details = [str(r.error)] if r.error is not None else []
                details += list(r.notes)
                if r.unknown_keys:
                    details.append(f"ignored unknown keys: {', '.join(r.unknown_keys)}")
                table.add_row(
                    Text(r.name, style="bold"),
                    Text("added", style="green") if r.ok else Text("rejected", style="red"),
                    Text("\n".join(details)),
                )
            _console.out().print(table)
        if not results:
            raise CliError("the input holds no servers; nothing was imported")
        if rejected:
            print(
                f"{PROGRAM}: error: {len(rejected)} of {plural(len(results), 'server')}"
                f" {'was' if len(rejected) == 1 else 'were'} rejected "
                f"({', '.join(repr(r.name) for r in rejected)}); the others were saved; fix those entries and"
                " import them again",
                file=sys.stderr,
            )
            return ExitCode.USAGE
        return ExitCode.OK

    import trio

    def prepared() -> str:
        return _import_variables(read(), source, workspace_folder)

    _execute(ctx, lambda opts: trio.run(body, opts, prepared()), as_json=as_json)


_INPUT_RE: Final = re.compile(r"\$\{input:([^}]*)\}")


def _import_variables(text: str, source: str, workspace_folder: Path | None) -> str:
    """Replace the import-time placeholders of a document: ``${workspaceFolder}``, ``${input:ID}``.

    Inputs are asked for only when standard input and standard error are a terminal;
    otherwise they stay, and the import reports them per server as unresolved.
    """
    from mcp_actors._config.host_import import declared_inputs, substitute_import_variables

    values: dict[str, str] = {}
    folder = workspace_folder
    if folder is None and source != "-":
        parent = Path(source).expanduser().resolve().parent
        folder = parent.parent if parent.name == ".vscode" else parent
    if folder is not None:
        folder = folder.expanduser().resolve()
        values.update(workspaceFolder=str(folder), workspaceFolderBasename=folder.name)
    wanted = list(dict.fromkeys(_INPUT_RE.findall(text)))
    if wanted and sys.stdin.isatty() and sys.stderr.isatty():
        declared = {item.id: item for item in declared_inputs(text)}
        for input_id in wanted:
            spec = declared.get(input_id)
            question = spec.description if spec is not None else input_id
            default = spec.default if spec is not None else None
            hint = f" [{default}]" if default else ""
            answer = _ask(f"{question} (${{input:{input_id}}}){hint}: ", hidden=spec is not None and spec.password)
            answer = answer or (default or "")
            if answer:
                values[f"input:{input_id}"] = answer
    return substitute_import_variables(text, values)


def _ask(prompt: str, *, hidden: bool) -> str:
    """One answer typed on the terminal (prompt on stderr; without echo when ``hidden``)."""
    if not hidden:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        return sys.stdin.readline().rstrip("\r\n")
    import termios

    fd = sys.stdin.fileno()
    before = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~termios.ECHO
    try:
        # Echo goes off before the prompt shows: nothing typed after it is ever displayed.
        termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line = sys.stdin.readline()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, before)
        sys.stderr.write("\n")
        sys.stderr.flush()
    return line.rstrip("\r\n")


def _find_record(records: Sequence[McpServerRecord], server: str) -> int:
    """Index of the record with id ``server``, else with name ``server`` (the registry's own look-up)."""
    # Cheap here, under the config file's lock: the rules need only the records, which the store has loaded.
    from mcp_actors._registry.rules import find_server, server_not_found

    found = find_server(records, server)
    if found is None:
        raise server_not_found(server, records, hint=f"check the spelling with '{PROGRAM} servers list'")
    return next(i for i, record in enumerate(records) if record is found)


def _change_server(ctx: typer.Context, server: str, as_json: bool, action: str, **changes: Any) -> None:
    """The shared body of remove / enable / disable / trust / untrust.

    These edit one field of one record, so they go straight to the store (under its
    cross-process lock) instead of starting a runtime: no server runs in this process for
    the change to reach, and the command stays as quick as ``servers list``. Adding
    servers goes through the registry, which owns the validation and naming rules.
    """

    def body(opts: _Options) -> None:
        from rich.text import Text

        from mcp_actors._config.store import ConfigStore

        def edit(records: list[McpServerRecord]) -> McpServerRecord:
            i = _find_record(records, server)
            if action == "remove":
                return records.pop(i)
            current = records[i]
            if all(getattr(current, field) == value for field, value in changes.items()):
                return current  # already so: leave the file (and updatedAt) alone
            records[i] = current.updated(**changes)
            return records[i]

        record = ConfigStore(opts.config).modify(edit)
        if as_json:
            print_json(record_json(record))
            return
        messages = {
            "remove": "Removed server {}.",
            "enable": "Enabled server {}.",
            "disable": "Disabled server {}: it is kept but never connected.",
            "trust": "Server {} is trusted: its tool calls are auto-approved.",
            "untrust": "Server {} is no longer trusted: its tool calls need approval.",
        }
        before, _, after = messages[action].partition("{}")
        _console.out().print(Text.assemble(before, (repr(record.name), "bold"), after))

    _execute(ctx, body, as_json=as_json)


@servers_app.command("remove")
def servers_remove(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Remove a server from the config."""
    _change_server(ctx, server, as_json, "remove")


@servers_app.command("enable")
def servers_enable(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Enable a server (isActive: true): its tools are offered again."""
    _change_server(ctx, server, as_json, "enable", is_active=True)


@servers_app.command("disable")
def servers_disable(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Disable a server (isActive: false): kept in the config, never connected."""
    _change_server(ctx, server, as_json, "disable", is_active=False)


@servers_app.command("trust")
def servers_trust(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Trust a server: its tool calls are auto-approved (except disabledAutoApproveTools)."""
    _change_server(ctx, server, as_json, "trust", is_trusted=True)


@servers_app.command("untrust")
def servers_untrust(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Stop trusting a server: each of its tool calls needs approval."""
    _change_server(ctx, server, as_json, "untrust", is_trusted=False)


# --------------------------------------------------------------------------- show, update, tools of a server


def _stored_record(opts: _Options, server: str) -> tuple[ConfigStore, McpServerRecord]:
    from mcp_actors._config.store import ConfigStore

    store = ConfigStore(opts.config)
    records = store.load()
    return store, records[_find_record(records, server)]


@servers_app.command("show")
def servers_show(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Show one server's record: how it starts, its settings, and placeholders that have no value now.

    Secrets (env and header values) are shown as *** unless the value is only placeholders
    such as ${env:TOKEN}, which say where the value comes from.
    """

    def body(opts: _Options) -> None:
        from rich.table import Table
        from rich.text import Text

        _, record = _stored_record(opts, server)
        unresolved = unresolved_placeholders(record)
        if as_json:
            print_json({**record_json(record), "unresolved": [{"field": f, "placeholder": p} for f, p in unresolved]})
            return
        data = record_json(record)
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        table.add_row("name", Text(record.name))
        table.add_row("id", Text(record.id))
        table.add_row("type", record.type.value)
        for key, value in data["config"].items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            table.add_row(f"config.{key}", Text(shown))
        table.add_row("active", _yes_no(record.is_active))
        table.add_row("trusted", _yes_no(record.is_trusted))
        table.add_row("disabled tools", Text(", ".join(record.disabled_tools) or "-"))
        table.add_row("not auto-approved", Text(", ".join(record.disabled_auto_approve_tools) or "-"))
        table.add_row("source", record.install_source.value)
        _console.out().print(table)
        for field, placeholder in unresolved:
            _console.err().print(
                Text(f"warning: {placeholder} in {field} has no value now; the server will not start until it does"),
                style="yellow",
            )

    _execute(ctx, body, as_json=as_json)


def _config_changes(
    record: McpServerRecord,
    *,
    command: str | None,
    args: Sequence[str] | None,
    clear_args: bool,
    env: Sequence[str],
    unset_env: Sequence[str],
    env_file: str | None,
    cwd: Path | None,
    url: str | None,
    kind: _RemoteType | None,
    headers: Sequence[str],
    unset_headers: Sequence[str],
    connect_timeout: float | None,
    call_timeout: float | None,
    ping_interval: float | None,
) -> tuple[dict[str, Any], str | None]:
    """The record's config (camelCase) with the options applied, and its new type if it changes.

    A stdio server given --url becomes remote (and a remote one given --command local):
    the other transport's fields are dropped, as ``servers add`` would never set them.
    """
    from mcp_actors._config.codec import record_to_json_dict
    from mcp_actors._config.record import ServerType

    config: dict[str, Any] = dict(record_to_json_dict(record)["config"])
    new_type: str | None = None
    remote = record.type is not ServerType.STDIO
    if url is not None and not remote:
        config = {k: v for k, v in config.items() if k not in ("command", "args", "env", "cwd", "envFile")}
        remote = True
    if command is not None and remote:
        config = {k: v for k, v in config.items() if k not in ("url", "headers")}
        remote, new_type = False, ServerType.STDIO.value
    stdio_options = args is not None or clear_args or env or unset_env or env_file is not None or cwd is not None
    if remote and stdio_options:
        raise CliError("--arg, --env, --unset-env, --env-file and --cwd are for local servers (--command)")
    if not remote and (headers or unset_headers or kind is not None):
        raise CliError("--header, --unset-header and --type are for remote servers (--url)")
    if command is not None:
        config["command"] = command
    if clear_args:
        config["args"] = []
    if args is not None:
        config["args"] = list(args)
    for key, values in (
        ("env", (env, unset_env, "--env", "--unset-env")),
        ("headers", (headers, unset_headers, "--header", "--unset-header")),
    ):
        sets, unsets, set_flag, unset_flag = values
        if not sets and not unsets:
            continue
        current = dict(config.get(key, {}))
        for name in unsets:
            if name not in current:
                known = ", ".join(sorted(current)) or "none"
                raise CliError(f"{unset_flag} {name}: server {record.name!r} has no such {key} key (has: {known})")
            del current[name]
        current.update(_parse_pairs(sets, set_flag))
        config[key] = current
    if env_file is not None:
        config["envFile"] = env_file
    if cwd is not None:
        config["cwd"] = str(cwd.expanduser().resolve())
    if url is not None:
        config["url"] = url
    if remote and (url is not None or kind is not None):
        chosen = kind or (
            _RemoteType.SSE if (url or "").split("?", 1)[0].rstrip("/").endswith("/sse") else _RemoteType.HTTP
        )
        new_type = chosen.value if chosen.value != record.type.value else new_type
    for key, value in (
        ("connectTimeout", connect_timeout),
        ("callTimeout", call_timeout),
        ("pingInterval", ping_interval),
    ):
        if value is not None:
            config[key] = value
    return config, new_type


@servers_app.command("update")
def servers_update(
    ctx: typer.Context,
    server: ServerArg,
    command: Annotated[str | None, typer.Option("--command", help="Local server: the executable.")] = None,
    arg: Annotated[
        list[str] | None,
        typer.Option("--arg", metavar="ARG", help="Local server: the arguments, replacing all of them (repeat)."),
    ] = None,
    clear_args: Annotated[bool, typer.Option("--clear-args", help="Local server: remove every argument.")] = False,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", metavar="KEY=VALUE", help="Set an environment variable (repeatable; ${env:X} allowed)."),
    ] = None,
    unset_env: Annotated[
        list[str] | None, typer.Option("--unset-env", metavar="KEY", help="Remove an environment variable.")
    ] = None,
    env_file: Annotated[
        str | None, typer.Option("--env-file", metavar="PATH", help="Local server: a dotenv file read at start.")
    ] = None,
    cwd: Annotated[Path | None, typer.Option("--cwd", file_okay=False, help="Local server: its directory.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Remote server: its http(s) URL.")] = None,
    kind: Annotated[
        _RemoteType | None, typer.Option("--type", case_sensitive=False, help="Remote server: sse or http.")
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", metavar="KEY=VALUE", help="Set an HTTP header (repeatable).")
    ] = None,
    unset_header: Annotated[
        list[str] | None, typer.Option("--unset-header", metavar="KEY", help="Remove an HTTP header.")
    ] = None,
    rename: Annotated[str | None, typer.Option("--rename", metavar="NEW", help="A new unique name.")] = None,
    connect_timeout: Annotated[
        float | None, typer.Option("--connect-timeout", metavar="SECONDS", help="Start + handshake bound.")
    ] = None,
    call_timeout: Annotated[
        float | None, typer.Option("--call-timeout", metavar="SECONDS", help="Default bound of a tool call.")
    ] = None,
    ping_interval: Annotated[
        float | None, typer.Option("--ping-interval", metavar="SECONDS", help="Health pings; 0 turns them off.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Change a server's settings, validated as 'servers add' validates them; the id stays.

    Placeholders such as ${env:TOKEN} are kept as written and expanded when the server
    starts. A server running in another mcp-actors process picks the change up and
    reconnects.
    """

    async def body(opts: _Options) -> None:
        from rich.text import Text

        if rename is not None and not rename.strip():
            raise CliError("--rename needs a non-empty name")

        async def run(service: McpService) -> McpServerRecord:
            record = service.get(server)
            config, new_type = _config_changes(
                record,
                command=command,
                args=arg,
                clear_args=clear_args,
                env=env or (),
                unset_env=unset_env or (),
                env_file=env_file,
                cwd=cwd,
                url=url,
                kind=kind,
                headers=header or (),
                unset_headers=unset_header or (),
                connect_timeout=connect_timeout,
                call_timeout=call_timeout,
                ping_interval=ping_interval,
            )
            changes: dict[str, Any] = {}
            if config != _config_of(record):
                changes["config"] = config
            if new_type is not None:
                changes["type"] = new_type
            if rename is not None and rename != record.name:
                changes["name"] = rename
            if not changes:
                if _any_option_given():
                    return record
                raise CliError(
                    f"nothing to change; give an option such as --env KEY=VALUE (see '{PROGRAM} servers update --help')"
                )
            updated: McpServerRecord = await service.update(record.id, changes)
            return updated

        def _any_option_given() -> bool:
            return any(
                v not in (None, False, [], ())
                for v in (
                    command,
                    arg,
                    clear_args,
                    env,
                    unset_env,
                    env_file,
                    cwd,
                    url,
                    kind,
                    header,
                    unset_header,
                    rename,
                    connect_timeout,
                    call_timeout,
                    ping_interval,
                )
            )

        updated = await _with_service(opts, run)
        if as_json:
            print_json(record_json(updated))
        else:
            _console.out().print(
                Text.assemble(
                    "Updated server ", (updated.name, "bold"), f" ({updated.type.value}: {record_target(updated)})."
                )
            )
            for field, placeholder in unresolved_placeholders(updated):
                _console.err().print(Text(f"warning: {placeholder} in {field} has no value now", style="yellow"))

    _run_async(ctx, body, as_json=as_json)


def _config_of(record: McpServerRecord) -> dict[str, Any]:
    """The record's config in its camelCase file form (secrets included: compared, never printed)."""
    from mcp_actors._config.codec import record_to_json_dict

    config: dict[str, Any] = record_to_json_dict(record)["config"]
    return config


@servers_app.command("tools")
def servers_tools(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Connect to a server and list all of its tools: enabled or not, auto-approved or not, and their ids."""

    async def body(opts: _Options) -> ExitCode:
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        from mcp_actors.naming import plural
        from mcp_actors.naming import tool_id as make_tool_id

        async def run(service: McpService) -> tuple[McpServerRecord, Any]:
            record = service.get(server)
            with _status(f"Connecting {record.name}"):
                return record, await service.test(record.id)

        record, result = await _with_service(opts, run)
        if not result.ok:
            raise result.error
        names = list(result.tool_names) + [t for t in record.disabled_tools if t not in result.tool_names]
        rows = [
            {
                "name": name,
                "offered": name in result.tool_names,
                "enabled": name not in record.disabled_tools,
                "autoApprove": record.is_trusted and name not in record.disabled_auto_approve_tools,
                "id": make_tool_id(record.name, name),
            }
            for name in names
        ]
        if as_json:
            print_json({"server": record.name, "trusted": record.is_trusted, "tools": rows})
            return ExitCode.OK
        table = Table(caption=f"server {escape(record.name)}: {plural(len(rows), 'tool')}", caption_justify="left")
        add_columns(table, "TOOL", "ENABLED", "AUTO-APPROVE", "ID")
        for row in rows:
            enabled = _yes_no(bool(row["enabled"])) + ("" if row["offered"] else " (not offered)")
            table.add_row(
                Text(str(row["name"]), style="bold"), enabled, _yes_no(bool(row["autoApprove"])), Text(str(row["id"]))
            )
        _console.out().print(table)
        return ExitCode.OK

    _run_async(ctx, body, as_json=as_json)


def _change_tool(
    ctx: typer.Context, server: str, tool: str, as_json: bool, field: str, present: bool, message: str
) -> None:
    """Add ``tool`` to (or remove it from) one of a record's tool lists, under the store's lock.

    ``tool`` is resolved against the server's tools as ``call SERVER/TOOL`` resolves it
    (:func:`_tool_of_server`: either spelling; a name the server does not offer is refused),
    and the tool's real name is stored. When the server cannot be asked (disabled,
    unreachable), ``tool`` is stored as given and the output says it was not checked.
    """

    async def resolve(service: McpService) -> tuple[str, str, str | None]:
        record = service.get(server)
        try:
            return record.id, await _tool_of_server(service, record, tool), None
        except (ConnectionFailed, ServerInactive, ServerRequestFailed) as exc:
            return record.id, tool, _first_line(str(exc))

    async def body(opts: _Options) -> None:
        from rich.text import Text

        from mcp_actors._config.store import ConfigStore

        if not tool.strip():
            raise CliError(f"TOOL must not be empty; see the tool names with '{PROGRAM} servers tools {server}'")
        server_id, name, unchecked = await _with_service(opts, resolve)

        def edit(records: list[McpServerRecord]) -> McpServerRecord:
            i = _find_record(records, server_id)
            current = records[i]
            names: tuple[str, ...] = getattr(current, field)
            wanted = (*names, name) if present and name not in names else names
            if not present:
                wanted = tuple(n for n in names if n != name)
            if wanted == names:
                return current  # already so: the file (and updatedAt) stay as they are
            records[i] = current.updated(**{field: wanted})
            return records[i]

        import trio

        record = await trio.to_thread.run_sync(ConfigStore(opts.config).modify, edit)
        note = (
            f"(not checked against the server's tools: it could not be asked for them: {unchecked})"
            if unchecked is not None
            else None
        )
        if as_json:
            print_json(record_json(record))
            if note is not None:
                print(f"{PROGRAM}: note: tool {name!r} {note}", file=sys.stderr)
            return
        before, _, after = message.partition("{}")
        line = Text.assemble(before.format(tool=name), (repr(record.name), "bold"), after.format(tool=name))
        if note is not None:
            line.append(f" {note}", style="yellow")
        _console.out().print(line)

    _run_async(ctx, body, as_json=as_json)


ToolArg = Annotated[str, typer.Argument(metavar="TOOL", help="The tool's name (as 'servers tools NAME' lists it).")]


@servers_app.command("enable-tool")
def servers_enable_tool(ctx: typer.Context, server: ServerArg, tool: ToolArg, as_json: JsonFlag = False) -> None:
    """Enable one tool of a server (remove it from disabledTools): it is offered and callable again."""
    _change_tool(ctx, server, tool, as_json, "disabled_tools", False, "Tool {tool!r} of server {} is enabled.")


@servers_app.command("disable-tool")
def servers_disable_tool(ctx: typer.Context, server: ServerArg, tool: ToolArg, as_json: JsonFlag = False) -> None:
    """Disable one tool of a server (disabledTools): it is hidden from listings and refused on call."""
    _change_tool(ctx, server, tool, as_json, "disabled_tools", True, "Tool {tool!r} of server {} is disabled.")


class OnOff(enum.StrEnum):
    """A switch given as a word."""

    ON = "on"
    OFF = "off"


@servers_app.command("auto-approve")
def servers_auto_approve(
    ctx: typer.Context,
    server: ServerArg,
    tool: ToolArg,
    switch: Annotated[OnOff, typer.Argument(metavar="on|off", case_sensitive=False, help="on: auto-approve it.")],
    as_json: JsonFlag = False,
) -> None:
    """Turn auto-approval of one tool of a trusted server on or off (disabledAutoApproveTools)."""
    if switch is OnOff.ON:
        _change_tool(
            ctx,
            server,
            tool,
            as_json,
            "disabled_auto_approve_tools",
            False,
            "Tool {tool!r} of server {} is auto-approved when the server is trusted.",
        )
    else:
        _change_tool(
            ctx,
            server,
            tool,
            as_json,
            "disabled_auto_approve_tools",
            True,
            "Tool {tool!r} of server {} always asks for approval.",
        )


# --------------------------------------------------------------------------- test, discover


@app.command("test")
def test_server(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Connect to a server and list its tools: prints the tool names and the timing."""

    async def body(opts: _Options) -> ExitCode:
        from rich.text import Text

        async def run(service: McpService) -> tuple[McpServerRecord, Any]:
            record = service.get(server)
            with _status(f"Connecting {record.name}"):
                return record, await service.test(record.id)

        record, result = await _with_service(opts, run)
        if as_json:
            print_json(
                {
                    "server": record.name,
                    "ok": result.ok,
                    "connectSeconds": result.connect_seconds,
                    "listSeconds": result.list_seconds,
                    "tools": list(result.tool_names),
                    "serverInfo": (
                        {"name": result.server_info[0], "version": result.server_info[1]}
                        if result.server_info
                        else None
                    ),
                    "error": str(result.error) if result.error is not None else None,
                }
            )
        if not result.ok:
            assert result.error is not None
            # Connect failures advise running `test` on the server: said by `test`, that is a circle.
            return report_failure(
                result.error, debug=opts.debug, rewrite=lambda line: without_test_advice(line, record.name)
            )
        if not as_json:
            info = f" · {result.server_info[0]} {result.server_info[1]}" if result.server_info else ""
            _console.out().print(
                Text.assemble(
                    ("✓ ", "green"),
                    (record.name, "bold"),
                    f"  connected in {result.connect_seconds:.2f} s · tools/list in {result.list_seconds:.2f} s{info}",
                )
            )
            names = ", ".join(result.tool_names) or "(none)"
            from mcp_actors.naming import plural

            _console.out().print(Text(f"  {plural(len(result.tool_names), 'tool')}: {names}"))
        return ExitCode.OK

    _run_async(ctx, body, as_json=as_json, rewrite=lambda line: without_test_advice(line, server))


@app.command("discover")
def discover(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """Show everything a server offers: tools, prompts and resources."""

    async def body(opts: _Options) -> ExitCode:
        async def run(service: McpService) -> tuple[McpServerRecord, Any]:
            record = service.get(server)
            with _status(f"Connecting {record.name}"):
                return record, await service.discover(record.id)

        record, found = await _with_service(opts, run)
        if as_json:
            print_json(
                {
                    "server": record.name,
                    "tools": [tool_json(t) for t in found.tools],
                    "prompts": [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in found.prompts],
                    "resources": [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in found.resources],
                    "resourceTemplates": [
                        t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in found.resource_templates
                    ],
                    "errors": {part: str(exc) for part, exc in found.errors.items()},
                }
            )
        else:
            _print_discovery(found)
        tools_error = found.errors.get("tools")
        if tools_error is not None:
            return report_failure(tools_error, debug=opts.debug)
        return ExitCode.OK

    _run_async(ctx, body, as_json=as_json)


def _print_discovery(found: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    tools = Table(title=f"Tools ({len(found.tools)})", title_justify="left")
    add_columns(tools, "ID", "DESCRIPTION")
    for tool in found.tools:
        tools.add_row(Text(tool.id, style="bold"), Text(_first_line(tool.description)))
    prompts = Table(title=f"Prompts ({len(found.prompts)})", title_justify="left")
    add_columns(prompts, "NAME", "DESCRIPTION", "ARGUMENTS")
    for prompt in found.prompts:
        arguments = ", ".join(a.name + ("" if a.required else "?") for a in prompt.arguments or ())
        prompts.add_row(Text(prompt.name, style="bold"), Text(_first_line(prompt.description)), Text(arguments))
    resources = Table(title=f"Resources ({len(found.resources)})", title_justify="left")
    for column in ("URI", "NAME", "MIME TYPE"):
        resources.add_column(column, overflow="fold")
    for resource in found.resources:
        resources.add_row(Text(str(resource.uri), style="bold"), Text(resource.name), Text(resource.mime_type or ""))
    templates = Table(title=f"Resource templates ({len(found.resource_templates)})", title_justify="left")
    for column in ("URI TEMPLATE", "NAME", "MIME TYPE"):
        templates.add_column(column, overflow="fold")
    for template in found.resource_templates:
        templates.add_row(
            Text(template.uri_template, style="bold"), Text(template.name), Text(template.mime_type or "")
        )
    parts = (("tools", tools), ("prompts", prompts), ("resources", resources), ("resource_templates", templates))
    for part, table in parts:
        error = found.errors.get(part)
        if error is not None:
            _console.out().print(Text(f"{part.replace('_', ' ').capitalize()}: not available: {error}", style="yellow"))
        else:
            _console.out().print(table)


def _first_line(text: str | None, limit: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


@contextlib.contextmanager
def _status(message: str) -> Iterator[None]:
    """A spinner on stderr while one server connects (terminals only; paused while the terminal asks)."""
    err = _console.err()
    if not err.is_terminal:
        yield
        return
    from rich.markup import escape

    with err.status(escape(message)) as status, live_display(status):
        yield


# --------------------------------------------------------------------------- tools


@app.command("tools")
def tools(
    ctx: typer.Context,
    fmt: Annotated[
        ToolFormat | None,
        typer.Option(
            "--format",
            case_sensitive=False,
            help="Print the definitions as JSON in this format (as setup_mcp_tools gives them).",
        ),
    ] = None,
    server: Annotated[
        list[str] | None,
        typer.Option("--server", metavar="NAME", help="Only this server's tools (repeatable). [default: all active]"),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the tools of the active servers, as a table or as provider tool definitions.

    A server that fails is reported on stderr and the others still print; the exit
    status then says why (2 unknown or disabled server, 3 unreachable).
    """

    async def body(opts: _Options) -> ExitCode:
        async def run(service: McpService) -> ExitCode:
            from mcp_actors.formats import fetch_mcp_tools, setup_mcp_tools

            unknown: dict[str, McpActorsError] = {}
            if server:
                chosen_records: dict[str, McpServerRecord] = {}
                for name in server:
                    try:
                        record = service.get(name)
                    except ServerNotFound as exc:
                        unknown[name] = exc
                    else:
                        chosen_records.setdefault(record.id, record)
                records = list(chosen_records.values())
            else:
                records = [r for r in await service.list() if r.is_active]
            results, failures = await list_tools_with_progress(service, records, _console.err())
            failures = {**unknown, **failures}
            for line in failure_lines(failures):
                print(line, file=sys.stderr)
            ok_ids = [r.id for r in records if r.id in results]
            # Auto mode is what an agent gets; after a failure, manual mode over the servers that
            # answered gives the same definitions without asking the failed ones a second time.
            config: dict[str, Any] = (
                {"enabled": True, "mode": "auto"}
                if not failures and not server
                else {"enabled": True, "mode": "manual", "selectedServers": ok_ids}
            )
            chosen = fmt if fmt is not None else (ToolFormat.MCP if as_json else None)
            if chosen is None:
                _print_tools_table([t for r in records for t in results.get(r.id, ())], len(ok_ids))
            elif chosen is ToolFormat.MCP:
                print_json([tool_json(t) for t in (await fetch_mcp_tools(service, config) if ok_ids else [])])
            else:
                api_format = "google" if chosen is ToolFormat.GEMINI else chosen.value
                setup = await setup_mcp_tools(service, config, api_format=api_format) if ok_ids else None
                print_json(setup[0] if setup is not None else [])
            if failures:
                return max(exit_code_for(exc) for exc in failures.values())
            return ExitCode.OK

        return await _with_service(opts, run)

    _run_async(ctx, body, as_json=as_json or fmt is not None)


def _print_tools_table(found: Sequence[McpTool], server_count: int) -> None:
    from rich.table import Table
    from rich.text import Text

    from mcp_actors.naming import plural

    table = Table(caption=f"{plural(len(found), 'tool')} from {plural(server_count, 'server')}", caption_justify="left")
    add_columns(table, "ID", "SERVER", "DESCRIPTION")
    for tool in found:
        table.add_row(Text(tool.id, style="bold"), Text(tool.server_name), Text(_first_line(tool.description)))
    _console.out().print(table)


# --------------------------------------------------------------------------- call


def _read_arguments(option: str | None) -> str | None:
    """The ``--args`` text: inline JSON, ``@FILE``, or ``-`` for standard input.

    A file or stdin carries arguments of any size; on the command line the operating
    system limits one argument to ~128 KiB (E2BIG).
    """
    if option is None:
        return None
    if option == "-" or option == "@-":
        return sys.stdin.read()
    if option.startswith("@"):
        path = Path(option[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CliError(f"--args {option}: cannot read {str(path)!r}: {reason}") from None
    return option


def _parse_arguments(text: str | None) -> dict[str, Any]:
    return {} if text is None else parse_arguments_json(text)


async def _tool_of_server(service: McpService, record: McpServerRecord, name: str) -> str:
    """The real name of ``record``'s tool ``name``, in either spelling (``get_tiny_image``: ``get-tiny-image``).

    The one resolution of a tool of a known server: ``call SERVER/TOOL`` and the tool
    switches (``servers disable-tool`` ...). A disabled tool is found too (in
    ``disabledTools``). Connects the server to list its tools when the name is not one of
    its disabled tools.

    Raises:
        ToolNotFound: The server offers no such tool (with a "did you mean").
        ConnectionFailed, ServerInactive: The server could not be asked for its tools.
    """
    import difflib

    from mcp_actors.naming import clean_name

    if name in record.disabled_tools:
        return name  # call_tool says it is disabled, and how to enable it
    with _status(f"Connecting {record.name}"):
        offered = await service.list_server_tools(record.id)
    if any(t.name == name for t in offered):
        return name
    # The other spelling (get_tiny_image for get-tiny-image) names the same tool.
    same = [t.name for t in offered if clean_name(t.name) == clean_name(name)]
    same += [t for t in record.disabled_tools if clean_name(t) == clean_name(name)]
    if len(same) == 1:
        return same[0]
    known = sorted({t.name for t in offered} | set(record.disabled_tools))  # a disabled tool is still its tool
    hints = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(h) for h in hints)}? " if hints else ""
    names = ", ".join(known[:20]) or "none"
    raise ToolNotFound(f"server {record.name!r} has no tool {name!r}; {hint}its tools: {names}", server=record.name)


async def _resolve_tool(service: McpService, tool_id: str) -> tuple[McpServerRecord, str]:
    """Find ``(record, tool name)`` for ``mcp__server__tool`` or ``server/tool``.

    Ids are handed out by listings, so the servers whose name the id starts with are
    listed first; only when that does not find it are the other active servers asked.
    """
    from mcp_actors.naming import clean_name

    if "/" in tool_id:
        for i, char in enumerate(tool_id):
            if char != "/":
                continue
            try:
                record = service.get(tool_id[:i])
            except ServerNotFound:
                continue
            return record, await _tool_of_server(service, record, tool_id[i + 1 :])
        raise ServerNotFound(f"no server named like the part before '/' in {tool_id!r}; see '{PROGRAM} servers list'")
    if not tool_id.startswith("mcp__"):
        raise ToolNotFound(
            f"unknown tool {tool_id!r}: give a tool id from '{PROGRAM} tools' (mcp__<server>__<tool>) or SERVER/TOOL"
        )
    active = [r for r in await service.list() if r.is_active]
    try:
        # Resolves at once what the records decide: a disabled server or tool, by any spelling.
        return service.resolve_tool_id(tool_id)
    except ToolNotFound:
        pass
    # An id starts with its server's cleaned name (even a shortened one), so those servers
    # are enough to ask; all active servers only when no name fits.
    likely = [r for r in active if clean_name(tool_id).startswith(f"mcp__{clean_name(r.name)}__")]
    _, failures = await list_tools_with_progress(service, likely or active, _console.err())
    try:
        return service.resolve_tool_id(tool_id)
    except ToolNotFound:
        if likely and failures:
            raise next(iter(failures.values())) from None
        raise


async def _confirm(record: McpServerRecord, tool: str, arguments: dict[str, Any]) -> None:
    """Ask on the terminal before calling a tool that is not auto-approved."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise CliError(
            f"tool {tool!r} of server {record.name!r} is not auto-approved (the server is not trusted, or the tool"
            f" is in disabledAutoApproveTools); pass --yes, answer on a terminal, or run"
            f" '{PROGRAM} servers trust {record.name}'"
        )
    question = f"Call tool {tool!r} of server {record.name!r} with {json.dumps(arguments, ensure_ascii=False)}? [y/N] "

    def ask() -> bool:
        # On stderr and read by hand: stdout carries only the tool's result.
        sys.stderr.write(question)
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() in {"y", "yes"}

    import trio

    def ask_on_a_clean_screen() -> bool:
        with displays_paused():
            return ask()

    allowed = await trio.to_thread.run_sync(ask_on_a_clean_screen, abandon_on_cancel=True)
    if not allowed:
        raise CliError(f"declined: tool {tool!r} of server {record.name!r} was not called", ExitCode.FAILED)


@app.command("call")
def call(
    ctx: typer.Context,
    tool_id: Annotated[
        str, typer.Argument(metavar="TOOL_ID", help="mcp__<server>__<tool> (as listed by 'tools'), or SERVER/TOOL.")
    ],
    args: Annotated[
        str | None,
        typer.Option(
            "--args",
            metavar="JSON|@FILE|-",
            help='The arguments as a JSON object: \'{"text": "hi"}\', @FILE to read them from a file, - from stdin.',
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", metavar="SECONDS", help="Give up (and cancel it on the server) after this long."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before calling a tool that is not trusted.")] = (
        False
    ),
    as_json: JsonFlag = False,
) -> None:
    """Call a tool. Prints its content (--json: the whole MCP result).

    --json prints exactly one JSON document in every case: the MCP result, or on failure
    {"ok": false, "error": {"type", "message", "server", "tool", "exitCode"}}.
    Exit status: 0 success, 1 the tool returned an error, 2 usage, 3 connection or timeout.
    """

    async def body(opts: _Options) -> ExitCode:
        arguments = _parse_arguments(_read_arguments(args))
        parse_timeout(timeout)

        async def run(service: McpService) -> tuple[McpServerRecord, str, Any]:
            record, name = await _resolve_tool(service, tool_id)
            if not yes and not service.is_auto_approved(record.id, name):
                await _confirm(record, name, arguments)
            with _progress_bar(f"{record.name}/{name}", enabled=not as_json) as on_progress:
                result = await service.call_tool(record.id, name, arguments, timeout=timeout, on_progress=on_progress)
            return record, name, result

        record, name, result = await _with_service(opts, run)
        if as_json:
            print_json(result.model_dump(mode="json", by_alias=True, exclude_none=True))
        else:
            from mcp_actors.adapters import flatten_content

            text = flatten_content(result.content)
            if not text and result.structured_content is not None:
                text = json.dumps(result.structured_content, indent=2, ensure_ascii=False)
            if result.is_error:
                write_text(
                    f"{PROGRAM}: tool {name!r} of server {record.name!r} returned an error: {text}\n", stderr=True
                )
            else:
                write_text(text + ("\n" if text and not text.endswith("\n") else ""))
        return ExitCode.FAILED if result.is_error else ExitCode.OK

    _run_async(ctx, body, as_json=as_json)


@contextlib.contextmanager
def _progress_bar(label: str, *, enabled: bool) -> Any:
    """A progress bar on stderr fed by the call's progress notifications (terminals only).

    Yields the ``on_progress`` callback (``None`` when there is no terminal to draw on).
    """
    err = _console.err()
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

    with (
        Progress(
            TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), console=err, transient=True
        ) as bar,
        live_display(bar),
    ):
        task = bar.add_task(escape(label), total=None)

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            text = escape(f"{label}: {message}") if message else escape(label)
            bar.update(task, completed=progress, total=total, description=text)

        yield on_progress


# --------------------------------------------------------------------------- watch


def _event_line(event: Event) -> Text:
    from rich.text import Text

    data = event.data
    stamp = time.strftime("%H:%M:%S", time.localtime(event.timestamp)) + f".{int(event.timestamp * 1000) % 1000:03d}"
    match event.type:
        case "connection:state":
            detail = f"{data.get('previous')} → {data.get('state')}"
            if data.get("error"):
                detail += f": {data['error']}"
            if data.get("circuitOpen"):
                detail += " (circuit open: run a command that reconnects, or fix the server)"
            style = {"connected": "green", "error": "red", "connecting": "yellow"}.get(str(data.get("state")), "")
        case "server:connected":
            detail, style = "connected", "green"
        case "tool:called":
            ok = data.get("success")
            detail = f"{data.get('toolName')} {'ok' if ok else 'failed'} in {float(data.get('duration', 0.0)):.3f} s"
            style = "" if ok else "red"
        case "tools:changed":
            detail, style = "the tool list changed", "cyan"
        case "servers:changed":
            detail, style = f"server {data.get('action')}", "cyan"
        case _:
            detail, style = json.dumps(dict(data), ensure_ascii=False, default=str), ""
    return Text.assemble(
        (stamp, "dim"), "  ", (f"{event.type:<17}", style), " ", (str(data.get("serverName", "")), "bold"), "  ", detail
    )


@app.command("watch")
def watch(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Connect every active server and stream events as they happen, until Ctrl-C.

    --json prints one JSON object per line (JSON Lines), one per event.
    """

    async def body(opts: _Options) -> None:
        import trio
        from rich.text import Text

        from mcp_actors.cli._callbacks import cli_callbacks
        from mcp_actors.runtime import open_runtime

        # Installed before anything is printed: once output appears, Ctrl-C is a clean stop.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with open_runtime(
                opts.config, connect_on_add=False, **cli_callbacks(no_input=opts.no_input)
            ) as runtime:
                service = runtime.service
                with service.subscribe() as events:
                    async with trio.open_nursery() as nursery:

                        async def stop_on_signal() -> None:
                            async for _ in signals:
                                nursery.cancel_scope.cancel()
                                return

                        nursery.start_soon(stop_on_signal)
                        records = [r for r in await service.list() if r.is_active]
                        if not as_json:
                            from mcp_actors.naming import plural

                            watching = f"Watching {plural(len(records), 'active server')}; press Ctrl-C to stop."
                            _console.err().print(Text(watching, style="dim"))
                        for record in records:
                            nursery.start_soon(_connect_quietly, service, record.id)
                        async for event in events:
                            if event.type == "servers:changed" and event.data.get("action") in ("added", "updated"):
                                # Added, enabled or changed here or by another process (its slot
                                # restarted): watch connects every active server, so this one too.
                                # Connecting a connected server is a no-op; a disabled one is refused.
                                nursery.start_soon(_connect_quietly, service, str(event.data["serverId"]))
                            if as_json:
                                sys.stdout.write(json.dumps(event.to_json(), ensure_ascii=False, default=str) + "\n")
                                sys.stdout.flush()
                            else:
                                _console.out().print(_event_line(event), soft_wrap=True)

    _run_async(ctx, body)


async def _connect_quietly(service: McpService, server_id: str) -> None:
    # A failure shows up as a connection:state event; watch keeps watching the others. A
    # server disabled or removed meanwhile is refused here (ServerInactive, ServerNotFound).
    try:
        await service.connect(server_id)
    except McpActorsError:
        pass


# --------------------------------------------------------------------------- demo


@app.command("demo")
def demo(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show what mcp-actors does, in a few seconds, with the built-in demo server.

    Runs against a throw-away config holding only the demo server: your config is
    never read or written (--config does not apply). Starts the server under the
    supervisor, shows its tools in the OpenAI, Anthropic and Gemini formats, calls tools
    (one fails, one times out), kills the server mid-call to show the call failing fast
    and the automatic reconnect, and prints a summary.
    """

    async def body(opts: _Options) -> ExitCode:
        from mcp_actors.cli._demo import run_demo

        return await run_demo(_console.out(), as_json=as_json)

    _run_async(ctx, body)


# --------------------------------------------------------------------------- entry point


def _usage_message(message: str, exc: Exception) -> str:
    """Typer's usage error, tidied: no pydantic-style "Value error, ", no env var the flag did not use.

    ``Invalid value for '--format': Value error, 'xml' is not one of ...`` becomes
    ``invalid value for --format: 'xml' is not one of ...``; the "(env var: ...)" part is
    kept only when the value came from that variable.
    """
    ctx = getattr(exc, "ctx", None)
    param = getattr(exc, "param", None)
    source = ctx.get_parameter_source(param.name) if ctx is not None and param is not None and param.name else None
    if source is None or source.name != "ENVIRONMENT":
        message = re.sub(r" \(env var: '[^']*'\)", "", message)
    message = message.replace("Value error, ", "")
    return re.sub(r"^Invalid value for '([^']+)'", r"invalid value for \1", message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mcp-actors`` command and return its exit status.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status (see the module docstring).
    """
    command = typer.main.get_command(app)
    forget_json_printed()
    try:
        result = command.main(args=list(argv) if argv is not None else None, prog_name=PROGRAM, standalone_mode=False)
    except typer.Abort:
        print(f"{PROGRAM}: aborted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except typer.TyperException as exc:
        # Typer's own (vendored click) usage errors; matched by name to stay off its private modules.
        if type(exc).__name__ == "NoArgsIsHelpError":
            # A group run bare: its help is the error's message, printed as --help prints it.
            try:
                print(exc.format_message(), flush=True)
            except BrokenPipeError:
                _silence_stdout()
                return ExitCode.FAILED
            return ExitCode.USAGE
        ctx = getattr(exc, "ctx", None)
        hint = f"; see '{ctx.command_path} --help'" if ctx is not None else ""
        message = _usage_message(exc.format_message().rstrip("."), exc) + hint
        print(f"{PROGRAM}: error: {message}", file=sys.stderr)
        code = int(getattr(exc, "exit_code", ExitCode.USAGE))
        if "--json" in (argv if argv is not None else sys.argv[1:]):
            print_json(
                {
                    "ok": False,
                    "error": {"type": "UsageError", "message": message, "server": None, "tool": None, "exitCode": code},
                }
            )
        return code
    except BrokenPipeError:
        _silence_stdout()
        return ExitCode.FAILED
    return int(result) if isinstance(result, int) else ExitCode.OK
