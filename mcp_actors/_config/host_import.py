"""Import MCP server configs written for desktop apps and IDEs (pure: text in, records out).

:func:`parse_server_configs` accepts every common shape:

* ``{"mcpServers": {name: config}}`` — Claude Desktop, Claude Code (``.mcp.json``), Cursor,
  Windsurf, Cline, Roo Code, Gemini CLI. Other top-level keys (``globalShortcut`` …) are
  ignored and listed in :attr:`ImportReport.ignored_keys`.
* ``{"servers": {name: config}, "inputs": [...]}`` — VS Code's ``mcp.json``, also nested
  in ``settings.json`` as ``{"mcp": {"servers": ...}}``. ``inputs`` (values VS Code prompts
  for) are listed by :func:`declared_inputs`; the CLI asks for them on a terminal and
  substitutes the answers (:func:`substitute_import_variables`), as it does
  ``${workspaceFolder}``; a placeholder left unanswered stays as text and is noted.
* ``{name: config}`` — a bare map of servers.
* ``{"mcpServers": [record, ...]}`` — our own ``mcp-config.json`` list form (an export).

Comments and trailing commas (JSONC, as VS Code writes) are accepted. Invalid JSON raises
:class:`~mcp_actors.errors.ConfigError` with the line and column.

Each server becomes one :class:`AddJsonEntryResult`: a record, or the
:class:`~mcp_actors.errors.InvalidServerConfig` that explains why not. One bad entry never
stops the others. Keys we do not know are listed in ``unknown_keys`` (never dropped
silently); keys we know but cannot honour, and every guess we made, are explained in
``notes``.

Per-server keys understood (spellings of the apps above):

========================== ===========================================================
``command`` ``args``       stdio program and arguments
``env``                    environment; numbers and booleans become strings (noted)
``cwd``                    working directory
``url`` ``serverUrl``      endpoint of a remote server (Windsurf says ``serverUrl``)
``httpUrl``                Gemini CLI: a streamable-HTTP endpoint
``headers``                HTTP headers
``type`` ``transport``     ``stdio``; ``sse``; ``http``, ``streamable-http``,
``transportType``          ``streamableHttp``, ``streamable_http`` (case-insensitive)
``disabled``               ``true`` → imported with ``isActive: false``
``autoApprove``            Cline / Roo allow-lists of tool names. mcp-actors approves per
``alwaysAllow``            server instead (``isTrusted``), so these are noted, not applied
``trust``                  Gemini CLI: ``true`` → ``isTrusted``
``disabledTools``          Roo; ``excludeTools`` (Gemini CLI) means the same
``timeout``                the per-call timeout, see below
``connectTimeout``         our own keys, in seconds
``callTimeout``
``pingInterval``
``maxTotalTimeout``
``resetTimeoutOnProgress`` our own keys of the protocol client side (see docs/protocol/): kept
``logLevel`` ``protocol``  as given and checked by the record (``allowSampling`` … ``true`` or
``allowSampling``          ``false``; ``logLevel`` an MCP level; ``protocol`` ``legacy``/``auto``)
``allowElicitation``
``allowRoots``
``oauth``                  OAuth settings of a remote server (Claude Code, Gemini CLI, ours):
                           ``clientId``, ``clientSecret``, ``clientMetadataUrl``, ``scopes``
                           (a list or one space-separated string), ``grant``/``grantType``,
                           ``privateKeyFile``, ``signingAlgorithm``, ``redirectPort`` or
                           ``callbackPort`` (Claude Code), ``redirectUri`` (Gemini CLI; its
                           loopback port is kept), and our assertion grants' ``idp*``,
                           ``audience``, ``resource``, ``assertionFile``, ``assertionEnv`` and
                           ``issuer``. ``enabled: false`` imports no OAuth settings; endpoints
                           (``authorizationUrl``, ``tokenUrl``, and ``issuer`` for the grants
                           that discover it) are discovered from the server instead, so they are
                           noted and left out.
``authProviderType``       Gemini CLI: only ``dynamic_discovery`` is the MCP spec's flow; others
                           are noted
========================== ===========================================================

The type, when missing, is inferred: ``command`` → stdio; a URL → streamable HTTP, unless
its path ends in ``/sse`` → SSE (a note records the guess).

``timeout`` rule: Cline and Roo write seconds (1-3600); Gemini CLI and Claude Code write
milliseconds (Gemini's default is 600000). So a value **up to 3600 is seconds, a larger one
is milliseconds**. A note records every millisecond reading.
"""

