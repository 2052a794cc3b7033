"""The supervised servers as a pydantic-ai toolset, under a real ``Agent`` with pydantic-ai's scripted models.

Most tests run the demo server in memory (``servers_in_memory``: no process, a portal
starts in milliseconds), each on a portal of its own; the tests of what only a process
shows — the real demo server, a server killed mid-call, a call cancelled on the server,
nothing left running — start real processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest
from testkit import is_infrastructure

from mcp_actors.portal import AsyncioMcpService, RuntimePortal, start_portal
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import fault_server_command, live_descendants
from mcp_actors.testing.memory import InMemoryServers

# The framework, and our adapter of it (which imports it), are imported by the tests that use them: every
# pytest-xdist worker imports this file to collect it, and importing the framework costs seconds.
if TYPE_CHECKING:
    from pydantic_ai import ModelRetry
    from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelResponse, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCalls
    from pydantic_ai.tools import RunContext

    from mcp_actors.integrations.pydantic_ai import McpToolProgress

    Script = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


BOUND = 60.0
"""Generous: a server's first start on a loaded machine."""


@pytest.fixture
def memory_portal(servers_in_memory: InMemoryServers, tmp_path: Path) -> Iterator[RuntimePortal]:
    """A portal on a fresh config whose demo server runs in memory."""
    with start_portal(str(tmp_path / "cfg.json")) as running:
        yield running


def no_servers_left() -> list[psutil.Process]:
    """Our descendants that are not test infrastructure (the reaper sidecar)."""
    return live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline())))


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The tool results the model was sent in the last request."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return [part for part in last.parts if isinstance(part, ToolReturnPart)]


def calls_then_report(*calls: ToolCallPart) -> Script:
    """A model that makes ``calls`` at once, then answers with what it was sent back (``name=outcome:content``)."""
    from pydantic_ai.messages import ModelResponse, TextPart

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=list(calls))
        seen = [f"{part.tool_name}={part.outcome}:{part.content}" for part in returns(messages)]
        return ModelResponse(parts=[TextPart("\n".join(seen))])

    return script


def run(main: Callable[[], Any]) -> Any:
    """Run an async test body on asyncio, where pydantic-ai runs, bounded."""

    async def bounded() -> Any:
        return await asyncio.wait_for(main(), BOUND)

    return asyncio.run(bounded())


async def add_fault_server(service: AsyncioMcpService, *flags: str) -> None:
    """Add the fault server (a real, fast-starting process) as ``faulty`` and connect it."""
    argv = fault_server_command(*flags)
    record = {"name": "faulty", "type": "stdio", "config": {"command": argv[0], "args": argv[1:]}, "isTrusted": True}
    await service.add(record)
    await service.connect("faulty")


async def wait_stderr(service: AsyncioMcpService, server: str, text: str) -> str:
    """The first stderr line of the server's process containing ``text`` (waits for it)."""
    return await service.run_in_runtime(lambda s: s.wait_for_stderr(server, lambda line: text in line))


# ---------------------------------------------------------------------- real processes


def test_an_agent_calls_the_real_demo_server_and_nothing_is_left_running(tmp_path: Path) -> None:
    """A FunctionModel run calls the demo server's echo (a process) and answers with its output; closing ends it."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    model = FunctionModel(
        calls_then_report(ToolCallPart("mcp__demo__echo", {"text": "hello from pydantic-ai"}, tool_call_id="c1"))
    )
    with start_portal(str(tmp_path / "cfg.json")) as portal:
        service = portal.asyncio_service()

        async def main() -> str:
            agent = Agent(model, toolsets=[McpActorsToolset(service)])
            async with agent:
                result = await agent.run("say hello")
            assert service.status("demo").pid is not None  # a real process served the call
            return result.output

        assert run(main) == "mcp__demo__echo=success:hello from pydantic-ai"
    assert no_servers_left() == []


def test_a_server_killed_mid_call_fails_that_call_fast_and_the_next_call_works(tmp_path: Path) -> None:
    """Killing the server during a call: the model gets a retry naming server and tool at once; echo then works."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    seen: list[ToolReturnPart] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("mcp__faulty__sleep", {"seconds": 1})])
        seen.extend(returns(messages))
        if len(messages) == 3:
            return ModelResponse(parts=[ToolCallPart("mcp__faulty__echo", {"text": "after the restart"})])
        return ModelResponse(parts=[TextPart(str(seen[-1].content))])

    with start_portal(str(tmp_path / "cfg.json")) as portal:
        service = portal.asyncio_service()

        async def main() -> tuple[str, float]:
            await add_fault_server(service, "--hang-tool", "sleep")
            agent = Agent(FunctionModel(script), toolsets=[McpActorsToolset(service, ["faulty"])])
            running = asyncio.create_task(agent.run("go"))
            await wait_stderr(service, "faulty", "hanging call")
            pid = service.status("faulty").pid
            assert pid is not None
            killed_at = time.monotonic()
            psutil.Process(pid).kill()
            result = await running
            return result.output, time.monotonic() - killed_at

        output, elapsed = run(main)
    lost, echoed = seen
    assert lost.outcome == "retried" and lost.tool_name == "mcp__faulty__sleep"
    assert isinstance(lost.content, str)
    assert "tool 'mcp__faulty__sleep'" in lost.content and "server 'faulty'" in lost.content
    assert "connection lost" in lost.content and "SIGKILL" in lost.content
    assert echoed.outcome == "success" and output == "after the restart"
    assert elapsed < 30  # the hung call failed when the process died, not at its 120 s bound
    assert no_servers_left() == []


