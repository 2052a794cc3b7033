"""The public faces of the packages: sorted ``__all__``, every name importable and documented."""

from __future__ import annotations

import importlib
import inspect

import pytest

# The documented public face: every other module of the package is private (``_name``), a
# program (``__main__``, ``demo_server``), or listed here.
PACKAGES = [
    "supervisors",
    "mcp_actors",
    "mcp_actors.adapters",
    "mcp_actors.asyncio",
    "mcp_actors.auth",
    "mcp_actors.cli",
    "mcp_actors.config_import",
    "mcp_actors.connection",
    "mcp_actors.errors",
    "mcp_actors.events",
    "mcp_actors.formats",
    "mcp_actors.integrations",
    "mcp_actors.integrations.anthropic",
    "mcp_actors.integrations.google_adk",
    "mcp_actors.integrations.langchain",
    "mcp_actors.integrations.llamaindex",
    "mcp_actors.integrations.openai_agents",
    "mcp_actors.integrations.pydantic_ai",
    "mcp_actors.naming",
    "mcp_actors.portal",
    "mcp_actors.process_tracker",
    "mcp_actors.records",
    "mcp_actors.runtime",
    "mcp_actors.serve",
    "mcp_actors.service",
    "mcp_actors.store",
    "mcp_actors.stress",
    "mcp_actors.testing",
    "mcp_actors.testing.hostile",
    "mcp_actors.tools",
    "mcp_actors.transports",
]
PROGRAMS = {"__main__", "demo_server"}


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_importable_and_documented(name: str) -> None:
    """``__all__`` is sorted, every name resolves, and public classes/functions have docstrings."""
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported)
    for attr in exported:
        value = getattr(module, attr)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{name}.{attr} has no docstring"


def test_errors_share_one_root() -> None:
    """Every public error derives from McpActorsError, so hosts can catch them all."""
    from mcp_actors import errors

    for attr in errors.__all__:
        assert issubclass(getattr(errors, attr), errors.McpActorsError)


def test_importing_the_package_is_light() -> None:
    """``import mcp_actors`` does not import the runtime (the demo server starts faster)."""
    import subprocess
    import sys

    code = "import sys, mcp_actors; print('mcp_actors.runtime' in sys.modules, 'mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_the_connection_actor_brings_anyios_trio_backend_so_a_first_connection_imports_nothing() -> None:
    """The SDK's session needs anyio's trio backend; it is loaded with us, not on the first connect."""
    import subprocess
    import sys

    code = "import sys, mcp_actors.connection; print('anyio._backends._trio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True"]


def test_every_module_is_documented_public_private_or_a_program() -> None:
    """No module slips into the public face unnoticed: it is in the documented list, private, or a program."""
    import pathlib

    import mcp_actors

    package = pathlib.Path(mcp_actors.__file__).parent
    public = {name.removeprefix("mcp_actors.") for name in PACKAGES if name.startswith("mcp_actors.")}
    for path in package.iterdir():
        name = path.stem if path.suffix == ".py" else path.name
        if name.startswith("_") or name in PROGRAMS or not (path.suffix == ".py" or (path / "__init__.py").exists()):
            continue
        assert name in public, f"mcp_actors.{name} is neither documented (tests/test_exports.py) nor private"


PUBLIC_SUBMODULES = {
    "mcp_actors.integrations.anthropic",
    "mcp_actors.integrations.google_adk",
    "mcp_actors.integrations.langchain",
    "mcp_actors.integrations.llamaindex",
    "mcp_actors.integrations.openai_agents",
    "mcp_actors.integrations.pydantic_ai",
    "mcp_actors.testing.conformance_server",
    "mcp_actors.testing.fault_server",
    "mcp_actors.testing.hostile",
    "mcp_actors.testing.memory",
    "mcp_actors.testing.servers",
}


@pytest.mark.parametrize("package_name", [name for name in PACKAGES if name.count(".") == 1])
def test_the_modules_inside_a_public_package_are_private_unless_documented(package_name: str) -> None:
    """A public package's face is its ``__init__``: every module in it is private or documented here."""
    import pathlib

    module = importlib.import_module(package_name)
    if not module.__file__ or not module.__file__.endswith("__init__.py"):
        return
    for path in pathlib.Path(module.__file__).parent.iterdir():
        name = path.stem if path.suffix == ".py" else path.name
        if name.startswith("_") or not (path.suffix == ".py" or (path / "__init__.py").exists()):
            continue
        assert f"{package_name}.{name}" in PUBLIC_SUBMODULES, f"{package_name}.{name} is neither documented nor private"
