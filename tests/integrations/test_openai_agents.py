"""The supervised servers as OpenAI Agents SDK MCP servers, under real ``Runner.run`` agent runs.

The model is scripted (``openai_agents_kit.ScriptedModel``, an ``agents.models.interface.Model``): its
turns call MCP tools, and its last turn answers with every tool output it was given, so
each test asserts what the model really saw. The runtime runs in a portal; the SDK awaits
the portal's asyncio facade. The demo server of test (a) and the fault servers of the
supervision tests (a kill, a cancellation, processes at close) are real processes; the
rules (selection, naming, filters, approver, progress, errors) run on the servers'
in-memory twins (``servers_in_memory``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
from testkit import is_infrastructure

from mcp_actors.errors import CommandNotFound, ServerNotFound, ServerStartFailed, ToolCallDenied
from mcp_actors.portal import AsyncioMcpService, RuntimePortal, start_portal
from mcp_actors.service import ApprovalRequest
from mcp_actors.testing import fault_server_command, live_descendants
from mcp_actors.testing.memory import InMemoryServers

# The framework, and our adapter of it (which imports it), are imported by the tests that use them: every
# pytest-xdist worker imports this file to collect it, and importing the framework costs seconds.

BOUND = 60.0
"""Generous bound of a wait: only a broken test reaches it (a loaded 2-core machine starts servers slowly)."""


# ---------------------------------------------------------------------- fixtures and helpers


def server_processes() -> list[psutil.Process]:
    """Our descendants that are not the test process's own helpers (the reaper sidecar)."""
    return live_descendants(ignore=lambda p: is_infrastructure(" ".join(p.cmdline())))


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[RuntimePortal]:
    """A running portal on a fresh config (the demo server only); no server process left after it closes."""
    with start_portal(str(tmp_path / "cfg.json")) as running:
        yield running
    assert server_processes() == []


def fault_entry(name: str, *flags: str, trusted: bool = True) -> dict[str, Any]:
    """A config entry running the fault server (in memory under ``servers_in_memory``, else a process)."""
    argv = fault_server_command(*flags)
    return {
        "name": name,
        "type": "stdio",
        "config": {"command": argv[0], "args": argv[1:], "pingInterval": 0},
        "isTrusted": trusted,
    }


async def wait_stderr(portal: RuntimePortal, server: str, text: str) -> None:
    """Wait (in a thread, off the agent's loop) until the server's process writes a stderr line containing ``text``."""

    async def wait() -> None:
        with trio.fail_after(BOUND):
            await portal.service.wait_for_stderr(server, lambda line: text in line)

    await asyncio.to_thread(portal.run, wait)


def run(main: Callable[[], Any]) -> Any:
    """``asyncio.run(main())``, bounded."""

    async def bounded() -> Any:
        return await asyncio.wait_for(main(), BOUND)

    return asyncio.run(bounded())


# ---------------------------------------------------------------------- (a) a real agent run


def test_an_agent_run_calls_the_demo_servers_tools_and_the_model_sees_their_output(portal: RuntimePortal) -> None:
    """Runner.run over the real demo process: the model calls echo and add at once and reads both results."""
    from agents import Agent, Runner
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    model = ScriptedModel([("mcp__demo__echo", {"text": "from the agent"}), ("mcp__demo__add", {"a": 2, "b": 3})])

    async def main() -> str:
        servers = await mcp_servers(service)
        assert [(s.name, s.server) for s in servers] == [("demo", service.get("demo").id)]
        result = await Runner.run(Agent(name="a", model=model, mcp_servers=servers), "go", run_config=NO_TRACING)
        return str(result.final_output)

    assert run(main) == "from the agent | 5.0"
    assert {"mcp__demo__echo", "mcp__demo__add", "mcp__demo__sleep"} <= set(model.tools_seen[0])
    assert model.outputs == ["from the agent", "5.0"]


# ---------------------------------------------------------------------- (b) supervision under the SDK


