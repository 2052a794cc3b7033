"""The docs examples' runner (tests/forkrun.py) gives what ``python script.py`` gives: status, output, shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import forkrun
import pytest

SCRIPTS = {
    "prints": "import sys\nprint('out')\nprint('err', file=sys.stderr)\n",
    "raises": "def main():\n    raise ValueError('boom')\n\nmain()\n",
    "exits_with_a_message": "import sys\nsys.exit('bad input')\n",
    "exits_with_a_code": "import sys\nprint('partial')\nsys.exit(7)\n",
    "runs_atexit_and_joins_threads": (
        "import atexit, threading, time\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        "print('main done')\n"
    ),
    "sees_its_environment_and_cwd": (
        "import os, sys\n"
        "print(os.environ['FORKRUN_PROBE'], os.getcwd() == os.path.dirname(__file__), __name__)\n"
        "print(sys.argv == [__file__], sys.stdin.read() == '')\n"
    ),
    "cannot_use_an_import_it_did_not_make": "print(trio.current_time)\n",
    "sees_its_arguments": "import sys\nprint(sys.argv[1:], sys.argv[0] == __file__)\n",
}
ARGS = {"sees_its_arguments": ("one", "two words", "--flag")}
"""The command-line arguments a script gets (none unless named here)."""


def _env() -> dict[str, str]:
    return {**os.environ, "FORKRUN_PROBE": "probe"}


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_forked_run_is_a_python_run(name: str, tmp_path: Path) -> None:
    """Exit status, stdout and stderr (traceback included) are those of ``python script.py``."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPTS[name], encoding="utf-8")
    real = subprocess.run(
        [sys.executable, str(script), *ARGS.get(name, ())],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    forked = forkrun.run_script(script, *ARGS.get(name, ()), env=_env(), cwd=tmp_path, bound=60)
    assert forked.args == [sys.executable, str(script), *ARGS.get(name, ())]
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)


def test_a_run_past_its_bound_is_killed(tmp_path: Path) -> None:
    """A script that outlives ``bound`` is killed and reported as subprocess.run reports it; the next run works."""
    script = tmp_path / "script.py"
    script.write_text("import time\ntime.sleep(600)\n", encoding="utf-8")
    with pytest.raises(subprocess.TimeoutExpired):
        forkrun.run_script(script, env=_env(), cwd=tmp_path, bound=0.5)
    script.write_text("print('next')\n", encoding="utf-8")
    assert forkrun.run_script(script, env=_env(), cwd=tmp_path, bound=60).stdout == "next\n"
