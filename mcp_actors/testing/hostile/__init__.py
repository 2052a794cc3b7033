"""Hostile MCP servers: what a malicious or broken server sends, on purpose.

Two kinds live here:

* stdio programs (``python -m mcp_actors.testing.hostile.<name>``), plain Python writing raw
  lines, so a test sees exactly the bytes a misbehaving server of any language could send;
* raw trio socket servers on 127.0.0.1 (a free port), run for the length of an ``async with``
  block. Every hostile answer is bounded (a cap on the bytes written, or on the bytes a
  compressed body inflates to) so that a client without the defence under test fails its
  test instead of exhausting the machine; a client with it stops reading long before that
  cap, and the server records how far it got.

  * :func:`serve_bomb` — streamable-HTTP answers that try to exhaust memory: an endless
    chunked body, a huge ``Content-Length``, gzip and deflate bombs, an SSE event that never
    ends (:class:`Bomb`).
  * :func:`serve_legacy_sse` — a legacy SSE MCP server (GET stream + POST endpoint) that can
    answer with a big result or announce its POST endpoint on another origin.
  * :func:`serve_status` — answers every request with one fixed status (401, 500, ...).
"""

from mcp_actors.testing.hostile._bombs import Bomb as Bomb
from mcp_actors.testing.hostile._bombs import BombServer as BombServer
from mcp_actors.testing.hostile._bombs import serve_bomb as serve_bomb
from mcp_actors.testing.hostile._bombs import serve_status as serve_status
from mcp_actors.testing.hostile._legacy_sse import LegacySseServer as LegacySseServer
from mcp_actors.testing.hostile._legacy_sse import serve_legacy_sse as serve_legacy_sse

__all__ = ["Bomb", "BombServer", "LegacySseServer", "serve_bomb", "serve_legacy_sse", "serve_status"]
