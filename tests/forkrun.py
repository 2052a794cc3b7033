"""Run a Python script in a process of its own, forked from an interpreter that has imported the MCP SDK.

A docs example run as ``python example.py`` spends most of its CPU (1-2 s) importing the MCP
SDK, its pydantic models, trio and httpx, the same in every run. :func:`run_script` hands the
script to a long-lived interpreter of this test process (started on first use, one per test
process) that has imported those third-party libraries once, and forks a child per script.
The child is what ``python script.py`` would be: a process of its own with the given
environment, working directory, arguments (``sys.argv``) and ``sys.path[0]``, stdin from /dev/null,
stdout and stderr of its own, a fresh ``random`` seed, the script run as ``__main__``, the
exit status Python gives (an uncaught exception prints its traceback and exits 1,
``SystemExit`` is honoured) and a normal interpreter shutdown (atexit handlers, non-daemon
threads joined). Nothing of mcp_actors is imported ahead, so an example that forgets an
import of ours still fails.

Run as a script (``python forkrun.py MODULE...``) this file is that interpreter: it imports
the modules, then reads one JSON request a line on stdin and answers with the child's pid,
then its exit status, a JSON line each.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PRELOAD = ("trio", "anyio", "httpx2", "pydantic", "jsonschema", "psutil", "mcp_types", "mcp.client", "mcp.client.auth")
"""Third-party modules the forking interpreter imports once (never a module of mcp_actors)."""

MARKER = str(Path(__file__).resolve())
"""The forking interpreter's command line holds this path (the leak guard counts it as infrastructure)."""


def _child(request: dict[str, Any]) -> int:
    """In the forked child: become ``python script`` and run it; the exit status."""
    import random
    import runpy

    stdin = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((stdin, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    script = request["script"]
    sys.argv = [script, *request["args"]]
    extra = [entry for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[0:0] = [os.path.dirname(script), *extra]
    random.seed()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException as error:  # what the interpreter does with an uncaught exception
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next  # the traceback starts at the script, as Python's does
        sys.excepthook(type(error), error.with_traceback(tb), tb)
        return 1
    return 0


def _serve(preload: list[str]) -> None:
    """The forking interpreter: import ``preload``, then fork a child per request line."""
    for name in preload:
        importlib.import_module(name)
    sys.path.pop(0)  # this file's directory, which ``python script`` would not have
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sys.exit(_child(request))  # the child's interpreter shuts down as ``python script`` would
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


class _Forker:
    """The test process's end of one forking interpreter."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, MARKER, *PRELOAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        self.pending = b""
        atexit.register(self.close)

    def _answer(self, deadline: float | None) -> dict[str, Any]:
        """The next JSON line of the forking interpreter, read unbuffered; ``TimeoutError`` past ``deadline``."""
        import time

        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            if deadline is not None:
                with selectors.DefaultSelector() as sel:
                    sel.register(fd, selectors.EVENT_READ)
                    if not sel.select(max(0.0, deadline - time.monotonic())):
                        raise TimeoutError
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the forking interpreter {self.proc.pid} is gone (exit {self.proc.poll()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(
        self, script: Path, args: Sequence[str], *, env: dict[str, str], cwd: Path, bound: float
    ) -> subprocess.CompletedProcess[str]:
        import signal
        import time

        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock, tempfile.TemporaryDirectory(prefix="forkrun-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {
                "script": str(script),
                "args": list(args),
                "env": env,
                "cwd": str(cwd),
                "stdout": str(out),
                "stderr": str(err),
            }
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            deadline = time.monotonic() + bound
            pid = self._answer(deadline)["pid"]
            try:
                returncode = self._answer(deadline)["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._answer(None)
                raise subprocess.TimeoutExpired([sys.executable, str(script), *args], bound) from None
            argv = [sys.executable, str(script), *args]
            return subprocess.CompletedProcess(argv, returncode, out.read_text("utf-8"), err.read_text("utf-8"))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_forker: _Forker | None = None
_forker_lock = threading.Lock()


def run_script(
    script: Path, *args: str, env: dict[str, str], cwd: Path, bound: float
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` as ``python script *args`` would, in a forked process; its exit status, stdout and stderr.

    ``env`` is the child's whole environment. Raises ``subprocess.TimeoutExpired`` (the child
    killed) when it runs longer than ``bound`` seconds.
    """
    global _forker
    with _forker_lock:
        if _forker is None or _forker.proc.poll() is not None:
            _forker = _Forker()
        forker = _forker
    return forker.run(script, args, env=env, cwd=cwd, bound=bound)


if __name__ == "__main__":
    _serve(sys.argv[1:])