from __future__ import annotations

import datetime as _dt
import enum
import json
import math
import re
import shlex
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from mcp_actors._config.codec import CONFIG_KEYS, RECORD_KEYS, converter, record_from_json_dict
from mcp_actors._config.record import (
    DOCUMENT_VERSION,
    InstallSource,
    McpServerRecord,
    ServerType,
    _FieldProblem,
    new_server_id,
)
from mcp_actors._config.record import _type_name as _json_type
from mcp_actors._config.variables import resolvable_at_start, update_options
from mcp_actors.errors import ConfigError, InvalidServerConfig, McpActorsError
from mcp_actors.naming import plural

__all__ = [
    "AddJsonEntryResult",
    "ImportFormat",
    "ImportInput",
    "ImportReport",
    "declared_inputs",
    "parse_server_configs",
    "read_server_configs",
    "substitute_import_variables",
]

MAX_TIMEOUT_SECONDS: Final = 3600
"""``timeout`` values above this are read as milliseconds (see the module docstring)."""


class ImportFormat(enum.StrEnum):
    """The shape an imported document was recognised as."""

    MCP_SERVERS = "mcpServers"
    """``{"mcpServers": {name: config}}`` (Claude Desktop, Cursor, Windsurf, Cline …)."""
    VSCODE = "vscode"
    """``{"servers": {...}, "inputs": [...]}`` (VS Code), possibly under ``"mcp"``."""
    BARE = "bare"
    """``{name: config}``."""
    RECORDS = "records"
    """``{"mcpServers": [record, ...]}``: mcp-actors' own file or export."""


