"""The public face of mcp_actors.formats: sorted ``__all__``, importable, documented."""

from __future__ import annotations

import inspect

import attrs
import pytest

import mcp_actors.formats as formats
from mcp_actors.formats import ConversionNote, NoteAction


def test_all_is_sorted_and_every_name_is_documented() -> None:
    """``__all__`` is sorted; every public class and function has a docstring."""
    assert formats.__all__ == sorted(formats.__all__)
    for name in formats.__all__:
        value = getattr(formats, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"


def test_public_names_come_from_private_modules() -> None:
    """Every exported class and function lives in a private module of the package."""
    for name in formats.__all__:
        value = getattr(formats, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("mcp_actors.formats._"), (name, value.__module__)


def test_conversion_note_is_a_frozen_value() -> None:
    """A note is an immutable, comparable value (it can be logged, stored, deduplicated)."""
    note = ConversionNote(tool_id="t", path="/properties/a", action=NoteAction.DROPPED, detail="title")
    assert note == ConversionNote(tool_id="t", path="/properties/a", action=NoteAction.DROPPED, detail="title")
    assert len({note, note}) == 1
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        note.detail = "other"  # type: ignore[misc]
