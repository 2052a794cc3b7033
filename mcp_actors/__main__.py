"""``python -m mcp_actors``: the ``mcp-actors`` command (see :mod:`mcp_actors.cli`)."""

from mcp_actors.cli import main

raise SystemExit(main())
