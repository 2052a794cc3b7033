"""The supervised servers as a Google ADK toolset, under ADK's real Runner and LlmAgent.

Every agent run is ADK's own: an ``InMemoryRunner`` drives an ``LlmAgent`` whose model is a
scripted ``BaseLlm`` (as ADK's own tests script theirs): it calls the tools it was given,
one per turn, then answers with the results it saw as JSON, so a test reads exactly what
reached the model. The servers run behind the portal's asyncio facade: the real demo and
fault servers (processes) where a process is the point (killing one, watching its stderr for
a cancellation, nothing left at close), their in-memory twins elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest
import trio
from testkit import is_infrastructure

from mcp_actors.demo_server import EXTRA_TOOL_NAME
from mcp_actors.portal import AsyncioMcpService, RuntimePortal, start_portal
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import fault_server_command, live_descendants
from mcp_actors.testing.memory import InMemoryServers

# The framework, and our adapter of it (which imports it), are imported by the tests that use them: every
# pytest-xdist worker imports this file to collect it, and importing the framework costs seconds.
if TYPE_CHECKING:
    from google.adk.agents.readonly_context import ReadonlyContext
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google_adk_kit import Call, ScriptedModel


BOUND = 30.0
"""Generous: a server's first start on a loaded machine. Only a broken test waits this long."""


async def run_agent(tools: list[Any], calls: list[Call], **run: Any) -> tuple[list[dict[str, Any]], ScriptedModel]:
    """Run an LlmAgent with ``tools`` through ADK's InMemoryRunner; the tool responses the model saw."""
    from google.adk.agents.llm_agent import LlmAgent
    from google.adk.runners import InMemoryRunner
    from google.genai import types
    from google_adk_kit import ScriptedModel

    model = ScriptedModel(calls=calls)
    agent = LlmAgent(name="assistant", model=model, tools=tools, instruction="Use the tools.")
    async with InMemoryRunner(agent=agent, app_name="adk_test") as runner:
        session = await runner.session_service.create_session(app_name="adk_test", user_id="user")
        message = types.Content(role="user", parts=[types.Part.from_text(text="go")])
        texts = [
            part.text
            async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message, **run)
            for part in (event.content.parts or [] if event.content else [])
            if part.text
        ]
    return (json.loads(texts[-1]) if texts else []), model


def answer(response: dict[str, Any]) -> dict[str, Any]:
    """A tool response without the server's ``meta`` (the demo server names itself there)."""
    return {key: value for key, value in response.items() if key != "meta"}


