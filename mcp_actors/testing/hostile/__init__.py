"""Hostile MCP servers: small programs that break the protocol's unwritten rules on purpose.

Each module is a stdio server of its own (``python -m mcp_actors.testing.hostile.<name>``),
plain Python writing raw lines, so a test sees exactly the bytes a misbehaving server of
any language could send.
"""
