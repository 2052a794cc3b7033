"""The one rule for reading a file we take as configuration: a regular file, and not a huge one.

Every such file goes through :func:`read_config_file`: the config file, the token file, a
server's ``envFile``, its ``privateKeyFile``, a file given to ``servers import``. A path
can name anything: a FIFO (whose reader waits for a writer that may never come, blocking a
CLI command or a runtime's registry for good), a device (``/dev/zero`` never ends), a
directory, or a regular file of gigabytes (a sparse one takes no disk and all the memory).
So, before a byte is read:

* the path must name a regular file (``os.stat``, links followed), and be at most
  :data:`MAX_CONFIG_FILE_BYTES` long;
* it is opened with ``O_NONBLOCK`` (a FIFO swapped in after the check cannot block the
  open) and checked again on the open descriptor (``os.fstat``): what was read is what
  was checked;
* it is read up to the limit and no further (a file that grows meanwhile is refused too).

A refusal is :class:`~mcp_actors.errors.ConfigFileRefused`, one line naming the path, what
it is, and what to do; the file is left untouched.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from mcp_actors.errors import ConfigFileRefused

__all__ = ["MAX_CONFIG_FILE_BYTES", "read_config_file"]

MAX_CONFIG_FILE_BYTES: Final = 16 * 1024 * 1024
"""The largest file read as configuration: 16 MiB (a config of thousands of servers is well under 1 MiB)."""

_OPEN_FLAGS: Final = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
)
_READ_CHUNK: Final = 1024 * 1024

_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


def read_config_file(path: str | os.PathLike[str], *, what: str, fix: str, limit: int = MAX_CONFIG_FILE_BYTES) -> bytes:
    """The whole content of ``path``, when it is a regular file of at most ``limit`` bytes.

    Args:
        path: The file (links are followed).
        what: What the file is, for the message (``"config file"``, ``"token file"``).
        fix: What to do instead, for the message's end (``"point --config at a regular file"``).
        limit: The largest size read, in bytes.

    Raises:
        ConfigFileRefused: Not a regular file, or larger than ``limit``; nothing was read.
        FileNotFoundError: There is no such file (for the caller to decide what that means).
        OSError: The file cannot be opened or read (permissions, I/O).
    """
    _check(os.stat(path), path, what=what, fix=fix, limit=limit)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        # The path may name another file by now (swapped between the stat and the open).
        info = os.fstat(fd)
        _check(info, path, what=what, fix=fix, limit=limit)
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, min(max(info.st_size + 1, _READ_CHUNK), limit + 1 - len(data)))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while it was read
        raise _refused(path, f"is more than the {_size(limit)} a {what} may be", what=what, fix=fix)
    return bytes(data)


def _check(info: os.stat_result, path: str | os.PathLike[str], *, what: str, fix: str, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
        raise _refused(path, f"is {kind}, not a regular file", what=what, fix=fix)
    if info.st_size > limit:
        raise _refused(
            path, f"is {_size(info.st_size)}, more than the {_size(limit)} a {what} may be", what=what, fix=fix
        )


def _refused(path: str | os.PathLike[str], reason: str, *, what: str, fix: str) -> ConfigFileRefused:
    shown = os.fspath(path)
    return ConfigFileRefused(f"the {what} {shown} {reason}; it was not read; {fix}", path=shown, reason=reason)


def _size(n: int) -> str:
    """``16 MiB``, ``3.2 GiB``, ``900 bytes``: a size as a person reads it."""
    for unit, name in ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if n >= unit:
            return f"{n // unit} {name}" if n % unit == 0 else f"{n / unit:.1f} {name}"
    return f"{n} bytes"
