"""Direct adapters (built-in servers connected by the session itself).

Real stdio servers where the process is the point (tracking, closing, deaths with their
stderr); naming rules on the fault server's in-memory twin (``servers_in_memory``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psutil
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_actors import events
from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType, builtin_demo_record
from mcp_actors._process.tracker import ProcessTracker
from mcp_actors.adapters import (
    DirectMcpConnection,
    DirectMcpToolAdapter,
    Tool,
    close_direct_mcp_connections,
    load_direct_mcp_tools,
    open_direct_mcp_tools,
)
from mcp_actors.adapters._direct import _unique_names
from mcp_actors.errors import (
    ActorStopped,
    CommandNotFound,
    ServerConnectionLost,
    ServerInactive,
    ServerStartFailed,
    ToolCallTimeout,
    ToolNotFound,
)
from mcp_actors.formats import convert_mcp_tools_to_openai
from mcp_actors.naming import direct_tool_name, is_provider_safe
from mcp_actors.testing import demo_server_command, fault_server_command, serve_http
from mcp_actors.testing.memory import InMemoryServers

FAULT_TOOLS = ["echo", "add", "sleep", "big", "fail"]


def stdio_record(name: str, argv: Sequence[str], **fields: Any) -> McpServerRecord:
    return McpServerRecord(
        name=name,
        type=ServerType.STDIO,
        config=ServerConfig(command=argv[0], args=tuple(argv[1:]), ping_interval=0),
        **fields,
    )


def tracked_pids() -> set[int]:
    return {identity.pid for identity in ProcessTracker.get_instance().tracked()}


def is_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def switchable_clock() -> trio.testing.MockClock:
    """Virtual time at real speed until a test turns on autojump (after real I/O is done)."""
    return trio.testing.MockClock(rate=1.0)


# ---------------------------------------------------------------------- names (pure)


def test_colliding_names_first_keeps_the_plain_name_later_ones_get_a_deterministic_suffix() -> None:
    """As for registry ids: the first claim keeps the clean name; a later clash gets a hash of its original names."""
    pairs = [("a.b", "echo"), ("a-b", "echo"), ("a.b", "add"), ("solo", "echo")]
    names = _unique_names(pairs)
    assert names[0] == "a_b__echo"
    assert names[2:] == ["a_b__add", "solo__echo"]
    assert names[1].startswith("a_b__echo_") and len(names[1]) == len("a_b__echo_") + 8
    assert _unique_names(pairs) == names, "deterministic"
    swapped = _unique_names([pairs[1], pairs[0]])
    assert swapped[0] == "a_b__echo" and swapped[1] != names[1] and swapped[1].startswith("a_b__echo_")
    assert _unique_names([*pairs, ("late", "x")])[:4] == names, "a server added later renames nothing before it"


def test_the_same_pair_twice_gets_a_counter() -> None:
    """One server listed twice under the same name: the third and later copies differ by a counter in the hash."""
    names = _unique_names([("s", "t")] * 3)
    assert names[0] == "s__t" and len(set(names)) == 3


def test_a_hashed_name_never_takes_a_later_tools_plain_name() -> None:
    """A later tool whose clean name equals an earlier hashed one is suffixed in turn; all stay unique."""
    first = _unique_names([("a.b", "echo"), ("a-b", "echo")])
    server, tool = first[1].split("__", 1)
    names = _unique_names([("a.b", "echo"), ("a-b", "echo"), (server, tool)])
    assert names[:2] == first and len(set(names)) == 3


def test_a_hashed_name_never_takes_an_earlier_tools_plain_name() -> None:
    """A clash whose hashed name is already an earlier tool's plain name moves on to a free name."""
    hashed = _unique_names([("a.b", "echo"), ("a-b", "echo")])[1]
    server, tool = hashed.split("__", 1)
    names = _unique_names([(server, tool), ("a.b", "echo"), ("a-b", "echo")])
    assert names[:2] == [hashed, "a_b__echo"]
    assert len(set(names)) == 3 and names[2].startswith("a_b__echo_")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(alphabet="ab.-_é1", min_size=1, max_size=40), st.text(alphabet="xy.-_ü2", min_size=1, max_size=40)
        ),
        max_size=30,
    )
)
def test_names_are_unique_and_provider_safe(pairs: list[tuple[str, str]]) -> None:
    """Whatever the server and tool names, the direct names are unique, provider-safe and plain when unambiguous."""
    names = _unique_names(pairs)
    assert len(set(names)) == len(names)
    assert all(is_provider_safe(name) for name in names)
    plain = [direct_tool_name(s, t) for s, t in pairs]
    for name, base in zip(names, plain, strict=True):
        if plain.count(base) == 1:
            assert name == base


# ---------------------------------------------------------------------- sessions


