"""The parts of trio's guest machinery that ``mcp_actors/_hosts/guest.py`` drives, pinned against the installed trio.

The guest runtime waits for trio's I/O on the host loop's selector instead of trio's own
thread, through private names (``GuestState``, the run generator, the I/O manager's
multiplexer). Where they change, the runtime falls back to trio's own guest run, slower;
these tests say so at once instead of letting the speed go quietly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import trio

import mcp_actors.asyncio as maio
from mcp_actors._hosts import guest


def test_trios_guest_machinery_is_the_one_the_selector_drive_knows() -> None:
    """GuestState has a guest_tick, and a guest run's first tick leads to its state, runner and multiplexer fd."""
    assert guest.threadless_supported()
    found: list[tuple[object, object, int] | None] = []
    done: list[object] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first: list[object] = []

        async def nothing() -> None:
            await trio.lowlevel.checkpoint()

        trio.lowlevel.start_guest_run(
            nothing,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=first.append,
            done_callback=done.append,
            host_uses_signal_set_wakeup_fd=True,
        )
        [tick] = first
        internals = guest._guest_internals(tick)  # type: ignore[arg-type]
        found.append(internals)
        assert internals is not None
        internals[0].run_sync_soon_not_threadsafe = loop.call_soon  # type: ignore[attr-defined]
        tick()  # type: ignore[operator]
        for _ in range(1000):
            if done:
                break
            await asyncio.sleep(0.001)

    asyncio.run(main())
    [internals] = found
    assert internals is not None and internals[2] >= 0
    assert done, "trio's own guest run, resumed through the captured tick, finished"


def test_a_guest_runtime_uses_the_selector_drive(tmp_path: Path) -> None:
    """On this platform the default runtime is driven from the loop's selector (no I/O thread)."""

    async def main() -> bool:
        async with maio.open_runtime(str(tmp_path / "cfg.json")) as rt:
            hop = rt.service._hop
            assert isinstance(hop, guest.GuestHop)
            return hop._drive is not None

    assert asyncio.run(main())
