"""Helpers that take a service run on trio; from another loop they hop onto the runtime's.

Why: ``fetch_mcp_tools``, ``setup_mcp_tools``, ``load_mcp_tools`` and the registry tool
adapters are trio code (nurseries, deadlines, checkpoints). Awaited on asyncio they fail
deep inside with "Task got bad yield". The portal's asyncio facade can run trio code on
the runtime's loop and hand the result back to the awaiting asyncio task (cancellation
crossing too): a helper given such a facade by a caller that is not on trio runs its own
body there, with the runtime's :class:`~mcp_actors.service.McpService`. Anything else
awaited off trio is a misuse, refused at once, naming the call that works.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import trio

__all__ = ["ProgressRelay", "RuntimeHop", "hop_for"]

T = TypeVar("T")

ProgressRelay = Callable[[float, float | None, str | None], None]
"""A progress callback the runtime's thread may call: ``(progress, total, message)``."""


@runtime_checkable
class RuntimeHop(Protocol):
    """A facade that runs trio code on the runtime's loop for a caller on another loop.

    The asyncio facade (:class:`~mcp_actors.asyncio.AsyncioMcpService`: ``rt.service`` of
    :func:`mcp_actors.asyncio.open_runtime`, ``portal.asyncio_service()``) is one.
    """

    async def run_in_runtime(self, fn: Callable[[Any], Awaitable[T]], /) -> T:
        """Run ``fn(service)`` on the runtime's trio loop (``service``: its ``McpService``); await its result."""
        ...

    def relay_progress(self, callback: Any, /) -> ProgressRelay:
        """``callback`` (the caller's, for its own loop) as a callback the runtime's thread may call."""
        ...


_HOP_TYPES: dict[type, bool] = {}
"""Whether a service's type is a :class:`RuntimeHop`, by type: every tool call asks, and
``isinstance`` on a runtime-checkable protocol walks the protocol's attributes each time
(15-30 us a call on the project's machine, a tenth of a call on the light server)."""


def _is_hop(service: object) -> bool:
    cls = type(service)
    known = _HOP_TYPES.get(cls)
    if known is None:
        known = _HOP_TYPES[cls] = isinstance(service, RuntimeHop)
    return known


def hop_for(service: object, what: str) -> RuntimeHop | None:
    """How a helper named ``what`` reaches trio: None on trio itself, else ``service`` as the hop.

    Raises:
        RuntimeError: The caller is on trio with a hop facade (made for other loops), or
            not on trio with a service that cannot run trio code for it.
    """
    if trio.lowlevel.in_trio_task():
        if _is_hop(service):
            raise RuntimeError(
                f"{what} was given {type(service).__name__}, a facade for asyncio callers, on trio; "
                "on trio pass the runtime's McpService (runtime.service, or portal.service on the portal's loop)"
            )
        return None
    if _is_hop(service):
        return cast(RuntimeHop, service)  # the protocol's check, cached by type
    raise RuntimeError(
        f"{what} runs on trio and was awaited on another event loop with {type(service).__name__}; "
        "from asyncio pass the asyncio facade (rt.service of mcp_actors.asyncio.open_runtime, or "
        "portal.asyncio_service()), from a plain thread use portal.run(...)"
    )