async def test_open_direct_tools_calls_tracks_and_closes(no_leaked_tasks: None) -> None:
    """Direct tools are named server__tool, call their server, are tracked while open, and leave nothing at exit."""
    servers = [builtin_demo_record(), stdio_record("fault.srv", fault_server_command())]
    async with open_direct_mcp_tools(servers) as (tools, connections):
        assert [c.name for c in connections] == ["demo", "fault.srv"]
        names = [t.name for t in tools]
        assert names[-5:] == [f"fault_srv__{t}" for t in FAULT_TOOLS]
        assert {"demo__echo", "demo__image", "demo__resource_link"} <= set(names)
        assert not tools.failures
        by_name = {t.name: t for t in tools}
        assert all(isinstance(t, Tool) and isinstance(t, DirectMcpToolAdapter) for t in tools)
        assert await by_name["demo__echo"].execute({"text": "direct"}) == "direct"
        assert await by_name["demo__image"].execute() == "[Image: image/png]"
        assert await by_name["demo__fail"].execute({"message": "nope"}) == "Error: nope"
        assert await by_name["fault_srv__add"].execute({"a": 2, "b": 3}) == "5"
        assert by_name["fault_srv__echo"].parameters["required"] == ["text"]
        # The adapters' McpTool views convert to provider definitions under the same names.
        definitions = convert_mcp_tools_to_openai(t.mcp_tool for t in tools)
        assert [d["function"]["name"] for d in definitions] == names
        pids = []
        for connection in connections:
            process = connection.process
            assert process is not None and process.pid == connection.status().pid and process.is_alive()
            pids.append(process.pid)
        assert set(pids) <= tracked_pids()
    assert all(connection.closed for connection in connections)
    assert all(is_gone(pid) for pid in pids)
    assert not set(pids) & tracked_pids()


async def test_load_in_callers_nursery_and_close_through_tracker() -> None:
    """load_direct_mcp_tools hosts actors in the caller's nursery; ProcessTracker.close_connection ends one."""
    servers = [stdio_record("one", fault_server_command()), stdio_record("two", fault_server_command())]
    tracker = ProcessTracker.get_instance()
    async with trio.open_nursery() as nursery:
        tools, connections = await load_direct_mcp_tools(servers, nursery=nursery, timeout=10)
        one, two = connections
        assert isinstance(one, DirectMcpConnection) and all(t.timeout == 10 for t in tools)
        pid = one.status().pid
        assert pid is not None
        await tracker.close_connection(one)
        assert one.closed and one.process is None and is_gone(pid)
        with pytest.raises(ActorStopped, match=r"^tool 'one__echo': "):
            await tools[0].execute({"text": "x"})
        assert await tools[5].execute({"text": "still here"}) == "still here"
        await close_direct_mcp_connections(connections)
        assert two.closed
        await trio.testing.wait_all_tasks_blocked()
        assert not nursery.child_tasks, "every connection actor has stopped"


async def test_failing_servers_are_reported_and_the_rest_load() -> None:
    """A server that cannot start, a missing command and a disabled record are reported; the good one loads."""
    servers = [
        stdio_record("dies", fault_server_command("--exit-at-start", "4")),
        stdio_record("good", fault_server_command()),
        stdio_record("ghost", ["no-such-command-for-adapters-test"]),
        stdio_record("off", fault_server_command(), is_active=False),
    ]
    async with open_direct_mcp_tools(servers) as (tools, connections):
        assert [c.name for c in connections] == ["good"]
        assert [t.name for t in tools] == [f"good__{t}" for t in FAULT_TOOLS]
        assert list(tools.failures) == ["dies", "ghost", "off"]
        assert isinstance(tools.failures["dies"], ServerStartFailed)
        assert "exiting at start with code 4" in str(tools.failures["dies"])
        assert isinstance(tools.failures["ghost"], CommandNotFound)
        assert isinstance(tools.failures["off"], ServerInactive)
        assert len(tracked_pids() & {c.status().pid for c in connections}) == 1
        assert await tools[0].execute({"text": "ok"}) == "ok"


async def test_colliding_server_names_load_side_by_side(servers_in_memory: InMemoryServers) -> None:
    """Servers 'x.y' and 'x-y' both load; their clashing tool names are disambiguated and both work."""
    servers = [stdio_record("x.y", fault_server_command()), stdio_record("x-y", fault_server_command())]
    async with open_direct_mcp_tools(servers) as (tools, _):
        names = [t.name for t in tools]
        assert len(set(names)) == 10 and all(n.startswith("x_y__") and is_provider_safe(n) for n in names)
        assert names == _unique_names([(s.name, t) for s in servers for t in FAULT_TOOLS])
        assert [await tools[i].execute({"text": str(i)}) for i in (0, 5)] == ["0", "5"]
    assert servers_in_memory.starts == {"x.y": 1, "x-y": 1}