def test_a_server_killed_mid_call_fails_that_call_fast_and_the_next_call_works(portal: RuntimePortal) -> None:
    """Its process killed during a call: the model reads an error naming tool and server, then calls it again fine."""
    from agents import Agent, Runner
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers, tool_failure_message

    service = portal.asyncio_service()
    model = ScriptedModel([("mcp__f__sleep", {"seconds": 1})], [("mcp__f__echo", {"text": "back"})])
    failed_at: list[float] = []

    def timed_failure_message(context: Any, error: Exception) -> str:
        failed_at.append(time.monotonic())
        return tool_failure_message(context, error)

    async def main() -> tuple[str, float]:
        await service.add(fault_entry("f", "--hang-tool", "sleep"))
        await service.connect("f")  # its process runs: its stderr can be watched
        servers = await mcp_servers(service, ["f"], failure_error_function=timed_failure_message)
        agent = Agent(name="a", model=model, mcp_servers=servers)
        running = asyncio.create_task(Runner.run(agent, "go", run_config=NO_TRACING))
        await wait_stderr(portal, "f", "fault: hanging call")
        pid = service.status("f").pid
        assert pid is not None
        psutil.Process(pid).kill()
        killed_at = time.monotonic()
        result = await running
        return str(result.final_output), killed_at

    final, killed_at = run(main)
    [failed] = failed_at
    assert failed - killed_at < 5.0  # the connection's death fails the call at once, not at its timeout
    failure, echoed = final.split(" | ")
    assert failure.startswith("Error: tool 'mcp__f__sleep': server 'f'")
    assert echoed == "back"
    assert service.status("f").restarts >= 1


def test_cancelling_the_agent_run_cancels_the_call_on_the_server(portal: RuntimePortal) -> None:
    """The run's task cancelled while a tool call hangs: the server is told to cancel; nothing stays in flight."""
    from agents import Agent, Runner
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    model = ScriptedModel([("mcp__f__sleep", {"seconds": 1})])

    async def main() -> None:
        await service.add(fault_entry("f", "--hang-tool", "sleep"))
        await service.connect("f")  # its process runs: its stderr can be watched
        agent = Agent(name="a", model=model, mcp_servers=await mcp_servers(service, ["f"]))
        running = asyncio.create_task(Runner.run(agent, "go", run_config=NO_TRACING))
        await wait_stderr(portal, "f", "fault: hanging call")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await wait_stderr(portal, "f", "fault: cancelled")

    run(main)
    assert service.status("f").calls_in_flight == 0


# ---------------------------------------------------------------------- (c) processes


