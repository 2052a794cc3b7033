"""LangChain / LangGraph over the supervised servers: real agents, real servers, a scripted model.

Every agent is LangChain's own ``create_agent`` (or a LangGraph graph with ``ToolNode``) with
LangChain's fake chat model taught to accept tools: it plays a script of tool calls, then
answers ``saw: <every tool message it read>``, so each test sees what the model saw. The
servers run in a real runtime behind the portal's asyncio facade: the demo server as a
process, the stdlib fault server as a process where its stderr or its process matter, and
their in-memory twins where neither does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest
import trio
from testkit import is_infrastructure

from mcp_actors.portal import RuntimePortal, start_portal
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import fault_server_command, live_descendants
from mcp_actors.testing.memory import InMemoryServers

# The framework, and our adapter of it (which imports it), are imported by the tests that use them: every
# pytest-xdist worker imports this file to collect it, and importing the framework costs seconds.
if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage, ToolMessage
    from langchain_core.tools import BaseTool
    from langchain_kit import ScriptedChatModel
    from langgraph.graph import MessagesState

    from mcp_actors.integrations.langchain import SupervisedMcpTool


BOUND = 60.0
"""Generous: a server's first start on a loaded machine. Only a broken test waits this long."""


def scripted(*calls: tuple[str, dict[str, Any]]) -> ScriptedChatModel:
    """A model that calls these tools, one turn each, then says what it saw."""
    from langchain_core.messages import AIMessage
    from langchain_kit import ScriptedChatModel

    turns = [
        AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{i}", "type": "tool_call"}])
        for i, (name, args) in enumerate(calls)
    ]
    return ScriptedChatModel(messages=iter(turns))


async def run_agent(tools: Sequence[BaseTool], *calls: tuple[str, dict[str, Any]]) -> list[BaseMessage]:
    """One ``create_agent`` run with a scripted model; its messages."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    agent = create_agent(scripted(*calls), tools)
    result = await asyncio.wait_for(agent.ainvoke({"messages": [HumanMessage("go")]}), BOUND)
    return list(result["messages"])


def tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    from langchain_core.messages import ToolMessage

    return [m for m in messages if isinstance(m, ToolMessage)]


def fault_input(name: str, *flags: str, **fields: Any) -> dict[str, Any]:
    """A config entry running the stdlib fault server with ``flags``."""
    argv = fault_server_command(*flags)
    return {
        "name": name,
        "type": "stdio",
        "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0},
        "isTrusted": True,
        **fields,
    }


def wait_stderr(portal: RuntimePortal, server: str, text: str) -> None:
    """Block until the server has written a stderr line containing ``text``."""

    async def wait() -> None:
        service = portal.service
        handle = service._registry.snapshot.handles[service.get(server).id]
        with trio.fail_after(BOUND):
            await handle.wait_for_stderr(lambda line: text in line)

    portal.run(wait)


def server_processes() -> list[psutil.Process]:
    return live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline())))


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[RuntimePortal]:
    """A running portal on a fresh config (the demo server only); no server process left after."""
    with start_portal(str(tmp_path / "cfg.json")) as running:
        yield running
    assert server_processes() == []


# ---------------------------------------------------------------------- an agent and a real server


def test_an_agent_calls_the_demo_server_and_reads_its_output(portal: RuntimePortal) -> None:
    """create_agent calls echo and add on the demo process; the model reads both outputs; add's structure is kept."""
    from langchain_core.tools import BaseTool

    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()

    async def main() -> list[BaseMessage]:
        tools = await asyncio.wait_for(load_tools(service, ["demo"]), BOUND)
        assert all(isinstance(tool, BaseTool) for tool in tools) and tools.failures == {}
        echo = next(tool for tool in tools if tool.name == "mcp__demo__echo")
        assert isinstance(echo.args_schema, dict) and "text" in echo.args_schema["properties"]
        assert echo.metadata == {"mcp_server": "demo", "mcp_tool": "echo", "mcp_tool_id": "mcp__demo__echo"}
        return await run_agent(
            tools, ("mcp__demo__echo", {"text": "hello from langchain"}), ("mcp__demo__add", {"a": 2, "b": 3})
        )

    messages = asyncio.run(main())
    echoed, added = tool_messages(messages)
    assert (echoed.content, echoed.status, echoed.artifact) == ("hello from langchain", "success", None)
    assert added.artifact == {"structured_content": {"result": 5.0}}
    assert messages[-1].content == f"saw: hello from langchain | {added.content}"
    assert "5" in str(added.content)


