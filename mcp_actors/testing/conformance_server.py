"""The fixture server of the official MCP conformance suite's server scenarios.

Why: the suite (npm ``@modelcontextprotocol/conformance``) judges a *server* by calling tools,
resources and prompts of fixed names and checking the answers (``test_simple_text`` must
answer one text, ``test://static-text`` must read as one text, ...). A server that offers them
is needed to run those scenarios at all; this one is built on the SDK's server API only, so
the run measures what the SDK lets a server do, and it doubles as a server with every kind
of content, callback and input-required answer for our own tests.

Run it with ``python -m mcp_actors.testing.conformance_server --port 8000`` (``--port 0``
binds a free port); once it accepts connections it writes one line to stderr::

    mcp-actors: listening on http://127.0.0.1:40123/mcp

One streamable HTTP endpoint serves every revision: sessions (with an event store, so a
closed SSE stream can be resumed) for 2025-06-18 and 2025-11-25, and the stateless
2026-07-28 protocol (``server/discover``, per-request ``_meta``) beside them.
:func:`open_conformance_server` runs it in this process for the length of a block, and
``tests/conformance/run.py server --fixture`` runs the suite against it.

The fixtures follow the suite's scenarios at the pinned version and the reference servers of
the SDKs (their "everything" servers):

======================================  =====================================================
``test_simple_text``                     one text
``test_image_content``                   one PNG image
``test_audio_content``                   one WAV clip
``test_embedded_resource``               one embedded text resource
``test_multiple_content_types``          text, image and embedded resource together
``test_tool_with_logging``               three log notifications during the call
``test_logging_tool``                    one log notification (server-stateless: none without a level)
``test_tool_with_progress``              three progress notifications during the call
``test_error_handling``                  a tool error result (``isError: true``)
``test_sampling(prompt)``                asks the client for a completion
``test_elicitation(message)``            asks the client for input
``test_elicitation_sep1034_defaults``    elicitation with defaults of every primitive type
``test_elicitation_sep1330_enums``       elicitation with every enum schema shape
``test_reconnection``                    closes its SSE stream mid-call (the client resumes)
``json_schema_2020_12_tool``             an input schema with 2020-12 keywords
``test_x_mcp_header(region)``            an ``x-mcp-header`` parameter (``Mcp-Param-Region``)
``test_missing_capability``              a protocol error naming the missing client capability
``test_input_required_result_*``         2026-07-28 input-required answers (``inputRequests``)
``test_streaming_elicitation``           the same, as server-stateless calls it (no request of its own)
``test://static-text``, ``-binary``      a text and a blob resource
``test://template/{id}/data``            a resource template
``test://watched-resource``              a resource to subscribe to
``test_simple_prompt`` and friends       prompts: plain, with arguments, an embedded
                                         resource, an image, an input-required one
``greet``, ``slow_compute``, ...         the tasks extension's tools (2026-07-28, see
                                         :mod:`mcp_actors.testing._conformance_tasks`)
``skill://mcp-actors/...``               a skill of the skills extension (see
                                         :mod:`mcp_actors.testing._conformance_skills`)
======================================  =====================================================

This module imports the SDK's server side and uvicorn; :mod:`mcp_actors.testing` does not.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, Final, cast

import anyio
import mcp_types as types
import trio
import uvicorn
from mcp.server import ServerRequestContext
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from mcp_actors._demo.announce import http_url
from mcp_actors._sdk import lowlevel_server, registered_tools
from mcp_actors.demo_server import serve_http_app
from mcp_actors.testing._conformance_skills import SKILL_URI as SKILL_URI
from mcp_actors.testing._conformance_skills import SKILLS_EXTENSION as SKILLS_EXTENSION
from mcp_actors.testing._conformance_skills import SkillsExtension
from mcp_actors.testing._conformance_tasks import TASKS_EXTENSION as TASKS_EXTENSION
from mcp_actors.testing._conformance_tasks import TasksExtension, add_task_tools

__all__ = [
    "CONFORMANCE_SERVER_NAME",
    "MCP_PATH",
    "MemoryEventStore",
    "RETRY_INTERVAL_MS",
    "SKILLS_EXTENSION",
    "SKILL_URI",
    "TASKS_EXTENSION",
    "TEST_AUDIO_BASE64",
    "TEST_IMAGE_BASE64",
    "conformance_app",
    "create_conformance_server",
    "main",
    "open_conformance_server",
]

# Logging and sampling during a call are deprecated at 2026-07-28 but are what the 2025 revisions
# speak, and the suite checks them there; this module uses them on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, module=__name__)

CONFORMANCE_SERVER_NAME: Final = "mcp-actors-conformance-fixture"
"""The name the server reports in its ``serverInfo``."""

MCP_PATH: Final = "/mcp"
"""The streamable HTTP endpoint's path."""

