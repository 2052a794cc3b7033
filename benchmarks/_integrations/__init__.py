"""One module per agent framework for ``benchmarks.integrations``: our toolset against the framework's own MCP client.

Each module ``<key>.py`` defines ``CONTENDERS``: ``{"ours": opener, "own": opener}``, where
an opener is an async context manager factory ``opener(server_argv)`` that connects to the
light stdio server and yields ``call()``, a coroutine function making one ``echo`` call
*through the framework's own tool interface* (the object the framework's agent loop would
invoke), raising on any failure. Most add ``"floor"``: the same framework path with a no-op
local tool of that framework (its plain function tool), the framework's own cost per call;
``CONTENDER_NAMES`` then lists all three. ``python -m benchmarks._integrations.<key> --contender ours``
measures one contender in its own process (:func:`benchmarks._integrations._measure.main`).
"""
