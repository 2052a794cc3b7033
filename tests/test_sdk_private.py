"""The SDK's private parts we use (``mcp_actors._sdk``) are there, shaped as we use them, and used nowhere else.

An SDK upgrade that moves or reshapes one of them fails here, naming the name and the SDK
version, instead of somewhere deep in a connection at run time.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from mcp_actors import _sdk

SDK_VERSION = importlib.metadata.version("mcp")
PRODUCT = Path(_sdk.__file__).parent

# Attributes of SDK objects that only _sdk may touch (an access through ``self`` is our own attribute).
PRIVATE_ATTRIBUTES = frozenset(
    {
        "_lowlevel_server",
        "_tool_manager",
        "_resource_manager",
        "_request_handlers",
        "_absorb_tool_listing",
        "_initialized",
    }
)


def _broken(name: str, what: str) -> str:
    return (
        f"mcp {SDK_VERSION}: the SDK's private {name} {what}; adapt mcp_actors/_sdk.py"
        " (and the mcp pin in pyproject.toml) to this SDK"
    )


def _check_parameters(name: str, fn: Callable[..., Any], expected: list[tuple[str, Any]]) -> None:
    """``fn`` takes the parameters we pass, by the kinds we pass them (positional or keyword)."""
    params = inspect.signature(fn).parameters
    for param, kind in expected:
        assert param in params, _broken(name, f"has no parameter {param!r} (it has {list(params)})")
        assert params[param].kind in kind, _broken(name, f"takes {param!r} as {params[param].kind.description}")


POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
KEYWORD = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def test_the_input_required_driver_takes_what_we_pass() -> None:
    """run_input_required_driver is a coroutine function of (first, *, dispatch, retry, max_rounds)."""
    fn = _sdk.run_input_required_driver
    assert inspect.iscoroutinefunction(fn), _broken("run_input_required_driver", "is not a coroutine function")
    _check_parameters(
        "run_input_required_driver",
        fn,
        [("first", POSITIONAL), ("dispatch", KEYWORD), ("retry", KEYWORD), ("max_rounds", KEYWORD)],
    )


def test_the_rounds_exceeded_error_is_an_exception() -> None:
    """InputRequiredRoundsExceededError is an exception class built from max_rounds (what the driver raises)."""
    error = _sdk.InputRequiredRoundsExceededError
    assert isinstance(error, type) and issubclass(error, Exception), _broken(
        "InputRequiredRoundsExceededError", "is not an exception class"
    )
    _check_parameters("InputRequiredRoundsExceededError", error.__init__, [("max_rounds", POSITIONAL)])


def test_negotiate_auto_takes_a_session() -> None:
    """negotiate_auto is a coroutine function of one session."""
    fn = _sdk.negotiate_auto
    assert inspect.iscoroutinefunction(fn), _broken("negotiate_auto", "is not a coroutine function")
    _check_parameters("negotiate_auto", fn, [("session", POSITIONAL)])
    assert len(inspect.signature(fn).parameters) == 1, _broken("negotiate_auto", "takes more than a session")


async def test_request_clock_yields_a_clock_we_can_start() -> None:
    """request_clock(timeout) is a context manager whose clock has start(), and its budget raises TimeoutError."""
    _check_parameters("request_clock", _sdk.request_clock, [("timeout", POSITIONAL)])
    with _sdk.request_clock(None) as clock:
        assert callable(getattr(clock, "start", None)), _broken("request_clock", "yields a clock without start()")
        clock.start()
    with pytest.raises(TimeoutError), _sdk.request_clock(0.01) as clock:
        clock.start()
        await trio.sleep(1)


def _demo() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("sdk-private")

    @server.tool()
    def echo(text: str) -> str:
        return text

    def extra() -> str:
        return "extra"

    server.add_resource(FunctionResource.from_function(extra, uri="demo://extra", name="extra"))
    return server


def test_lowlevel_server_is_the_server_under_mcpserver() -> None:
    """MCPServer keeps its low-level Server in _lowlevel_server."""
    server = _demo()
    assert isinstance(_sdk.lowlevel_server(server), Server), _broken(
        "MCPServer._lowlevel_server", "is not a low-level Server"
    )


def test_registered_tools_carry_their_function() -> None:
    """MCPServer._tool_manager.list_tools() gives tools with fn and is_async, which the test servers rewrite."""
    tools = _sdk.registered_tools(_demo())
    assert [tool.name for tool in tools] == ["echo"], _broken("MCPServer._tool_manager", f"lists {tools!r}")
    for attribute in ("fn", "is_async"):
        assert hasattr(tools[0], attribute), _broken("MCPServer._tool_manager", f"gives tools without {attribute}")


def test_remove_resource_removes_a_fixed_resource() -> None:
    """MCPServer._resource_manager._resources maps a URI to its resource; removing one is quiet when absent."""
    server = _demo()
    manager = server._resource_manager
    assert [str(r.uri) for r in manager.list_resources()] == ["demo://extra"], _broken(
        "MCPServer._resource_manager", "does not list the added resource"
    )
    _sdk.remove_resource(server, "demo://extra")
    _sdk.remove_resource(server, "demo://absent")
    assert manager.list_resources() == [], _broken("MCPServer._resource_manager._resources", "kept the resource")


def test_absorb_tool_listing_takes_a_listing_and_completeness() -> None:
    """ClientSession._absorb_tool_listing(result, *, complete) returns a ListToolsResult."""
    absorb = getattr(ClientSession, "_absorb_tool_listing", None)
    assert absorb is not None, _broken("ClientSession._absorb_tool_listing", "is gone")
    _check_parameters("ClientSession._absorb_tool_listing", absorb, [("result", POSITIONAL), ("complete", KEYWORD)])
    hints = inspect.signature(absorb).return_annotation
    assert "ListToolsResult" in str(hints), _broken("ClientSession._absorb_tool_listing", f"returns {hints}")


class _Storage:
    async def get_tokens(self) -> OAuthToken | None:
        return OAuthToken(access_token="stored", token_type="Bearer")

    async def set_tokens(self, tokens: OAuthToken) -> None:
        pass

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        pass


async def test_an_oauth_provider_says_whether_it_loaded_its_store() -> None:
    """OAuthClientProvider._initialized is False until _initialize() loads the stored tokens, then True."""
    metadata = OAuthClientMetadata(redirect_uris=["http://localhost:1/callback"])  # type: ignore[list-item]
    provider = OAuthClientProvider("https://example.test/mcp", metadata, _Storage())
    assert hasattr(provider, "_initialized"), _broken("OAuthClientProvider._initialized", "is gone")
    assert _sdk.provider_initialized(provider) is False, _broken("OAuthClientProvider._initialized", "starts true")
    await _sdk.initialize_provider(provider)
    assert _sdk.provider_initialized(provider) is True, _broken("OAuthClientProvider._initialize", "sets no flag")
    tokens = provider.context.current_tokens
    assert tokens is not None and tokens.access_token == "stored", _broken(
        "OAuthClientProvider._initialize", "does not load the stored tokens"
    )


@pytest.mark.parametrize(
    ("cls", "hook"),
    [
        (cls, hook)
        for cls in (OAuthClientProvider, ClientCredentialsOAuthProvider)
        for hook in _sdk.OAUTH_PROVIDER_HOOKS[cls.__name__]
    ],
)
def test_the_oauth_hooks_we_override_are_there(cls: type, hook: str) -> None:
    """Each provider hook we override is a coroutine method of self alone."""
    name = f"{cls.__name__}.{hook}"
    method = getattr(cls, hook, None)
    assert method is not None, _broken(name, "is gone")
    assert inspect.iscoroutinefunction(method), _broken(name, "is not a coroutine method")
    assert list(inspect.signature(method).parameters) == ["self"], _broken(
        name, f"takes {list(inspect.signature(method).parameters)}"
    )


@pytest.mark.parametrize("hook", sorted(_sdk.OAUTH_PROVIDER_HOOKS_WITH_ARGUMENTS))
def test_the_oauth_hooks_with_arguments_are_there(hook: str) -> None:
    """Each provider hook we override with arguments keeps its parameters and its kind (coroutine or not)."""
    name = f"OAuthClientProvider.{hook}"
    parameters, coroutine = _sdk.OAUTH_PROVIDER_HOOKS_WITH_ARGUMENTS[hook]
    method = getattr(OAuthClientProvider, hook, None)
    assert method is not None, _broken(name, "is gone")
    assert inspect.iscoroutinefunction(method) is coroutine, _broken(name, "changed between coroutine and plain")
    assert tuple(inspect.signature(method).parameters) == parameters, _broken(
        name, f"takes {list(inspect.signature(method).parameters)}"
    )


def _private_uses(source: str, name: str) -> list[str]:
    """The private SDK imports and attribute uses in one module's source (run by :func:`_scan`)."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[0] in {"mcp", "mcp_types"} and any(part.startswith("_") for part in parts[1:]):
                found.append(f"{where} imports {module}")
        if (
            isinstance(node, ast.Attribute)
            and node.attr in PRIVATE_ATTRIBUTES
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ):
            found.append(f"{where} uses .{node.attr}")
        if isinstance(node, ast.Constant) and node.value in PRIVATE_ATTRIBUTES:
            found.append(f"{where} names {node.value!r}")
    return found


