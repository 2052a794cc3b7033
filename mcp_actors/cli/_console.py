"""The command's two rich consoles, made on first use: stdout for results, stderr for the rest.

rich costs tens of milliseconds to import, and ``--version``, ``--help`` and a usage error
print nothing through it; so no module of the CLI imports it at its top. A command that
prints a table asks for :func:`out` (and imports ``rich.table`` itself), one that shows a
spinner or a warning asks for :func:`err`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["err", "out"]


@functools.cache
def out() -> Console:
    """The console on stdout: tables and results (no highlighting, no soft wrap)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


@functools.cache
def err() -> Console:
    """The console on stderr: progress, spinners, warnings (only a terminal sees the live ones)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)
