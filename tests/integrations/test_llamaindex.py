"""The LlamaIndex integration under a real LlamaIndex agent: ``FunctionAgent`` with LlamaIndex's scripted LLM.

``MockFunctionCallingLLM`` (shipped by llama-index-core) answers from a script: it asks for
MCP tools, then answers with what the tools returned, so each test sees exactly what the
model would have seen. Most tests share one portal whose demo and fault servers are served
in memory (no process); the tests of processes (the real demo server, a server killed
mid-call, a call cancelled on the server) run the real servers in a portal of their own,
closed and checked for leftover processes.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import psutil
import pytest
import trio
from testkit import is_infrastructure

from mcp_actors.errors import ServerConnectionLost, ServerNotFound, ToolCallDenied
from mcp_actors.integrations._common import SelectedTool
from mcp_actors.portal import RuntimePortal, start_portal
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import fault_server_command, live_descendants
from mcp_actors.testing.memory import records_in_memory
from mcp_actors.tools import McpTool

# The framework, and our adapter of it (which imports it), are imported by the tests that use them: every
# pytest-xdist worker imports this file to collect it, and importing the framework costs seconds.
if TYPE_CHECKING:
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.core.llms import ChatMessage
    from llama_index.core.tools import FunctionTool, ToolOutput

    from mcp_actors.integrations.llamaindex import McpFunctionTool, McpToolProgress


# FunctionAgent's own construction (workflows' inspect.getmembers over a pydantic model) warns.
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")

BOUND = 60.0
"""Generous bound of one wait: the demo server's first start on a loaded machine."""

CORPUS = Path(__file__).parents[1] / "data" / "tool_schemas"
KEPT = ("type", "properties", "required", "definitions", "$defs")
"""The top-level keys LlamaIndex gives the model of any tool's schema (ToolMetadata.get_parameters_dict)."""

ToolCalls = Sequence[tuple[str, dict[str, Any]]]


class Script:
    """The scripted model: one turn of tool calls per entry, then a final answer made of the tool results.

    Records what it was offered (names and the schemas the model sees) and every tool
    message it read.
    """

    def __init__(self, *turns: ToolCalls) -> None:
        self.turns = list(turns)
        self.offered: list[dict[str, dict[str, Any]]] = []
        self.tool_messages: list[str] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        from llama_index.core.base.llms.types import ToolCallBlock
        from llama_index.core.llms import ChatMessage, MessageRole

        tools = kwargs.get("tools") or []
        self.offered.append({t.metadata.get_name(): t.metadata.get_parameters_dict() for t in tools})
        turn = len(self.offered) - 1
        if turn < len(self.turns):
            calls = [
                ToolCallBlock(tool_call_id=f"call-{turn}-{i}", tool_name=name, tool_kwargs=kwargs_)
                for i, (name, kwargs_) in enumerate(self.turns[turn])
            ]
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=calls)
        self.tool_messages = [m.content or "" for m in messages if m.role == MessageRole.TOOL]
        return ChatMessage(role=MessageRole.ASSISTANT, content="final: " + " | ".join(self.tool_messages))

    def agent(self, tools: Sequence[FunctionTool]) -> FunctionAgent:
        """A FunctionAgent driven by this script."""
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.core.llms.mock import MockFunctionCallingLLM

        return FunctionAgent(tools=list(tools), llm=MockFunctionCallingLLM(response_generator=self))


async def run_agent(
    agent: FunctionAgent, prompt: str = "go"
) -> tuple[str, list[ToolCallResult], list[McpToolProgress]]:
    """Run the agent to its end; its answer, the tool results and the progress events it streamed."""
    from llama_index.core.agent.workflow import ToolCallResult

    from mcp_actors.integrations.llamaindex import McpToolProgress

    handler = agent.run(prompt)
    results: list[ToolCallResult] = []
    progress: list[McpToolProgress] = []
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            results.append(event)
        elif isinstance(event, McpToolProgress):
            progress.append(event)
    return str(await handler), results, progress


def fault_record(name: str, *flags: str, **fields: Any) -> dict[str, Any]:
    """A config record running the fault server with ``flags``."""
    argv = fault_server_command(*flags)
    return {
        "name": name,
        "type": "stdio",
        "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0},
        **fields,
    }


