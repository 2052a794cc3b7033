"""Plumbing shared by the ``mcp-actors`` commands: exit codes, error lines, output, progress.

Imported before the command line is parsed, so it imports nothing heavy at its top: not
the MCP SDK (a second or more), not rich, not the config records (attrs, cattrs). Each
function imports what it needs when it runs; ``--version``, ``--help`` and a usage error
never do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import math
import re
import shlex
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from mcp_actors.errors import (
    ActorStopped,
    ConfigError,
    ConfigStoreError,
    ConnectionFailed,
    InvalidCallInput,
    LookupFailed,
    McpActorsError,
    ServerInactive,
    ServerRequestFailed,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallTimeout,
    ToolDisabled,
    UnresolvedPlaceholder,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from mcp_actors._config.record import McpServerRecord
    from mcp_actors.service import McpService
    from mcp_actors.tools import McpTool

__all__ = [
    "CliError",
    "add_columns",
    "displays_paused",
    "live_display",
    "ExitCode",
    "PROGRAM",
    "error_json",
    "error_line",
    "exit_code_for",
    "failure_lines",
    "forget_json_printed",
    "json_printed",
    "list_tools_with_progress",
    "parse_arguments_json",
    "parse_timeout",
    "print_json",
    "record_json",
    "record_target",
    "report_failure",
    "root_cause",
    "TERMINAL_UNSAFE",
    "terminal_safe",
    "tool_json",
    "unresolved_placeholders",
    "without_test_advice",
    "write_text",
]

PROGRAM = "mcp-actors"
_REDACTED = "***"
_PROGRESS_REFRESH = 0.1


class ExitCode(enum.IntEnum):
    """The exit status of every ``mcp-actors`` command.

    Scripts branch on these, so they are part of the interface: a new failure kind gets
    one of these codes, never a new one.
    """

    OK = 0
    """Success."""
    FAILED = 1
    """The operation ran and failed: a tool returned an error (``call``), a call was declined."""
    USAGE = 2
    """Wrong arguments or input: bad options, unknown server or tool, invalid config."""
    UNAVAILABLE = 3
    """A server could not be reached, died, or did not answer in time."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C) before finishing."""


class CliError(Exception):
    """A failure the command itself detects (bad ``--args`` JSON, an unreadable file, ...).

    Args:
        message: One line: what went wrong and what to do.
        code: The exit status it maps to.
    """

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class _NotJson:
    """A number Python's json reads but JSON has not: ``NaN``, ``Infinity``, or one too large for a double."""

    token: str


def _not_json_constant(token: str) -> _NotJson:
    return _NotJson(token)


def _finite_float(token: str) -> float | _NotJson:
    value = float(token)
    return value if math.isfinite(value) else _NotJson(token)


def _first_not_json(value: Any, path: str) -> tuple[str, str] | None:
    """``(path, token)`` of the first number JSON cannot carry in ``value``, else ``None``."""
    if isinstance(value, _NotJson):
        return path, value.token
    if isinstance(value, dict):
        items: Iterable[tuple[str, Any]] = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for inner_path, inner in items:
        found = _first_not_json(inner, inner_path)
        if found is not None:
            return found
    return None


