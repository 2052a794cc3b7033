"""One private file, replaced atomically under a cross-process lock: the config file and the token file.

The rule, written once for both stores:

* **The lock** is ``<file>.lock`` beside the file (via ``filelock``), held around every
  read-modify-write, so writers in many processes never lose each other's changes. A directory
  that refuses the lock file (read-only, ``/proc``, no permission) fails at once as the
  ``OSError`` it is; only a lock another process really holds waits, ``timeout`` seconds at
  most, and then raises :class:`~mcp_actors.errors.ConfigFileLocked`.
* **The write** goes to a temporary file in the same directory (created ``O_EXCL`` with mode
  0600 before any byte is written), is fsynced, renamed over the file with ``os.replace``, and
  the directory is fsynced. A crash at any point leaves the old file or the new one, never a mix;
  the temporary files a crashed writer left are removed by the next one, under the lock.
* **Links.** Callers pass the file's real target (:func:`real_target`): a link (a dotfile
  manager's) stays a link and its target receives the change; opening by the link or by the
  target shares one lock.

The functions are blocking and short; trio code runs them in a thread.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import filelock

from mcp_actors._config.paths import make_private_dir
from mcp_actors.errors import ConfigFileLocked, ConfigWriteFailed

__all__ = ["FILE_MODE", "lock_path", "locked", "real_target", "replace", "temp_prefix", "write_failed"]

FILE_MODE: Final = 0o600
"""The files hold API keys and tokens: readable by their owner only, from the first byte."""


def real_target(path: Path) -> Path:
    """The file ``path`` finally names, every symlink followed (itself when it is no link).

    A dangling link resolves to the file it names, which the first write creates.
    """
    return Path(os.path.realpath(path))


def lock_path(target: Path) -> Path:
    """The lock file beside ``target`` (``mcp-config.json.lock``)."""
    return target.with_name(target.name + ".lock")


def temp_prefix(target: Path) -> str:
    """The name every temporary file of ``target`` starts with (hidden, ``.mcp-config.json.``)."""
    return f".{target.name}."


@contextlib.contextmanager
def locked(target: Path, *, timeout: float, what: str, shown: Path) -> Iterator[None]:
    """Hold ``target``'s cross-process lock for the block; first remove a crashed writer's temp files.

    Args:
        target: The file's real target (:func:`real_target`); its directory is created if missing
            (0700 whatever the umask, missing parents too: :func:`~mcp_actors._config.paths.make_private_dir`).
        timeout: Longest wait, in seconds, for another process to release the lock.
        what: What the file is, for the error (``"config file"``).
        shown: The path the user gave, for the error.

    Raises:
        ConfigFileLocked: Another process held the lock for ``timeout`` seconds.
        OSError: The directory or the lock file cannot be created (at once, not after ``timeout``).
    """
    make_private_dir(target.parent)
    lock_file = lock_path(target)
    # filelock retries every failure to open its file as "held by another process"; a
    # directory that refuses the file must fail at once instead, as the OSError it is.
    os.close(os.open(lock_file, os.O_RDWR | os.O_CREAT, FILE_MODE))
    # filelock polls a non-blocking flock; a short interval keeps queued writers snappy.
    lock = filelock.FileLock(lock_file, timeout=timeout, mode=FILE_MODE, poll_interval=0.01)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise ConfigFileLocked(
            f"the {what} {shown} is being written by another process and its lock ({lock_file}) was not"
            f" released within {timeout:g} s; retry, or stop the process that holds it",
            path=str(shown),
        ) from None
    try:
        for stale in target.parent.glob(f"{temp_prefix(target)}*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        yield
    finally:
        lock.release()


def replace(target: Path, payload: bytes, *, shown: Path) -> None:
    """Replace ``target`` with ``payload`` atomically and durably, mode 0600; call it under :func:`locked`.

    Args:
        target: The file's real target: never a link, which ``os.replace`` would swap for a
            regular file (its target would silently stop receiving changes).
        payload: The file's new content.
        shown: The path the user gave, for the note on a failure.

    Raises:
        OSError: The write failed (disk full, a size limit …); the old file is intact and no
            temporary file is left, as a note on the error says.
    """
    directory = target.parent
    # mkstemp creates the file with O_EXCL and mode 0600 before anything is written.
    fd, temp_name = tempfile.mkstemp(prefix=temp_prefix(target), suffix=".tmp", dir=directory)
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, FILE_MODE)  # explicit, whatever the umask did
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp_name, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        if isinstance(exc, OSError):
            exc.add_note(f"while writing {shown}; the previous file is intact")
        raise
    _fsync_directory(directory)


def write_failed(exc: OSError, *, what: str, shown: Path, then: str) -> ConfigWriteFailed:
    """The typed error for a write the disk refused: the file, the OS reason, and what to do.

    Args:
        exc: What the OS raised.
        what: What the file is (``"token file"``).
        shown: The path the user gave.
        then: What is intact and what to do next, for the message's end.
    """
    reason = exc.strerror or str(exc) or type(exc).__name__
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(shown) else ""
    error = ConfigWriteFailed(
        f"could not write the {what} {shown}: {reason}{where}; {then}",
        path=str(shown),
        reason=reason,
        os_errno=exc.errno,
    )
    for note in getattr(exc, "__notes__", ()):
        error.add_note(note)
    return error


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); directories cannot be opened for this on Windows."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
