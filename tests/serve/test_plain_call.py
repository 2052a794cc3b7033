"""The gateway skips the SDK's request check only for a ``tools/call`` the check would pass anyway.

:func:`mcp_actors.serve._gateway._plain_call` decides; here every request it lets through is
run through the SDK's own check (``mcp_types.methods.validate_client_request``), over every
handshake revision and generated params, and every request it does not let through still
gets the SDK's answer from the gateway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from mcp_actors.runtime import open_runtime
from mcp_actors.serve import Gateway
from mcp_actors.serve._gateway import Request, RpcError, _plain_call

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
PARAMS = st.dictionaries(
    st.sampled_from(["name", "arguments", "_meta", "task", "other"]), JSON, max_size=4
) | st.fixed_dictionaries(
    {"name": st.text(max_size=5)},
    optional={"arguments": st.none() | st.dictionaries(st.text(max_size=5), JSON, max_size=3)},
)
VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


@settings(max_examples=400, deadline=None)
@given(version=st.sampled_from(VERSIONS), params=PARAMS)
def test_every_call_let_through_passes_the_sdks_check(version: str, params: dict[str, Any]) -> None:
    """What skips the check is a request the check accepts (it raises nothing)."""
    if _plain_call("tools/call", version, params):
        methods.validate_client_request("tools/call", version, params)


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
def test_a_plain_call_is_let_through_and_nothing_else(version: str) -> None:
    """A name and arguments skip it; other methods, the stateless revision, extra keys or types do not."""
    assert _plain_call("tools/call", version, {"name": "a", "arguments": {"x": 1}})
    assert _plain_call("tools/call", version, {"name": "a"})
    assert not _plain_call("prompts/get", version, {"name": "a"})
    assert not _plain_call("tools/call", "2026-07-28", {"name": "a"})
    assert not _plain_call("tools/call", version, {"name": "a", "_meta": {"progressToken": 1}})
    assert not _plain_call("tools/call", version, {"name": 1})
    assert not _plain_call("tools/call", version, {"name": "a", "arguments": [1]})


@pytest.mark.parametrize(
    "params",
    [{"name": 1}, {"name": "a", "arguments": [1]}, {"arguments": {}}, {"name": "a", "_meta": {"progressToken": []}}],
)
async def test_a_malformed_call_still_gets_the_sdks_answer(tmp_path: Path, params: dict[str, Any]) -> None:
    """-32602 with the SDK's errors for a call whose params break the schema."""
    (tmp_path / "cfg.json").write_text('{"mcpServers": []}')
    async with open_runtime(tmp_path / "cfg.json") as runtime:
        with trio.fail_after(20), pytest.raises(RpcError) as caught:
            await Gateway(runtime.service).handle(Request("tools/call", params, "2025-11-25"))
    assert caught.value.code == -32602 and caught.value.message == "Invalid request parameters"
