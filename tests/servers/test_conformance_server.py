"""The conformance fixture server answers its fixtures through our client, at both protocol families.

The suite's server scenarios (``tests/conformance/run.py server --fixture``) need Node; these
tests need none. The server runs in this process (:func:`open_conformance_server`, uvicorn in a
thread) and our runtime reaches it over loopback with an ``http`` record, with the handshake
(``legacy``: 2025-11-25) and with ``server/discover`` (``auto``: 2026-07-28).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
import trio

from mcp_actors import events
from mcp_actors.errors import ServerRequestFailed, ToolCallFailed, ToolCallTimeout, ToolTaskFailed
from mcp_actors.runtime import open_runtime
from mcp_actors.service import McpService
from mcp_actors.testing._conformance_tasks import _Task
from mcp_actors.testing.conformance_server import (
    CONFORMANCE_SERVER_NAME,
    SKILL_URI,
    TEST_IMAGE_BASE64,
    create_conformance_server,
    open_conformance_server,
)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

NEGOTIATED = {"legacy": "2025-11-25", "auto": "2026-07-28"}


@pytest.fixture(params=sorted(NEGOTIATED))
def protocol(request: pytest.FixtureRequest) -> str:
    """config.protocol: the handshake (legacy) or server/discover (auto)."""
    value: str = request.param
    return value


@asynccontextmanager
async def fixture_service(tmp_path: Path, protocol: str, **handlers: Any) -> AsyncIterator[McpService]:
    """A runtime with the in-process fixture server named 'fx' at ``protocol``."""
    async with (
        open_conformance_server() as url,
        open_runtime(tmp_path / "cfg.json", connect_on_add=False, sweep_ledger=False, **handlers) as rt,
    ):
        await rt.service.add(
            {"name": "fx", "type": "http", "config": {"url": url, "pingInterval": 0, "protocol": protocol}}
        )
        yield rt.service


def drain(sub: events.Subscription) -> list[events.Event]:
    """Every event already buffered in ``sub``, without waiting."""
    out = []
    while True:
        try:
            out.append(sub.receive_nowait())
        except trio.WouldBlock:
            return out


def texts(result: mcp_types.CallToolResult) -> list[str]:
    return [item.text for item in result.content if isinstance(item, mcp_types.TextContent)]


async def test_tools_answer_each_kind_of_content(tmp_path: Path, protocol: str) -> None:
    """Text, image, audio, embedded resource and mixed content arrive as the suite expects; an error is is_error."""
    with trio.fail_after(30):
        async with fixture_service(tmp_path, protocol) as svc:
            assert texts(await svc.call_tool("fx", "test_simple_text")) == [
                "This is a simple text response for testing."
            ]
            image = (await svc.call_tool("fx", "test_image_content")).content[0]
            assert isinstance(image, mcp_types.ImageContent)
            assert (image.mime_type, image.data) == ("image/png", TEST_IMAGE_BASE64)
            audio = (await svc.call_tool("fx", "test_audio_content")).content[0]
            assert isinstance(audio, mcp_types.AudioContent) and audio.mime_type == "audio/wav"
            embedded = (await svc.call_tool("fx", "test_embedded_resource")).content[0]
            assert isinstance(embedded, mcp_types.EmbeddedResource)
            assert str(embedded.resource.uri) == "test://embedded-resource"
            mixed = await svc.call_tool("fx", "test_multiple_content_types")
            assert [item.type for item in mixed.content] == ["text", "image", "resource"]
            failed = await svc.call_tool("fx", "test_error_handling")
            assert failed.is_error and "This tool intentionally returns an error for testing" in texts(failed)[0]


async def test_progress_is_reported_during_the_call(tmp_path: Path, protocol: str) -> None:
    """test_tool_with_progress reports 0, 50 and 100 of 100 to the caller's progress callback."""
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    with trio.fail_after(30):
        async with fixture_service(tmp_path, protocol) as svc:
            await svc.call_tool("fx", "test_tool_with_progress", on_progress=on_progress)
    assert seen == [(0, 100), (50, 100), (100, 100)]


