"""The stdio fault server: each flag does what it says, at the process and wire level."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp_actors.testing import fault_server_command
from mcp_actors.testing._fault_plan import GRANDCHILD_LIFETIME, FaultPlan, build_parser, parse_fault_args

BOUND = 15  # seconds; a generous bound for anything a healthy machine does in well under one


def text_of(response: dict[str, Any]) -> str:
    [item] = response["result"]["content"]
    assert item["type"] == "text"
    return str(item["text"])


async def test_well_behaved_without_flags(raw_server: Any) -> None:
    """Without flags the server initializes, lists its tools and answers each of them."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command()) as server:
            init = await server.initialize()
            assert init["result"]["protocolVersion"] == "2025-06-18"
            assert init["result"]["serverInfo"]["name"] == "mcp-actors-fault"
            listing, _ = await server.read_until_response(await server.request("tools/list"))
            tools = {tool["name"]: tool for tool in listing["result"]["tools"]}
            assert set(tools) == {"echo", "add", "sleep", "big", "fail"}
            assert all(tool["description"] and tool["inputSchema"]["type"] == "object" for tool in tools.values())
            echo, _ = await server.read_until_response(await server.call("echo", {"text": "héllo"}))
            assert text_of(echo) == "héllo"
            add, _ = await server.read_until_response(await server.call("add", {"a": 2, "b": 3}))
            assert text_of(add) == "5"
            big, _ = await server.read_until_response(await server.call("big", {"n": 1000}))
            assert len(text_of(big).encode()) == 1000
            fail, _ = await server.read_until_response(await server.call("fail", {"message": "nope"}))
            assert fail["result"]["isError"] is True and text_of(fail) == "nope"
            bad, _ = await server.read_until_response(await server.call("add", {"a": "x", "b": 1}))
            assert bad["result"]["isError"] is True and "'a'" in text_of(bad)
            unknown, _ = await server.read_until_response(await server.call("nope", {}))
            assert unknown["error"]["code"] == -32602
            pong, _ = await server.read_until_response(await server.request("ping"))
            assert pong["result"] == {}
            missing, _ = await server.read_until_response(await server.request("prompts/list"))
            assert missing["error"]["code"] == -32601
            await server.stdin.aclose()
            assert await server.read_line() is None
            assert await server.process.wait() == 0  # exits by itself once stdin closes


async def test_sleep_reports_progress_then_returns(raw_server: Any) -> None:
    """sleep sends ten progress notifications for the caller's token before its result."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command()) as server:
            await server.initialize()
            call = await server.call("sleep", {"seconds": 0.05}, _meta={"progressToken": "tok"})
            response, before = await server.read_until_response(call)
    assert text_of(response) == "slept 0.05 s"
    assert [m["method"] for m in before] == ["notifications/progress"] * 10
    assert all(m["params"]["progressToken"] == "tok" for m in before)
    assert before[-1]["params"]["progress"] == pytest.approx(0.05)


async def test_sdk_client_works_against_the_fault_server(errlog_pipe: Any) -> None:
    """The official SDK client initializes, lists tools and calls them over stdio."""
    argv = fault_server_command()
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with trio.fail_after(BOUND):
        async with errlog_pipe() as (errlog, _), stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.name == "mcp-actors-fault"
                assert {t.name for t in (await session.list_tools()).tools} == {"echo", "add", "sleep", "big", "fail"}
                result = await session.call_tool("echo", {"text": "sdk"})
                assert result.content[0].text == "sdk"  # type: ignore[union-attr]
                assert not result.is_error
                await session.send_ping()


async def test_exit_at_start(raw_server: Any) -> None:
    """--exit-at-start CODE says why on stderr, writes nothing to stdout, exits with CODE."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--exit-at-start", "7")) as server:
            assert await server.read_line() is None
            await server.process.wait()
            await server.stderr.wait_for("fault: exiting at start with code 7")
    assert server.process.returncode == 7


async def test_slow_start_delays_the_initialize_reply(raw_server: Any) -> None:
    """--slow-start SECONDS: the initialize reply comes no sooner than SECONDS after spawn."""
    with trio.fail_after(BOUND):
        start = trio.current_time()
        async with raw_server(fault_server_command("--slow-start", "0.5")) as server:
            init = await server.initialize()
            elapsed = trio.current_time() - start
            assert "result" in init
            await server.stderr.wait_for("fault: slow start: serving in 0.5 s")
    assert elapsed >= 0.5


