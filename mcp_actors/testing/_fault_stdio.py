"""The fault server's stdio engine: a hand-written JSON-RPC loop on trio.

Hand-written rather than built on the SDK for two reasons. The faults live below the
SDK's abstractions (garbage between messages, a ping read and never answered, stdout
closed after exactly one reply, a crash before anything is answered), and a loop we own
does each of them exactly. And it starts in a fraction of the SDK server's time (no
pydantic models to build), which every test that spawns it pays.

It speaks the handshake era of MCP (protocol versions 2024-11-05 to 2025-11-25):
``initialize``, ``ping``, ``tools/list``, ``tools/call``, ``logging/setLevel``,
``notifications/initialized`` and ``notifications/cancelled``, with concurrent calls.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator
from typing import Any, Final

import attrs
import trio

from mcp_actors.testing._fault_plan import HANG_LIMIT, FaultPlan, fault_line, flood_stderr

__all__ = ["TOOLS", "serve_stdio"]

SERVER_INFO: Final = {"name": "mcp-actors-fault", "version": "0.1.0"}
HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION: Final = HANDSHAKE_VERSIONS[-1]

MAX_BIG_BYTES: Final = 64 * 1024 * 1024
MAX_SLEEP_SECONDS: Final = 3600.0
_SLEEP_STEPS: Final = 10
_MAX_LINE_BYTES: Final = 256 * 1024 * 1024
_EOF_GRACE: Final = 1.0

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602

_GARBAGE_TEXT_START: Final = (
    b"fault server starting (this line is not JSON)\n"
    b'{"jsonrpc": "2.0", "this is": broken json\n'
    b"INFO 12:00:00 a log line printed to stdout by mistake\n"
)
_GARBAGE_TEXT_LINE: Final = b"a stray line on stdout, not JSON\n"
_GARBAGE_BINARY_LINE: Final = b"\xff\xfe\xfd not utf-8 \x80\x81\xc3\x28\n"

_BIG_PATTERN: Final = b"0123456789abcdefghijklmnopqrstuvwxyz\n"

TOOLS: Final[list[dict[str, Any]]] = [
    {
        "name": "echo",
        "description": "Return the given text unchanged.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to send back."}},
            "required": ["text"],
        },
    },
    {
        "name": "add",
        "description": "Add two numbers and return their sum.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "The first addend."},
                "b": {"type": "number", "description": "The second addend."},
            },
            "required": ["a", "b"],
        },
    },
    {
        "name": "sleep",
        "description": (
            "Sleep for the given number of seconds in ten equal steps, reporting progress after each step, then return."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "seconds": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": MAX_SLEEP_SECONDS,
                    "description": "How long to sleep, in seconds.",
                }
            },
            "required": ["seconds"],
        },
    },
    {
        "name": "big",
        "description": "Return a text of exactly n bytes (ASCII), to test large results.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "n": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_BIG_BYTES,
                    "description": "The size of the text in bytes.",
                }
            },
            "required": ["n"],
        },
    },
    {
        "name": "fail",
        "description": "Fail on purpose: return a tool error result (isError: true).",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string", "description": "The error text."}},
            "required": ["message"],
        },
    },
]
UNTYPED_TOOL: Final[dict[str, Any]] = {
    "name": "untyped",
    "description": "Listed by --untyped-tool: its inputSchema breaks the spec's rule that the root is an object.",
    "inputSchema": {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}},
        ]
    },
}
"""A tool as some real servers ship it: a root ``anyOf`` with no ``"type": "object"``."""

_TOOL_NAMES: Final = frozenset(tool["name"] for tool in TOOLS)


class _ToolArgumentError(Exception):
    """The arguments of a call do not fit the tool's input schema."""


