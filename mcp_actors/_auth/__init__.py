"""OAuth for servers that need it, on the SDK's client auth (``oauth.py``), and the token stores
(``token_store.py``). The public face is :mod:`mcp_actors.auth`.
"""
