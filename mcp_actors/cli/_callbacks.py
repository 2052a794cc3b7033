"""The CLI's host callbacks: a terminal prompt for elicitation, a clear refusal for sampling.

:func:`cli_callbacks` returns the ``open_runtime`` keyword arguments the ``mcp-actors``
commands pass:

* **Elicitation**, on a terminal (stdin and stderr are TTYs) and without ``--no-input``:
  a prompt on stderr (stdout carries only the tool's result). Form mode asks field by
  field, showing titles, descriptions, defaults and choices (enums by number or value,
  multi-select as a comma-separated list); the answer is checked against the requested
  schema and asked again (at most three times) when it does not fit. URL mode shows the
  message and the URL and asks whether to open it; yes opens the browser (and prints the
  URL, for terminals without one), answers ``accept`` and says it waits for the server to
  confirm; that wait ends when the server reports the page done
  (``notifications/elicitation/complete``, the ``elicitation:complete`` event, followed by
  :meth:`TerminalElicitor.follow`). The call itself goes on meanwhile: the protocol has the
  completion arrive after the answer. Anywhere else (a pipe, a script,
  ``--no-input``) every elicitation is answered ``decline``, and stderr says so.
* **Sampling**: the CLI has no model, so a server that samples is answered with a
  JSON-RPC error saying so (and stderr tells the user which server asked).
* **Roots**: none are offered.
"""

from __future__ import annotations

import contextlib
import json
import sys
import webbrowser
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TextIO

import mcp.types as mcp_types
import trio
from mcp.shared.exceptions import MCPError
from rich.console import Console
from rich.markup import escape

from mcp_actors import events
from mcp_actors._connection.callbacks import complete_elicitation
from mcp_actors.cli._support import displays_paused
from mcp_actors.cli._terminal import TerminalConsole

__all__ = ["SAMPLING_DECLINED", "TerminalElicitor", "cli_callbacks", "decline_sampling"]

SAMPLING_DECLINED: Final = (
    "the mcp-actors command line has no language model, so it declines sampling requests; use the library with"
    " open_runtime(sampling_handler=...) to let servers sample"
)
"""What a server (and the user) is told when it samples through the CLI."""

_ATTEMPTS: Final = 3


def _stderr_console() -> Console:
    return TerminalConsole(stderr=True, highlight=False)


async def decline_sampling(
    server_id: str, params: mcp_types.CreateMessageRequestParams
) -> mcp_types.CreateMessageResult:
    """The CLI's sampling handler: always a clear JSON-RPC error (the CLI has no model)."""
    _stderr_console().print(f"[yellow]a server asked to sample a model:[/] {escape(SAMPLING_DECLINED)}")
    raise MCPError(code=mcp_types.INVALID_REQUEST, message=SAMPLING_DECLINED)