@attrs.frozen(kw_only=True)
class AddJsonEntryResult:
    """One server of an imported document: parsed here, then saved by ``McpService.add_json``.

    The same value serves both steps (one class for one concept): :func:`parse_server_configs`
    fills ``record`` with the record to add, and ``add_json`` answers with the record as
    saved, or with the error that kept it out (a bad field, a duplicate name, a config
    file the disk refused).

    Attributes:
        name: The server's name (its key in the input).
        record: The record (to add, or as saved), or ``None`` when the entry was rejected.
        error: Why the entry was rejected (names the server and the field, says what to
            do), or ``None``.
        unknown_keys: Keys of the entry that mcp-actors does not know; they were not
            imported (reported, never silently dropped).
        notes: What was guessed, converted or could not be honoured, in words.
    """

    name: str
    record: McpServerRecord | None = None
    error: McpActorsError | None = None
    unknown_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the entry produced (or, after ``add_json``, saved) a record."""
        return self.record is not None


@attrs.frozen(kw_only=True)
class ImportReport:
    """Everything :func:`parse_server_configs` found in one document.

    Attributes:
        format: The recognised shape.
        entries: One result per server, in input order.
        ignored_keys: Top-level keys that are not servers and were not used (VS Code's
            ``inputs``, Claude Desktop's ``globalShortcut`` …).
        notes: Document-level remarks (JSONC accepted, duplicate keys, unsupported inputs).
    """

    format: ImportFormat
    entries: tuple[AddJsonEntryResult, ...] = ()
    ignored_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def records(self) -> tuple[McpServerRecord, ...]:
        """The records of the good entries."""
        return tuple(entry.record for entry in self.entries if entry.record is not None)

    @property
    def errors(self) -> tuple[McpActorsError, ...]:
        """The errors of the bad entries."""
        return tuple(entry.error for entry in self.entries if entry.error is not None)


# ----------------------------------------------------------------------------- JSON(C)


def _strip_jsonc(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments and trailing commas, outside strings.

    Every removed character becomes a space (newlines are kept), so line and column numbers
    in a later JSON error still point into the original text.
    """
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None  # a comma that is trailing if the next token closes
    while i < n:
        ch = text[i]
        if ch == '"':
            last_comma = None
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for j in range(i, end):
                if text[j] != "\n":
                    out[j] = " "
            i = end
        else:
            if ch in "}]" and last_comma is not None:
                out[last_comma] = " "
            if ch == ",":
                last_comma = i
            elif not ch.isspace():
                last_comma = None
            i += 1
    return "".join(out)


def _loads(text: str) -> tuple[Any, list[str]]:
    """Decode JSON or JSONC; return the value and document-level notes."""
    notes: list[str] = []
    duplicates: list[str] = []

    def no_silent_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                duplicates.append(key)
            result[key] = value
        return result

    stripped = _strip_jsonc(text)
    try:
        value = json.loads(stripped, object_pairs_hook=no_silent_duplicates)
    except json.JSONDecodeError as exc:
        # exc.msg is about syntax only ("Expecting ',' delimiter"); never echo the text.
        raise ConfigError(
            f"the server configs are not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}; "
            "fix the JSON and retry"
        ) from None
    except (ValueError, RecursionError) as exc:
        # Valid syntax the decoder still refuses: an integer of more than 4300 digits, or
        # nesting deeper than Python's recursion limit.
        problem = "nest too deeply" if isinstance(exc, RecursionError) else "hold a number too long to read"
        raise ConfigError(f"the server configs {problem}; fix the JSON and retry") from None
    if stripped != text:
        notes.append("comments or trailing commas (JSONC) were ignored")
    for key in dict.fromkeys(duplicates):
        notes.append(f"key {key!r} appears more than once in one object; the last one was used")
    return value, notes


# ----------------------------------------------------------------------------- entry translation

_TYPE_KEYS: Final = ("type", "transport", "transportType")
_URL_KEYS: Final = ("url", "serverUrl", "httpUrl")
_TRANSPORTS: Final = {
    "stdio": ServerType.STDIO,
    "sse": ServerType.SSE,
    "http": ServerType.HTTP,
    "streamablehttp": ServerType.HTTP,
}
_TRANSPORT_SPELLINGS: Final = "'stdio', 'sse', 'http', 'streamable-http', 'streamableHttp', 'streamable_http'"
_SECONDS_KEYS: Final = ("connectTimeout", "callTimeout", "pingInterval", "maxTotalTimeout")  # ours, as is
_BOOL_KEYS: Final = ("resetTimeoutOnProgress", "allowSampling", "allowElicitation", "allowRoots")  # ours
_TEXT_KEYS: Final = ("logLevel", "protocol")  # ours; the record checks the values
_UNSUPPORTED: Final = {
    "includeTools": "includeTools (an allow-list) is not supported: list unwanted tools in disabledTools instead",
    "watchPaths": "watchPaths (restart on file change) is not supported",
}
_KNOWN_KEYS: Final = frozenset(
    {
        "command",
        "args",
        "env",
        "cwd",
        "envFile",
        "headers",
        "disabled",
        "autoApprove",
        "alwaysAllow",
        "trust",
        "disabledTools",
        "excludeTools",
        "timeout",
        "name",
        "oauth",
        "authProviderType",
        *_TYPE_KEYS,
        *_URL_KEYS,
        *_SECONDS_KEYS,
        *_BOOL_KEYS,
        *_TEXT_KEYS,
        *_UNSUPPORTED,
    }
)
# ${VAR}, ${env:VAR}, ${input:id}, ${workspaceFolder} anywhere; a whole value "$VAR" (Gemini CLI).
_PLACEHOLDER_RE: Final = re.compile(r"\$\{[^}]*\}|^\$[A-Za-z_][A-Za-z0-9_]*$")


def _transport(value: Any, key: str) -> ServerType:
    if isinstance(value, str):
        normalised = re.sub(r"[-_\s]", "", value).lower()
        if normalised in _TRANSPORTS:
            return _TRANSPORTS[normalised]
        shown = repr(value)
    else:
        shown = _json_type(value)
    raise _FieldProblem(key, f"must be one of {_TRANSPORT_SPELLINGS}, got {shown}")


def _first_of(config: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any] | None:
    """The first of ``keys`` present in ``config``; two of them with different values is an error."""
    present = [(key, config[key]) for key in keys if key in config]
    for key, value in present[1:]:
        if value != present[0][1]:
            raise _FieldProblem(present[0][0], f"conflicts with {key}; keep only one of them")
    return present[0] if present else None


def _infer_type(config: Mapping[str, Any], url: str | None, url_key: str | None, notes: list[str]) -> ServerType:
    has_command = "command" in config
    if has_command and url is not None:
        raise _FieldProblem("type", f'is needed: the entry has both command and {url_key}; add "type"')
    if has_command:
        return ServerType.STDIO
    if url is not None:
        if url_key == "httpUrl":
            return ServerType.HTTP
        try:
            path = urllib.parse.urlsplit(url).path
        except ValueError:
            path = ""
        if path.rstrip("/").endswith("/sse"):
            notes.append(f"no type given; inferred 'sse' because the {url_key} path ends in /sse")
            return ServerType.SSE
        notes.append(f"no type given; inferred 'http' (streamable HTTP) from {url_key}")
        return ServerType.HTTP
    raise _FieldProblem("command", "or url is required: give command (a local stdio server) or url (a remote server)")


def _seconds(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _FieldProblem(key, f"must be a number, got {_json_type(value)}")
    try:
        seconds = float(value)
    except OverflowError:  # an integer beyond any float
        seconds = math.inf
    if not math.isfinite(seconds):
        raise _FieldProblem(key, "must be a finite number, got a number out of range")
    return seconds


def _env(value: Any, notes: list[str]) -> Any:
    """Stringify scalar env values (``"PORT": 3000``), drop nulls; both noted (keys only)."""
    if not isinstance(value, Mapping):
        return value  # the record's validation reports the type
    result: dict[str, Any] = {}
    for key, item in value.items():
        if item is None:
            notes.append(f"env.{key} is null (unset the variable), which is not supported; it was left out")
        elif isinstance(item, bool | int | float):
            notes.append(f"env.{key} was {_json_type(item)}; it was stored as a string")
            result[key] = json.dumps(item)
        else:
            result[key] = item
    return result


def _tool_names(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _FieldProblem(key, f"must be a list of tool names, got {_json_type(value)}")
    return list(value)


_OAUTH_KEYS: Final = {
    "clientId": "clientId",
    "clientSecret": "clientSecret",
    "clientMetadataUrl": "clientMetadataUrl",
    "idpTokenEndpoint": "idpTokenEndpoint",
    "idpClientId": "idpClientId",
    "idpClientSecret": "idpClientSecret",
    "audience": "audience",
    "resource": "resource",
    "assertionFile": "assertionFile",
    "assertionEnv": "assertionEnv",
    "scopes": "scopes",
    "grant": "grant",
    "grantType": "grant",
    "privateKeyFile": "privateKeyFile",
    "signingAlgorithm": "signingAlgorithm",
    "redirectPort": "redirectPort",
    "callbackPort": "redirectPort",
    "dpop": "dpop",
}
_OAUTH_ASSERTION_GRANTS: Final = ("identity_assertion", "workload_identity")
"""Grants whose ``issuer`` is a setting (the one authorization server the assertion may go to);
for the others another host's ``issuer`` is discovered, so it is noted and left out."""
_OAUTH_DISCOVERED: Final = ("authorizationUrl", "tokenUrl", "registrationUrl", "issuer", "audiences", "tokenParamName")


def _grant_of(value: Mapping[str, Any]) -> Any:
    grant = value.get("grant", value.get("grantType"))
    return grant.replace("-", "_").lower() if isinstance(grant, str) else grant


def _oauth(value: Any, notes: list[str]) -> dict[str, Any] | None:
    """Translate a host's ``oauth`` object into ``config.oauth`` (None: no OAuth settings)."""
    if not isinstance(value, Mapping):
        raise _FieldProblem("oauth", f"must be an object, got {_json_type(value)}")
    if value.get("enabled") is False:
        notes.append("oauth.enabled is false: imported without OAuth settings")
        return None
    result: dict[str, Any] = {}
    for key, item in value.items():
        if key in _OAUTH_KEYS:
            target = _OAUTH_KEYS[key]
            if target == "scopes" and isinstance(item, str):
                item = item.split()
            if target == "grant":
                item = _grant_of(value)
            result[target] = item
        elif key == "redirectUri":
            try:
                parts = urllib.parse.urlsplit(item) if isinstance(item, str) else None
                port = parts.port if parts is not None else None
            except ValueError:
                parts, port = None, None
            if parts is not None and parts.hostname in ("127.0.0.1", "localhost", "::1") and port:
                result.setdefault("redirectPort", port)
            else:
                notes.append("oauth.redirectUri is not a loopback URL with a port; the default redirect is used")
        elif key == "issuer" and _grant_of(value) in _OAUTH_ASSERTION_GRANTS:
            result["issuer"] = item
        elif key in _OAUTH_DISCOVERED:
            notes.append(f"oauth.{key} is discovered from the server's metadata; it was left out")
        elif key != "enabled":
            notes.append(f"oauth.{key} is not a known OAuth setting; it was left out")
    return result


def _strings_in(value: Any, path: str) -> Iterator[tuple[str, str]]:
    # Iterative: JSON may nest as deep as the decoder allows, deeper than Python's recursion limit.
    stack = [(path, value)]
    while stack:
        here, item = stack.pop()
        if isinstance(item, str):
            yield here, item
        elif isinstance(item, Mapping):
            stack.extend((f"{here}.{key}", sub) for key, sub in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((f"{here}[{index}]", sub) for index, sub in reversed(list(enumerate(item))))


def _placeholder_note(name: str, config: Mapping[str, Any]) -> str | None:
    """A note naming the placeholders that will not resolve when the server starts.

    ``${env:NAME}`` and ``${NAME}`` are expanded from the environment at start (see
    :mod:`mcp_actors._config.variables`); ``${workspaceFolder}`` and ``${input:ID}`` only at
    import, so one still here was not answered; a whole-value ``$VAR`` is not expanded.
    """
    found = [
        (match, path, text)
        for key in ("command", "args", "env", "cwd", "envFile", "headers", "url")
        if key in config
        for path, text in _strings_in(config[key], key)
        for match in _PLACEHOLDER_RE.findall(text)
        if not resolvable_at_start(match)
    ]
    if not found:
        return None
    stuck = [f"{match} in {path}" for match, path, _ in found]
    values: dict[str, str] = {}
    for match, path, text in found:
        values[path] = values.get(path, text).replace(match, "VALUE")
    args = config.get("args")
    known_args = [str(a) for a in args] if isinstance(args, list) else None
    options = " ".join(update_options(list(values.items()), known_args))
    return (
        f"unresolved: {', '.join(stuck)}; the server fails to start until each is replaced, e.g. "
        f"'mcp-actors servers update {shlex.quote(name)} {options}' (${{env:NAME}} and ${{NAME}} are read from "
        "the environment at start)"
    )


_DOLLAR_NAME_RE: Final = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def _dollar_names_to_placeholders(record_config: dict[str, Any], notes: list[str]) -> None:
    """Gemini CLI's whole-value ``$VAR`` becomes ``${VAR}`` (expanded at start, as Gemini CLI does)."""
    changed: list[str] = []

    def convert(text: Any, path: str) -> Any:
        if isinstance(text, str) and (match := _DOLLAR_NAME_RE.fullmatch(text)):
            changed.append(path)
            return "${" + match.group(1) + "}"
        return text

    for key in ("env", "headers"):
        if isinstance(record_config.get(key), Mapping):
            record_config[key] = {k: convert(v, f"{key}.{k}") for k, v in record_config[key].items()}
    if isinstance(record_config.get("args"), list):
        record_config["args"] = [convert(a, f"args[{i}]") for i, a in enumerate(record_config["args"])]
    for key in ("cwd", "url"):
        if key in record_config:
            record_config[key] = convert(record_config[key], key)
    if changed:
        notes.append(f"$VAR in {', '.join(changed)} was read as ${{VAR}}: expanded from the environment at start")


@attrs.frozen(kw_only=True)
class ImportInput:
    """One of VS Code's ``inputs``: a value asked for at import (``${input:ID}``).

    Attributes:
        id: What ``${input:ID}`` names.
        description: The question to show.
        password: Typed without echo (an API key); the answer is a secret.
        default: The value an empty answer takes, if any.
    """

    id: str
    description: str = ""
    password: bool = False
    default: str | None = None


def declared_inputs(text: str) -> tuple[ImportInput, ...]:
    """The ``inputs`` a VS Code document declares (``promptString`` ones), in order; ``()`` when none.

    Never raises on a document it cannot read: :func:`parse_server_configs` reports that.
    """
    try:
        document, _ = _loads(text)
    except ConfigError:
        return ()
    if not isinstance(document, Mapping):
        return ()
    container = document.get("mcp") if isinstance(document.get("mcp"), Mapping) else document
    inputs = container.get("inputs") if isinstance(container, Mapping) else None
    found: list[ImportInput] = []
    for item in inputs if isinstance(inputs, list) else ():
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            continue
        default = item.get("default")
        found.append(
            ImportInput(
                id=item["id"],
                description=str(item.get("description") or item["id"]),
                password=item.get("password") is True,
                default=default if isinstance(default, str) else None,
            )
        )
    return tuple(found)


def substitute_import_variables(text: str, values: Mapping[str, str]) -> str:
    """Replace ``${workspaceFolder}``, ``${input:ID}`` … in a JSON(C) document's text.

    Args:
        text: The document.
        values: Placeholder bodies to their values (``{"workspaceFolder": "/src/app",
            "input:api-key": "..."}``).

    Returns:
        The text with each known placeholder replaced by its value, escaped for a JSON string
        (placeholders are only meaningful inside strings); unknown ones are kept.
    """

    def one(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        return match.group(0) if value is None else json.dumps(value, ensure_ascii=False)[1:-1]

    return re.sub(r"\$\{([^}]*)\}", one, text)


def _now_iso() -> str:
    now: str = converter.unstructure(_dt.datetime.now(_dt.UTC))
    return now


def _desktop_entry(name: str, config: Any, install_source: InstallSource) -> AddJsonEntryResult:
    """Translate one ``{name: config}`` entry of the desktop-app/IDE formats."""
    if not name.strip():
        error = InvalidServerConfig("a server has an empty name; give it a name and retry", field="name")
        return AddJsonEntryResult(name=name, error=error)
    if not isinstance(config, Mapping):
        error = InvalidServerConfig(
            f"invalid server {name!r}: its config must be an object with command or url, got {_json_type(config)}",
            server=name,
        )
        return AddJsonEntryResult(name=name, error=error)
    notes: list[str] = []
    unknown = tuple(key for key in config if key not in _KNOWN_KEYS)
    notes.extend(text for key, text in _UNSUPPORTED.items() if key in config)
    try:
        record = _translate(name, config, install_source, notes)
    except _FieldProblem as exc:  # a translation problem (before any record was built)
        error = InvalidServerConfig(
            f"invalid server {name!r}: {exc.path} {exc.problem}; fix the entry and retry",
            server=name,
            field=exc.path,
        )
        return AddJsonEntryResult(name=name, error=error, unknown_keys=unknown, notes=tuple(notes))
    except InvalidServerConfig as exc:
        return AddJsonEntryResult(name=name, error=exc, unknown_keys=unknown, notes=tuple(notes))
    return AddJsonEntryResult(name=name, record=record, unknown_keys=unknown, notes=tuple(notes))


def _translate(
    name: str, config: Mapping[str, Any], install_source: InstallSource, notes: list[str]
) -> McpServerRecord:
    url_item = _first_of(config, _URL_KEYS)
    url_key, url = url_item if url_item else (None, None)
    if url_key is not None and not isinstance(url, str):
        raise _FieldProblem(url_key, f"must be a string (an http:// or https:// URL), got {_json_type(url)}")
    type_item = _first_of(config, _TYPE_KEYS)
    if type_item is not None:
        server_type = _transport(type_item[1], type_item[0])
    else:
        server_type = _infer_type(config, url, url_key, notes)
    if url_key == "httpUrl" and server_type is not ServerType.HTTP:
        raise _FieldProblem("httpUrl", f"is a streamable-HTTP endpoint, but type says {server_type.value!r}")

    record_config: dict[str, Any] = {}
    # Keys that only the other kind of transport uses are harmless leftovers: left out, noted.
    # (command with a remote type, or a URL with stdio, is a contradiction: the record rejects it.)
    unused = ("headers",) if server_type is ServerType.STDIO else ("args", "env", "cwd", "envFile")
    for key in ("command", "args", "cwd", "envFile", "headers", "env"):
        if key not in config:
            continue
        if key in unused:
            notes.append(f"{key} is not used by {server_type.value} servers; it was left out")
        elif key == "env":
            record_config["env"] = _env(config["env"], notes)
        else:
            record_config[key] = config[key]
    if url is not None:
        record_config["url"] = url
    if "oauth" in config:
        if server_type is ServerType.STDIO:
            notes.append("oauth is not used by stdio servers; it was left out")
        else:
            oauth = _oauth(config["oauth"], notes)
            if oauth is not None:
                record_config["oauth"] = oauth
    provider = config.get("authProviderType")
    if provider is not None and provider != "dynamic_discovery":
        notes.append(
            f"authProviderType {provider!r} is not supported; the MCP authorization spec's flow"
            " (discovery, then login with `mcp-actors auth login`) is used"
        )
    if "timeout" in config:
        timeout = _seconds(config["timeout"], "timeout")
        if timeout > MAX_TIMEOUT_SECONDS:
            notes.append(f"timeout {timeout:g} is above {MAX_TIMEOUT_SECONDS}, so it was read as milliseconds")
            timeout /= 1000
        record_config["callTimeout"] = timeout
    for key in _SECONDS_KEYS:
        if key in config:
            if key == "callTimeout" and "timeout" in config:
                notes.append("both timeout and callTimeout were given; callTimeout was used")
            record_config[key] = _seconds(config[key], key)
    for key in _BOOL_KEYS:
        if key in config:
            if not isinstance(config[key], bool):
                raise _FieldProblem(key, f"must be true or false, got {_json_type(config[key])}")
            record_config[key] = config[key]
    for key in _TEXT_KEYS:
        if key in config:
            record_config[key] = config[key]
    _dollar_names_to_placeholders(record_config, notes)
    placeholder_note = _placeholder_note(name, record_config)
    if placeholder_note:
        notes.append(placeholder_note)

    disabled = config.get("disabled", False)
    if not isinstance(disabled, bool):
        raise _FieldProblem("disabled", f"must be true or false, got {_json_type(disabled)}")
    trust = config.get("trust", False)
    if not isinstance(trust, bool):
        raise _FieldProblem("trust", f"must be true or false, got {_json_type(trust)}")
    disabled_item = _first_of(config, ("disabledTools", "excludeTools"))
    disabled_tools = _tool_names(disabled_item[1], disabled_item[0]) if disabled_item else []
    approve_item = _first_of(config, ("autoApprove", "alwaysAllow"))
    if approve_item is not None:
        approve_key, approved = approve_item
        tools = _tool_names(approved, approve_key)
        if tools and not trust:
            notes.append(
                f"{approve_key} lists {plural(len(tools), 'tool')} ({', '.join(tools)}); mcp-actors auto-approves per "
                "server (isTrusted), so the server was imported untrusted and these calls will ask for "
                "approval; mark the server trusted to auto-approve all of its tools"
            )
    embedded_name = config.get("name")
    if embedded_name is not None and embedded_name != name:
        notes.append(f"the entry's own name field was ignored; the server is named {name!r} (its key)")

    return record_from_json_dict(
        {
            "id": new_server_id(),
            "name": name,
            "type": server_type.value,
            "config": record_config,
            "isActive": not disabled,
            "isTrusted": trust,
            "disabledTools": disabled_tools,
            "installSource": install_source.value,
            "createdAt": _now_iso(),
        }
    )


def _record_entry(index: int, entry: Any, install_source: InstallSource) -> AddJsonEntryResult:
    """Translate one entry of our own list form, reporting (not failing on) unknown keys."""
    label = f"mcpServers[{index}]"
    if not isinstance(entry, Mapping):
        error = InvalidServerConfig(f"invalid server {label}: it must be an object, got {_json_type(entry)}")
        return AddJsonEntryResult(name=label, error=error)
    name = entry.get("name")
    name = name if isinstance(name, str) and name.strip() else label
    unknown = [key for key in entry if key not in RECORD_KEYS]
    cleaned = {key: value for key, value in entry.items() if key in RECORD_KEYS}
    config = cleaned.get("config")
    if isinstance(config, Mapping):
        unknown += [f"config.{key}" for key in config if key not in CONFIG_KEYS]
        cleaned["config"] = {key: value for key, value in config.items() if key in CONFIG_KEYS}
    notes: list[str] = []
    if "id" not in cleaned:
        cleaned["id"] = new_server_id()
        notes.append("the entry had no id; a new one was assigned")
    cleaned.setdefault("createdAt", _now_iso())
    cleaned.setdefault("installSource", install_source.value)
    try:
        record = record_from_json_dict(cleaned)
    except InvalidServerConfig as exc:
        return AddJsonEntryResult(name=name, error=exc, unknown_keys=tuple(unknown), notes=tuple(notes))
    return AddJsonEntryResult(name=name, record=record, unknown_keys=tuple(unknown), notes=tuple(notes))


# ----------------------------------------------------------------------------- documents


def _read_records_document(document: Mapping[str, Any], install_source: InstallSource) -> ImportReport:
    version = document.get("version", DOCUMENT_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > DOCUMENT_VERSION:
        raise ConfigError(
            f"version {version} was written by a newer mcp-actors (this one reads up to "
            f"{DOCUMENT_VERSION}); upgrade mcp-actors to import it",
            field="version",
        )
    entries = tuple(_record_entry(i, entry, install_source) for i, entry in enumerate(document["mcpServers"]))
    ignored = tuple(key for key in document if key not in ("mcpServers", "version"))
    return ImportReport(format=ImportFormat.RECORDS, entries=entries, ignored_keys=ignored)


def _looks_like_one_server(document: Mapping[str, Any]) -> bool:
    return any(isinstance(document.get(key), str) for key in ("command", *_URL_KEYS))


def read_server_configs(document: Any, *, install_source: InstallSource = InstallSource.MANUAL) -> ImportReport:
    """Import an already-decoded document; see :func:`parse_server_configs`.

    Raises:
        ConfigError: The document is not one of the accepted shapes (the message says which
            shapes are).
    """
    if not isinstance(document, Mapping):
        raise ConfigError(
            f"expected a JSON object of servers, got {_json_type(document)}; accepted shapes are "
            '{"mcpServers": {...}}, {"servers": {...}} (VS Code) and {"<name>": {...}}'
        )
    container: Mapping[str, Any] = document  # the object that holds the servers (and inputs)
    if "mcpServers" in document and isinstance(document["mcpServers"], list):
        return _read_records_document(document, install_source)
    if "mcpServers" in document:
        server_format, key = ImportFormat.MCP_SERVERS, "mcpServers"
        ignored = tuple(k for k in document if k != key)
    elif isinstance(document.get("servers"), Mapping):
        server_format, key = ImportFormat.VSCODE, "servers"
        ignored = tuple(k for k in document if k not in (key, "inputs"))
    elif isinstance(document.get("mcp"), Mapping) and isinstance(document["mcp"].get("servers"), Mapping):
        container = document["mcp"]  # VS Code's settings.json
        server_format, key = ImportFormat.VSCODE, "servers"
        ignored = tuple(k for k in document if k != "mcp") + tuple(
            f"mcp.{k}" for k in container if k not in (key, "inputs")
        )
    elif _looks_like_one_server(document):
        raise ConfigError('this looks like the config of one server without a name; wrap it as {"<name>": {...}}')
    else:
        server_format, key, ignored = ImportFormat.BARE, "", ()
    servers = container[key] if key else document
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{key} must be an object of servers (name → config), got {_json_type(servers)}", field=key)

    notes: list[str] = []
    inputs = container.get("inputs") if server_format is ImportFormat.VSCODE else None
    if isinstance(inputs, list) and inputs:
        ids = [str(item["id"]) for item in inputs if isinstance(item, Mapping) and "id" in item]
        notes.append(
            f"inputs ({', '.join(ids) or len(inputs)}) are asked for only when importing on a terminal "
            "('mcp-actors servers import FILE'); ${input:...} placeholders left unanswered stay in the records"
        )
        ignored = (*ignored, "inputs" if container is document else "mcp.inputs")
    entries = tuple(_desktop_entry(str(name), config, install_source) for name, config in servers.items())
    if not entries:
        notes.append("no servers were found")
    return ImportReport(format=server_format, entries=entries, ignored_keys=ignored, notes=tuple(notes))


def parse_server_configs(text: str, *, install_source: InstallSource = InstallSource.MANUAL) -> ImportReport:
    """Import the server configs of a desktop app or IDE (or our own export) from JSON text.

    Pure: nothing is saved or connected; the registry's ``add_json`` adds
    :attr:`ImportReport.records`. Each imported record gets a new id, ``createdAt`` now and
    ``installSource`` ``install_source``; records of our own list form keep the id,
    timestamps and install source they carry.

    Args:
        text: The file's content: JSON, or JSONC with comments and trailing commas.
        install_source: Recorded on every new record (``protocol`` for deep-link installs).

    Returns:
        One entry per server (good entries kept when others fail), plus document notes.

    Raises:
        ConfigError: The text is not JSON (the message gives line and column), or not one
            of the accepted shapes.
    """
    document, notes = _loads(text)
    report = read_server_configs(document, install_source=install_source)
    return attrs.evolve(report, notes=(*notes, *report.notes))