def wait_stderr(portal: RuntimePortal, server: str, text: str) -> None:
    """Block until the server wrote a stderr line containing ``text`` (run it in a thread)."""

    async def wait() -> None:
        service = portal.service
        handle = service._registry.snapshot.handles[service.get(server).id]
        with trio.fail_after(BOUND):
            await handle.wait_for_stderr(lambda line: text in line)

    portal.run(wait)


def no_server_left() -> bool:
    return live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline()))) == []


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuntimePortal]:
    """One portal for the module, its demo server and fault servers ``f`` (trusted) and ``g`` served in memory."""
    config = tmp_path_factory.mktemp("llamaindex") / "cfg.json"
    with records_in_memory(), start_portal(str(config)) as portal:
        service = portal.sync_service()
        service.add(fault_record("f", isTrusted=True))
        service.add(fault_record("g", disabledTools=["add"]))
        yield portal


@pytest.fixture
def own_portal(tmp_path: Path) -> Iterator[RuntimePortal]:
    """A portal of the test's own with real server processes; none is left once it is closed."""
    with start_portal(str(tmp_path / "cfg.json")) as portal:
        yield portal
    assert no_server_left()


# ---------------------------------------------------------------------- the agent, real servers


def test_an_agent_calls_the_real_demo_server_and_answers_with_its_output(tmp_path: Path) -> None:
    """A FunctionAgent calls echo and add on the demo server's process; the model reads their real output."""
    from mcp_actors.integrations.llamaindex import load_tools

    script = Script([("mcp__demo__echo", {"text": "hello from mcp"}), ("mcp__demo__add", {"a": 2, "b": 3})])
    with start_portal(str(tmp_path / "cfg.json")) as portal:

        async def main() -> tuple[str, list[ToolCallResult]]:
            tools = await load_tools(portal.asyncio_service(), ["demo"], tools=["echo", "add"])
            answer, results, _ = await asyncio.wait_for(run_agent(script.agent(tools)), BOUND)
            return answer, results

        answer, results = asyncio.run(main())
        assert portal.sync_service().status("demo").pid is not None  # a real process served it
    assert no_server_left()  # (c) closing the portal ends the server
    assert answer.startswith("final: ")  # the two results, in the order the calls ended
    assert sorted(script.tool_messages) == ["5.0", "hello from mcp"]
    assert sorted(answer.removeprefix("final: ").split(" | ")) == ["5.0", "hello from mcp"]
    assert set(script.offered[0]) == {"mcp__demo__echo", "mcp__demo__add"}
    add = next(r for r in results if r.tool_name == "mcp__demo__add").tool_output
    assert not add.is_error and add.raw_output.structured_content == {"result": 5.0}


