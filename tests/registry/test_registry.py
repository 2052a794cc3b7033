"""The registry (McpService) end to end, with the demo server served in memory.

The registry's behaviour (records, caching, ids, approval, events) does not depend on how
bytes reach a server: the demo server's stdio records are served by its in-memory twin
(``servers_in_memory``), which saves a process start per test. Spawning is tested in
tests/test_transports_stdio.py and tests/test_connection_processes.py.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import trio
from testkit import drain, runtime_at, state_is, text_of, wait_event

from mcp_actors import events
from mcp_actors.errors import (
    ConfigError,
    ConfigFileCorrupt,
    ConnectionFailed,
    DuplicateServerName,
    InvalidCallInput,
    ServerInactive,
    ServerNotFound,
    ToolCallDenied,
    ToolDisabled,
    ToolNotFound,
)
from mcp_actors.naming import is_provider_safe
from mcp_actors.runtime import open_runtime
from mcp_actors.testing.memory import InMemoryServers

DATA = Path(__file__).parent.parent / "data" / "configs"

pytestmark = pytest.mark.usefixtures("servers_in_memory")


def demo_input(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "type": "stdio",
        "config": {"command": sys.executable, "args": ["-m", "mcp_actors.demo_server"], "pingInterval": 0},
        **extra,
    }


async def test_fresh_install_has_the_builtin_demo(tmp_path: Path, servers_in_memory: InMemoryServers) -> None:
    """A missing config means one trusted built-in server, the demo, ready to call."""
    async with runtime_at(tmp_path) as rt:
        [demo] = await rt.service.list()
        assert demo.name == "demo" and demo.is_trusted
        tools = await rt.service.list_server_tools("demo")
        assert {"echo", "add", "fail"} <= {t.name for t in tools}
        assert all(is_provider_safe(t.id) and t.id.startswith("mcp__demo__") for t in tools)
    assert servers_in_memory.starts["demo"] == 1, "the built-in demo record was served in memory"
    assert not (tmp_path / "cfg.json").exists(), "nothing is written until the first change"


async def test_full_lifecycle(tmp_path: Path, no_leaked_tasks: None) -> None:
    """add → list tools → call → update → reconnect → remove, with events in order."""
    cfg = tmp_path / "cfg.json"
    async with open_runtime(cfg) as rt:
        svc = rt.service
        sub = svc.subscribe()
        rec = await svc.add(demo_input("alpha"))
        assert rec.id.startswith("mcp_") and rec.name == "alpha"
        tools = await svc.list_server_tools("alpha")
        echo = next(t for t in tools if t.name == "echo")
        assert echo.id == "mcp__alpha__echo" and echo.server_id == rec.id
        result = await svc.call_tool(rec.id, "echo", {"text": "hello"})
        assert text_of(result) == "hello" and not result.is_error
        by_id = await svc.call_tool_by_id(echo.id, {"text": "by id"})
        assert text_of(by_id) == "by id"
        updated = await svc.update("alpha", is_trusted=True, disabled_tools=("add",))
        assert updated.id == rec.id and updated.updated_at >= rec.updated_at and updated.is_trusted
        assert "add" not in {t.name for t in await svc.list_server_tools("alpha")}
        await svc.reconnect("alpha")
        assert text_of(await svc.call_tool("alpha", "echo", {"text": "again"})) == "again"
        await svc.remove("alpha")
        with pytest.raises(ServerNotFound):
            await svc.call_tool("alpha", "echo", {"text": "x"})
        kinds = [e.type for e in drain(sub)]
        assert kinds.index(events.SERVERS_CHANGED) < kinds.index(events.SERVER_CONNECTED)
        assert kinds.count(events.TOOL_CALLED) == 3
        assert kinds[-1] == events.SERVERS_CHANGED
        seqs = [e.seq for e in drain(sub)]
        assert seqs == sorted(seqs)
    saved = json.loads(cfg.read_text())
    assert [s["name"] for s in saved["mcpServers"]] == ["demo"]


async def test_tool_cache_hit_miss_and_list_changed(tmp_path: Path) -> None:
    """A second listing within the TTL sends no tools/list; after tools/list_changed one is sent."""
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        first = await svc.list_server_tools("demo")
        assert svc.tool_list_requests == 1
        again = await svc.list_server_tools("demo")
        assert svc.tool_list_requests == 1 and again == first
        sub = svc.subscribe()
        await svc.call_tool("demo", "toggle_extra_tool", {})
        with trio.fail_after(10):
            async for event in sub:
                if event.type == events.TOOLS_CHANGED:
                    break
        assert "extra" in {t.name for t in await svc.list_server_tools("demo")}
        assert svc.tool_list_requests == 2
        assert "extra" in {t.name for t in await svc.list_server_tools("demo")}


async def test_concurrent_misses_share_one_fetch(tmp_path: Path) -> None:
    """Twenty concurrent cold listings of one server send exactly one tools/list."""
    async with runtime_at(tmp_path) as rt:
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(rt.service.list_server_tools, "demo")
        assert rt.service.tool_list_requests == 1


async def test_zero_ttl_always_refetches(tmp_path: Path) -> None:
    """With a TTL of 0 every listing goes to the server, though the demo says its list stays fresh 300 s."""
    async with runtime_at(tmp_path, tool_cache_ttl=0.0) as rt:
        for _ in range(3):
            await rt.service.list_server_tools("demo")
        assert rt.service.tool_list_requests == 3


async def test_disabled_tools_invisible_and_refused(tmp_path: Path) -> None:
    """A disabled tool is not listed and a call to it raises ToolDisabled."""
    async with runtime_at(tmp_path) as rt:
        await rt.service.update("demo", disabled_tools=("echo",))
        assert "echo" not in {t.name for t in await rt.service.list_server_tools("demo")}
        with pytest.raises(ToolDisabled, match="disabledTools"):
            await rt.service.call_tool("demo", "echo", {"text": "x"})


async def test_names_unique_also_after_cleaning(tmp_path: Path) -> None:
    """A taken name, or one that cleans to the same tool-id part, is refused and nothing is saved."""
    cfg = tmp_path / "cfg.json"
    async with open_runtime(cfg) as rt:
        await rt.service.add(demo_input("my-files"))
        with pytest.raises(DuplicateServerName, match="already exists"):
            await rt.service.add(demo_input("my-files"))
        with pytest.raises(DuplicateServerName, match="my_files"):
            await rt.service.add(demo_input("my.files"))
        assert [r.name for r in (await rt.service.list())] == ["demo", "my-files"]
    assert [s["name"] for s in json.loads(cfg.read_text())["mcpServers"]] == ["demo", "my-files"]


async def test_update_rejects_id_and_unknown_fields(tmp_path: Path) -> None:
    """The id is immutable and unknown fields are named in the error."""
    async with runtime_at(tmp_path) as rt:
        with pytest.raises(ConfigError, match="id"):
            await rt.service.update("demo", id="mcp_1_x")
        with pytest.raises(ConfigError, match="colour"):
            await rt.service.update("demo", colour="blue")


async def test_inactive_server_is_refused(tmp_path: Path) -> None:
    """A disabled server is not connected and calls say how to enable it."""
    async with runtime_at(tmp_path) as rt:
        await rt.service.update("demo", is_active=False)
        with pytest.raises(ServerInactive, match="isActive"):
            await rt.service.call_tool("demo", "echo", {"text": "x"})
        assert await rt.service.list_all_active_server_tools() == []
        await rt.service.update("demo", is_active=True)
        assert text_of(await rt.service.call_tool("demo", "echo", {"text": "on"})) == "on"


async def test_unknown_tool_id(tmp_path: Path) -> None:
    """An id never handed out raises ToolNotFound telling where ids come from."""
    async with runtime_at(tmp_path) as rt:
        with pytest.raises(ToolNotFound, match="list_server_tools"):
            await rt.service.call_tool_by_id("mcp__nope__nothing", {})


async def test_corrupt_config_is_reported_and_untouched(tmp_path: Path) -> None:
    """A hand-broken config stops start-up with its path and position; the file is not rewritten."""
    cfg = tmp_path / "cfg.json"
    broken = '{"mcpServers": [\n  {"name": "x",\n'
    cfg.write_text(broken)
    with pytest.raises(ConfigFileCorrupt) as info:
        async with open_runtime(cfg):
            pass  # pragma: no cover
    assert str(cfg) in str(info.value)
    assert cfg.read_text() == broken


@pytest.mark.parametrize(
    "sample",
    [
        "claude_desktop_config.json",
        "cursor_mcp.json",
        "vscode_mcp.json",
        "windsurf_mcp_config.json",
        "cline_mcp_settings.json",
    ],
)
async def test_add_json_popular_hosts(tmp_path: Path, sample: str) -> None:
    """Configs of popular hosts import entry by entry; good entries are saved even if others fail."""
    text = (DATA / sample).read_text()
    # connect_on_add=False: the samples name real npx/uvx servers; this test is about the records.
    async with runtime_at(tmp_path, connect_on_add=False) as rt:
        results = await rt.service.add_json(text)
        assert results, "the sample has entries"
        saved = [r for r in results if r.ok]
        assert saved, [str(r.error) for r in results]
        names = {r.name for r in (await rt.service.list())}
        assert {r.name for r in saved} <= names
        for r in results:
            if not r.ok:
                assert r.error is not None and str(r.error)


async def test_add_json_keeps_good_entries_and_reports_unknown_keys(tmp_path: Path) -> None:
    """One bad entry does not stop the good one; unknown keys are reported."""
    doc = {
        "mcpServers": {
            "good": {"command": sys.executable, "args": ["-m", "mcp_actors.demo_server"], "sparkles": True},
            "bad": {"args": ["no command"]},
        }
    }
    async with runtime_at(tmp_path) as rt:
        results = {r.name: r for r in await rt.service.add_json(json.dumps(doc))}
        assert results["good"].ok and "sparkles" in results["good"].unknown_keys
        assert not results["bad"].ok and "command" in str(results["bad"].error)
        assert "good" in {r.name for r in (await rt.service.list())}


async def test_slow_subscriber_does_not_slow_calls(tmp_path: Path) -> None:
    """A subscriber that never reads keeps only its buffer and counts what it lost over 1000 calls."""
    async with runtime_at(tmp_path) as rt:
        lazy = rt.service.subscribe(buffer=8)
        await rt.service.connect("demo")
        with trio.fail_after(60):
            for i in range(1000):
                await rt.service.call_tool("demo", "echo", {"text": str(i)})
        assert lazy.dropped >= 1000 - 8
        kept = drain(lazy)
        assert len(kept) == 8 and kept[-1].type == events.TOOL_CALLED


async def test_approval(tmp_path: Path) -> None:
    """Trusted servers are auto-approved; others go to the approver, and a denial is typed."""
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        await svc.add(demo_input("untrusted"))
        asked: list[str] = []

        async def approver(request) -> bool:
            asked.append(f"{request.server_name}/{request.tool_name}")
            return request.tool_name == "echo"

        svc.set_approver(approver)
        assert svc.is_auto_approved("demo", "echo") and not svc.is_auto_approved("untrusted", "echo")
        await svc.call_tool("demo", "add", {"a": 1, "b": 2})
        await svc.call_tool("untrusted", "echo", {"text": "ok"})
        with pytest.raises(ToolCallDenied, match="not approved"):
            await svc.call_tool("untrusted", "add", {"a": 1, "b": 2})
        assert asked == ["untrusted/echo", "untrusted/add"]
        await svc.update("demo", disabled_auto_approve_tools=("add",))
        with pytest.raises(ToolCallDenied):
            await svc.call_tool("demo", "add", {"a": 1, "b": 2})


async def test_secrets_never_leak(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Env and header values appear in no repr, event, error message or log line."""
    caplog.set_level(logging.DEBUG)
    secret, token = "s3cr3t-env-value", "tok-abcdef-123456"
    async with runtime_at(tmp_path) as rt:
        sub = rt.service.subscribe()
        rec = await rt.service.add(
            {"name": "leaky", "type": "stdio", "config": {"command": "no-such-cmd-qq", "env": {"API_KEY": secret}}}
        )
        remote = await rt.service.add(
            {
                "name": "remote",
                "type": "http",
                "config": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {token}"}},
                "isActive": False,
            }
        )
        with pytest.raises(ConnectionFailed) as info:  # CommandNotFound, or the circuit it opened
            await rt.service.call_tool("leaky", "echo", {"text": "x"})
        texts = [repr(rec), str(rec), repr(remote), str(info.value), repr(await rt.service.list())]
        texts += [json.dumps(e.to_json(), default=str) for e in drain(sub)]
        texts += [r.getMessage() for r in caplog.records]
        for text in texts:
            assert secret not in text and token not in text