def test_cancelling_the_agent_run_cancels_the_call_on_the_server(tmp_path: Path) -> None:
    """Cancelling agent.run during a hung call ends the run cancelled; the server gets notifications/cancelled."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    model = FunctionModel(calls_then_report(ToolCallPart("mcp__faulty__sleep", {"seconds": 1})))
    with start_portal(str(tmp_path / "cfg.json")) as portal:
        service = portal.asyncio_service()

        async def main() -> str:
            await add_fault_server(service, "--hang-tool", "sleep")
            agent = Agent(model, toolsets=[McpActorsToolset(service, ["faulty"])])
            running = asyncio.create_task(agent.run("go"))
            hung = await wait_stderr(service, "faulty", "hanging call")
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            request = hung.rsplit(" ", 1)[1]
            return await wait_stderr(service, "faulty", f"cancelled {request}")

        assert run(main).startswith("fault: cancelled")
    assert no_servers_left() == []


# ---------------------------------------------------------------------- in memory: the mapping


def test_results_map_as_pydantic_ais_mcp_toolset_maps_them(memory_portal: RuntimePortal) -> None:
    """Structured content unwrapped, an image as BinaryImage, several items as a list, a link as its URI."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import BinaryImage, ModelRequest, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    model = FunctionModel(
        calls_then_report(
            ToolCallPart("mcp__demo__add", {"a": 2, "b": 3}, tool_call_id="add"),
            ToolCallPart("mcp__demo__image", {}, tool_call_id="image"),
            ToolCallPart("mcp__demo__resource", {}, tool_call_id="resource"),
            ToolCallPart("mcp__demo__resource_link", {}, tool_call_id="link"),
            ToolCallPart("mcp__demo__weather", {"city": "Oslo"}, tool_call_id="weather"),
        )
    )

    async def main() -> dict[str, Any]:
        result = await Agent(model, toolsets=[McpActorsToolset(service)]).run("go")
        return {
            part.tool_call_id: part.content
            for message in result.all_messages()
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        }

    contents = run(main)
    assert contents["add"] == 5
    assert isinstance(contents["image"], BinaryImage) and contents["image"].media_type == "image/png"
    text, blob = contents["resource"]
    assert "demo server" in text and isinstance(blob, BinaryImage)
    assert contents["link"] == "demo://readme"
    assert contents["weather"] == {"city": "Oslo", "celsius": 21.5}


def test_a_tool_error_is_a_model_retry_or_a_failure_as_configured(memory_portal: RuntimePortal) -> None:
    """isError: a retry with the tool's own text by default; with tool_error_behavior='failed', a failed result."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    call = ToolCallPart("mcp__demo__fail", {"message": "the disk is full"})

    async def main() -> tuple[str, str]:
        retried = await Agent(FunctionModel(calls_then_report(call)), toolsets=[McpActorsToolset(service)]).run("go")
        failing = McpActorsToolset(service, tool_error_behavior="failed")
        failed = await Agent(FunctionModel(calls_then_report(call)), toolsets=[failing]).run("go")
        return retried.output, failed.output

    retried, failed = run(main)
    assert retried.startswith("mcp__demo__fail=retried:the disk is full")
    assert failed.startswith("mcp__demo__fail=failed:the disk is full")


def test_the_runtime_approver_is_asked_and_its_no_reaches_the_model_as_a_failure(memory_portal: RuntimePortal) -> None:
    """An untrusted server's call asks the approver (set_approver); a no is a ToolFailed the model reads, a yes runs."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    asked: list[ApprovalRequest] = []
    call = ToolCallPart("mcp__demo__echo", {"text": "may I?"})

    async def main() -> tuple[str, str]:
        await service.update("demo", isTrusted=False)
        verdict = False

        async def approver(request: ApprovalRequest) -> bool:
            asked.append(request)
            return verdict

        service.set_approver(approver)
        toolset = McpActorsToolset(service)
        denied = await Agent(FunctionModel(calls_then_report(call)), toolsets=[toolset]).run("go")
        verdict = True
        approved = await Agent(FunctionModel(calls_then_report(call)), toolsets=[toolset]).run("go")
        return denied.output, approved.output

    denied, approved = run(main)
    assert denied.startswith("mcp__demo__echo=failed:Error: tool 'mcp__demo__echo'")
    assert "was not approved" in denied
    assert approved == "mcp__demo__echo=success:may I?"
    assert [request.tool_name for request in asked] == ["echo", "echo"]


