"""The provider profiles: OpenAI (chat, responses, strict), Anthropic and Gemini."""

from __future__ import annotations

import json
from typing import Any

import pytest
from formats_checks import (
    check_gemini_json_schema,
    check_gemini_schema,
    check_strict_rules,
    convert_and_check,
    corpus_tools,
    make_tool,
)

from mcp_actors.formats import (
    GEMINI_MAX_DECLARATIONS,
    ConversionNote,
    NoteAction,
    convert_mcp_tools_to_anthropic,
    convert_mcp_tools_to_anthropic_with_report,
    convert_mcp_tools_to_gemini,
    convert_mcp_tools_to_gemini_with_report,
    convert_mcp_tools_to_openai,
    convert_mcp_tools_to_openai_with_report,
    convert_tools,
)

SIMPLE = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "file"}, "n": {"type": "integer"}},
    "required": ["path"],
}


def handwritten(name: str) -> Any:
    """One hand-written corpus tool (each is a failure named in the issue)."""
    (tool,) = [t for t in corpus_tools() if t.server_name == "handwritten" and t.name == name]
    return tool


def notes_at(notes: list[ConversionNote], action: NoteAction) -> set[str]:
    return {n.path for n in notes if n.action is action}


# ----------------------------------------------------------------------------- OpenAI


def test_openai_chat_shape() -> None:
    """Chat Completions: ``{"type": "function", "function": {name, description, parameters}}``."""
    tool = make_tool(SIMPLE, name="read", description="Read a file.")
    assert convert_mcp_tools_to_openai([tool]) == [
        {"type": "function", "function": {"name": tool.id, "description": "Read a file.", "parameters": SIMPLE}}
    ]


def test_openai_responses_shape_always_says_strict() -> None:
    """Responses API: a flat function tool whose ``strict`` is always given (it defaults to true)."""
    tool = make_tool(SIMPLE, name="read", description="Read a file.")
    definitions, _ = convert_and_check("openai", {"api": "responses"}, [tool])
    assert definitions == [
        {"type": "function", "name": tool.id, "description": "Read a file.", "parameters": SIMPLE, "strict": False}
    ]


def test_openai_rejects_an_unknown_api() -> None:
    """``api`` is "chat" or "responses"; anything else is a ValueError naming the value."""
    with pytest.raises(ValueError, match="'assistants'"):
        convert_mcp_tools_to_openai([make_tool(SIMPLE)], api="assistants")


def test_openai_gets_items_properties_and_no_root_combinator() -> None:
    """The failures the issue names for OpenAI: missing items/properties, a root union."""
    tools = [handwritten("array_without_items"), handwritten("object_without_properties"), handwritten("root_anyof")]
    definitions, _ = convert_and_check("openai", {}, tools)
    lists, objects, union = (d["function"]["parameters"] for d in definitions)
    assert lists["properties"]["list"] == {"type": "array", "items": {}}
    assert lists["properties"]["matrix"]["items"] == {"type": "array", "items": {}}
    assert objects["properties"]["meta"] == {"type": "object", "properties": {}}
    assert "anyOf" not in union and set(union["properties"]) == {"path", "url"}


def test_openai_strict_makes_every_object_closed_and_fully_required() -> None:
    """Strict: ``additionalProperties: false`` everywhere, all properties required, optional ones nullable."""
    tool = make_tool(
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "opts": {"type": "object", "properties": {"depth": {"type": "integer"}, "mode": {"enum": ["a", "b"]}}},
            },
            "required": ["path"],
        }
    )
    definitions, notes = convert_and_check("openai", {"strict": True}, [tool])
    function = definitions[0]["function"]
    assert function["strict"] is True
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "opts": {
                "type": ["object", "null"],
                "properties": {
                    "depth": {"type": ["integer", "null"]},
                    "mode": {"type": ["string", "null"], "enum": ["a", "b", None]},
                },
                "required": ["depth", "mode"],
                "additionalProperties": False,
            },
        },
        "required": ["path", "opts"],
        "additionalProperties": False,
    }
    assert [n.detail for n in notes] == [
        "3 optional properties are required and nullable in strict mode: the model sends null for a value it omits"
    ]


