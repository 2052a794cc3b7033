"""The built-in demo MCP server: the embedded default of a fresh install.

Run it with ``python -m mcp_actors.demo_server`` (stdio), or over HTTP with
``--transport streamable-http`` or ``--transport sse`` and ``--port 0`` to bind a free
port. Over HTTP it writes one line to stderr once it accepts connections::

    mcp-actors: listening on http://127.0.0.1:40123/mcp

(``/mcp`` for streamable HTTP, ``/sse`` for SSE). It binds ``127.0.0.1`` unless told
otherwise.

It exists so that every ``mcp-actors`` command works with no configuration, and so that
tests (ours and our users') have one server that exercises every kind of content an MCP
tool can return:

========================  ==============================================================
``echo(text)``            the text back
``add(a, b)``             the sum (also as structured content)
``sleep(seconds)``        sleeps in ten steps, reporting progress after each one
``image()``               a 1x1 PNG image content item (``image/png``)
``audio()``               a short silent WAV audio content item (``audio/wav``)
``resource()``            an embedded text resource and an embedded blob resource
``resource_link()``       a resource link to ``demo://readme``
``fail(message)``         a tool-level error result (``isError: true``) carrying message
``big(n)``                a text of exactly ``n`` bytes
``toggle_extra_tool()``   adds or removes the tool ``extra``; sends ``tools/list_changed``
``stderr(text)``          writes the text as one line to the server's stderr
========================  ==============================================================

Plus the tools that ask the host for something (sampling, form and URL elicitation, roots),
described in :mod:`mcp_actors._demo.callbacks`.

It also offers the prompt ``greeting`` and the resource ``demo://readme``, so that
``discover`` has something to find, and (from :mod:`mcp_actors._demo.features`) every other
feature of the protocol's client side: more resources, a template and a subscription,
prompts with arguments, completion, logging, structured output and task-augmented tools.

Start-up cost is dominated by importing the MCP SDK (its pydantic models); see
``docs/testing.md`` for the measured time and for the fast stdlib-only fault server.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import sys
from collections.abc import Sequence
from typing import Annotated, Any, Final, Literal

import anyio
import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field
from starlette.applications import Starlette

from mcp_actors._demo.announce import format_announce, http_url
from mcp_actors._demo.callbacks import add_callback_tools
from mcp_actors._demo.features import add_protocol_features
from mcp_actors._demo.media import PNG_BYTES, WAV_BYTES

__all__ = [
    "DEMO_SERVER_NAME",
    "EXTRA_TOOL_NAME",
    "MAX_BIG_BYTES",
    "MAX_SLEEP_SECONDS",
    "README_URI",
    "create_demo_server",
    "main",
    "serve_http_app",
]

DEMO_SERVER_NAME: Final = "mcp-actors-demo"
"""The name the demo server reports in its ``serverInfo``."""

README_URI: Final = "demo://readme"
"""URI of the demo server's one resource (also the target of ``resource_link``)."""

EXTRA_TOOL_NAME: Final = "extra"
"""Name of the tool that ``toggle_extra_tool`` adds and removes."""

MAX_BIG_BYTES: Final = 64 * 1024 * 1024
"""Upper bound of ``big(n)``: a typo must not make the server allocate gigabytes."""

MAX_SLEEP_SECONDS: Final = 3600.0
"""Upper bound of ``sleep(seconds)``: every wait in our code is bounded."""

_SLEEP_STEPS: Final = 10
_GRACEFUL_SHUTDOWN_SECONDS: Final = 2

_README_TEXT: Final = (
    "This is the mcp-actors demo server. It offers the tools echo, add, sleep, image, "
    "audio, resource, resource_link, fail, big, toggle_extra_tool and stderr, the prompt "
    "'greeting' and this resource.\n"
)


_BIG_PATTERN: Final = b"0123456789abcdefghijklmnopqrstuvwxyz\n"


def _big_text(n: int) -> str:
    """Return an ASCII text of exactly ``n`` bytes (a repeated, recognisable pattern)."""
    repeats = n // len(_BIG_PATTERN) + 1
    return (_BIG_PATTERN * repeats)[:n].decode("ascii")


