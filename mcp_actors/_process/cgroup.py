"""A cgroup v2 per stdio server, where the host may create them: exact membership for the kill.

A process cannot leave its cgroup by ``setsid``, a double fork or an empty environment; only
a write to some ``cgroup.procs`` moves it, and that takes write access to both cgroups. So
a server placed in a cgroup of its own takes its whole tree along, daemons included, and
``cgroup.kill`` (Linux 5.14) ends all of it at once, even what forks while it is killed.

Layout: ``<the host's own cgroup>/mcp-actors-<host marker>/<spawn number>``. The host's
directory is made as the safety net starts (:class:`HostCgroups`); a server's as it is
spawned (:meth:`HostCgroups.placement`, in the spawn's thread, right after the exec). The
kill ladder reads and kills them (:mod:`mcp_actors._process.kill`: ``Target.cgroup``,
``kill_trees(cgroup=)``) and removes them once empty.

Used only where it works, and nothing fails without it: Linux with a cgroup v2 hierarchy
mounted (alone or as ``unified`` beside v1), a kernel with ``cgroup.kill``, and a host
allowed to create a cgroup below its own (root, or a subtree delegated to its user, as
systemd delegates ``user@.service``). ``MCP_ACTORS_CGROUPS=off`` turns it off. Elsewhere the
tag in the environment, the process group and the descendants are the net, as before.

Limits: the server is moved after its exec (``subprocess`` has no way to spawn into a
cgroup), so whatever it forks before the move — microseconds, but the first move after an
idle spell waits for an RCU grace period, 10-35 ms — stays in the host's cgroup, found by
tag, group and descendants only. A daemon that escapes within that window *and* clears its
environment is not caught. Nor is one a crashed host left behind once its sidecar died too:
the next start's :func:`sweep` removes the dead hosts' directories, killing what is in them.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os

import psutil

from mcp_actors._process import kill as _kill

__all__ = ["CGROUPS_ENV", "HostCgroups", "Placement", "sweep"]

logger = logging.getLogger(__name__)

#: ``off`` (or ``0``, ``no``, ``false``) keeps servers in the host's cgroup.
CGROUPS_ENV = "MCP_ACTORS_CGROUPS"
_PREFIX = "mcp-actors-"


def _own_cgroup_dir() -> str | None:
    """The directory of this process's cgroup in the mounted v2 hierarchy; ``None`` without one."""
    try:
        with open("/proc/self/cgroup") as file:
            own = next((line.split(":", 2)[2].strip() for line in file if line.startswith("0::")), None)
        with open("/proc/self/mountinfo") as file:
            mounts = [line.split() for line in file]
    except OSError:  # not Linux
        return None
    if own is None or not own.startswith("/"):
        return None
    for fields in mounts:
        try:
            fstype, root, point = fields[fields.index("-") + 1], fields[3], fields[4]
        except (ValueError, IndexError):
            continue
        # The mount shows the hierarchy from ``root`` (a cgroup namespace: its own cgroup, "/").
        if fstype == "cgroup2" and (own + "/").startswith(root.rstrip("/") + "/"):
            return os.path.join(point, own[len(root.rstrip("/")) :].lstrip("/"))
    return None


def _enabled() -> bool:
    return os.environ.get(CGROUPS_ENV, "").strip().lower() not in ("off", "0", "no", "false")


class Placement:
    """Puts one server into a cgroup of its own; called with its PID in the spawn's thread.

    :attr:`path` is the cgroup once the server is in it, else ``None`` (the server then
    stays in the host's cgroup; the failure is logged once per host).
    """

    __slots__ = ("_host", "_name", "path")

    def __init__(self, host: HostCgroups, name: str) -> None:
        self._host = host
        self._name = name
        self.path: str | None = None

    def __call__(self, pid: int) -> None:
        path = os.path.join(self._host.path, self._name)
        try:
            try:
                os.mkdir(path)
            except FileNotFoundError:  # the host's was removed when everything was killed: again
                os.mkdir(self._host.path)
                os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as exc:
            self._host.failed(exc)
            return
        try:
            _write(os.path.join(path, "cgroup.procs"), str(pid))
        except OSError as exc:  # the server is gone already, or the move is not allowed
            with contextlib.suppress(OSError):
                os.rmdir(path)
            if exc.errno != errno.ESRCH:  # it exited already: nothing is wrong with the cgroups
                self._host.failed(exc)
            return
        self.path = path


class HostCgroups:
    """This host's cgroup directory, parent of one cgroup per server."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._warned = False

    @classmethod
    def create(cls, marker: str) -> HostCgroups | None:
        """Make ``mcp-actors-<marker>`` below this process's cgroup; ``None`` where that cannot work."""
        if not _enabled():
            return None
        parent = _own_cgroup_dir()
        if parent is None:
            return None
        path = os.path.join(parent, _PREFIX + marker)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as exc:  # no write access (an ordinary user outside a delegated subtree)
            logger.debug("no cgroup per server (%s); tags and process groups only", exc.strerror or exc)
            return None
        if not os.path.exists(os.path.join(path, "cgroup.kill")):  # a kernel before 5.14
            with contextlib.suppress(OSError):
                os.rmdir(path)
            return None
        return cls(path)

    def placement(self, tag: str) -> Placement:
        """The placement of the server with this tag (its cgroup is named after the spawn number)."""
        return Placement(self, tag.rsplit("/", 1)[-1])

    def failed(self, exc: OSError) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(
                "cannot place servers in cgroups (%s); a daemon that clears its environment may outlive its server",
                exc.strerror or exc,
            )

    def remove(self) -> bool:
        """Remove the directory (and the servers' left in it) if nothing runs in it; whether it is gone."""
        return _kill.remove_cgroup(self.path)


def sweep() -> int:
    """Kill and remove the cgroups of hosts that are gone (beside this host's); return how many.

    A host's directory names its marker, ``<pid>.<create time in 1/100 s>.<serial>``: the
    host is gone when no process has that PID and start.
    """
    if not _enabled():
        return 0
    parent = _own_cgroup_dir()
    if parent is None:
        return 0
    removed = 0
    try:
        names = [name for name in os.listdir(parent) if name.startswith(_PREFIX)]
    except OSError:
        return 0
    for name in names:
        if _host_alive(name[len(_PREFIX) :]):
            continue
        path = os.path.join(parent, name)
        _kill.kill_cgroup(path)
        if _kill.remove_cgroup(path):
            removed += 1
    return removed


def _host_alive(marker: str) -> bool:
    try:
        pid, start, _serial = marker.split(".")
        create_time = _kill.create_time_of(int(pid))
    except ValueError:
        return True  # not a name we gave: not ours to judge
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
    return round(create_time * 100) == int(start)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
