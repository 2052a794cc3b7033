"""The Anthropic SDK's tool runner calling supervised MCP tools: the real runner, a scripted Messages API.

The SDK has no test model, so the Messages API is served here, on loopback, by a tiny
standard-library HTTP server that answers from a script: first the ``tool_use`` blocks a
test asks for, then a final text that echoes the ``tool_result`` blocks it received. The
runner (``client.beta.messages.tool_runner``) is the SDK's own, pointed at it with
``base_url``; the servers are the demo server (in memory, or a real process where only a
process shows it) behind a real portal.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp.types as mcp_types
import psutil
import pytest
import trio
from testkit import is_infrastructure, runtime_at

from mcp_actors.errors import ToolCallDenied
from mcp_actors.portal import RuntimePortal, start_portal
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import demo_server_command, fault_server_command, live_descendants
from mcp_actors.testing.memory import InMemoryServers

# The framework, and our adapter of it (which imports it), are imported by the tests that use them: every
# pytest-xdist worker imports this file to collect it, and importing the framework costs seconds.
if TYPE_CHECKING:
    from anthropic.lib.tools import ToolError

    from mcp_actors.integrations.anthropic import McpAsyncFunctionTool


BOUND = 60.0
"""Generous: a server's first start on a loaded machine."""

LONG_CALL = 10.0
"""Seconds of ``sleep`` a long call asks for; its first progress comes after a tenth of it."""

FAST = 5.0
"""What "ends fast" means here: well before the rest of a long call (9 s after its first progress)."""


# ---------------------------------------------------------------------- the scripted Messages API


class ScriptedMessagesApi:
    """``POST /v1/messages`` on loopback: the scripted replies in turn, then a text echoing the tool results.

    Attributes:
        url: The ``base_url`` to give the client.
        requests: The JSON body of every request received, in order.
        turns: The ``tool_use`` blocks of each reply before the final one.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.turns: list[list[dict[str, Any]]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                api.requests.append(body)
                reply = json.dumps(api.reply(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-messages-api", daemon=True)
        self._thread.start()

    def start(self, *turns: list[dict[str, Any]]) -> None:
        """Begin a new conversation: forget the requests, answer ``turns`` first."""
        self.requests.clear()
        self.turns = list(turns)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = len(self.requests) - 1
        if turn < len(self.turns):
            content, stop = self.turns[turn], "tool_use"
        else:
            content, stop = [{"type": "text", "text": json.dumps(self.last_tool_results(body))}], "end_turn"
        return {
            "id": f"msg_{turn}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    @staticmethod
    def last_tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
        content = body["messages"][-1]["content"]
        return [block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"]

    def results(self) -> dict[str, dict[str, Any]]:
        """The tool results of the last request, by ``tool_use_id``."""
        return {block["tool_use_id"]: block for block in self.last_tool_results(self.requests[-1])}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def tool_use(name: str, input: dict[str, Any], use_id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": input}


def only_text(block: dict[str, Any]) -> str:
    """The text of a tool result whose content is text blocks (or a string)."""
    content = block["content"]
    if isinstance(content, str):
        return content
    assert all(item["type"] == "text" for item in content), content
    return "".join(item["text"] for item in content)


async def run_agent(api: ScriptedMessagesApi, tools: list[Any], *turns: list[dict[str, Any]]) -> str:
    """Run the SDK's async tool runner to the end against ``api`` (a new conversation); the final text."""
    import anthropic

    api.start(*turns)
    client = anthropic.AsyncAnthropic(base_url=api.url, api_key="test", max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-scripted", max_tokens=256, tools=tools, messages=[{"role": "user", "content": "go"}]
    )
    final = await runner.until_done()
    block = final.content[0]
    assert block.type == "text"
    return block.text


@pytest.fixture
def api() -> Iterator[ScriptedMessagesApi]:
    served = ScriptedMessagesApi()
    yield served
    served.close()


