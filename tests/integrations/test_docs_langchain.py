"""The example of docs/integrations/langchain.md runs as written, against the built-in demo server."""

from __future__ import annotations

from pathlib import Path

from testkit import DOCS_ROOT, doc_blocks, run_doc_example

DOC = DOCS_ROOT / "docs" / "integrations" / "langchain.md"


def test_the_langchain_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    done = run_doc_example(doc_blocks(DOC)[0], tmp_path, bound=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "mcp__demo__echo: hello [success] None",
        "mcp__demo__add: 5.0 [success] {'structured_content': {'result': 5.0}}",
        "mcp__demo__fail: Error: no such city [error] None",
    ]
    assert "It prints:\n\n```\n" + done.stdout + "```" in DOC.read_text(encoding="utf-8")