async def test_crash_on_call(raw_server: Any) -> None:
    """--crash-on-call 2: call 1 is answered; call 2 gets no answer, stdout closes, exit code 3."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--crash-on-call", "2")) as server:
            await server.initialize()
            first, _ = await server.read_until_response(await server.call("echo", {"text": "one"}))
            assert text_of(first) == "one"
            await server.call("echo", {"text": "two"})
            assert await server.read_line() is None
            await server.process.wait()
            await server.stderr.wait_for("fault: crashing on call 2")
    assert server.process.returncode == 3


async def test_crash_exit_code(raw_server: Any) -> None:
    """--crash-exit-code sets the exit code of the crash."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--crash-on-call", "1", "--crash-exit-code", "42")) as server:
            await server.initialize()
            await server.call("echo", {"text": "x"})
            assert await server.read_line() is None
            await server.process.wait()
    assert server.process.returncode == 42


async def test_hang_on_call_never_answers_and_reports_cancellation(raw_server: Any) -> None:
    """--hang-on-call 2: call 2 is never answered, later requests are, and its cancellation is reported."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--hang-on-call", "2")) as server:
            await server.initialize()
            await server.read_until_response(await server.call("echo", {"text": "one"}))
            hung = await server.call("echo", {"text": "two"})
            await server.stderr.wait_for(f"fault: hanging call {hung}")
            # Requests are handled in order, so an answer to the hung call would come first.
            later, before = await server.read_until_response(await server.call("echo", {"text": "three"}))
            assert text_of(later) == "three" and before == []
            await server.notify("notifications/cancelled", {"requestId": hung, "reason": "timeout"})
            await server.stderr.wait_for(f"fault: cancelled {hung}")
            pong, before = await server.read_until_response(await server.request("ping"))
            assert pong["result"] == {} and before == []


async def test_hang_tool_with_sdk_client_timeout_is_cancelled_on_the_server(errlog_pipe: Any) -> None:
    """--hang-tool echo: an SDK call that times out sends notifications/cancelled, which the server reports."""
    argv = fault_server_command("--hang-tool", "echo")
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with trio.fail_after(BOUND):
        async with errlog_pipe() as (errlog, lines), stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                with trio.move_on_after(0.3) as timeout:
                    await session.call_tool("echo", {"text": "never"})
                assert timeout.cancelled_caught
                hung = await lines.wait_for("fault: hanging call ")
                request_id = hung.rsplit(" ", 1)[1]
                await lines.wait_for(f"fault: cancelled {request_id}")
                # Other tools still answer on the same connection.
                assert (await session.call_tool("add", {"a": 1, "b": 1})).content[0].text == "2"  # type: ignore[union-attr]


async def test_cancelling_a_sleep_stops_it_without_a_reply(raw_server: Any) -> None:
    """notifications/cancelled for a running call stops it: no result is ever sent for it."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command()) as server:
            await server.initialize()
            sleeping = await server.call("sleep", {"seconds": 60})
            await server.notify("notifications/cancelled", {"requestId": sleeping})
            await server.stderr.wait_for(f"fault: cancelled {sleeping}")
            pong, before = await server.read_until_response(await server.request("ping"))
            assert pong["result"] == {}
            assert all(message.get("id") != sleeping for message in before)


