"""The fault server's streamable HTTP engine: the SDK's server plus a fault middleware.

HTTP framing is the SDK's (a hand-written streamable HTTP server would test nothing but
itself); the faults sit in a server middleware, which sees every inbound request and
notification before any handler: the Nth ``tools/call`` (crash, hang), ``ping`` (never
answered), ``notifications/cancelled`` (reported on stderr).

Like the stdio engine it speaks the handshake era only (2024-11-05 to 2025-11-25): a
``server/discover`` probe gets ``-32601``, so a client in ``auto`` mode falls back to
``initialize``. Its faults (an unanswered ``ping``, ``notifications/cancelled`` on stderr,
a hand-made result) are handshake-era mechanisms; 2026-07-28 has none of them.
``--modern`` lets it answer ``server/discover`` too, for tests of a 2026-07-28 client.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import Field

from mcp_actors.demo_server import serve_http_app
from mcp_actors.testing._fault_plan import HANG_LIMIT, FaultPlan, fault_line, flood_stderr
from mcp_actors.testing._fault_stdio import MAX_BIG_BYTES, MAX_SLEEP_SECONDS, SERVER_INFO

__all__ = ["create_fault_server", "serve_streamable_http"]

_SLEEP_STEPS = 10
_BIG_PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyz\n"


def _big_text(n: int) -> str:
    return (_BIG_PATTERN * (n // len(_BIG_PATTERN) + 1))[:n].decode("ascii")


class _FaultMiddleware:
    """Injects the per-message faults of a :class:`FaultPlan`."""

    def __init__(self, plan: FaultPlan) -> None:
        self._plan = plan
        self._calls = 0

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        plan = self._plan
        params = ctx.params or {}
        if ctx.request_id is None:
            if ctx.method == "notifications/cancelled":
                fault_line(f"cancelled {params.get('requestId')}")
            return await call_next(ctx)
        if ctx.method == "server/discover" and not plan.modern:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="method not found: server/discover")
        if ctx.method == "ping" and plan.no_ping:
            fault_line(f"ignoring ping {ctx.request_id}")
            await anyio.sleep(HANG_LIMIT)
            raise MCPError(code=types.INTERNAL_ERROR, message="ping ignored for an hour")
        if ctx.method != "tools/call":
            return await call_next(ctx)
        self._calls += 1
        number = self._calls
        if plan.crash_on_call == number:
            fault_line(f"crashing on call {number}")
            os._exit(plan.crash_exit_code)
        flood_stderr(plan.flood_stderr)
        if plan.hang_on_call == number or params.get("name") in plan.hang_tools:
            fault_line(f"hanging call {ctx.request_id}")
            await anyio.sleep(HANG_LIMIT)
            raise MCPError(code=types.INTERNAL_ERROR, message="call hung for an hour")
        for index in range(1, plan.flood_notifications + 1):
            await self._flood_one(ctx, index)
        result = await call_next(ctx)
        if plan.huge_output is not None and isinstance(result, dict) and not result.get("isError"):
            return {"content": [{"type": "text", "text": _big_text(plan.huge_output)}], "isError": False}
        return result

    async def _flood_one(self, ctx: ServerRequestContext[Any, Any], index: int) -> None:
        total = self._plan.flood_notifications
        log = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(
                level="info", logger="fault", data=f"flood {index} of {total}"
            )
        )
        await ctx.session.send_notification(log, related_request_id=ctx.request_id)
        await ctx.session.report_progress(index, total)


def create_fault_server(plan: FaultPlan) -> MCPServer[Any]:
    """Build the SDK server with the fault tools and the plan's middleware.

    Args:
        plan: The faults to inject.
    """
    server: MCPServer[Any] = MCPServer(
        SERVER_INFO["name"],
        version=SERVER_INFO["version"],
        instructions="A fault-injection server: it misbehaves as its flags say.",
        log_level="WARNING",
        middleware=[_FaultMiddleware(plan)],
    )

    @server.tool(description="Return the given text unchanged.", structured_output=False)
    def echo(text: Annotated[str, Field(description="The text to send back.")]) -> str:
        return text

    @server.tool(description="Add two numbers and return their sum.", structured_output=False)
    def add(
        a: Annotated[float, Field(description="The first addend.")],
        b: Annotated[float, Field(description="The second addend.")],
    ) -> str:
        total = a + b
        return str(int(total)) if total.is_integer() and abs(total) < 2**53 else repr(total)

    @server.tool(
        description=(
            "Sleep for the given number of seconds in ten equal steps, reporting progress after each step, then return."
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

    @server.tool(
        description="Return a text of exactly n bytes (ASCII), to test large results.",
        structured_output=False,
    )
    def big(
        n: Annotated[int, Field(ge=0, le=MAX_BIG_BYTES, description="The size of the text in bytes.")],
    ) -> str:
        return _big_text(n)

    @server.tool(description="Fail on purpose: return a tool error result (isError: true).")
    def fail(message: Annotated[str, Field(description="The error text.")]) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)

    return server


class _HttpErrorMiddleware:
    """An ASGI middleware that answers the Nth ``tools/call`` POST with an HTTP error status.

    It sits in front of the SDK's app, so the MCP server never sees that call: what a
    proxy or a crashing web framework in front of an MCP server does.
    """

    def __init__(self, app: Any, *, on_call: int, status: int) -> None:
        self._app = app
        self._on_call = on_call
        self._status = status
        self._calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        if method == "tools/call":
            self._calls += 1
            if self._calls == self._on_call:
                fault_line(f"http error {self._status} on call {self._calls}")
                payload = f"fault: HTTP {self._status}".encode()
                headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(payload)).encode())]
                await send({"type": "http.response.start", "status": self._status, "headers": headers})
                await send({"type": "http.response.body", "body": payload})
                return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self._app(scope, replay, send)


def serve_streamable_http(plan: FaultPlan) -> None:
    """Serve the fault server over streamable HTTP until SIGTERM/SIGINT.

    Args:
        plan: The faults to inject. Start-up faults have already run.
    """
    app: Any = create_fault_server(plan).streamable_http_app(host=plan.host)
    if plan.http_error_on_call is not None:
        app = _HttpErrorMiddleware(app, on_call=plan.http_error_on_call, status=plan.http_error_status)
    try:
        # uvicorn runs on asyncio only; this process is a server, not our trio core.
        anyio.run(_serve, app, plan.host, plan.port, backend="asyncio")
    except KeyboardInterrupt:
        pass


async def _serve(app: Any, host: str, port: int) -> None:
    await serve_http_app(app, host=host, port=port, path="/mcp")