def fault_input(name: str, *flags: str) -> dict[str, Any]:
    """A config entry running the fault server with ``flags``."""
    argv = fault_server_command(*flags)
    return {"name": name, "type": "stdio", "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0}}


def wait_stderr(portal: RuntimePortal, server: str, text: str, *, count: int = 1) -> None:
    """Block until the server has written ``count`` distinct stderr lines containing ``text``."""
    seen: set[str] = set()

    def enough(line: str) -> bool:
        if text in line:
            seen.add(line)
        return len(seen) >= count

    async def wait() -> None:
        service = portal.service
        handle = service._registry.snapshot.handles[service.get(server).id]
        with trio.fail_after(BOUND):
            await handle.wait_for_stderr(enough)

    portal.run(wait)


def server_processes() -> list[psutil.Process]:
    """Our descendants that are not long-lived helpers (the reaper sidecar)."""
    return live_descendants(ignore=lambda proc: is_infrastructure(" ".join(proc.cmdline())))


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[RuntimePortal]:
    """A running portal on a fresh config (the demo server); no server process left after it closes."""
    with start_portal(str(tmp_path / "cfg.json")) as running:
        yield running
    assert server_processes() == []


def in_asyncio(main: Any) -> Any:
    """Run ``main()`` in a fresh asyncio loop, bounded: ADK runs on asyncio."""

    async def bounded() -> Any:
        return await asyncio.wait_for(main(), BOUND)

    return asyncio.run(bounded())


# ---------------------------------------------------------------------- real processes


def test_an_agent_calls_demo_tools_and_sees_their_output_and_nothing_outlives_the_portal(tmp_path: Path) -> None:
    """The model calls echo and add on the real demo server and sees their MCP results; closing the
    runner leaves the server running (the runtime owns it); closing the portal leaves no process."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    with start_portal(str(tmp_path / "cfg.json")) as portal:
        service = portal.asyncio_service()

        async def main() -> tuple[list[dict[str, Any]], ScriptedModel, dict[str, Any]]:
            toolset = McpActorsToolset(service)
            calls: list[Call] = [("mcp__demo__echo", {"text": "hello from adk"}), ("mcp__demo__add", {"a": 2, "b": 3})]
            seen, model = await run_agent([toolset], calls)
            [echo] = [tool for tool in await service.list_server_tools("demo") if tool.name == "echo"]
            return seen, model, echo.input_schema

        seen, model, echo_schema = in_asyncio(main)
        assert answer(seen[0]) == {"content": [{"type": "text", "text": "hello from adk"}], "isError": False}
        assert seen[1]["structuredContent"] == {"result": 5.0} and seen[1]["isError"] is False
        assert {"mcp__demo__echo", "mcp__demo__add", "mcp__demo__sleep"} <= set(model.offered())
        [declarations] = [tool.function_declarations for tool in model.requests[0].config.tools or []]
        declared = {d.name: d for d in declarations or []}["mcp__demo__echo"]
        assert declared.parameters_json_schema == echo_schema
        assert declared.description == "Return the given text unchanged."
        # Runner.close() closed the toolset: the server is still connected, its process alive.
        status = portal.sync_service().status("demo")
        assert status.state.value == "connected" and status.process is not None
        process = psutil.Process(status.process.pid)
        assert process.create_time() == status.process.create_time
    assert not process.is_running()
    assert server_processes() == []


def test_a_server_killed_mid_call_fails_that_call_fast_naming_it_and_the_next_call_works(portal: RuntimePortal) -> None:
    """Killing the server's process during a call: the model gets an error naming server and tool at once,
    and the next run's call reaches the restarted server."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> tuple[list[dict[str, Any]], float, list[dict[str, Any]]]:
        await service.add(fault_input("f", "--hang-tool", "sleep"))
        await service.connect("f")
        toolset = McpActorsToolset(service, ["f"])
        run = asyncio.create_task(run_agent([toolset], [("mcp__f__sleep", {"seconds": 60})]))
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: hanging call")
        identity = service.status("f").process
        assert identity is not None
        victim = psutil.Process(identity.pid)
        assert victim.create_time() == identity.create_time
        victim.kill()
        killed_at = time.monotonic()
        failed, _ = await run
        took = time.monotonic() - killed_at
        after, _ = await run_agent([toolset], [("mcp__f__echo", {"text": "back again"})])
        return failed, took, after

    failed, took, after = in_asyncio(main)
    [error] = failed
    assert error["error"].startswith("Error: tool 'mcp__f__sleep': ")
    assert "server 'f'" in error["error"]
    assert took < 3.0, f"the failed call took {took:.2f}s to reach the model"
    assert [answer(a) for a in after] == [{"content": [{"type": "text", "text": "back again"}], "isError": False}]
    assert portal.sync_service().status("f").restarts >= 1


def test_cancelling_the_runners_task_or_aborting_the_run_cancels_the_call_on_the_server(portal: RuntimePortal) -> None:
    """Cancelling the task iterating ``run_async``, or setting its ``abort_signal``, cancels the tool call
    on the server (the fault server logs the cancellation) and leaves no call in flight."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> None:
        await service.add(fault_input("f", "--hang-tool", "sleep"))
        await service.connect("f")  # its process runs: its stderr can be watched
        toolset = McpActorsToolset(service, ["f"])
        run = asyncio.create_task(run_agent([toolset], [("mcp__f__sleep", {"seconds": 60})]))
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: hanging call")
        assert not run.done()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: cancelled")

        abort = asyncio.Event()
        aborted = asyncio.create_task(run_agent([toolset], [("mcp__f__sleep", {"seconds": 60})], abort_signal=abort))
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: hanging call", count=2)
        abort.set()
        seen, _ = await aborted
        assert seen == []  # the model never got a result: the call ended unanswered
        await asyncio.to_thread(wait_stderr, portal, "f", "fault: cancelled", count=2)
        assert service.status("f").calls_in_flight == 0

    in_asyncio(main)


# ---------------------------------------------------------------------- in-memory servers


def test_a_tool_error_and_a_typed_failure_reach_the_model_and_the_run_goes_on(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """A tool error (isError) arrives as the server's text marked isError; a call that times out arrives
    as ``{"error": ...}`` naming the tool and the bound; the model answers after both."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> list[dict[str, Any]]:
        await service.add(fault_input("f", "--hang-tool", "sleep"))
        toolset = McpActorsToolset(service, ["demo", "f"], timeout=0.5)
        calls: list[Call] = [("mcp__demo__fail", {"message": "no such file"}), ("mcp__f__sleep", {"seconds": 60})]
        seen, _ = await run_agent([toolset], calls)
        return seen

    tool_error, timed_out = in_asyncio(main)
    assert answer(tool_error) == {"content": [{"type": "text", "text": "no such file"}], "isError": True}
    assert timed_out["error"].startswith("Error: tool 'mcp__f__sleep' (tool 'sleep' of server 'f') ")
    assert "did not finish within 0.5s" in timed_out["error"]
    assert portal.sync_service().status("f").calls_in_flight == 0


def test_the_approver_is_asked_and_its_refusal_reaches_the_model(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """With the demo server untrusted, the service's approver decides each call: echo allowed, add refused."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.tool_name == "echo"

    async def main() -> list[dict[str, Any]]:
        await service.update("demo", isTrusted=False)
        service.set_approver(approver)
        try:
            toolset = McpActorsToolset(service, ["demo"])
            calls: list[Call] = [("mcp__demo__echo", {"text": "allowed"}), ("mcp__demo__add", {"a": 1, "b": 2})]
            seen, _ = await run_agent([toolset], calls)
        finally:
            service.set_approver(None)
        return seen

    echoed, refused = in_asyncio(main)
    assert [(r.server_name, r.tool_name, dict(r.arguments)) for r in asked] == [
        ("demo", "echo", {"text": "allowed"}),
        ("demo", "add", {"a": 1, "b": 2}),
    ]
    assert echoed["content"] == [{"type": "text", "text": "allowed"}]
    assert refused["error"].startswith("Error: tool 'mcp__demo__add': ") and "not approved" in refused["error"]


def test_selection_and_naming_choose_what_the_model_sees(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """``servers``, ``tools`` and ``naming`` pick and name the tools; a model calls one by its own name;
    two servers' tools under one name are refused naming both; a disabled tool is never offered."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> dict[str, Any]:
        await service.add(fault_input("f"))
        out: dict[str, Any] = {}
        own_names = McpActorsToolset(service, ["f"], tools=["echo", "mcp__f__add"], naming="tool")
        out["own"] = [tool.name for tool in await own_names.get_tools()]
        out["seen"], _ = await run_agent([own_names], [("echo", {"text": "by its own name"})])
        custom = McpActorsToolset(service, ["f"], tools=lambda tool: tool.name == "add", naming=lambda t: f"f_{t.name}")
        out["custom"] = [tool.name for tool in await custom.get_tools()]
        with pytest.raises(ValueError, match="'mcp__demo__echo' and 'mcp__f__echo'") as clash:
            await McpActorsToolset(service, naming="tool").get_tools()
        out["clash"] = str(clash.value)
        await service.update("demo", disabledTools=["echo"])
        out["enabled"] = [tool.name for tool in await McpActorsToolset(service, ["demo"]).get_tools()]
        return out

    out = in_asyncio(main)
    assert out["own"] == ["echo", "add"]
    [by_own_name] = out["seen"]
    assert answer(by_own_name) == {"content": [{"type": "text", "text": "by its own name"}], "isError": False}
    assert out["custom"] == ["f_add"]
    assert "mcp__demo__add" in out["enabled"] and "mcp__demo__echo" not in out["enabled"]


def test_adks_own_filter_and_prefix_apply_on_top(servers_in_memory: InMemoryServers, portal: RuntimePortal) -> None:
    """ADK's ``tool_filter`` (a predicate given the run's context) and ``tool_name_prefix`` work as on any toolset."""
    from google.adk.agents.readonly_context import ReadonlyContext

    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()
    contexts: list[object] = []

    def only_echo(tool: BaseTool, readonly_context: ReadonlyContext | None = None) -> bool:
        contexts.append(readonly_context)
        return tool.name == "mcp__demo__echo"

    async def main() -> tuple[list[dict[str, Any]], ScriptedModel]:
        toolset = McpActorsToolset(service, ["demo"], tool_filter=only_echo, tool_name_prefix="ext")
        return await run_agent([toolset], [("ext_mcp__demo__echo", {"text": "prefixed"})])

    seen, model = in_asyncio(main)
    assert model.offered() == ["ext_mcp__demo__echo"]
    assert [answer(a) for a in seen] == [{"content": [{"type": "text", "text": "prefixed"}], "isError": False}]
    assert contexts and all(isinstance(context, ReadonlyContext) for context in contexts)


def test_a_server_that_cannot_be_listed_is_left_out_and_reported(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """An unknown server in ``servers`` does not take the toolset down: the others' tools are offered."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> tuple[list[str], dict[str, str]]:
        toolset = McpActorsToolset(service, ["demo", "nope"], tools=["echo"])
        names = [tool.name for tool in await toolset.get_tools()]
        return names, {server: type(error).__name__ for server, error in toolset.failures.items()}

    assert in_asyncio(main) == (["mcp__demo__echo"], {"nope": "ServerNotFound"})


def test_a_changed_tool_list_is_seen_on_the_next_listing(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """Listing again without a change gives the same tool objects; after the server announces a new tool,
    the next ``get_tools`` offers it and an agent can call it."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> None:
        toolset = McpActorsToolset(service, ["demo"])
        before = {tool.name: tool for tool in await toolset.get_tools()}
        assert f"mcp__demo__{EXTRA_TOOL_NAME}" not in before
        again = {tool.name: tool for tool in await toolset.get_tools()}
        assert all(again[name] is tool for name, tool in before.items())
        await service.call_tool("demo", "toggle_extra_tool")
        after = {tool.name: tool for tool in await toolset.get_tools()}
        assert f"mcp__demo__{EXTRA_TOOL_NAME}" in after
        seen, _ = await run_agent([toolset], [(f"mcp__demo__{EXTRA_TOOL_NAME}", {})])
        assert seen[0]["content"] == [{"type": "text", "text": "the extra tool is here"}]

    in_asyncio(main)


def test_progress_reaches_adks_loop_through_a_callback_or_a_factory(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """ADK's progress channel, both shapes: an async callback gets every step of every call; a factory is
    asked per call with the tool name and the call's ToolContext, and the callback it returns (an object with
    an async ``__call__``) gets every step. Both run on ADK's loop thread."""
    from google.adk.tools.tool_context import ToolContext

    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()
    asked: list[tuple[str, object]] = []

    class Recorder:
        def __init__(self) -> None:
            self.steps: list[tuple[float, float | None, int]] = []
            self.finished = asyncio.Event()

        async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
            self.steps.append((progress, total, threading.get_ident()))
            if total is not None and progress >= total:
                self.finished.set()

    async def main() -> tuple[Recorder, Recorder, list[dict[str, Any]]]:
        direct, made = Recorder(), Recorder()

        async def callback(progress: float, total: float | None, message: str | None) -> None:
            await direct(progress, total, message)

        def factory(tool_name: str, *, callback_context: ToolContext | None = None, **kwargs: Any) -> Recorder:
            asked.append((tool_name, callback_context))
            return made

        with_callback = McpActorsToolset(service, ["demo"], tools=["sleep"], progress_callback=callback)
        with_factory = McpActorsToolset(service, ["demo"], tools=["echo"], naming="tool", progress_callback=factory)
        calls: list[Call] = [("mcp__demo__sleep", {"seconds": 0.1}), ("echo", {"text": "no progress"})]
        seen, _ = await run_agent([with_callback, with_factory], calls)
        await direct.finished.wait()
        seen_too, _ = await run_agent([with_factory], [("echo", {"text": "again"})])
        with_factory_sleep = McpActorsToolset(service, ["demo"], tools=["sleep"], progress_callback=factory)
        await run_agent([with_factory_sleep], [("mcp__demo__sleep", {"seconds": 0.1})])
        await made.finished.wait()
        return direct, made, seen + seen_too

    direct, made, seen = in_asyncio(main)
    assert seen[0]["content"] == [{"type": "text", "text": "slept 0.1 s"}]
    assert [answer(a)["content"][0]["text"] for a in seen[1:]] == ["no progress", "again"]
    assert [name for name, _ in asked] == ["echo", "echo", "mcp__demo__sleep"]
    assert all(isinstance(context, ToolContext) for _, context in asked)
    for recorder in (direct, made):
        assert len(recorder.steps) == 10 and recorder.steps[-1][:2] == (0.1, 0.1)
        assert {ident for *_, ident in recorder.steps} == {threading.get_ident()}


def test_tools_named_like_adks_own_functions_are_left_out(
    servers_in_memory: InMemoryServers, portal: RuntimePortal, caplog: pytest.LogCaptureFixture
) -> None:
    """Under ``naming="tool"`` the demo's ``finish_task``, and a name mapped to ``transfer_to_agent``, are not
    offered (ADK would run its own function in their place), each with one warning naming tool and server."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> tuple[list[str], list[str]]:
        by_own_name = McpActorsToolset(service, ["demo"], naming="tool")
        own = [tool.name for tool in await by_own_name.get_tools()]
        assert [tool.name for tool in await by_own_name.get_tools()] == own  # listed again: warned once
        mapped = McpActorsToolset(service, ["demo"], naming=lambda t: "transfer_to_agent" if t.name == "add" else t.id)
        return own, [tool.name for tool in await mapped.get_tools()]

    with caplog.at_level(logging.WARNING, logger="mcp_actors.integrations.google_adk"):
        own, mapped = in_asyncio(main)
    assert "echo" in own and "finish_task" not in own
    assert "mcp__demo__echo" in mapped and "transfer_to_agent" not in mapped
    warnings = [record.getMessage() for record in caplog.records]
    assert sum("'finish_task' of server 'demo'" in w for w in warnings) == 1
    assert any("'add' of server 'demo'" in w and "'transfer_to_agent'" in w for w in warnings)


def test_a_tool_held_directly_by_an_agent_calls_through_the_service(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """An McpActorsTool taken out of the toolset works on its own in ``LlmAgent(tools=[...])``."""
    from mcp_actors.integrations.google_adk import McpActorsTool, McpActorsToolset

    service = portal.asyncio_service()

    async def main() -> list[dict[str, Any]]:
        tools = await McpActorsToolset(service, ["demo"], tools=["add"]).get_tools()
        assert all(isinstance(tool, McpActorsTool) for tool in tools)
        seen, _ = await run_agent(tools, [("mcp__demo__add", {"a": 40, "b": 2})])
        return seen

    [added] = in_asyncio(main)
    assert added["structuredContent"] == {"result": 42.0}


def test_bad_options_are_refused_when_the_toolset_is_built(portal: RuntimePortal) -> None:
    """Refused at construction (ADK would swallow a listing's error): the trio McpService, one string for
    servers, a bad naming, a bad timeout, a progress callback that is not callable."""
    from mcp_actors.integrations.google_adk import McpActorsToolset

    service: AsyncioMcpService = portal.asyncio_service()
    with pytest.raises(TypeError, match=r"asyncio facade, got McpService.*portal\.asyncio_service\(\)"):
        McpActorsToolset(portal.service)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="servers must be a collection"):
        McpActorsToolset(service, "demo")
    with pytest.raises(ValueError, match="naming must be"):
        McpActorsToolset(service, naming="name")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0, got -1"):
        McpActorsToolset(service, timeout=-1)
    with pytest.raises(TypeError, match="progress_callback must be callable"):
        McpActorsToolset(service, progress_callback=3)  # type: ignore[arg-type]
