"""Faults in what the user gives us: malformed config entries, commands that do not resolve,
output that is not UTF-8."""

from __future__ import annotations

import json
import shlex
import stat
from pathlib import Path
from typing import Any

from fault_bed import CALL_BOUND, FAULT_CONFIG, SIBLING, FaultBed, text_of

from mcp_actors.errors import (
    CommandNotFound,
    ConfigError,
    ConnectionFailed,
    DuplicateServerName,
    InvalidServerConfig,
    ServerCircuitOpen,
    WorkingDirectoryNotFound,
)
from mcp_actors.testing import fault_server_command

MALFORMED: list[tuple[Any, str | None]] = [
    ({"name": "no-command", "type": "stdio", "config": {}}, "config.command"),
    ({"name": "pigeon", "type": "carrier-pigeon", "config": {"command": "x"}}, "type"),
    ({"name": "", "type": "stdio", "config": {"command": "x"}}, "name"),
    ({"type": "stdio", "config": {"command": "x"}}, "name"),
    ({"name": "neg", "type": "stdio", "config": {"command": "x", "connectTimeout": -1}}, "config.connectTimeout"),
    ({"name": "soon", "type": "stdio", "config": {"command": "x", "callTimeout": "soon"}}, "config.callTimeout"),
    ({"name": "args", "type": "stdio", "config": {"command": "x", "args": "not-a-list"}}, "config.args"),
    ({"name": "args2", "type": "stdio", "config": {"command": "x", "args": [1, 2]}}, "config.args[0]"),
    ({"name": "mixed", "type": "stdio", "config": {"command": "x", "url": "http://127.0.0.1:1/mcp"}}, "config.url"),
    ({"name": "ftp", "type": "http", "config": {"url": "ftp://example.com"}}, "config.url"),
    ({"name": "no-url", "type": "sse", "config": {}}, "config.url"),
    ({"name": "env", "type": "stdio", "config": {"command": "x", "env": {"API_KEY": 1}}}, "config.env.API_KEY"),
    ({"name": "env2", "type": "stdio", "config": {"command": "x", "env": ["A=1"]}}, "config.env"),
    (
        {"name": "hdr", "type": "http", "config": {"url": "http://127.0.0.1:1/mcp", "headers": {"X": "a\nb"}}},
        "config.headers.X",
    ),
    ({"name": "active", "type": "stdio", "config": {"command": "x"}, "isActive": "yes"}, "isActive"),
    ({"name": "cfg", "type": "stdio", "config": "python -m server"}, "config"),
    ({"name": "tools", "type": "stdio", "config": {"command": "x"}, "disabledTools": "echo"}, "disabledTools"),
    (["not", "a", "mapping"], None),
]


async def test_malformed_config_entries_are_refused_and_nothing_is_lost(bed: FaultBed) -> None:
    """Malformed entries are refused with typed errors naming the field; the file and good entries stay."""
    good = await bed.add_stdio("good")
    before = bed.config_path.read_bytes()
    svc = bed.service
    for entry, field in MALFORMED:
        outcome = await bed.settle(svc.add, entry, bound=CALL_BOUND)
        assert isinstance(outcome, InvalidServerConfig), (entry, outcome)
        if field is not None:
            assert outcome.field == field, (entry, outcome.field)
        assert "fix" in str(outcome) or "must be" in str(outcome), outcome
    duplicate = await bed.settle(svc.add, {"name": "good", "type": "stdio", "config": {"command": "x"}}, bound=5)
    assert isinstance(duplicate, DuplicateServerName) and duplicate.field == "name"
    for changes in ({"config": {"connectTimeout": "soon"}}, {"colour": "blue"}, {"type": "pigeon"}, {"name": ""}):
        outcome = await bed.settle(svc.update, "good", bound=CALL_BOUND, **changes)
        assert isinstance(outcome, ConfigError), (changes, outcome)
    for text in ("{not json", "[1, 2]"):
        refused = await bed.settle(svc.add_json, text, bound=CALL_BOUND)
        assert isinstance(refused, ConfigError), refused
    assert bed.config_path.read_bytes() == before, "a refused change touched the config file"

    argv = fault_server_command()
    mixed = {
        "mcpServers": {
            "imported": {"command": argv[0], "args": argv[1:], **FAULT_CONFIG},
            "no-command": {"args": ["x"]},
            "number": 5,
        }
    }
    results = await bed.settle(svc.add_json, json.dumps(mixed), bound=CALL_BOUND)
    assert not isinstance(results, Exception), results
    by_name = {r.name: r for r in results}
    assert by_name["imported"].ok and by_name["imported"].record is not None
    assert not by_name["no-command"].ok and isinstance(by_name["no-command"].error, InvalidServerConfig)
    assert not by_name["number"].ok and isinstance(by_name["number"].error, InvalidServerConfig)
    bed.expected[by_name["imported"].record.id] = "imported"
    # The good entries still work, the refused ones left no trace.
    assert text_of(await svc.call_tool("imported", "echo", {"text": "in"})) == "in"
    assert text_of(await svc.call_tool(good.id, "echo", {"text": "good"})) == "good"
    assert {r.name for r in await svc.list()} == {"demo", SIBLING, "good", "imported"}
    await bed.survived()


