"""process_json_schema: the reference design's rules plus the shared normalisation pass."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from formats_checks import check_json_schema_rules, make_tool

from mcp_actors.formats import NoteAction, convert_mcp_tools_to_anthropic_with_report, process_json_schema

EMPTY = {"type": "object", "properties": {}, "required": []}


@pytest.mark.parametrize("schema", [None, {}, [], "object", 5, True, ["type", "object"]])
def test_empty_or_non_object_schema_becomes_the_empty_object(schema: Any) -> None:
    """An empty schema, or one that is not a JSON object, becomes the empty object schema."""
    assert process_json_schema(schema) == EMPTY


def test_object_schema_keeps_properties_required_and_description() -> None:
    """A ``type: object`` schema keeps its properties, required and description."""
    schema = {
        "type": "object",
        "description": "read a file",
        "properties": {"path": {"type": "string", "description": "where"}, "n": {"type": "integer"}},
        "required": ["path"],
    }
    assert process_json_schema(schema) == schema


def test_schema_without_type_is_taken_as_an_object() -> None:
    """A root with properties but no ``type`` becomes an object schema."""
    out = process_json_schema({"properties": {"a": {"type": "string"}}, "required": ["a"]})
    assert out == {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def test_non_object_root_is_wrapped_as_an_object() -> None:
    """A root of another type is wrapped as the object's ``value`` property, and reported."""
    tool = make_tool({"type": "string", "description": "the text"})
    (definition,), notes = convert_mcp_tools_to_anthropic_with_report([tool])
    assert definition["input_schema"] == {
        "type": "object",
        "properties": {"value": {"type": "string", "description": "the text"}},
        "required": ["value"],
    }
    assert [n.action for n in notes] == [NoteAction.WRAPPED]


def test_input_schema_is_not_modified() -> None:
    """The caller's schema is left exactly as it was."""
    schema = {
        "allOf": [{"$ref": "#/definitions/A"}],
        "definitions": {"A": {"type": "object", "properties": {"x": {"const": 1}}, "required": ["x", "y"]}},
    }
    original = copy.deepcopy(schema)
    process_json_schema(schema)
    assert schema == original


def test_definitions_become_defs_and_refs_follow() -> None:
    """Draft-7 ``definitions`` move to ``$defs`` and every ref is rewritten to match."""
    out = process_json_schema(
        {
            "type": "object",
            "definitions": {"Color": {"type": "string", "enum": ["red", "blue"]}},
            "properties": {
                "a": {"$ref": "#/definitions/Color"},
                "b": {"type": "array", "items": {"$ref": "#/definitions/Color"}},
            },
        }
    )
    assert "definitions" not in out
    assert out["$defs"] == {"Color": {"type": "string", "enum": ["red", "blue"]}}
    assert out["properties"]["a"] == {"$ref": "#/$defs/Color"}
    assert out["properties"]["b"]["items"] == {"$ref": "#/$defs/Color"}
    check_json_schema_rules(out)


def test_unused_definitions_are_removed() -> None:
    """Definitions no ref reaches are not sent."""
    out = process_json_schema({"type": "object", "properties": {}, "$defs": {"Unused": {"type": "string"}}})
    assert "$defs" not in out


def test_ref_to_any_pointer_is_hoisted_into_defs() -> None:
    """A ref to another property (zod-to-json-schema's reuse) becomes a ``$defs`` entry."""
    out = process_json_schema(
        {
            "type": "object",
            "properties": {
                "from": {"type": "object", "properties": {"lat": {"type": "number"}}},
                "to": {"$ref": "#/properties/from"},
            },
        }
    )
    assert out["properties"]["to"] == {"$ref": "#/$defs/from"}
    assert out["$defs"]["from"] == out["properties"]["from"]
    check_json_schema_rules(out)


