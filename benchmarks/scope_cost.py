"""What a cancel scope costs per call: the reason the harness bounds calls with a watch task.

50 trio tasks each run a loop of ``await trio.lowlevel.checkpoint()``, bare or inside a
scope entered and left around every iteration; the process CPU time per iteration is
printed for each shape, three times (docs/performance.md).

    python -m benchmarks.scope_cost [--iterations N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable

import anyio
import trio

__all__ = ["main"]

TASKS = 50


async def _bare() -> None:
    await trio.lowlevel.checkpoint()


async def _plain_scope() -> None:
    with trio.CancelScope():
        await trio.lowlevel.checkpoint()


async def _deadline_scope() -> None:
    with trio.CancelScope(deadline=trio.current_time() + 60):
        await trio.lowlevel.checkpoint()


async def _anyio_fail_after() -> None:
    with anyio.fail_after(60):
        await trio.lowlevel.checkpoint()


SHAPES: tuple[tuple[str, Callable[[], Awaitable[None]]], ...] = (
    ("bare checkpoint", _bare),
    ("inside trio.CancelScope()", _plain_scope),
    ("inside trio.CancelScope(deadline=...)", _deadline_scope),
    ("inside anyio.fail_after(60)", _anyio_fail_after),
)


async def _measure(iterations: int) -> None:
    for round_ in range(3):
        for name, step in SHAPES:

            async def loop(count: int, step: Callable[[], Awaitable[None]] = step) -> None:
                for _ in range(count):
                    await step()

            cpu = time.process_time()
            async with trio.open_nursery() as nursery:
                for _ in range(TASKS):
                    nursery.start_soon(loop, iterations // TASKS)
            per = (time.process_time() - cpu) / iterations * 1e6
            print(f"round {round_ + 1}: {name:40s} {per:6.2f} us of CPU per iteration", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Print the CPU per iteration of each shape."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scope_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40_000)
    args = parser.parse_args(argv)
    trio.run(_measure, args.iterations)


if __name__ == "__main__":
    main()
