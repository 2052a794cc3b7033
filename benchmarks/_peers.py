"""The contenders and their virtual environments.

Every contender is driven the same way: a fresh subprocess runs a driver script from
``benchmarks/drivers/`` with the contender's interpreter, reads one JSON job on stdin and
prints one JSON result on stdout. Ours and the raw SDK run with our own interpreter (the
project's venv, mcp 2.x); each peer library runs in a venv of its own under
``benchmarks/.venvs/<peer>/``, created and filled with ``pip`` on first use, because the
peers pin other ``mcp`` versions than ours.

The servers are always started with *our* interpreter, so every contender drives the very
same server program.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

__all__ = [
    "CONTENDERS",
    "Contender",
    "DriverError",
    "PeerUnavailable",
    "VENVS_DIR",
    "contender_python",
    "ensure_peer_venv",
    "installed_versions",
    "run_driver",
    "select_contenders",
]

BENCH_DIR: Final = Path(__file__).resolve().parent
DRIVERS_DIR: Final = BENCH_DIR / "drivers"
VENVS_DIR: Final = BENCH_DIR / ".venvs"
PIP_TIMEOUT: Final = 900.0
"""Upper bound of one peer's ``pip install`` (seconds): a stuck index must not hang the run."""


@attrs.frozen(kw_only=True)
class Contender:
    """One client library under test.

    Attributes:
        key: Short id used on the command line and in JSON (``ours``, ``raw``, ...).
        label: What the tables call it.
        driver: Script name in ``benchmarks/drivers/``.
        backend: The event loop the driver runs on (``trio`` or ``asyncio``).
        packages: Pip requirements of its own venv; empty means our own interpreter.
        note: How it is driven, for the report.
        explicit: Only when named (``hot_path`` names it): not part of ``all`` or ``local``,
            because its driver speaks just enough MCP for the call scenarios.
    """

    key: str
    label: str
    driver: str
    backend: str
    packages: tuple[str, ...] = ()
    note: str = ""
    explicit: bool = False

    @property
    def is_peer(self) -> bool:
        """Whether it needs a venv of its own (and so the network on first use)."""
        return bool(self.packages)


CONTENDERS: Final[tuple[Contender, ...]] = (
    Contender(
        key="floor",
        label="floor (hand-written JSON-RPC)",
        driver="floor.py",
        backend="trio",
        note="benchmarks/stress_floor.py: stdlib json, trio, one reader task, a dict of pending requests",
        explicit=True,
    ),
    Contender(
        key="ours",
        label="mcp-actors",
        driver="ours.py",
        backend="trio",
        note="open_runtime() + McpService.call_tool, in-process",
    ),
    Contender(
        key="raw",
        label="raw mcp.Client (trio)",
        driver="raw_sdk.py",
        backend="trio",
        note="mcp.Client(StdioServerParameters) per server, hand-written fan-out: the floor",
    ),
    Contender(
        key="raw-asyncio",
        label="raw mcp.Client (asyncio)",
        driver="raw_sdk.py",
        backend="asyncio",
        note="the same raw client on asyncio, the loop the peers run on",
    ),
    Contender(
        key="session-group",
        label="mcp ClientSessionGroup",
        driver="session_group.py",
        backend="asyncio",
        note="the SDK's ClientSessionGroup, servers connected one after another as documented",
    ),
    Contender(
        key="langchain",
        label="langchain-mcp-adapters",
        driver="langchain_mcp.py",
        backend="asyncio",
        packages=("langchain-mcp-adapters==0.3.2",),
        note="MultiServerMCPClient.get_tools() (default path: a new session per tool call)",
    ),
    Contender(
        key="fastmcp",
        label="fastmcp Client",
        driver="fastmcp_client.py",
        backend="asyncio",
        packages=("fastmcp==4.1.6",),
        note="fastmcp.Client with an mcpServers config (multi-server proxy)",
    ),
    Contender(
        key="openai-agents",
        label="openai-agents MCPServerStdio",
        driver="openai_agents.py",
        backend="asyncio",
        packages=("openai-agents==0.24.0",),
        note="agents.mcp.MCPServerStdio per server (cache_tools_list=True)",
    ),
)

_BY_KEY: Final = {c.key: c for c in CONTENDERS}


def select_contenders(spec: str, *, quick: bool) -> list[Contender]:
    """Resolve a ``--contenders`` value.

    Args:
        spec: ``all``, ``local`` (no peer venvs), or a comma-separated list of keys.
        quick: Quick mode: ``all`` means ours + raw only (no installs, tiny counts).

    Returns:
        The contenders in :data:`CONTENDERS` order (the floor, ours, the raw SDK, the others).

    Raises:
        ValueError: An unknown key.
    """
    if spec == "all":
        keys = ["ours", "raw"] if quick else [c.key for c in CONTENDERS if not c.explicit]
    elif spec == "local":
        keys = ["ours", "raw"] if quick else [c.key for c in CONTENDERS if not c.is_peer and not c.explicit]
    else:
        keys = [k.strip() for k in spec.split(",") if k.strip()]
    unknown = [k for k in keys if k not in _BY_KEY]
    if unknown:
        raise ValueError(f"unknown contender(s) {unknown}; known: {sorted(_BY_KEY)}")
    order = {c.key: i for i, c in enumerate(CONTENDERS)}
    return [_BY_KEY[k] for k in sorted(dict.fromkeys(keys), key=order.__getitem__)]