@pytest.fixture
def portal(tmp_path: Path, servers_in_memory: InMemoryServers) -> Iterator[RuntimePortal]:
    """A portal on a fresh config: ``demo`` (trusted) and ``guarded`` (the demo server again, untrusted,
    ``big`` disabled), both served in memory; no process left after."""
    with start_portal(str(tmp_path / "cfg.json")) as running:
        argv = demo_server_command()
        running.sync_service().add(
            {
                "name": "guarded",
                "type": "stdio",
                "config": {"command": argv[0], "args": argv[1:]},
                "isTrusted": False,
                "disabledTools": ["big"],
            }
        )
        yield running
    assert live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline()))) == []


# ---------------------------------------------------------------------- an agent run


def test_the_runner_calls_an_mcp_tool_and_the_model_sees_its_output(
    portal: RuntimePortal, api: ScriptedMessagesApi
) -> None:
    """The model's ``tool_use`` of ``mcp__demo__echo`` runs on the server; its real output is the ``tool_result``."""
    from anthropic.lib.tools import BetaAsyncFunctionTool

    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()

    async def main() -> tuple[list[McpAsyncFunctionTool], str, list[Any]]:
        tools = await asyncio.wait_for(async_tools(service, ["demo"]), BOUND)
        listings = service.tool_list_requests
        text = await asyncio.wait_for(
            run_agent(api, tools, [tool_use("mcp__demo__echo", {"text": "hello from the server"})]), BOUND
        )
        assert service.tool_list_requests == listings  # a call lists nothing
        return tools, text, await service.list_server_tools("demo")

    tools, final, listed = asyncio.run(main())
    assert all(isinstance(tool, BetaAsyncFunctionTool) for tool in tools)
    result = api.results()["toolu_1"]
    assert result["content"] == [{"type": "text", "text": "hello from the server"}]
    assert "is_error" not in result
    assert "hello from the server" in final  # the model's last turn saw the tool result
    # The definitions sent: every tool of the server, its schema unchanged.
    sent = {tool["name"]: tool for tool in api.requests[0]["tools"]}
    assert set(sent) == {tool.id for tool in listed}
    echo = next(tool for tool in listed if tool.name == "echo")
    assert sent["mcp__demo__echo"] == {
        "name": "mcp__demo__echo",
        "description": echo.description,
        "input_schema": echo.input_schema,
    }
    assert next(t for t in tools if t.name == "mcp__demo__echo").input_schema is echo.input_schema


def test_results_become_content_blocks_as_the_sdk_helper_makes_them(
    portal: RuntimePortal, api: ScriptedMessagesApi
) -> None:
    """Images and resources become the SDK helper's blocks; audio and links become text; structured output JSON."""
    from anthropic.lib.tools.mcp import mcp_content

    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()

    async def main() -> mcp_types.CallToolResult:
        tools = await async_tools(service, ["demo"], tools=["image", "audio", "resource", "resource_link", "add"])
        turn = [
            tool_use("mcp__demo__image", {}, "image"),
            tool_use("mcp__demo__audio", {}, "audio"),
            tool_use("mcp__demo__resource", {}, "resource"),
            tool_use("mcp__demo__resource_link", {}, "link"),
            tool_use("mcp__demo__add", {"a": 2, "b": 3}, "add"),
        ]
        await asyncio.wait_for(run_agent(api, tools, turn), BOUND)
        return await service.call_tool("demo", "image")

    raw_image = asyncio.run(main())
    results = api.results()
    assert not any(result.get("is_error") for result in results.values())
    assert results["image"]["content"] == [dict(mcp_content(raw_image.content[0]))]
    assert results["image"]["content"][0]["source"]["media_type"] == "image/png"
    assert results["audio"]["content"] == [{"type": "text", "text": "[Audio: audio/wav]"}]
    text_doc, pixel = results["resource"]["content"]
    assert text_doc["type"] == "document" and text_doc["source"]["type"] == "text"
    assert pixel["type"] == "image"
    assert only_text(results["link"]) == "[Resource link: demo://readme]"
    assert only_text(results["add"]) == "5.0"