async def test_an_approver_that_never_answers_is_bounded_by_the_callback_timeout(tmp_path: Path) -> None:
    """A hung approver: the call is denied at ``callback_timeout``, typed and named; it never reaches the server.

    The service awaited the approver with no bound: a call with ``timeout=1`` still waited
    when the test gave up on it.
    """
    async with runtime_at(tmp_path, callback_timeout=0.2) as rt:
        svc = rt.service
        await svc.add(demo_input("untrusted"))
        hung = trio.Event()

        async def approver(request) -> bool:
            hung.set()
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        svc.set_approver(approver)
        with trio.fail_after(30), pytest.raises(ToolCallDenied) as info:
            await svc.call_tool("untrusted", "echo", {"text": "x"}, timeout=60)
        assert hung.is_set()
        assert "did not answer within 0.2s" in str(info.value)
        assert info.value.server == "untrusted" and info.value.tool == "echo"
        svc.set_approver(None)
        assert text_of(await svc.call_tool("untrusted", "echo", {"text": "after"})) == "after"


async def test_an_approver_that_raises_denies_the_call_with_its_error(tmp_path: Path) -> None:
    """An approver's own exception is a typed denial naming the server and tool, with the cause kept."""
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        await svc.add(demo_input("untrusted"))

        def approver(request) -> bool:
            raise ValueError("policy store unreachable")

        svc.set_approver(approver)
        with pytest.raises(ToolCallDenied, match="the approver failed: ValueError: policy store unreachable") as info:
            await svc.call_tool("untrusted", "echo", {"text": "x"})
        assert isinstance(info.value.__cause__, ValueError)
        assert info.value.server == "untrusted"


