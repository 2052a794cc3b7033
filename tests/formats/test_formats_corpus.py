"""The real-server corpus: every tool of every server converts into provider-valid output."""

from __future__ import annotations

import json
from typing import Any

import pytest
from formats_checks import PROFILE_IDS, PROFILES, convert_and_check, corpus_files, corpus_tools, declarations

from mcp_actors.formats import ConversionNote, NoteAction


def test_corpus_holds_real_servers_from_npm_and_pypi() -> None:
    """The committed corpus has tools/list dumps of real npm and PyPI servers plus hand-written cases."""
    sources = {}
    for path in corpus_files():
        data = json.loads(path.read_text())
        assert data["tools"], path
        for tool in data["tools"]:
            assert isinstance(tool["name"], str) and isinstance(tool["inputSchema"], dict)
        sources[data["server"]] = data["source"]
    assert sum(source.startswith("npm:") for source in sources.values()) >= 5
    assert sum(source.startswith("pypi:") for source in sources.values()) >= 2
    assert {"server-everything", "server-filesystem", "mcp-server-time", "handwritten"} <= set(sources)
    assert len(corpus_tools()) >= 150


@pytest.mark.parametrize(("fmt", "opts"), PROFILES, ids=PROFILE_IDS)
def test_whole_corpus_converts_to_valid_definitions(fmt: str, opts: dict[str, Any]) -> None:
    """All corpus tools at once pass the provider's SDK types, draft 2020-12 and our provider rules."""
    tools = list(corpus_tools())
    definitions, notes = convert_and_check(fmt, opts, tools)
    assert len(declarations(fmt, definitions)) == len(tools)
    assert all(isinstance(note, ConversionNote) for note in notes)
    assert {note.tool_id for note in notes} <= {tool.id for tool in tools}


def test_gemini_changes_to_the_corpus_are_reported() -> None:
    """Gemini's conversion of real schemas reports the keywords it removed and the placeholders."""
    _, notes = convert_and_check("gemini", {}, list(corpus_tools()))
    actions = {note.action for note in notes}
    assert {NoteAction.DROPPED, NoteAction.MOVED_TO_DESCRIPTION, NoteAction.PLACEHOLDER} <= actions
    dropped = " ".join(note.detail for note in notes if note.action is NoteAction.DROPPED)
    assert "additionalProperties" in dropped


def test_strict_mode_fallbacks_on_the_corpus_are_few_and_reported() -> None:
    """OpenAI strict mode keeps most real tools strict; each fallback names its reason."""
    tools = list(corpus_tools())
    definitions, notes = convert_and_check("openai", {"strict": True}, tools)
    strict = [d for d in definitions if d["function"]["strict"]]
    fallbacks = [n for n in notes if n.action is NoteAction.STRICT_FALLBACK]
    assert len(strict) + len(fallbacks) == len(tools)
    assert len(strict) > 0.8 * len(tools)
    assert all("strict mode cannot express" in n.detail for n in fallbacks)