def create_demo_server() -> MCPServer[Any]:
    """Build the demo server with all its tools, its prompt and its resource.

    A new instance each call: ``toggle_extra_tool`` mutates the server's tool set, and
    tests that embed the server must not share that state.

    Returns:
        An SDK ``MCPServer``, not yet running.
    """
    server: MCPServer[Any] = MCPServer(
        DEMO_SERVER_NAME,
        title="mcp-actors demo server",
        instructions="A demo server: every tool shows one kind of MCP result.",
        version="0.1.0",
        log_level="WARNING",
    )

    @server.tool(description="Return the given text unchanged.", structured_output=False)
    def echo(text: Annotated[str, Field(description="The text to send back.")]) -> str:
        return text

    @server.tool(description="Add two numbers and return their sum.", structured_output=True)
    def add(
        a: Annotated[float, Field(description="The first addend.")],
        b: Annotated[float, Field(description="The second addend.")],
    ) -> float:
        return a + b

    @server.tool(
        description=(
            "Sleep for the given number of seconds in ten equal steps, reporting progress "
            "after each step, then return. Use it to test timeouts, cancellation and progress."
        ),
        structured_output=False,
    )
    async def sleep(
        seconds: Annotated[float, Field(ge=0, le=MAX_SLEEP_SECONDS, description="How long to sleep, in seconds.")],
        ctx: Context,
    ) -> str:
        step = seconds / _SLEEP_STEPS
        for done in range(1, _SLEEP_STEPS + 1):
            await anyio.sleep(step)
            await ctx.report_progress(done * step, seconds, f"slept {done * step:g} of {seconds:g} s")
        return f"slept {seconds:g} s"

    @server.tool(description="Return a tiny image: one transparent pixel, as image/png.")
    def image() -> types.CallToolResult:
        data = base64.b64encode(PNG_BYTES).decode("ascii")
        return types.CallToolResult(content=[types.ImageContent(data=data, mime_type="image/png")])

    @server.tool(description="Return a tiny audio clip: 10 ms of silence, as audio/wav.")
    def audio() -> types.CallToolResult:
        data = base64.b64encode(WAV_BYTES).decode("ascii")
        return types.CallToolResult(content=[types.AudioContent(data=data, mime_type="audio/wav")])

    @server.tool(description="Return two embedded resources: a text one and a binary (blob) one.")
    def resource() -> types.CallToolResult:
        text = types.TextResourceContents(uri=README_URI, mime_type="text/plain", text=_README_TEXT)
        blob = types.BlobResourceContents(
            uri="demo://pixel.png",
            mime_type="image/png",
            blob=base64.b64encode(PNG_BYTES).decode("ascii"),
        )
        return types.CallToolResult(
            content=[types.EmbeddedResource(resource=text), types.EmbeddedResource(resource=blob)]
        )

    @server.tool(description="Return a link to the demo server's readme resource.")
    def resource_link() -> types.CallToolResult:
        link = types.ResourceLink(
            uri=README_URI,
            name="readme",
            description="What the demo server offers.",
            mime_type="text/plain",
        )
        return types.CallToolResult(content=[link])

    @server.tool(
        description=(
            "Fail on purpose: return a tool error result (isError: true) carrying the message. "
            "The call itself succeeds at the protocol level."
        )
    )
    def fail(
        message: Annotated[str, Field(description="The error text to return.")],
    ) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)

    @server.tool(
        description="Return a text of exactly n bytes (ASCII), to test large results.",
        structured_output=False,
    )
    def big(
        n: Annotated[int, Field(ge=0, le=MAX_BIG_BYTES, description="The size of the text in bytes.")],
    ) -> str:
        return _big_text(n)

    def extra() -> str:
        return "the extra tool is here"

    @server.tool(
        description=(
            f"Add the tool '{EXTRA_TOOL_NAME}' if it is absent, remove it if present, and tell "
            "the client with notifications/tools/list_changed. Use it to test tool-list caches."
        ),
        structured_output=False,
    )
    async def toggle_extra_tool(ctx: Context) -> str:
        if any(tool.name == EXTRA_TOOL_NAME for tool in await server.list_tools()):
            server.remove_tool(EXTRA_TOOL_NAME)
            state = "removed"
        else:
            server.add_tool(
                extra,
                name=EXTRA_TOOL_NAME,
                description="A tool that comes and goes with toggle_extra_tool.",
            )
            state = "added"
        # Sent on this request's own stream, so it reaches the client before the result
        # on every transport (streamable HTTP: the POST's SSE stream, not the optional
        # GET stream that may not be open yet).
        await ctx.session.send_notification(
            types.ToolListChangedNotification(),
            related_request_id=ctx.request_context.request_id,
        )
        # Clients of the stateless 2026 protocol learn it through subscriptions/listen.
        await ctx.notify_tools_changed()
        return f"tool {EXTRA_TOOL_NAME!r} {state}"

    @server.tool(
        description="Write the text as one line to the server's stderr (for log capture).",
        structured_output=False,
    )
    def stderr(text: Annotated[str, Field(description="The line to write (no newline needed).")]) -> str:
        line = text.replace("\n", " ")
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        return f"wrote {len(line.encode())} bytes to stderr"

    @server.prompt(name="greeting", description="A prompt that asks the model to greet someone.")
    def greeting(name: Annotated[str, Field(description="Who to greet.")]) -> str:
        return f"Please write a short, friendly greeting for {name}."

    @server.resource(
        README_URI,
        name="readme",
        description="What the demo server offers.",
        mime_type="text/plain",
    )
    def readme() -> str:
        return _README_TEXT

    add_callback_tools(server)  # the tools that ask the host (sampling, elicitation, roots)
    add_protocol_features(server)
    return server


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that announces its URL on stderr once it accepts connections."""

    def __init__(self, config: uvicorn.Config, *, url: str) -> None:
        super().__init__(config)
        self._url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            sys.stderr.write(format_announce(self._url) + "\n")
            sys.stderr.flush()


def _bind(host: str, port: int) -> socket.socket:
    """Bind a listening TCP socket to ``host:port`` (``port`` 0: the kernel picks one)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[
        0
    ]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_http_app(app: Starlette, *, host: str, port: int, path: str) -> None:
    """Serve an ASGI app with uvicorn and announce its URL on stderr when ready.

    The socket is bound here, before uvicorn starts, so that ``port=0`` yields the real
    port for the announcement. Runs until SIGINT/SIGTERM; graceful shutdown is bounded.

    Args:
        app: The Starlette app (the SDK's streamable HTTP or SSE app).
        host: Address to bind (``127.0.0.1`` by default on the command line).
        port: Port to bind; 0 binds a free one.
        path: The MCP endpoint path, appended to the announced URL.
    """
    sock = _bind(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_SECONDS,
        lifespan="on",
    )
    server = _AnnouncingServer(config, url=http_url(bound_host, bound_port, path))
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_actors.demo_server",
        description=(
            "The mcp-actors demo MCP server. Over HTTP it writes "
            "'mcp-actors: listening on <url>' to stderr once it accepts connections."
        ),
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "sse", "streamable-http"),
        default="stdio",
        help="how to serve MCP (default: stdio)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind for HTTP transports (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help="port to bind for HTTP transports; 0 picks a free one (default: 0)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the demo server from the command line.

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.
    """
    args = _parse_args(argv)
    transport: Literal["stdio", "sse", "streamable-http"] = args.transport
    server = create_demo_server()
    if transport == "stdio":
        anyio.run(server.run_stdio_async, backend="trio")
        # Clients wait for the process to exit after closing its stdin, and tearing the
        # interpreter down (the SDK's pydantic models) takes most of a second. Nothing
        # is left to finalize: the session has ended and only the std streams need a flush.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    if transport == "sse":
        app, path = server.sse_app(host=args.host), "/sse"
    else:
        app, path = server.streamable_http_app(host=args.host), "/mcp"
    try:
        # uvicorn runs on asyncio only; this process is a server, not our trio core.
        anyio.run(_serve, app, args.host, args.port, path, backend="asyncio")
    except KeyboardInterrupt:
        pass


async def _serve(app: Starlette, host: str, port: int, path: str) -> None:
    await serve_http_app(app, host=host, port=port, path=path)


if __name__ == "__main__":
    main()