def _not_executable(tmp_path: Path) -> str:
    path = tmp_path / "server.sh"
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    return str(path)


async def test_unresolvable_commands(bed: FaultBed, tmp_path: Path) -> None:
    """Unresolvable commands fail with CommandNotFound naming them, with no restart loop; a bad cwd is named."""
    commands = {
        "not-on-path": "definitely-not-a-command-4711",
        "not-executable": _not_executable(tmp_path),
        "missing-directory": str(tmp_path / "no" / "such" / "dir" / "server"),
    }
    for name, command in commands.items():
        await bed.add({"name": name, "type": "stdio", "config": {"command": command, **FAULT_CONFIG}})
    argv = fault_server_command()
    missing_cwd = str(tmp_path / "gone")
    config = {"command": argv[0], "args": argv[1:], "cwd": missing_cwd, **FAULT_CONFIG}
    await bed.add({"name": "lost", "type": "stdio", "config": config})

    for name, command in commands.items():
        first = await bed.settle(bed.service.call_tool, name, "echo", {"text": "x"}, bound=CALL_BOUND)
        assert isinstance(first, CommandNotFound | ServerCircuitOpen), (name, first)
        assert command in str(first), first
        second = await bed.settle(bed.service.call_tool, name, "echo", {"text": "x"}, bound=CALL_BOUND)
        assert isinstance(second, CommandNotFound | ServerCircuitOpen), (name, second)
        status = bed.service.status(name)
        assert status.circuit_open and status.restarts == 0, (name, status)
        parked = await bed.settle(bed.service.call_tool, name, "echo", {"text": "x"}, bound=CALL_BOUND)
        assert isinstance(parked, ServerCircuitOpen), (name, parked)
        # Opened at once, not after retries: the message must not claim repeated failures.
        assert "repeated" not in str(parked) and "no retry" in str(parked), parked
        await bed.sibling_serves()
    lost = await bed.settle(bed.service.call_tool, "lost", "echo", {"text": "x"}, bound=CALL_BOUND)
    # Connected on first use: the first call meets the misconfiguration itself.
    assert isinstance(lost, WorkingDirectoryNotFound | ServerCircuitOpen), lost
    assert "cwd" in str(lost) and missing_cwd in str(lost)
    await bed.survived()


def _shell_wrapped(prefix: str, argv: list[str]) -> dict[str, Any]:
    """A stdio config running ``prefix`` in sh, then exec'ing ``argv``."""
    return {"command": "sh", "args": ["-c", f"{prefix}; exec {shlex.join(argv)}"], **FAULT_CONFIG}


async def test_non_utf8_output_on_stdout_and_stderr(bed: FaultBed) -> None:
    """Non-UTF-8 bytes are skipped on stdout and kept (replaced) from stderr in tails and errors."""
    bad_stderr = r"printf 'before \377\376 after\n' >&2"
    await bed.add(
        {
            "name": "binary",
            "type": "stdio",
            "config": _shell_wrapped(bad_stderr, fault_server_command("--garbage-stdout=binary,interleave")),
        }
    )
    for i in range(3):
        result = await bed.settle(bed.service.call_tool, "binary", "echo", {"text": f"b{i}"}, bound=CALL_BOUND)
        assert not isinstance(result, Exception) and text_of(result) == f"b{i}", result
    [line] = await bed.wait_stderr("binary", "before")
    assert line == "before \ufffd\ufffd after"

    await bed.add(
        {
            "name": "binary-dies",
            "type": "stdio",
            "config": _shell_wrapped(bad_stderr, fault_server_command("--exit-at-start", "4")),
        }
    )
    failed = await bed.settle(bed.service.call_tool, "binary-dies", "echo", {"text": "x"}, bound=CALL_BOUND)
    assert isinstance(failed, ConnectionFailed), failed
    assert "before \ufffd\ufffd after" in failed.stderr_tail
    await bed.survived()
