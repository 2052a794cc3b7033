"""Placeholders in server configs, expanded when a server is started, as hosts do.

A record keeps the placeholder (``"env": {"GITHUB_TOKEN": "${env:GITHUB_TOKEN}"}``), so a
secret need not be stored in the config file: the value is read from the host's
environment each time the server is started or reached. Recognised, in ``command``,
``args``, ``env`` values, ``cwd``, ``envFile``, ``url`` and ``headers`` values:

``${env:NAME}``, ``${NAME}``
    The host environment variable ``NAME``.
``${mcpActors:python}``
    The Python interpreter running mcp-actors (the built-in demo server's command, so a
    config does not break when the virtual environment moves).
``${userHome}``, ``${pathSeparator}``
    As in VS Code.

Import-time placeholders — VS Code's ``${workspaceFolder}`` and ``${input:ID}`` — are
replaced when a file is imported (:mod:`mcp_actors._config.host_import`); one still present at
connect time, like an unset variable, is an :class:`~mcp_actors.errors.UnresolvedPlaceholder`
naming it and the field, and the server's circuit opens at once (no retry can fix it).

``envFile`` names a dotenv file (``KEY=VALUE`` lines, ``#`` comments, ``export``, single
or double quotes) read at start; the record's ``env`` wins over it, and both win over the
host environment. Every value substituted here, and every value read from an env file,
counts as a secret for redaction.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

from mcp_actors._config.files import read_config_file
from mcp_actors.errors import ConfigFileRefused, ServerMisconfigured, UnresolvedPlaceholder

__all__ = [
    "PLACEHOLDER_RE",
    "PYTHON_PLACEHOLDER",
    "expand",
    "load_env_file",
    "placeholders_in",
    "resolvable_at_start",
    "update_options",
]

PLACEHOLDER_RE: Final = re.compile(r"\$\{([^}]*)\}")
"""A ``${...}`` placeholder; group 1 is what is between the braces."""

PYTHON_PLACEHOLDER: Final = "${mcpActors:python}"
"""The symbolic command of the built-in demo server: this interpreter, resolved at start."""

_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROGRAM: Final = "mcp-actors"
_IMPORT_ONLY: Final = frozenset({"workspaceFolder", "workspaceFolderBasename"})
"""VS Code variables known only where the imported file was: never read from the environment."""


def _builtin(body: str) -> str | None:
    """The value of a placeholder mcp-actors itself knows (``${mcpActors:python}``, ``${userHome}`` …)."""
    match body:
        case "mcpActors:python":
            return sys.executable or "python3"
        case "userHome":
            return str(Path.home())
        case "pathSeparator" | "/":
            return os.sep
        case _:
            return None


def _env_name(body: str) -> str | None:
    """The environment variable ``${env:NAME}`` or ``${NAME}`` reads, else ``None``."""
    name = body.removeprefix("env:")
    if _NAME_RE.fullmatch(name) and (body.startswith("env:") or name not in _IMPORT_ONLY):
        return name
    return None


def resolvable_at_start(placeholder: str) -> bool:
    """Whether a placeholder (``${...}`` as written) is expanded when a server starts.

    True for ``${env:NAME}``, ``${NAME}`` and the built-ins; false for ``${input:ID}``,
    ``${workspaceFolder}`` and anything unknown, which only an import (or an edit) replaces.
    """
    body = placeholder[2:-1] if placeholder.startswith("${") and placeholder.endswith("}") else placeholder
    return _builtin(body) is not None or _env_name(body) is not None


def placeholders_in(text: str) -> list[str]:
    """Every ``${...}`` placeholder in ``text``, as written, in order."""
    return [match.group(0) for match in PLACEHOLDER_RE.finditer(text)]


_OPTIONS: Final = {"command": "--command", "cwd": "--cwd", "envFile": "--env-file", "url": "--url"}
"""The ``servers update`` option of each single-valued field of a record's config."""
_ARG_RE: Final = re.compile(r"args\[(\d+)\]")


