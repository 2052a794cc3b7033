"""mcp-actors: a trio supervisor tree for many MCP servers at once."""
