"""The command's two rich consoles, made on first use: stdout for results, stderr for the rest.

rich costs tens of milliseconds to import, and ``--version``, ``--help`` and a usage error
print nothing through it; so no module of the CLI imports it at its top. A command that
prints a table asks for :func:`out` (and imports ``rich.table`` itself), one that shows a
spinner or a warning asks for :func:`err`. Once made, each console is this module's
attribute (``_out``, ``_err``) for the rest of the process, as a console made at import
would be.

Both are :class:`~mcp_actors.cli._terminal.TerminalConsole`: whatever they print passes
:func:`~mcp_actors.cli._support.terminal_safe`, so a server's text cannot drive the terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["err", "out"]

_out: Console | None = None
_err: Console | None = None


def out() -> Console:
    """The console on stdout: tables and results (no highlighting, no soft wrap)."""
    global _out
    if _out is None:
        from mcp_actors.cli._terminal import TerminalConsole

        _out = TerminalConsole(highlight=False, soft_wrap=False)
    return _out


def err() -> Console:
    """The console on stderr: progress, spinners, warnings (only a terminal sees the live ones)."""
    global _err
    if _err is None:
        from mcp_actors.cli._terminal import TerminalConsole

        _err = TerminalConsole(stderr=True, highlight=False)
    return _err
