"""The example of docs/integrations/llamaindex.md runs as written, against the built-in demo server."""

from __future__ import annotations

import re
from pathlib import Path

from testkit import DOCS_ROOT, doc_blocks, run_doc_example

DOC = DOCS_ROOT / "docs" / "integrations" / "llamaindex.md"


def printed_output() -> str:
    texts: list[str] = re.findall(r"It prints:\n\n```text\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    [text] = texts
    return text


def test_the_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    done = run_doc_example(doc_blocks(DOC)[0], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == printed_output()
