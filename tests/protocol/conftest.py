"""Fixtures of the protocol-feature tests."""

from __future__ import annotations

import pytest
from protocol_bed import PROTOCOLS, TRANSPORTS


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Each test runs over stdio and over streamable HTTP."""
    value: str = request.param
    return value


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    """A test that depends on the revision runs with config.protocol legacy (2025-11-25) and auto (2026-07-28)."""
    value: str = request.param
    return value
