"""Resources, prompts, completion, logging and tasks through McpService against the real demo server.

What the transport carries on its own paths, notifications a server pushes (resource updates,
list changes, progress) and the 2026-07-28 listen stream, runs over stdio (the demo server as a
process) and streamable HTTP. Request and answer behaviour, the same over either, runs over
streamable HTTP only: the demo server's real app on a real socket, in a thread, with no
process to start (stdio error replies: ``test_a_malformed_error_reply_stays_a_protocol_error``).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import mcp.types as mcp_types
import pytest
import trio
from protocol_bed import BOUND, NEGOTIATED, demo_service, negotiated, next_event, text_of

from mcp_actors import events
from mcp_actors._demo.callbacks import SAMPLED_TEMPLATE
from mcp_actors._demo.features import COUNTER_URI, EXTRA_RESOURCE_URI, NOTE_TEMPLATE, TASK_TOOL
from mcp_actors.adapters import flatten_result
from mcp_actors.errors import (
    ConnectionFailed,
    ServerProtocolError,
    ServerRequestFailed,
    ToolCallTimeout,
    ToolOutputInvalid,
    ToolTaskFailed,
)
from mcp_actors.runtime import open_runtime

# ---------------------------------------------------------------------- item 3: resources, prompts, completion


async def test_resources_templates_read_and_discover(tmp_path: Path) -> None:
    """Resources (all pages), templates, text and blob reads work, and discover shows templates."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http") as svc:
            uris = {str(r.uri) for r in await svc.list_resources("srv")}
            assert {"demo://readme", COUNTER_URI, "demo://pixel.png"} <= uris
            templates = await svc.list_resource_templates("srv")
            assert [t.uri_template for t in templates] == [SAMPLED_TEMPLATE, NOTE_TEMPLATE]
            text = await svc.read_resource("srv", "demo://note/alpha")
            assert isinstance(text.contents[0], mcp_types.TextResourceContents)
            assert text.contents[0].text == "note alpha"
            blob = await svc.read_resource("srv", "demo://pixel.png")
            assert isinstance(blob.contents[0], mcp_types.BlobResourceContents)
            assert blob.contents[0].mime_type == "image/png"
            found = await svc.discover("srv")
            assert [t.uri_template for t in found.resource_templates] == [SAMPLED_TEMPLATE, NOTE_TEMPLATE]
            assert not found.errors


async def test_a_refused_request_is_server_request_failed(tmp_path: Path, protocol: str) -> None:
    """The server's JSON-RPC error reply to resources/read or prompts/get is a ServerRequestFailed.

    It names the server, the method, the server's own message and what to do, carries the
    method and the server's error code, and the connection goes on. Before, it was a
    ServerProtocolError, a ConnectionFailed (the CLI said "unavailable", exit 3).
    """
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http", protocol=protocol) as svc:
            with pytest.raises(ServerRequestFailed) as unknown_uri:
                await svc.read_resource("srv", "demo://nothing-here")
            with pytest.raises(ServerRequestFailed) as unknown_prompt:
                await svc.get_prompt("srv", "nothing-here")
            with pytest.raises(ServerRequestFailed) as missing_argument:
                await svc.get_prompt("srv", "compose", {})
            for caught in (unknown_uri, unknown_prompt, missing_argument):
                assert not isinstance(caught.value, ConnectionFailed)
                assert caught.value.server == "srv"
            assert (unknown_uri.value.method, unknown_uri.value.code) == ("resources/read", -32602)
            assert str(unknown_uri.value).startswith("server 'srv': resources/read failed: Unknown resource")
            assert "mcp-actors resources list srv" in str(unknown_uri.value)
            for caught in (unknown_prompt, missing_argument):
                assert caught.value.method == "prompts/get"
                assert str(caught.value).startswith("server 'srv': prompts/get failed: ")
                assert "mcp-actors prompts list srv" in str(caught.value)
            if protocol == "legacy":  # 2026-07-28 servers of this SDK hide the reason ("Internal server error")
                assert "Unknown prompt: nothing-here" in str(unknown_prompt.value)
                assert "Missing required arguments" in str(missing_argument.value)
            note = await svc.read_resource("srv", "demo://note/alpha")  # the same connection serves on
            assert note.contents[0].text == "note alpha"  # type: ignore[union-attr]


RAW_SERVER = """
import json
import sys

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue  # notifications
    if message["method"] == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"resources": {}},
            "serverInfo": {"name": "raw", "version": "0"},
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    elif message["params"]["uri"] == "raw://malformed":
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": "not an error object"}
    else:
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32002, "message": "no such resource"}}
    sys.stdout.write(json.dumps(reply) + "\\n")
    sys.stdout.flush()
"""