async def test_cancelled_load_leaves_no_process() -> None:
    """Cancelling a load while one server is connected and another still starting closes both."""
    servers = [
        stdio_record("quick", fault_server_command()),
        stdio_record("slow", fault_server_command("--slow-start", "60")),
    ]
    bus = events.EventBus()
    subscription = bus.subscribe()
    before = tracked_pids()
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as scope:

            async def cancel_once_quick_is_up() -> None:
                with trio.fail_after(30):
                    async for event in subscription:
                        if event.type == events.SERVER_CONNECTED and event.data["serverName"] == "quick":
                            scope.cancel()
                            return

            nursery.start_soon(cancel_once_quick_is_up)
            await load_direct_mcp_tools(servers, nursery=nursery, bus=bus)
        assert scope.cancelled_caught
        assert tracked_pids() == before
        await trio.testing.wait_all_tasks_blocked()
        assert not nursery.child_tasks, "every connection actor has stopped"


async def test_invalid_server_lists_are_refused() -> None:
    """Anything but records, or one record twice, is refused before anything starts."""
    record = stdio_record("twice", fault_server_command())
    async with trio.open_nursery() as nursery:
        with pytest.raises(ValueError, match="listed twice"):
            await load_direct_mcp_tools([record, record], nursery=nursery)
        with pytest.raises(TypeError, match="McpServerRecord"):
            await load_direct_mcp_tools([{"name": "x"}], nursery=nursery)  # type: ignore[list-item]
        with pytest.raises(ValueError, match="timeout"):
            await load_direct_mcp_tools([record], nursery=nursery, timeout=-1)
        assert not nursery.child_tasks, "nothing was started"


# ---------------------------------------------------------------------- timeouts and death


async def test_default_timeout_in_virtual_time_cancels_on_the_server(switchable_clock: trio.testing.MockClock) -> None:
    """A hung direct call fails after exactly 120 virtual seconds and the server receives notifications/cancelled."""
    async with open_direct_mcp_tools([stdio_record("stuck", fault_server_command("--hang-tool", "echo"))]) as (
        tools,
        [connection],
    ):
        echo = tools[0]
        switchable_clock.autojump_threshold = 0
        try:
            start = trio.current_time()
            with pytest.raises(ToolCallTimeout) as info:
                await echo.execute({"text": "never"})
            elapsed = trio.current_time() - start
        finally:
            switchable_clock.autojump_threshold = math.inf
        assert 120.0 <= elapsed < 121.0, elapsed
        assert info.value.timeout == 120.0
        assert "'stuck__echo'" in str(info.value) and "'stuck'" in str(info.value)
        with trio.fail_after(10):
            await connection.handle.wait_for_stderr(lambda line: "fault: cancelled" in line)
        assert await tools[1].execute({"a": 1, "b": 1}) == "2"


async def test_direct_server_dying_mid_call() -> None:
    """A direct server that exits during a call raises ServerConnectionLost naming the tool, with its stderr."""
    async with open_direct_mcp_tools([stdio_record("fragile", fault_server_command("--crash-on-call", "1"))]) as (
        tools,
        _,
    ):
        with pytest.raises(ServerConnectionLost) as info:
            await tools[0].execute({"text": "boom"})
        assert str(info.value).startswith("tool 'fragile__echo': server 'fragile'")
        assert any("crashing on call 1" in line for line in info.value.stderr_tail)


async def test_direct_http_server() -> None:
    """A built-in server reached over streamable HTTP loads and answers; it has no process to track."""
    async with serve_http(demo_server_command("--transport", "streamable-http")) as server:
        record = McpServerRecord(name="web", type=ServerType.HTTP, config=ServerConfig(url=server.url, ping_interval=0))
        async with open_direct_mcp_tools([record], timeout=0.5) as (tools, [connection]):
            by_name = {t.name: t for t in tools}
            assert connection.process is None
            assert await by_name["web__resource_link"].execute() == "[Resource link: demo://readme]"
            with pytest.raises(ToolCallTimeout, match=r"'web__sleep'.*0\.5s"):
                await by_name["web__sleep"].execute({"seconds": 30})


async def test_errors_leave_the_direct_tools_block_bare_not_in_a_group(no_leaked_tasks: None) -> None:
    """A typed error raised in the block, and the loader's own ValueError, come out as themselves.

    Before: both came out of ``open_direct_mcp_tools`` wrapped in an ExceptionGroup (its
    nursery's), so ``except McpActorsError`` and ``except ValueError`` missed them.
    """
    demo = builtin_demo_record()
    with pytest.raises(ToolNotFound):
        async with open_direct_mcp_tools([demo]):
            raise ToolNotFound("raised in the block, as a host's own call might")
    with pytest.raises(ValueError, match="twice"):
        async with open_direct_mcp_tools([demo, demo]):
            raise AssertionError("unreachable: the same server twice is refused")