RETRY_INTERVAL_MS: Final = 100
"""The ``retry`` the server sends on its SSE streams: the suite's polling scenario waits for a
reconnection after the server closes a stream, and a short interval keeps that scenario fast."""

TEST_IMAGE_BASE64: Final = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG: the image the suite's image checks accept (they check type and MIME type)."""

TEST_AUDIO_BASE64: Final = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
"""A WAV header with two bytes of samples: the audio of ``test_audio_content``."""

_REQUEST_STATE_KEY: Final = b"mcp-actors-conformance-fixture-request-state-key"
"""The fixture's ``requestState`` key: the SDK signs the state it sends and rejects a tampered echo.
A fixed key is right for a fixture (its state is worth nothing); a real server loads a secret."""

_MAX_EVENTS: Final = 10_000
"""Events the in-memory store keeps (the oldest go first): a long run must not grow without bound."""

_STARTUP_TIMEOUT: Final = 20.0
_NAME_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
_CONFIRM_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
_JSON_SCHEMA_2020_12: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class MemoryEventStore(EventStore):
    """The SSE events of every stream, in memory, so that a client can resume a closed stream.

    Why: the suite's polling scenario has the server close a call's SSE stream mid-call; the
    client reconnects with ``Last-Event-ID`` and must get what it missed. The SDK resumes a
    stream only through an event store, and ships none. At most ``max_events`` are kept.
    """

    def __init__(self, max_events: int = _MAX_EVENTS) -> None:
        """Make an empty store.

        Args:
            max_events: How many events to keep; the oldest are dropped first.

        Raises:
            ValueError: ``max_events`` is not positive.
        """
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self._max_events = max_events
        self._events: list[tuple[str, int, types.JSONRPCMessage | None]] = []
        self._next_id = 0

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        """Keep one event of ``stream_id`` (``None``: the priming event) and return its id."""
        self._next_id += 1
        self._events.append((stream_id, self._next_id, message))
        if len(self._events) > self._max_events:
            del self._events[: len(self._events) - self._max_events]
        return str(self._next_id)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        """Send the events of the stream of ``last_event_id`` that came after it; return that stream's id."""
        try:
            after = int(last_event_id)
        except ValueError:
            return None
        stream = next((stream_id for stream_id, event_id, _ in self._events if event_id == after), None)
        if stream is None:
            return None
        for stream_id, event_id, message in list(self._events):
            if stream_id == stream and event_id > after and message is not None:
                await send_callback(EventMessage(message, str(event_id)))
        return stream


# ---------------------------------------------------------------------------------------- fixtures


class _UserInfo(BaseModel):
    """What ``test_elicitation`` asks for: the suite's schema (two required strings)."""

    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