@pytest.mark.parametrize(
    ("arguments", "field", "words"),
    [
        ([1, 2], "arguments", "a JSON object"),
        ("text", "arguments", "a JSON object"),
        ({"text": object()}, "arguments.text", "cannot be sent as JSON"),
        ({"a": float("nan"), "b": 1}, "arguments.a", "not a finite number"),
        ({"a": [1, {"deep": float("inf")}], "b": 1}, "arguments.a[1].deep", "not a finite number"),
        ({1: "x"}, "arguments", "keys must be strings"),
    ],
)
async def test_bad_call_arguments_are_a_typed_error_naming_the_field(
    tmp_path: Path, arguments: object, field: str, words: str
) -> None:
    """Arguments JSON cannot carry are the caller's error, typed and named; nothing is sent.

    Before: a list or a string gave a bare TypeError/ValueError from ``dict()``, an object a
    ServerProtocolError blaming the server, and NaN or infinity reached the server as null.
    """
    async with runtime_at(tmp_path) as rt:
        with pytest.raises(InvalidCallInput, match=words) as info:
            await rt.service.call_tool("demo", "add", arguments)  # type: ignore[arg-type]
        assert info.value.field == field and info.value.server == "demo" and info.value.tool == "add"
        assert text_of(await rt.service.call_tool("demo", "add", {"a": 1, "b": 2})) == "3.0"


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "5", True])
async def test_a_call_timeout_must_be_a_positive_finite_number(tmp_path: Path, timeout: object) -> None:
    """A timeout that bounds nothing (or is not a number) is refused before the call, naming the field.

    Before: NaN and a string raised bare ValueError/TypeError, -1 a ToolCallTimeout after sending.
    """
    async with runtime_at(tmp_path) as rt:
        with pytest.raises(InvalidCallInput, match="positive, finite number of seconds") as info:
            await rt.service.call_tool("demo", "echo", {"text": "x"}, timeout=timeout)  # type: ignore[arg-type]
        assert info.value.field == "timeout"


