"""The demo server's tools that ask the host for something.

Registered on the demo server by :func:`add_callback_tools`; each returns what the host
answered as JSON text, so a test or a user sees exactly what crossed the wire:

=============================  ===================================================================
``ask_model(prompt, tools)``   samples the host's model (``sampling/createMessage``); with
                               ``tools`` true it offers the model one tool (``get_weather``)
``ask_user()``                 form-mode elicitation: a name (required), an age (default 30),
                               a colour (enum, default green), a size (titled ``oneOf``) and
                               toppings (multi-select)
``ask_user_url()``             URL-mode elicitation: asks the user to open a consent page; an
                               accepted one is reported done at once
                               (``notifications/elicitation/complete``, same elicitation id)
``list_host_roots()``          lists the host's roots (``roots/list``)
``wait_roots_changed(count)``  waits until ``notifications/roots/list_changed`` arrived ``count``
                               times in all (bounded), returns the count
``ask_user_resolved()``        the same question as ``ask_user`` (name only), asked the way the
                               negotiated revision wants: a server-to-client request up to
                               2025-11-25, an ``InputRequiredResult`` at 2026-07-28 (SEP-2322)
``ask_model_resolved(prompt)`` sampling, asked the same revision-dependent way
prompt ``introduce``           asks the user's name (form elicitation) before it renders
``demo://model-says/{topic}``  a resource template whose read samples the host's model about
                               ``topic`` and returns the model's text
=============================  ===================================================================

Each tool asks the way the negotiated revision wants: a server-to-client request up to
2025-11-25; at 2026-07-28, which has no server-to-client requests, it returns an
``InputRequiredResult`` (SEP-2322) and answers the client's retry. ``wait_roots_changed``
counts ``notifications/roots/list_changed``, which exists only up to 2025-11-25.

A failure of the host's answer (capability not declared, handler error) reaches the tool as
an ``MCPError``; the tool lets it through, so the caller sees a tool error naming it. (At
2026-07-28 the client reports it without retrying; the caller sees the same error.)
"""

from __future__ import annotations

import json
import uuid
import warnings
from typing import Annotated, Any, Final

import anyio
import mcp_types as types
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from mcp_actors._sdk import lowlevel_server

__all__ = [
    "ASKING_PROMPT",
    "ASK_USER_SCHEMA",
    "CALLBACK_TOOL_NAMES",
    "CONSENT_URL",
    "SAMPLED_TEMPLATE",
    "add_callback_tools",
]

# The handshake-era requests below are deprecated at 2026-07-28 but are what those revisions
# speak; this module uses them on purpose, so their warning is noise here (and only here).
warnings.filterwarnings("ignore", category=MCPDeprecationWarning, module=__name__)

CALLBACK_TOOL_NAMES: Final = frozenset(
    {
        "ask_model",
        "ask_model_resolved",
        "ask_user",
        "ask_user_resolved",
        "ask_user_url",
        "list_host_roots",
        "wait_roots_changed",
    }
)
"""The tools :func:`add_callback_tools` registers."""

ASKING_PROMPT: Final = "introduce"
"""A prompt that asks the user's name (form elicitation) before it renders."""

SAMPLED_TEMPLATE: Final = "demo://model-says/{topic}"
"""A resource template whose read samples the host's model about ``topic``."""

_NAME_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Name", "minLength": 1}},
    "required": ["name"],
}

CONSENT_URL: Final = "https://example.com/mcp-actors-demo/consent"
"""The page ``ask_user_url`` asks the user to open."""

ASK_USER_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "description": "Your name", "minLength": 1},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150, "default": 30},
        "colour": {
            "type": "string",
            "title": "Favourite colour",
            "enum": ["red", "green", "blue"],
            "default": "green",
        },
        "size": {
            "type": "string",
            "title": "Size",
            "oneOf": [
                {"const": "s", "title": "Small"},
                {"const": "m", "title": "Medium"},
                {"const": "l", "title": "Large"},
            ],
        },
        "toppings": {
            "type": "array",
            "title": "Toppings",
            "items": {"type": "string", "enum": ["cheese", "ham", "olives"]},
            "default": [],
        },
        "subscribe": {"type": "boolean", "title": "Subscribe to news", "default": False},
    },
    "required": ["name"],
}
"""The form ``ask_user`` requests: every field kind of the elicitation schema subset."""

