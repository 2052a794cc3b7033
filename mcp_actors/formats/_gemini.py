"""Gemini's schema profiles: the OpenAPI-subset ``parameters`` and ``parametersJsonSchema``.

``FunctionDeclaration.parameters`` is a protobuf ``Schema``: one scalar ``type`` per node
(a list is "Proto field is not repeating"), no ``$ref``, no ``additionalProperties``, no
``const``, string-only ``enum``, ``properties`` only on objects and never empty, and no
node without a type. :func:`gemini_parameters` turns a normalised schema into that
subset, inlining refs and moving what the subset cannot say into descriptions. Values
Gemini cannot declare at all (a free-form object, an unconstrained value, recursion
beyond the unroll depth) become strings whose description asks for JSON text; each such
place is reported, and ``json_schema=True`` avoids them where that path is available.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ._report import NoteAction
from ._schema import (
    Notes,
    Schema,
    add_description,
    complete_node,
    def_name,
    map_subschemas,
    merge_all_inlining,
    merge_schemas,
    pointer,
    render,
    schema_types,
)

__all__ = ["GEMINI_MAX_UNROLL", "GEMINI_NODE_BUDGET", "gemini_json_schema", "gemini_parameters"]

GEMINI_MAX_UNROLL: Final = 2
"""How many times one recursive definition is expanded along a path before it is cut."""

GEMINI_NODE_BUDGET: Final = 5000
"""Schema nodes one tool may grow to by inlining; past it, refs become placeholders.