@pytest.mark.parametrize(
    ("mode", "expect_start", "expect_interleave", "expect_binary"),
    [
        ("start", True, False, False),
        ("interleave", False, True, False),
        ("binary", False, False, True),
        ("start,interleave,binary", True, True, True),
    ],
)
async def test_garbage_stdout(
    raw_server: Any, mode: str, expect_start: bool, expect_interleave: bool, expect_binary: bool
) -> None:
    """--garbage-stdout=MODES writes the chosen garbage and still answers in valid JSON lines."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command(f"--garbage-stdout={mode}")) as server:
            await server.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"},
                    },
                }
            )
            await server.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            lines: list[bytes] = []
            while True:
                line = await server.read_line()
                assert line is not None
                lines.append(line)
                if line.startswith(b'{"jsonrpc":"2.0","id":2'):
                    break

    def is_json(line: bytes) -> bool:
        try:
            json.loads(line)
        except ValueError:
            return False
        return True

    def is_utf8(line: bytes) -> bool:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    replies = [i for i, line in enumerate(lines) if is_json(line)]
    assert len(replies) == 2  # both answers arrive as intact JSON lines
    garbage = [line for line in lines if not is_json(line)]
    assert any(not is_utf8(line) for line in garbage) == expect_binary
    text_garbage = [line for line in garbage if is_utf8(line)]
    assert (len(text_garbage) >= 3) == expect_start
    # Interleaving puts a text line right before every reply.
    before_each = [lines[i - 1] if i > 0 else b"" for i in replies]
    assert all(not is_json(b) and is_utf8(b) for b in before_each) == expect_interleave


async def test_flood_stderr_stalls_a_client_that_does_not_drain(raw_server: Any) -> None:
    """--flood-stderr: with stderr undrained no reply comes; draining lets it through, BYTES at start and per call."""
    size = 1024 * 1024
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--flood-stderr", str(size)), drain_stderr=False) as server:
            init = await server.request(
                "initialize",
                {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            )
            with trio.move_on_after(1.0) as stalled:
                await server.read_line()
            assert stalled.cancelled_caught  # blocked writing stderr: nothing on stdout
            server.start_draining()
            response, _ = await server.read_until_response(init)
            assert "result" in response
            await server.stderr.wait_bytes(size)
            await server.read_until_response(await server.call("echo", {"text": "x"}))
            await server.stderr.wait_bytes(2 * size)


async def test_close_stdout_keeps_the_process_alive(raw_server: Any) -> None:
    """--close-stdout: stdout ends right after the initialize reply while the process stays alive."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--close-stdout")) as server:
            init = await server.initialize()
            assert "result" in init
            assert await server.read_line() is None
            await server.stderr.wait_for("fault: closed stdout")
            assert server.process.poll() is None
            assert psutil.Process(server.process.pid).status() != psutil.STATUS_ZOMBIE


def _ignores_sigterm(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", status, re.M).group(1), 16)  # type: ignore[union-attr]
    return bool(mask & (1 << (signal.SIGTERM - 1)))


async def test_spawn_grandchild(raw_server: Any) -> None:
    """--spawn-grandchild: a grandchild in the server's group that ignores SIGTERM; its pid on stderr."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--spawn-grandchild")) as server:
            line = await server.stderr.wait_for("fault: grandchild ")
            pid = int(line.rsplit(" ", 1)[1])
            grandchild = psutil.Process(pid)
            assert grandchild.ppid() == server.process.pid
            assert _ignores_sigterm(pid)
            assert grandchild.cmdline()[-1] == f"import time; time.sleep({GRANDCHILD_LIFETIME})"
            assert grandchild.status() != psutil.STATUS_ZOMBIE
            grandchild.terminate()  # ignored: it is still there afterwards
            assert grandchild.is_running() and grandchild.status() != psutil.STATUS_ZOMBIE
            await server.initialize()
    # The helper killed the whole process group, the grandchild included.
    gone, _ = psutil.wait_procs([grandchild], timeout=BOUND)
    assert gone


async def test_huge_output(raw_server: Any) -> None:
    """--huge-output BYTES: a tool result is one text item of exactly BYTES bytes."""
    size = 3 * 1024 * 1024 + 7
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--huge-output", str(size))) as server:
            await server.initialize()
            response, _ = await server.read_until_response(await server.call("echo", {"text": "small"}))
            failed, _ = await server.read_until_response(await server.call("fail", {"message": "still an error"}))
    assert len(text_of(response).encode()) == size
    assert text_of(failed) == "still an error"  # errors are left alone


async def test_multi_megabyte_request_line_is_read_whole(raw_server: Any) -> None:
    """A request line of several megabytes is read whole and echoed back intact."""
    text = "0123456789" * 800_000
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command()) as server:
            await server.initialize()
            response, _ = await server.read_until_response(await server.call("echo", {"text": text}))
    assert text_of(response) == text


async def test_no_ping(raw_server: Any) -> None:
    """--no-ping: a ping is read and never answered while other requests still are."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--no-ping")) as server:
            await server.initialize()
            ping = await server.request("ping")
            await server.stderr.wait_for(f"fault: ignoring ping {ping}")
            listing, before = await server.read_until_response(await server.request("tools/list"))
            assert "result" in listing
            assert before == []  # requests are handled in order: no ping reply came first


