"""The conformance fixture's skill: the ``io.modelcontextprotocol/skills`` extension (SEP-2640).

Why here: the suite's ``sep-2640-*`` scenarios skip every check against a server that does not
declare the extension, which would make them pass without proving anything. The SDK has no
skills, but its :class:`~mcp.server.mcpserver.Extension` takes what they need: the skill's
files as resources, and the extension's methods (``skills/list``, ``skills/get``,
``resources/directory/read``). This module declares the extension (with ``directoryRead``) and
serves one small skill on those public hooks:

=====================================================  =======================================
``skill://mcp-actors/conformance-fixture/SKILL.md``    the manifest: YAML frontmatter (``name``,
                                                       ``description``), then its instructions
``.../conformance-fixture/references/guide.md``        a file in a subdirectory
=====================================================  =======================================

``skills/list`` answers the one entry (``uri``, ``frontmatter``, ``resources``: every file with its
SHA-256 digest and size) in one page, ``skills/get`` the same entry by URI, and
``resources/directory/read`` the direct children of the skill's directory and of ``references``
(a subdirectory as ``inode/directory``). An unknown skill, or a URI that is not a directory, is
``-32602``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Extension, MethodBinding, ResourceBinding
from mcp.server.mcpserver.resources import TextResource
from mcp.shared.exceptions import MCPError

__all__ = ["SKILLS_EXTENSION", "SKILL_URI", "SkillsExtension"]

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
"""The extension's identifier, advertised under ``capabilities.extensions`` with ``directoryRead``."""

_NAME: Final = "conformance-fixture"
_DESCRIPTION: Final = "How to use the mcp-actors conformance fixture server; served to exercise the skills extension."
_ROOT: Final = f"skill://mcp-actors/{_NAME}"

SKILL_URI: Final = f"{_ROOT}/SKILL.md"
"""The skill's manifest: its final path segment before ``SKILL.md`` is the skill's name."""

_GUIDE_URI: Final = f"{_ROOT}/references/guide.md"
_DIRECTORY_MIME: Final = "inode/directory"
_MARKDOWN: Final = "text/markdown"
_CACHE: Final[dict[str, Any]] = {"ttlMs": 60_000, "cacheScope": "public"}
"""The list-caching attributes skills results carry from 2026-07-28 (SEP-2549)."""

_SKILL_MD: Final = f"""---
name: {_NAME}
description: {_DESCRIPTION}
---

# The conformance fixture

Start it with `python -m mcp_actors.testing.conformance_server --port 0`; it prints the URL of its
streamable HTTP endpoint. `references/guide.md` lists what it serves.
"""

_GUIDE_MD: Final = """# What the fixture serves

Tools named `test_*` (every kind of content, logging, progress, sampling, elicitation, input
requests), resources under `test://`, prompts named `test_*`, and the tasks extension's tools.
"""

_FILES: Final[dict[str, str]] = {SKILL_URI: _SKILL_MD, _GUIDE_URI: _GUIDE_MD}


def _digest(text: str) -> dict[str, Any]:
    data = text.encode()
    return {"digest": f"sha256:{hashlib.sha256(data).hexdigest()}", "size": len(data)}


def _entry() -> dict[str, Any]:
    """The skill's entry, as ``skills/list`` and ``skills/get`` answer it."""
    return {
        "uri": SKILL_URI,
        "frontmatter": {"name": _NAME, "description": _DESCRIPTION},
        "resources": [{"uri": uri, **_digest(text)} for uri, text in _FILES.items()],
    }


_DIRECTORIES: Final[dict[str, list[dict[str, str]]]] = {
    _ROOT: [
        {"uri": SKILL_URI, "name": "SKILL.md", "mimeType": _MARKDOWN},
        {"uri": f"{_ROOT}/references", "name": "references", "mimeType": _DIRECTORY_MIME},
    ],
    f"{_ROOT}/references": [{"uri": _GUIDE_URI, "name": "guide.md", "mimeType": _MARKDOWN}],
}


class _ListParams(types.RequestParams):
    cursor: str | None = None


class _UriParams(types.RequestParams):
    uri: str
    cursor: str | None = None


class SkillsExtension(Extension):
    """The ``io.modelcontextprotocol/skills`` extension of the fixture server (see the module docstring)."""

    identifier = SKILLS_EXTENSION

    def settings(self) -> dict[str, Any]:
        """``directoryRead``: the server answers ``resources/directory/read`` for its skill's directories."""
        return {"directoryRead": True}

    def resources(self) -> list[ResourceBinding]:
        """The skill's files, readable with ``resources/read`` (the manifest's name and description are its own)."""
        manifest = TextResource(
            uri=SKILL_URI, name=_NAME, description=_DESCRIPTION, mime_type=_MARKDOWN, text=_SKILL_MD
        )
        guide = TextResource(
            uri=_GUIDE_URI, name="guide.md", description="What the fixture serves.", mime_type=_MARKDOWN, text=_GUIDE_MD
        )
        return [ResourceBinding(manifest), ResourceBinding(guide)]

    def methods(self) -> list[MethodBinding]:
        """``skills/list``, ``skills/get`` and ``resources/directory/read``."""
        return [
            MethodBinding("skills/list", _ListParams, _list_skills),
            MethodBinding("skills/get", _UriParams, _get_skill),
            MethodBinding("resources/directory/read", _UriParams, _read_directory),
        ]


async def _list_skills(ctx: ServerRequestContext[Any, Any], params: _ListParams) -> dict[str, Any]:
    return {"skills": [_entry()], **_CACHE}


async def _get_skill(ctx: ServerRequestContext[Any, Any], params: _UriParams) -> dict[str, Any]:
    if params.uri != SKILL_URI:
        raise MCPError(code=types.INVALID_PARAMS, message=f"no skill at {params.uri!r}", data={"uri": params.uri})
    return {"skill": _entry(), **_CACHE}


async def _read_directory(ctx: ServerRequestContext[Any, Any], params: _UriParams) -> dict[str, Any]:
    children = _DIRECTORIES.get(params.uri.rstrip("/"))
    if children is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"not a directory: {params.uri!r}", data={"uri": params.uri})
    return {"resources": [dict(child) for child in children]}