Inlining a DAG of refs can grow exponentially; this keeps one odd schema from taking
seconds and megabytes of the request.
"""

GEMINI_FORMATS: Final = frozenset({"enum", "date-time"})

_TYPE_KEYWORDS: Final[dict[str, frozenset[str]]] = {
    "string": frozenset({"enum", "format", "pattern", "minLength", "maxLength", "contentMediaType", "contentEncoding"}),
    "number": frozenset({"enum", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
    "array": frozenset(
        {"items", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems"}
    ),
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "propertyNames",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependentSchemas",
            "unevaluatedProperties",
        }
    ),
    "boolean": frozenset({"enum"}),
}
_TYPE_KEYWORDS["integer"] = _TYPE_KEYWORDS["number"]
_ALL_TYPED_KEYWORDS: Final = frozenset().union(*_TYPE_KEYWORDS.values())
_ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples", "deprecated", "readOnly", "writeOnly"})
_RE2_UNSAFE: Final = re.compile(r"\(\?<?[=!]|\(\?>|\\[1-9]|\(\?P=")
_LABELS: Final = {
    "exclusiveMinimum": "greater than",
    "exclusiveMaximum": "less than",
    "multipleOf": "multiple of",
    "uniqueItems": "items must be unique",
    "deprecated": "deprecated",
}


def _python_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


class _GeminiConverter:
    """Converts one tool's normalised schema; holds the unroll stack budget."""

    def __init__(self, defs: dict[str, Schema], notes: Notes) -> None:
        self._defs = defs
        self._notes = notes
        self._count = 0

    def _resolve(self, ref: str) -> Schema | None:
        return self._defs.get(def_name(ref))

    def convert(self, node: Schema, path: str, stack: tuple[str, ...]) -> Schema:
        """One node to the OpenAPI subset; the result always has a ``type`` or ``anyOf``."""
        self._count += 1
        if "$ref" in node:
            return self._ref(node, path, stack)
        if "allOf" in node:
            rest = {k: v for k, v in node.items() if k != "allOf"}
            merged, conflicts, names = merge_all_inlining(rest, node["allOf"], self._resolve)
            for conflict in conflicts:
                self._notes.add(pointer(path, "allOf"), NoteAction.MERGED, f"allOf merged; lost: {conflict}")
            merged.pop("allOf", None)
            # A ref the merge inlined is an unroll like any other: counted, and cut past the limit.
            for name in names:
                if stack.count(name) >= GEMINI_MAX_UNROLL:
                    return self._cut(name, self._defs.get(name), rest, path, recursive=True)
            return self.convert(merged, path, (*stack, *names))
        types = schema_types(node)
        nullable = "null" in types
        types = [t for t in types if t != "null"]
        if "anyOf" in node:
            return self._union(node, path, stack, types, nullable)
        if len(types) > 1:
            return self._split(node, path, stack, types, nullable)
        kind = types[0] if types else self._infer(node, nullable)
        if kind is None:
            self._notes.add(path, NoteAction.PLACEHOLDER, "a value of any type cannot be declared to Gemini")
            out = self._placeholder(node, path, "any JSON value, given as JSON text")
        else:
            out = self._typed(node, kind, path, stack)
        if nullable:
            out["nullable"] = True
        return out

    def _placeholder(self, node: Schema, path: str, what: str) -> Schema:
        out: Schema = {"type": "string"}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        extras = [what]
        self._annotations(node, out, path, extras, set(node) - _ANNOTATIONS)
        add_description(out, extras)
        return out

    def _ref(self, node: Schema, path: str, stack: tuple[str, ...]) -> Schema:
        ref = node["$ref"]
        name = def_name(ref)
        target = self._defs.get(name)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if target is None or stack.count(name) >= GEMINI_MAX_UNROLL or self._count > GEMINI_NODE_BUDGET:
            return self._cut(name, target, siblings, path, recursive=stack.count(name) >= GEMINI_MAX_UNROLL)
        merged, conflicts = merge_schemas(siblings, target)
        for conflict in conflicts:
            self._notes.add(path, NoteAction.MERGED, f"$ref {name!r} and its siblings disagree: {conflict}")
        return self.convert(merged, path, (*stack, name))

    def _cut(self, name: str, target: Schema | None, siblings: Schema, path: str, *, recursive: bool) -> Schema:
        """A ref not inlined: a string asking for the value as JSON text, reported."""
        if target is not None and recursive:
            detail = f"recursive {name!r} unrolled {GEMINI_MAX_UNROLL} times, then given as JSON text"
            self._notes.add(path, NoteAction.RECURSION_CUT, detail)
        else:
            self._notes.add(path, NoteAction.PLACEHOLDER, f"{name!r} not inlined (schema too large)")
        described = dict(siblings)
        if "description" not in described and isinstance((target or {}).get("description"), str):
            described["description"] = (target or {})["description"]
        out = self._placeholder(described, path, f"a {name} value, given as JSON text")
        if "null" in schema_types(siblings):
            out["nullable"] = True
        return out

    def _union(self, node: Schema, path: str, stack: tuple[str, ...], types: list[str], nullable: bool) -> Schema:
        branches: list[Schema] = []
        for branch in node["anyOf"]:
            if schema_types(branch) == ["null"] and set(branch) <= {"type", "description", "title"}:
                nullable = True
            elif isinstance(branch, dict):
                branches.append(branch)
        shared = {k: v for k, v in node.items() if k not in _ANNOTATIONS and k not in ("anyOf", "type")}
        if types:
            shared["type"] = types[0] if len(types) == 1 else types
        if shared:
            distributed = []
            for branch in branches:
                merged, conflicts = merge_schemas(branch, shared)
                for conflict in conflicts:
                    self._notes.add(pointer(path, "anyOf"), NoteAction.MERGED, f"anyOf branch vs. siblings: {conflict}")
                distributed.append(merged)
            branches = distributed
        converted = [self.convert(b, pointer(path, "anyOf", i), stack) for i, b in enumerate(branches)]
        out: Schema
        if not converted:
            self._notes.add(path, NoteAction.PLACEHOLDER, "a value that can only be null")
            out = self._placeholder(node, path, "always null")
            nullable = True
        elif len(converted) == 1:
            out = dict(converted[0])
            own = node.get("description")
            if isinstance(own, str) and own and own not in out.get("description", ""):
                out["description"] = f"{own} {out['description']}" if out.get("description") else own
            extras: list[str] = []
            self._annotations(node, out, path, extras, {"anyOf", "type", *shared})
            add_description(out, extras)
        else:
            out = {"anyOf": converted}
            if isinstance(node.get("description"), str):
                out["description"] = node["description"]
            extras = []
            self._annotations(node, out, path, extras, {"anyOf", "type", *shared})
            add_description(out, extras)
        if nullable:
            out["nullable"] = True
        return out

    def _split(self, node: Schema, path: str, stack: tuple[str, ...], types: list[str], nullable: bool) -> Schema:
        branches = []
        for kind in types:
            branch: Schema = {"type": kind}
            for key in _TYPE_KEYWORDS.get(kind, frozenset()):
                if key in node:
                    branch[key] = node[key]
            if "enum" in branch:
                values = [
                    v
                    for v in branch["enum"]
                    if _python_type(v) == kind or (kind == "number" and _python_type(v) == "integer")
                ]
                if values:
                    branch["enum"] = values
                else:
                    del branch["enum"]
            branches.append(branch)
        converted = [self.convert(b, pointer(path, "type"), stack) for b in branches]
        out: Schema = {"anyOf": converted}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        extras: list[str] = []
        self._annotations(node, out, path, extras, {"type", *_ALL_TYPED_KEYWORDS})
        add_description(out, extras)
        if nullable:
            out["nullable"] = True
        return out

    def _infer(self, node: Schema, nullable: bool) -> str | None:
        if any(k in node for k in _TYPE_KEYWORDS["object"]):
            return "object"
        if any(k in node for k in _TYPE_KEYWORDS["array"]):
            return "array"
        if "enum" in node:
            kinds = {_python_type(v) for v in node["enum"]} - {"null"}
            if kinds == {"integer", "number"}:
                return "number"
            if len(kinds) == 1:
                kind = next(iter(kinds))
                return kind if kind is not None else None
            return "string" if kinds else None
        if any(k in node for k in ("pattern", "minLength", "maxLength", "format")):
            return "string"
        if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
            return "number"
        return None

    def _typed(self, node: Schema, kind: str, path: str, stack: tuple[str, ...]) -> Schema:
        out: Schema = {"type": kind}
        if isinstance(node.get("description"), str):
            out["description"] = node["description"]
        extras: list[str] = []
        handled = {"type", "description"}
        notes = self._notes
        if kind == "object":
            props = node.get("properties") or {}
            if not props and path:
                what = "a JSON object"
                extra_schema = node.get("additionalProperties")
                if isinstance(extra_schema, dict) and extra_schema:
                    what += f" whose values match {render(extra_schema)}"
                notes.add(path, NoteAction.PLACEHOLDER, "an object without properties cannot be declared to Gemini")
                return self._placeholder(node, path, f"{what}, given as JSON text")
            converted = {
                name: self.convert(sub, pointer(path, "properties", name), stack) for name, sub in props.items()
            }
            out["properties"] = converted
            required = [r for r in node.get("required", []) if r in converted]
            if required:
                out["required"] = required
            for key in ("minProperties", "maxProperties"):
                if key in node:
                    out[key] = node[key]
            extra_schema = node.get("additionalProperties")
            if extra_schema is not None and extra_schema is not True and extra_schema != {}:
                notes.add(
                    pointer(path, "additionalProperties"),
                    NoteAction.DROPPED,
                    f"additionalProperties {render(extra_schema)} is not supported by Gemini",
                )
            handled |= {"properties", "required", "minProperties", "maxProperties", "additionalProperties"}
        elif kind == "array":
            items = node.get("items")
            out["items"] = self.convert(items if isinstance(items, dict) else {}, pointer(path, "items"), stack)
            for key in ("minItems", "maxItems"):
                if key in node:
                    out[key] = node[key]
            handled |= {"items", "minItems", "maxItems"}
        elif kind == "string":
            self._string(node, out, path, extras)
            handled |= {"enum", "format", "pattern", "minLength", "maxLength"}
        elif kind in ("integer", "number"):
            for key in ("minimum", "maximum"):
                if key in node:
                    out[key] = node[key]
            if "enum" in node:
                values = [v for v in node["enum"] if v is not None]
                notes.add(pointer(path, "enum"), NoteAction.MOVED_TO_DESCRIPTION, "Gemini enums are strings only")
                extras.append("one of: " + ", ".join(render(v) for v in values))
            handled |= {"minimum", "maximum", "enum"}
        elif kind == "boolean" and "enum" in node:
            values = [v for v in node["enum"] if v is not None]
            notes.add(pointer(path, "enum"), NoteAction.MOVED_TO_DESCRIPTION, "Gemini enums are strings only")
            extras.append("one of: " + ", ".join(render(v) for v in values))
            handled.add("enum")
        self._annotations(node, out, path, extras, handled, kind)
        add_description(out, extras)
        return out

    def _string(self, node: Schema, out: Schema, path: str, extras: list[str]) -> None:
        notes = self._notes
        if "enum" in node:
            values = [v for v in node["enum"] if v is not None]
            if all(isinstance(v, str) for v in values):
                if values:
                    out["enum"] = values
            else:
                notes.add(pointer(path, "enum"), NoteAction.MOVED_TO_DESCRIPTION, "Gemini enums are strings only")
                extras.append("one of: " + ", ".join(render(v) for v in values))
        fmt = node.get("format")
        if fmt is not None:
            if fmt in GEMINI_FORMATS and (fmt != "enum" or "enum" in out):
                out["format"] = fmt
            else:
                notes.add(
                    pointer(path, "format"),
                    NoteAction.MOVED_TO_DESCRIPTION,
                    f"format {fmt!r} is not supported by Gemini",
                )
                extras.append(f"format: {fmt}")
        pattern = node.get("pattern")
        if pattern is not None:
            if _RE2_UNSAFE.search(pattern):
                notes.add(pointer(path, "pattern"), NoteAction.MOVED_TO_DESCRIPTION, "pattern uses syntax RE2 lacks")
                extras.append(f"pattern: {pattern}")
            else:
                out["pattern"] = pattern
        for key in ("minLength", "maxLength"):
            if key in node:
                out[key] = node[key]

    def _annotations(
        self,
        node: Schema,
        out: Schema,
        path: str,
        extras: list[str],
        handled: set[str],
        kind: str | None = None,
    ) -> None:
        """Move or drop every keyword of ``node`` not in ``handled`` (Gemini knows none)."""
        notes = self._notes
        local: list[str] = []
        for key, value in node.items():
            if key in handled or key == "$defs":
                continue
            here = pointer(path, key)
            if key in ("title", "readOnly", "writeOnly"):
                notes.add(here, NoteAction.DROPPED, f"{key} {render(value)} is not supported by Gemini")
            elif key == "default" and value is None:
                notes.add(here, NoteAction.DROPPED, "default null (an omitted value) is not supported by Gemini")
            elif key == "default":
                notes.add(here, NoteAction.MOVED_TO_DESCRIPTION, "default is not supported by Gemini")
                local.append(f"default: {render(value)}")
            elif key == "examples":
                notes.add(here, NoteAction.MOVED_TO_DESCRIPTION, "examples are not supported by Gemini")
                local.append(f"examples: {render(value)}")
            elif key in ("deprecated", "uniqueItems"):
                if value is True:
                    local.append(_LABELS[key])
            elif kind is not None and key in _ALL_TYPED_KEYWORDS and key not in _TYPE_KEYWORDS[kind]:
                notes.add(here, NoteAction.DROPPED, f"{key} does not apply to type {kind!r}")
            elif key == "description":
                continue
            else:
                notes.add(here, NoteAction.MOVED_TO_DESCRIPTION, f"{key} is not supported by Gemini")
                local.append(f"{_LABELS.get(key, key)}: {render(value)}")
        extras.extend(local)


