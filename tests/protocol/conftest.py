"""Fixtures of the protocol-feature tests."""

from __future__ import annotations

import pytest
from protocol_bed import TRANSPORTS


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Each test runs over stdio and over streamable HTTP."""
    value: str = request.param
    return value