def test_openai_strict_moves_unsupported_keywords_into_descriptions() -> None:
    """Strict: string lengths, unknown formats, defaults are restated; supported formats stay."""
    tool = make_tool(
        {
            "type": "object",
            "properties": {
                "url": {"type": "string", "format": "uri", "minLength": 3, "description": "where"},
                "mail": {"type": "string", "format": "email"},
                "n": {"type": "integer", "minimum": 1, "default": 5, "title": "N"},
            },
            "required": ["url", "mail", "n"],
        }
    )
    definitions, notes = convert_and_check("openai", {"strict": True}, [tool])
    props = definitions[0]["function"]["parameters"]["properties"]
    assert props["url"] == {"type": "string", "description": "where (format: uri; minLength: 3)"}
    assert props["mail"] == {"type": "string", "format": "email"}
    assert props["n"] == {"type": "integer", "minimum": 1, "description": "(default: 5)"}
    assert notes_at(notes, NoteAction.MOVED_TO_DESCRIPTION) == {
        "/properties/url/format",
        "/properties/url/minLength",
        "/properties/n/default",
    }
    assert notes_at(notes, NoteAction.DROPPED) == {"/properties/n/title"}


def test_openai_strict_merges_all_of() -> None:
    """Strict: an ``allOf`` that merges cleanly is merged and the tool stays strict."""
    definitions, notes = convert_and_check("openai", {"strict": True}, [handwritten("allof_nested")])
    function = definitions[0]["function"]
    assert function["strict"] is True
    item = function["parameters"]["properties"]["item"]
    assert item["properties"] == {"id": {"type": "string"}, "qty": {"type": ["integer", "null"], "minimum": 1}}
    assert not notes_at(notes, NoteAction.STRICT_FALLBACK)


@pytest.mark.parametrize(
    ("name", "path", "reason"),
    [
        ("allof_conflict", "/properties/v", "an allOf that does not merge"),
        ("object_without_properties", "/properties/meta", "an object without properties"),
        ("additional_properties", "/properties/opts", "additionalProperties"),
    ],
)
def test_openai_strict_falls_back_to_non_strict_and_says_why(name: str, path: str, reason: str) -> None:
    """Strict mode that cannot express a tool sends it with ``strict: false`` and one note."""
    tool = handwritten(name)
    definitions, notes = convert_and_check("openai", {"strict": True}, [tool])
    function = definitions[0]["function"]
    assert function["strict"] is False
    assert function["parameters"] == convert_mcp_tools_to_openai([tool])[0]["function"]["parameters"]
    (fallback,) = [n for n in notes if n.action is NoteAction.STRICT_FALLBACK]
    assert fallback.path == path and reason in fallback.detail and fallback.tool_id == tool.id
    assert all(n.action is not NoteAction.MOVED_TO_DESCRIPTION or "strict" not in n.detail for n in notes)