class _Sep1034Defaults(BaseModel):
    """Every primitive type with a default (SEP-1034)."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active", description="User status", json_schema_extra={"enum": ["active", "inactive", "pending"]}
    )
    verified: bool = Field(default=True, description="Verification status")


def _titled(prefix: str, titles: Sequence[str]) -> list[Any]:
    return [{"const": f"{prefix}{n}", "title": title} for n, title in enumerate(titles, start=1)]


class _Sep1330Enums(BaseModel):
    """The five enum shapes of SEP-1330, with the values the suite's client answers."""

    untitledSingle: str = Field(
        description="Untitled single-select", json_schema_extra={"enum": ["option1", "option2", "option3"]}
    )
    titledSingle: str = Field(
        description="Titled single-select",
        json_schema_extra={"oneOf": _titled("value", ["First Option", "Second Option", "Third Option"])},
    )
    legacyEnum: str = Field(
        description="Legacy titled single-select (enumNames, deprecated)",
        json_schema_extra={"enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
    )
    untitledMulti: list[str] = Field(
        description="Untitled multi-select",
        json_schema_extra={"items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    )
    titledMulti: list[str] = Field(
        description="Titled multi-select",
        json_schema_extra={"items": {"anyOf": _titled("value", ["First Choice", "Second Choice", "Third Choice"])}},
    )


def _elicit_name(message: str = "What is your name?") -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=_NAME_SCHEMA))


def _sample(text: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=text))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def _elicited(answer: object, key: str) -> Any:
    """The value of ``key`` in an accepted elicitation answer, else None."""
    if isinstance(answer, types.ElicitResult) and answer.content:
        return answer.content.get(key)
    return None


