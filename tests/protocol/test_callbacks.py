"""Host callbacks over the in-memory transport, on virtual time.

Each callback answered, declined, absent, raising and timing out, against the demo server's
callback tools (mcp_actors._demo.callbacks); capabilities declared only when offered; the
record's refusal; elicitation defaults (SEP-1034) and validation (SEP-1330 enums).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as mcp_types
import pytest
import trio

from mcp_actors import events
from mcp_actors._connection.callbacks import HostCallbacks, complete_elicitation, to_roots
from mcp_actors._connection.handle import ConnectionHandle, open_connection
from mcp_actors._connection.status import ConnectionSettings
from mcp_actors._demo.callbacks import ASK_USER_SCHEMA, CONSENT_URL
from mcp_actors._wire.transports import MemoryParams
from mcp_actors.demo_server import create_demo_server
from mcp_actors.errors import ToolCallFailed
from supervisors import Backoff

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def text_of(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


def settings(host: HostCallbacks | None, **overrides: Any) -> ConnectionSettings:
    fields: dict[str, Any] = {
        "server_id": "id-demo",
        "server_name": "demo",
        # raise_exceptions=False: a tool that fails with the host's error answers with it, as a real process does
        "transport": MemoryParams(server=create_demo_server, raise_exceptions=False),
        "ping_interval": 0,
        "backoff": Backoff(min_delay=0.5, max_delay=1.0, jitter=0.0, reset_after=60.0),
        "host": host,
        # The demo's ask_* tools ask with server-to-client requests, which exist only up to
        # 2025-11-25: these tests pin that revision; the 2026-07-28 way (InputRequiredResult)
        # is tested below with negotiate="auto" and the *_resolved tools.
        "negotiate": "legacy",
    }
    fields.update(overrides)
    return ConnectionSettings(**fields)


@asynccontextmanager
async def connected(host: HostCallbacks | None, **overrides: Any) -> AsyncIterator[ConnectionHandle]:
    handle, start = open_connection(settings(host, **overrides), events.EventBus())
    async with trio.open_nursery() as nursery:
        await nursery.start(start)
        try:
            await handle.connect()
            yield handle
        finally:
            await handle.aclose()


def client_capabilities(handle: ConnectionHandle) -> mcp_types.ClientCapabilities:
    live = handle._cell.live
    assert live is not None
    return live.session._build_capabilities("2025-11-25")


def sampled(text: str = "hello from the host", model: str = "host-model") -> mcp_types.CreateMessageResult:
    return mcp_types.CreateMessageResult(
        role="assistant", content=mcp_types.TextContent(type="text", text=text), model=model, stop_reason="endTurn"
    )


async def call_json(handle: ConnectionHandle, tool: str, args: dict[str, Any] | None = None) -> Any:
    result = await handle.call_tool(tool, args or {})
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


async def call_error(handle: ConnectionHandle, tool: str, args: dict[str, Any] | None = None) -> str:
    """The error the tool reports: the host's JSON-RPC error comes back as the call's error."""
    with pytest.raises(ToolCallFailed) as info:
        await handle.call_tool(tool, args or {})
    assert info.value.tool == tool
    return str(info.value)


# ---------------------------------------------------------------------- capabilities


async def test_no_handlers_declare_no_capabilities(autojump_clock: trio.abc.Clock) -> None:
    """A host that offers nothing declares no sampling, elicitation or roots capability."""
    async with connected(HostCallbacks()) as handle:
        caps = client_capabilities(handle)
        assert caps.sampling is None and caps.elicitation is None and caps.roots is None
        assert handle.offers() == frozenset()


async def test_handlers_declare_their_capabilities(autojump_clock: trio.abc.Clock) -> None:
    """Each offered handler declares its capability: sampling with tools, form+URL elicitation, roots listChanged."""

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        return sampled()

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="decline")

    host = HostCallbacks(sampling=sample, elicitation=elicit, roots=["file:///tmp/project"])
    async with connected(host) as handle:
        caps = client_capabilities(handle)
        assert caps.sampling is not None and caps.sampling.tools is not None
        assert caps.elicitation is not None and caps.elicitation.form is not None and caps.elicitation.url is not None
        assert caps.roots is not None and caps.roots.list_changed is True
        assert handle.offers() == {"sampling", "elicitation", "roots"}


async def test_record_refusal_hides_an_offered_capability(autojump_clock: trio.abc.Clock) -> None:
    """A record refusing sampling, elicitation and roots gets none declared even though the host offers all three."""

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        raise AssertionError("a refused server must never reach the handler")

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        raise AssertionError("a refused server must never reach the handler")

    host = HostCallbacks(sampling=sample, elicitation=elicit, roots=["file:///tmp"])
    async with connected(host, allow_sampling=False, allow_elicitation=False, allow_roots=False) as handle:
        caps = client_capabilities(handle)
        assert caps.sampling is None and caps.elicitation is None and caps.roots is None
        assert "not supported" in await call_error(handle, "ask_model", {"prompt": "hi"})
        assert "not supported" in await call_error(handle, "ask_user")
        assert "not supported" in await call_error(handle, "list_host_roots")


# ---------------------------------------------------------------------- sampling


async def test_sampling_answered_with_server_id_and_params(autojump_clock: trio.abc.Clock) -> None:
    """The sampling handler gets the server id and the SDK's params; its message reaches the tool."""
    seen: list[tuple[str, mcp_types.CreateMessageRequestParams]] = []

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        seen.append((server_id, params))
        return sampled("a haiku", model="m1")

    async with connected(HostCallbacks(sampling=sample)) as handle:
        answer = await call_json(handle, "ask_model", {"prompt": "write a haiku"})
    assert answer["model"] == "m1" and answer["content"][0]["text"] == "a haiku"
    server_id, params = seen[0]
    assert server_id == "id-demo"
    assert params.messages[0].content.text == "write a haiku"  # type: ignore[union-attr]
    assert params.tools is None