def _scan(sources: dict[str, str]) -> list[str]:
    """:func:`_private_uses` of every source, run in an interpreter of its own.

    CPython 3.11's ``ast.parse`` keeps the depth counter of its AST converter per interpreter,
    not per thread: when another thread of this test worker builds an AST at the same moment
    (a thread an earlier test left running, an import there), the parse fails with
    "SystemError: AST constructor recursion depth mismatch". The scan reads sources only, so a
    process of its own changes nothing of what it shows.
    """
    script = "\n".join(
        [
            "import ast, json, sys",
            inspect.getsource(_private_uses),
            "data = json.load(sys.stdin)",
            "PRIVATE_ATTRIBUTES = frozenset(data['attributes'])",
            "found = [use for name, source in data['sources'].items() for use in _private_uses(source, name)]",
            "print(json.dumps(found))",
        ]
    )
    document = json.dumps({"attributes": sorted(PRIVATE_ATTRIBUTES), "sources": sources})
    done = subprocess.run(
        [sys.executable, "-c", script], input=document, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout)
    return found


def test_only_sdk_module_touches_the_sdks_private_parts() -> None:
    """No product module but mcp_actors/_sdk.py imports a private SDK module or touches a private attribute."""
    found = _scan(
        {
            str(path.relative_to(PRODUCT.parent)): path.read_text()
            for path in sorted(PRODUCT.rglob("*.py"))
            if path != Path(_sdk.__file__)
        }
    )
    assert found == [], "import these from mcp_actors._sdk instead:\n" + "\n".join(found)


def test_the_scan_sees_a_private_import() -> None:
    """The scan above finds a private SDK import, a private attribute and a getattr by name, not our own self._x."""
    source = (
        "from mcp.client._probe import negotiate_auto\n"
        "import mcp.shared._request_clock\n"
        "x = server._lowlevel_server\n"
        "y = getattr(session, '_absorb_tool_listing', None)\n"
        "z = self._initialized\n"
    )
    assert sorted(use.split(" ", 1)[1] for use in _scan({"probe.py": source})) == [
        "imports mcp.client._probe",
        "imports mcp.client._probe.negotiate_auto",
        "imports mcp.shared._request_clock",
        "names '_absorb_tool_listing'",
        "uses ._lowlevel_server",
    ]
