"""A fault-injection MCP server: ``python -m mcp_actors.testing.fault_server [flags]``.

Without flags it is a well-behaved MCP server with the tools ``echo``, ``add``,
``sleep``, ``big`` and ``fail``. Each flag injects one fault, and flags combine:
crashes, hangs, garbage on stdout, floods of stderr or notifications, a closed stdout,
an unkillable grandchild, ignored pings, huge results, slow or failed starts. Every
flag is documented in ``--help`` and in ``docs/testing.md``.

Over stdio (the default) it is a hand-written JSON-RPC loop on trio that starts in a
fraction of a second; with ``--transport streamable-http`` it is built on the MCP SDK
and announces ``mcp-actors: listening on <url>`` on stderr once it accepts connections.
Its own diagnostic lines go to stderr and start with ``fault: ``.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from mcp_actors.testing._fault_plan import FaultPlan as FaultPlan
from mcp_actors.testing._fault_plan import build_parser as build_parser
from mcp_actors.testing._fault_plan import parse_fault_args as parse_fault_args
from mcp_actors.testing._fault_plan import run_start_faults

__all__ = ["FaultPlan", "build_parser", "main", "parse_fault_args"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the fault server from the command line.

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.
    """
    plan = parse_fault_args(argv)
    run_start_faults(plan)
    if plan.transport == "stdio":
        from mcp_actors.testing._fault_stdio import serve_stdio

        trio.run(serve_stdio, plan)
    else:
        # Imported only here: the SDK costs a second of start-up the stdio engine avoids.
        from mcp_actors.testing._fault_http import serve_streamable_http

        serve_streamable_http(plan)


if __name__ == "__main__":
    main()
