"""Converting in a host script (real subprocesses): no worker processes, no re-run of the script."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "data" / "tool_schemas"

# No `if __name__ == "__main__":` guard, as in many host scripts and notebooks' exports.
SCRIPT = textwrap.dedent(
    """
    import json, pathlib, sys
    import trio
    from mcp_actors.formats import convert_tools_async
    from mcp_actors.tools import McpTool

    print("top level ran", flush=True)
    corpus = []
    for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
        data = json.loads(path.read_text())
        corpus += [(t["name"], t.get("description", ""), t["inputSchema"]) for t in data["tools"]]
    tools = []
    for i in range(8000):
        name, description, schema = corpus[i % len(corpus)]
        server = f"s{i // 50}"
        fields = dict(name=name, description=description, input_schema=schema, server_id=server, server_name=server)
        tools.append(McpTool(id=f"t{i}", **fields))
    definitions = trio.run(convert_tools_async, tools, "gemini")
    print("declarations", len(definitions[0]["functionDeclarations"]), flush=True)
    print("trio_parallel imported:", "trio_parallel" in sys.modules, flush=True)
    """
)


def test_a_script_without_main_guard_converts_a_large_set_once(tmp_path: Path) -> None:
    """A host script with no __main__ guard converts 8000 real schemas: its top level runs once, no traceback."""
    script = tmp_path / "host.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(CORPUS)], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["top level ran", "declarations 8000", "trio_parallel imported: False"]
    assert done.stderr == ""