def test_progress_notifications_reach_the_run_event_stream(memory_portal: RuntimePortal) -> None:
    """The demo sleep's progress arrives as McpToolProgress events stamped with the tool call's id."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset, McpToolProgress

    service = memory_portal.asyncio_service()
    events: list[McpToolProgress] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        # An event stream handler makes the agent stream: the same script, streamed.
        if len(messages) == 1:
            yield {0: DeltaToolCall("mcp__demo__sleep", '{"seconds": 0.05}', tool_call_id="nap")}
        else:
            yield f"{returns(messages)[0].content}"

    model = FunctionModel(stream_function=stream)

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        event: AgentStreamEvent
        async for event in stream:
            if isinstance(event, McpToolProgress):
                events.append(event)

    async def main() -> str:
        agent = Agent(model, toolsets=[McpActorsToolset(service)])
        return (await agent.run("go", event_stream_handler=handler)).output

    assert run(main) == "slept 0.05 s"
    assert events, "no progress event reached the stream"
    assert {(e.tool_call_id, e.tool_name, e.server, e.tool) for e in events} == {
        ("nap", "mcp__demo__sleep", "demo", "sleep")
    }
    assert [e.progress for e in events] == sorted(e.progress for e in events)


def test_a_bare_run_context_calls_the_tool_and_drops_progress(memory_portal: RuntimePortal) -> None:
    """call_tool outside an agent run (no event stream): the call works and its progress is dropped quietly."""
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import RunContext
    from pydantic_ai.usage import RunUsage

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()

    async def main() -> Any:
        toolset = McpActorsToolset(service)
        ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        tools = await toolset.get_tools(ctx)
        return await toolset.call_tool("mcp__demo__sleep", {"seconds": 0.03}, ctx, tools["mcp__demo__sleep"])

    assert run(main) == "slept 0.03 s"


def test_a_tool_rebuilt_from_its_definition_is_called_by_name(memory_portal: RuntimePortal) -> None:
    """A plain ToolsetTool (not the toolset's own) is called by its name; a name not listed asks the model again."""
    from pydantic_ai import ModelRetry
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import ToolsetTool
    from pydantic_ai.usage import RunUsage

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()

    async def main() -> tuple[Any, ModelRetry]:
        toolset = McpActorsToolset(service)
        ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        listed = (await toolset.get_tools(ctx))["mcp__demo__echo"]
        rebuilt = ToolsetTool(
            toolset=toolset, tool_def=listed.tool_def, max_retries=1, args_validator=listed.args_validator
        )
        echoed = await toolset.call_tool("mcp__demo__echo", {"text": "by name"}, ctx, rebuilt)
        with pytest.raises(ModelRetry) as unknown:
            await toolset.call_tool("mcp__demo__nope", {}, ctx, rebuilt)
        return echoed, unknown.value

    echoed, unknown = run(main)
    assert echoed == "by name"
    assert "'mcp__demo__nope'" in unknown.message


# ---------------------------------------------------------------------- in memory: selection, naming, composition


def test_selection_naming_and_disabled_tools(memory_portal: RuntimePortal) -> None:
    """servers/tools/naming choose the tools and their names; disabled tools and unknown servers are left out."""
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import RunContext
    from pydantic_ai.usage import RunUsage

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())

    async def main() -> list[Any]:
        await service.update("demo", disabledTools=["add"])
        by_tool = McpActorsToolset(service, ["demo", "nope"], tools=["echo", "mcp__demo__add", "sleep"], naming="tool")
        by_fn = McpActorsToolset(
            service, tools=lambda t: t.name == "echo", naming=lambda t: f"{t.server_name}_{t.name}"
        )
        all_tools = McpActorsToolset(service)
        return [
            sorted(await by_tool.get_tools(ctx)),
            set(by_tool.failures),
            sorted(await by_fn.get_tools(ctx)),
            await all_tools.get_tools(ctx),
        ]

    named, failures, by_fn, every = run(main)
    assert named == ["echo", "sleep"]  # add is disabled on its server
    assert failures == {"nope"}
    assert by_fn == ["demo_echo"]
    assert "mcp__demo__echo" in every and "mcp__demo__add" not in every
    definition = every["mcp__demo__echo"].tool_def
    assert definition.parameters_json_schema["properties"]["text"]["type"] == "string"
    assert definition.metadata == {"mcp_actors": {"tool_id": "mcp__demo__echo", "server": "demo", "tool": "echo"}}