_LEVELS: Final[tuple[types.LoggingLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_MAX_SESSION_LEVELS: Final = 1024
_COMPLETIONS: Final[dict[str, tuple[str, ...]]] = {"arg1": ("paris", "park", "party"), "arg2": ("hello", "world")}


def _session_id(request: object) -> str | None:
    """The ``Mcp-Session-Id`` of an HTTP request (2025 revisions), else None."""
    headers = getattr(request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


class _LogLevels:
    """The ``logging/setLevel`` level of each session (2025 revisions), which filters its log messages.

    Why here: on the handshake revisions the SDK sends every level and leaves the filter to the
    application's ``logging/setLevel`` handler. At most ``_MAX_SESSION_LEVELS`` sessions are
    remembered (the oldest are forgotten), so a long run does not grow without bound.
    """

    def __init__(self) -> None:
        self._levels: dict[str, types.LoggingLevel] = {}

    def set(self, session_id: str | None, level: types.LoggingLevel) -> None:
        if session_id is None:
            return
        self._levels.pop(session_id, None)
        self._levels[session_id] = level
        while len(self._levels) > _MAX_SESSION_LEVELS:
            del self._levels[next(iter(self._levels))]

    async def log(self, ctx: Context, level: types.LoggingLevel, text: str) -> None:
        """Send ``text`` at ``level`` on the call's stream, unless the session asked for less.

        (At 2026-07-28 the SDK applies the request's own ``_meta`` log level instead.)
        """
        threshold = self._levels.get(_session_id(ctx.request_context.request) or "", "debug")
        if _LEVELS.index(level) >= _LEVELS.index(threshold):
            await ctx.session.send_log_message(level, text, related_request_id=ctx.request_id)


def create_conformance_server() -> MCPServer[Any]:
    """Build the fixture server with every tool, resource, prompt and handler the suite's scenarios use.

    A new instance each call, with its own subscriptions and log level: servers embedded in
    tests must not share state.

    Returns:
        An SDK ``MCPServer``, not yet running (serve it with :func:`conformance_app`).
    """
    server: MCPServer[Any] = MCPServer(
        CONFORMANCE_SERVER_NAME,
        version="0.1.0",
        log_level="WARNING",
        request_state_security=RequestStateSecurity(keys=[_REQUEST_STATE_KEY]),
        extensions=[TasksExtension(), SkillsExtension()],
    )
    levels = _LogLevels()
    _add_content_tools(server, levels)
    _add_callback_tools(server)
    _add_input_required_tools(server)
    add_task_tools(server)
    _add_resources(server)
    _add_prompts(server)
    _add_handlers(server, levels)
    return server


def _add_content_tools(server: MCPServer[Any], levels: _LogLevels) -> None:
    """The tools whose answers are content of each kind, errors, logs and progress."""

    @server.tool(description="Tests simple text content response")
    def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @server.tool(description="Tests image content response")
    def test_image_content() -> list[types.ImageContent]:
        return [types.ImageContent(data=TEST_IMAGE_BASE64, mime_type="image/png")]

    @server.tool(description="Tests audio content response")
    def test_audio_content() -> list[types.AudioContent]:
        return [types.AudioContent(data=TEST_AUDIO_BASE64, mime_type="audio/wav")]

    @server.tool(description="Tests embedded resource content response")
    def test_embedded_resource() -> list[types.EmbeddedResource]:
        text = types.TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
        )
        return [types.EmbeddedResource(resource=text)]

    @server.tool(description="Tests response with multiple content types (text, image, resource)")
    def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
        json_text = types.TextResourceContents(
            uri="test://mixed-content-resource", mime_type="application/json", text='{"test": "data", "value": 123}'
        )
        return [
            types.TextContent(text="Multiple content types test:"),
            types.ImageContent(data=TEST_IMAGE_BASE64, mime_type="image/png"),
            types.EmbeddedResource(resource=json_text),
        ]

    @server.tool(description="Tests tool that emits log messages during execution")
    async def test_tool_with_logging(ctx: Context) -> str:
        for step, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if step:
                await anyio.sleep(0.05)
            await levels.log(ctx, "info", text)
        return "Tool with logging executed successfully"

    @server.tool(description="Logs once during the call (at 2026-07-28 only when the request asks for a level)")
    async def test_logging_tool(ctx: Context) -> str:
        await levels.log(ctx, "info", "Logging tool called")
        return "Logging tool executed"

    @server.tool(description="Tests tool that reports progress notifications")
    async def test_tool_with_progress(ctx: Context) -> str:
        for step in (0, 50, 100):
            await ctx.report_progress(progress=step, total=100, message=f"Completed step {step} of 100")
            if step < 100:
                await anyio.sleep(0.05)
        meta = ctx.request_context.meta or {}
        return str(meta.get("progress_token", 0))

    @server.tool(description="Tests error response handling")
    def test_error_handling() -> str:
        # ToolError: an error the tool reports (its text reaches the client), not a crash (logged with a traceback).
        raise ToolError("This tool intentionally returns an error for testing")

    @server.tool(name="json_schema_2020_12_tool", description="Tests JSON Schema 2020-12 keyword preservation")
    def json_schema_2020_12_tool() -> str:
        return "json_schema_2020_12_tool"

    # The decorator derives the input schema from the signature; the suite checks that a
    # hand-written 2020-12 schema reaches tools/list whole.
    for tool in registered_tools(server):
        if tool.name == "json_schema_2020_12_tool":
            tool.parameters = dict(_JSON_SCHEMA_2020_12)

    @server.tool(description="Tests Mcp-Param-* header validation: region is mirrored into Mcp-Param-Region")
    def test_x_mcp_header(
        region: Annotated[
            str,
            Field(
                description="Mirrored into the Mcp-Param-Region header", json_schema_extra={"x-mcp-header": "Region"}
            ),
        ] = "<none>",
    ) -> str:
        return f"region={region}"

    @server.tool(description="Tests SSE polling by closing the call's stream mid-call (SEP-1699)")
    async def test_reconnection(ctx: Context) -> str:
        await levels.log(ctx, "info", "Before disconnect")
        await ctx.close_sse_stream()
        await anyio.sleep(0.2)  # the client reconnects after the stream's retry interval
        await levels.log(ctx, "info", "After reconnect")
        return "Reconnection test completed"

    @server.tool(description="Tests a protocol error naming a missing client capability (sampling)")
    async def test_missing_capability(ctx: Context) -> str:
        capabilities = ctx.client_capabilities
        if capabilities is None or capabilities.sampling is None:
            raise MCPError(
                code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool requires the client 'sampling' capability",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        return "Client declared sampling capability; proceeding."

    def dynamic_tool() -> str:
        return "dynamic"

    @server.tool(description="Changes the tool list and announces it to subscriptions/listen streams")
    async def test_trigger_tool_change(ctx: Context) -> str:
        server.add_tool(dynamic_tool, name="test_dynamic_tool")
        server.remove_tool("test_dynamic_tool")
        await ctx.notify_tools_changed()
        return "tool list changed"

    def dynamic_prompt() -> str:
        return "dynamic"

    @server.tool(description="Changes the prompt list and announces it to subscriptions/listen streams")
    async def test_trigger_prompt_change(ctx: Context) -> str:
        server.add_prompt(Prompt.from_function(dynamic_prompt, name="test_dynamic_prompt", description="dynamic"))
        server.remove_prompt("test_dynamic_prompt")
        await ctx.notify_prompts_changed()
        return "prompt list changed"


def _add_callback_tools(server: MCPServer[Any]) -> None:
    """The tools that ask the client for something during the call.

    At the handshake revisions they send the request (on the call's own stream); at 2026-07-28,
    where a server has no such channel, the same question goes in an ``InputRequiredResult``
    and the retry carries the answer. The suite runs these scenarios at 2025-11-25; a gateway
    that speaks 2026-07-28 to this server relays them in either form.
    """

    @server.tool(description="Tests server-initiated sampling (LLM completion request)")
    async def test_sampling(prompt: str, ctx: Context) -> str | types.InputRequiredResult:
        if _modern(ctx):
            answer = (ctx.input_responses or {}).get("sample")
            if not isinstance(answer, types.CreateMessageResult | types.CreateMessageResultWithTools):
                return types.InputRequiredResult(input_requests={"sample": _sample(prompt, 100)})
            result: Any = answer
        else:
            # Sent on the call's own stream: without related_request_id it would go to the
            # standalone GET stream, which the client may not have opened.
            message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
            result = await ctx.session.create_message(
                messages=[message], max_tokens=100, related_request_id=ctx.request_id
            )
        text = result.content.text if isinstance(result.content, types.TextContent) else "No response"
        return f"LLM response: {text}"

    async def elicited(
        ctx: Context, message: str, schema: type[BaseModel]
    ) -> tuple[str, str] | types.InputRequiredResult:
        """``(action, content JSON)`` of the client's answer, or the question (2026-07-28, not asked yet)."""
        if _modern(ctx):
            answer = (ctx.input_responses or {}).get("form")
            if not isinstance(answer, types.ElicitResult):
                params = types.ElicitRequestFormParams(
                    message=message, requested_schema=render_elicitation_schema(schema)
                )
                return types.InputRequiredResult(input_requests={"form": types.ElicitRequest(params=params)})
            content = (
                schema.model_validate(answer.content or {}).model_dump_json() if answer.action == "accept" else "{}"
            )
            return answer.action, content
        result = await ctx.elicit(message=message, schema=schema)
        return result.action, (result.data.model_dump_json() if result.action == "accept" else "{}")

    @server.tool(description="Tests server-initiated elicitation (user input request)")
    async def test_elicitation(message: str, ctx: Context) -> str | types.InputRequiredResult:
        answer = await elicited(ctx, message, _UserInfo)
        if isinstance(answer, types.InputRequiredResult):
            return answer
        return f"User response: action={answer[0]}, content={answer[1]}"

    @server.tool(description="Tests elicitation with default values for all primitive types (SEP-1034)")
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str | types.InputRequiredResult:
        answer = await elicited(ctx, "Please provide user information", _Sep1034Defaults)
        if isinstance(answer, types.InputRequiredResult):
            return answer
        return f"Elicitation result: action={answer[0]}, content={answer[1]}"

    @server.tool(description="Tests elicitation with enum schema variations (SEP-1330)")
    async def test_elicitation_sep1330_enums(ctx: Context) -> str | types.InputRequiredResult:
        answer = await elicited(ctx, "Please select values using different enum schema types", _Sep1330Enums)
        if isinstance(answer, types.InputRequiredResult):
            return answer
        return f"Elicitation completed: action={answer[0]}, content={answer[1]}"


def _modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _add_input_required_tools(server: MCPServer[Any]) -> None:
    """The 2026-07-28 input-required tools (SEP-2322): each answers ``InputRequiredResult`` first."""

    @server.tool(description="Tests InputRequiredResult with a single elicitation request")
    async def test_input_required_result_elicitation(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if "user_name" in responses:
            return f"Hello, {_elicited(responses['user_name'], 'name') or 'stranger'}!"
        return types.InputRequiredResult(input_requests={"user_name": _elicit_name()})

    @server.tool(description="Asks for input on the call's own answer, never as a request of its own (SEP-2575)")
    async def test_streaming_elicitation(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if "user_name" in responses:
            return f"Hello, {_elicited(responses['user_name'], 'name') or 'stranger'}!"
        return types.InputRequiredResult(input_requests={"user_name": _elicit_name()})

    @server.tool(description="Tests InputRequiredResult with a single sampling request")
    async def test_input_required_result_sampling(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if "capital_question" in responses:
            answer = responses["capital_question"]
            text = "?"
            if isinstance(answer, types.CreateMessageResult) and isinstance(answer.content, types.TextContent):
                text = answer.content.text
            return f"Model said: {text}"
        return types.InputRequiredResult(
            input_requests={"capital_question": _sample("What is the capital of France?", 100)}
        )

    @server.tool(description="Tests InputRequiredResult with a single roots/list request")
    async def test_input_required_result_list_roots(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if "client_roots" in responses:
            answer = responses["client_roots"]
            count = len(answer.roots) if isinstance(answer, types.ListRootsResult) else 0
            return f"Client exposed {count} root(s)."
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})

    @server.tool(description="Tests that requestState comes back in the InputRequiredResult flow")
    async def test_input_required_result_request_state(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if "confirm" in responses and ctx.request_state == "request-state-nonce":
            return "state-ok: confirmation received"
        confirm = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message="Please confirm", requested_schema=_CONFIRM_SCHEMA)
        )
        return types.InputRequiredResult(input_requests={"confirm": confirm}, request_state="request-state-nonce")

    @server.tool(description="Tests InputRequiredResult carrying elicitation, sampling and roots requests together")
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if {"user_name", "greeting", "client_roots"} <= responses.keys():
            return "All inputs received."
        return types.InputRequiredResult(
            input_requests={
                "user_name": _elicit_name(),
                "greeting": _sample("Generate a greeting", 50),
                "client_roots": types.ListRootsRequest(),
            },
            request_state="multiple-inputs",
        )

    @server.tool(description="Tests a three-step InputRequiredResult flow with evolving requestState")
    async def test_input_required_result_multi_round(ctx: Context) -> str | types.InputRequiredResult:
        state = json.loads(ctx.request_state) if ctx.request_state else {"step": 0}
        responses = ctx.input_responses or {}
        if state.get("step") == 1 and "step1" in responses:
            color_schema = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
            step2 = types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message="Step 2: What is your favorite color?", requested_schema=color_schema
                )
            )
            name = _elicited(responses["step1"], "name")
            return types.InputRequiredResult(
                input_requests={"step2": step2}, request_state=json.dumps({"step": 2, "name": name})
            )
        if state.get("step") == 2 and "step2" in responses:
            return f"{state.get('name')} likes {_elicited(responses['step2'], 'color')}."
        # The first call, or an answer missing or out of order: ask again from the start.
        return types.InputRequiredResult(
            input_requests={"step1": _elicit_name("Step 1: What is your name?")},
            request_state=json.dumps({"step": 1}),
        )

    @server.tool(description="Tests that the server rejects a tampered requestState echo")
    async def test_input_required_result_tampered_state(ctx: Context) -> str | types.InputRequiredResult:
        # The SDK signs the state it sends and refuses a tampered echo before this runs.
        if ctx.request_state is None:
            confirm = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message="Please confirm", requested_schema=_CONFIRM_SCHEMA)
            )
            return types.InputRequiredResult(input_requests={"confirm": confirm}, request_state="confirm-pending")
        return f"state-ok: {ctx.request_state}"

    @server.tool(description="Tests that inputRequests only include methods the client declared")
    async def test_input_required_result_capabilities(ctx: Context) -> types.InputRequiredResult:
        capabilities = ctx.client_capabilities
        requests: dict[str, types.InputRequest] = {}
        if capabilities is None or capabilities.sampling is not None:
            requests["sample"] = _sample("Say hello", 50)
        if capabilities is None or capabilities.elicitation is not None:
            requests["ask"] = _elicit_name()
        return types.InputRequiredResult(input_requests=requests, request_state="capability-gated")


