"""The shared first pass: turn any schema a server sends into a tidy JSON Schema object.

Every provider profile starts from the output of :func:`normalise_input_schema`, which
is a valid JSON Schema (draft 2020-12) with these invariants:

* the root is ``{"type": "object", "properties": {...}, "required": [...]}`` with no
  ``anyOf``/``oneOf``/``allOf``/``not``/``if`` at the root (their information is
  folded in or returned as description text);
* local ``$ref``s are canonical (``#/$defs/<name>``) and every one resolves: refs to
  ``definitions``, to ``#``, or to any JSON pointer inside the schema are hoisted into
  the root ``$defs``; unresolvable ones are replaced (and reported);
* ``oneOf`` is ``anyOf``, ``const`` is a one-value ``enum``, OpenAPI's ``nullable`` and
  draft-4 forms (boolean ``exclusiveMinimum``, array ``items``, ``dependencies``) are
  their 2020-12 equivalents, one-element ``allOf``/``anyOf`` are merged into their node;
* ``required`` lists only existing properties, every array has ``items``, every object
  has ``properties``; keywords with invalid values and unknown keywords are removed.

The pass never raises on a bad schema: whatever it cannot use it drops or restates in a
description, and says so in the notes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Final
from urllib.parse import unquote

from ._report import ConversionNote, NoteAction

__all__ = [
    "EMPTY_OBJECT_SCHEMA",
    "Notes",
    "Schema",
    "add_description",
    "complete_node",
    "def_name",
    "map_subschemas",
    "merge_all",
    "merge_all_inlining",
    "merge_schemas",
    "normalise_input_schema",
    "pointer",
    "reachable_defs",
    "render",
    "schema_types",
]

Schema = dict[str, Any]

EMPTY_OBJECT_SCHEMA: Final[Schema] = {"type": "object", "properties": {}, "required": []}

MAX_DEPTH: Final = 48
"""Nesting deeper than this is cut: no real tool nests that far, and it bounds recursion."""

_TYPE_NAMES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_TYPE_ALIASES: Final = {
    "str": "string",
    "text": "string",
    "int": "integer",
    "float": "number",
    "double": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
    "map": "object",
    "none": "null",
}
_META_KEYWORDS: Final = frozenset(
    {"$schema", "$id", "$comment", "$anchor", "$dynamicAnchor", "$vocabulary", "$recursiveAnchor"}
)
_SUBSCHEMA_KEYWORDS: Final = frozenset({"not", "if", "then", "else", "contains", "propertyNames", "contentSchema"})
_BOOL_OR_SCHEMA_KEYWORDS: Final = frozenset({"additionalProperties", "unevaluatedProperties", "unevaluatedItems"})
_NUMBER_KEYWORDS: Final = frozenset({"minimum", "maximum"})
_COUNT_KEYWORDS: Final = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)
_BOOL_KEYWORDS: Final = frozenset({"uniqueItems", "readOnly", "writeOnly", "deprecated"})
_STRING_KEYWORDS: Final = frozenset({"title", "format", "contentMediaType", "contentEncoding"})
_MAX_OF: Final = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"})
_MIN_OF: Final = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"})
_ROOT_OBJECT_KEYWORDS: Final = (
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "minProperties",
    "maxProperties",
)
_RENDER_LIMIT: Final = 160
_DEF_PREFIX: Final = "#/$defs/"


class Notes:
    """Collects the notes of one tool's conversion (cheap to create, one per tool)."""

    __slots__ = ("notes", "tool_id")

    def __init__(self, tool_id: str) -> None:
        self.tool_id = tool_id
        self.notes: list[ConversionNote] = []

    def add(self, path: str, action: NoteAction, detail: str) -> None:
        """Record one change at ``path`` (a JSON pointer into the input schema)."""
        self.notes.append(ConversionNote(tool_id=self.tool_id, path=path, action=action, detail=detail))


def pointer(path: str, *parts: str | int) -> str:
    """Extend a JSON pointer with escaped segments."""
    for part in parts:
        path += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return path


