"""The built-in demo server's parts (its protocol features and the callbacks it exercises), and
the one-line listening announcement every HTTP server of ours writes. Standard library and the
SDK's server only: ``python -m mcp_actors.demo_server`` must start fast.
"""