def test_recursive_ref_to_the_root_is_kept_resolvable() -> None:
    """``$ref: "#"`` (the root itself) becomes a definition, so the recursion still resolves."""
    out = process_json_schema({"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}})
    assert out["properties"]["next"] == {"$ref": "#/$defs/Root"}
    assert out["$defs"]["Root"]["properties"]["next"] == {"$ref": "#/$defs/Root"}
    check_json_schema_rules(out)


def test_root_ref_is_inlined() -> None:
    """A root that is only a ``$ref`` (with its definitions beside it) becomes that object."""
    out = process_json_schema(
        {
            "$ref": "#/definitions/Args",
            "definitions": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}},
            "$schema": "http://json-schema.org/draft-07/schema#",
        }
    )
    assert out == {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def test_unresolvable_ref_is_replaced_and_reported() -> None:
    """A ref outside the schema is removed, named in the description, and reported."""
    tool = make_tool(
        {"type": "object", "properties": {"c": {"$ref": "https://example.com/c.json", "description": "config"}}}
    )
    (definition,), notes = convert_mcp_tools_to_anthropic_with_report([tool])
    prop = definition["input_schema"]["properties"]["c"]
    assert "$ref" not in prop
    assert "https://example.com/c.json" in prop["description"] and prop["description"].startswith("config")
    assert [(n.path, n.action) for n in notes] == [("/properties/c/$ref", NoteAction.UNRESOLVED_REF)]


def test_one_of_becomes_any_of() -> None:
    """``oneOf`` is read as ``anyOf`` (reported, since exactly-one is not enforced)."""
    tool = make_tool({"type": "object", "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}})
    (definition,), notes = convert_mcp_tools_to_anthropic_with_report([tool])
    assert definition["input_schema"]["properties"]["v"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert [(n.path, n.action) for n in notes] == [("/properties/v/oneOf", NoteAction.REWRITTEN)]


def test_const_becomes_enum_and_const_alternatives_collapse() -> None:
    """``const`` becomes a one-value ``enum``; alternatives of consts become one enum."""
    out = process_json_schema(
        {"type": "object", "properties": {"k": {"const": "x"}, "m": {"oneOf": [{"const": "fast"}, {"const": "slow"}]}}}
    )
    assert out["properties"] == {"k": {"enum": ["x"]}, "m": {"enum": ["fast", "slow"]}}


def test_one_element_all_of_is_merged() -> None:
    """A one-branch ``allOf`` (pydantic v1 around a ref) merges into its node."""
    out = process_json_schema(
        {
            "type": "object",
            "definitions": {"Color": {"type": "string", "enum": ["red"]}},
            "properties": {"c": {"allOf": [{"$ref": "#/definitions/Color"}], "description": "the color"}},
        }
    )
    assert out["properties"]["c"] == {"$ref": "#/$defs/Color", "description": "the color"}


def test_root_all_of_is_merged_with_refs_resolved() -> None:
    """A root ``allOf`` merges its branches (refs resolved) into one object; required is the union."""
    out = process_json_schema(
        {
            "allOf": [
                {"$ref": "#/$defs/Base"},
                {"type": "object", "properties": {"extra": {"type": "string"}}, "required": ["extra"]},
            ],
            "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
        }
    )
    assert out == {
        "type": "object",
        "properties": {"id": {"type": "string"}, "extra": {"type": "string"}},
        "required": ["id", "extra"],
    }


def test_root_any_of_is_folded_and_described() -> None:
    """A root union becomes one object; shapes go to the description, required to the common part."""
    tool = make_tool(
        {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["path", "n"],
                },
                {
                    "type": "object",
                    "properties": {"url": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["url", "n"],
                },
            ]
        },
        description="Fetch.",
    )
    (definition,), notes = convert_mcp_tools_to_anthropic_with_report([tool])
    schema = definition["input_schema"]
    assert "anyOf" not in schema
    assert list(schema["properties"]) == ["path", "n", "url"]
    assert schema["required"] == ["n"]
    assert definition["description"].startswith("Fetch.\n\n")
    assert (
        "Accepts one of 2 argument shapes: 1) path, n (required: path, n); 2) url, n (required: url, n)"
        in definition["description"]
    )
    assert [(n.path, n.action) for n in notes] == [("/anyOf", NoteAction.MERGED)]


def test_root_union_information_goes_to_root_description_without_a_tool() -> None:
    """process_json_schema, having no tool, appends the folded union to the root description."""
    out = process_json_schema(
        {
            "description": "Args.",
            "oneOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}}],
        }
    )
    assert out["description"].startswith("Args.\n\nAccepts one of 2 argument shapes")
    assert set(out["properties"]) == {"a", "b"}


def test_root_not_and_conditionals_move_to_the_description() -> None:
    """Root ``not``/``if``/``then`` are not allowed by providers; they are restated."""
    out = process_json_schema(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "not": {"required": ["b"]},
            "if": {"required": ["a"]},
        }
    )
    assert set(out) == {"type", "properties", "required", "description"}
    assert 'not: {"required": ["b"]}' in out["description"] and 'if: {"required": ["a"]}' in out["description"]


def test_required_is_limited_to_existing_properties() -> None:
    """Names in ``required`` without a property schema are dropped and restated."""
    out = process_json_schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "o": {"type": "object", "properties": {"x": {}}, "required": ["x", "y"]},
            },
            "required": ["a", "ghost"],
        }
    )
    assert out["required"] == ["a"]
    assert out["properties"]["o"]["required"] == ["x"]
    assert "required keys: y" in out["properties"]["o"]["description"]
    assert "required keys: ghost" in out["description"]


