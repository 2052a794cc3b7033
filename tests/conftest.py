"""Suite-wide guards: no test may leave a process or a trio task behind."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import psutil
import pytest
import trio
from hypothesis import HealthCheck, settings
from testkit import count_tasks, is_infrastructure

if TYPE_CHECKING:
    import ssl
    from pathlib import Path

    import trustme

    from mcp_actors.testing.memory import InMemoryServers

# The suite runs on a shared 2-core machine, often beside a second copy of itself: wall-clock
# limits in hypothesis (per-example deadlines, "input generation is slow") would turn load
# into failures that say nothing about the code. Behaviour, not speed, is what these test.
settings.register_profile("shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-machine")

# Ledgers and configs of the whole run go to a private directory, never the user's: one per
# test process. pytest-xdist's workers inherit the environment of the process that started
# them, which has already set these to its own directory (_OWN_STATE says so), so a worker
# takes a directory of its own instead of sharing one with the other workers.
_OWN_STATE = "MCP_ACTORS_TEST_OWN_STATE_DIR"
_STATE = tempfile.mkdtemp(prefix="mcp-actors-test-state-")
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)
_inherited = os.environ.get(_OWN_STATE)
if os.environ.get("MCP_ACTORS_STATE_DIR") in (None, _inherited):
    os.environ["MCP_ACTORS_STATE_DIR"] = _STATE
if os.environ.get("MCP_ACTORS_CONFIG") in (None, _inherited and os.path.join(_inherited, "mcp-config.json")):
    os.environ["MCP_ACTORS_CONFIG"] = os.path.join(_STATE, "mcp-config.json")
os.environ[_OWN_STATE] = _STATE


def _stray_children() -> list[psutil.Process]:
    me = psutil.Process()
    strays = []
    for child in me.children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        if is_infrastructure(cmdline):
            continue
        strays.append(child)
    return strays


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Fail a test that leaves a child process running (after a bounded grace for reaping)."""
    yield
    deadline = time.monotonic() + 5.0
    strays = _stray_children()
    while strays and time.monotonic() < deadline:
        psutil.wait_procs(strays, timeout=0.1)
        strays = _stray_children()
    if strays:
        described = [f"{p.pid}: {' '.join(p.cmdline())[:120]}" for p in strays if p.is_running()]
        for proc in strays:
            try:
                proc.kill()
            except psutil.Error:
                pass
        if described:
            pytest.fail(f"test left processes behind: {described}")


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a trio test that leaves tasks running in the run after it returns."""
    before = count_tasks()
    yield
    await trio.testing.wait_all_tasks_blocked()
    after = count_tasks()
    assert after <= before, f"{after - before} trio task(s) left running after the test"


@pytest.fixture
def servers_in_memory() -> Iterator[InMemoryServers]:
    """Serve the demo and fault servers' stdio records in memory for the test (no process).

    Yields the :class:`mcp_actors.testing.memory.InMemoryServers` that counts the server
    instances started per name. Records with their own env or cwd, and fault flags only a
    process can act out, keep their real process.
    """
    from mcp_actors.testing.memory import records_in_memory

    with records_in_memory() as servers:
        yield servers


# ---------------------------------------------------------------------- TLS (tests of our HTTP/1.1 layer)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A throwaway certificate authority (``trustme``)."""
    import trustme

    return trustme.CA()


@pytest.fixture
def server_tls(ca: trustme.CA) -> ssl.SSLContext:
    """A server-side TLS context: a certificate for 127.0.0.1 and localhost signed by ``ca``, ALPN http/1.1."""
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    context.set_alpn_protocols(["http/1.1"])
    return context


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    """The CA's certificate as a PEM file (for SSL_CERT_FILE); its path."""
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)
