"""The registry actor: the one writer of server records, slots, the tool cache and tool ids.

Hosts reach it through :class:`mcp_actors.service.McpService`, which reads the snapshot it
publishes and sends it messages (``actor.py``). The rules of records that need no runtime
(look-up, a new record, a new name) are in ``rules.py``, shared with the command line.
"""