def update_options(fields: Sequence[tuple[str, str]], args: Sequence[str] | None = None) -> list[str]:
    """The ``mcp-actors servers update`` options that give ``fields`` new values, for a fix hint.

    The one map from where a placeholder sits to the option that replaces it: an ``env``
    value is ``--env KEY=VALUE``, a header ``--header KEY=VALUE``, an argument ``--arg``
    (which replaces every argument, so all of ``args`` are given, when known), ``url``
    ``--url`` and so on.

    Args:
        fields: ``(field, value)`` pairs: the field's path, with or without ``config.``
            (``env.API_KEY``, ``config.headers.Authorization``, ``args[1]``), and the value
            to show (the stored one with its placeholder replaced by ``VALUE``).
        args: The record's arguments, to spell out the ``--arg`` options in full.

    Returns:
        The options, shell-quoted, in the order of ``fields``; the arguments once.
    """
    options: list[str] = []
    new_args = list(args) if args is not None else None
    arg_at = -1
    for field, value in fields:
        path = field.removeprefix("config.")
        key, _, name = path.partition(".")
        index = _ARG_RE.fullmatch(path)
        if key == "env" and name:
            options.append(f"--env {shlex.quote(f'{name}={value}')}")
        elif key == "headers" and name:
            options.append(f"--header {shlex.quote(f'{name}={value}')}")
        elif index is not None:
            if new_args is not None and int(index.group(1)) < len(new_args):
                new_args[int(index.group(1))] = value
            if arg_at < 0:
                arg_at = len(options)
                options.append("")
        elif path in _OPTIONS:
            options.append(f"{_OPTIONS[path]} {shlex.quote(value)}")
    if arg_at >= 0:
        # --arg replaces every argument: all of them are given again (or said to be, when unknown).
        given = new_args if new_args is not None else ["ARG", "..."]
        options[arg_at] = " ".join(f"--arg={shlex.quote(a)}" if a != "..." else a for a in given)
    return options


def _unresolved(placeholder: str, body: str, field: str, server: str, text: str) -> UnresolvedPlaceholder:
    options = " ".join(update_options([(field, text.replace(placeholder, "VALUE"))])) or "..."
    fix = f"or run '{_PROGRAM} servers update {server} {options}' to replace it"
    if body.startswith("input:"):
        why = "is an input that was not answered at import (import the file on a terminal to be asked)"
    elif body == "workspaceFolder" or body.startswith("workspaceFolder"):
        why = "needs a workspace folder, which is known only when a file is imported ('servers import FILE')"
    elif (name := _env_name(body)) is not None:
        why = f"has no value: the environment variable {name} is not set"
        fix = f"set {name} in the environment, {fix}"
    else:
        why = "is not a known placeholder (known: ${env:NAME}, ${NAME}, ${mcpActors:python})"
    return UnresolvedPlaceholder(
        f"server {server!r}: placeholder {placeholder!r} in {field} {why}; {fix}",
        server=server,
        placeholder=placeholder,
        field=field,
    )


def expand(text: str, *, field: str, server: str, environ: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """Expand every placeholder of ``text`` from the host environment.

    Args:
        text: A config value.
        field: Where it is (``config.env.TOKEN``), for the error.
        server: The server's name, for the error.
        environ: The variables to read (default: ``os.environ``).

    Returns:
        ``(expanded text, the values substituted)``; the values are secrets for redaction.

    Raises:
        UnresolvedPlaceholder: A placeholder has no value (named, with what to do).
    """
    env = os.environ if environ is None else environ
    used: list[str] = []

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        value = _builtin(body)
        if value is not None:
            return value
        name = _env_name(body)
        value = env.get(name) if name is not None else None
        if value is None:
            raise _unresolved(match.group(0), body, field, server, text)
        used.append(value)
        return value

    return PLACEHOLDER_RE.sub(one, text), used


_DOTENV_LINE: Final = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)")
_DOUBLE_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


def _dotenv_value(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1]
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return re.sub(r"\\(.)", lambda m: _DOUBLE_ESCAPES.get(m.group(1), "\\" + m.group(1)), raw[1:-1])
    # An unquoted value ends at a " #" comment.
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def _dotenv_pairs(text: str) -> Iterator[tuple[str, str]]:
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _DOTENV_LINE.fullmatch(line)
        if match is not None:
            yield match.group(1), _dotenv_value(match.group(2))


def load_env_file(path: str, *, server: str, base: str | None = None) -> dict[str, str]:
    """Read a dotenv file (``envFile``) into a dict.

    Args:
        path: The file; a relative path is taken from ``base`` (the server's cwd) or the
            host's working directory.
        server: The server's name, for the error.
        base: The directory a relative ``path`` is relative to.

    Raises:
        ServerMisconfigured: The file cannot be read (named, with the reason): missing, not
            UTF-8, or refused by the rule of every file read as configuration (no regular
            file, over 16 MiB: :func:`mcp_actors._config.files.read_config_file`).
    """
    file = Path(path).expanduser()
    if not file.is_absolute() and base is not None:
        file = Path(base) / file
    try:
        text = read_config_file(file, what="envFile", fix="point config.envFile at a regular file").decode("utf-8")
    except ConfigFileRefused as exc:
        raise ServerMisconfigured(
            f"server {server!r}: envFile {str(file)!r} {exc.reason}; it was not read; point config.envFile at a"
            " regular file",
            server=server,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ServerMisconfigured(
            f"server {server!r}: cannot read envFile {str(file)!r}: {reason}; create it or fix config.envFile",
            server=server,
        ) from None
    return dict(_dotenv_pairs(text))
