"""Property tests: arbitrary schemas never crash a converter and always give valid output."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from formats_checks import PROFILES, check_definitions, declarations, make_tool, parameters_of
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mcp_actors.formats import convert_tools_with_report, process_json_schema

_counter = itertools.count()

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-10, 10, allow_nan=False) | st.text(max_size=4)
type_names = st.sampled_from(["string", "number", "integer", "boolean", "array", "object", "null", "any", "Int", 7])
names = st.text(max_size=6) | st.sampled_from(["a", "b", "ключ", "a.b", "a/b~c", "$ref", "properties"])
refs = st.sampled_from(
    [
        "#",
        "#/$defs/A",
        "#/$defs/B",
        "#/definitions/C",
        "#/properties/a",
        "#/$defs/A/properties/a",
        "#/nowhere",
        "https://example.com/x.json",
        "#anchor",
        "#/$defs/A/items/0",
    ]
)
leaf_keys: dict[str, Any] = {
    "type": type_names | st.lists(type_names, max_size=3),
    "enum": st.lists(scalars, max_size=4) | scalars,
    "const": scalars,
    "format": st.sampled_from(["date-time", "email", "uri", "enum", "int64", ""]),
    "pattern": st.sampled_from(["^a+$", "(?=x)y", "[", "\\p{L}", "\\d{3}"]),
    "minimum": st.integers(-3, 3) | st.floats(allow_nan=True) | st.text(max_size=2),
    "exclusiveMinimum": st.booleans() | st.integers(-3, 3),
    "maxLength": st.integers(-2, 5) | st.floats(0, 3),
    "minItems": st.integers(0, 3),
    "description": st.text(max_size=8) | st.integers(),
    "title": st.text(max_size=4),
    "default": scalars,
    "examples": st.lists(scalars, max_size=2) | scalars,
    "nullable": st.booleans(),
    "$ref": refs,
    "$schema": st.just("http://json-schema.org/draft-07/schema#"),
    "x-junk": scalars,
    "required": st.lists(names, max_size=3) | st.booleans(),
    "additionalProperties": st.booleans(),
    "uniqueItems": st.booleans(),
}
leaves = st.fixed_dictionaries({}, optional=leaf_keys) | st.booleans()


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            **leaf_keys,
            "properties": st.dictionaries(names, children, max_size=4),
            "items": children | st.lists(children, max_size=2),
            "prefixItems": st.lists(children, max_size=2),
            "additionalItems": children,
            "anyOf": st.lists(children, max_size=3),
            "oneOf": st.lists(children, max_size=3),
            "allOf": st.lists(children, max_size=3),
            "not": children,
            "additionalProperties": children,
            "patternProperties": st.dictionaries(st.sampled_from(["^x", "[", "y$"]), children, max_size=2),
            "dependencies": st.dictionaries(names, children | st.lists(names, max_size=2), max_size=2),
            "if": children,
            "then": children,
            "$defs": st.dictionaries(st.sampled_from(["A", "B", "a/b"]), children, max_size=2),
        },
    )


schemas = st.recursive(leaves, _extend, max_leaves=15)
roots = (
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["object", "string", ["object", "null"]]),
            "properties": st.dictionaries(names, schemas, max_size=4),
        },
        optional={
            "$defs": st.fixed_dictionaries({"A": schemas}, optional={"B": schemas}),
            "definitions": st.fixed_dictionaries({"C": schemas}),
            "anyOf": st.lists(schemas, max_size=3),
            "oneOf": st.lists(schemas, max_size=3),
            "allOf": st.lists(schemas, max_size=3),
            "required": st.lists(names, max_size=3),
            "$ref": refs,
            "$schema": st.just("http://json-schema.org/draft-07/schema#"),
        },
    )
    | schemas
    | scalars
    | st.lists(scalars, max_size=2)
)

HYPOTHESIS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    # no "explain" phase: its tracing makes shrinking these nested schemas very slow
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


def _fresh_tool(schema: Any) -> Any:
    # a new id per conversion: the cache never answers for an earlier example
    return make_tool(schema, name=f"t{next(_counter)}")


@HYPOTHESIS
@given(schema=roots)
def test_any_schema_converts_to_valid_output(schema: Any) -> None:
    """Every generated schema converts, for every profile, into output the provider accepts."""
    original = copy.deepcopy(schema)
    for fmt, opts in PROFILES:
        tool = _fresh_tool(schema)
        definitions, notes = convert_tools_with_report([tool], fmt, **opts)
        check_definitions(fmt, opts, [tool], definitions, notes)
        assert all(note.tool_id == tool.id for note in notes)
    assert schema == original, "the converters must not modify their input"


@HYPOTHESIS
@given(schema=roots)
def test_converting_twice_gives_the_same_result(schema: Any) -> None:
    """Converting a schema again, and converting the output again, change nothing."""
    for fmt, opts in PROFILES:
        first = convert_tools_with_report([_fresh_tool(schema)], fmt, **opts)[0]
        again = convert_tools_with_report([_fresh_tool(copy.deepcopy(schema))], fmt, **opts)[0]
        once = parameters_of(fmt, opts, declarations(fmt, first)[0])
        assert parameters_of(fmt, opts, declarations(fmt, again)[0]) == once
        if once is None:  # a Gemini tool without parameters
            continue
        twice = convert_tools_with_report([_fresh_tool(once)], fmt, **opts)[0]
        assert parameters_of(fmt, opts, declarations(fmt, twice)[0]) == once, (fmt, opts)


@HYPOTHESIS
@given(schema=roots)
def test_process_json_schema_is_idempotent_and_valid(schema: Any) -> None:
    """The shared pass yields a root object schema and is a fixed point on its own output."""
    once = process_json_schema(schema)
    assert once["type"] == "object" and isinstance(once["properties"], dict)
    assert set(once["required"]) <= set(once["properties"])
    assert process_json_schema(once) == once
