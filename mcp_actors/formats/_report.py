"""The conversion report: what a converter had to change to satisfy a provider."""

from __future__ import annotations

import enum

import attrs

__all__ = ["ConversionNote", "NoteAction"]


class NoteAction(enum.Enum):
    """What a converter did to one part of a tool's schema.

    Only changes that alter what the provider is told are reported; rewrites that
    keep the meaning exactly (``definitions`` → ``$defs``, ``const`` → one-value
    ``enum``, an ``items: {}`` added to an array) are not.
    """

    DROPPED = "dropped"
    """A keyword was removed and its information is gone (``title``, ``$schema``)."""
    MOVED_TO_DESCRIPTION = "moved_to_description"
    """A keyword the provider rejects was removed and restated in the description."""
    REWRITTEN = "rewritten"
    """A construct was replaced by a near equivalent (``oneOf`` → ``anyOf``)."""
    MERGED = "merged"
    """``allOf`` branches (or a root union) were folded into one schema, with loss."""
    RECURSION_CUT = "recursion_cut"
    """A recursive ``$ref`` was unrolled to a bounded depth and then replaced."""
    PLACEHOLDER = "placeholder"
    """A value the provider cannot describe was replaced by a described string."""
    WRAPPED = "wrapped"
    """A root schema that is not an object was wrapped in one."""
    UNRESOLVED_REF = "unresolved_ref"
    """A ``$ref`` that points outside the schema (or nowhere) was replaced."""
    STRICT_FALLBACK = "strict_fallback"
    """OpenAI strict mode cannot express the schema; the tool is sent non-strict."""
    LIMIT = "limit"
    """A provider limit is exceeded; the request may be rejected."""


@attrs.frozen(kw_only=True)
class ConversionNote:
    """One change a converter made, so a caller can log it or show it to a person.

    Attributes:
        tool_id: The tool's id (the name the LLM sees).
        path: Where in the tool's input schema, as a JSON pointer (``""`` is the root,
            ``"/properties/path/items"`` an array's items).
        action: What was done.
        detail: A short human-readable account, naming the keyword and its value.
    """

    tool_id: str
    path: str
    action: NoteAction
    detail: str