async def test_sampling_with_tools(autojump_clock: trio.abc.Clock) -> None:
    """Sampling with tools (2025-11-25): the handler sees the tools and may answer with a tool use."""

    async def sample(
        server_id: str, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResultWithTools:
        assert params.tools is not None and params.tools[0].name == "get_weather"
        return mcp_types.CreateMessageResultWithTools(
            role="assistant",
            content=[mcp_types.ToolUseContent(type="tool_use", id="t1", name="get_weather", input={"city": "Oslo"})],
            model="m-tools",
            stop_reason="toolUse",
        )

    async with connected(HostCallbacks(sampling=sample)) as handle:
        answer = await call_json(handle, "ask_model", {"prompt": "weather?", "tools": True})
    assert answer["stopReason"] == "toolUse"
    assert answer["content"][0]["name"] == "get_weather" and answer["content"][0]["input"] == {"city": "Oslo"}


async def test_sampling_absent_is_the_protocol_error(autojump_clock: trio.abc.Clock) -> None:
    """With no sampling handler a server that samples anyway gets the protocol's error; the tool reports it."""
    async with connected(HostCallbacks()) as handle:
        message = await call_error(handle, "ask_model", {"prompt": "hi"})
    assert "Sampling not supported" in message


async def test_sampling_raising_is_an_internal_error_without_its_text(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A raising sampling handler answers -32603 naming the handler, never the exception's text; the log has it."""

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        raise RuntimeError("api key sk-secret rejected")

    with caplog.at_level(logging.ERROR, logger="mcp_actors.callbacks"):
        async with connected(HostCallbacks(sampling=sample)) as handle:
            message = await call_error(handle, "ask_model", {"prompt": "hi"})
            # (an async request: a sync tool runs in a thread, which autojump_clock does not wait for)
            assert "ask_model" in {tool.name for tool in await handle.list_tools()}
    assert "sampling handler failed" in message and "sk-secret" not in message
    assert "sampling handler raised" in caplog.text


async def test_sampling_timeout_is_a_timeout_error(autojump_clock: trio.abc.Clock) -> None:
    """A sampling handler slower than the callback timeout answers a timeout error at exactly the timeout."""

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        await trio.sleep(3600)
        raise AssertionError("unreachable")

    async with connected(HostCallbacks(sampling=sample, timeout=30)) as handle:
        before = trio.current_time()
        message = await call_error(handle, "ask_model", {"prompt": "hi"})
        assert trio.current_time() - before == pytest.approx(30, abs=0.5)
    assert "did not answer within 30s" in message


async def test_sampling_declined_by_the_handler_returning_nonsense(autojump_clock: trio.abc.Clock) -> None:
    """A sampling handler that returns something that is not a message answers -32603, the server lives on."""

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> Any:
        return "just a string"

    async with connected(HostCallbacks(sampling=sample)) as handle:
        assert "returned no message" in await call_error(handle, "ask_model", {"prompt": "hi"})


# ---------------------------------------------------------------------- elicitation


def elicitor(answer: Callable[[mcp_types.ElicitRequestParams], Any], seen: list[Any] | None = None) -> Any:
    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        if seen is not None:
            seen.append((server_id, params))
        result: mcp_types.ElicitResult = answer(params)
        return result

    return elicit


async def test_elicitation_form_accepted_gets_defaults_filled(autojump_clock: trio.abc.Clock) -> None:
    """An accepted form gets the schema's defaults for the fields it left out (SEP-1034) before it is sent."""
    seen: list[Any] = []
    answer = elicitor(lambda p: mcp_types.ElicitResult(action="accept", content={"name": "Ada", "size": "m"}), seen)
    async with connected(HostCallbacks(elicitation=answer)) as handle:
        result = await call_json(handle, "ask_user")
    assert result == {
        "action": "accept",
        "content": {"name": "Ada", "size": "m", "age": 30, "colour": "green", "toppings": [], "subscribe": False},
    }
    server_id, params = seen[0]
    assert server_id == "id-demo" and isinstance(params, mcp_types.ElicitRequestFormParams)
    assert params.requested_schema == ASK_USER_SCHEMA


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"name": "Ada", "colour": "purple"}, "field 'colour': 'purple' is not one of"),
        ({"name": "Ada", "size": "xl"}, "field 'size'"),
        ({"name": "Ada", "toppings": ["cheese", "pineapple"]}, "field 'toppings'"),
        ({"name": "Ada", "age": "old"}, "field 'age': 'old' is not of type 'integer'"),
        ({"age": 3}, "'name' is a required property"),
    ],
)
async def test_elicitation_answer_not_matching_the_schema_is_never_sent(
    autojump_clock: trio.abc.Clock, content: dict[str, Any], problem: str
) -> None:
    """An accepted answer that breaks the schema (enums per SEP-1330, types, required) is refused with -32602."""
    answer = elicitor(lambda p: mcp_types.ElicitResult(action="accept", content=content))
    async with connected(HostCallbacks(elicitation=answer)) as handle:
        message = await call_error(handle, "ask_user")
    assert "does not match the requested schema" in message and problem in message


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicitation_declined_or_cancelled(autojump_clock: trio.abc.Clock, action: str) -> None:
    """A declined or cancelled elicitation reaches the server as that action, with no content."""
    answer = elicitor(lambda p: mcp_types.ElicitResult(action=action, content={"name": "ignored"}))
    async with connected(HostCallbacks(elicitation=answer)) as handle:
        assert await call_json(handle, "ask_user") == {"action": action, "content": None}