async def decline_elicitation(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    """The non-interactive elicitation handler: decline, and say so on stderr."""
    _stderr_console().print(
        f"[yellow]declined a server's question (no terminal, or --no-input):[/] {escape(params.message)}"
    )
    return mcp_types.ElicitResult(action="decline")


class _Retry(Exception):
    """One field's input did not parse; ask it again."""


def _choices(prop: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """(value, label) pairs of a single-select field (enum, enumNames, or titled oneOf/anyOf)."""
    if "enum" in prop:
        names = prop.get("enumNames") or prop["enum"]
        return [(value, str(name)) for value, name in zip(prop["enum"], names, strict=False)]
    options = prop.get("oneOf") or prop.get("anyOf")
    if isinstance(options, Sequence) and all(isinstance(o, Mapping) and "const" in o for o in options):
        return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return None


def _pick(text: str, choices: list[tuple[Any, str]]) -> Any:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1][0]
    for value, label in choices:
        if text in (str(value), label):
            return value
    raise _Retry(f"choose one of 1-{len(choices)} or a value: {', '.join(str(v) for v, _ in choices)}")


class TerminalElicitor:
    """Asks a person on a terminal; the prompts go to ``console``, answers are read with ``read_line``.

    Args:
        console: Where prompts go (stderr in the CLI).
        read_line: Reads one answer line (blocking; the handler runs it in a worker thread).
        open_url: Opens a URL in a browser; returns whether it could.
        paused: While a question is asked, the live displays (the call's progress bar) are
            off the terminal under this context manager, so that none draws over a prompt.
    """

    def __init__(
        self,
        console: Console,
        read_line: Callable[[], str],
        open_url: Callable[[str], bool] = webbrowser.open,
        paused: Callable[[], contextlib.AbstractContextManager[None]] = displays_paused,
    ) -> None:
        self._console = console
        self._read_line = read_line
        self._open_url = open_url
        self._paused = paused
        self._waiting: dict[str, str] = {}
        self._idle = trio.Event()
        self._idle.set()

    @property
    def waiting(self) -> dict[str, str]:
        """Accepted URL-mode elicitations the server has not reported done yet: id -> URL (a copy)."""
        return dict(self._waiting)

    def completed(self, elicitation_id: str) -> bool:
        """The server reported a URL-mode elicitation done: end its wait; unknown or repeated ids are ignored.

        Returns:
            Whether it was one this prompt was waiting for (the protocol lets clients
            ignore completions of ids they do not know).
        """
        url = self._waiting.pop(elicitation_id, None)
        if url is None:
            return False
        self._console.print(f"[green]the server confirms the page is done:[/] {escape(url)}")
        if not self._waiting:
            self._idle.set()
        return True

    async def follow(self, subscription: events.Subscription) -> None:
        """End waits as ``elicitation:complete`` events arrive on ``subscription``; runs until cancelled."""
        async for event in subscription:
            if event.type == events.ELICITATION_COMPLETE:
                elicitation_id = event.data.get("elicitationId")
                if isinstance(elicitation_id, str):
                    self.completed(elicitation_id)

    async def wait_idle(self) -> None:
        """Wait until no accepted URL-mode elicitation is waiting for its completion (unbounded: bound it)."""
        await self._idle.wait()

    async def __call__(self, server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        """The elicitation handler: the prompt runs in a worker thread, so the runtime keeps running."""
        return await trio.to_thread.run_sync(self.ask, server_id, params, abandon_on_cancel=True)

    # ------------------------------------------------------------------ blocking part

    def _ask(self, prompt: str) -> str:
        """Show ``prompt`` (plain text: its brackets are literal, not markup) and read one line."""
        self._console.print(prompt, end="", markup=False, highlight=False)
        line = self._read_line()
        if line == "":
            raise EOFError("end of input")
        return line.rstrip("\n")

    def ask(self, server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        """Ask the person; blocking. End of input (Ctrl-D) is ``cancel``. No live display draws meanwhile."""
        with self._paused():
            try:
                if isinstance(params, mcp_types.ElicitRequestURLParams):
                    return self._ask_url(params)
                return self._ask_form(params)
            except (EOFError, KeyboardInterrupt):
                self._console.print("\n[yellow]cancelled[/]")
                return mcp_types.ElicitResult(action="cancel")

    def _ask_url(self, params: mcp_types.ElicitRequestURLParams) -> mcp_types.ElicitResult:
        self._console.print(f"[bold]A server asks you to open a page:[/] {escape(params.message)}")
        self._console.print(f"  {escape(params.url)}")
        answer = self._ask("Open it in your browser? [y]es / [n]o (decline) / [c]ancel: ").strip().lower()
        if answer in ("c", "cancel"):
            return mcp_types.ElicitResult(action="cancel")
        if answer not in ("y", "yes"):
            return mcp_types.ElicitResult(action="decline")
        if not self._open_url(params.url):
            self._console.print("no browser could be opened here; open the URL above yourself")
        if params.elicitation_id is not None:  # without an id no completion can name it: nothing to wait for
            self._waiting[params.elicitation_id] = params.url
            self._idle = trio.Event()
            self._console.print("[dim]waiting for the server to confirm you finished on the page...[/]")
        return mcp_types.ElicitResult(action="accept")

    def _ask_form(self, params: mcp_types.ElicitRequestFormParams) -> mcp_types.ElicitResult:
        self._console.print(f"[bold]A server asks:[/] {escape(params.message)}")
        answer = self._ask("Answer? [y]es / [n]o (decline) / [c]ancel: ").strip().lower()
        if answer in ("c", "cancel"):
            return mcp_types.ElicitResult(action="cancel")
        if answer not in ("y", "yes", ""):
            return mcp_types.ElicitResult(action="decline")
        schema = params.requested_schema
        for _ in range(_ATTEMPTS):
            content = self._fields(schema)
            try:
                return mcp_types.ElicitResult(action="accept", content=complete_elicitation(schema, content))
            except ValueError as exc:
                self._console.print(f"[red]that does not fit:[/] {escape(str(exc))}; once more")
        self._console.print("[yellow]no valid answer: declined[/]")
        return mcp_types.ElicitResult(action="decline")

    def _fields(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, prop in properties.items():
            while True:
                try:
                    value = self._field(name, prop, name in required)
                except _Retry as exc:
                    self._console.print(f"[red]{escape(str(exc))}[/]")
                    continue
                if value is not None:
                    content[name] = value
                break
        return content

    def _field(self, name: str, prop: Mapping[str, Any], required: bool) -> Any:
        """One field's value, or None to leave it out (the default is filled later)."""
        title = prop.get("title") or name
        kind = prop.get("type")
        default = prop.get("default")
        label = f"[bold]{escape(str(title))}[/]" + ("" if required else " [dim](optional)[/]")
        if prop.get("description"):
            label += f" [dim]- {escape(str(prop['description']))}[/]"
        self._console.print(label)
        suffix = f" [{json.dumps(default)}]" if default not in (None, []) else ""
        choices = _choices(prop)
        if kind == "array":
            item_choices = _choices(prop.get("items") or {}) or []
            for i, (value, shown) in enumerate(item_choices, 1):
                self._console.print(f"  {i}. {escape(shown)}" + (f" ({escape(str(value))})" if shown != value else ""))
            text = self._ask(f"  choose any, comma-separated{suffix}: ").strip()
            if not text:
                return None
            return [_pick(part, item_choices) for part in text.split(",") if part.strip()]
        if choices is not None:
            for i, (value, shown) in enumerate(choices, 1):
                self._console.print(f"  {i}. {escape(shown)}" + (f" ({escape(str(value))})" if shown != value else ""))
            text = self._ask(f"  choose one{suffix}: ").strip()
            return _pick(text, choices) if text else None
        text = self._ask(f"  {kind or 'value'}{suffix}: ").strip()
        if not text:
            return None
        if kind == "boolean":
            if text.lower() in ("y", "yes", "true", "1"):
                return True
            if text.lower() in ("n", "no", "false", "0"):
                return False
            raise _Retry("answer yes or no")
        if kind == "integer":
            try:
                return int(text)
            except ValueError:
                raise _Retry(f"{text!r} is not a whole number") from None
        if kind == "number":
            try:
                return float(text)
            except ValueError:
                raise _Retry(f"{text!r} is not a number") from None
        return text


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def cli_callbacks(*, no_input: bool = False) -> dict[str, Any]:
    """The ``open_runtime`` keyword arguments of the CLI's host callbacks.

    Args:
        no_input: ``--no-input``: never prompt; every elicitation is declined.

    Returns:
        ``{"sampling_handler": ..., "elicitation_handler": ...}`` (no roots).
    """
    interactive = not no_input and _is_terminal(sys.stdin) and _is_terminal(sys.stderr)
    elicitation = TerminalElicitor(_stderr_console(), sys.stdin.readline) if interactive else decline_elicitation
    return {"sampling_handler": decline_sampling, "elicitation_handler": elicitation}
