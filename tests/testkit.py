"""Helpers shared by the test modules (importable everywhere: ``from testkit import text_of``).

One home for what tests kept writing again: the text of a tool result, draining an event
subscription, and a runtime on the test's own config file.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from mcp_actors import events


def text_of(result: Any) -> str:
    """The text items of a ``CallToolResult``, joined."""
    return "".join(getattr(item, "text", "") for item in result.content)


def drain(sub: events.Subscription) -> list[events.Event]:
    """Every event already buffered in ``sub``, without waiting."""
    out = []
    while True:
        try:
            out.append(sub.receive_nowait())
        except trio.WouldBlock:
            return out


@contextlib.asynccontextmanager
async def runtime_at(tmp_path: Path, **kwargs: Any) -> AsyncIterator[Any]:
    """``open_runtime`` on the test's own config file, ``tmp_path / "cfg.json"``."""
    from mcp_actors.runtime import open_runtime

    async with open_runtime(tmp_path / "cfg.json", **kwargs) as rt:
        yield rt
