"""A ``tools/call`` answer is validated once, into exactly what the SDK's own validation builds.

``mcp_actors._connection.live._call_result`` validates the content blocks by their ``type`` literal
(a discriminated list of the SDK's ``ContentBlock`` members) before the result itself,
because the SDK's plain union tries every member on every block. These tests hold it to
the SDK's ``CallToolResult.model_validate``: the same model for every kind of block, and
a refusal for what the SDK refuses.
"""

from __future__ import annotations

from typing import Any

import mcp.types as mcp_types
import pytest
from pydantic import ValidationError

from mcp_actors._connection.live import _call_result

BLOCKS: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": "hello", "annotations": {"audience": ["user"], "priority": 0.5}},
    "image": {"type": "image", "data": "aGk=", "mimeType": "image/png", "_meta": {"k": 1}},
    "audio": {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
    "resource_link": {"type": "resource_link", "uri": "file:///a.txt", "name": "a", "mimeType": "text/plain"},
    "embedded text": {"type": "resource", "resource": {"uri": "a://b", "text": "x", "mimeType": "text/plain"}},
    "embedded blob": {"type": "resource", "resource": {"uri": "a://b", "blob": "aGk="}},
}


@pytest.mark.parametrize("kind", list(BLOCKS))
def test_every_kind_of_block_builds_the_sdks_own_model(kind: str) -> None:
    raw = {"content": [BLOCKS[kind], BLOCKS["text"]], "isError": False, "structuredContent": {"a": 1}}
    expected = mcp_types.CallToolResult.model_validate(raw, by_name=False)
    got = _call_result(dict(raw))
    assert type(got) is mcp_types.CallToolResult
    assert got == expected
    assert got.model_dump(by_alias=True, exclude_unset=True) == expected.model_dump(by_alias=True, exclude_unset=True)
    assert [type(block) for block in got.content] == [type(block) for block in expected.content]


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "nope", "text": "x"}],
        [{"type": "text"}],
        [{"type": "image", "data": "aGk="}],
        ["not an object"],
        "not a list",
    ],
)
def test_what_the_sdk_refuses_is_refused(content: Any) -> None:
    raw = {"content": content}
    with pytest.raises(ValidationError):
        mcp_types.CallToolResult.model_validate(raw, by_name=False)
    with pytest.raises(ValidationError):
        _call_result(raw)


def test_a_block_without_a_type_is_taken_as_the_sdk_takes_it() -> None:
    """The SDK defaults ``TextContent.type``: the discriminated list refuses such a block, the fallback takes it."""
    raw = {"content": [{"text": "no type"}]}
    assert _call_result(dict(raw)) == mcp_types.CallToolResult.model_validate(raw, by_name=False)


def test_the_callers_answer_is_left_as_it_came() -> None:
    raw = {"content": [BLOCKS["text"]]}
    _call_result(raw)
    assert raw == {"content": [BLOCKS["text"]]}