def test_prefixed_and_filtered_compose_with_the_agent(memory_portal: RuntimePortal) -> None:
    """.prefixed().filtered(): the model sees only the prefixed echo, calls it by that name, and gets its output."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    offered: list[list[str]] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([tool.name for tool in info.function_tools])
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("x_mcp__demo__echo", {"text": "composed"})])
        return ModelResponse(parts=[TextPart(str(returns(messages)[0].content))])

    async def main() -> str:
        toolset = McpActorsToolset(service).prefixed("x").filtered(lambda ctx, tool: tool.name.endswith("__echo"))
        return (await Agent(FunctionModel(script), toolsets=[toolset]).run("go")).output

    assert run(main) == "composed"
    assert offered == [["x_mcp__demo__echo"], ["x_mcp__demo__echo"]]


def test_approval_required_defers_the_call_until_the_host_approves(memory_portal: RuntimePortal) -> None:
    """.approval_required(): the run stops with a DeferredToolRequests; resumed with the approval, the call runs."""
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    model = FunctionModel(calls_then_report(ToolCallPart("mcp__demo__echo", {"text": "approved"}, tool_call_id="c")))

    async def main() -> tuple[Any, Any]:
        agent = Agent(
            model,
            toolsets=[McpActorsToolset(service).approval_required()],
            output_type=[str, DeferredToolRequests],
        )
        first = await agent.run("go")
        resumed = await agent.run(
            message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={"c": True})
        )
        return first.output, resumed.output

    first, resumed = run(main)
    assert isinstance(first, DeferredToolRequests) and [c.tool_call_id for c in first.approvals] == ["c"]
    assert resumed == "mcp__demo__echo=success:approved"


def test_a_changed_tool_list_shows_at_the_next_step(memory_portal: RuntimePortal) -> None:
    """toggle_extra_tool sends tools/list_changed: the model's next step is offered the new tool."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    offered: list[bool] = []

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append(any(tool.name == "mcp__demo__extra" for tool in info.function_tools))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("mcp__demo__toggle_extra_tool", {})])
        return ModelResponse(parts=[TextPart("ok")])

    async def main() -> None:
        await Agent(FunctionModel(script), toolsets=[McpActorsToolset(service)]).run("go")

    run(main)
    assert offered == [False, True]


def test_test_model_calls_every_selected_tool(memory_portal: RuntimePortal) -> None:
    """pydantic-ai's TestModel calls each selected tool with schema-made arguments and gets their results."""
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()

    async def main() -> str:
        toolset = McpActorsToolset(service, ["demo"], tools=["echo", "add"], naming="tool")
        return (await Agent(TestModel(), toolsets=[toolset]).run("go")).output

    output = run(main)
    assert '"echo":' in output and '"add":' in output


def test_bad_arguments_are_refused_at_construction(memory_portal: RuntimePortal) -> None:
    """A string for servers or tools, a bad naming, timeout, retry budget or error behaviour: refused at once."""
    from mcp_actors.integrations.pydantic_ai import McpActorsToolset

    service = memory_portal.asyncio_service()
    with pytest.raises(TypeError, match="servers"):
        McpActorsToolset(service, "demo")
    with pytest.raises(TypeError, match="tools"):
        McpActorsToolset(service, tools="echo")
    with pytest.raises(ValueError, match="timeout"):
        McpActorsToolset(service, timeout=0)
    with pytest.raises(ValueError, match="naming"):
        McpActorsToolset(service, naming="name")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_retries"):
        McpActorsToolset(service, max_retries=-1)
    with pytest.raises(ValueError, match="tool_error_behavior"):
        McpActorsToolset(service, tool_error_behavior="error")  # type: ignore[arg-type]
