"""A server whose answers are JSON its own language calls valid, and answers that are no JSON at all.

``python -m mcp_actors.testing.hostile.wire_odd_json``. Tools (each answers with one raw line):

* ``lone_surrogate``: a text cut mid-emoji, as Node's ``JSON.stringify`` writes it (``"\\ud83d"``);
* ``nan``: ``NaN``, ``Infinity`` and ``-Infinity`` in ``structuredContent``, as Python's ``json.dumps`` writes them;
* ``big_ints``: integers wider than 64 bits in ``structuredContent`` (``big``, ``negative``), and the
  call's arguments echoed back (``echo``), written by the stdlib: every digit kept;
* ``unparseable``: an answer with an invalid escape (``"\\x41"``) inside its result, a nested
  ``"id"`` before the real one, and its own id last: not JSON, but whose answer it is can be read;
* ``truncated``: an answer cut off before its id: not JSON, and nobody can say whose answer it is.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_actors.testing.hostile._wire_base import RawServer, tool_result


def _raw(rpc_id: Any, result: str) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + json.dumps(rpc_id).encode() + b',"result":' + result.encode() + b"}"


def lone_surrogate(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> bytes:
    return _raw(rpc_id, '{"content":[{"type":"text","text":"cut \\ud83d"}],"isError":false}')


def nan(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> bytes:
    structured = '{"nan":NaN,"inf":Infinity,"minus_inf":-Infinity}'
    return _raw(rpc_id, '{"content":[{"type":"text","text":"odd numbers"}],"structuredContent":' + structured + "}")


def big_ints(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    structured = {"big": 1000000000000000000123, "negative": -9223372036854775809, "echo": arguments}
    return tool_result(json.dumps(structured), structured)


def unparseable(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> bytes:
    result = '{"content":[{"id":999,"type":"text","text":"bad \\x41 escape"}],"isError":false}'
    return b'{"jsonrpc":"2.0","result":' + result.encode() + b',"id":' + json.dumps(rpc_id).encode() + b"}"


def truncated(server: RawServer, rpc_id: Any, arguments: dict[str, Any]) -> bytes:
    return b'{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"cut sho'


def main() -> None:
    RawServer(
        {
            "lone_surrogate": lone_surrogate,
            "nan": nan,
            "big_ints": big_ints,
            "unparseable": unparseable,
            "truncated": truncated,
        }
    ).serve()


if __name__ == "__main__":
    main()