def _add_resources(server: MCPServer[Any]) -> None:
    """The resources, the template and the resource to subscribe to."""

    @server.resource("test://static-text", description="A static text resource for testing", mime_type="text/plain")
    def static_text_resource() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary", description="A static binary resource (image) for testing", mime_type="image/png"
    )
    def static_binary_resource() -> bytes:
        return base64.b64decode(TEST_IMAGE_BASE64)

    @server.resource(
        "test://template/{id}/data",
        description="A resource template with parameter substitution",
        mime_type="application/json",
    )
    def template_resource(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource(
        "test://watched-resource",
        description="A resource that can be subscribed to for updates",
        mime_type="text/plain",
    )
    def watched_resource() -> str:
        return "Watched resource content"


def _add_prompts(server: MCPServer[Any]) -> None:
    """The prompts: plain, with arguments, with an embedded resource, with an image, input-required."""

    @server.prompt(description="A simple prompt without arguments")
    def test_simple_prompt() -> list[UserMessage]:
        return [UserMessage(content=types.TextContent(text="This is a simple prompt for testing."))]

    @server.prompt(description="A prompt with required arguments")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
        return [UserMessage(content=types.TextContent(text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]

    @server.prompt(description="A prompt that includes an embedded resource")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
        text = types.TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(content=types.EmbeddedResource(resource=text)),
            UserMessage(content=types.TextContent(text="Please process the embedded resource above.")),
        ]

    @server.prompt(description="A prompt that includes image content")
    def test_prompt_with_image() -> list[UserMessage]:
        return [
            UserMessage(content=types.ImageContent(data=TEST_IMAGE_BASE64, mime_type="image/png")),
            UserMessage(content=types.TextContent(text="Please analyze the image above.")),
        ]

    @server.prompt(description="Tests InputRequiredResult from prompts/get (SEP-2322 non-tool request)")
    async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | types.InputRequiredResult:
        responses = ctx.input_responses or {}
        if "user_context" in responses:
            text = _elicited(responses["user_context"], "context") or "?"
            return [UserMessage(content=types.TextContent(text=f"Use the following context: {text}"))]
        schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
        ask = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message="What context should the prompt use?", requested_schema=schema)
        )
        return types.InputRequiredResult(input_requests={"user_context": ask})


