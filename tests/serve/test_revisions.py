"""The gateway lists and calls tools at every protocol revision the SDK speaks.

Every handshake revision (2024-11-05 to 2025-11-25, by ``initialize``) and every stateless one
(2026-07-28, by ``server/discover``), each with the SDK's own client: a front that answers one
revision's listing with no tools fails its clients at that revision while the others look fine,
so each is checked, the tools named and one called.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from tests.serve.test_gateway import BOUND, _text, gateway_rig, sdk_client

ALL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


@pytest.mark.parametrize("version", ALL_VERSIONS)
async def test_tools_are_listed_and_called_at_every_revision(tmp_path: Path, version: str) -> None:
    """At ``version``: both servers' tools are listed under their public names, and a call answers."""
    async with gateway_rig(tmp_path) as rig, sdk_client(rig.url, version) as client:
        with trio.fail_after(BOUND):
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"alpha__echo", "alpha__sleep", "beta__weather"} <= names
            result = await client.call_tool("alpha__echo", {"text": f"at {version}"})
            assert _text(result) == f"at {version}" and not result.is_error
