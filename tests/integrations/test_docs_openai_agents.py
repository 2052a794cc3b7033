"""The example of docs/integrations/openai_agents.md runs as written on a fresh config and prints the tool output."""

from __future__ import annotations

from pathlib import Path

from testkit import DOCS_ROOT, doc_blocks, run_doc_example

DOC = DOCS_ROOT / "docs" / "integrations" / "openai_agents.md"


def test_the_example_runs_against_the_demo_server_and_prints_the_tool_output(tmp_path: Path) -> None:
    done = run_doc_example(doc_blocks(DOC)[0], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The tool said: hello from the agent\n"