def _add_handlers(server: MCPServer[Any], levels: _LogLevels) -> None:
    """Logging level, subscriptions and completion: the handlers the decorators do not cover."""
    subscribed: set[str] = set()
    lowlevel = lowlevel_server(server)  # MCPServer has no decorators for these three methods

    async def set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        levels.set(_session_id(ctx.request), params.level)
        return types.EmptyResult()

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def complete(
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion:
        # The suite's example: arg1 of test_prompt_with_arguments completes "par" to cities and words.
        offered = _COMPLETIONS.get(argument.name, ()) if isinstance(ref, types.PromptReference) else ()
        values = [value for value in offered if value.startswith(argument.value)]
        return types.Completion(values=values, total=len(values), has_more=False)


# ---------------------------------------------------------------------------------------- serving


def conformance_app(server: MCPServer[Any] | None = None, *, host: str = "127.0.0.1") -> Starlette:
    """The streamable HTTP app of the fixture server, at :data:`MCP_PATH`.

    Args:
        server: The server to serve (default: a fresh :func:`create_conformance_server`).
        host: The address it is bound to: the SDK's DNS-rebinding protection accepts the
            ``Host`` headers of a loopback address, which the suite's rebinding scenario checks.

    Returns:
        A Starlette app whose lifespan runs the SDK's session manager.
    """
    server = server or create_conformance_server()
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH, event_store=MemoryEventStore(), retry_interval=RETRY_INTERVAL_MS, host=host
    )