def test_openai_strict_inlines_refs_with_siblings_and_keeps_recursion_in_defs() -> None:
    """Strict: a ``$ref`` beside a description is inlined; a recursive one stays a bare ref."""
    definitions, _ = convert_and_check(
        "openai", {"strict": True}, [handwritten("ref_defs"), handwritten("recursive_ref")]
    )
    refs, recursive = (d["function"]["parameters"] for d in definitions)
    assert refs["properties"]["a"]["description"] == "start" and "$ref" not in refs["properties"]["a"]
    assert refs["properties"]["b"] == {"$ref": "#/$defs/Point"}
    assert recursive["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    check_strict_rules(recursive)


# ----------------------------------------------------------------------------- Anthropic


def test_anthropic_shape() -> None:
    """Anthropic: ``{name, description, input_schema}``."""
    tool = make_tool(SIMPLE, name="read", description="Read a file.")
    assert convert_mcp_tools_to_anthropic([tool]) == [
        {"name": tool.id, "description": "Read a file.", "input_schema": SIMPLE}
    ]


@pytest.mark.parametrize("name", ["root_anyof", "root_oneof", "root_allof"])
def test_anthropic_has_no_combinator_at_the_root(name: str) -> None:
    """Root ``anyOf``/``oneOf``/``allOf`` (rejected by Anthropic) are folded into one object."""
    definitions, _ = convert_and_check("anthropic", {}, [handwritten(name)])
    schema = definitions[0]["input_schema"]
    assert schema["type"] == "object" and not {"anyOf", "oneOf", "allOf"} & set(schema)


# ----------------------------------------------------------------------------- Gemini


def gemini_parameters(tool: Any, **opts: Any) -> tuple[dict[str, Any], list[ConversionNote]]:
    definitions, notes = convert_and_check("gemini", opts, [tool])
    (declaration,) = definitions[0]["functionDeclarations"]
    return declaration, notes


def test_gemini_wraps_declarations_and_empty_lists() -> None:
    """Gemini: ``[{"functionDeclarations": [...]}]``; no tools gives an empty list."""
    tool = make_tool(SIMPLE, name="read", description="Read a file.")
    assert convert_mcp_tools_to_gemini([tool]) == [
        {"functionDeclarations": [{"name": tool.id, "description": "Read a file.", "parameters": SIMPLE}]}
    ]
    assert convert_mcp_tools_to_gemini([]) == []


def test_gemini_drops_additional_properties_and_schema_and_reports_them() -> None:
    """``additionalProperties`` and ``$schema`` (Gemini rejects both) are gone; each drop is reported."""
    declaration, notes = gemini_parameters(handwritten("additional_properties"))
    assert '"additionalProperties"' not in json.dumps(declaration["parameters"])
    assert declaration["parameters"]["properties"]["opts"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }
    assert {"/additionalProperties", "/properties/opts/additionalProperties"} <= notes_at(notes, NoteAction.DROPPED)
    declaration, _ = gemini_parameters(handwritten("dollar_schema"))
    assert declaration["parameters"] == {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def test_gemini_type_lists_become_nullable_or_any_of() -> None:
    """``["string", "null"]`` → nullable string; several types → ``anyOf`` with each type's keywords."""
    declaration, _ = gemini_parameters(handwritten("type_array_nullable"))
    props = declaration["parameters"]["properties"]
    assert props["maybe"] == {"type": "string", "description": "optional text", "nullable": True}
    assert props["many"] == {
        "anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "number", "minimum": 0},
            {"type": "array", "items": {"type": "string"}},
        ]
    }
    assert props["nullable_enum"] == {"type": "string", "enum": ["a", "b"], "nullable": True}
    assert props["openapi_nullable"] == {"type": "integer", "nullable": True}


def test_gemini_any_of_with_null_becomes_nullable() -> None:
    """``anyOf: [X, {"type": "null"}]`` becomes X with ``nullable: true``."""
    tool = make_tool(
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "d"}}}
    )
    declaration, _ = gemini_parameters(tool)
    assert declaration["parameters"]["properties"]["a"] == {"type": "string", "description": "d", "nullable": True}


def test_gemini_inlines_refs() -> None:
    """``$ref``/``$defs`` are inlined; the ref's own description stays."""
    declaration, _ = gemini_parameters(handwritten("ref_defs"))
    props = declaration["parameters"]["properties"]
    point = {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}
    assert props["a"] == {**point, "description": "start"}
    assert props["b"] == point
    assert props["maybe"] == {**point, "nullable": True}


def test_gemini_cuts_recursion_with_a_described_string() -> None:
    """A recursive ref is unrolled twice, then becomes a string asking for JSON, reported."""
    declaration, notes = gemini_parameters(handwritten("recursive_ref"))
    tree = declaration["parameters"]["properties"]["tree"]
    level2 = tree["properties"]["children"]["items"]
    assert level2["properties"]["children"]["items"] == {
        "type": "string",
        "description": "(a Node value, given as JSON text)",
    }
    assert notes_at(notes, NoteAction.RECURSION_CUT) == {
        "/properties/tree/properties/children/items/properties/children/items"
    }