def test_a_tool_error_is_an_error_message_the_model_reads_and_the_run_goes_on(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """A tool-level error (isError) becomes ToolMessage(status="error") with its text; the next call runs."""
    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()

    async def main() -> list[BaseMessage]:
        tools = await load_tools(service, ["demo"], tools=["fail", "echo"])
        return await run_agent(
            tools, ("mcp__demo__fail", {"message": "no such city"}), ("mcp__demo__echo", {"text": "ok"})
        )

    messages = asyncio.run(main())
    failed, echoed = tool_messages(messages)
    assert (failed.status, failed.content) == ("error", "Error: no such city")
    assert (echoed.status, echoed.content) == ("success", "ok")
    assert messages[-1].content == "saw: Error: no such city | ok"


# ---------------------------------------------------------------------- the supervisor's promises


def test_a_server_killed_mid_call_fails_that_call_fast_and_the_next_call_works(portal: RuntimePortal) -> None:
    """Killing the server under a hung call answers the model at once, naming tool and server; the restart serves on."""
    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()

    async def main() -> tuple[list[BaseMessage], float, list[BaseMessage], int, int]:
        await service.add(fault_input("f", "--hang-tool", "sleep"))
        tools = await load_tools(service, ["f"])
        run = asyncio.create_task(run_agent(tools, ("mcp__f__sleep", {"seconds": 100})))
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: hanging call")
        first_pid = service.status("f").pid
        assert first_pid is not None
        psutil.Process(first_pid).kill()
        killed_at = time.monotonic()
        failed = await run
        took = time.monotonic() - killed_at
        after = await run_agent(tools, ("mcp__f__echo", {"text": "after the restart"}))
        second_pid = service.status("f").pid
        assert second_pid is not None
        return failed, took, after, first_pid, second_pid

    failed, took, after, first_pid, second_pid = asyncio.run(main())
    (lost,) = tool_messages(failed)
    assert lost.status == "error"
    assert str(lost.content).startswith("Error: tool 'mcp__f__sleep'") and "'f'" in str(lost.content)
    assert failed[-1].content == f"saw: {lost.content}"
    assert took < 10.0, f"the killed call took {took:.1f}s to fail"
    (echoed,) = tool_messages(after)
    assert (echoed.status, echoed.content) == ("success", "after the restart")
    assert second_pid != first_pid


def test_cancelling_the_agents_task_cancels_the_call_on_the_server(portal: RuntimePortal) -> None:
    """Cancelling the asyncio task running the agent cancels the MCP call: the server gets notifications/cancelled."""
    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()

    async def main() -> None:
        await service.add(fault_input("f", "--hang-tool", "sleep"))
        tools = await load_tools(service, ["f"])
        run = asyncio.create_task(run_agent(tools, ("mcp__f__sleep", {"seconds": 100})))
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: hanging call")
        assert service.status("f").calls_in_flight == 1
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: cancelled")

    asyncio.run(main())
    status = portal.sync_service().status("f")
    assert status.calls_in_flight == 0 and status.state.value == "connected"


def test_closing_the_portal_stops_the_servers_and_a_later_call_answers_the_model(tmp_path: Path) -> None:
    """After the agent's portal closes no server process is left, and a tool called then fails as a message."""
    from mcp_actors.integrations.langchain import load_tools

    portal = start_portal(str(tmp_path / "cfg.json"))
    service = portal.asyncio_service()

    async def first() -> tuple[list[SupervisedMcpTool], list[BaseMessage], int]:
        tools = await load_tools(service, ["demo"], tools=["echo"])
        messages = await run_agent(tools, ("mcp__demo__echo", {"text": "alive"}))
        pid = service.status("demo").pid
        assert pid is not None
        return tools, messages, pid

    with portal:
        tools, messages, pid = asyncio.run(first())
    assert messages[-1].content == "saw: alive"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert server_processes() == []
    closed = asyncio.run(run_agent(tools, ("mcp__demo__echo", {"text": "anyone?"})))
    (answer,) = tool_messages(closed)
    assert answer.status == "error" and "portal" in str(answer.content) and "closed" in str(answer.content)


# ---------------------------------------------------------------------- approver, selection, naming


def test_the_services_approver_decides_and_a_denial_reaches_the_model(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """An untrusted server's calls go to the approver (set on the asyncio facade); its no is the model's error."""
    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.arguments.get("text") != "deny me"

    async def main() -> list[BaseMessage]:
        await service.add(fault_input("f", isTrusted=False))
        service.set_approver(approver)
        tools = await load_tools(service, ["f"], tools=["echo"])
        return await run_agent(tools, ("mcp__f__echo", {"text": "deny me"}), ("mcp__f__echo", {"text": "allow me"}))

    messages = asyncio.run(main())
    denied, allowed = tool_messages(messages)
    assert denied.status == "error"
    assert str(denied.content).startswith("Error: tool 'mcp__f__echo': ") and "not approved" in str(denied.content)
    assert (allowed.status, allowed.content) == ("success", "allow me")
    assert [(r.server_name, r.tool_name, dict(r.arguments)) for r in asked] == [
        ("f", "echo", {"text": "deny me"}),
        ("f", "echo", {"text": "allow me"}),
    ]


def test_servers_tools_and_naming_choose_what_the_agent_gets(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """servers=, tools= and naming= pick and name the tools; disabled tools never show; failures are reported."""
    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()

    async def main() -> dict[str, Any]:
        await service.add(fault_input("f", disabledTools=["add"]))
        picked = await load_tools(service, ["f", "nope"], tools=["echo", "mcp__f__sleep", "add"])
        everything = await load_tools(service, ["f"])
        own_names = await load_tools(service, ["f"], naming="tool", tools=lambda tool: tool.name != "sleep")
        custom = await load_tools(service, ["f"], tools=["echo"], naming=lambda tool: f"{tool.server_name}_{tool.name}")
        with pytest.raises(ValueError, match=r"'mcp__demo__echo' and 'mcp__f__echo'"):
            await load_tools(service, naming="tool")
        messages = await run_agent(own_names, ("echo", {"text": "by its own name"}))
        return {
            "picked": [t.name for t in picked],
            "failures": set(picked.failures),
            "everything": [t.name for t in everything],
            "own": [t.name for t in own_names],
            "custom": [t.name for t in custom],
            "said": messages[-1].content,
        }

    got = asyncio.run(main())
    assert got["picked"] == ["mcp__f__echo", "mcp__f__sleep"]
    assert got["failures"] == {"nope"}
    assert "mcp__f__add" not in got["everything"] and "mcp__f__echo" in got["everything"]
    assert "echo" in got["own"] and "sleep" not in got["own"] and "add" not in got["own"]
    assert got["custom"] == ["f_echo"]
    assert got["said"] == "saw: by its own name"


def test_the_trio_service_off_trio_is_refused_naming_the_facade(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """The runtime's trio McpService: refused on asyncio and by invoke, each RuntimeError naming the facade."""
    from mcp_actors.integrations.langchain import load_tools

    with pytest.raises(RuntimeError, match=r"portal\.asyncio_service\(\)"):
        asyncio.run(load_tools(portal.service, ["demo"]))
    on_trio = portal.run(load_tools, portal.service, ["demo"])
    echo = next(tool for tool in on_trio if tool.name == "mcp__demo__echo")
    with pytest.raises(RuntimeError, match=r"portal\.asyncio_service\(\)"):
        asyncio.run(echo.ainvoke({"text": "x"}))
    with pytest.raises(RuntimeError, match=r"cannot be called synchronously with McpService.*asyncio_service"):
        echo.invoke({"text": "x"})


# ---------------------------------------------------------------------- progress and LangGraph


def test_progress_reaches_astream_events_and_the_graphs_custom_stream(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """The demo sleep's progress is an on_custom_event in astream_events and a chunk of stream_mode="custom"."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from mcp_actors.integrations.langchain import PROGRESS_EVENT, load_tools

    service = portal.asyncio_service()

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        tools = await load_tools(service, ["demo"], tools=["sleep"])
        events: list[dict[str, Any]] = []
        agent = create_agent(scripted(("mcp__demo__sleep", {"seconds": 0.05})), tools)
        async for event in agent.astream_events({"messages": [HumanMessage("go")]}, version="v2"):
            if event["event"] == "on_custom_event" and event["name"] == PROGRESS_EVENT:
                events.append(dict(event["data"]))
        chunks: list[dict[str, Any]] = []
        agent = create_agent(scripted(("mcp__demo__sleep", {"seconds": 0.05})), tools)
        async for chunk in agent.astream({"messages": [HumanMessage("go")]}, stream_mode="custom"):
            chunks.append(chunk)
        return events, chunks

    events, chunks = asyncio.run(main())
    for seen in (events, chunks):
        assert seen, "no progress arrived"
        assert {(c["event"], c["tool"], c["server"], c["total"]) for c in seen} == {
            (PROGRESS_EVENT, "mcp__demo__sleep", "demo", 0.05)
        }
        assert [c["progress"] for c in seen] == sorted(c["progress"] for c in seen)


def tool_graph(tools: Sequence[BaseTool], calls: tuple[str, dict[str, Any]], idle: float) -> Any:
    """A LangGraph graph: one scripted model turn, then a ToolNode under an idle timeout refreshed by heartbeats."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
    from langgraph.types import TimeoutPolicy

    model = scripted(calls)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools), timeout=TimeoutPolicy(idle_timeout=idle, refresh_on="heartbeat"))
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def test_progress_is_a_langgraph_heartbeat_that_keeps_an_idle_timeout_off(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """A ToolNode under idle_timeout=0.6 s (heartbeats only) lets a 1.2 s call finish: each progress is a heartbeat."""
    from langchain_core.messages import HumanMessage

    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()

    async def main() -> list[BaseMessage]:
        tools = await load_tools(service, ["demo"], tools=["sleep"])
        # Ten progress notifications 0.12 s apart: 1.2 s in all, never 0.6 s without a heartbeat.
        graph = tool_graph(tools, ("mcp__demo__sleep", {"seconds": 1.2}), idle=0.6)
        result = await asyncio.wait_for(graph.ainvoke({"messages": [HumanMessage("go")]}), BOUND)
        return list(result["messages"])

    (slept,) = tool_messages(asyncio.run(main()))
    assert slept.status == "success" and str(slept.content).startswith("slept 1.2")


def test_a_langgraph_idle_timeout_cancels_a_silent_call_on_the_server(portal: RuntimePortal) -> None:
    """A call with no progress under a ToolNode idle_timeout: the node times out and the server is told to cancel."""
    from langchain_core.messages import HumanMessage
    from langgraph.errors import NodeTimeoutError

    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()

    async def main() -> BaseException | None:
        await service.add(fault_input("f", "--hang-tool", "sleep"))
        tools = await load_tools(service, ["f"], tools=["sleep"])
        graph = tool_graph(tools, ("mcp__f__sleep", {"seconds": 100}), idle=0.3)
        try:
            await asyncio.wait_for(graph.ainvoke({"messages": [HumanMessage("go")]}), BOUND)
        except NodeTimeoutError as exc:
            timed_out: BaseException | None = exc
        else:
            timed_out = None
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: cancelled")
        return timed_out

    assert isinstance(asyncio.run(main()), NodeTimeoutError)
    assert portal.sync_service().status("f").calls_in_flight == 0


# ---------------------------------------------------------------------- the blocking path


def test_invoke_blocks_on_the_portal_and_is_refused_on_a_running_loop(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """agent.invoke (a sync ToolNode) calls through the portal; tool.invoke on a thread running a loop is refused."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from mcp_actors.integrations.langchain import load_tools

    service = portal.asyncio_service()
    tools = asyncio.run(load_tools(service, ["demo"], tools=["echo"]))
    agent = create_agent(scripted(("mcp__demo__echo", {"text": "from a thread"})), tools)
    result = agent.invoke({"messages": [HumanMessage("go")]})
    assert result["messages"][-1].content == "saw: from a thread"
    assert tools[0].invoke({"text": "plain"}) == "plain"

    async def on_the_loop() -> None:
        tools[0].invoke({"text": "blocked"})

    with pytest.raises(RuntimeError, match=r"running an asyncio loop.*ainvoke"):
        asyncio.run(on_the_loop())