def test_a_server_killed_mid_call_fails_that_call_fast_and_the_next_call_works(own_portal: RuntimePortal) -> None:
    """(b) Killing the server under a running call: an error naming server and tool, at once; the next turn works."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = own_portal.asyncio_service()
    script = Script([("mcp__f__sleep", {"seconds": 30})], [("mcp__f__echo", {"text": "after the restart"})])

    async def main() -> tuple[str, list[ToolCallResult], float]:
        await service.add(fault_record("f", "--hang-tool", "sleep", isTrusted=True))
        tools = await load_tools(service, ["f"], timeout=BOUND)
        run = asyncio.create_task(run_agent(script.agent(tools)))
        await asyncio.to_thread(wait_stderr, own_portal, "f", "fault: hanging call")
        pid = service.status("f").pid
        assert pid is not None
        killed_at = time.monotonic()
        psutil.Process(pid).kill()
        answer, results, _ = await asyncio.wait_for(run, BOUND)
        return answer, results, time.monotonic() - killed_at

    answer, results, elapsed = asyncio.run(main())
    failed, after = (r.tool_output for r in results)
    assert failed.is_error and isinstance(failed.exception, ServerConnectionLost)
    assert failed.content.startswith("Error: tool 'mcp__f__sleep'") and "'f'" in failed.content
    assert not after.is_error and after.content == "after the restart"
    assert script.tool_messages == [failed.content, "after the restart"]
    assert answer.endswith("| after the restart")
    assert elapsed < BOUND / 4  # failed by the kill, not by the 60 s bound


@pytest.mark.parametrize("how", ["cancel_run", "task"])
def test_cancelling_the_agent_cancels_the_call_on_the_server(own_portal: RuntimePortal, how: str) -> None:
    """(d) handler.cancel_run(), or cancelling the task awaiting the run, cancels the MCP call on the server."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = own_portal.asyncio_service()
    script = Script([("mcp__f__sleep", {"seconds": 30})])

    async def main() -> None:
        await service.add(fault_record("f", "--hang-tool", "sleep", isTrusted=True))
        tools = await load_tools(service, ["f"], timeout=BOUND)
        handler = script.agent(tools).run("go")
        waiting = asyncio.ensure_future(handler)
        await asyncio.to_thread(wait_stderr, own_portal, "f", "fault: hanging call")
        if how == "cancel_run":
            await handler.cancel_run()
        else:
            waiting.cancel()
        with pytest.raises(BaseException):  # noqa: B017 - cancelled, however the workflow reports it
            await waiting
        await asyncio.to_thread(wait_stderr, own_portal, "f", "fault: cancelled")
        # The session lives on: the next call goes through at once.
        echo = next(t for t in tools if t.metadata.name == "mcp__f__echo")
        assert (await echo.acall(text="still here")).content == "still here"

    asyncio.run(asyncio.wait_for(main(), BOUND))
    assert own_portal.sync_service().status("f").calls_in_flight == 0


