"""The JSON codec of server records: camelCase keys, strict types, one error per entry.

Private: import its names from :mod:`mcp_actors._config.record`, whose docstring describes the
format. Kept apart from the record values so that the values read as plain attrs classes and
the translation rules (cattrs hooks, error paths, document shape) read as one piece.

Every problem found while structuring is one ``_FieldProblem`` (from the hooks below, or
from a record's field validators), collected by cattrs with the attribute or index it
belongs to; :func:`record_from_json_dict` turns the collection into one
:class:`~mcp_actors.errors.InvalidServerConfig` naming the server and every bad field.
Every JSON value in every field ends either in a record or in that error: nothing else
escapes (a property tested with hypothesis in ``tests/test_input_fuzz.py``).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import enum
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from mcp_actors._config.record import (
    _EPOCH,
    DOCUMENT_VERSION,
    DPOP_JSON,
    DpopMode,
    InstallSource,
    McpServerRecord,
    OAuthConfig,
    OAuthGrant,
    Scope,
    SecretMap,
    ServerConfig,
    ServerType,
    _camel,
    _FieldProblem,
    _type_name,
    first_name_clash,
)
from mcp_actors.errors import ConfigError, DuplicateServerName, InvalidServerConfig

__all__ = [
    "CONFIG_KEYS",
    "RECORD_KEYS",
    "converter",
    "document_from_records",
    "record_from_json_dict",
    "record_to_json_dict",
    "records_from_document",
]

_T = TypeVar("_T")


def _structure_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise _FieldProblem("", f"must be a string, got {_type_name(value)}")
    return value


def _structure_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise _FieldProblem("", f"must be true or false, got {_type_name(value)}")
    return value


def _structure_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _FieldProblem("", f"must be a number of seconds, got {_type_name(value)}")
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float: the field's validator rejects inf
        return math.inf


def _structure_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _FieldProblem("", f"must be an integer, got {_type_name(value)}")
    return value


def _structure_str_tuple(value: Any, _: type) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise _FieldProblem("", f"must be a list of strings, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _FieldProblem(f"[{index}]", f"must be a string, got {_type_name(item)}")
    return tuple(value)


def _structure_secret_map(value: Any, _: type) -> SecretMap:
    if not isinstance(value, Mapping):
        raise _FieldProblem("", f"must be an object of string values, got {_type_name(value)}")
    for key, item in value.items():
        if not isinstance(item, str):
            # The key is shown (names are not secret), the value never is.
            raise _FieldProblem(f".{key}", f"must be a string, got {_type_name(item)}")
    return SecretMap(value)


def _structure_enum(value: Any, enum_cls: type[enum.StrEnum]) -> enum.StrEnum:
    try:
        return enum_cls(value)
    except ValueError:
        allowed = ", ".join(repr(member.value) for member in enum_cls)
        shown = repr(value) if isinstance(value, str) else _type_name(value)
        raise _FieldProblem("", f"must be one of {allowed}, got {shown}") from None


def _structure_dpop(value: Any, _: type) -> Any:
    """As it is: the field's converter reads ``true``/``false``/``"auto"``, its validator names anything else."""
    return value


def _structure_datetime(value: Any, _: type) -> _dt.datetime:
    if isinstance(value, int) and not isinstance(value, bool):
        # The reference design stores Date.now(): epoch milliseconds. Exact, no float rounding.
        try:
            return _EPOCH + _dt.timedelta(milliseconds=value)
        except OverflowError:
            raise _FieldProblem("", f"is out of range as epoch milliseconds: {value}") from None
    if isinstance(value, str):
        try:
            parsed = _dt.datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.utcoffset() is not None:
            return parsed.astimezone(_dt.UTC)
        raise _FieldProblem("", f"must be an ISO-8601 time with 'Z' or an offset, got {value!r}")
    raise _FieldProblem("", f"must be an ISO-8601 time string or epoch milliseconds, got {_type_name(value)}")


def _unstructure_enum(value: enum.StrEnum) -> str:
    return value.value


def _unstructure_datetime(value: _dt.datetime) -> str:
    return value.astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")


def _is_str_tuple(type_: Any) -> bool:
    return bool(type_ == tuple[str, ...])


