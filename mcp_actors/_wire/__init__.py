"""Getting JSON-RPC messages to and from a server: the Wire seam, the dispatcher, the transports.

``base.py`` is the seam every transport implements; ``codec.py`` the one JSON rule of every
wire; ``dispatch.py`` the one dispatcher every session runs on; ``transports.py`` the kind
registry and stdio; ``link.py`` what the connection actor sees of any transport; ``spawn.py``
a stdio server's spawn; ``memory.py`` an in-process SDK server; ``http/`` streamable HTTP and
legacy SSE; ``lograte.py`` one log line for a flood of like events.
"""
