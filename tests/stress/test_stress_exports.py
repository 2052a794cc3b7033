"""The public face of mcp_actors.stress: sorted, importable, documented."""

from __future__ import annotations

import inspect

import mcp_actors.stress as stress
from mcp_actors import errors


def test_all_is_sorted_importable_and_documented() -> None:
    """``__all__`` is sorted, every name resolves, and public classes/functions have docstrings."""
    exported = list(stress.__all__)
    assert exported == sorted(exported)
    for name in exported:
        value = getattr(stress, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"


def test_stress_errors_are_config_errors() -> None:
    """Bad stress input is a ConfigError, so the CLI maps it to exit status 2."""
    assert issubclass(errors.StressConfigInvalid, errors.ConfigError)
    assert "StressConfigInvalid" in errors.__all__