def test_the_manager_connects_through_the_runtime_and_nothing_outlives_the_portal(tmp_path: Path) -> None:
    """The manager's connect starts the server in the runtime; its cleanup leaves it; closing the portal ends it."""
    from agents import Agent, Runner
    from agents.mcp import MCPServerManager
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    model = ScriptedModel([("mcp__f__echo", {"text": "one"})])
    with start_portal(str(tmp_path / "cfg.json")) as portal:
        service = portal.asyncio_service()

        async def main() -> tuple[str, int]:
            await service.add(fault_entry("f"))
            async with MCPServerManager(await mcp_servers(service, ["f"]), strict=True) as manager:
                pid = service.status("f").pid  # connected by connect(): the runtime spawned it
                assert pid is not None
                agent = Agent(name="a", model=model, mcp_servers=manager.active_servers)
                result = await Runner.run(agent, "go", run_config=NO_TRACING)
            return str(result.final_output), pid

        final, pid = run(main)
        assert final == "one"
        # The manager's cleanup left the supervised server running: the runtime owns it.
        assert psutil.pid_exists(pid) and service.status("f").pid == pid
    assert server_processes() == []
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_manager_leaves_out_a_server_that_cannot_connect(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """A disabled server fails its connect(): the manager keeps the others; an unknown name fails at once."""
    from agents.mcp import MCPServerManager

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()

    async def main() -> tuple[list[str], list[str], BaseException]:
        await service.add({**fault_entry("off"), "isActive": False})
        with pytest.raises(ServerNotFound, match="nope"):
            await mcp_servers(service, ["demo", "nope"])
        async with MCPServerManager(await mcp_servers(service, ["demo", "off"])) as manager:
            [error] = manager.errors.values()
            return [s.name for s in manager.active_servers], [s.name for s in manager.failed_servers], error

    active, failed, error = run(main)
    assert (active, failed) == (["demo"], ["off"])
    assert "off" in str(error)


def test_a_server_down_keeps_its_last_listing_and_a_misconfigured_one_fails_it(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """A listing that fails while the server restarts offers the last tools; a server no retry can fix raises."""
    from mcp_actors.integrations.openai_agents import SupervisedMcpServer, mcp_servers

    service = portal.asyncio_service()

    async def main() -> None:
        await service.add(fault_entry("flaky"))
        await service.add(fault_entry("broken"))
        flaky, broken = await mcp_servers(service, ["flaky", "broken"])
        listed = [tool.name for tool in await flaky.list_tools()]
        assert [tool.name for tool in await broken.list_tools()] == [name.replace("flaky", "broken") for name in listed]
        exits = fault_server_command("--exit-at-start", "1")
        await service.update("flaky", {"config": {"command": exits[0], "args": exits[1:], "pingInterval": 0}})
        await service.update("broken", {"config": {"command": "/nonexistent/server", "args": [], "pingInterval": 0}})
        assert [tool.name for tool in await flaky.list_tools()] == listed
        with pytest.raises(CommandNotFound, match="broken"):
            await broken.list_tools()
        with pytest.raises(ServerStartFailed):  # never listed: nothing to fall back on
            await SupervisedMcpServer(service, "flaky").list_tools()

    run(main)


# ---------------------------------------------------------------------- (d) selection, naming, filters


def test_selection_and_naming_decide_what_the_model_sees(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """tools= selects, naming='tool' keeps own names (the SDK prefixes them on request), a function names freely."""
    from agents import Agent, Runner
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    own = ScriptedModel([("echo", {"text": "own name"})])
    prefixed = ScriptedModel([("mcp_f__add", {"a": 1, "b": 2})])
    custom = ScriptedModel()

    async def main() -> list[str]:
        await service.add(fault_entry("f"))
        finals = []
        picked = await mcp_servers(service, ["f"], tools=["echo", "mcp__f__add"], naming="tool")
        agent = Agent(name="a", model=own, mcp_servers=picked)
        finals.append((await Runner.run(agent, "go", run_config=NO_TRACING)).final_output)
        agent = Agent(name="a", model=prefixed, mcp_servers=picked, mcp_config={"include_server_in_tool_names": True})
        finals.append((await Runner.run(agent, "go", run_config=NO_TRACING)).final_output)
        renamed = await mcp_servers(service, ["f"], tools=lambda t: t.name == "sleep", naming=lambda t: "nap")
        await Runner.run(Agent(name="a", model=custom, mcp_servers=renamed), "go", run_config=NO_TRACING)
        return finals

    assert run(main) == ["own name", "3"]
    assert own.tools_seen[0] == ["echo", "add"]
    assert prefixed.tools_seen[0] == ["mcp_f__echo", "mcp_f__add"]
    assert custom.tools_seen == [["nap"]]


def test_the_sdks_tool_filter_applies_static_and_dynamic(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """tool_filter works as on the SDK's own servers: allow/block lists, and a function given the run's agent."""
    from agents import Agent, Runner
    from agents.exceptions import UserError
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    static = ScriptedModel()
    dynamic = ScriptedModel()
    seen_contexts: list[tuple[str, str]] = []

    async def only_for_agent_b(context: Any, tool: Any) -> bool:
        seen_contexts.append((context.agent.name, context.server_name))
        return context.agent.name == "b" and tool.name != "mcp__f__big"

    async def main() -> None:
        await service.add(fault_entry("f"))
        blocked = await mcp_servers(
            service,
            ["f"],
            tool_filter={"allowed_tool_names": ["mcp__f__echo", "mcp__f__add"], "blocked_tool_names": ["mcp__f__add"]},
        )
        await Runner.run(Agent(name="a", model=static, mcp_servers=blocked), "go", run_config=NO_TRACING)
        [server] = await mcp_servers(service, ["f"], tool_filter=only_for_agent_b)
        await Runner.run(Agent(name="b", model=dynamic, mcp_servers=[server]), "go", run_config=NO_TRACING)
        with pytest.raises(UserError, match="dynamic tool filtering"):
            await server.list_tools()

    run(main)
    assert static.tools_seen == [["mcp__f__echo"]]
    assert "mcp__f__echo" in dynamic.tools_seen[0] and "mcp__f__big" not in dynamic.tools_seen[0]
    assert set(seen_contexts) == {("b", "f")}


def test_a_changed_tool_list_shows_on_the_next_turn_and_disabled_tools_never_do(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """tools/list_changed: a tool a call adds is offered on the next turn; one in disabledTools never is."""
    from agents import Agent, Runner
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    model = ScriptedModel([("mcp__demo__toggle_extra_tool", {})], [("mcp__demo__extra", {})])

    async def main() -> str:
        await service.update("demo", disabledTools=["big"])
        agent = Agent(name="a", model=model, mcp_servers=await mcp_servers(service, ["demo"]))
        return str((await Runner.run(agent, "go", run_config=NO_TRACING)).final_output)

    final = run(main)
    first, second, third = model.tools_seen
    assert "mcp__demo__extra" not in first and "mcp__demo__extra" in second
    assert "mcp__demo__big" not in first + second + third
    assert "extra" in final.split(" | ")[1]


# ---------------------------------------------------------------------- (d) approver, errors, progress


def test_the_runtimes_approver_is_asked_and_a_denial_reaches_the_model(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """An untrusted server's calls go to set_approver's approver; a "no" is an error naming tool and server."""
    from agents import Agent, Runner
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    asked: list[tuple[str, str, dict[str, Any]]] = []
    model = ScriptedModel([("mcp__u__echo", {"text": "yes"}), ("mcp__u__echo", {"text": "no"})])

    async def approver(request: ApprovalRequest) -> bool:
        asked.append((request.server_name, request.tool_name, dict(request.arguments)))
        return request.arguments.get("text") == "yes"

    async def main() -> str:
        await service.add(fault_entry("u", trusted=False))
        service.set_approver(approver)
        try:
            agent = Agent(name="a", model=model, mcp_servers=await mcp_servers(service, ["u"]))
            return str((await Runner.run(agent, "go", run_config=NO_TRACING)).final_output)
        finally:
            service.set_approver(None)

    approved, denied = run(main).split(" | ")
    assert approved == "yes"
    assert denied == "Error: tool 'mcp__u__echo': the call to 'echo' of server 'u' was not approved"
    assert sorted(asked, key=str) == [("u", "echo", {"text": "no"}), ("u", "echo", {"text": "yes"})]


def test_without_a_failure_function_the_run_raises_the_typed_error_as_the_cause(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """failure_error_function=None: the run raises the SDK's UserError, caused by our typed error."""
    from agents import Agent, Runner
    from agents.exceptions import UserError
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    model = ScriptedModel([("mcp__u__echo", {"text": "x"})])

    async def main() -> None:
        await service.add(fault_entry("u", trusted=False))
        servers = await mcp_servers(service, ["u"], failure_error_function=None)
        service.set_approver(lambda request: False)
        try:
            with pytest.raises(UserError) as info:
                await Runner.run(Agent(name="a", model=model, mcp_servers=servers), "go", run_config=NO_TRACING)
        finally:
            service.set_approver(None)
        assert isinstance(info.value.__cause__, ToolCallDenied)
        assert str(info.value).startswith("tool 'mcp__u__echo': ")
        with pytest.raises(UserError, match="'nope' is not offered by MCP server 'u'"):
            await servers[0].call_tool("nope", {})
        with pytest.raises(UserError, match="_meta"):
            await servers[0].call_tool("mcp__u__echo", {"text": "x"}, meta={"k": 1})

    run(main)


def test_the_failure_message_shows_our_errors_and_hides_others() -> None:
    """tool_failure_message: a typed error (however wrapped) is shown to the model; others get the SDK's text."""
    from agents.exceptions import UserError

    from mcp_actors.integrations.openai_agents import tool_failure_message

    denied = ToolCallDenied("tool 'mcp__u__echo': not approved", server="u", tool="echo")
    wrapped = UserError(str(denied))
    wrapped.__cause__ = denied
    assert tool_failure_message(None, wrapped) == "Error: tool 'mcp__u__echo': not approved"  # type: ignore[arg-type]
    assert "error occurred" in tool_failure_message(None, RuntimeError("secret"))  # type: ignore[arg-type]


def test_progress_reaches_on_progress_on_the_agents_loop_named_by_tool(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """on_progress gets (tool, progress, total, message) for every notification, on the agent loop's thread."""
    from agents import Agent, Runner
    from openai_agents_kit import NO_TRACING, ScriptedModel

    from mcp_actors.integrations.openai_agents import mcp_servers

    service = portal.asyncio_service()
    model = ScriptedModel([("mcp__demo__sleep", {"seconds": 0.05})])
    seen: list[tuple[str, float, float | None, int]] = []

    async def main() -> str:
        done = asyncio.Event()

        async def on_progress(tool: str, progress: float, total: float | None, message: str | None) -> None:
            seen.append((tool, progress, total, threading.get_ident()))
            if total is not None and progress >= total:
                done.set()

        servers = await mcp_servers(service, ["demo"], on_progress=on_progress)
        result = await Runner.run(Agent(name="a", model=model, mcp_servers=servers), "go", run_config=NO_TRACING)
        await done.wait()
        return str(result.final_output)

    assert run(main).startswith("slept")
    assert len(seen) == 10
    assert {(tool, total, ident) for tool, _, total, ident in seen} == {
        ("mcp__demo__sleep", 0.05, threading.get_ident())
    }


# ---------------------------------------------------------------------- the rest of the MCPServer interface


def test_prompts_resources_and_the_lifecycle_without_a_process_of_its_own(
    servers_in_memory: InMemoryServers, portal: RuntimePortal
) -> None:
    """Prompts and resources come from the runtime; cleanup forgets the listing; no connect is needed to call."""
    from agents.exceptions import UserError

    from mcp_actors.integrations.openai_agents import SupervisedMcpServer

    service = portal.asyncio_service()

    async def main() -> None:
        server = SupervisedMcpServer(service, "demo")
        assert server.cached_tools is None
        echoed = await server.call_tool("mcp__demo__echo", {"text": "no connect"})  # lists once, then calls
        assert echoed.content[0].text == "no connect"  # type: ignore[union-attr]
        cached = server.cached_tools
        assert cached is not None and "mcp__demo__echo" in {t.name for t in cached}
        assert "greeting" in {p.name for p in (await server.list_prompts()).prompts}
        prompt = await server.get_prompt("greeting", {"name": "Ada"})
        assert "Ada" in str(prompt.messages[0].content)
        assert "demo://readme" in {str(r.uri) for r in (await server.list_resources()).resources}
        assert (await server.list_resource_templates()).resource_templates
        assert (await server.read_resource("demo://readme")).contents
        with pytest.raises(UserError, match="one page"):
            await server.list_resources("next")
        await server.cleanup()
        assert server.cached_tools is None
        assert service.status("demo").state.value == "connected"  # cleanup left the server alone

    run(main)
    assert servers_in_memory.starts["demo"] == 1


def test_options_are_checked_when_given_and_the_trio_service_is_refused_on_asyncio(portal: RuntimePortal) -> None:
    """A bad timeout or a tools string fails at construction; the trio McpService on asyncio names the facade."""
    from mcp_actors.integrations.openai_agents import SupervisedMcpServer, mcp_servers

    service: AsyncioMcpService = portal.asyncio_service()
    with pytest.raises(ValueError, match="timeout"):
        SupervisedMcpServer(service, "demo", timeout=0)
    with pytest.raises(TypeError, match="tools"):
        SupervisedMcpServer(service, "demo", tools="echo")

    async def main() -> None:
        with pytest.raises(RuntimeError, match=r"asyncio_service\(\)"):
            await mcp_servers(portal.service)

    run(main)