async def test_a_malformed_error_reply_stays_a_protocol_error(tmp_path: Path) -> None:
    """An error member that is not a JSON-RPC error object is ServerProtocolError; a proper one is ServerRequestFailed.

    The server broke the protocol there, so it is not reported as an answered request.
    """
    script = tmp_path / "raw_server.py"
    script.write_text(RAW_SERVER)
    config = {"command": sys.executable, "args": [str(script)], "pingInterval": 0, "protocol": "legacy"}
    with trio.fail_after(BOUND):
        async with open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False) as rt:
            await rt.service.add({"name": "raw", "type": "stdio", "config": config})
            with pytest.raises(ServerRequestFailed) as refused:
                await rt.service.read_resource("raw", "raw://missing")
            assert (refused.value.code, refused.value.method) == (-32002, "resources/read")
            with pytest.raises(ServerProtocolError, match=r"'raw'.*resources/read.*malformed error response"):
                await rt.service.read_resource("raw", "raw://malformed")


async def test_subscription_updates_and_list_changed_invalidates_cache(
    tmp_path: Path, transport: str, protocol: str
) -> None:
    """A subscribed resource's change is a resource:updated event; list_changed refreshes the cached list.

    At 2025-11-25 through resources/subscribe and pushed notifications, at 2026-07-28 through
    the connection's subscriptions/listen stream.
    """
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, transport, protocol=protocol) as svc:
            sub = svc.subscribe()
            before = {str(r.uri) for r in await svc.list_resources("srv")}
            assert negotiated(svc, "srv") == NEGOTIATED[protocol]
            assert EXTRA_RESOURCE_URI not in before
            await svc.subscribe_resource("srv", COUNTER_URI)
            await svc.call_tool("srv", "bump_counter")
            event = await next_event(sub, events.RESOURCE_UPDATED, lambda e: e.data["uri"] == COUNTER_URI)
            assert event.data["serverName"] == "srv"
            read = await svc.read_resource("srv", COUNTER_URI)
            assert read.contents[0].text == "1"  # type: ignore[union-attr]
            await svc.unsubscribe_resource("srv", COUNTER_URI)
            await svc.call_tool("srv", "toggle_extra_resource")
            await next_event(sub, events.RESOURCES_CHANGED, lambda e: True)
            after = {str(r.uri) for r in await svc.list_resources("srv")}
            assert EXTRA_RESOURCE_URI in after
            await svc.call_tool("srv", "toggle_extra_tool")
            await next_event(sub, events.TOOLS_CHANGED, lambda e: True)
            assert "extra" in {t.name for t in await svc.list_server_tools("srv")}
            # Unsubscribed: the next change is not announced (the tool's own answer comes after
            # anything it sent, and the list change after it proves the stream still runs).
            await svc.call_tool("srv", "bump_counter")
            await svc.call_tool("srv", "toggle_extra_resource")
            event = await next_event(sub, events.RESOURCES_CHANGED, lambda e: True)
            assert event.data["serverName"] == "srv"
            while True:
                try:
                    late = sub.receive_nowait()
                except trio.WouldBlock:
                    break
                assert late.type != events.RESOURCE_UPDATED, late


async def test_listen_stream_lost_is_reopened_and_caches_invalidated(tmp_path: Path, transport: str) -> None:
    """At 2026-07-28 a listen stream the server ends is re-opened with its URIs; change events tell hosts to refetch."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, transport) as svc:
            sub = svc.subscribe()
            await svc.subscribe_resource("srv", COUNTER_URI)
            assert negotiated(svc, "srv") == "2026-07-28"
            await svc.list_resources("srv")
            epoch = svc.status("srv").resources_epoch
            assert text_of(await svc.call_tool("srv", "end_subscriptions")) == "listen streams closed"
            # No replay: on re-open the connection announces that anything may have changed.
            await next_event(sub, events.TOOLS_CHANGED, lambda e: True)
            await next_event(sub, events.RESOURCES_CHANGED, lambda e: True)
            await next_event(sub, events.RESOURCE_UPDATED, lambda e: e.data["uri"] == COUNTER_URI)
            assert svc.status("srv").resources_epoch > epoch
            # The re-opened stream carries the subscription: the next change arrives as before.
            await svc.call_tool("srv", "bump_counter")
            await next_event(sub, events.RESOURCE_UPDATED, lambda e: e.data["uri"] == COUNTER_URI)
            assert svc.status("srv").state.value == "connected"


async def test_prompts_and_completion(tmp_path: Path, protocol: str) -> None:
    """Prompts list with their arguments, render with arguments, and both kinds of argument complete (each revision)."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http", protocol=protocol) as svc:
            prompts = {p.name: p for p in await svc.list_prompts("srv")}
            assert [a.name for a in prompts["compose"].arguments or []] == ["topic", "tone"]
            got = await svc.get_prompt("srv", "compose", {"topic": "trio", "tone": "formal"})
            assert got.messages[0].content.text == "Write a formal paragraph about trio."  # type: ignore[union-attr]
            tones = await svc.complete("srv", {"type": "ref/prompt", "name": "compose"}, ("tone", "fr"))
            assert tones.values == ["friendly"]
            names = await svc.complete(
                "srv", mcp_types.ResourceTemplateReference(uri=NOTE_TEMPLATE), {"name": "name", "value": "b"}
            )
            assert names.values == ["beta"]
            with pytest.raises(ValueError, match="ref must be"):
                await svc.complete("srv", {"type": "ref/nothing"}, ("tone", ""))


