"""Run the ``mcp-actors`` command in this process, as a user's shell would run it.

``invoke(config, *args)`` calls :func:`mcp_actors.cli.main` (the function the
``mcp-actors`` script and ``python -m mcp_actors`` call) inside typer's ``CliRunner``
isolation: stdin, stdout and stderr are in-memory streams (not terminals, like the pipes
of a subprocess), ``MCP_ACTORS_CONFIG`` points at the test's config and ``COLUMNS=200``
keeps rich from wrapping. A command costs milliseconds instead of the ~3 s a process
spends importing the MCP SDK. What only a process shows (the real entry points, signals,
terminals) is tested in ``test_cli_process.py``.

Process-wide state the command touches is put back after every run: the environment
(``--config`` sets ``MCP_ACTORS_STATE_DIR``), the root logger's handlers and levels
(the command installs its own), and the rich consoles the CLI modules keep at module
level (created at import; see :func:`_plain_consoles`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from rich.console import Console
from testkit import Result
from typer.testing import CliRunner

from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType
from mcp_actors._config.store import ConfigStore
from mcp_actors.cli import main

_LOGGERS = ("", "mcp_actors", "supervisors")


@contextlib.contextmanager
def _restored_process_state() -> Iterator[None]:
    environ = dict(os.environ)
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    saved = [(logger, logger.handlers[:], logger.level) for logger in loggers]
    try:
        yield
    finally:
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        for logger, handlers, level in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)


@contextlib.contextmanager
def _plain_consoles() -> Iterator[None]:
    """Module-level rich consoles of the CLI as a subprocess with piped output would have them.

    A ``Console()`` fixes its colour system, a forced terminal and a ``COLUMNS`` width when
    it is created, at import: whatever the test process had then (a terminal under
    ``pytest -s``, an exported ``COLUMNS``). For the run they are reset to what a console
    created on a pipe with ``COLUMNS=200`` has: no colour, not a terminal, the width read
    from the environment. (Consoles the command creates during the run need nothing.)
    """
    consoles = [
        value
        for name, module in list(sys.modules.items())
        if name.startswith("mcp_actors") and module is not None
        for value in list(vars(module).values())
        if isinstance(value, Console)
    ]
    saved = [(c, c._color_system, c._force_terminal, c._width) for c in consoles]
    for console in consoles:
        console._color_system = None
        console._force_terminal = None
        console._width = None
    try:
        yield
    finally:
        for console, color_system, force_terminal, width in saved:
            console._color_system = color_system
            console._force_terminal = force_terminal
            console._width = width


def invoke(
    config: Path | None,
    *args: str,
    stdin: str | bytes | BinaryIO = b"",
    env: Mapping[str, str | None] | None = None,
    watch: Callable[[io.BytesIO], None] | None = None,
) -> Result:
    """Run ``mcp-actors ARGS`` on ``config`` in this process; its exit status and both streams.

    Args:
        config: The config file (``MCP_ACTORS_CONFIG``); None leaves the variable as it is.
        args: The command line after ``mcp-actors``.
        stdin: What the command reads on stdin (empty by default, never a terminal); a binary
            stream (the read end of a pipe) for input a test writes while the command runs.
        env: More environment for the run; a None value unsets that variable.
        watch: Called with the run's stderr buffer as the command starts, for a test that
            reads what the command printed while it still runs (from another thread: a
            command that waits on the test runs in a worker thread, ``trio.to_thread``).
    """
    environ: dict[str, str | None] = {"COLUMNS": "200"}
    if config is not None:
        environ["MCP_ACTORS_CONFIG"] = str(config)
    environ.update(env or {})
    with _restored_process_state(), _plain_consoles():
        stream = not isinstance(stdin, str | bytes)
        with CliRunner().isolation(input=b"" if stream else stdin, env=environ) as (out, err, _):
            if stream:  # typer's runner takes only str or bytes; the isolation puts sys.stdin back after
                sys.stdin = io.TextIOWrapper(stdin, encoding="utf-8")  # type: ignore[arg-type]
            if watch is not None:
                watch(err)
            try:
                code: Any = main(list(args))
            except SystemExit as exit:  # the command ends as the script would, with this status
                code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            stdout = out.getvalue().decode()
            stderr = err.getvalue().decode()
    return Result(int(code), stdout, stderr)


def invoke_each(config: Path | None, *commands: Sequence[str]) -> list[Result]:
    """Run independent commands one after the other (each costs milliseconds); results in order."""
    return [invoke(config, *args) for args in commands]


def stdio(name: str, argv: Sequence[str], *, trusted: bool = False, **config: Any) -> McpServerRecord:
    """A stdio record running ``argv`` (no pings: a test's server need not prove it lives)."""
    return McpServerRecord(
        name=name,
        type=ServerType.STDIO,
        config=ServerConfig(command=argv[0], args=tuple(argv[1:]), ping_interval=0, **config),
        is_trusted=trusted,
    )


def write_config(path: Path, *records: McpServerRecord) -> Path:
    """Save ``records`` as the config file at ``path``; the path."""
    ConfigStore(path).save(records)
    return path