def _object_hook(cls: type[_T], generated: Callable[[Any, type], _T]) -> Callable[[Any, type], _T]:
    """Wrap a generated structure function so that a non-object is a clean type error.

    For records it also makes ``id`` required on input (a default id would be a new random
    one on every read of the file) and reads a missing ``createdAt`` as the Unix epoch
    ("unknown"), for the same reason: repeated reads of one file must give equal records.
    """

    def structure(value: Any, type_: type) -> _T:
        if not isinstance(value, Mapping):
            raise _FieldProblem("", f"must be an object, got {_type_name(value)}")
        if cls is not McpServerRecord:
            return generated(value, type_)
        if "createdAt" not in value:
            value = {**value, "createdAt": 0}
        errors: list[Exception] = []
        if "id" not in value:
            missing = KeyError("id")
            missing.__notes__ = [AttributeValidationNote("Structuring McpServerRecord @ attribute id", "id", str)]
            errors.append(missing)
        try:
            record = generated(value, type_)
        except ClassValidationError as exc:
            errors.extend(exc.exceptions)
        if errors:
            raise ClassValidationError("While structuring McpServerRecord", errors, McpServerRecord)
        return record

    return structure


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook_func(_is_str_tuple, _structure_str_tuple)
    conv.register_structure_hook(SecretMap, _structure_secret_map)
    conv.register_structure_hook(_dt.datetime, _structure_datetime)
    for enum_cls in (ServerType, Scope, InstallSource, OAuthGrant):
        conv.register_structure_hook(enum_cls, _structure_enum)
        conv.register_unstructure_hook(enum_cls, _unstructure_enum)
    conv.register_structure_hook(DpopMode, _structure_dpop)
    conv.register_unstructure_hook(DpopMode, DPOP_JSON.__getitem__)
    conv.register_unstructure_hook(SecretMap, dict)
    conv.register_unstructure_hook_func(_is_str_tuple, list)
    conv.register_unstructure_hook(_dt.datetime, _unstructure_datetime)
    for cls, omit_defaults in ((OAuthConfig, True), (ServerConfig, True), (McpServerRecord, False)):
        renames: dict[str, Any] = {a.name: override(rename=_camel(a.name)) for a in attrs.fields(cls)}
        conv.register_structure_hook(cls, _object_hook(cls, make_dict_structure_fn(cls, conv, **renames)))
        conv.register_unstructure_hook(
            cls, make_dict_unstructure_fn(cls, conv, _cattrs_omit_if_default=omit_defaults, **renames)
        )
    return conv


converter: Final[cattrs.Converter] = _make_converter()
"""The project's cattrs converter for records: camelCase keys, strict types, no unknown keys.

Use it (never ``cattrs.global_converter``) when another module embeds records or configs in
its own attrs classes. Its raw errors are cattrs exception groups; the functions below turn
them into :class:`~mcp_actors.errors.InvalidServerConfig`.
"""

RECORD_KEYS: Final = tuple(_camel(a.name) for a in attrs.fields(McpServerRecord))
"""The camelCase keys of a record's JSON form, in field order."""

CONFIG_KEYS: Final = tuple(_camel(a.name) for a in attrs.fields(ServerConfig))
"""The camelCase keys of a record's ``config`` object, in field order."""

OAUTH_KEYS: Final = tuple(_camel(a.name) for a in attrs.fields(OAuthConfig))
"""The camelCase keys of a config's ``oauth`` object, in field order."""

_KNOWN_KEYS: Final[dict[type, tuple[str, ...]]] = {
    OAuthConfig: OAUTH_KEYS,
    ServerConfig: CONFIG_KEYS,
    McpServerRecord: RECORD_KEYS,
}
_NESTED: Final[dict[str, type]] = {"config": ServerConfig, "oauth": OAuthConfig}


def _join(path: str, segment: str) -> str:
    """Append a key (``connectTimeout``), an index (``[2]``) or a sub-key (``.KEY``) to a path."""
    if not path:
        return segment.removeprefix(".")
    if segment.startswith(("[", ".")):
        return path + segment
    return f"{path}.{segment}"


