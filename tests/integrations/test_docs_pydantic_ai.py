"""The example of docs/integrations/pydantic_ai.md runs as written, in a fresh interpreter on a fresh config."""

from __future__ import annotations

from pathlib import Path

from testkit import DOCS_ROOT, doc_blocks, run_doc_example

DOC = DOCS_ROOT / "docs" / "integrations" / "pydantic_ai.md"


def test_the_example_runs_against_the_demo_server(tmp_path: Path) -> None:
    done = run_doc_example(doc_blocks(DOC)[0], tmp_path, bound=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "echo said 'hello from pydantic-ai'; 2 + 3 = 5"
