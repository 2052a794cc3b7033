"""create_time_of: psutil's create_time of a process, read with one /proc file.

Every reader of a tracked process (the host, its reaper sidecar, a later host's ledger
sweep) compares create_times made by psutil; the host's own reading must give the very
same float, or a crashed host's servers would not be recognised as its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from mcp_actors._process import kill as _kill


def test_create_time_of_is_psutils_value_exactly() -> None:
    """The host, PID 1, a running child and a zombie child all read as psutil reads them."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        for pid in (os.getpid(), 1, child.pid):
            assert _kill.create_time_of(pid) == psutil.Process(pid).create_time()
        assert child.stdin is not None
        child.stdin.close()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
        assert _kill.create_time_of(child.pid) == psutil.Process(child.pid).create_time()
    finally:
        child.kill()
        child.wait()


def test_a_process_named_with_parentheses_and_spaces_reads_right(tmp_path: Path) -> None:
    """The name in ``/proc/<pid>/stat`` may hold ``) (`` and digits: the fields follow the last ``)``."""
    program = tmp_path / "x) 1 2 (y"  # the kernel's comm: the executable's name
    program.symlink_to(sys.executable)
    child = subprocess.Popen([str(program), "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert psutil.Process(child.pid).name() == "x) 1 2 (y"
        assert _kill.create_time_of(child.pid) == psutil.Process(child.pid).create_time()
    finally:
        child.kill()
        child.wait()


def test_create_time_of_a_gone_process_raises_no_such_process() -> None:
    """A PID nobody holds is psutil's NoSuchProcess, as from psutil.Process(pid)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(psutil.NoSuchProcess):
        _kill.create_time_of(child.pid)
    with pytest.raises(psutil.NoSuchProcess):
        _kill.create_time_of(2**22 + 1)  # above Linux's pid_max: never a process


def test_the_boot_time_is_read_again_after_the_wall_clock_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    """A boot time kept from before a clock step is not used after it.

    The kernel's boot time (``btime``) is the wall clock less the time since boot: it
    moves when the wall clock is set. A cached value whose wall-minus-boot offset no longer
    matches the clocks is stale, and the file is read again.
    """
    truth = psutil.boot_time()
    offset = _kill._wall_minus_boot()
    monkeypatch.setattr(_kill, "_boot_time_cache", (truth - 7.0, offset - 7.0))  # as if read before a step
    assert _kill.create_time_of(os.getpid()) == psutil.Process(os.getpid()).create_time()
    assert _kill._boot_time_cache is not None and _kill._boot_time_cache[0] == truth
    # A fresh cache is used as it is: no file read while the clocks agree with it.
    expected = psutil.Process(os.getpid()).create_time()
    monkeypatch.setattr(_kill, "_boot_time_cache", (truth, _kill._wall_minus_boot()))
    monkeypatch.setattr(psutil, "boot_time", lambda: pytest.fail("read /proc/stat although the cache is fresh"))
    assert _kill.create_time_of(os.getpid()) == expected


def test_the_boot_time_is_read_again_at_a_seconds_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's boot time is the offset's whole seconds: near an edge a slew could move it.

    With the wall clock less the boot clock a hair below a whole second, a kept value is not
    trusted (a drift well within the recheck bound could carry the kernel's value over).
    """
    reads: list[float] = []
    truth = psutil.boot_time()

    def counted() -> float:
        reads.append(truth)
        return truth

    monkeypatch.setattr(psutil, "boot_time", counted)
    edge = 1_700_000_000.9995
    monkeypatch.setattr(_kill, "_wall_minus_boot", lambda: edge)
    monkeypatch.setattr(_kill, "_boot_time_cache", (truth, edge))
    assert _kill._boot_time() == truth and _kill._boot_time() == truth
    assert len(reads) == 2 and _kill._boot_time_cache is None  # read each time, nothing kept
    middle = 1_700_000_000.5
    monkeypatch.setattr(_kill, "_wall_minus_boot", lambda: middle)
    assert _kill._boot_time() == truth and _kill._boot_time() == truth
    assert len(reads) == 3 and _kill._boot_time_cache == (truth, middle)  # read once, then kept