def parse_arguments_json(text: str, option: str = "--args") -> dict[str, Any]:
    """A tool's arguments given on the command line (``--args``): a JSON object of JSON values.

    The one home of the rule for every option that takes a tool's arguments as JSON (inline,
    ``@FILE`` or ``-``): not JSON, not an object, or a number JSON has not (``NaN``,
    ``Infinity``, ``-Infinity``, or one too large for a double such as ``1e400``, which
    Python's json would read as a float and a server would get as ``null``) is a
    :class:`CliError` (exit 2) naming the option and the field's path in the arguments.
    """
    try:
        value = json.loads(text, parse_constant=_not_json_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{option} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); pass an object like"
            ' \'{"text": "hi"}\''
        ) from None
    except (ValueError, RecursionError) as exc:
        # Valid syntax the decoder still refuses: an integer of more than 4300 digits, or deep nesting.
        problem = "nests too deeply" if isinstance(exc, RecursionError) else "holds an integer too long to read"
        raise CliError(f"{option} {problem}; pass a smaller JSON object") from None
    found = _first_not_json(value, "arguments")
    if found is not None:
        path, token = found
        raise CliError(
            f"{option}: {path} is {token}, not a finite JSON number (NaN, Infinity and numbers too large for a"
            " double are not JSON; a server would get null); give a finite number, or the value as a string"
        )
    if not isinstance(value, dict):
        raise CliError(f"{option} must be a JSON object (the tool's named arguments), got {type(value).__name__}")
    return value