def render(value: Any) -> str:
    """A short JSON rendering of ``value`` for descriptions and notes."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=repr)
    except ValueError:  # circular structure handed in by a caller
        text = repr(value)
    if len(text) > _RENDER_LIMIT:
        text = text[: _RENDER_LIMIT - 1] + "…"
    return text


def add_description(node: Schema, extras: list[str]) -> None:
    """Append restated constraints to ``node``'s description, in parentheses."""
    if not extras:
        return
    text = "(" + "; ".join(extras) + ")"
    base = node.get("description")
    node["description"] = f"{base} {text}" if base else text


def schema_types(node: Schema) -> list[str]:
    """The node's ``type`` as a list (empty when unconstrained)."""
    value = node.get("type")
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def def_name(ref: str) -> str:
    """The ``$defs`` name of a canonical ref (``#/$defs/<name>``)."""
    return ref[len(_DEF_PREFIX) :]


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _dedupe(values: Iterable[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for value in values:
        key = _json_key(value)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _as_count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value < 0 or value != int(value):
        return None
    return int(value)


def _regex_ok(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


# ----------------------------------------------------------------------------- merging


def _intersect_types(a: list[str], b: list[str]) -> list[str]:
    out = []
    for t in a:
        if t in b:
            out.append(t)
        elif t == "number" and "integer" in b:
            out.append("integer")
        elif t == "integer" and "number" in b:
            out.append("integer")
    return _dedupe(out)


def merge_schemas(a: Schema, b: Schema) -> tuple[Schema, list[str]]:
    """Intersect two schemas into one (what ``allOf: [a, b]`` means, as far as it can).

    Args:
        a: The schema that wins where the two cannot be reconciled.
        b: The schema merged into it.

    Returns:
        The merged schema and a list of conflicts (empty when the merge lost nothing).
    """
    out = dict(a)
    conflicts: list[str] = []
    for key, bv in b.items():
        if key not in out:
            out[key] = bv
            continue
        av = out[key]
        if av == bv:
            continue
        if key == "type":
            both = _intersect_types(schema_types(out), schema_types(b))
            if both:
                out["type"] = both[0] if len(both) == 1 else both
            else:
                conflicts.append(f"type {render(av)} vs {render(bv)}")
        elif key == "properties" and isinstance(av, dict) and isinstance(bv, dict):
            merged = dict(av)
            for name, sub in bv.items():
                if name in merged and merged[name] != sub:
                    if isinstance(merged[name], dict) and isinstance(sub, dict):
                        merged[name], sub_conflicts = merge_schemas(merged[name], sub)
                        conflicts.extend(f"property {name!r}: {c}" for c in sub_conflicts)
                    else:
                        conflicts.append(f"property {name!r} defined twice")
                else:
                    merged[name] = sub
            out["properties"] = merged
        elif key == "required" and isinstance(av, list) and isinstance(bv, list):
            out["required"] = av + [r for r in bv if r not in av]
        elif key == "enum" and isinstance(av, list) and isinstance(bv, list):
            keys = {_json_key(v) for v in bv}
            both_values = [v for v in av if _json_key(v) in keys]
            if both_values:
                out["enum"] = both_values
            else:
                conflicts.append(f"enum {render(av)} vs {render(bv)}")
        elif key == "description":
            if isinstance(av, str) and isinstance(bv, str) and bv not in av:
                out["description"] = f"{av} {bv}" if av else bv
        elif key in _MAX_OF and _is_number(av) and _is_number(bv):
            out[key] = max(av, bv)
        elif key in _MIN_OF and _is_number(av) and _is_number(bv):
            out[key] = min(av, bv)
        elif key == "additionalProperties":
            if av is False or bv is False:
                out[key] = False
            elif isinstance(av, dict) and isinstance(bv, dict):
                out[key], sub_conflicts = merge_schemas(av, bv)
                conflicts.extend(sub_conflicts)
            elif isinstance(bv, dict):
                out[key] = bv
        elif key == "items" and isinstance(av, dict) and isinstance(bv, dict):
            out[key], sub_conflicts = merge_schemas(av, bv)
            conflicts.extend(f"items: {c}" for c in sub_conflicts)
        elif key in _BOOL_KEYWORDS:
            out[key] = bool(av) or bool(bv)
        elif key in ("title", "default", "examples"):
            continue  # annotations: the first one stands, nothing is constrained differently
        else:
            conflicts.append(f"{key} {render(av)} vs {render(bv)}")
    return out, conflicts


def merge_all(
    base: Schema,
    branches: list[Any],
    resolve: Callable[[str], Schema | None],
) -> tuple[Schema, list[str]]:
    """Fold ``allOf`` branches into ``base``, resolving ``$ref``s and nested ``allOf``s.

    Args:
        base: The node that carried the ``allOf`` (without it).
        branches: The ``allOf`` branches.
        resolve: Maps a canonical ref to its definition (``None`` when unknown).

    Returns:
        The merged schema and the conflicts met (empty when nothing was lost).
    """
    merged, conflicts, _inlined = merge_all_inlining(base, branches, resolve)
    return merged, conflicts


def merge_all_inlining(
    base: Schema,
    branches: list[Any],
    resolve: Callable[[str], Schema | None],
) -> tuple[Schema, list[str], tuple[str, ...]]:
    """:func:`merge_all`, and the ``$defs`` names of the definitions it inlined, in order.

    A converter that inlines refs and counts how often each recursive definition was
    expanded along a path must count these too: a ``$ref`` inside an ``allOf`` is inlined
    here, and the merged node can hold the same ``allOf`` again (a ref back to the root).
    """
    conflicts: list[str] = []
    expanded: dict[str, None] = {}

    def expand(node: Schema) -> tuple[Schema, list[Any]]:
        node = dict(node)
        more = list(node.pop("allOf", []))
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEF_PREFIX):
            if ref in expanded:
                conflicts.append(f"recursive {ref} inside allOf")
                return node, more
            target = resolve(ref)
            if target is None:
                return node, more
            expanded[ref] = None
            del node["$ref"]
            target = dict(target)
            more = list(target.pop("allOf", [])) + more
            node, sub_conflicts = merge_schemas(target, node)
            conflicts.extend(sub_conflicts)
        return node, more

    result, queue = expand(base)
    queue.extend(branches)
    while queue:
        branch = queue.pop(0)
        if not isinstance(branch, dict):
            continue
        node, more = expand(branch)
        queue.extend(more)
        result, sub_conflicts = merge_schemas(result, node)
        conflicts.extend(sub_conflicts)
        if "$ref" in result:
            result, more = expand(result)
            queue.extend(more)
    return result, conflicts, tuple(def_name(ref) for ref in expanded)


_SUB_ONE: Final = (
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "contentSchema",
)
_SUB_LIST: Final = ("anyOf", "allOf", "oneOf", "prefixItems")
_SUB_MAP: Final = ("properties", "patternProperties", "dependentSchemas", "$defs")


def map_subschemas(node: Schema, fn: Callable[[Schema, str], Schema], path: str) -> Schema:
    """A shallow copy of ``node`` with ``fn(subschema, path)`` applied to each subschema."""
    out = dict(node)
    for key in _SUB_ONE:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = fn(value, pointer(path, key))
    for key in _SUB_LIST:
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [fn(s, pointer(path, key, i)) if isinstance(s, dict) else s for i, s in enumerate(value)]
    for key in _SUB_MAP:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = {n: fn(s, pointer(path, key, n)) if isinstance(s, dict) else s for n, s in value.items()}
    return out


def reachable_defs(root: Schema, defs: dict[str, Schema]) -> list[str]:
    """Names of the definitions reachable from ``root``, in ``defs`` order."""
    found: set[str] = set()
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str) and value.startswith(_DEF_PREFIX):
                    name = def_name(value)
                    if name not in found and name in defs:
                        found.add(name)
                        stack.append(defs[name])
                elif key != "$defs" and isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return [name for name in defs if name in found]


def complete_node(out: Schema, path: str, notes: Notes, extras: list[str]) -> None:
    """Restore the node invariants a merge may break (in place).

    Arrays get ``items``, objects get ``properties``, and ``required`` keeps only
    declared properties (unless a combinator or ref may declare more); the other
    names are restated through ``extras``.
    """
    types = schema_types(out)
    if "array" in types and "items" not in out:
        out["items"] = {}
    if "object" in types and "properties" not in out:
        out["properties"] = {}
    if "required" not in out or any(k in out for k in ("allOf", "anyOf", "$ref")):
        return
    if "properties" not in out:
        return  # a constraint fragment ("anyOf": [{"required": ["a"]}, ...]): the names are elsewhere
    props = out.get("properties", {})
    missing = [r for r in out["required"] if r not in props]
    if missing:
        notes.add(
            pointer(path, "required"),
            NoteAction.MOVED_TO_DESCRIPTION,
            f"required names without a property schema: {render(missing)}",
        )
        extras.append(f"required keys: {', '.join(missing)}")
        kept = [r for r in out["required"] if r in props]
        if kept:
            out["required"] = kept
        else:
            del out["required"]


def _collapse_enums(branches: list[Schema]) -> list[Schema]:
    """``anyOf`` of enum-only branches (``const`` alternatives) as one enum branch."""
    if not all(isinstance(b, dict) and "enum" in b and set(b) <= {"enum", "type"} for b in branches):
        return branches
    kinds = {_json_key(b.get("type")) for b in branches}
    if len(kinds) != 1:
        return branches
    merged: Schema = {"enum": _dedupe(v for b in branches for v in b["enum"])}
    if "type" in branches[0]:
        merged = {"type": branches[0]["type"], **merged}
    return [merged]


# ----------------------------------------------------------------------------- the pass


_MISSING: Final = object()


class _Normaliser:
    """One schema's normalisation: nodes, ref hoisting, root shaping."""

    def __init__(self, root: Schema, notes: Notes) -> None:
        self._root = root
        self._notes = notes
        self._names: dict[str, str] = {}
        self._taken: set[str] = set()
        self._queue: list[tuple[str, str, Any]] = []
        self.defs: dict[str, Schema] = {}

    # -- refs

    def _resolve_pointer(self, ptr: str) -> Any:
        node: Any = self._root
        if not ptr:
            return node
        for raw in ptr[1:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return _MISSING
        return node

    def _new_name(self, ptr: str) -> str:
        parts = ptr.split("/")
        base = parts[-1].replace("~1", "/").replace("~0", "~") if ptr else "Root"
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", base)[:60] or "Def"
        name, i = base, 2
        while name in self._taken:
            name = f"{base}_{i}"
            i += 1
        self._taken.add(name)
        return name

    def canonical_ref(self, ref: str) -> str | None:
        """Map a ref to ``#/$defs/<name>``, queueing its target; ``None`` if unresolvable."""
        if not ref.startswith("#"):
            return None
        ptr = unquote(ref[1:])
        if ptr and not ptr.startswith("/"):
            return None  # a plain-name fragment ($anchor): not followed
        name = self._names.get(ptr)
        if name is None:
            target = self._resolve_pointer(ptr)
            if target is _MISSING or not isinstance(target, dict | bool):
                return None
            name = self._new_name(ptr)
            self._names[ptr] = name
            self._queue.append((name, ptr, target))
        return _DEF_PREFIX + name

    def drain(self) -> None:
        """Normalise every queued definition (which may queue more)."""
        while self._queue:
            name, ptr, target = self._queue.pop(0)
            self.defs[name] = self.node(target, ptr, 0)

    def resolve(self, ref: str) -> Schema | None:
        """The normalised definition behind a canonical ref."""
        return self.defs.get(def_name(ref)) if ref.startswith(_DEF_PREFIX) else None

    # -- nodes

    def node(self, value: Any, path: str, depth: int) -> Schema:
        """Normalise one schema node (and, recursively, its subschemas)."""
        if isinstance(value, bool):
            return {} if value else {"not": {}}
        if not isinstance(value, dict):
            self._notes.add(path, NoteAction.DROPPED, f"not a schema: {render(value)}")
            return {}
        if depth > MAX_DEPTH:
            self._notes.add(path, NoteAction.DROPPED, f"nesting deeper than {MAX_DEPTH} levels")
            return {"description": "(deeper levels not described)"}
        notes = self._notes
        out: Schema = {}
        extras: list[str] = []
        nullable = False
        one_of: list[Schema] | None = None
        additional_items: Any = _MISSING
        child = depth + 1
        for key, v in value.items():
            here = pointer(path, key)
            if key in _META_KEYWORDS or (key == "id" and isinstance(v, str)):
                if key not in ("$schema", "$comment"):
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not used")
            elif key in ("$defs", "definitions"):
                continue  # reached through refs only; referenced entries are hoisted
            elif key in ("$ref", "$recursiveRef", "$dynamicRef"):
                ref = self.canonical_ref(v) if isinstance(v, str) else None
                if key == "$recursiveRef" and v == "#":
                    ref = self.canonical_ref("#")
                if ref is None:
                    notes.add(here, NoteAction.UNRESOLVED_REF, f"{key} {render(v)} cannot be resolved")
                    extras.append(f"a value as described by {render(v)}")
                else:
                    out["$ref"] = ref
            elif key == "type":
                types = self._types(v, here)
                if types:
                    out["type"] = types[0] if len(types) == 1 else types
            elif key == "nullable":
                nullable = v is True
            elif key == "enum":
                if isinstance(v, list) and v:
                    out["enum"] = _dedupe(v)
                else:
                    notes.add(here, NoteAction.DROPPED, f"enum {render(v)} is not a non-empty list")
            elif key == "const":
                out["enum"] = [v]
            elif key == "description":
                if isinstance(v, str):
                    if v:
                        out["description"] = v
                else:
                    out["description"] = render(v)
            elif key in _STRING_KEYWORDS:
                if isinstance(v, str):
                    out[key] = v
                else:
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not a string")
            elif key == "pattern":
                if isinstance(v, str) and _regex_ok(v):
                    out["pattern"] = v
                else:
                    notes.add(here, NoteAction.MOVED_TO_DESCRIPTION, f"pattern {render(v)} is not a valid regex")
                    extras.append(f"pattern: {render(v)}")
            elif key in ("default", "examples", "example"):
                if key == "examples":
                    out["examples"] = v if isinstance(v, list) else [v]
                elif key == "example":
                    out.setdefault("examples", [v])
                else:
                    out["default"] = v
            elif key in _NUMBER_KEYWORDS:
                if _is_number(v):
                    out[key] = v
                else:
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not a number")
            elif key == "multipleOf":
                if _is_number(v) and v > 0:
                    out[key] = v
                else:
                    notes.add(here, NoteAction.DROPPED, f"multipleOf {render(v)} is not a positive number")
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                if _is_number(v):
                    out[key] = v
                elif v is True:
                    # draft-4: a flag on minimum/maximum; applied after the loop
                    out[key] = True
                elif v is not False:
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not a number")
            elif key in _COUNT_KEYWORDS:
                count = _as_count(v)
                if count is None:
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not a non-negative integer")
                else:
                    out[key] = count
            elif key in _BOOL_KEYWORDS:
                if isinstance(v, bool):
                    out[key] = v
                else:
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not a boolean")
            elif key == "required":
                if isinstance(v, list):
                    names = _dedupe(r for r in v if isinstance(r, str))
                    if len(names) != len(v):
                        notes.add(here, NoteAction.DROPPED, "non-string or repeated entries of required")
                    out["required"] = out.get("required", []) + [r for r in names if r not in out.get("required", [])]
                elif not isinstance(v, bool):  # draft-3 boolean is read by the parent
                    notes.add(here, NoteAction.DROPPED, f"required {render(v)} is not a list")
            elif key == "properties":
                if isinstance(v, dict):
                    props: Schema = {}
                    for name, sub in v.items():
                        sub_path = pointer(here, name)
                        if sub is False:
                            notes.add(sub_path, NoteAction.DROPPED, f"property {name!r} is forbidden (false schema)")
                            continue
                        if isinstance(sub, dict) and sub.get("required") is True:
                            req = out.setdefault("required", [])
                            if name not in req:
                                req.append(name)
                        props[str(name)] = self.node(sub, sub_path, child)
                    out["properties"] = props
                else:
                    notes.add(here, NoteAction.DROPPED, f"properties {render(v)} is not an object")
            elif key in ("patternProperties", "dependentSchemas"):
                if isinstance(v, dict):
                    subs = {}
                    for name, sub in v.items():
                        if key == "patternProperties" and not _regex_ok(name):
                            notes.add(pointer(here, name), NoteAction.DROPPED, f"pattern {name!r} is not a valid regex")
                            continue
                        subs[name] = self.node(sub, pointer(here, name), child)
                    if subs:
                        out[key] = subs
                else:
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not an object")
            elif key in ("dependentRequired", "dependencies"):
                self._dependencies(key, v, here, out, child)
            elif key in _BOOL_OR_SCHEMA_KEYWORDS:
                out[key] = v if isinstance(v, bool) else self.node(v, here, child)
            elif key in _SUBSCHEMA_KEYWORDS:
                out[key] = self.node(v, here, child)
            elif key == "items":
                if isinstance(v, list):
                    out["prefixItems"] = [self.node(s, pointer(here, i), child) for i, s in enumerate(v)]
                elif v is False or v is True:
                    out["items"] = v
                else:
                    out["items"] = self.node(v, here, child)
            elif key == "additionalItems":
                additional_items = v
            elif key == "prefixItems":
                if isinstance(v, list):
                    out["prefixItems"] = [self.node(s, pointer(here, i), child) for i, s in enumerate(v)]
                else:
                    notes.add(here, NoteAction.DROPPED, f"prefixItems {render(v)} is not a list")
            elif key in ("anyOf", "allOf", "oneOf"):
                if isinstance(v, list) and v:
                    branches = [self.node(s, pointer(here, i), child) for i, s in enumerate(v)]
                    if key == "oneOf":
                        one_of = branches
                    else:
                        out[key] = out.get(key, []) + branches
                else:
                    notes.add(here, NoteAction.DROPPED, f"{key} {render(v)} is not a non-empty list")
            else:
                notes.add(here, NoteAction.DROPPED, f"unknown keyword {key!r}")
        return self._finish(out, extras, path, nullable, one_of, additional_items, child)

    def _types(self, value: Any, path: str) -> list[str]:
        raw = value if isinstance(value, list) else [value]
        types: list[str] = []
        for item in raw:
            name = item.lower() if isinstance(item, str) else None
            if name is not None and name not in _TYPE_NAMES:
                name = _TYPE_ALIASES.get(name)
            if name is None:
                if item != "any":
                    self._notes.add(path, NoteAction.DROPPED, f"unknown type {render(item)}")
                continue
            if name != item:
                self._notes.add(path, NoteAction.REWRITTEN, f"type {render(item)} read as {name!r}")
            if name not in types:
                types.append(name)
        if "number" in types and "integer" in types:
            types.remove("integer")
        return types

    def _dependencies(self, key: str, value: Any, path: str, out: Schema, depth: int) -> None:
        if not isinstance(value, dict):
            self._notes.add(path, NoteAction.DROPPED, f"{key} {render(value)} is not an object")
            return
        for name, dep in value.items():
            if isinstance(dep, list) and all(isinstance(d, str) for d in dep):
                out.setdefault("dependentRequired", {})[name] = _dedupe(dep)
            elif key == "dependencies" and isinstance(dep, dict | bool):
                out.setdefault("dependentSchemas", {})[name] = self.node(dep, pointer(path, name), depth)
            else:
                self._notes.add(pointer(path, name), NoteAction.DROPPED, f"{key} entry {render(dep)} is not usable")

    def _finish(
        self,
        out: Schema,
        extras: list[str],
        path: str,
        nullable: bool,
        one_of: list[Schema] | None,
        additional_items: Any,
        depth: int,
    ) -> Schema:
        notes = self._notes
        for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if out.get(flag) is True:
                if bound in out:
                    out[flag] = out.pop(bound)
                else:
                    del out[flag]
        if one_of is not None:
            if len(one_of) > 1:
                notes.add(
                    pointer(path, "oneOf"),
                    NoteAction.REWRITTEN,
                    "oneOf read as anyOf (exactly-one is not enforced)",
                )
            if "anyOf" in out:
                out.setdefault("allOf", []).append(one_of[0] if len(one_of) == 1 else {"anyOf": one_of})
            else:
                out["anyOf"] = one_of
        if nullable:
            types = schema_types(out)
            if types:
                if "null" not in types:
                    out["type"] = [*types, "null"]
                if "enum" in out and None not in out["enum"]:
                    out["enum"] = [*out["enum"], None]
            elif "anyOf" in out:
                if {"type": "null"} not in out["anyOf"]:
                    out["anyOf"] = [*out["anyOf"], {"type": "null"}]
            elif "$ref" in out:
                out["anyOf"] = [{"$ref": out.pop("$ref")}, {"type": "null"}]
            elif "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        if "anyOf" in out and len(out["anyOf"]) > 1:
            out["anyOf"] = _collapse_enums(out["anyOf"])
        merging = True
        while merging:  # each merge removes one level of combinator, so this ends
            merging = False
            for key in ("anyOf", "allOf"):
                branches = out.get(key)
                if branches is not None and len(branches) == 1:
                    rest = {k: v for k, v in out.items() if k != key}
                    out, conflicts = merge_schemas(rest, branches[0])
                    for conflict in conflicts:
                        notes.add(pointer(path, key), NoteAction.MERGED, f"one-branch {key} merged; lost: {conflict}")
                    merging = True
        if "prefixItems" in out:
            tuple_items = out.pop("prefixItems")
            extra = out.pop("items", _MISSING)
            if extra is _MISSING:  # draft-4 tuple: the rest is described by additionalItems
                extra = additional_items
                if isinstance(extra, dict):
                    extra = self.node(extra, pointer(path, "additionalItems"), depth)
            candidates = _dedupe([*tuple_items, *([extra] if isinstance(extra, dict) else [])])
            if not candidates:
                out["items"] = {}
            elif len(candidates) == 1:
                out["items"] = candidates[0]
            else:
                out["items"] = {"anyOf": candidates}
            if extra is False:
                out["maxItems"] = min(out.get("maxItems", len(tuple_items)), len(tuple_items))
            if tuple_items:
                notes.add(
                    pointer(path, "prefixItems"),
                    NoteAction.REWRITTEN,
                    "tuple (prefixItems) read as a list; the order is stated in the description",
                )
                extras.append(f"items in this order: {render(tuple_items)}")
        complete_node(out, path, notes, extras)
        add_description(out, extras)
        return out

    def _prune_required(self, out: Schema, path: str, extras: list[str]) -> None:
        complete_node(out, path, self._notes, extras)

    # -- root

    def shape_root(self, root: Schema, extras: list[str]) -> Schema:
        """Make the root a plain object schema (the reference design's rule, plus folding)."""
        notes = self._notes
        seen: set[str] = set()
        while isinstance(root.get("$ref"), str):
            ref = root["$ref"]
            target = self.resolve(ref)
            if target is None or ref in seen:
                del root["$ref"]
                break
            seen.add(ref)
            siblings = {k: v for k, v in root.items() if k != "$ref"}
            root, conflicts = merge_schemas(dict(target), siblings)
            for conflict in conflicts:
                notes.add("", NoteAction.MERGED, f"root $ref {ref} and its siblings disagree: {conflict}")
        if "allOf" in root:
            branches = root.pop("allOf")
            root, conflicts = merge_all(root, branches, self.resolve)
            for conflict in conflicts:
                notes.add("/allOf", NoteAction.MERGED, f"root allOf merged; lost: {conflict}")
        if "anyOf" in root:
            root = self._fold_root_union(root, extras)
        for key in ("not", "if", "then", "else", "dependentSchemas", "dependentRequired"):
            if key in root:
                value = root.pop(key)
                notes.add(pointer("", key), NoteAction.MOVED_TO_DESCRIPTION, f"root {key} is not allowed by providers")
                extras.append(f"{key}: {render(value)}")
        types = schema_types(root)
        if types and "object" not in types:
            notes.add("", NoteAction.WRAPPED, f"root type {render(root['type'])} wrapped as property 'value'")
            inner_extras: list[str] = []
            self._prune_required(root, "", inner_extras)
            add_description(root, inner_extras)
            root = {"type": "object", "properties": {"value": root}, "required": ["value"]}
        elif len(types) > 1:
            notes.add("/type", NoteAction.DROPPED, f"root type {render(root['type'])} reduced to 'object'")
        out: Schema = {"type": "object"}
        if "description" in root:
            out["description"] = root["description"]
        props = root.get("properties", {})
        out["properties"] = props
        required = root.get("required", [])
        out["required"] = [r for r in required if r in props]
        missing = [r for r in required if r not in props]
        if missing:
            notes.add(
                "/required", NoteAction.MOVED_TO_DESCRIPTION, f"required names without a property: {render(missing)}"
            )
            extras.append(f"required keys: {', '.join(missing)}")
        for key in _ROOT_OBJECT_KEYWORDS:
            if key in root:
                out[key] = root[key]
        handled = {"type", "description", "properties", "required", "$ref", *_ROOT_OBJECT_KEYWORDS}
        for key, value in root.items():
            if key in handled:
                continue
            if key == "title":
                notes.add("/title", NoteAction.DROPPED, f"root title {render(value)}")
            else:
                notes.add(pointer("", key), NoteAction.MOVED_TO_DESCRIPTION, f"root {key} is not an object keyword")
                extras.append(f"{key}: {render(value)}")
        return out

    def _fold_root_union(self, root: Schema, extras: list[str]) -> Schema:
        notes = self._notes
        branches = root.pop("anyOf")
        objects: list[Schema] = []
        for i, branch in enumerate(branches):
            resolved, _ = merge_all({}, [branch], self.resolve)
            types = schema_types(resolved)
            if types and "object" not in types:
                notes.add(
                    pointer("/anyOf", i),
                    NoteAction.DROPPED,
                    f"root alternative of type {render(resolved['type'])}: tool arguments are always an object",
                )
                continue
            objects.append(resolved)
        if not objects:
            return root
        props: Schema = dict(root.get("properties", {}))
        for branch in objects:
            for name, sub in branch.get("properties", {}).items():
                if name not in props:
                    props[name] = sub
                elif props[name] != sub:
                    existing = props[name].get("anyOf") if set(props[name]) == {"anyOf"} else [props[name]]
                    alternatives = _collapse_enums(_dedupe([*existing, sub]))
                    props[name] = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
        common = [r for r in objects[0].get("required", []) if all(r in b.get("required", []) for b in objects)]
        root["properties"] = props
        root["required"] = _dedupe([*root.get("required", []), *common])
        if len(objects) > 1:
            shapes = []
            for n, branch in enumerate(objects, 1):
                label = branch.get("title") or branch.get("description") or ""
                names = ", ".join(branch.get("properties", {}))
                req = branch.get("required", [])
                shape = f"{n}) {label + ': ' if label else ''}{names}"
                if req and names:
                    shape += f" (required: {', '.join(req)})"
                elif req:
                    shape += f"requires {', '.join(req)}"
                elif not names:
                    shape += "no arguments"
                shapes.append(shape)
            notes.add(
                "/anyOf",
                NoteAction.MERGED,
                f"root alternatives folded into one object; the {len(objects)} shapes are described",
            )
            extras.append(f"Accepts one of {len(objects)} argument shapes: " + "; ".join(shapes))
        return root


def normalise_input_schema(schema: Any, notes: Notes) -> tuple[Schema, list[str]]:
    """Run the shared pass on one tool's input schema.

    Args:
        schema: The schema as the server sent it (anything; non-dicts are handled).
        notes: Where to record what was changed.

    Returns:
        The normalised root schema (with ``$defs`` when refs remain) and the sentences
        that restate root-level information the schema can no longer carry.
    """
    if not isinstance(schema, dict) or not schema:
        if schema not in (None, {}):
            notes.add("", NoteAction.DROPPED, f"input schema {render(schema)} is not an object")
        return {"type": "object", "properties": {}, "required": []}, []
    normaliser = _Normaliser(schema, notes)
    root = normaliser.node(schema, "", 0)
    normaliser.drain()
    extras: list[str] = []
    root = normaliser.shape_root(root, extras)
    names = reachable_defs(root, normaliser.defs)
    if names:
        root["$defs"] = {name: normaliser.defs[name] for name in names}
    return root, extras
