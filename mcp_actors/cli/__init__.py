"""The ``mcp-actors`` command: one module per command group (``_app.py`` holds the root app).

Usage is in ``docs/cli.md``; :func:`main` is the console script's entry point.
"""

from __future__ import annotations

from mcp_actors.cli._app import ExitCode as ExitCode
from mcp_actors.cli._app import ToolFormat as ToolFormat
from mcp_actors.cli._app import app as app
from mcp_actors.cli._app import main as main

__all__ = ["ExitCode", "ToolFormat", "app", "main"]