# ---------------------------------------------------------------------- item 2: progress


async def test_progress_callback_and_event(tmp_path: Path, transport: str, protocol: str) -> None:
    """call_tool(on_progress=) sees every progress notification, and each is a tool:progress event, at each revision."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, transport, protocol=protocol) as svc:
            sub = svc.subscribe()
            result = await svc.call_tool("srv", "sleep", {"seconds": 0.05}, on_progress=on_progress)
            assert negotiated(svc, "srv") == NEGOTIATED[protocol]
            assert text_of(result) == "slept 0.05 s"
            assert len(seen) == 10
            assert seen[-1][0] == pytest.approx(0.05) and seen[-1][1] == pytest.approx(0.05)
            event = await next_event(sub, events.TOOL_PROGRESS, lambda e: True)
            assert event.data["toolName"] == "sleep" and event.data["serverName"] == "srv"


async def test_reset_timeout_on_progress_over_real_transport(tmp_path: Path, transport: str) -> None:
    """With resetTimeoutOnProgress a call longer than its timeout finishes because it reports progress."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, transport, resetTimeoutOnProgress=True) as svc:
            # 10 steps of 0.12 s against a 0.7 s timeout: the whole call outlasts the timeout by 0.5 s.
            result = await svc.call_tool("srv", "sleep", {"seconds": 1.2}, timeout=0.7)
            assert text_of(result) == "slept 1.2 s"


# ---------------------------------------------------------------------- item 4: logging


async def test_log_level_record_and_forwarding(tmp_path: Path, protocol: str, caplog: pytest.LogCaptureFixture) -> None:
    """logLevel applies (setLevel on connect, or the 2026-07-28 per-request opt-in); logs reach logging and events."""
    caplog.set_level(logging.DEBUG, logger="mcp_actors.server.srv")
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http", logLevel="warning", protocol=protocol) as svc:
            sub = svc.subscribe()
            quiet = await svc.call_tool("srv", "log", {"level": "info", "message": "hidden"})
            assert text_of(quiet) == "not logged: info is below warning"
            loud = await svc.call_tool("srv", "log", {"level": "error", "message": "boom"})
            assert text_of(loud) == "logged at error"
            event = await next_event(sub, events.SERVER_LOG, lambda e: True)
            assert event.data["level"] == "error" and event.data["data"] == "boom"
            assert any(r.name == "mcp_actors.server.srv" and r.levelno == logging.ERROR for r in caplog.records)
            await svc.set_log_level("srv", "debug")
            assert negotiated(svc, "srv") == NEGOTIATED[protocol]
            again = await svc.call_tool("srv", "log", {"level": "info", "message": "shown"})
            assert text_of(again) == "logged at info"
            event = await next_event(sub, events.SERVER_LOG, lambda e: e.data["data"] == "shown")
            assert event.data["level"] == "info"
            with pytest.raises(ValueError, match="level must be one of"):
                await svc.set_log_level("srv", "loud")


# ---------------------------------------------------------------------- item 5: tasks
# 2025-11-25 tasks (core) pin protocol legacy; at 2026-07-28 they are the tasks extension.


