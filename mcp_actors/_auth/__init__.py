"""OAuth for servers that need it, on the SDK's client auth (``oauth.py``), the token stores
(``token_store.py``) and DPoP-bound tokens (``dpop.py``: keys, proofs, nonces). The public face
is :mod:`mcp_actors.auth`.
"""
