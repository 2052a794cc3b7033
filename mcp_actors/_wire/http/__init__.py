"""Streamable HTTP and legacy SSE: the transport (``transport.py``), the HTTP wire (``wire.py``) and
our own HTTP/1.1 client on trio sockets (``http11.py``), kept because ``benchmarks/`` measure it.
"""
