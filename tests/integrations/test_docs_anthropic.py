"""The examples of docs/integrations/anthropic.md run as written, each in its own process on a fresh config."""

from __future__ import annotations

from pathlib import Path

from testkit import DOCS_ROOT, doc_blocks, run_doc_example

DOC = DOCS_ROOT / "docs" / "integrations" / "anthropic.md"


def run_example(code: str, tmp_path: Path) -> str:
    done = run_doc_example(code, tmp_path, bound=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_the_first_example_prints_what_the_page_says(tmp_path: Path) -> None:
    first = doc_blocks(DOC)[0]
    assert "async_tools(" in first
    assert run_example(first, tmp_path) == doc_blocks(DOC, "text")[0]


def test_the_sync_example_runs(tmp_path: Path) -> None:
    second = doc_blocks(DOC)[1]
    assert "sync_tools(" in second
    assert run_example(second, tmp_path) == "echo said hi\n"
