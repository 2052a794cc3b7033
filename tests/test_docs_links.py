"""The docs name tests, modules and pages that exist: a moved file never leaves a dead reference."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_test_file_the_docs_name_exists() -> None:
    """Each ``tests/….py`` path in README.md and docs/ is a file of the tree."""
    missing = {
        f"{doc.relative_to(ROOT)}: {path}"
        for doc in DOCS
        for path in re.findall(r"tests/[\w/]+\.py", doc.read_text(encoding="utf-8"))
        if not (ROOT / path).is_file()
    }
    assert not missing, sorted(missing)


def test_every_module_path_the_docs_name_exists() -> None:
    """Each ``mcp_actors/….py`` path in README.md and docs/ is a file of the tree."""
    missing = {
        f"{doc.relative_to(ROOT)}: {path}"
        for doc in DOCS
        for path in re.findall(r"mcp_actors/[\w/]+\.py", doc.read_text(encoding="utf-8"))
        if not (ROOT / path).is_file()
    }
    assert not missing, sorted(missing)
