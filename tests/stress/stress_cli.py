"""Run ``mcp-actors stress`` in-process or as a subprocess, registered if cli.py does not yet do it."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
STRESS_MAIN = (
    "import sys\n"
    f"sys.path.insert(0, {HERE!r})\n"
    "from stress_cli import ensure_registered\n"
    "ensure_registered()\n"
    "from mcp_actors.cli._app import main\n"
    "if __name__ == '__main__':\n"
    "    raise SystemExit(main(sys.argv[1:]))\n"
)


def ensure_registered() -> None:
    """Add the stress sub-app to the root app unless cli.py registers it already."""
    from mcp_actors.cli._app import app
    from mcp_actors.cli._stress import stress_app

    if not any(group.typer_instance is stress_app for group in app.registered_groups):
        app.add_typer(stress_app, name="stress")


def run_cli(argv: list[str]) -> int:
    """``mcp-actors ARGV`` in this process; the exit status."""
    ensure_registered()
    from mcp_actors.cli._app import main

    return main(argv)


def cli_argv(*args: str) -> list[str]:
    """The argv of a subprocess running ``mcp-actors ARGS`` with stress registered."""
    return [sys.executable, "-c", STRESS_MAIN, *args]
