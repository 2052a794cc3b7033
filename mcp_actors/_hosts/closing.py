"""Waiting for a runtime to stop from an asyncio task that may be cancelled meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["wait_through_cancellation"]


async def wait_through_cancellation(future: asyncio.Future[Any]) -> asyncio.CancelledError | None:
    """Wait for ``future`` to finish even if this task is cancelled meanwhile; that cancellation, if any.

    Why: a runtime that stops must close its servers and reap their processes before its
    ``async with`` block is left, also when the task was cancelled (a cancelled task that
    left its servers behind would leak them). The caller re-raises what this returns once
    the stop is complete. Every wait inside a runtime's stop is bounded, so this ends.
    """
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError as exc:
            if future.done():
                break
            cancelled = exc
    return cancelled
