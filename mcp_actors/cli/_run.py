"""Running one command: the global options, failures as one line and an exit status, a trio
run, and a runtime open for the length of the command.

Shared by the root app (``_app.py``) and the command groups that talk to servers. Imported
before the command line is parsed: trio, the runtime and the CLI's callbacks (the MCP SDK)
are imported by the functions that run a command, never here.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from mcp_actors.cli._support import (
    ExitCode,
    report_failure,
    root_cause,
)

if TYPE_CHECKING:
    from mcp_actors.service import McpService

_T = TypeVar("_T")


# A dataclass, not attrs: the root callback builds it before any command runs, and attrs
# costs ~10 ms of import on the way to a usage error.
@dataclasses.dataclass(frozen=True, kw_only=True)
class _Options:
    """The global options, shared by every command through the click context."""

    config: Path | None = None
    debug: bool = False
    no_input: bool = False


def _options(ctx: typer.Context) -> _Options:
    obj = ctx.find_object(_Options)
    return obj if obj is not None else _Options()


def _execute(
    ctx: typer.Context,
    body: Callable[[_Options], ExitCode | None],
    *,
    as_json: bool = False,
    rewrite: Callable[[str], str] | None = None,
) -> None:
    """Run a command body; turn any failure into one stderr line and its exit status.

    With ``as_json`` a failure also prints ``{"ok": false, "error": {...}}`` on stdout, unless
    the command printed its JSON document already: a script always gets exactly one.
    """
    opts = _options(ctx)
    try:
        code = body(opts) or ExitCode.OK
    except (SystemExit, typer.Exit):
        raise
    except BaseException as exc:  # the command's last line of defence: report, never trace
        if isinstance(root_cause(exc), BrokenPipeError):
            # The reader went away (`mcp-actors tools --json | head`): nothing to report to.
            _silence_stdout()
            code = ExitCode.FAILED
        else:
            code = report_failure(exc, debug=opts.debug, as_json=as_json, rewrite=rewrite)
    if code != ExitCode.OK:
        raise typer.Exit(int(code))


def _run_async(
    ctx: typer.Context,
    body: Callable[[_Options], Awaitable[ExitCode | None]],
    *,
    as_json: bool = False,
    rewrite: Callable[[str], str] | None = None,
) -> None:
    """:func:`_execute` for a coroutine: the command is a trio program for its duration."""
    import trio  # not at module level: commands that only read or edit the config start faster

    _execute(ctx, lambda opts: trio.run(body, opts), as_json=as_json, rewrite=rewrite)


async def _with_service(opts: _Options, fn: Callable[[McpService], Awaitable[_T]]) -> _T:
    """Run ``fn`` with the registry of a runtime open for the length of the call.

    New servers are not connected in the background (``connect_on_add=False``): a
    command that only edits the config must not start processes it stops a moment later.
    """
    import trio

    from mcp_actors.cli._callbacks import TerminalElicitor, cli_callbacks
    from mcp_actors.runtime import open_runtime

    callbacks = cli_callbacks(no_input=opts.no_input)
    async with open_runtime(opts.config, connect_on_add=False, **callbacks) as runtime:
        elicitor = callbacks["elicitation_handler"]
        if not isinstance(elicitor, TerminalElicitor):
            return await fn(runtime.service)
        # The prompt's URL-mode waits end as the servers report the pages done (elicitation:complete).
        with runtime.service.subscribe() as subscription:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(elicitor.follow, subscription)
                result = await fn(runtime.service)
                nursery.cancel_scope.cancel()
            return result


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that interpreter shutdown does not flush into a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
