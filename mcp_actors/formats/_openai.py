"""OpenAI's strict-mode profile (Structured Outputs for function calling).

Non-strict function parameters take the normalised schema as it is. Strict mode
accepts a narrower subset: every object has ``additionalProperties: false`` and lists
all its properties in ``required`` (an optional one becomes nullable), no ``allOf``,
``not``, ``if``, ``patternProperties``, string lengths, ``default``; a closed list of
formats; no ``$ref`` with siblings; no value without a type; bounded size. What cannot
be expressed makes :func:`strict_parameters` raise :class:`Unstrictable`, and the caller
sends the tool non-strict instead (reported).
"""

from __future__ import annotations

from typing import Final

from ._report import NoteAction
from ._schema import (
    Notes,
    Schema,
    add_description,
    def_name,
    merge_all_inlining,
    merge_schemas,
    pointer,
    reachable_defs,
    render,
    schema_types,
)

__all__ = ["STRICT_FORMATS", "Unstrictable", "strict_parameters"]

STRICT_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
"""String formats strict mode accepts; others are restated in the description."""

STRICT_MAX_PROPERTIES: Final = 5000
STRICT_MAX_DEPTH: Final = 10
STRICT_MAX_ENUM_VALUES: Final = 1000
STRICT_MAX_STRING_CHARS: Final = 120_000

_MOVED: Final = frozenset(
    {
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "patternProperties",
        "propertyNames",
        "unevaluatedProperties",
        "dependentRequired",
        "dependentSchemas",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "not",
        "if",
        "then",
        "else",
        "default",
        "examples",
        "deprecated",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
    }
)
_DROPPED: Final = frozenset({"title", "readOnly", "writeOnly"})
_KEPT: Final = {
    "string": ("pattern",),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "array": ("minItems", "maxItems"),
}