async def test_arguments_the_encoder_takes_still_pass(tmp_path: Path) -> None:
    """Mappings, tuples, str and int subclasses stay accepted: the check refuses only what JSON cannot carry."""
    import enum
    import types

    class Colour(enum.StrEnum):
        RED = "red"

    async with runtime_at(tmp_path) as rt:
        args = types.MappingProxyType({"text": Colour.RED})
        assert text_of(await rt.service.call_tool("demo", "echo", args)) == "red"
        assert text_of(await rt.service.call_tool("demo", "add", {"a": 1.5, "b": True})) == "2.5"


@pytest.mark.parametrize("timeout", [0, -5, float("nan"), float("inf")])
async def test_health_refuses_a_timeout_that_bounds_nothing_and_leaves_the_server_alone(
    tmp_path: Path, timeout: float
) -> None:
    """``health(timeout=0)`` and the like are refused, typed, before any ping: the server is not declared dead.

    Before: 0 and -5 were accepted, the ping "timed out" at once, and the healthy server was
    declared dead, failing every call in flight on it.
    """
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        assert await svc.health("demo") >= 0
        sub = svc.subscribe()
        with pytest.raises(InvalidCallInput, match="positive, finite number of seconds") as info:
            await svc.health("demo", timeout=timeout)
        assert info.value.field == "timeout" and info.value.server == "demo"
        assert [e for e in drain(sub) if e.type == events.CONNECTION_STATE] == []
        assert text_of(await svc.call_tool("demo", "echo", {"text": "still here"})) == "still here"