async def test_resources_templates_prompts_and_completion(tmp_path: Path, protocol: str) -> None:
    """The fixed resources, the template, the skill's manifest, the prompts and the completion answer as fixed."""
    with trio.fail_after(30):
        async with fixture_service(tmp_path, protocol) as svc:
            uris = {str(r.uri) for r in await svc.list_resources("fx")}
            assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= uris
            text = (await svc.read_resource("fx", "test://static-text")).contents[0]
            assert isinstance(text, mcp_types.TextResourceContents)
            assert text.text == "This is the content of the static text resource."
            blob = (await svc.read_resource("fx", "test://static-binary")).contents[0]
            assert isinstance(blob, mcp_types.BlobResourceContents)
            assert base64.b64decode(blob.blob) == base64.b64decode(TEST_IMAGE_BASE64)
            data = (await svc.read_resource("fx", "test://template/123/data")).contents[0]
            assert isinstance(data, mcp_types.TextResourceContents) and data.mime_type == "application/json"
            assert json.loads(data.text) == {"id": "123", "templateTest": True, "data": "Data for ID: 123"}
            prompt = await svc.get_prompt("fx", "test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"})
            content = prompt.messages[0].content
            assert isinstance(content, mcp_types.TextContent)
            assert content.text == "Prompt with arguments: arg1='hello', arg2='world'"
            completion = await svc.complete(
                "fx", {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, ("arg1", "par")
            )
            assert completion.values == ["paris", "park", "party"]
            with pytest.raises(ServerRequestFailed):
                await svc.read_resource("fx", "test://nonexistent-resource")
            skill = (await svc.read_resource("fx", SKILL_URI)).contents[0]
            assert isinstance(skill, mcp_types.TextResourceContents) and skill.mime_type == "text/markdown"
            assert skill.text.startswith("---\nname: conformance-fixture\n")


async def test_elicitation_and_sampling_reach_the_host(tmp_path: Path, protocol: str) -> None:
    """The callback tools ask the host: a request during the call (legacy), an InputRequiredResult (auto)."""

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        assert isinstance(params, mcp_types.ElicitRequestFormParams)
        if "name" in params.requested_schema["properties"]:
            return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})
        return mcp_types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async def sample(server_id: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(type="text", text="Paris"), model="host"
        )

    with trio.fail_after(30):
        async with fixture_service(tmp_path, protocol, elicitation_handler=elicit, sampling_handler=sample) as svc:
            if protocol == "legacy":
                asked = await svc.call_tool("fx", "test_elicitation", {"message": "who?"})
                assert texts(asked) == [
                    'User response: action=accept, content={"username":"ada","email":"ada@example.com"}'
                ]
                sampled = await svc.call_tool("fx", "test_sampling", {"prompt": "capital?"})
                assert texts(sampled) == ["LLM response: Paris"]
            else:
                asked = await svc.call_tool("fx", "test_input_required_result_elicitation")
                assert texts(asked) == ["Hello, Ada!"]
                sampled = await svc.call_tool("fx", "test_input_required_result_sampling")
                assert texts(sampled) == ["Model said: Paris"]
                # server-stateless's diagnostic tool: the input is asked on the call's own answer.
                streamed = await svc.call_tool("fx", "test_streaming_elicitation")
                assert texts(streamed) == ["Hello, Ada!"]


async def test_the_logging_diagnostic_tool_answers(tmp_path: Path, protocol: str) -> None:
    """server-stateless calls test_logging_tool to see that no log is sent unless the request asks for a level."""
    with trio.fail_after(30):
        async with fixture_service(tmp_path, protocol) as svc:
            assert texts(await svc.call_tool("fx", "test_logging_tool")) == ["Logging tool executed"]


async def test_task_tools_run_plainly_when_a_call_declines_tasks(tmp_path: Path) -> None:
    """At 2026-07-28 a call with as_task=False (no extension declared) is plain; a required task tool is -32021."""
    with trio.fail_after(30):
        async with fixture_service(tmp_path, "auto") as svc:
            assert texts(await svc.call_tool("fx", "greet", {"name": "trio"})) == ["Hello, trio!"]
            done = await svc.call_tool("fx", "slow_compute", {"seconds": 0, "label": "now"}, as_task=False)
            assert texts(done) == ["computed now in 0 s"]
            with pytest.raises(ToolCallFailed) as refused:
                await svc.call_tool("fx", "failing_job", as_task=False)
    assert "io.modelcontextprotocol/tasks" in str(refused.value)
    assert f"code {mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY}" in str(refused.value)