async def test_flood_notifications(raw_server: Any) -> None:
    """--flood-notifications N: N log messages (and N progress updates when asked) precede each result."""
    with trio.fail_after(BOUND):
        async with raw_server(fault_server_command("--flood-notifications", "25")) as server:
            await server.initialize()
            plain, plain_before = await server.read_until_response(await server.call("echo", {"text": "a"}))
            tracked, tracked_before = await server.read_until_response(
                await server.call("echo", {"text": "b"}, _meta={"progressToken": 9})
            )
    assert text_of(plain) == "a" and text_of(tracked) == "b"
    assert [m["method"] for m in plain_before] == ["notifications/message"] * 25
    assert plain_before[-1]["params"]["data"] == "flood 25 of 25"
    methods = [m["method"] for m in tracked_before]
    assert methods.count("notifications/message") == 25 and methods.count("notifications/progress") == 25
    assert {m["params"]["progressToken"] for m in tracked_before if m["method"] == "notifications/progress"} == {9}


async def test_flags_combine(raw_server: Any) -> None:
    """Flags combine: interleaved garbage, a notification flood and a crash on call 2 all happen."""
    argv = fault_server_command("--garbage-stdout=interleave", "--flood-notifications", "2", "--crash-on-call", "2")
    with trio.fail_after(BOUND):
        async with raw_server(argv) as server:
            await server.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "x"}},
                }
            )
            lines = [line for _ in range(6) if (line := await server.read_line()) is not None]
            await server.call("echo", {"text": "y"})
            assert await server.read_line() is None
            await server.process.wait()
    assert len(lines) == 6
    assert [json.loads(line)["method"] for line in lines[1:4:2]] == ["notifications/message"] * 2
    assert json.loads(lines[5])["id"] == 1
    assert all(line == b"a stray line on stdout, not JSON" for line in lines[0::2])
    assert server.process.returncode == 3


def test_help_documents_every_flag() -> None:
    """--help and docs/testing.md both describe every flag of the fault server."""
    result = subprocess.run(
        [*fault_server_command(), "--help"], capture_output=True, text=True, timeout=BOUND, check=True
    )
    docs = (Path(__file__).parents[2] / "docs" / "testing.md").read_text()
    flags = [opt for action in build_parser()._actions for opt in action.option_strings if opt.startswith("--")]
    assert len(flags) > 15
    for flag in flags:
        assert flag in result.stdout
        assert f"`{flag}" in docs, f"docs/testing.md does not document {flag}"


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--garbage-stdout=bogus"], "--garbage-stdout"),
        (["--transport", "streamable-http", "--close-stdout"], "need transport 'stdio'"),
        (["--crash-on-call", "0"], "--crash-on-call"),
        (["--exit-at-start", "300"], "--exit-at-start"),
        (["--port", "70000"], "--port"),
    ],
)
def test_bad_flags_are_rejected_with_a_reason(argv: list[str], complaint: str) -> None:
    """A bad flag exits with code 2 and says which flag is wrong."""
    result = subprocess.run(
        [*fault_server_command(), *argv], capture_output=True, text=True, timeout=BOUND, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 2
    assert complaint in result.stderr


def test_parse_fault_args_builds_the_plan() -> None:
    """Parsed flags land in the FaultPlan; no flags means a plan with no faults."""
    assert parse_fault_args([]) == FaultPlan()
    plan = parse_fault_args(
        ["--hang-tool", "a", "--hang-tool", "b", "--garbage-stdout", "--flood-stderr", "10", "--no-ping"]
    )
    assert plan.hang_tools == {"a", "b"}
    assert plan.garbage_stdout == {"start"}
    assert plan.flood_stderr == 10 and plan.no_ping
    with pytest.raises(ValueError, match="garbage_stdout"):
        FaultPlan(garbage_stdout=frozenset({"nope"}))
    assert sys.executable == fault_server_command()[0]