def test_gemini_cuts_recursion_through_an_allof_ref() -> None:
    """A ``$ref`` back to the root inside an ``allOf`` is unrolled a bounded number of times.

    Found by the hypothesis test in a CI run: the ``allOf`` merge inlined the
    root without counting it as an unroll, and the conversion recursed until Python's
    recursion limit. Now it is cut like any recursive ref, and reported.
    """
    schema = {
        "type": "object",
        "properties": {"": {"anyOf": [{}, {}], "allOf": [{}, {"type": "string", "$ref": "#"}]}},
    }
    declaration, notes = gemini_parameters(make_tool(schema, name="loop"))
    assert declaration["parameters"]["type"] == "object"
    assert notes_at(notes, NoteAction.RECURSION_CUT)


@pytest.mark.parametrize("opts", [{}, {"strict": True}, {"api": "responses"}])
def test_openai_converts_an_allof_ref_back_to_the_root(opts: dict[str, Any]) -> None:
    """The same schema through OpenAI's profiles: converted (or left loose in strict mode), never a crash."""
    schema = {
        "type": "object",
        "properties": {"": {"anyOf": [{}, {}], "allOf": [{}, {"type": "string", "$ref": "#"}]}},
    }
    definitions, _ = convert_and_check("openai", opts, [make_tool(schema, name="loop")])
    assert len(definitions) == 1


def test_gemini_enums_are_strings_and_formats_limited() -> None:
    """Non-string enums, formats other than enum/date-time, and unsupported keywords are restated."""
    declaration, notes = gemini_parameters(handwritten("gemini_unsupported"))
    props = declaration["parameters"]["properties"]
    assert props["email"] == {"type": "string", "description": '(format: email; examples: ["a@b.c"])'}
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["code"] == {"type": "string", "description": "(pattern: ^(?!x)[a-z]+$)"}
    assert props["count"] == {
        "type": "integer",
        "maximum": 10,
        "description": "(greater than: 0; default: 1; multiple of: 2)",
    }
    assert props["level"] == {"type": "integer", "description": "(one of: 1, 2, 3)"}
    assert props["flag"] == {"type": "boolean", "description": "(one of: true)"}
    assert props["mixed"] == {"type": "string", "description": '(one of: "a", 1)'}
    assert "patternProperties" in props["by_pattern"]["description"]
    assert notes_at(notes, NoteAction.DROPPED) == {"/properties/email/title"}


def test_gemini_objects_without_properties() -> None:
    """A tool without arguments has no ``parameters``; a free-form nested object becomes described text."""
    declaration, _ = gemini_parameters(handwritten("no_arguments"))
    assert declaration == {
        "name": handwritten("no_arguments").id,
        "description": handwritten("no_arguments").description,
    }
    declaration, notes = gemini_parameters(handwritten("object_without_properties"))
    props = declaration["parameters"]["properties"]
    assert props["meta"] == {"type": "string", "description": "(a JSON object, given as JSON text)"}
    assert props["anything"] == {"type": "string", "description": "(any JSON value, given as JSON text)"}
    assert notes_at(notes, NoteAction.PLACEHOLDER) == {"/properties/meta", "/properties/anything"}


def test_gemini_arrays_always_have_typed_items() -> None:
    """An array without ``items`` gets a typed ``items`` (Gemini: "items: missing field")."""
    declaration, _ = gemini_parameters(handwritten("array_without_items"))
    props = declaration["parameters"]["properties"]
    assert props["list"] == {
        "type": "array",
        "items": {"type": "string", "description": "(any JSON value, given as JSON text)"},
    }
    assert props["matrix"]["items"]["type"] == "array" and props["matrix"]["items"]["items"]["type"] == "string"


