"""The example of docs/integrations/google_adk.md runs as written, in a process of its own, on a fresh config."""

from __future__ import annotations

from pathlib import Path

from testkit import DOCS_ROOT, doc_blocks, run_doc_example

PAGE = DOCS_ROOT / "docs" / "integrations" / "google_adk.md"


def test_the_pages_example_runs_and_prints_what_the_tool_returned(tmp_path: Path) -> None:
    """The first python block exits 0 and prints the demo server's echo as the agent's final answer."""
    done = run_doc_example(doc_blocks(PAGE)[0], tmp_path, bound=120)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    assert out.splitlines() == ["the tool said: hello from ADK"], (out, err)
