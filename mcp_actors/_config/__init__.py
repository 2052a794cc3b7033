"""Configuration: server records and their JSON codec, the config file store and its atomic
locked write (``atomic.py``, shared with the token file), the one rule for reading a file as
configuration (``files.py``), host-config import, ``${env:X}`` variables, the state directory
(and the 0700 rule for every directory we create), secret redaction and the routing of the
SDK's log records about our connections.

Public faces: :mod:`mcp_actors.records`, :mod:`mcp_actors.store`, :mod:`mcp_actors.config_import`.
"""
