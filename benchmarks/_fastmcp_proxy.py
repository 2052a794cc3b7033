"""fastmcp's proxy in front of one stdio server, over streamable HTTP on a given port (fastmcp's venv).

Started by ``benchmarks/_peer_gateway.py``; the documented way to serve a stdio server over
HTTP with fastmcp: ``create_proxy`` of an ``mcpServers`` config, run with the ``http``
transport (uvicorn)::

    python benchmarks/_fastmcp_proxy.py PORT -- <upstream argv...>
"""

from __future__ import annotations

import sys

from fastmcp.server import create_proxy


def main() -> None:
    """Serve the proxy until killed."""
    port = int(sys.argv[1])
    upstream = [a for a in sys.argv[2:] if a != "--"]
    config = {"mcpServers": {"up": {"command": upstream[0], "args": upstream[1:]}}}
    proxy = create_proxy(config, name="bench-fastmcp-proxy")
    proxy.run(transport="http", host="127.0.0.1", port=port, path="/mcp", show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