def test_tool_result_maps_structured_content_and_empty_errors() -> None:
    """Structured content alone is its JSON; an error without content still says so; an error raises ToolError."""
    from anthropic.lib.tools import ToolError

    from mcp_actors.integrations.anthropic import tool_result

    structured = mcp_types.CallToolResult(content=[], structured_content={"sum": 5})
    assert json.loads(str(tool_result(structured))) == {"sum": 5}
    with pytest.raises(ToolError) as empty:
        tool_result(mcp_types.CallToolResult(content=[], is_error=True))
    assert empty.value.content == "Error: the tool reported an error without a message"
    with pytest.raises(ToolError) as failed:
        tool_result(mcp_types.CallToolResult(content=[mcp_types.TextContent(text="no such file")], is_error=True))
    assert failed.value.content == [{"type": "text", "text": "no such file"}]


def test_a_tool_level_error_is_an_is_error_result_with_the_tools_own_text(
    portal: RuntimePortal, api: ScriptedMessagesApi
) -> None:
    """``isError: true`` from the server reaches the model as ``is_error`` with the tool's own message."""
    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()

    async def main() -> str:
        tools = await async_tools(service, ["demo"], tools=["fail"])
        return await asyncio.wait_for(
            run_agent(api, tools, [tool_use("mcp__demo__fail", {"message": "disk full"})]), BOUND
        )

    final = asyncio.run(main())
    result = api.results()["toolu_1"]
    assert result["is_error"] is True
    assert result["content"] == [{"type": "text", "text": "disk full"}]
    assert "disk full" in final


def test_a_call_over_its_timeout_is_an_is_error_result_naming_tool_and_server(
    portal: RuntimePortal, api: ScriptedMessagesApi
) -> None:
    """A call past the toolset's timeout reaches the model as one sentence naming the tool, the server and the bound."""
    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()

    async def main() -> None:
        tools = await async_tools(service, ["demo"], tools=["sleep"], timeout=0.5)
        await asyncio.wait_for(run_agent(api, tools, [tool_use("mcp__demo__sleep", {"seconds": LONG_CALL})]), BOUND)

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < FAST
    result = api.results()["toolu_1"]
    assert result["is_error"] is True
    text = only_text(result)
    assert text.startswith("Error: tool 'mcp__demo__sleep' (tool 'sleep' of server 'demo') did not finish within 0.5s")
    assert "Timeout" not in text  # a sentence for the model, not a Python repr


# ---------------------------------------------------------------------- the supervisor's promises


def test_the_approver_is_asked_and_its_no_reaches_the_model_naming_tool_and_server(
    portal: RuntimePortal, api: ScriptedMessagesApi
) -> None:
    """Calls of an untrusted server go to the approver: a yes runs the tool, a no is an ``is_error`` result."""
    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()
    asked: list[tuple[str, str, dict[str, Any]]] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append((request.server_name, request.tool_name, dict(request.arguments)))
        return request.tool_name == "echo"

    async def main() -> None:
        service.set_approver(approver)
        tools = await async_tools(service, ["guarded"], tools=["echo", "add"])
        turn = [
            tool_use("mcp__guarded__echo", {"text": "allowed"}, "echo"),
            tool_use("mcp__guarded__add", {"a": 1, "b": 2}, "add"),
        ]
        await asyncio.wait_for(run_agent(api, tools, turn), BOUND)

    asyncio.run(main())
    assert asked == [("guarded", "echo", {"text": "allowed"}), ("guarded", "add", {"a": 1, "b": 2})]
    results = api.results()
    assert only_text(results["echo"]) == "allowed"
    assert results["add"]["is_error"] is True
    assert only_text(results["add"]) == (
        "Error: tool 'mcp__guarded__add': the call to 'add' of server 'guarded' was not approved"
    )


def test_the_typed_failure_is_kept_as_the_tool_errors_cause(portal: RuntimePortal) -> None:
    """Called directly, a denied call raises ``ToolError`` carrying the typed ``ToolCallDenied`` as its cause."""
    from anthropic.lib.tools import ToolError

    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()

    async def main() -> ToolError:
        service.set_approver(lambda request: False)
        [add] = await async_tools(service, ["guarded"], tools=["add"])
        with pytest.raises(ToolError) as denied:
            await add.call({"a": 1, "b": 2})
        return denied.value

    error = asyncio.run(main())
    assert isinstance(error.__cause__, ToolCallDenied)
    assert error.__cause__.server == "guarded" and error.__cause__.tool == "add"