def test_arrays_always_have_items_and_objects_properties() -> None:
    """An array without ``items`` gets ``items: {}``; an object without ``properties`` gets ``{}``."""
    out = process_json_schema(
        {"type": "object", "properties": {"l": {"type": "array"}, "m": {"type": "array", "items": {"type": "object"}}}}
    )
    assert out["properties"]["l"] == {"type": "array", "items": {}}
    assert out["properties"]["m"] == {"type": "array", "items": {"type": "object", "properties": {}}}


def test_openapi_nullable_becomes_a_type_list() -> None:
    """OpenAPI's ``nullable: true`` becomes the JSON Schema type list with ``null``."""
    out = process_json_schema({"type": "object", "properties": {"n": {"type": "integer", "nullable": True}}})
    assert out["properties"]["n"] == {"type": ["integer", "null"]}


def test_draft4_forms_become_2020_12() -> None:
    """Boolean exclusiveMinimum, array-form items and ``dependencies`` are rewritten."""
    out = process_json_schema(
        {
            "type": "object",
            "properties": {
                "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False},
            },
        }
    )
    assert out["properties"]["n"] == {"type": "number", "exclusiveMinimum": 0}
    pair = out["properties"]["pair"]
    assert pair["items"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert pair["maxItems"] == 2 and "in this order" in pair["description"]
    jsonschema.Draft202012Validator.check_schema(out)


def test_invalid_keyword_values_and_unknown_keywords_are_dropped_and_reported() -> None:
    """Wrongly typed values and unknown keywords are removed; each removal is a note."""
    tool = make_tool(
        {"type": "object", "x-internal": 1, "properties": {"a": {"type": "String", "minLength": -1, "pattern": "("}}}
    )
    (definition,), notes = convert_mcp_tools_to_anthropic_with_report([tool])
    assert definition["input_schema"]["properties"]["a"] == {"type": "string", "description": '(pattern: "(")'}
    assert {(n.path, n.action) for n in notes} == {
        ("/x-internal", NoteAction.DROPPED),
        ("/properties/a/type", NoteAction.REWRITTEN),
        ("/properties/a/minLength", NoteAction.DROPPED),
        ("/properties/a/pattern", NoteAction.MOVED_TO_DESCRIPTION),
    }