def _text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _big_text(n: int) -> str:
    return (_BIG_PATTERN * (n // len(_BIG_PATTERN) + 1))[:n].decode("ascii")


def _number(arguments: dict[str, Any], name: str) -> float:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _ToolArgumentError(f"argument {name!r} must be a number, got {value!r}")
    return float(value)


def _string(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise _ToolArgumentError(f"argument {name!r} must be a string, got {value!r}")
    return value


def _format_number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


@attrs.define(eq=False)
class _StdioFaultServer:
    """One connection's state: in-flight calls, the call counter, the stdout outbox.

    Only the writer task touches stdout, so a request task cancelled mid-flight can
    never leave half a message on the wire.
    """

    plan: FaultPlan
    stdout: trio.lowlevel.FdStream
    nursery: trio.Nursery
    calls: int = 0
    in_flight: dict[Any, trio.CancelScope] = attrs.field(factory=dict)
    hung: set[Any] = attrs.field(factory=set)
    stdout_closed: trio.Event = attrs.field(factory=trio.Event)
    # None on the outbox means: close stdout once everything queued before it is written.
    _outbox: trio.MemorySendChannel[bytes | None] = attrs.field(init=False, alias="_outbox")
    _outbox_reader: trio.MemoryReceiveChannel[bytes | None] = attrs.field(init=False, alias="_outbox_reader")

    def __attrs_post_init__(self) -> None:
        self._outbox, self._outbox_reader = trio.open_memory_channel[bytes | None](256)

    # ------------------------------------------------------------------ output

    async def run_writer(self) -> None:
        """Write queued messages to stdout in order; after a write fails, drop the rest."""
        broken = False
        async for data in self._outbox_reader:
            if data is None:
                broken = True
                await self.stdout.aclose()
                self.stdout_closed.set()
            elif not broken:
                try:
                    await self.stdout.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    broken = True  # the client went away; stdin EOF will end us

    async def send(self, message: dict[str, Any]) -> None:
        """Queue one JSON-RPC message as a line, with the garbage the plan asks for."""
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        if "interleave" in self.plan.garbage_stdout:
            data = _GARBAGE_TEXT_LINE + data
        if "binary" in self.plan.garbage_stdout:
            data = _GARBAGE_BINARY_LINE + data
        await self._outbox.send(data)

    async def finish_output(self) -> None:
        """No more messages: the writer ends once the queue is written."""
        await self._outbox.aclose()

    def drop_hung_calls(self) -> None:
        """Cancel the calls that were never going to be answered."""
        for request_id in self.hung:
            scope = self.in_flight.pop(request_id, None)
            if scope is not None:
                scope.cancel()

    async def close_stdout(self) -> None:
        """Close stdout once everything queued so far is written."""
        await self._outbox.send(None)
        await self.stdout_closed.wait()

    async def reply(self, request_id: Any, result: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def reply_error(self, request_id: Any, code: int, message: str) -> None:
        error = {"code": code, "message": message}
        await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # ------------------------------------------------------------------ input

    async def handle_line(self, line: bytes) -> None:
        """Dispatch one input line; never raises for bad input (it answers it)."""
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            await self.reply_error(None, PARSE_ERROR, "parse error: the line is not JSON")
            return
        if not isinstance(message, dict):
            await self.reply_error(None, INVALID_REQUEST, "invalid request: not a JSON object")
            return
        method = message.get("method")
        if not isinstance(method, str):
            return  # a response to a request we never send, or junk: ignore
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            self.handle_notification(method, params)
        elif isinstance(message["id"], int | str) and not isinstance(message["id"], bool):
            await self.handle_request(message["id"], method, params)
        else:
            await self.reply_error(None, INVALID_REQUEST, "invalid request: id must be a string or a number")

    def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            fault_line(f"cancelled {request_id}")
            scope = self.in_flight.pop(request_id, None)
            if scope is not None:
                scope.cancel()

    async def handle_request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        match method:
            case "initialize":
                await self.initialize(request_id, params)
            case "ping":
                if self.plan.no_ping:
                    fault_line(f"ignoring ping {request_id}")
                else:
                    await self.reply(request_id, {})
            case "tools/list":
                await self.reply(request_id, {"tools": [*TOOLS, UNTYPED_TOOL] if self.plan.untyped_tool else TOOLS})
            case "tools/call":
                await self.tools_call(request_id, params)
            case "logging/setLevel":
                await self.reply(request_id, {})
            case _:
                await self.reply_error(request_id, METHOD_NOT_FOUND, f"method not found: {method}")

    async def initialize(self, request_id: Any, params: dict[str, Any]) -> None:
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_VERSION
        if self.plan.protocol_version is not None:
            version = self.plan.protocol_version  # a server that knows only this revision
        await self.reply(
            request_id,
            {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}, "logging": {}},
                "serverInfo": SERVER_INFO,
                "instructions": "A fault-injection server: it misbehaves as its flags say.",
            },
        )
        if self.plan.close_stdout:
            await self.close_stdout()
            fault_line("closed stdout")
            # Stay alive and stop reading: the client must notice EOF and kill us.
            await trio.sleep(HANG_LIMIT)

    async def tools_call(self, request_id: Any, params: dict[str, Any]) -> None:
        self.calls += 1
        number = self.calls
        if self.plan.crash_on_call == number:
            fault_line(f"crashing on call {number}")
            os._exit(self.plan.crash_exit_code)
        flood_stderr(self.plan.flood_stderr)
        name = params.get("name")
        arguments = params.get("arguments")
        meta = params.get("_meta")
        progress_token = meta.get("progressToken") if isinstance(meta, dict) else None
        if self.plan.hang_on_call == number or name in self.plan.hang_tools:
            fault_line(f"hanging call {request_id}")
            self.hung.add(request_id)
            self.nursery.start_soon(self._hang, request_id, self._track(request_id))
            return
        if not isinstance(name, str) or name not in _TOOL_NAMES:
            await self.reply_error(request_id, INVALID_PARAMS, f"unknown tool: {name!r}")
            return
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            await self.reply_error(request_id, INVALID_PARAMS, "arguments must be an object")
            return
        scope = self._track(request_id)
        self.nursery.start_soon(self._run_call, request_id, scope, name, arguments, progress_token)

    def _track(self, request_id: Any) -> trio.CancelScope:
        """Register a call as in flight, so that notifications/cancelled can stop it."""
        scope = trio.CancelScope()
        self.in_flight[request_id] = scope
        return scope

    async def _hang(self, request_id: Any, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep(HANG_LIMIT)
        self.in_flight.pop(request_id, None)
        self.hung.discard(request_id)

    async def _run_call(
        self,
        request_id: Any,
        scope: trio.CancelScope,
        name: str,
        arguments: dict[str, Any],
        progress_token: Any,
    ) -> None:
        result: dict[str, Any] | None = None
        with scope:
            for index in range(1, self.plan.flood_notifications + 1):
                await self._flood_one(index, progress_token)
            try:
                result = await self._run_tool(name, arguments, progress_token)
            except _ToolArgumentError as exc:
                result = _text_result(f"invalid arguments for tool {name!r}: {exc}", is_error=True)
        # No checkpoint between the end of the scope and this pop: a cancellation either
        # cancelled the scope (no reply, as the protocol asks) or comes too late to matter.
        self.in_flight.pop(request_id, None)
        if result is None:
            return
        if self.plan.huge_output is not None and not result["isError"]:
            result = _text_result(_big_text(self.plan.huge_output))
        await self.reply(request_id, result)

    async def _flood_one(self, index: int, progress_token: Any) -> None:
        total = self.plan.flood_notifications
        await self.notify(
            "notifications/message",
            {"level": "info", "logger": "fault", "data": f"flood {index} of {total}"},
        )
        if progress_token is not None:
            await self.notify(
                "notifications/progress",
                {"progressToken": progress_token, "progress": index, "total": total},
            )

    async def _run_tool(self, name: str, arguments: dict[str, Any], progress_token: Any) -> dict[str, Any]:
        match name:
            case "echo":
                return _text_result(_string(arguments, "text"))
            case "add":
                total = _number(arguments, "a") + _number(arguments, "b")
                return _text_result(_format_number(total))
            case "sleep":
                seconds = _number(arguments, "seconds")
                if not 0 <= seconds <= MAX_SLEEP_SECONDS:
                    raise _ToolArgumentError(f"seconds must be in 0..{MAX_SLEEP_SECONDS:g}")
                await self._sleep(seconds, progress_token)
                return _text_result(f"slept {seconds:g} s")
            case "big":
                n = arguments.get("n")
                if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_BIG_BYTES:
                    raise _ToolArgumentError(f"n must be an integer in 0..{MAX_BIG_BYTES}")
                return _text_result(_big_text(n))
            case "fail":
                return _text_result(_string(arguments, "message"), is_error=True)
            case _:  # pragma: no cover - names are checked before
                raise AssertionError(name)

    async def _sleep(self, seconds: float, progress_token: Any) -> None:
        # Steps end at fixed points from the start, so wake-up delays never add up: the
        # tool takes ``seconds`` plus at most one late wake-up (a known latency to measure).
        step = seconds / _SLEEP_STEPS
        start = trio.current_time()
        for done in range(1, _SLEEP_STEPS + 1):
            await trio.sleep_until(start + done * step)
            if progress_token is not None:
                await self.notify(
                    "notifications/progress",
                    {
                        "progressToken": progress_token,
                        "progress": done * step,
                        "total": seconds,
                        "message": f"slept {done * step:g} of {seconds:g} s",
                    },
                )


async def _lines(stream: trio.lowlevel.FdStream) -> AsyncIterator[bytes]:
    """Yield newline-terminated lines (without the newline) until EOF."""
    buffer = bytearray()
    searched = 0  # bytes of buffer known to hold no newline: a long line is scanned once
    while chunk := await stream.receive_some(1 << 20):
        buffer += chunk
        while (end := buffer.find(b"\n", searched)) >= 0:
            yield bytes(buffer[:end])
            del buffer[: end + 1]
            searched = 0
        searched = len(buffer)
        if len(buffer) > _MAX_LINE_BYTES:
            raise ValueError(f"input line longer than {_MAX_LINE_BYTES} bytes")
    if buffer:
        yield bytes(buffer)


def _take_stdio() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    """Own the protocol pipes; point fds 0 and 1 elsewhere so stray I/O misses the wire."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # a stray print lands on stderr, not in the JSON-RPC stream
    return stdin, stdout


async def serve_stdio(plan: FaultPlan) -> None:
    """Serve MCP over stdin/stdout with the plan's faults until stdin closes.

    At stdin EOF hung calls are dropped, other calls get a second to finish, and what
    is queued for stdout gets a second to be written; then it returns.

    Args:
        plan: The faults to inject. Start-up faults have already run.
    """
    stdin, stdout = _take_stdio()
    try:
        garbage = b""
        if "start" in plan.garbage_stdout:
            garbage += _GARBAGE_TEXT_START
        if "binary" in plan.garbage_stdout:
            garbage += _GARBAGE_BINARY_LINE
        if garbage:
            await stdout.send_all(garbage)
        async with trio.open_nursery() as output:
            async with trio.open_nursery() as calls:
                server = _StdioFaultServer(plan=plan, stdout=stdout, nursery=calls)
                output.start_soon(server.run_writer)
                async for line in _lines(stdin):
                    await server.handle_line(line)
                server.drop_hung_calls()
                calls.cancel_scope.deadline = trio.current_time() + _EOF_GRACE
            await server.finish_output()
            output.cancel_scope.deadline = trio.current_time() + _EOF_GRACE
    finally:
        with trio.CancelScope(shield=True):
            await stdin.aclose()
            await stdout.aclose()