async def test_elicitation_url_mode(autojump_clock: trio.abc.Clock) -> None:
    """URL mode: the handler sees the URL and an elicitation id; accept is sent without content."""
    seen: list[Any] = []
    answer = elicitor(lambda p: mcp_types.ElicitResult(action="accept", content={"x": "dropped"}), seen)
    async with connected(HostCallbacks(elicitation=answer)) as handle:
        assert await call_json(handle, "ask_user_url") == {"action": "accept"}
    params = seen[0][1]
    assert isinstance(params, mcp_types.ElicitRequestURLParams)
    assert params.url == CONSENT_URL and params.elicitation_id


async def test_elicitation_absent_is_the_protocol_error(autojump_clock: trio.abc.Clock) -> None:
    """With no elicitation handler the capability is undeclared and a server that elicits anyway gets -32600."""
    async with connected(HostCallbacks()) as handle:
        assert "Elicitation not supported" in await call_error(handle, "ask_user")


async def test_elicitation_raising_is_an_internal_error(autojump_clock: trio.abc.Clock) -> None:
    """A raising elicitation handler answers -32603 without the exception's text."""

    def boom(params: mcp_types.ElicitRequestParams) -> Any:
        raise ValueError("password hunter2")

    async with connected(HostCallbacks(elicitation=elicitor(boom))) as handle:
        message = await call_error(handle, "ask_user")
    assert "elicitation handler failed" in message and "hunter2" not in message