def test_selection_naming_and_disabled_tools(portal: RuntimePortal) -> None:
    """``servers``, ``tools`` and ``naming`` choose what the model sees; disabled tools never show; failures kept."""
    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()

    async def main() -> dict[str, list[str]]:
        by_tool = await async_tools(service, ["demo"], tools=["echo", "mcp__demo__add"], naming="tool")
        by_function = await async_tools(
            service,
            ["guarded"],
            tools=lambda t: t.name in {"echo", "big"},
            naming=lambda t: f"{t.server_name}_{t.name}".upper(),
        )
        by_id = await async_tools(service, ["guarded", "nowhere"])
        assert set(by_id.failures) == {"nowhere"}
        with pytest.raises(ValueError, match=r"'mcp__demo__echo' and 'mcp__guarded__echo'"):
            await async_tools(service, naming="tool")
        return {
            "tool": [t.name for t in by_tool],
            "function": [t.name for t in by_function],
            "id": [t.name for t in by_id],
        }

    names = asyncio.run(main())
    assert names["tool"] == ["echo", "add"]
    assert names["function"] == ["GUARDED_ECHO"]  # "big" is selected but disabled on "guarded"
    assert "mcp__guarded__echo" in names["id"]
    assert not any(name.endswith("__big") for name in names["id"])  # disabledTools: ["big"]


def test_cancelling_the_runners_task_cancels_the_call(portal: RuntimePortal, api: ScriptedMessagesApi) -> None:
    """Progress reaches the host's coroutine on its loop, named; cancelling the runner's task ends the call at once."""
    from mcp_actors.integrations.anthropic import async_tools

    service = portal.asyncio_service()

    async def main() -> tuple[list[tuple[str, float, int]], float, dict[str, Any]]:
        running = asyncio.Event()
        progress: list[tuple[str, float, int]] = []

        async def on_progress(tool: str, value: float, total: float | None, message: str | None) -> None:
            progress.append((tool, value, threading.get_ident()))
            running.set()

        tools = await async_tools(service, ["demo"], tools=["sleep"], on_progress=on_progress)
        async with service.subscribe() as events:
            turn = [tool_use("mcp__demo__sleep", {"seconds": LONG_CALL})]
            task = asyncio.create_task(run_agent(api, tools, turn))
            await asyncio.wait_for(running.wait(), BOUND)
            cancelled_at = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            async with asyncio.timeout(BOUND):
                async for event in events:
                    if event.type == "tool:called":
                        break
            ended = time.monotonic() - cancelled_at
        return progress, ended, dict(event.data)

    progress, ended, called = asyncio.run(main())
    first_tool, first_value, _ = progress[0]
    assert first_tool == "mcp__demo__sleep" and first_value == pytest.approx(LONG_CALL / 10)
    assert {ident for _, _, ident in progress} == {threading.get_ident()}  # on the runner's loop
    assert ended < FAST  # the long call ended when its caller went away
    assert called["toolName"] == "sleep" and called["success"] is False
    assert portal.sync_service().status("demo").calls_in_flight == 0
    assert len(api.requests) == 1  # the runner never got to send a tool result