async def test_tasks_at_2026_run_through_the_extension(tmp_path: Path) -> None:
    """At 2026-07-28 the demo makes tasks of its task tools (the extension); as_task=False gets a plain answer."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http") as svc:
            sub = svc.subscribe()
            result = await svc.call_tool("srv", TASK_TOOL, {"topic": "actors", "seconds": 0.2})
            assert text_of(result) == "research on actors: done"
            assert negotiated(svc, "srv") == "2026-07-28"
            event = await next_event(sub, events.TASK_STATUS, lambda e: e.data["status"] == "completed")
            assert event.data["toolName"] == TASK_TOOL
            plain = await svc.call_tool("srv", "count", {"n": 2}, as_task=False)
            assert text_of(plain) == "1 2"
            with pytest.raises(ToolTaskFailed, match="count failed on purpose"):
                await svc.call_tool("srv", "count", {"n": 1, "seconds": 0.05, "fail": True}, as_task=True)


async def test_task_required_tool_runs_as_task(tmp_path: Path) -> None:
    """A tool with taskSupport required is called as a task through plain call_tool, with status events."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http", protocol="legacy") as svc:
            sub = svc.subscribe()
            result = await svc.call_tool("srv", TASK_TOOL, {"topic": "actors", "seconds": 0.2})
            assert text_of(result) == "research on actors: done"
            statuses = []
            while not statuses or statuses[-1] != "completed":
                event = await next_event(sub, events.TASK_STATUS, lambda e: True)
                statuses.append(event.data["status"])
            assert statuses[0] == "working"


async def test_optional_task_tool_as_task_and_plain(tmp_path: Path) -> None:
    """An optional-task tool runs plainly by default and as a task with as_task=True, same result."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http", protocol="legacy") as svc:
            plain = await svc.call_tool("srv", "count", {"n": 4})
            tasked = await svc.call_tool("srv", "count", {"n": 4, "seconds": 0.1}, as_task=True)
            assert text_of(plain) == text_of(tasked) == "1 2 3 4"


async def test_cancelled_task_call_cancels_the_task(tmp_path: Path) -> None:
    """A task call that times out cancels the task on the server (task:status cancelled) and raises a timeout."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http", protocol="legacy") as svc:
            sub = svc.subscribe()
            with pytest.raises(ToolCallTimeout):
                await svc.call_tool("srv", TASK_TOOL, {"topic": "slow", "seconds": 600}, timeout=1.0)
            event = await next_event(sub, events.TASK_STATUS, lambda e: e.data["status"] == "cancelled")
            assert event.data["toolName"] == TASK_TOOL


# ---------------------------------------------------------------------- item 6: structured results


async def test_structured_content_kept_validated_and_flattened(tmp_path: Path) -> None:
    """structuredContent is kept, flattened to JSON when there is no text, and a schema breach is a typed error."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http") as svc:
            result = await svc.call_tool("srv", "weather", {"city": "Oslo"})
            assert result.structured_content == {"city": "Oslo", "celsius": 21.5}
            assert flatten_result(result) == '{"city": "Oslo", "celsius": 21.5}'
            with pytest.raises(ToolOutputInvalid, match="'bad_weather' returned a result that breaks its outputSchema"):
                await svc.call_tool("srv", "bad_weather")
            # The server is still usable after the bad result.
            assert text_of(await svc.call_tool("srv", "echo", {"text": "ok"})) == "ok"


async def test_adapter_reports_progress_and_flattens_structured_results(tmp_path: Path) -> None:
    """McpToolAdapter(on_progress=) sees a tool's progress; execute() renders structured-only results as JSON."""
    from mcp_actors.adapters import McpToolAdapter

    seen: list[float] = []
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http") as svc:
            tools = {t.name: t for t in await svc.list_server_tools("srv")}
            sleeper = McpToolAdapter(tools["sleep"], svc, on_progress=lambda p, t, m: seen.append(p))
            assert await sleeper.execute({"seconds": 0.02}) == "slept 0.02 s"
            assert len(seen) == 10
            weather = McpToolAdapter(tools["weather"], svc)
            assert await weather.execute({"city": "Rome"}) == '{"city": "Rome", "celsius": 21.5}'


async def test_failed_task_is_a_typed_error(tmp_path: Path) -> None:
    """A task that ends failed on the server raises ToolTaskFailed with its id and status."""
    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http", protocol="legacy") as svc:
            with pytest.raises(ToolTaskFailed, match="ended failed") as caught:
                await svc.call_tool("srv", "count", {"n": 1, "seconds": 0.05, "fail": True}, as_task=True)
            assert caught.value.status == "failed" and caught.value.task_id
            assert caught.value.tool == "count"


async def test_raising_progress_callback_does_not_break_the_call(tmp_path: Path) -> None:
    """A host's on_progress that raises costs only that notification: the call still returns its result."""

    def broken(progress: float, total: float | None, message: str | None) -> None:
        raise RuntimeError("host bug")

    with trio.fail_after(BOUND):
        async with demo_service(tmp_path, "http") as svc:
            sub = svc.subscribe()
            result = await svc.call_tool("srv", "sleep", {"seconds": 0.02}, on_progress=broken)
            assert text_of(result) == "slept 0.02 s"
            event = await next_event(sub, events.TOOL_PROGRESS, lambda e: True)
            assert event.data["toolName"] == "sleep"