class PeerUnavailable(Exception):
    """A peer's venv could not be made (no network, a failed resolve, ...)."""


class DriverError(Exception):
    """A driver run failed: it exited non-zero, timed out, or printed no JSON."""


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_peer_venv(contender: Contender, *, log: Any = print) -> Path:
    """Create (once) the contender's venv and install its pinned packages.

    A marker file holds the installed requirement list; a venv whose marker differs is
    rebuilt, so a changed pin takes effect on the next run.

    Returns:
        The venv's interpreter.

    Raises:
        PeerUnavailable: venv creation or ``pip install`` failed or took too long; the
            message carries pip's last lines.
    """
    venv = VENVS_DIR / contender.key
    python = _venv_python(venv)
    marker = venv / ".mcp-actors-bench.json"
    wanted = json.dumps({"packages": list(contender.packages)})
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    log(f"[peers] creating {venv} and installing {' '.join(contender.packages)} (first run only) ...")
    started = time.monotonic()
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *contender.packages],
            check=True,
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT,
        )
    except subprocess.CalledProcessError as exc:
        tail = "\n".join(str(exc.stderr or exc.stdout or "").strip().splitlines()[-5:])
        raise PeerUnavailable(f"installing {contender.packages} failed: {tail}") from None
    except subprocess.TimeoutExpired:
        raise PeerUnavailable(f"installing {contender.packages} took longer than {PIP_TIMEOUT:g}s") from None
    marker.write_text(wanted)
    log(f"[peers] {contender.key} ready in {time.monotonic() - started:.0f}s")
    return python


def contender_python(contender: Contender, *, log: Any = print) -> Path:
    """The interpreter that runs the contender's driver (ours for local contenders)."""
    if not contender.is_peer:
        return Path(sys.executable)
    return ensure_peer_venv(contender, log=log)


def installed_versions(python: Path, packages: Sequence[str]) -> dict[str, str]:
    """The versions of ``mcp`` and the given packages in an interpreter's environment."""
    names = ["mcp", *(p.split("==")[0] for p in packages)]
    code = (
        "import json, importlib.metadata as m\n"
        "out = {}\n"
        f"for n in {names!r}:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    try:
        versions: dict[str, str] = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {}
    return versions


def driver_env(state_dir: Path, contender: Contender | None = None) -> dict[str, str]:
    """The environment of a driver: ours plus a private state dir (no user config touched).

    A local contender's driver gets this checkout first on its path, so ``mcp_actors`` is
    the code being benchmarked, not whatever copy the interpreter has installed.
    """
    env = dict(os.environ)
    env["MCP_ACTORS_STATE_DIR"] = str(state_dir)
    env["MCP_ACTORS_CONFIG"] = str(state_dir / "mcp-config.json")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # The host's own virtualenv must not leak into a peer's interpreter.
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    if contender is not None and not contender.is_peer:
        env["PYTHONPATH"] = str(BENCH_DIR.parent)
    return env


def run_driver(
    contender: Contender,
    python: Path,
    job: Mapping[str, Any],
    *,
    state_dir: Path,
    timeout: float,
) -> dict[str, Any]:
    """Run one job in a fresh driver process and return its JSON result.

    The driver is killed (its whole process group) when it overruns ``timeout``; the
    drivers clean up their own servers, and a killed driver's servers see their stdin
    close and exit.

    Raises:
        DriverError: Non-zero exit, timeout, or no JSON on stdout (with stderr's tail).
    """
    payload = json.dumps({**job, "backend": contender.backend, "contender": contender.key})
    state_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [str(python), str(DRIVERS_DIR / contender.driver)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=driver_env(state_dir, contender),
        cwd=str(BENCH_DIR.parent),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise DriverError(f"{contender.key}: no result within {timeout:g}s; stderr: {_tail(err)}") from None
    finally:
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
    if proc.returncode != 0:
        raise DriverError(f"{contender.key}: driver exited with {proc.returncode}; stderr: {_tail(err)}")
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                result: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                break
            result.setdefault("contender", contender.key)
            return result
    raise DriverError(f"{contender.key}: driver printed no JSON result; stderr: {_tail(err)}")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(text: str | None, lines: int = 8) -> str:
    return " | ".join((text or "").strip().splitlines()[-lines:])
