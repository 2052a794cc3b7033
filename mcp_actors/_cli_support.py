"""Plumbing shared by the ``mcp-actors`` commands: exit codes, error lines, output, progress.

Kept free of the MCP SDK on purpose: importing it costs a second or more, and commands
that only read the config file (``servers list``, ``--help``) should not pay for it.
The runtime and the registry are imported by the commands that need them.
"""

from __future__ import annotations

import enum
import json
import shlex
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

from mcp_actors.errors import (
    ActorStopped,
    ConfigError,
    ConfigStoreError,
    ConnectionFailed,
    LookupFailed,
    McpActorsError,
    ServerInactive,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallTimeout,
    ToolDisabled,
)
from mcp_actors.records import McpServerRecord, ServerType, record_to_json_dict, redact_url

if TYPE_CHECKING:
    from rich.progress import Progress

    from mcp_actors.service import McpService
    from mcp_actors.tools import McpTool

__all__ = [
    "CliError",
    "ExitCode",
    "PROGRAM",
    "error_line",
    "exit_code_for",
    "failure_lines",
    "list_tools_with_progress",
    "print_json",
    "record_json",
    "record_target",
    "report_failure",
    "root_cause",
    "tool_json",
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
        case ToolDisabled():
            return ExitCode.USAGE
        case ToolCallDenied() | ToolCallFailed():
            return ExitCode.FAILED
        case ServerInactive():
            return ExitCode.USAGE
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


def report_failure(exc: BaseException, *, debug: bool) -> ExitCode:
    """Print ``exc`` as one line on stderr (plus its traceback with ``--debug``); return its code."""
    leaf = root_cause(exc)
    if debug and not isinstance(leaf, KeyboardInterrupt):
        traceback.print_exception(exc, file=sys.stderr)
    print(error_line(leaf), file=sys.stderr, flush=True)
    return exit_code_for(leaf)


def print_json(document: Any) -> None:
    """Write one JSON document to stdout: the only thing ``--json`` ever prints there."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def record_json(record: McpServerRecord) -> dict[str, Any]:
    """A record's config-file form with every secret replaced by ``***``.

    ``env`` and ``headers`` keep their keys (so a person sees *what* is set) but not
    their values; a URL loses its user info and query string (tokens live there).
    """
    data = record_to_json_dict(record)
    config = dict(data.get("config", {}))
    for key in ("env", "headers"):
        if key in config:
            config[key] = dict.fromkeys(config[key], _REDACTED)
    if config.get("url"):
        config["url"] = redact_url(config["url"])
    data["config"] = config
    return data


def record_target(record: McpServerRecord) -> str:
    """What a record starts or reaches, for a table cell: the command line or the (redacted) URL."""
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
    with progress:
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
    return lines