def test_a_react_agent_reads_the_servers_schema_and_calls_the_tool(shared: RuntimePortal) -> None:
    """ReActAgent: its prompt carries the server's schema; the Action it parses calls the tool; the answer has it."""
    from llama_index.core.agent.workflow import ReActAgent
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    from mcp_actors.integrations.llamaindex import load_tools

    prompts: list[str] = []

    def react(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        prompts.append("\n".join(m.content or "" for m in messages))
        observed = [m.content or "" for m in messages if (m.content or "").startswith("Observation:")]
        if not observed:
            text = 'Thought: I need the tool.\nAction: mcp__f__add\nAction Input: {"a": 20, "b": 22}'
        else:
            text = f"Thought: I can answer.\nAnswer: the sum is {observed[-1].removeprefix('Observation:').strip()}"
        return ChatMessage(role=MessageRole.ASSISTANT, content=text)

    async def main() -> str:
        tools = await load_tools(shared.asyncio_service(), ["f"], tools=["add"])
        agent = ReActAgent(tools=list(tools), llm=MockFunctionCallingLLM(response_generator=react))
        return str(await asyncio.wait_for(agent.run("add"), BOUND))

    assert asyncio.run(main()) == "the sum is 42"
    [add] = asyncio.run(load_tools(shared.asyncio_service(), ["f"], tools=["add"]))
    assert f"Tool Args: {add.metadata.fn_schema_str}" in prompts[0]


# ---------------------------------------------------------------------- selection, naming, approval, progress


def test_servers_tools_and_naming_select_and_name_what_the_model_is_offered(shared: RuntimePortal) -> None:
    """servers= and tools= choose, naming= names ("id", "tool", a function); disabled tools are never offered."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = shared.asyncio_service()

    async def main() -> dict[str, list[str]]:
        def names(tools: list[FunctionTool]) -> list[str]:
            return [t.metadata.get_name() for t in tools]

        return {
            "all of f and g": names(await load_tools(service, ["f", "g"])),
            "chosen": names(await load_tools(service, ["f", "demo"], tools=["echo", "mcp__f__add"])),
            "by predicate": names(await load_tools(service, ["demo"], tools=lambda t: t.name.startswith("ec"))),
            "own names": names(await load_tools(service, ["g"], naming="tool")),
            "by function": names(await load_tools(service, ["f"], tools=["add"], naming=lambda t: "plus")),
        }

    got = asyncio.run(main())
    assert {"mcp__f__add", "mcp__f__echo", "mcp__g__echo"} <= set(got["all of f and g"])
    assert "mcp__g__add" not in got["all of f and g"]  # g's disabledTools
    assert got["chosen"] == ["mcp__f__echo", "mcp__f__add", "mcp__demo__echo"]
    assert got["by predicate"] == ["mcp__demo__echo"]
    assert "echo" in got["own names"] and "add" not in got["own names"]
    assert got["by function"] == ["plus"]


def test_naming_by_own_name_refuses_a_clash_naming_both_tools(shared: RuntimePortal) -> None:
    """naming="tool" over two servers offering echo: a ValueError that names both tools."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = shared.asyncio_service()
    with pytest.raises(ValueError, match=r"mcp__f__echo.*mcp__g__echo"):
        asyncio.run(load_tools(service, ["f", "g"], tools=["echo"], naming="tool"))


def test_the_approver_is_asked_and_a_denial_reaches_the_model_as_an_error(shared: RuntimePortal) -> None:
    """(d) g is not trusted: the service's approver decides each call; a denied call is an error the model reads."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = shared.asyncio_service()
    asked: list[tuple[str, str]] = []
    script = Script([("mcp__g__echo", {"text": "allowed"}), ("mcp__g__fail", {"message": "x"})])

    async def approver(request: ApprovalRequest) -> bool:
        asked.append((request.server_name, request.tool_name))
        return request.tool_name == "echo"

    async def main() -> list[ToolCallResult]:
        service.set_approver(approver)
        try:
            tools = await load_tools(service, ["g"])
            return (await asyncio.wait_for(run_agent(script.agent(tools)), BOUND))[1]
        finally:
            service.set_approver(None)

    results = {r.tool_name: r.tool_output for r in asyncio.run(main())}
    assert sorted(asked) == [("g", "echo"), ("g", "fail")]
    assert results["mcp__g__echo"].content == "allowed"
    denied = results["mcp__g__fail"]
    assert denied.is_error and isinstance(denied.exception, ToolCallDenied)
    assert denied.content.startswith("Error: tool 'mcp__g__fail': ") and "'g'" in denied.content
    assert denied.content in script.tool_messages


def test_a_tool_level_error_is_flagged_and_carries_the_servers_result(shared: RuntimePortal) -> None:
    """isError from the server: ToolOutput(is_error=True), its text after "Error: ", the raw result kept."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = shared.asyncio_service()

    async def main() -> ToolOutput:
        [fail] = await load_tools(service, ["f"], tools=["fail"])
        return await fail.acall(message="the tool says no")

    output = asyncio.run(main())
    assert output.is_error and output.content == "Error: the tool says no"
    assert output.raw_output.is_error and output.exception is None


def test_progress_notifications_stream_as_events_of_the_agent_run(shared: RuntimePortal) -> None:
    """progress=True: the demo sleep's progress notifications arrive in the run's event stream, tool named."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = shared.asyncio_service()
    script = Script([("mcp__demo__sleep", {"seconds": 0.05})])

    async def main() -> tuple[list[ToolCallResult], list[McpToolProgress]]:
        tools = await load_tools(service, ["demo"], tools=["sleep"], progress=True)
        _, results, progress = await asyncio.wait_for(run_agent(script.agent(tools)), BOUND)
        return results, progress

    results, progress = asyncio.run(main())
    assert results[0].tool_output.content.startswith("slept")
    assert progress, "no progress event reached the stream"
    assert {(p.tool_name, p.server, p.tool) for p in progress} == {("mcp__demo__sleep", "demo", "sleep")}
    assert [p.progress for p in progress] == sorted(p.progress for p in progress)


def test_a_spec_lists_anew_and_keeps_the_tools_whose_listing_is_unchanged(shared: RuntimePortal) -> None:
    """to_tool_list_async re-lists: a tool the server adds (tools/list_changed) appears; unchanged tools are reused."""
    from mcp_actors.integrations.llamaindex import McpActorsToolSpec

    service = shared.asyncio_service()

    async def main() -> tuple[list[str], list[str], bool]:
        spec = McpActorsToolSpec(service, ["demo"], tools=lambda t: t.name in {"echo", "extra", "toggle_extra_tool"})
        before = await spec.to_tool_list_async()
        toggle = next(t for t in before if t.metadata.name == "mcp__demo__toggle_extra_tool")
        await toggle.acall()
        try:
            after = await spec.to_tool_list_async()
        finally:
            await toggle.acall()
        same = before[0] is after[0]
        return [t.metadata.get_name() for t in before], [t.metadata.get_name() for t in after], same

    before, after, same = asyncio.run(main())
    assert "mcp__demo__extra" not in before and "mcp__demo__extra" in after
    assert same


def test_bad_options_fail_when_the_spec_is_built(shared: RuntimePortal) -> None:
    """A string for servers or tools, a bad naming or timeout: refused by the constructor, before any listing."""
    from mcp_actors.integrations.llamaindex import McpActorsToolSpec

    service = shared.asyncio_service()
    with pytest.raises(TypeError, match="servers"):
        McpActorsToolSpec(service, "demo")
    with pytest.raises(TypeError, match="tools"):
        McpActorsToolSpec(service, tools="echo")
    with pytest.raises(ValueError, match="naming"):
        McpActorsToolSpec(service, naming="short")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        McpActorsToolSpec(service, timeout=0)


def test_a_server_that_cannot_be_listed_is_left_out_and_reported(shared: RuntimePortal) -> None:
    """An unknown server does not fail the listing: the others' tools come, the failure is in spec.failures."""
    from mcp_actors.integrations.llamaindex import McpActorsToolSpec

    spec = McpActorsToolSpec(shared.asyncio_service(), ["nope", "f"], tools=["echo"])
    tools = asyncio.run(spec.to_tool_list_async())
    assert [t.metadata.get_name() for t in tools] == ["mcp__f__echo"]
    assert set(spec.failures) == {"nope"}


# ---------------------------------------------------------------------- the other ways in


def test_the_sync_api_outside_a_loop_and_its_refusal_inside_one(shared: RuntimePortal) -> None:
    """to_tool_list() and tool.call() work from plain code; to_tool_list() inside a running loop says what to await."""
    from mcp_actors.integrations.llamaindex import McpActorsToolSpec

    spec = McpActorsToolSpec(shared.asyncio_service(), ["f"], tools=["echo"])
    [echo] = spec.to_tool_list()
    assert echo.call(text="sync").content == "sync"
    assert echo("positional").content == "positional"  # a one-argument tool takes the bare value too

    async def inside() -> None:
        spec.to_tool_list()

    with pytest.raises(RuntimeError, match="to_tool_list_async"):
        asyncio.run(inside())


def test_llamaindexs_own_tool_calling_helper_calls_it_and_a_bad_shape_is_refused(shared: RuntimePortal) -> None:
    """llama_index.core.tools.calling.acall_tool works with it; positional arguments of a many-argument tool do not."""
    from llama_index.core.tools.calling import acall_tool

    from mcp_actors.integrations.llamaindex import load_tools

    service = shared.asyncio_service()

    async def main() -> tuple[ToolOutput, ToolOutput]:
        [add] = await load_tools(service, ["f"], tools=["add"])
        return await acall_tool(add, {"a": 1, "b": 2}), await acall_tool(add, {"x": 1})

    good, bad = asyncio.run(main())
    assert good.content == "3" and not good.is_error
    assert bad.is_error and "Error:" in bad.content  # the server's own complaint, for the model
    [add] = asyncio.run(load_tools(service, ["f"], tools=["add"]))
    with pytest.raises(TypeError, match="by keyword"):
        asyncio.run(add.acall(1, 2))


def test_the_trio_service_works_on_trio_and_is_refused_on_asyncio_naming_the_facade(shared: RuntimePortal) -> None:
    """The runtime's McpService: the tools run on its trio loop; on asyncio a RuntimeError names the facade."""
    from mcp_actors.integrations.llamaindex import load_tools

    async def on_trio() -> str:
        [echo] = await load_tools(shared.service, ["f"], tools=["echo"])
        return (await echo.acall(text="on trio")).content

    assert shared.run(on_trio) == "on trio"
    with pytest.raises(RuntimeError, match=r"asyncio_service\(\)"):
        asyncio.run(load_tools(shared.service, ["f"]))


def test_async_fn_returns_the_text_and_raises_the_typed_error(shared: RuntimePortal) -> None:
    """The FunctionTool's own async_fn (what CodeActAgent and LangChain call) gives text, raises typed errors."""
    from mcp_actors.integrations.llamaindex import load_tools

    service = shared.asyncio_service()

    async def main() -> tuple[str, pytest.ExceptionInfo[ServerNotFound]]:
        [echo] = await load_tools(service, ["f"], tools=["echo"])
        gone = rebuilt(echo, attrs.evolve(mcp_tool_of(echo), server_id="nope"))
        with pytest.raises(ServerNotFound) as info:
            await gone.async_fn(text="x")
        return await echo.async_fn(text="fn"), info

    text, info = asyncio.run(main())
    assert text == "fn"
    assert str(info.value).startswith("tool 'mcp__f__echo': ") and "nope" in str(info.value)


def mcp_tool_of(tool: FunctionTool) -> McpTool:
    from mcp_actors.integrations.llamaindex import McpFunctionTool

    assert isinstance(tool, McpFunctionTool)
    return tool.mcp_tool


def rebuilt(tool: FunctionTool, mcp_tool: McpTool, name: str = "t") -> McpFunctionTool:
    """A tool like ``tool`` (same service) for another listed tool."""
    from mcp_actors.integrations.llamaindex import McpFunctionTool

    assert isinstance(tool, McpFunctionTool)
    adapter = attrs.evolve(tool._selected.adapter, mcp_tool=mcp_tool)
    return McpFunctionTool(SelectedTool(name=name, adapter=adapter))


# ---------------------------------------------------------------------- the schema the model sees


def corpus_tools() -> list[tuple[str, dict[str, Any]]]:
    tools = []
    for path in sorted(glob.glob(os.path.join(CORPUS, "*.json"))):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if isinstance(data, dict):
            tools += [(f"{data['server']}:{t['name']}", t["inputSchema"]) for t in data.get("tools", [])]
    return tools


def test_the_model_sees_every_corpus_schema_as_the_server_sent_it(shared: RuntimePortal) -> None:
    """For each real tool schema of the corpus, LlamaIndex gives the model the server's schema, nested parts intact."""
    from mcp_actors.integrations.llamaindex import load_tools

    [echo] = asyncio.run(load_tools(shared.asyncio_service(), ["f"], tools=["echo"]))
    corpus = corpus_tools()
    assert len(corpus) > 100
    for name, schema in corpus:
        mcp_tool = McpTool(id="mcp__x__t", name="t", input_schema=schema, server_id="x", server_name="x")
        tool = rebuilt(echo, mcp_tool)
        expected = {key: schema[key] for key in KEPT if key in schema}
        expected.setdefault("type", "object")
        expected.setdefault("properties", {})
        assert tool.metadata.get_parameters_dict() == expected, name
        assert tool.metadata.to_openai_tool(skip_length_check=True)["function"]["parameters"] == expected, name


def test_the_argument_model_has_one_field_per_property_and_keeps_constraints(shared: RuntimePortal) -> None:
    """fn_schema: a field per top-level property (required ones required, odd names aliased); minimum/maximum kept."""
    from mcp_actors.integrations.llamaindex import load_tools

    [sleep] = asyncio.run(load_tools(shared.asyncio_service(), ["demo"], tools=["sleep"]))
    assert sleep.metadata.get_parameters_dict()["properties"]["seconds"]["maximum"] == 3600
    model = sleep.metadata.fn_schema
    assert model is not None and model.model_fields["seconds"].is_required()
    schema = {
        "type": "object",
        "properties": {"model_config": {"type": "string"}, "a-b": {"type": "integer", "default": 3}},
        "required": ["model_config"],
    }
    mcp_tool = McpTool(id="mcp__x__odd", name="odd", input_schema=schema, server_id="x", server_name="x")
    odd = rebuilt(sleep, mcp_tool, "odd")
    odd_model = odd.metadata.fn_schema
    assert odd_model is not None
    fields = odd_model.model_fields
    assert [f.alias for f in fields.values()] == ["model_config", "a-b"]
    assert [f.is_required() for f in fields.values()] == [True, False]
    assert odd_model.model_validate({"model_config": "x"}).model_dump(by_alias=True) == {"model_config": "x", "a-b": 3}
    assert odd.metadata.get_parameters_dict() == schema
