"""Hostile files for tests of what we read as configuration: a FIFO, a device, a huge sparse file.

A reader that opens a FIFO and waits for a writer would hang its test for good; the FIFO of
:func:`fifo_at` lets such a reader go after a few seconds (a thread opens and closes the
write end, so the reader sees end of file), and the test then fails on its own clock.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

SPARSE_SIZE = 3 * 1024**3
"""A file far larger than any config: 3 GiB, of which no block is on the disk."""


@contextlib.contextmanager
def fifo_at(path: Path, *, release_after: float = 3.0) -> Iterator[Path]:
    """A FIFO at ``path`` (replacing a file there) for the block; no process ever writes to it.

    After ``release_after`` seconds, and until the block ends, a thread opens the FIFO's
    write end and closes it again every 10 ms: a reader blocked in ``open`` or ``read`` is let
    go with end of file instead of hanging the test.
    """
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    os.mkfifo(path, 0o600)
    stop = threading.Event()

    def release() -> None:
        if stop.wait(release_after):
            return
        while not stop.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: nobody reads it; ENOENT: it was replaced
                pass
            else:
                os.close(fd)
            stop.wait(0.01)

    thread = threading.Thread(target=release, name="fifo-release", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join()


def sparse_file(path: Path, size: int = SPARSE_SIZE) -> Path:
    """A file of ``size`` zero bytes that takes no room on the disk (``truncate``); the path."""
    path.touch()
    os.truncate(path, size)
    return path