async def test_elicitation_timeout_is_a_cancel(autojump_clock: trio.abc.Clock) -> None:
    """An elicitation nobody answers within the callback timeout is sent as cancel, at exactly the timeout."""

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with connected(HostCallbacks(elicitation=elicit, timeout=60)) as handle:
        before = trio.current_time()
        assert await call_json(handle, "ask_user") == {"action": "cancel", "content": None}
        assert trio.current_time() - before == pytest.approx(60, abs=0.5)


# ---------------------------------------------------------------------- roots


async def test_roots_static_list(autojump_clock: trio.abc.Clock) -> None:
    """A static roots list is what the server lists."""
    host = HostCallbacks(roots=["file:///work/project", mcp_types.Root(uri="file:///data", name="data")])  # type: ignore[arg-type]
    async with connected(host) as handle:
        assert await call_json(handle, "list_host_roots") == [
            {"uri": "file:///work/project", "name": None},
            {"uri": "file:///data", "name": "data"},
        ]


async def test_roots_callable_gets_the_server_id(autojump_clock: trio.abc.Clock) -> None:
    """A roots callable is asked per server (with its id) each time the server lists."""

    async def roots(server_id: str) -> list[str]:
        return [f"file:///srv/{server_id}"]

    async with connected(HostCallbacks(roots=roots)) as handle:
        assert await call_json(handle, "list_host_roots") == [{"uri": "file:///srv/id-demo", "name": None}]


async def test_roots_absent_raising_and_timing_out(autojump_clock: trio.abc.Clock) -> None:
    """No roots: -32600; a raising callable: -32603; a hanging one: a timeout error at the timeout."""
    async with connected(HostCallbacks()) as handle:
        assert "List roots not supported" in await call_error(handle, "list_host_roots")

    async def raising(server_id: str) -> list[str]:
        raise OSError("disk")

    async with connected(HostCallbacks(roots=raising)) as handle:
        assert "roots callable failed" in await call_error(handle, "list_host_roots")

    async def hanging(server_id: str) -> list[str]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with connected(HostCallbacks(roots=hanging, timeout=10)) as handle:
        before = trio.current_time()
        assert "did not answer within 10s" in await call_error(handle, "list_host_roots")
        assert trio.current_time() - before == pytest.approx(10, abs=0.5)


async def test_roots_changed_reaches_the_server(autojump_clock: trio.abc.Clock) -> None:
    """After set_roots the connection sends roots/list_changed; the server hears it and lists the new roots."""
    host = HostCallbacks(roots=["file:///a"])
    async with connected(host) as handle:
        host.set_roots(["file:///b"])
        assert await handle.notify_roots_changed() is True
        assert await call_json(handle, "wait_roots_changed", {"count": 1}) == 1
        assert await call_json(handle, "list_host_roots") == [{"uri": "file:///b", "name": None}]
        host.set_roots(None)  # withdrawn: a server that was told of roots now lists none
        assert await handle.notify_roots_changed() is True
        assert await call_json(handle, "wait_roots_changed", {"count": 2}) == 2
        assert await call_json(handle, "list_host_roots") == []


async def test_roots_changed_not_sent_where_not_offered(autojump_clock: trio.abc.Clock) -> None:
    """A server whose record refuses roots is not notified."""
    async with connected(HostCallbacks(roots=["file:///a"]), allow_roots=False) as handle:
        assert await handle.notify_roots_changed() is False


# ---------------------------------------------------------------------- values


def test_roots_must_be_file_uris() -> None:
    """A root that is not a file:// URI, or a bare string for the list, is refused by name."""
    with pytest.raises(ValueError, match="must be a file:// URI, got 'https://x'"):
        to_roots(["https://x"])
    with pytest.raises(TypeError, match="not one string"):
        to_roots("file:///a")
    with pytest.raises(ValueError, match="must be a file:// URI"):
        HostCallbacks(roots=["/tmp"])


