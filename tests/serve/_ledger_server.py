"""A light stdio MCP server that writes down every call it executes: the upstream's own count.

``python tests/serve/_ledger_server.py LEDGER``: one tool, ``record(token, seconds=0)``,
which appends ``token`` and the time (Unix) as one line to the file ``LEDGER`` (one ``write``
on an ``O_APPEND`` descriptor: whole lines, whoever else appends), then waits ``seconds`` and answers with the
token. A call a client saw succeed must be in some ledger; a call in flight when its
gateway died may be in one or not, never reported as a success that did not run. Standard
library only (it starts in tens of milliseconds); it exits when stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

RECORD = {
    "name": "record",
    "description": "Write the token down in the ledger, wait, answer with the token.",
    "inputSchema": {
        "type": "object",
        "properties": {"token": {"type": "string"}, "seconds": {"type": "number"}},
        "required": ["token"],
    },
}
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")


def main() -> None:
    ledger = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        line = json.dumps(message) + "\n"
        with lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def call(rid: Any, arguments: dict[str, Any]) -> None:
        token = str(arguments.get("token", ""))
        os.write(ledger, f"{token} {time.time():.6f}\n".encode())
        time.sleep(float(arguments.get("seconds", 0) or 0))
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": token}]}})

    for raw in sys.stdin:
        message = json.loads(raw)
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            continue
        if method == "initialize":
            asked = message.get("params", {}).get("protocolVersion")
            result = {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "ledger", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [RECORD]}})
        elif method == "tools/call":
            threading.Thread(target=call, args=(rid, message["params"].get("arguments") or {}), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