TERMINAL_UNSAFE: Final = re.compile(r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""What :func:`terminal_safe` replaces: a CRLF line end, and every control character but newline and tab."""


def _visible(match: re.Match[str]) -> str:
    found = match.group()
    return "\n" if found == "\r\n" else f"\\x{ord(found):02x}"


def terminal_safe(text: str) -> str:
    """``text`` as it may reach a terminal: every control character made visible, ``ESC`` as ``\\x1b``.

    The one rule for everything a server sends that the CLI shows a person (tool results
    and descriptions, server info, resource and prompt texts, error messages with a
    server's stderr, event and log lines): a terminal obeys control characters, so a
    server could move the cursor, rewrite lines already printed, set the window title
    (``ESC]0;...BEL``), or hide text. Each C0 control but newline and tab, ``DEL`` and each
    C1 control (``\\x80``-``\\x9f``, e.g. ``\\x9b``, a one-byte CSI) becomes its visible
    escape ``\\xNN``; a CRLF line end becomes a newline. ``--json`` documents and
    ``--output`` files are never passed through it: they keep the exact text.

    Applied where the CLI prints: by its rich consoles (:class:`~mcp_actors.cli._terminal.TerminalConsole`)
    to every text they render, and by :func:`write_text` and the error lines to plain text.
    """
    return TERMINAL_UNSAFE.sub(_visible, text)


def write_text(text: str, *, stderr: bool = False) -> None:
    """Write ``text`` for a person (a tool's result, a resource's text) through :func:`terminal_safe`."""
    stream = sys.stderr if stderr else sys.stdout
    stream.write(terminal_safe(text))
    stream.flush()


_live: list[Any] = []
_live_lock = threading.Lock()


@contextlib.contextmanager
def live_display(display: Any) -> Iterator[Any]:
    """While the block runs, ``display`` (a started rich ``Progress``, ``Status`` or ``Live``) is on the terminal.

    Registered so that :func:`displays_paused` can take it off the screen while the
    terminal asks the user something. Yields ``display``.
    """
    with _live_lock:
        _live.append(display)
    try:
        yield display
    finally:
        with _live_lock:
            _live[:] = [d for d in _live if d is not display]


@contextlib.contextmanager
def displays_paused() -> Iterator[None]:
    """Stop every live display (:func:`live_display`) for the block; start again those still shown after it.

    Wraps every question asked on the terminal (an elicitation's question and field
    prompts, the approval of a call): a progress bar redraws its line several times a
    second, which would erase a prompt (a line without its end) and the answer being
    typed. A transient display clears its lines when stopped, so the question starts on
    a clean line; after the answer it is drawn again below. May run in a worker thread.
    """
    with _live_lock:
        paused = list(_live)
    for display in reversed(paused):
        display.stop()
    try:
        yield
    finally:
        with _live_lock:
            shown = [d for d in paused if any(d is live for live in _live)]
        for display in shown:
            display.start()


WHOLE: Final = frozenset(
    {"NAME", "ID", "TOOL", "SERVER", "TYPE", "ACTIVE", "TRUSTED", "SOURCE", "RESULT", "AUTO-APPROVE", "TASK", "STATUS"}
)
"""The columns of names, ids and short words: kept whole on one line at any terminal width."""


def add_columns(table: Any, *names: str) -> None:
    """Add the columns ``names`` to a rich ``table``: names and ids whole, long text wrapped between words.

    A column in :data:`WHOLE` never wraps (a table narrower than the terminal shrinks the
    text columns instead; a name wider than the whole terminal ends in an ellipsis rather
    than being folded mid-word); any other column wraps at spaces, and folds only a word
    longer than the column.
    """
    for name in names:
        if name in WHOLE:
            table.add_column(name, no_wrap=True, overflow="ellipsis")
        else:
            table.add_column(name, overflow="fold")


def parse_timeout(value: float | None, option: str = "--timeout") -> float | None:
    """A timeout option: ``None`` (the default), else a positive finite number of seconds (as the config wants)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise CliError(f"{option} must be a finite number of seconds > 0, got {value:g}")
    return value


def root_cause(exc: BaseException) -> BaseException:
    """The one exception worth reporting inside (possibly nested) exception groups.

    Nurseries and supervisors wrap what went wrong; a person wants the leaf. A Ctrl-C
    wins over everything, then our own typed errors, then anything else.
    """
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves = list(_leaves(exc))
    for wanted in (KeyboardInterrupt, CliError, McpActorsError):
        for leaf in leaves:
            if isinstance(leaf, wanted):
                return leaf
    return leaves[0] if leaves else exc


def _leaves(exc: BaseException) -> Iterable[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


_USAGE_CODES: Final = frozenset({-32602, -32002})
"""JSON-RPC error codes that mean the request itself was wrong: invalid params, resource not found."""


def exit_code_for(exc: BaseException) -> ExitCode:
    """Map an exception (a leaf, see :func:`root_cause`) to the exit status it means.

    The mapping follows what a person does next: fix the command (``USAGE``), fix or
    wait for the server (``UNAVAILABLE``), or look at what the tool said (``FAILED``).
    """
    match exc:
        case KeyboardInterrupt():
            return ExitCode.INTERRUPTED
        case CliError():
            return exc.code
        # Order matters: the specific classes come before their bases.
        case ToolCallTimeout():
            return ExitCode.UNAVAILABLE
        case ToolDisabled() | InvalidCallInput():
            return ExitCode.USAGE
        case ToolCallDenied() | ToolCallFailed():
            return ExitCode.FAILED
        case ServerInactive():
            return ExitCode.USAGE
        case ServerRequestFailed():
            # The server answered; only bad input (invalid params, an unknown resource) is the caller's to fix.
            return ExitCode.USAGE if exc.code in _USAGE_CODES else ExitCode.FAILED
        case ConnectionFailed() | ActorStopped() | ConfigStoreError():
            return ExitCode.UNAVAILABLE
        case ConfigError() | LookupFailed():
            return ExitCode.USAGE
        case _:
            return ExitCode.FAILED


def error_line(exc: BaseException) -> str:
    """The one line printed on stderr for a failure (never a traceback, never a secret).

    Our typed errors already say what went wrong, which server and what to do; anything
    else is a bug of ours and says how to get the details.
    """
    if isinstance(exc, KeyboardInterrupt):
        return f"{PROGRAM}: interrupted"
    if isinstance(exc, CliError | McpActorsError):
        message = str(exc)
    else:
        message = f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback, and please report it)"
    return f"{PROGRAM}: error: {' '.join(message.split())}"


_SELF_ADVICE: Final = re.compile(r";\s*check the command/url and run `mcp-actors test` on it")


def without_test_advice(message: str, server: str) -> str:
    """``message`` minus the advice to run ``mcp-actors test`` (for the ``test`` command itself).

    A connect failure advises running ``test`` on the server; said by ``test``, that sends
    the person in a circle, so it says how to look at and fix the record instead.
    """
    fix = f"; check it with '{PROGRAM} servers show {server}' and fix it with '{PROGRAM} servers update {server} ...'"
    return _SELF_ADVICE.sub(fix, message)


def report_failure(exc: BaseException, *, debug: bool, as_json: bool = False, rewrite: Any = None) -> ExitCode:
    """Print ``exc`` as one line on stderr (plus its traceback with ``--debug``); return its code.

    With ``as_json``, also the failure document on stdout (:func:`error_json`), unless the
    command already printed its one JSON document there. ``rewrite`` maps the line's text.
    """
    leaf = root_cause(exc)
    if debug and not isinstance(leaf, KeyboardInterrupt):
        traceback.print_exception(exc, file=sys.stderr)
    line = error_line(leaf)
    if rewrite is not None:
        line = rewrite(line)
    print(terminal_safe(line), file=sys.stderr, flush=True)
    code = exit_code_for(leaf)
    if as_json and not json_printed():
        print_json(error_json(leaf, code, message=line.removeprefix(f"{PROGRAM}: error: ")))
    return code


def error_json(exc: BaseException, code: ExitCode, *, message: str | None = None) -> dict[str, Any]:
    """The one JSON document ``--json`` prints on failure: ``{"ok": false, "error": {...}}``.

    ``type`` is the error's class name (``ToolCallTimeout``, ``ServerNotFound``, ``CliError``
    for a bad option or input), ``server`` and ``tool`` are ``null`` when not known, and
    ``exitCode`` is the process's exit status.
    """
    text = message if message is not None else error_line(exc).removeprefix(f"{PROGRAM}: error: ")
    return {
        "ok": False,
        "error": {
            "type": type(exc).__name__,
            "message": text,
            "server": getattr(exc, "server", None),
            "tool": getattr(exc, "tool", None),
            "exitCode": int(code),
        },
    }


_printed = False


def json_printed() -> bool:
    """Whether this process has printed its JSON document already (so a failure adds none)."""
    return _printed


def forget_json_printed() -> None:
    """Start a run of the command with no JSON document printed (``main`` may run more than once in a process)."""
    global _printed
    _printed = False


def print_json(document: Any) -> None:
    """Write one JSON document to stdout: the only thing ``--json`` ever prints there."""
    global _printed
    _printed = True
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def record_json(record: McpServerRecord) -> dict[str, Any]:
    """A record's config-file form with every secret replaced by ``***``.

    ``env`` and ``headers`` keep their keys (so a person sees *what* is set) but not
    their values; a URL loses its user info and query string (tokens live there).
    """
    from mcp_actors._config.codec import record_to_json_dict
    from mcp_actors._config.redact import redact_url

    data = record_to_json_dict(record)
    config = dict(data.get("config", {}))
    for key in ("env", "headers"):
        if key in config:
            # A value that is only placeholders holds no secret and says where the value comes from.
            config[key] = {k: v if _ONLY_PLACEHOLDERS.fullmatch(v) else _REDACTED for k, v in config[key].items()}
    if config.get("url"):
        config["url"] = redact_url(config["url"])
    data["config"] = config
    return data


def record_target(record: McpServerRecord) -> str:
    """What a record starts or reaches, for a table cell: the command line or the (redacted) URL."""
    from mcp_actors._config.record import ServerType
    from mcp_actors._config.redact import redact_url

    config = record.config
    if record.type is ServerType.STDIO:
        text = shlex.join([config.command or "", *config.args])
        if config.env:
            text += f"  (env: {', '.join(sorted(config.env))})"
        return text
    text = redact_url(config.url or "")
    if config.headers:
        text += f"  (headers: {', '.join(sorted(config.headers))})"
    return text


_ONLY_PLACEHOLDERS: Final = re.compile(r"(?:\$\{[^}]*\})+")


def unresolved_placeholders(record: McpServerRecord) -> list[tuple[str, str]]:
    """``(field, placeholder)`` for every placeholder of the record that has no value now.

    What ``servers show`` warns about: the server would fail to start with
    :class:`~mcp_actors.errors.UnresolvedPlaceholder` on it.
    """
    from mcp_actors._config.variables import expand, placeholders_in

    config = record.config
    fields: list[tuple[str, str | None]] = [("config.command", config.command)]
    fields += [(f"config.args[{i}]", arg) for i, arg in enumerate(config.args)]
    fields += [(f"config.env.{k}", v) for k, v in config.env.items()]
    fields += [("config.cwd", config.cwd), ("config.envFile", config.env_file), ("config.url", config.url)]
    fields += [(f"config.headers.{k}", v) for k, v in config.headers.items()]
    found: list[tuple[str, str]] = []
    for field, text in fields:
        for placeholder in placeholders_in(text or ""):
            try:
                expand(placeholder, field=field, server=record.name)
            except UnresolvedPlaceholder:
                found.append((field, placeholder))
    return found


def tool_json(tool: McpTool) -> dict[str, Any]:
    """An :class:`~mcp_actors.tools.McpTool` as camelCase JSON (the ``--format mcp`` shape)."""
    return {
        "id": tool.id,
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "serverId": tool.server_id,
        "serverName": tool.server_name,
    }


async def list_tools_with_progress(
    service: McpService, records: Sequence[McpServerRecord], console: Console
) -> tuple[dict[str, list[McpTool]], dict[str, McpActorsError]]:
    """List the tools of ``records`` concurrently, with a progress display on a terminal.

    Connecting is the slow part (a stdio server may take seconds to start), so every
    server is asked at once and one that fails never holds up the others.

    Args:
        service: The registry.
        records: The servers to ask.
        console: Where the progress goes (stderr); nothing is shown unless it is a terminal.

    Returns:
        ``(tools by server id, errors by server name)``.
    """
    import trio  # not at module level: commands that only read or edit the config start faster
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    results: dict[str, list[McpTool]] = {}
    failures: dict[str, McpActorsError] = {}
    pending = [r.name for r in records]
    progress: Progress | None = None
    task = None
    if console.is_terminal and records:
        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            auto_refresh=False,
        )
        task = progress.add_task(_progress_text(pending), total=len(records))

    async def one(record: McpServerRecord) -> None:
        try:
            results[record.id] = await service.list_server_tools(record.id)
        except McpActorsError as exc:
            failures[record.name] = exc
        finally:
            pending.remove(record.name)
            if progress is not None and task is not None:
                progress.update(task, advance=1, description=_progress_text(pending))
                progress.refresh()

    async def tick(progress: Progress) -> None:
        # Keeps the spinner and the clock moving while servers start (no thread needed).
        while True:
            progress.refresh()
            await trio.sleep(_PROGRESS_REFRESH)

    if progress is None:
        async with trio.open_nursery() as nursery:
            for record in records:
                nursery.start_soon(one, record)
        return results, failures
    with progress, live_display(progress):
        async with trio.open_nursery() as outer:
            outer.start_soon(tick, progress)
            async with trio.open_nursery() as nursery:
                for record in records:
                    nursery.start_soon(one, record)
            outer.cancel_scope.cancel()
    return results, failures


def _progress_text(pending: Sequence[str]) -> str:
    if not pending:
        return "Connected"
    shown = ", ".join(pending[:3]) + (f" and {len(pending) - 3} more" if len(pending) > 3 else "")
    return f"Connecting {shown}"


def failure_lines(failures: Mapping[str, McpActorsError]) -> list[str]:
    """One stderr line per failed server, for commands that go on with the others."""
    lines = []
    for name, exc in failures.items():
        message = " ".join(str(exc).split())
        # Our errors name their server already; say it once.
        lines.append(
            f"{PROGRAM}: skipped: {message}" if repr(name) in message else f"{PROGRAM}: skipped {name!r}: {message}"
        )
    return [terminal_safe(line) for line in lines]