class Unstrictable(Exception):
    """The schema has something strict mode cannot express."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{reason} (at {path or 'the root'})")
        self.path = path
        self.reason = reason


def _nullable(node: Schema) -> Schema:
    if "$ref" in node:
        return {"anyOf": [node, {"type": "null"}]}
    if "anyOf" in node:
        if {"type": "null"} in node["anyOf"]:
            return node
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    out = dict(node)
    types = schema_types(out)
    if "null" not in types:
        out["type"] = [*types, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def _enum_types(values: list[object], path: str) -> list[str]:
    kinds: list[str] = []
    for value in values:
        if value is None:
            kind = "null"
        elif isinstance(value, bool):
            kind = "boolean"
        elif isinstance(value, int):
            kind = "integer"
        elif isinstance(value, float):
            kind = "number"
        elif isinstance(value, str):
            kind = "string"
        else:
            raise Unstrictable(path, f"a non-scalar enum value {render(value)}")
        if kind not in kinds:
            kinds.append(kind)
    if "number" in kinds and "integer" in kinds:
        kinds.remove("integer")
    return kinds


class _StrictConverter:
    def __init__(self, defs: dict[str, Schema], notes: Notes) -> None:
        self._defs = defs
        self._notes = notes
        self.optional = 0

    def _resolve(self, ref: str) -> Schema | None:
        return self._defs.get(def_name(ref))

    def convert(self, node: Schema, path: str, stack: tuple[str, ...], *, root: bool = False) -> Schema:
        if "$ref" in node:
            if len(node) == 1:
                return dict(node)
            name = def_name(node["$ref"])
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if name in stack or name not in self._defs:
                raise Unstrictable(path, f"a recursive $ref {name!r} with sibling keywords")
            merged, conflicts = merge_schemas(siblings, self._defs[name])
            if conflicts:
                raise Unstrictable(path, f"a $ref {name!r} that conflicts with its siblings ({conflicts[0]})")
            return self.convert(merged, path, (*stack, name), root=root)
        if "allOf" in node:
            rest = {k: v for k, v in node.items() if k != "allOf"}
            merged, conflicts, names = merge_all_inlining(rest, node["allOf"], self._resolve)
            if conflicts or "allOf" in merged:
                raise Unstrictable(path, f"an allOf that does not merge ({conflicts[0] if conflicts else 'recursion'})")
            for name in names:
                if name in stack:  # as for a $ref with siblings: inlining it again would never end
                    raise Unstrictable(path, f"a recursive $ref {name!r} inside allOf")
            return self.convert(merged, path, (*stack, *names), root=root)
        out: Schema = {}
        extras: list[str] = []
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        types = schema_types(node)
        if "anyOf" in node:
            shared = {k: v for k, v in node.items() if k not in ("anyOf", "description", *_MOVED, *_DROPPED)}
            branches = []
            for i, branch in enumerate(node["anyOf"]):
                if shared:
                    branch, conflicts = merge_schemas(branch, shared)
                    if conflicts:
                        raise Unstrictable(path, f"an anyOf branch that conflicts with its siblings ({conflicts[0]})")
                branches.append(self.convert(branch, pointer(path, "anyOf", i), stack))
            out["anyOf"] = branches
            self._rest(node, out, path, extras, handled={"anyOf", "description", *shared})
            add_description(out, extras)
            return out
        if not types:
            if "properties" in node:
                types = ["object"]
            elif "items" in node:
                types = ["array"]
            elif "enum" in node:
                types = _enum_types(node["enum"], path)
            else:
                raise Unstrictable(path, "a value of any type (no 'type')")
        out["type"] = types[0] if len(types) == 1 else types
        if "enum" in node:
            out["enum"] = node["enum"]
        handled = {"type", "description", "enum"}
        if "object" in types:
            self._object(node, out, path, stack, extras, root=root)
            handled |= {"properties", "required", "additionalProperties"}
        if "array" in types:
            items = node.get("items")
            out["items"] = self.convert(items if isinstance(items, dict) else {}, pointer(path, "items"), stack)
            handled.add("items")
        if "string" in types and "format" in node:
            handled.add("format")
            if node["format"] in STRICT_FORMATS:
                out["format"] = node["format"]
            else:
                self._notes.add(
                    pointer(path, "format"),
                    NoteAction.MOVED_TO_DESCRIPTION,
                    f"format {node['format']!r} is not supported in strict mode",
                )
                extras.append(f"format: {node['format']}")
        for kind in types:
            for key in _KEPT.get(kind, ()):
                if key in node:
                    out[key] = node[key]
                    handled.add(key)
        self._rest(node, out, path, extras, handled)
        add_description(out, extras)
        return out

    def _object(
        self, node: Schema, out: Schema, path: str, stack: tuple[str, ...], extras: list[str], *, root: bool
    ) -> None:
        props = node.get("properties") or {}
        extra_schema = node.get("additionalProperties")
        if isinstance(extra_schema, dict) and extra_schema:
            raise Unstrictable(path, f"a map (additionalProperties {render(extra_schema)})")
        if not props and not root and extra_schema is not False:
            raise Unstrictable(path, "an object without properties (free-form)")
        required = node.get("required", [])
        converted: Schema = {}
        for name, sub in props.items():
            schema = self.convert(sub, pointer(path, "properties", name), stack)
            if name not in required:
                schema = _nullable(schema)
                self.optional += 1
            converted[name] = schema
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False

    def _rest(self, node: Schema, out: Schema, path: str, extras: list[str], handled: set[str]) -> None:
        for key, value in node.items():
            if key in handled or key == "$defs":
                continue
            here = pointer(path, key)
            if key == "default" and value is None:
                self._notes.add(here, NoteAction.DROPPED, "default null (an omitted value) is implied in strict mode")
            elif key in _MOVED:
                self._notes.add(here, NoteAction.MOVED_TO_DESCRIPTION, f"{key} is not supported in strict mode")
                extras.append(f"{key}: {render(value)}")
            elif key in _DROPPED:
                self._notes.add(here, NoteAction.DROPPED, f"{key} {render(value)} is not supported in strict mode")
            else:
                self._notes.add(here, NoteAction.DROPPED, f"{key} does not apply here in strict mode")


def _check_limits(schema: Schema) -> None:
    properties = 0
    enum_values = 0
    chars = 0
    stack: list[tuple[object, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if "properties" in node and isinstance(node["properties"], dict):
                if depth > STRICT_MAX_DEPTH:
                    raise Unstrictable("", f"objects nested deeper than {STRICT_MAX_DEPTH} levels")
                properties += len(node["properties"])
                chars += sum(len(name) for name in node["properties"])
                stack.extend((sub, depth + 1) for sub in node["properties"].values())
            if isinstance(node.get("enum"), list):
                enum_values += len(node["enum"])
                chars += sum(len(v) for v in node["enum"] if isinstance(v, str))
            for key, value in node.items():
                if key in ("items", "anyOf", "$defs", "additionalProperties"):
                    stack.append((value, depth))
        elif isinstance(node, list):
            stack.extend((sub, depth) for sub in node)
        if properties > STRICT_MAX_PROPERTIES:
            raise Unstrictable("", f"more than {STRICT_MAX_PROPERTIES} properties in total")
    if enum_values > STRICT_MAX_ENUM_VALUES:
        raise Unstrictable("", f"more than {STRICT_MAX_ENUM_VALUES} enum values in total")
    if chars > STRICT_MAX_STRING_CHARS:
        raise Unstrictable("", f"property names and enum values longer than {STRICT_MAX_STRING_CHARS} characters")


def strict_parameters(schema: Schema, notes: Notes) -> Schema:
    """The strict-mode ``parameters`` of one tool.

    Args:
        schema: The tool's normalised input schema.
        notes: Where to record what was moved or dropped.

    Returns:
        A schema that OpenAI's strict mode accepts.

    Raises:
        Unstrictable: Strict mode cannot express the schema; send it non-strict.
    """
    defs = schema.get("$defs", {})
    root = {k: v for k, v in schema.items() if k != "$defs"}
    converter = _StrictConverter(defs, notes)
    out = converter.convert(root, "", (), root=True)
    names = reachable_defs(out, defs)
    if names:
        out["$defs"] = {name: converter.convert(defs[name], pointer("/$defs", name), (name,)) for name in names}
    _check_limits(out)
    if converter.optional:
        notes.add(
            "",
            NoteAction.REWRITTEN,
            f"{converter.optional} optional properties are required and nullable in strict mode: "
            "the model sends null for a value it omits",
        )
    return out
