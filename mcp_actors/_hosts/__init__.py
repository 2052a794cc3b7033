"""How asyncio hosts reach the trio runtime: the facade, the bridges for host callbacks, the session view.

* ``facade.py``: :class:`~mcp_actors._hosts.facade.AsyncioMcpService`, every ``McpService``
  operation as an asyncio coroutine over a *hop* (how a call gets onto the runtime's trio
  loop and its outcome back), and the bridges that run the host's callbacks (approver,
  progress, sampling, elicitation, roots) on its asyncio loop.
* ``guest.py``: the runtime as a trio guest on the host's own asyncio loop (one thread, no
  hop across threads) and its hop.
* ``workers.py``: the trio worker tasks that run the facade's calls (idle between calls; no
  task or cancel scope per call), for both hops.
* ``session.py``: a ``ClientSession``-shaped view of one server, for libraries that take one.
* ``closing.py``: waiting for a runtime to stop from an asyncio task that may be cancelled meanwhile.

The thread hop (the runtime on a thread of its own) is the portal's, in
:mod:`mcp_actors.portal`; :mod:`mcp_actors.asyncio` is the public face of both.
"""
