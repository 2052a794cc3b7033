"""The registry actor: the one writer of server records, slots, the tool cache and tool ids.

Hosts reach it through :class:`mcp_actors.service.McpService`, which reads the snapshot it
publishes and sends it messages (``actor.py``).
"""