def test_gemini_json_schema_path() -> None:
    """``json_schema=True``: ``parametersJsonSchema`` without ``$schema``/``title``, bare refs."""
    declaration, notes = gemini_parameters(handwritten("ref_defs"), json_schema=True)
    schema = declaration["parametersJsonSchema"]
    assert "parameters" not in declaration
    check_gemini_json_schema(schema)
    assert schema["properties"]["a"] == {"$ref": "#/$defs/Point", "description": "start"}
    assert schema["properties"]["maybe"] == {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": None}
    assert schema["$defs"]["Point"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
    }
    assert notes_at(notes, NoteAction.DROPPED) == {"/$defs/Point/title"}


def test_gemini_json_schema_inlines_a_ref_with_other_siblings() -> None:
    """A ref beside keywords other than description is inlined, with the siblings merged in."""
    tool = make_tool(
        {
            "type": "object",
            "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "title": "P"}},
            "properties": {"p": {"$ref": "#/$defs/P", "description": "d", "default": {"x": 1}}},
        }
    )
    declaration, _ = gemini_parameters(tool, json_schema=True)
    assert declaration["parametersJsonSchema"] == {
        "type": "object",
        "properties": {
            "p": {"type": "object", "properties": {"x": {"type": "number"}}, "description": "d", "default": {"x": 1}}
        },
        "required": [],
    }


def test_gemini_reports_more_declarations_than_it_accepts() -> None:
    """More than 512 declarations are still converted, with a LIMIT note naming the first extra."""
    tools = [make_tool(SIMPLE, name=f"t{i}") for i in range(GEMINI_MAX_DECLARATIONS + 1)]
    definitions, notes = convert_mcp_tools_to_gemini_with_report(tools)
    assert len(definitions[0]["functionDeclarations"]) == GEMINI_MAX_DECLARATIONS + 1
    assert [(n.tool_id, n.action) for n in notes] == [(tools[GEMINI_MAX_DECLARATIONS].id, NoteAction.LIMIT)]


def test_gemini_handwritten_failures_all_pass_the_gemini_rules() -> None:
    """Every hand-written failure case satisfies Gemini's subset after conversion."""
    tools = [t for t in corpus_tools() if t.server_name == "handwritten"]
    definitions, _ = convert_and_check("gemini", {}, tools)
    for declaration in definitions[0]["functionDeclarations"]:
        if "parameters" in declaration:
            check_gemini_schema(declaration["parameters"])


# ----------------------------------------------------------------------------- all


def test_plain_functions_return_what_the_report_variants_return() -> None:
    """Each plain converter returns exactly the definitions of its ``_with_report`` twin."""
    tools = [t for t in corpus_tools() if t.server_name == "handwritten"]
    assert (
        convert_mcp_tools_to_openai(tools, strict=True)
        == convert_mcp_tools_to_openai_with_report(tools, strict=True)[0]
    )
    assert convert_mcp_tools_to_anthropic(tools) == convert_mcp_tools_to_anthropic_with_report(tools)[0]
    assert (
        convert_mcp_tools_to_gemini(tools, json_schema=True)
        == convert_mcp_tools_to_gemini_with_report(tools, json_schema=True)[0]
    )
    assert convert_tools(tools, "google") == convert_tools(tools, "gemini") == convert_mcp_tools_to_gemini(tools)


@pytest.mark.parametrize(
    ("fmt", "opts"),
    [
        ("anthropic", {"strict": True}),
        ("gemini", {"api": "responses"}),
        ("openai", {"json_schema": True}),
        ("mistral", {}),
    ],
)
def test_options_that_do_not_apply_are_refused(fmt: str, opts: dict[str, Any]) -> None:
    """An unknown format, or an option of another provider, is a ValueError."""
    with pytest.raises(ValueError, match=fmt):
        convert_tools([make_tool(SIMPLE)], fmt, **opts)


def test_root_information_is_appended_to_the_tool_description() -> None:
    """What the root schema can no longer say is added to the tool's description, after its own."""
    tool = make_tool({"type": "object", "properties": {}, "examples": [{"a": 1}]}, description="Do it.")
    for definition in convert_mcp_tools_to_anthropic([tool]), convert_mcp_tools_to_openai([tool]):
        text = json.dumps(definition)
        assert 'Do it.\\n\\nexamples: [{\\"a\\": 1}]' in text


def test_returned_definitions_can_be_edited_without_touching_the_cache() -> None:
    """A caller adding keys to a returned tool (cache_control, strict) does not change the next result."""
    tool = make_tool(SIMPLE)
    first = convert_mcp_tools_to_anthropic([tool])
    first[0]["cache_control"] = {"type": "ephemeral"}
    chat = convert_mcp_tools_to_openai([tool])
    chat[0]["function"]["strict"] = True
    assert "cache_control" not in convert_mcp_tools_to_anthropic([tool])[0]
    assert "strict" not in convert_mcp_tools_to_openai([tool])[0]["function"]