@asynccontextmanager
async def open_conformance_server(*, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve a fresh fixture server in this process for the length of the block; yield its URL.

    uvicorn runs on asyncio, so the server gets a thread with its own event loop; the block
    runs on the caller's trio loop and reaches it over loopback, as a client reaches any
    HTTP server. Leaving the block asks the server to stop and waits (in a worker thread)
    for its thread to end.

    Args:
        host: The address to bind.
        port: The port to bind; 0 picks a free one.

    Yields:
        The endpoint's URL, ``http://host:port/mcp``.

    Raises:
        RuntimeError: The server did not start within 20 s, or its thread failed (the
            thread's exception is the cause).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    bound_host, bound_port = sock.getsockname()[:2]
    token = trio.lowlevel.current_trio_token()
    settled = trio.Event()  # started, or the thread ended first

    def settle() -> None:
        token.run_sync_soon(settled.set)

    config = uvicorn.Config(cast(Any, None), log_level="warning", lifespan="on")  # its app is set in the thread
    server = _NotifyingServer(config, on_started=settle)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            # Built in the server's thread: the SDK's app makes anyio primitives that belong to
            # the event loop current when they are made, which must not be the caller's trio loop.
            config.app = conformance_app(host=host)
            anyio.run(server.serve, [sock], backend="asyncio")
        except BaseException as exc:  # reported to the caller's task, never lost in the thread
            failure.append(exc)
        finally:
            settle()

    thread = threading.Thread(target=run, name="conformance-server", daemon=True)
    thread.start()
    try:
        with trio.move_on_after(_STARTUP_TIMEOUT):
            await settled.wait()
        if not server.started:
            cause = failure[0] if failure else None
            raise RuntimeError(f"the conformance server did not start within {_STARTUP_TIMEOUT:g} s") from cause
        yield http_url(bound_host, bound_port, MCP_PATH)
    finally:
        server.should_exit = True
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(thread.join, _STARTUP_TIMEOUT)
        sock.close()


class _NotifyingServer(uvicorn.Server):
    """A uvicorn server that calls ``on_started`` once it accepts connections (from its own thread)."""

    def __init__(self, config: uvicorn.Config, *, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._on_started()


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_actors.testing.conformance_server",
        description=(
            "The fixture server of the MCP conformance suite's server scenarios (streamable HTTP). "
            "It writes 'mcp-actors: listening on <url>' to stderr once it accepts connections."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default: 0)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the fixture server from the command line until SIGINT or SIGTERM.

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.
    """
    args = _parse_args(argv)
    app = conformance_app(host=args.host)
    try:
        # uvicorn runs on asyncio only; this process is a server, not our trio core.
        anyio.run(_serve, app, args.host, args.port, backend="asyncio")
    except KeyboardInterrupt:
        pass


async def _serve(app: Starlette, host: str, port: int) -> None:
    await serve_http_app(app, host=host, port=port, path=MCP_PATH)


if __name__ == "__main__":
    main()
