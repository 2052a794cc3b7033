"""Side-by-side benchmarks of mcp-actors, the raw MCP SDK and its peers.

Every benchmark is a module, run as ``python -m benchmarks.<name>``; each prints a table
for people and writes JSON with ``--json PATH``. ``python -m benchmarks.all`` runs them
all (``--quick``: the smoke mode CI runs; ours and the raw SDK only, tiny counts, no
installs). See ``benchmarks/README.md`` for what each measures and how.

=====================  =======================================================
``call_overhead``      1. sequential ``call_tool`` latency on one stdio server
``concurrency``        2. calls/s with 100 in flight, on 1 and on 10 servers
``startup``            3. time until 20 stdio servers are connected and listed
``tool_setup``         4. ``setup_mcp_tools`` per LLM request, cached
``conversion``         5. provider conversion throughput, inline vs trio_parallel
``memory``             6. host RSS per idle connection at 1, 50 and 200 servers
``shutdown``           7. closing with 50 servers running; processes left
``fault_recovery``     8. crash to fail-fast, and to the first success after restart
=====================  =======================================================
"""
