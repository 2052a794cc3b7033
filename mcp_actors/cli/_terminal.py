"""The CLI's rich console: whatever it renders passes :func:`~mcp_actors.cli._support.terminal_safe`.

Every table, line, prompt, spinner and progress bar the ``mcp-actors`` commands show a
person goes through a :class:`TerminalConsole`, so a server's text (a tool description,
a resource name, an error with its stderr, a log line) cannot drive the terminal with
control characters, wherever it sits in what is printed. This is the printing seam: call
sites need not remember to clean server text (they still pass it as ``Text``, never as
markup, so that ``[bold]`` in it prints literally).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.protocol import rich_cast
from rich.segment import Segment
from rich.table import Table
from rich.text import Span, Text

from mcp_actors.cli._support import TERMINAL_UNSAFE, terminal_safe

__all__ = ["TerminalConsole", "safe_text"]


def safe_text(text: Text) -> Text:
    """``text`` with :func:`terminal_safe` applied to its characters; styles stay on what they styled."""
    plain = text.plain
    cuts = sorted({offset for match in TERMINAL_UNSAFE.finditer(plain) for offset in match.span()})
    if not cuts:
        return text
    pieces = []
    for piece in text.divide(cuts):
        if TERMINAL_UNSAFE.fullmatch(piece.plain):
            shown = terminal_safe(piece.plain)
            piece = Text(shown, style=piece.style, spans=[Span(0, len(shown), s.style) for s in piece.spans])
        pieces.append(piece)
    safe = Text("").join(pieces)
    safe.style = text.style
    safe.justify, safe.overflow, safe.no_wrap, safe.end = text.justify, text.overflow, text.no_wrap, text.end
    return safe


def _clean_cells(table: Table) -> None:
    """Clean a table's text cells before the table measures them, so each column is as wide as what it shows."""
    for column in table.columns:
        cells = getattr(column, "_cells", None)  # rich keeps a column's cells there; else they are cleaned as rendered
        if isinstance(cells, list):
            cells[:] = [
                safe_text(c) if isinstance(c, Text) else terminal_safe(c) if isinstance(c, str) else c for c in cells
            ]


class TerminalConsole(Console):
    """A rich console that makes control characters visible in all it renders (rich's own codes aside).

    Texts, and the text cells of tables, are cleaned before they are laid out (so a column
    is as wide as what it shows); any other segment that still holds a control character
    (a renderable that makes its own segments) is cleaned on the way out. Rich's control
    segments (cursor moves of a live display) and the styles it turns into escape codes
    are its own, and stay.
    """

    def render_str(self, text: str, **kwargs: Any) -> Text:
        # Before rich parses it: rich would silently drop some controls (BEL, CR) and keep others (ESC).
        return super().render_str(terminal_safe(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        renderable = rich_cast(renderable)
        if isinstance(renderable, Text):
            renderable = safe_text(renderable)
        elif isinstance(renderable, Table):
            _clean_cells(renderable)
        for segment in super().render(renderable, options):
            if segment.control is None and TERMINAL_UNSAFE.search(segment.text):
                yield Segment(terminal_safe(segment.text), segment.style)
            else:
                yield segment
