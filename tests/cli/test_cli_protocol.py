"""``mcp-actors resources|prompts|tasks`` and discover's templates, run in this process (``clikit.invoke``).

The demo server is served in memory; call's progress bar on a terminal is in ``test_cli_process.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import attrs
import pytest
from clikit import invoke

from mcp_actors._config.codec import document_from_records
from mcp_actors._config.record import McpServerRecord, ServerConfig, ServerType, builtin_demo_record

pytestmark = pytest.mark.usefixtures("servers_in_memory")


def cli(config: Path, *args: str) -> tuple[int, str, str]:
    """Run one command against a fresh config (the built-in demo server only, served in memory)."""
    done = invoke(config, *args)
    return done.rc, done.stdout, done.stderr


def cli_all(config: Path, commands: list[tuple[str, ...]]) -> list[tuple[int, str, str]]:
    """Run ``commands`` one after the other against one config; their results in order."""
    return [cli(config, *args) for args in commands]


def test_resources_list_templates_and_read(tmp_path: Path) -> None:
    """resources list (plain and --templates) and read (text, binary, --output) work on the demo server."""
    config = tmp_path / "cfg.json"
    rc, out, err = cli(config, "resources", "list", "demo", "--json")
    assert rc == 0, err
    assert "demo://counter" in {r["uri"] for r in json.loads(out)}
    rc, out, _ = cli(config, "resources", "list", "demo", "--templates")
    assert rc == 0 and "demo://note/{name}" in out
    rc, out, _ = cli(config, "resources", "read", "demo", "demo://note/gamma")
    assert (rc, out) == (0, "note gamma\n")
    rc, out, _ = cli(config, "resources", "read", "demo", "demo://pixel.png")
    assert rc == 0 and out.startswith("[Binary: image/png,")
    target = tmp_path / "pixel.png"
    rc, _, _ = cli(config, "resources", "read", "demo", "demo://pixel.png", "--output", str(target))
    assert rc == 0 and target.read_bytes().startswith(b"\x89PNG")
    rc, _, err = cli(config, "resources", "read", "demo", "demo://missing")
    assert rc != 0 and err.startswith("mcp-actors: ") and "Traceback" not in err


def test_prompts_list_and_get(tmp_path: Path) -> None:
    """prompts list shows arguments; prompts get renders with --arg; a bad --arg is one usage line."""
    config = tmp_path / "cfg.json"
    rc, out, _ = cli(config, "prompts", "list", "demo")
    assert rc == 0 and "compose" in out and "topic, tone?" in out
    rc, out, _ = cli(config, "prompts", "get", "demo", "compose", "--arg", "topic=trio", "--arg", "tone=funny")
    assert (rc, out) == (0, "[user] Write a funny paragraph about trio.\n")
    rc, out, _ = cli(config, "prompts", "get", "demo", "greeting", "--arg", "name=Ada", "--json")
    assert rc == 0 and json.loads(out)["messages"][0]["role"] == "user"
    rc, _, err = cli(config, "prompts", "get", "demo", "compose", "--arg", "oops")
    assert rc == 2 and "--arg expects KEY=VALUE" in err


def test_prompt_and_resource_that_ask_the_host(tmp_path: Path) -> None:
    """Not on a terminal, a prompt's question is declined and a resource's sampling refused, each said on stderr."""
    config = tmp_path / "cfg.json"
    rc, out, err = cli(config, "prompts", "get", "demo", "introduce", "--arg", "team=ops")
    assert (rc, out) == (0, "[user] The user answered decline: introduce nobody to the ops team.\n")
    assert "declined a server's question" in err
    rc, out, err = cli(config, "resources", "read", "demo", "demo://model-says/trio")
    assert rc != 0 and out == "" and "Traceback" not in err
    assert "server 'demo': resources/read failed: the mcp-actors command line has no language" in err


def test_discover_shows_templates(tmp_path: Path) -> None:
    """discover lists resource templates, in its table and in --json."""
    config = tmp_path / "cfg.json"
    rc, out, _ = cli(config, "discover", "demo", "--json")
    assert rc == 0
    assert [t["uriTemplate"] for t in json.loads(out)["resourceTemplates"]] == [
        "demo://model-says/{topic}",
        "demo://note/{name}",
    ]
    rc, out, _ = cli(config, "discover", "demo")
    assert rc == 0 and "Resource templates (2)" in out


def test_tasks_list(tmp_path: Path) -> None:
    """tasks list prints a server's 2025-11-25 tasks (none in a fresh demo server), as a table or as JSON.

    At 2026-07-28 (the fresh demo's revision), whose tasks extension lists no tasks, it says so.
    """
    config = tmp_path / "cfg.json"
    rc, out, err = cli(config, "tasks", "list", "demo")
    assert rc == 1 and "does not exist at protocol 2026-07-28" in err, (rc, out, err)
    demo = builtin_demo_record()
    legacy = attrs.evolve(demo, config=attrs.evolve(demo.config, protocol="legacy"))
    config.write_text(json.dumps(document_from_records([legacy])))
    rc, out, err = cli(config, "tasks", "list", "demo", "--json")
    assert (rc, json.loads(out)) == (0, []), err
    rc, out, err = cli(config, "tasks", "list", "demo")
    assert rc == 0 and "Tasks (0)" in out, err


def test_json_failure_prints_one_document(tmp_path: Path) -> None:
    """With --json, a failing resources/prompts/tasks command prints one failure document on stdout.

    Before, these command groups printed nothing on stdout when they failed (only the stderr
    line), breaking the promise that --json always writes exactly one JSON document.
    """
    config = tmp_path / "cfg.json"
    commands = [
        ("resources", "list", "nosuch", "--json"),
        ("resources", "read", "nosuch", "demo://note/alpha", "--json"),
        ("prompts", "list", "nosuch", "--json"),
        ("prompts", "get", "nosuch", "compose", "--json"),
        ("tasks", "list", "nosuch", "--json"),
    ]
    results = cli_all(config, commands)
    for args, (rc, out, err) in zip(commands, results, strict=True):
        assert rc == 2, (args, err)
        assert err.count("\n") == 1 and err.startswith("mcp-actors: error: "), (args, err)
        document = json.loads(out)
        assert document["ok"] is False, args
        assert document["error"]["type"] == "ServerNotFound" and document["error"]["exitCode"] == 2, args
        assert document["error"]["server"] == "nosuch", args


def test_a_refused_request_is_not_unavailable(tmp_path: Path) -> None:
    """The server's error reply to resources read / prompts get: one line saying what to do, exit 2 or 1.

    An unknown resource (invalid params, -32602) is a usage error (exit 2); the demo server's
    refusal of an unknown prompt carries no such code, so the request failed (exit 1). With
    --json the failure document says ServerRequestFailed. Before, both exited 3
    ("unavailable"), as if the server could not be reached.
    """
    config = tmp_path / "cfg.json"
    commands = [
        ("resources", "read", "demo", "demo://nope"),
        ("resources", "read", "demo", "demo://nope", "--json"),
        ("prompts", "get", "demo", "nope"),
        ("prompts", "get", "demo", "nope", "--json"),
    ]
    results = cli_all(config, commands)
    (read_rc, read_out, read_err), (read_json_rc, read_json, _) = results[:2]
    (get_rc, get_out, get_err), (get_json_rc, get_json, _) = results[2:]
    assert (read_rc, read_out) == (2, ""), read_err
    assert read_err.count("\n") == 1 and "Traceback" not in read_err
    assert read_err.startswith("mcp-actors: error: server 'demo': resources/read failed: Unknown resource")
    assert "mcp-actors resources list demo" in read_err
    assert (get_rc, get_out) == (1, ""), get_err
    assert get_err.count("\n") == 1 and "Traceback" not in get_err
    assert get_err.startswith("mcp-actors: error: server 'demo': prompts/get failed: ")
    assert "mcp-actors prompts list demo" in get_err
    for rc, out, code in ((read_json_rc, read_json, 2), (get_json_rc, get_json, 1)):
        document = json.loads(out)
        assert rc == code
        assert document["ok"] is False
        assert (document["error"]["type"], document["error"]["server"]) == ("ServerRequestFailed", "demo")
        assert document["error"]["exitCode"] == code


def test_refused_request_exit_codes() -> None:
    """A server's error reply exits 2 for invalid params (-32602) or resource not found (-32002), else 1.

    Before, every such reply was a ConnectionFailed and exited 3 (unavailable).
    """
    from mcp_actors.cli._support import ExitCode, exit_code_for
    from mcp_actors.errors import ServerRequestFailed

    def code(number: int) -> ExitCode:
        return exit_code_for(ServerRequestFailed("refused", server="s", method="resources/read", code=number))

    assert (code(-32602), code(-32002)) == (ExitCode.USAGE, ExitCode.USAGE)
    assert (code(-32603), code(-32601), code(0)) == (ExitCode.FAILED, ExitCode.FAILED, ExitCode.FAILED)


def test_resources_read_output_that_cannot_be_written(tmp_path: Path) -> None:
    """--output to a path that cannot be written is one stderr line naming the path (exit 2), no traceback.

    With --json the failure document follows on stdout. Before, the write ran outside the
    command's error handling: a raw 37-line traceback and exit 1.
    """
    config = tmp_path / "cfg.json"
    (tmp_path / "a-file").write_text("")
    targets = [tmp_path / "no-such-dir" / "pixel.png", tmp_path / "a-file" / "pixel.png"]
    read = ("resources", "read", "demo", "demo://pixel.png", "-o")
    results = cli_all(config, [(*read, str(t)) for t in targets] + [(*read, str(t), "--json") for t in targets])
    for i, (rc, out, err) in enumerate(results):
        target = targets[i % 2]
        assert rc == 2, err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith("mcp-actors: error: --output: cannot write ") and str(target) in err, err
        assert not target.exists()
        if i < 2:
            assert out == ""
        else:
            document = json.loads(out)
            assert (document["ok"], document["error"]["type"], document["error"]["exitCode"]) == (False, "CliError", 2)


def test_resources_read_output_with_json_writes_and_says_so(tmp_path: Path) -> None:
    """--json with --output writes the file and prints one document saying where and how many bytes.

    Before, --output was silently ignored under --json (exit 0, no file written).
    """
    target = tmp_path / "pixel.png"
    rc, out, err = cli(
        tmp_path / "cfg.json", "resources", "read", "demo", "demo://pixel.png", "-o", str(target), "--json"
    )
    assert rc == 0, err
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG")
    assert json.loads(out) == {
        "uri": "demo://pixel.png",
        "output": str(target),
        "bytes": len(data),
        "mimeType": "image/png",
    }


EMPTY_SERVER = """
import anyio
from mcp.server.mcpserver import MCPServer


class Empty(MCPServer):
    async def read_resource(self, uri, context=None):
        return []  # a resource with no contents at all


server = Empty("empty")


@server.resource("empty://nothing")
def nothing() -> str:
    return ""


anyio.run(server.run_stdio_async, backend="trio")
"""


def test_resources_read_output_of_no_contents_says_so(tmp_path: Path) -> None:
    """--output of a resource the server returns with no contents: one line saying nothing was written (exit 1).

    Before, it exited 1 with no message at all.
    """
    script = tmp_path / "empty_server.py"
    script.write_text(EMPTY_SERVER)
    record = McpServerRecord(
        name="empty", type=ServerType.STDIO, config=ServerConfig(command=sys.executable, args=[str(script)])
    )
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(document_from_records([record])))
    target = tmp_path / "out.bin"
    rc, out, err = cli(config, "resources", "read", "empty", "empty://nothing", "-o", str(target))
    assert (rc, out) == (1, ""), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("mcp-actors: error: server 'empty' returned no contents for 'empty://nothing'"), err
    assert not target.exists()