def _problems(exc: BaseException, path: str, cls: type) -> Iterator[tuple[str, str]]:
    """Walk a cattrs error tree, yielding ``(camelCase path, problem)`` for every leaf.

    cattrs marks each failed attribute (or list item) with a note on the exception raised
    for it; nested classes raise their own group. ``cls`` is the class whose keys live at
    ``path``, for "did you mean" hints on unknown keys.
    """
    if isinstance(exc, BaseValidationError):
        for sub in exc.exceptions:
            sub_path, sub_cls = path, cls
            for note in getattr(sub, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    sub_path = _join(path, _camel(note.name))
                    sub_cls = _NESTED.get(note.name, cls)
                elif isinstance(note, IterableValidationNote):
                    sub_path = _join(path, f"[{note.index}]")
            yield from _problems(sub, sub_path, sub_cls)
    elif isinstance(exc, ForbiddenExtraKeysError):
        for key in sorted(exc.extra_fields):
            hint = difflib.get_close_matches(key, _KNOWN_KEYS.get(cls, ()), n=1)
            did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
            yield _join(path, key), f"is not a known key{did_you_mean}"
    elif isinstance(exc, _FieldProblem):
        yield _join(path, exc.path) if exc.path else path, exc.problem
    elif isinstance(exc, KeyError):
        yield path, "is required"
    else:  # pragma: no cover - a bug in a hook; the type is safe to show, the text may not be
        yield path, f"is invalid ({type(exc).__name__})"


def _server_label(data: Mapping[str, Any]) -> str | None:
    for key in ("name", "id"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def record_from_json_dict(data: Mapping[str, Any]) -> McpServerRecord:
    """Build a record from its camelCase JSON form (one entry of ``mcpServers``).

    Args:
        data: The decoded JSON object.

    Returns:
        The validated record.

    Raises:
        InvalidServerConfig: Something is missing, mistyped, unknown or inconsistent. The
            message names the server (its ``name``, else its ``id``) and every bad field by
            its camelCase path, and says what is expected; ``field`` is the first path. No
            env or header value is ever included.
    """
    if not isinstance(data, Mapping):
        raise InvalidServerConfig(f"a server entry must be a JSON object, got {_type_name(data)}")
    server = _server_label(data)
    try:
        record = converter.structure(data, McpServerRecord)
    except (BaseValidationError, _FieldProblem) as exc:
        found = list(_problems(exc, "", McpServerRecord))
        details = "; ".join(f"{path} {problem}" for path, problem in found)
        where = f"server {server!r}" if server else "server entry"
        raise InvalidServerConfig(
            f"invalid {where}: {details}; fix the entry and retry",
            server=server,
            field=found[0][0] if found else None,
        ) from None
    return record


def record_to_json_dict(record: McpServerRecord) -> dict[str, Any]:
    """Return the camelCase JSON form of ``record`` (plain dicts, lists, strings, numbers).

    ``config`` keys that hold their default are omitted; :func:`record_from_json_dict`
    restores them, so ``record_from_json_dict(record_to_json_dict(r)) == r``.
    """
    result: dict[str, Any] = converter.unstructure(record, McpServerRecord)
    return result


def records_from_document(document: Mapping[str, Any]) -> list[McpServerRecord]:
    """Read every record of a config document ``{"version": 1, "mcpServers": [...]}``.

    A missing ``version`` means 1 (the reference design's files have none); a missing
    ``mcpServers`` means no servers. Other top-level keys are ignored here (the store keeps
    them).

    Args:
        document: The decoded JSON document.

    Returns:
        The records, in file order.

    Raises:
        ConfigError: The document is not an object, its ``version`` is invalid or newer than
            :data:`DOCUMENT_VERSION`, or ``mcpServers`` is not a list.
        InvalidServerConfig: An entry is invalid, or two entries share an id; ``field`` is
            ``mcpServers[<index>].<path>``.
        DuplicateServerName: Two entries share a name, or names that clean to the same tool-id
            part (:func:`~mcp_actors._config.record.first_name_clash`); ``field`` is
            ``mcpServers[<index>].name`` of the later one.
    """
    if not isinstance(document, Mapping):
        raise ConfigError(f"a config document must be a JSON object, got {_type_name(document)}")
    version = document.get("version", DOCUMENT_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigError(f"version must be a whole number >= 1, got {_type_name(version)}", field="version")
    if version > DOCUMENT_VERSION:
        raise ConfigError(
            f"version {version} was written by a newer mcp-actors (this one reads up to "
            f"{DOCUMENT_VERSION}); upgrade mcp-actors to use this file",
            field="version",
        )
    entries = document.get("mcpServers", [])
    if not isinstance(entries, list):
        hint = " (that is the desktop-app format; import it instead)" if isinstance(entries, Mapping) else ""
        raise ConfigError(f"mcpServers must be a list of server records{hint}", field="mcpServers")
    records: list[McpServerRecord] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        try:
            record = record_from_json_dict(entry)
        except InvalidServerConfig as exc:
            path = f"mcpServers[{index}]" + (f".{exc.field}" if exc.field else "")
            raise InvalidServerConfig(f"mcpServers[{index}]: {exc}", server=exc.server, field=path) from None
        if record.id in seen:
            raise InvalidServerConfig(
                f"mcpServers[{index}]: id {record.id!r} is already used by mcpServers[{seen[record.id]}]; "
                "give one of them a new id",
                server=record.name,
                field=f"mcpServers[{index}].id",
            )
        seen[record.id] = index
        records.append(record)
    clash = first_name_clash([record.name for record in records])
    if clash is not None:
        index, other, cleaned = clash
        name, other_name = records[index].name, records[other].name
        if name == other_name:
            problem = f"name {name!r} is already used by mcpServers[{other}] (id {records[other].id!r})"
        else:
            problem = (
                f"name {name!r} collides with {other_name!r} of mcpServers[{other}]: both become {cleaned!r} in"
                " tool ids"
            )
        raise DuplicateServerName(
            f"mcpServers[{index}]: {problem}; rename one of them by editing the file, so that the names differ"
            " in letters or digits",
            server=name,
            field=f"mcpServers[{index}].name",
        )
    return records


def document_from_records(records: Sequence[McpServerRecord]) -> dict[str, Any]:
    """Return the config document ``{"version": 1, "mcpServers": [...]}`` for ``records``."""
    return {"version": DOCUMENT_VERSION, "mcpServers": [record_to_json_dict(r) for r in records]}