def test_callback_timeout_must_be_positive() -> None:
    """A callback timeout of zero is refused with the rule and the value."""
    with pytest.raises(ValueError, match="callback_timeout must be > 0 seconds, got 0"):
        HostCallbacks(timeout=0)


def test_complete_elicitation_titled_multi_select_and_formats() -> None:
    """Titled multi-select (anyOf of const) and string formats validate; the answer keeps what it set."""
    schema = {
        "type": "object",
        "properties": {
            "pick": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}},
            "when": {"type": "string", "format": "date"},
            "n": {"type": "number", "default": 1.5},
        },
    }
    assert complete_elicitation(schema, {"pick": ["a"], "when": "2026-11-30"}) == {
        "pick": ["a"],
        "when": "2026-11-30",
        "n": 1.5,
    }
    with pytest.raises(ValueError, match="field 'pick'"):
        complete_elicitation(schema, {"pick": ["c"]})
    with pytest.raises(ValueError, match="field 'when'"):
        complete_elicitation(schema, {"when": "yesterday"})


# ---------------------------------------------------------------------- 2026-07-28: InputRequiredResult (SEP-2322)


async def test_input_required_is_fulfilled_by_the_same_handler(autojump_clock: trio.abc.Clock) -> None:
    """At 2026-07-28 an elicitation comes as an InputRequiredResult; the host handler answers, the call retries."""
    seen: list[Any] = []
    answer = elicitor(lambda p: mcp_types.ElicitResult(action="accept", content={"name": "Lin"}), seen)
    async with connected(HostCallbacks(elicitation=answer), negotiate="auto") as handle:
        live = handle._cell.live
        assert live is not None and live.session.protocol_version == "2026-07-28"
        assert await call_json(handle, "ask_user_resolved") == {"action": "accept", "content": {"name": "Lin"}}
    assert len(seen) == 1 and seen[0][0] == "id-demo"


async def test_input_required_declined_and_absent(autojump_clock: trio.abc.Clock) -> None:
    """At 2026-07-28 a declined elicitation reaches the tool as decline; with no handler the call fails naming it."""
    answer = elicitor(lambda p: mcp_types.ElicitResult(action="decline"))
    async with connected(HostCallbacks(elicitation=answer), negotiate="auto") as handle:
        assert await call_json(handle, "ask_user_resolved") == {"action": "decline"}
    async with connected(HostCallbacks(), negotiate="auto") as handle:
        message = await call_error(handle, "ask_user_resolved")
    assert "did not declare the form elicitation capability" in message and "-32021" in message


async def test_input_required_handshake_revision_still_uses_server_requests(autojump_clock: trio.abc.Clock) -> None:
    """The same resolver tool over the handshake (legacy) revision is answered by a server-to-client request."""
    answer = elicitor(lambda p: mcp_types.ElicitResult(action="accept", content={"name": "Old"}))
    async with connected(HostCallbacks(elicitation=answer)) as handle:
        live = handle._cell.live
        assert live is not None and live.session.protocol_version != "2026-07-28"
        assert await call_json(handle, "ask_user_resolved") == {"action": "accept", "content": {"name": "Old"}}


async def test_input_required_sampling_answered_and_raising(autojump_clock: trio.abc.Clock) -> None:
    """At 2026-07-28 sampling rides an InputRequiredResult: answered by the handler; a raising one fails the call."""
    async with connected(HostCallbacks(sampling=lambda sid, p: _async(sampled("round trip"))), negotiate="auto") as h:
        answer = await call_json(h, "ask_model_resolved", {"prompt": "hi"})
        assert answer["content"][0]["text"] == "round trip"

    async def raising(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        raise RuntimeError("secret-token")

    async with connected(HostCallbacks(sampling=raising), negotiate="auto") as h:
        message = await call_error(h, "ask_model_resolved", {"prompt": "hi"})
    assert "sampling handler failed" in message and "secret-token" not in message


async def _async(value: Any) -> Any:
    return value
