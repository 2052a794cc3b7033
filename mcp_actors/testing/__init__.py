"""Test support for mcp-actors and its users: a fault-injection MCP server and helpers.

* ``python -m mcp_actors.testing.fault_server`` — an MCP server that misbehaves on
  purpose (crashes, hangs, garbage on stdout, floods, ...); see ``docs/testing.md``.
* :func:`demo_server_command` / :func:`fault_server_command` — argv lists for spawners.
* :func:`serve_http` — run an HTTP server on a free port for the length of a block.
* :func:`assert_no_children_left` — the "no process left behind" check.
* ``python -m mcp_actors.testing.conformance_server`` — the fixture server of the official
  MCP conformance suite's server scenarios (every kind of content, callback, input-required
  answer and task the suite checks), on streamable HTTP; see ``docs/testing.md``.
* :mod:`mcp_actors.testing.hostile` — hostile HTTP servers on loopback (memory bombs, legacy
  SSE with big messages or a foreign endpoint, fixed error statuses).

This package must stay light to import (standard library, trio, attrs, psutil): the
stdio fault server imports it on start-up, and its start-up time is paid by every test.
"""

from mcp_actors._demo.announce import ANNOUNCE_PREFIX as ANNOUNCE_PREFIX
from mcp_actors.testing.servers import HttpServerHandle as HttpServerHandle
from mcp_actors.testing.servers import assert_no_children_left as assert_no_children_left
from mcp_actors.testing.servers import demo_server_command as demo_server_command
from mcp_actors.testing.servers import fault_server_command as fault_server_command
from mcp_actors.testing.servers import live_descendants as live_descendants
from mcp_actors.testing.servers import serve_http as serve_http

__all__ = [
    "ANNOUNCE_PREFIX",
    "HttpServerHandle",
    "assert_no_children_left",
    "demo_server_command",
    "fault_server_command",
    "live_descendants",
    "serve_http",
]