def test_a_server_killed_mid_call_fails_fast_naming_it_and_the_next_call_works(
    tmp_path: Path, api: ScriptedMessagesApi
) -> None:
    """A real server process killed during a call: an ``is_error`` result at once naming server and tool; the
    next call runs on the restarted server; closing the portal leaves no process behind."""
    from mcp_actors.integrations.anthropic import async_tools

    argv = fault_server_command()
    with start_portal(str(tmp_path / "cfg.json")) as portal:
        service = portal.asyncio_service()

        async def main() -> tuple[float, str, str]:
            await service.add({"name": "faulty", "type": "stdio", "config": {"command": argv[0], "args": argv[1:]}})
            running = asyncio.Event()
            tools = await async_tools(
                service, ["faulty"], tools=["sleep", "echo"], on_progress=lambda *_: running.set()
            )
            turn = [tool_use("mcp__faulty__sleep", {"seconds": LONG_CALL})]
            task = asyncio.create_task(run_agent(api, tools, turn))
            await asyncio.wait_for(running.wait(), BOUND)
            pid = service.status("faulty").pid
            assert pid is not None
            killed_at = time.monotonic()
            psutil.Process(pid).kill()
            await asyncio.wait_for(task, BOUND)
            failed_after = time.monotonic() - killed_at
            died = api.results()["toolu_1"]
            assert died["is_error"] is True
            assert len(api.requests) == 2
            again = await asyncio.wait_for(
                run_agent(api, tools, [tool_use("mcp__faulty__echo", {"text": "back again"})]), BOUND
            )
            return failed_after, only_text(died), again

        failed_after, died, again = asyncio.run(main())
        assert failed_after < FAST
        assert died.startswith("Error: tool 'mcp__faulty__sleep': ")
        assert "server 'faulty': connection lost" in died
        assert only_text(api.results()["toolu_1"]) == "back again" and "back again" in again
    assert live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline()))) == []


# ---------------------------------------------------------------------- the sync runner, and trio


def test_the_sync_runner_with_sync_tools(portal: RuntimePortal, api: ScriptedMessagesApi) -> None:
    """``sync_tools`` over the blocking facade: the SDK's sync runner calls them on its thread; progress and
    failures map as on asyncio."""
    import anthropic
    from anthropic.lib.tools import BetaFunctionTool

    from mcp_actors.integrations.anthropic import McpFunctionTool, sync_tools

    service = portal.sync_service()
    service.set_approver(lambda request: request.tool_name != "add")
    progress: list[tuple[str, float, float | None]] = []

    def on_progress(tool: str, value: float, total: float | None, message: str | None) -> None:
        progress.append((tool, value, total))

    chosen = ["echo", "sleep", "mcp__guarded__add"]
    tools = sync_tools(service, ["demo", "guarded"], tools=chosen, on_progress=on_progress)
    assert all(isinstance(tool, McpFunctionTool) and isinstance(tool, BetaFunctionTool) for tool in tools)
    api.start(
        [
            tool_use("mcp__demo__echo", {"text": "from a thread"}, "echo"),
            tool_use("mcp__demo__sleep", {"seconds": 0.05}, "sleep"),
            tool_use("mcp__guarded__add", {"a": 1, "b": 1}, "add"),
        ]
    )
    client = anthropic.Anthropic(base_url=api.url, api_key="test", max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-scripted", max_tokens=256, tools=tools, messages=[{"role": "user", "content": "go"}]
    )
    final = runner.until_done()
    results = api.results()
    assert only_text(results["echo"]) == "from a thread"
    assert only_text(results["sleep"]) == "slept 0.05 s"
    last_tool, last_value, last_total = progress[-1]  # reported before the result came back
    assert last_tool == "mcp__demo__sleep" and last_value == pytest.approx(0.05) and last_total == 0.05
    assert results["add"]["is_error"] is True
    assert "of server 'guarded' was not approved" in only_text(results["add"])
    assert final.content[0].type == "text" and "from a thread" in final.content[0].text
    with pytest.raises(TypeError, match=r"portal\.sync_service\(\)"):
        sync_tools(portal.asyncio_service())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="servers must be a collection"):
        sync_tools(service, "demo")


async def test_the_runner_on_trio_with_the_runtimes_service(
    tmp_path: Path, servers_in_memory: InMemoryServers, api: ScriptedMessagesApi
) -> None:
    """On trio (the SDK's async client runs there too) the tools take the runtime's ``McpService`` directly."""
    from mcp_actors.integrations.anthropic import async_tools

    async with runtime_at(tmp_path) as rt:
        tools = await async_tools(rt.service, ["demo"], tools=["echo"])
        with trio.fail_after(BOUND):
            final = await run_agent(api, tools, [tool_use("mcp__demo__echo", {"text": "on trio"})])
    assert only_text(api.results()["toolu_1"]) == "on trio"
    assert "on trio" in final