_WEATHER_TOOL: Final = types.Tool(
    name="get_weather",
    description="The weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class _Name(BaseModel):
    name: str = Field(description="Your name")


async def _ask_name() -> Elicit[_Name]:
    return Elicit("What is your name?", _Name)


async def _sample_prompt(prompt: str) -> Sample:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=200)


def _sampled(result: types.CreateMessageResult | types.CreateMessageResultWithTools) -> dict[str, Any]:
    blocks = result.content if isinstance(result.content, list) else [result.content]
    return {
        "model": result.model,
        "role": result.role,
        "stopReason": result.stop_reason,
        "content": [block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in blocks],
    }


def _answer(ctx: Context, key: str) -> types.InputResponse | None:
    """At 2026-07-28, the client's answer to this tool's input request ``key`` (``None``: not asked yet)."""
    return (ctx.input_responses or {}).get(key)


def _modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _ask(key: str, request: types.InputRequest) -> types.InputRequiredResult:
    return types.InputRequiredResult(input_requests={key: request})


def add_callback_tools(server: MCPServer[Any]) -> None:
    """Register the host-callback tools, prompt and resource template on ``server`` (one call from the demo server)."""
    roots_changes = 0
    roots_changed = anyio.Event()

    async def on_roots_changed(ctx: Any, params: types.NotificationParams) -> None:
        nonlocal roots_changes, roots_changed
        roots_changes += 1
        roots_changed.set()
        roots_changed = anyio.Event()

    lowlevel_server(server).add_notification_handler(  # the SDK's only hook for it
        "notifications/roots/list_changed", types.NotificationParams, on_roots_changed
    )

    @server.tool(description="Ask the host's model to answer a prompt (MCP sampling).", structured_output=False)
    async def ask_model(
        ctx: Context,
        prompt: Annotated[str, Field(description="What to ask the model.")],
        tools: Annotated[bool, Field(description="Offer the model the get_weather tool.")] = False,
    ) -> str | types.InputRequiredResult:
        messages = [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))]
        offered = [_WEATHER_TOOL] if tools else None
        if _modern(ctx):
            answer = _answer(ctx, "sample")
            if not isinstance(answer, types.CreateMessageResult | types.CreateMessageResultWithTools):
                params = types.CreateMessageRequestParams(messages=messages, max_tokens=200, tools=offered)
                return _ask("sample", types.CreateMessageRequest(params=params))
            return json.dumps(_sampled(answer))
        result = await ctx.session.create_message(
            messages, max_tokens=200, tools=offered, related_request_id=ctx.request_id
        )
        return json.dumps(_sampled(result))

    @server.tool(description="Ask the user a few questions through the host (form elicitation).")
    async def ask_user(ctx: Context) -> str | types.InputRequiredResult:
        message = "Tell the demo server about yourself."
        if _modern(ctx):
            answer = _answer(ctx, "form")
            if not isinstance(answer, types.ElicitResult):
                params = types.ElicitRequestFormParams(message=message, requested_schema=ASK_USER_SCHEMA)
                return _ask("form", types.ElicitRequest(params=params))
            return json.dumps({"action": answer.action, "content": answer.content})
        result = await ctx.session.elicit_form(message, ASK_USER_SCHEMA, related_request_id=ctx.request_id)
        return json.dumps({"action": result.action, "content": result.content})

    @server.tool(
        description="Ask the user to open a consent page (URL elicitation); an accepted one is reported done at once"
        " (notifications/elicitation/complete, at the handshake revisions)."
    )
    async def ask_user_url(ctx: Context) -> str | types.InputRequiredResult:
        message, elicitation_id = "Please approve the demo's access.", f"consent-{uuid.uuid4().hex}"
        if _modern(ctx):
            answer = _answer(ctx, "consent")
            if not isinstance(answer, types.ElicitResult):
                params = types.ElicitRequestURLParams(message=message, url=CONSENT_URL, elicitation_id=elicitation_id)
                return _ask("consent", types.ElicitRequest(params=params))
            return json.dumps({"action": answer.action})
        result = await ctx.elicit_url(message, CONSENT_URL, elicitation_id)
        if result.action == "accept":
            # The demo has no real page: the out-of-band step counts as finished at once.
            await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)
        return json.dumps({"action": result.action})

    @server.tool(description="List the host's roots (the directories it lets servers see).")
    async def list_host_roots(ctx: Context) -> str | types.InputRequiredResult:
        if _modern(ctx):
            answer = _answer(ctx, "roots")
            if not isinstance(answer, types.ListRootsResult):
                return _ask("roots", types.ListRootsRequest())
            roots = answer.roots
        else:
            roots = (await ctx.session.list_roots()).roots
        return json.dumps([{"uri": str(root.uri), "name": root.name} for root in roots])

    @server.tool(description="Wait until the host's roots changed `count` times in all (at most 30 s).")
    async def wait_roots_changed(count: Annotated[int, Field(ge=1, le=1000)]) -> str:
        with anyio.fail_after(30):
            while roots_changes < count:
                await roots_changed.wait()
        return str(roots_changes)

    @server.tool(description="Ask the host's model, the way the protocol revision wants (request or InputRequired).")
    async def ask_model_resolved(
        prompt: Annotated[str, Field(description="What to ask the model.")],
        answer: Annotated[types.CreateMessageResult, Resolve(_sample_prompt)],
    ) -> str:
        return json.dumps(_sampled(answer))

    @server.tool(description="Ask the user's name the way the protocol revision wants (request or InputRequired).")
    async def ask_user_resolved(
        answer: Annotated[ElicitationResult[_Name], Resolve(_ask_name)],
    ) -> str:
        if isinstance(answer, AcceptedElicitation):
            return json.dumps({"action": "accept", "content": answer.data.model_dump()})
        return json.dumps({"action": answer.action})

    # ------------------------------------------------------------------ a prompt and a resource that ask

    @server.prompt(name=ASKING_PROMPT, description="Introduce the user to a team; asks the user's name first.")
    async def introduce(
        ctx: Context, team: Annotated[str, Field(description="The team to introduce the user to.")]
    ) -> str | types.InputRequiredResult:
        message = f"Who should be introduced to {team}?"
        if _modern(ctx):
            answer = _answer(ctx, "name")
            if not isinstance(answer, types.ElicitResult):
                params = types.ElicitRequestFormParams(message=message, requested_schema=_NAME_SCHEMA)
                return _ask("name", types.ElicitRequest(params=params))
            result = answer
        else:
            result = await ctx.session.elicit_form(message, _NAME_SCHEMA, related_request_id=ctx.request_id)
        if result.action == "accept" and result.content:
            return f"Please introduce {result.content['name']} to the {team} team."
        return f"The user answered {result.action}: introduce nobody to the {team} team."

    @server.resource(SAMPLED_TEMPLATE, name="model-says", description="What the host's model says about a topic.")
    async def model_says(topic: str, ctx: Context) -> str | types.InputRequiredResult:
        text = f"Say one sentence about {topic}."
        messages = [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))]
        if _modern(ctx):
            answer = _answer(ctx, "sample")
            if not isinstance(answer, types.CreateMessageResult | types.CreateMessageResultWithTools):
                params = types.CreateMessageRequestParams(messages=messages, max_tokens=200)
                return _ask("sample", types.CreateMessageRequest(params=params))
            result: types.CreateMessageResult | types.CreateMessageResultWithTools = answer
        else:
            result = await ctx.session.create_message(messages, max_tokens=200, related_request_id=ctx.request_id)
        return " ".join(block["text"] for block in _sampled(result)["content"] if block.get("type") == "text")
