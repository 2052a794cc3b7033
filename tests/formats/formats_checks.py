"""Offline validation of converter output: the providers' SDK types plus our own rules.

The SDKs check the envelope (``google.genai.types.Tool`` rejects unknown keys at every
level of its ``Schema``; the OpenAI and Anthropic TypedDicts are validated with
``extra="forbid"``); ``jsonschema`` checks every schema against draft 2020-12; the
``check_*`` functions below check what no SDK enforces but the providers' servers do.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pathlib
import re
import typing
import warnings
from collections.abc import Iterator
from typing import Any

import jsonschema
import pydantic
import typing_extensions

from mcp_actors.formats import ConversionNote, NoteAction, convert_tools_with_report
from mcp_actors.tools import McpTool

CORPUS_DIR = pathlib.Path(__file__).parent.parent / "data" / "tool_schemas"

PROFILES: list[tuple[str, dict[str, Any]]] = [
    ("openai", {}),
    ("openai", {"api": "responses"}),
    ("openai", {"strict": True}),
    ("openai", {"strict": True, "api": "responses"}),
    ("anthropic", {}),
    ("gemini", {}),
    ("gemini", {"json_schema": True}),
]
PROFILE_IDS = [f"{fmt}{'-' + '-'.join(f'{k}={v}' for k, v in opts.items()) if opts else ''}" for fmt, opts in PROFILES]


# ----------------------------------------------------------------------------- tools


def tool_id(server: str, name: str) -> str:
    """A registry-style id: ``mcp__server__tool``, cleaned, shortened with a hash."""
    raw = re.sub(r"[^a-zA-Z0-9_-]", "_", f"mcp__{server}__{name}")
    if len(raw) > 64:
        raw = raw[:55] + "_" + hashlib.sha1(raw.encode()).hexdigest()[:8]
    return raw


def make_tool(schema: Any, *, name: str = "t", server: str = "srv", description: str = "d") -> McpTool:
    """One McpTool around a schema (id derived like the registry's)."""
    return McpTool(
        id=tool_id(server, name),
        name=name,
        description=description,
        input_schema=schema,
        server_id=f"id-{server}",
        server_name=server,
    )


def corpus_files() -> list[pathlib.Path]:
    return sorted(CORPUS_DIR.glob("*.json"))


@functools.cache
def corpus_tools() -> tuple[McpTool, ...]:
    """Every tool of the committed corpus (real servers plus hand-written cases)."""
    tools = []
    for path in corpus_files():
        data = json.loads(path.read_text())
        for tool in data["tools"]:
            tools.append(
                McpTool(
                    id=tool_id(data["server"], tool["name"]),
                    name=tool["name"],
                    description=tool.get("description", ""),
                    input_schema=tool["inputSchema"],
                    server_id=f"id-{data['server']}",
                    server_name=data["server"],
                )
            )
    return tuple(tools)


# ----------------------------------------------------------------------------- SDK types


def _forbid_extra(td: Any) -> Any:
    """A copy of a TypedDict (and the TypedDicts it nests) that rejects unknown keys."""
    fields = {}
    for key, hint in typing.get_type_hints(td, include_extras=True).items():
        origin = typing.get_origin(hint)
        if origin in (typing_extensions.Required, typing_extensions.NotRequired):
            (inner,) = typing.get_args(hint)
            if typing_extensions.is_typeddict(inner):
                hint = origin[_forbid_extra(inner)]
        fields[key] = hint
    strict_td = typing_extensions.TypedDict(f"Forbid{td.__name__}", fields, total=False)  # type: ignore[operator]
    strict_td.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    return strict_td


@functools.cache
def _sdk_adapter(kind: str) -> pydantic.TypeAdapter[Any]:
    """The strict validator of one provider's tool type (the SDKs import only when a test validates)."""
    if kind == "anthropic":
        from anthropic.types import ToolParam

        return pydantic.TypeAdapter(_forbid_extra(ToolParam))
    if kind == "responses":
        from openai.types.responses import FunctionToolParam

        return pydantic.TypeAdapter(_forbid_extra(FunctionToolParam))
    from openai.types.chat import ChatCompletionFunctionToolParam

    return pydantic.TypeAdapter(_forbid_extra(ChatCompletionFunctionToolParam))


def validate_with_sdk(fmt: str, opts: dict[str, Any], definitions: list[dict[str, Any]]) -> None:
    """Validate the provider list with the provider's own SDK types (raises on failure)."""
    if fmt == "gemini":
        from google.genai import types as genai_types

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for tool in definitions:
                genai_types.Tool.model_validate(tool)
    elif fmt == "anthropic":
        for tool in definitions:
            _sdk_adapter("anthropic").validate_python(tool)
    elif opts.get("api") == "responses":
        for tool in definitions:
            _sdk_adapter("responses").validate_python(tool)
    else:
        for tool in definitions:
            _sdk_adapter("chat").validate_python(tool)


# ----------------------------------------------------------------------------- our rules

_GEMINI_KEYS = frozenset(
    {
        "type",
        "description",
        "nullable",
        "enum",
        "format",
        "properties",
        "required",
        "items",
        "anyOf",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "minProperties",
        "maxProperties",
    }
)
_GEMINI_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object"})
_STRICT_KEYS = frozenset(
    {
        "type",
        "description",
        "enum",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "$ref",
        "$defs",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
_ROOT_FORBIDDEN = frozenset({"anyOf", "oneOf", "allOf", "not", "if", "then", "else"})


def _subschemas(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"):
        if isinstance(node.get(key), dict):
            yield node[key]
    for key in ("anyOf", "allOf", "oneOf", "prefixItems"):
        for sub in node.get(key, []) or []:
            if isinstance(sub, dict):
                yield sub
    for key in ("properties", "$defs", "patternProperties", "dependentSchemas"):
        for sub in (node.get(key) or {}).values():
            if isinstance(sub, dict):
                yield sub


def walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every schema node of a schema, the root first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(_subschemas(current))


def _types(node: dict[str, Any]) -> list[str]:
    value = node.get("type", [])
    return [value] if isinstance(value, str) else list(value)


def check_json_schema_rules(schema: dict[str, Any]) -> None:
    """Draft 2020-12 validity plus the rules every JSON-Schema provider needs."""
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema.get("type") == "object", schema
    assert isinstance(schema.get("properties"), dict), schema
    assert not (_ROOT_FORBIDDEN & set(schema)), f"combinator at the root: {schema}"
    for node in walk(schema):
        types = _types(node)
        if "array" in types:
            assert "items" in node, f"array without items: {node}"
        if "object" in types:
            assert "properties" in node, f"object without properties: {node}"
        if "required" in node and "properties" in node and not ({"anyOf", "allOf", "$ref"} & set(node)):
            assert set(node["required"]) <= set(node["properties"]), f"required names a missing property: {node}"
        assert "oneOf" not in node and "const" not in node and "definitions" not in node, node
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/$defs/")
            assert node["$ref"].startswith("#/$defs/") and name in schema.get("$defs", {}), f"dangling {node}"


def check_strict_rules(schema: dict[str, Any]) -> None:
    """OpenAI strict mode's subset (what its server rejects, no SDK checks)."""
    check_json_schema_rules(schema)
    for node in walk(schema):
        assert set(node) <= _STRICT_KEYS, f"strict mode rejects {set(node) - _STRICT_KEYS}: {node}"
        if "$ref" in node:
            assert set(node) == {"$ref"}, f"$ref with siblings: {node}"
            continue
        assert "type" in node or "anyOf" in node, f"untyped node: {node}"
        if "object" in _types(node):
            assert node.get("additionalProperties") is False, node
            assert node["required"] == list(node["properties"]), node
        if "format" in node:
            assert node["format"] in _STRICT_FORMATS, node


def check_gemini_schema(schema: dict[str, Any], *, root: bool = True) -> None:
    """Gemini's OpenAPI subset (the rules its proto and server enforce)."""
    assert set(schema) <= _GEMINI_KEYS, f"Gemini rejects {set(schema) - _GEMINI_KEYS}: {schema}"
    assert "type" in schema or "anyOf" in schema, f"Gemini rejects a node without a type: {schema}"
    if root:
        assert schema.get("type") == "object" and schema.get("properties"), schema
    if "anyOf" in schema:
        assert schema["anyOf"], schema
        for branch in schema["anyOf"]:
            check_gemini_schema(branch, root=False)
    if "type" not in schema:
        return
    kind = schema["type"]
    assert isinstance(kind, str) and kind in _GEMINI_TYPES, f"type must be one name: {schema}"
    if "enum" in schema:
        assert kind == "string" and all(isinstance(v, str) for v in schema["enum"]), schema
    if "format" in schema:
        assert kind == "string" and schema["format"] in ("enum", "date-time"), schema
    if kind == "object":
        assert schema.get("properties"), f"Gemini rejects an object without properties: {schema}"
        assert set(schema.get("required", [])) <= set(schema["properties"]), schema
        for sub in schema["properties"].values():
            check_gemini_schema(sub, root=False)
    else:
        assert "properties" not in schema and "required" not in schema, schema
    if kind == "array":
        assert isinstance(schema.get("items"), dict), f"array without items: {schema}"
        check_gemini_schema(schema["items"], root=False)
    else:
        assert "items" not in schema, schema


def check_gemini_json_schema(schema: dict[str, Any]) -> None:
    """``parametersJsonSchema``: JSON Schema without ``$schema``/``title``, bare refs."""
    check_json_schema_rules(schema)
    for node in walk(schema):
        assert "$schema" not in node and "title" not in node, node
        if "$ref" in node:
            assert set(node) <= {"$ref", "description"}, f"$ref with siblings: {node}"


def check_definitions(
    fmt: str, opts: dict[str, Any], tools: list[McpTool], definitions: list[dict[str, Any]], notes: list[ConversionNote]
) -> None:
    """Everything we check of one converted tool list: SDK types, schemas, our rules."""
    validate_with_sdk(fmt, opts, definitions)
    if fmt == "gemini":
        if not tools:
            assert definitions == []
            return
        assert len(definitions) == 1 and set(definitions[0]) == {"functionDeclarations"}
        declarations = definitions[0]["functionDeclarations"]
        assert [d["name"] for d in declarations] == [t.id for t in tools]
        for declaration in declarations:
            if opts.get("json_schema"):
                check_gemini_json_schema(declaration["parametersJsonSchema"])
            elif "parameters" in declaration:
                jsonschema.Draft202012Validator.check_schema(declaration["parameters"])
                check_gemini_schema(declaration["parameters"])
        return
    assert len(definitions) == len(tools)
    fallbacks = {n.tool_id for n in notes if n.action is NoteAction.STRICT_FALLBACK}
    for tool, definition in zip(tools, definitions, strict=True):
        if fmt == "anthropic":
            assert definition["name"] == tool.id
            check_json_schema_rules(definition["input_schema"])
            continue
        function = definition if opts.get("api") == "responses" else definition["function"]
        assert function["name"] == tool.id
        parameters = function["parameters"]
        if opts.get("strict"):
            assert function["strict"] is (tool.id not in fallbacks)
            if function["strict"]:
                check_strict_rules(parameters)
            else:
                check_json_schema_rules(parameters)
        else:
            assert function.get("strict", False) is False
            check_json_schema_rules(parameters)


def convert_and_check(fmt: str, opts: dict[str, Any], tools: list[McpTool]) -> tuple[list[Any], list[ConversionNote]]:
    """Convert and run every check; returns what the converter returned."""
    definitions, notes = convert_tools_with_report(tools, fmt, **opts)
    check_definitions(fmt, opts, tools, definitions, notes)
    return definitions, notes


def parameters_of(fmt: str, opts: dict[str, Any], definition: dict[str, Any]) -> dict[str, Any] | None:
    """The schema part of one definition (a Gemini declaration, or a tool)."""
    if fmt == "gemini":
        return definition.get("parametersJsonSchema" if opts.get("json_schema") else "parameters")
    if fmt == "anthropic":
        return definition["input_schema"]
    return definition["parameters"] if opts.get("api") == "responses" else definition["function"]["parameters"]


def declarations(fmt: str, definitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-tool entries of a provider list."""
    if fmt == "gemini":
        return definitions[0]["functionDeclarations"] if definitions else []
    return definitions