async def test_our_client_drives_the_fixtures_tasks_over_http(tmp_path: Path) -> None:
    """The fixture's tasks extension, written apart from ours, run to their ends by call_tool over streamable HTTP.

    Its tasks/* refuse an Mcp-Name that is not the task id (-32020): every one here passes.
    """

    async def elicit(server_id: str, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        if "name" in params.message.lower():
            return mcp_types.ElicitResult(action="accept", content={"name": "Ada", "user_name": "Ada"})
        return mcp_types.ElicitResult(action="accept", content={"confirm": True, "ok": True})

    with trio.fail_after(60):
        async with fixture_service(tmp_path, "auto", elicitation_handler=elicit) as svc:
            sub = svc.subscribe()
            done = await svc.call_tool("fx", "slow_compute", {"seconds": 0.3, "label": "x"})
            assert texts(done) == ["computed x in 0.3 s"]
            statuses = [e.data["status"] for e in drain(sub) if e.type == "task:status"]
            assert statuses[0] == "working" and statuses[-1] == "completed"
            failing = await svc.call_tool("fx", "failing_job")  # a tool-level error: a result
            assert failing.is_error and texts(failing) == ["failing_job failed on purpose"]
            with pytest.raises(ToolTaskFailed, match="protocol_error_job crashed on purpose") as crashed:
                await svc.call_tool("fx", "protocol_error_job")
            assert crashed.value.status == "failed"
            confirmed = await svc.call_tool("fx", "confirm_delete", {"filename": "a.txt"})
            assert texts(confirmed) == ["deleted a.txt"]
            both = await svc.call_tool("fx", "multi_input")
            assert texts(both) == ["both inputs received (first: Ada)"]
            greeted = await svc.call_tool("fx", "test_tool_with_task")  # input first, then a task
            assert any("Ada" in text for text in texts(greeted)), texts(greeted)
            with pytest.raises(ToolCallTimeout):
                await svc.call_tool("fx", "slow_compute", {"seconds": 600}, timeout=0.5)
            cancelled = [e for e in drain(sub) if e.type == "task:status" and e.data["status"] == "cancelled"]
            assert cancelled  # tasks/cancel was acknowledged


def test_every_call_builds_a_server_of_its_own() -> None:
    """Servers embedded in tests share no state: each call makes a fresh server with the same fixtures."""
    first, second = create_conformance_server(), create_conformance_server()
    assert first is not second
    assert first.name == second.name == CONFORMANCE_SERVER_NAME


def test_a_task_works_until_due_then_completes_and_a_cancel_after_the_end_changes_nothing() -> None:
    """A timed task is working, then completed with its result inlined; cancelling an ended task is a no-op."""
    now = time.monotonic()
    task = _Task(task_id="t", created=time.time(), due=now + 60, outcome={"content": []})
    assert task.detailed()["status"] == "working" and "result" not in task.detailed()
    task.due = now - 1
    assert task.detailed()["result"] == {"content": []}
    task.cancel()
    assert task.status() == "completed"
    running = _Task(task_id="r", created=time.time(), due=now + 60)
    running.cancel()
    assert running.status() == "cancelled"


def test_a_task_waits_for_every_input_and_drops_each_answered_request() -> None:
    """Input requests answered one at a time leave the others pending; the last answer finishes the task."""
    task = _Task(
        task_id="t",
        created=time.time(),
        due=None,
        pending={"a": {"method": "elicitation/create"}, "b": {"method": "elicitation/create"}},
        finish=lambda answers: {"content": [{"type": "text", "text": ",".join(sorted(answers))}]},
    )
    task.answer({"a": {"action": "accept", "content": {}}, "unknown": {}})
    assert task.detailed()["status"] == "input_required"
    assert list(task.detailed()["inputRequests"]) == ["b"]
    task.answer({"b": {"action": "decline"}})
    assert task.detailed()["result"] == {"content": [{"type": "text", "text": "a,b"}]}