def gemini_parameters(schema: Schema, notes: Notes) -> Schema | None:
    """The OpenAPI-subset ``parameters`` of one tool, or ``None`` when it takes none.

    Gemini rejects an object schema with no properties, and documents that a function
    without parameters leaves ``parameters`` unset, so an empty root becomes ``None``.

    Args:
        schema: The tool's normalised input schema.
        notes: Where to record what was changed.
    """
    defs = schema.get("$defs", {})
    root = {k: v for k, v in schema.items() if k != "$defs"}
    out = _GeminiConverter(defs, notes).convert(root, "", ())
    if not out.get("properties"):
        return None
    out.setdefault("required", [])
    return out


def gemini_json_schema(schema: Schema, notes: Notes) -> Schema:
    """The ``parametersJsonSchema`` of one tool.

    Gemini's JSON Schema path takes the normalised schema nearly as is; it rejects
    ``$schema`` and ``title``, and anything but ``description`` beside a ``$ref``: such
    a ref is inlined with its siblings merged in (a recursive one keeps only its
    description, the rest restated or reported).

    Args:
        schema: The tool's normalised input schema.
        notes: Where to record what was changed.
    """
    defs: dict[str, Schema] = schema.get("$defs", {})

    def clean(node: Schema, path: str, stack: tuple[str, ...]) -> Schema:
        ref = node.get("$ref")
        if isinstance(ref, str) and set(node) - {"$ref", "description", "title"}:
            name = def_name(ref)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if name in defs and name not in stack:
                merged, conflicts = merge_schemas(siblings, defs[name])
                for conflict in conflicts:
                    notes.add(path, NoteAction.MERGED, f"$ref {name!r} and its siblings disagree: {conflict}")
                extras: list[str] = []
                complete_node(merged, path, notes, extras)
                add_description(merged, extras)
                return clean(merged, path, (*stack, name))
            extras = []
            for key, value in siblings.items():
                if key in ("description", "title"):
                    continue
                notes.add(pointer(path, key), NoteAction.MOVED_TO_DESCRIPTION, f"{key} beside a recursive $ref")
                extras.append(f"{key}: {render(value)}")
                del node[key]
            add_description(node, extras)
        node = map_subschemas(node, lambda sub, sub_path: clean(sub, sub_path, stack), path)
        node.pop("$defs", None)
        if "title" in node:
            notes.add(pointer(path, "title"), NoteAction.DROPPED, f"title {render(node['title'])}")
            del node["title"]
        return node

    out = clean(schema, "", ())
    cleaned: dict[str, Schema] = {}
    pending = [name for name in defs if name in _refs_in(out)]
    while pending:
        name = pending.pop(0)
        if name in cleaned:
            continue
        cleaned[name] = clean(defs[name], pointer("/$defs", name), (name,))
        pending.extend(n for n in defs if n in _refs_in(cleaned[name]) and n not in cleaned)
    if cleaned:
        out["$defs"] = {name: cleaned[name] for name in defs if name in cleaned}
    return out


def _refs_in(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            for key, value in current.items():
                if key == "$ref" and isinstance(value, str):
                    found.add(def_name(value))
                elif isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(current, list):
            stack.extend(current)
    return found
