"""A server that floods its stdout with lines that are no JSON, before an answer or a ping's answer.

``python -m mcp_actors.testing.hostile.wire_garbage [--garbage-before-ping N]``. Its tool
``garbage`` (argument ``lines``) writes that many log-like lines to stdout, then its answer
(``{"lines": N}`` as structured content). With ``--garbage-before-ping N`` every ping's
answer comes after N such lines: a live server whose answer waits behind its own noise.
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp_actors.testing.hostile._wire_base import RawServer, tool_result

_LINE = b"2026-01-01 12:00:00 INFO worker: processed item, nothing to see here\n"
_BLOCK = 10_000


def write_garbage(server: RawServer, count: int) -> None:
    """``count`` garbage lines, written in blocks."""
    block = _LINE * _BLOCK
    for _ in range(count // _BLOCK):
        server.write_many(block)
    if count % _BLOCK:
        server.write_many(_LINE * (count % _BLOCK))


def garbage(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    count = int(arguments.get("lines", 1000))
    write_garbage(server, count)
    return tool_result(f"{count} lines", {"lines": count})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--garbage-before-ping", type=int, default=0, metavar="N")
    before_ping = parser.parse_args().garbage_before_ping

    def on_ping(server: RawServer, rpc_id: Any) -> None:
        write_garbage(server, before_ping)
        server.answer(rpc_id, {})

    RawServer({"garbage": garbage}, on_ping=on_ping if before_ping else None).serve()


if __name__ == "__main__":
    main()