async def test_a_tool_id_works_before_its_server_was_listed(tmp_path: Path) -> None:
    """``call_tool_by_id`` with an id of a server not listed yet (an id a host kept from an earlier run) lists it first.

    Before: ToolNotFound ("ids come from listing the tools") although the server and the
    tool exist; an unknown tool of that server is still ToolNotFound, after the listing.
    """
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        assert text_of(await svc.call_tool_by_id("mcp__demo__echo", {"text": "kept id"})) == "kept id"
        with pytest.raises(ToolNotFound, match="mcp__demo__nope"):
            await svc.call_tool_by_id("mcp__demo__nope", {})
        with pytest.raises(ToolNotFound, match="mcp__nosuch__echo"):
            await svc.call_tool_by_id("mcp__nosuch__echo", {})


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("disable", "the server was disabled"),
        ("update", "its record was changed"),
        ("remove", "the server was removed"),
    ],
)
async def test_a_call_ended_by_a_change_to_its_server_says_which_change(
    tmp_path: Path, change: str, words: str
) -> None:
    """A call in flight when its server is disabled, updated or removed fails naming that change.

    Before: every one of them said "(the server was removed)".
    """
    async with runtime_at(tmp_path) as rt:
        svc = rt.service
        await svc.connect("demo")
        failures: list[Exception] = []

        async def call() -> None:
            try:
                await svc.call_tool("demo", "sleep", {"seconds": 30})
            except Exception as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            if change == "disable":
                await svc.update("demo", is_active=False)
            elif change == "update":
                await svc.update("demo", name="renamed")
            else:
                await svc.remove("demo")
        assert len(failures) == 1 and isinstance(failures[0], ConnectionFailed)
        assert words in str(failures[0]) and "removed" not in str(failures[0]).replace(words, "")


async def test_an_added_server_spawns_nothing_until_its_first_use(
    tmp_path: Path, servers_in_memory: InMemoryServers
) -> None:
    """add() and add_json() save the server and start its slot, but spawn nothing: lazy, as at start-up.

    With the runtime's defaults: a server is connected on its first use (a call, a listing,
    ``connect``, ``test``), never by adding it, as a server in the config file is never
    connected by starting the runtime. ``connect_on_add=True`` asks for the warm-up.
    """
    command = {"command": sys.executable, "args": ["-m", "mcp_actors.demo_server"], "pingInterval": 0}
    async with runtime_at(tmp_path, sweep_ledger=False) as rt:
        svc = rt.service
        await svc.add(demo_input("added"))
        [entry] = await svc.add_json(json.dumps({"mcpServers": {"imported": command}}))
        assert entry.record is not None
        await trio.sleep(0.5)  # a background connect would have spawned them by now (in memory: at once)
        for name in ("added", "imported"):
            assert servers_in_memory.starts[name] == 0, name
            assert svc.status(name).state.value == "disconnected"
            assert svc.is_connected(name) is False
        assert text_of(await svc.call_tool("added", "echo", {"text": "first use"})) == "first use"
        assert svc.is_connected("added") is True and svc.status("added").state.value == "connected"
        with pytest.raises(ServerNotFound):
            svc.is_connected("nobody")
        assert (servers_in_memory.starts["added"], servers_in_memory.starts["imported"]) == (1, 0)
    async with runtime_at(tmp_path, sweep_ledger=False, connect_on_add=True) as rt:
        sub = rt.service.subscribe()
        await rt.service.add(demo_input("warm"))
        await wait_event(sub, state_is("connected", serverName="warm"), timeout=10)  # nobody used it
        assert servers_in_memory.starts["warm"] == 1
