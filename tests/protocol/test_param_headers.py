"""``Mcp-Param-*`` headers on a 2026-07-28 ``tools/call`` (SEP-2243), as a real HTTP server receives them.

A tool's input schema may mark arguments with ``x-mcp-header``; the client mirrors each
marked argument into an ``Mcp-Param-<Name>`` header so a gateway can route on it without
reading the body. The rules checked here: a null or absent argument sends no header at all
(an empty header would claim a value), a value safe as a header goes as is, and a value that
is not (non-ASCII, control characters, edge whitespace) goes in the spec's base64 form
``=?base64?...?=``, which decodes to exactly the argument.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import trio
from mcp.server.mcpserver import MCPServer
from pydantic import Field
from testkit import serve_in_thread, text_of

from mcp_actors import open_runtime

BOUND = 60.0


def recording_app(seen: list[dict[str, str]]) -> Callable[[], Any]:
    """An SDK server whose ``where`` tool marks two arguments as headers; every POST's headers are kept."""

    def build() -> Any:
        server: MCPServer[Any] = MCPServer("headers")

        @server.tool(structured_output=False)
        async def where(
            region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})] = "-",
            note: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Note"})] = "-",
        ) -> str:
            return f"{region}/{note}"

        app = server.streamable_http_app(host="127.0.0.1")

        async def recorder(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["method"] == "POST":
                seen.append({k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]})
            await app(scope, receive, send)

        return recorder

    return build


def decoded(value: str) -> str:
    """A header value in either form the spec allows, as the argument it carries."""
    if value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[len("=?base64?") : -2]).decode()
    return value


async def test_param_headers_are_omitted_for_absent_and_null_and_base64_for_unsafe_values(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    async with serve_in_thread(recording_app(seen)) as url:
        async with open_runtime(tmp_path / "cfg.json") as runtime:
            svc = runtime.service
            with trio.fail_after(BOUND):
                await svc.add({"name": "h", "type": "http", "config": {"url": url}})
                await svc.connect("h")

                async def call(arguments: dict[str, Any]) -> tuple[str, dict[str, str]]:
                    seen.clear()
                    result = await svc.call_tool("h", "where", arguments)
                    calls = [h for h in seen if h.get("mcp-method") == "tools/call"]
                    assert len(calls) == 1, seen
                    return text_of(result), calls[0]

                text, headers = await call({"region": "eu-west"})
                assert headers["mcp-protocol-version"] == "2026-07-28"
                assert headers["mcp-name"] == "where"
                assert text == "eu-west/-"
                assert headers["mcp-param-region"] == "eu-west"
                assert "mcp-param-note" not in headers  # absent: no header

                # The server refuses the null (its schema says string): the headers are the point.
                _text, headers = await call({"region": None, "note": "plain"})
                assert "mcp-param-region" not in headers  # null: no header either
                assert headers["mcp-param-note"] == "plain"

                unsafe = [" padded ", "zürich", "two\nlines", "東京"]
                for value in unsafe:
                    text, headers = await call({"region": value})
                    assert text == f"{value}/-"
                    sent = headers["mcp-param-region"]
                    assert sent.startswith("=?base64?"), (value, sent)
                    assert decoded(sent) == value
