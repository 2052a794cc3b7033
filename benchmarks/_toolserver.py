"""A light stdio MCP server for the benchmarks that need many servers or many tools.

Standard library only, so that it starts in a few tens of milliseconds and holds a few
megabytes: the benchmarks of memory (200 servers), shutdown (50 servers) and tool setup
(20 servers x 50 tools) measure the *client*, and a heavy server would only measure the
machine. Run it by path, with any Python 3.11+::

    python benchmarks/_toolserver.py [--tools N] [--corpus DIR]

It speaks the handshake era of MCP over stdio: ``initialize``, ``ping``, ``tools/list``
and ``tools/call``; every other request gets ``-32601``. The first tool is ``echo(text)``;
the other ``N - 1`` are real tool definitions taken in turn from the schema corpus
(those whose input schema is an object schema, as every SDK requires)
(``tests/data/tool_schemas``, tools of public MCP servers), renamed with a numeric suffix
so that every name is unique. Any tool call answers with its ``text`` argument (or
``"ok"``). It exits as soon as stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["build_tools", "main", "serve", "serve_http"]

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
DEFAULT_CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tool_schemas")

ECHO_TOOL: dict[str, Any] = {
    "name": "echo",
    "description": "Return the given text unchanged.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to send back."}},
        "required": ["text"],
    },
}


def _sdk_valid(tool: Any) -> bool:
    """Whether every MCP SDK accepts the tool (the corpus also holds deliberately odd schemas)."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return False
    schema = tool.get("inputSchema")
    return isinstance(schema, dict) and schema.get("type") == "object"


def _corpus_tools(corpus: str) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for path in sorted(glob.glob(os.path.join(corpus, "*.json"))):
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        if isinstance(document, dict):
            tools.extend(t for t in document.get("tools", []) if _sdk_valid(t))
    return tools


def build_tools(count: int, corpus: str = DEFAULT_CORPUS) -> list[dict[str, Any]]:
    """The server's tool list: ``echo`` and then ``count - 1`` corpus tools, uniquely named.

    Without a corpus the extra tools are small synthetic ones, so the server still runs
    from a copy of this file alone.
    """
    pool = _corpus_tools(corpus)
    tools = [ECHO_TOOL]
    for i in range(count - 1):
        if pool:
            base = dict(pool[i % len(pool)])
        else:
            base = {"name": "tool", "description": "A synthetic tool.", "inputSchema": ECHO_TOOL["inputSchema"]}
        base["name"] = f"{str(base['name'])[:40]}_{i}"
        tools.append(base)
    return tools[:count]


def _reply(request_id: Any, result: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, separators=(",", ":"))


def _error(request_id: Any, code: int, message: str) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}, separators=(",", ":")
    )


def _answer(message: dict[str, Any], tools_json: list[dict[str, Any]]) -> str | None:
    method = message.get("method")
    request_id = message.get("id")
    if request_id is None:
        return None  # a notification: nothing to answer
    params = message.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return _reply(
            request_id,
            {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "bench-toolserver", "version": "1.0"},
            },
        )
    if method == "ping":
        return _reply(request_id, {})
    if method == "tools/list":
        return _reply(request_id, {"tools": tools_json})
    if method == "tools/call":
        text = (params.get("arguments") or {}).get("text", "ok")
        return _reply(request_id, {"content": [{"type": "text", "text": str(text)}], "isError": False})
    return _error(request_id, -32601, f"method not found: {method}")


def main(argv: Sequence[str] | None = None) -> None:
    """Serve MCP on stdin/stdout until stdin closes."""
    parser = argparse.ArgumentParser(prog="_toolserver.py", description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1, help="number of tools, echo included (default: 1)")
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="directory of tool schema JSON files")
    parser.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP on 127.0.0.1 (a free port) instead of stdio; "
        "prints the endpoint URL as the first line on stdout; exits when stdin closes",
    )
    args = parser.parse_args(argv)
    if args.tools < 1:
        parser.error(f"--tools must be >= 1, got {args.tools}")
    tools = build_tools(args.tools, args.corpus)
    if args.http:
        asyncio.run(serve_http(tools))
    else:
        serve(tools)


def serve(tools: list[dict[str, Any]]) -> None:
    """Answer every complete line read, one ``os.write`` per read.

    Raw reads of the stdin descriptor (no text layer, no flush per line): with many calls
    in flight, all the lines of one read are answered with one write, so the server stays
    faster than any client it measures (the hot-path benchmark needs that).
    """
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    buffer = b""
    while True:
        chunk = os.read(stdin, 1 << 16)
        if not chunk:
            return
        *lines, buffer = (buffer + chunk).split(b"\n")
        answers: list[str] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                answers.append(_error(None, -32700, "parse error"))
                continue
            answer = _answer(message, tools) if isinstance(message, dict) else None
            if answer is not None:
                answers.append(answer)
        if answers:
            data = ("\n".join(answers) + "\n").encode()
            while data:
                data = data[os.write(stdout, data) :]


SESSION_ID = "bench-session"
_REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 405: "Method Not Allowed"}


def _http_response(status: int, body: bytes = b"", *, json_body: bool = False) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Length: {len(body)}", f"Mcp-Session-Id: {SESSION_ID}"]
    if json_body:
        head.append("Content-Type: application/json")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _http_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tools: list[dict[str, Any]]
) -> None:
    """One keep-alive connection: POSTed JSON-RPC answered as ``application/json``.

    The smallest correct streamable-HTTP server: a request gets its response as a JSON
    body (the spec lets a server answer without SSE); a notification or a response gets
    202; GET (the optional server-to-client stream) gets 405, as the spec allows; DELETE
    ends the session with 200.
    """
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ", 1)[0]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            if method == "POST":
                try:
                    message = json.loads(body)
                except json.JSONDecodeError:
                    writer.write(_http_response(400, _error(None, -32700, "parse error").encode(), json_body=True))
                else:
                    answer = _answer(message, tools) if isinstance(message, dict) else None
                    if answer is None:
                        writer.write(_http_response(202))
                    else:
                        writer.write(_http_response(200, answer.encode(), json_body=True))
            elif method == "DELETE":
                writer.write(_http_response(200))
            else:
                writer.write(_http_response(405))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve_http(tools: list[dict[str, Any]]) -> None:
    """Serve streamable HTTP on a free loopback port until stdin closes (standard library only)."""
    server = await asyncio.start_server(lambda r, w: _http_connection(r, w, tools), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"http://127.0.0.1:{port}/mcp\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)
    async with server:
        await stdin_closed


if __name__ == "__main__":
    main()
