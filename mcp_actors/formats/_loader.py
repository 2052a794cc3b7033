"""fetchMcpTools and setupMcpTools of the reference design: which tools an LLM request gets."""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import attrs
import trio

from mcp_actors._loops import hop_for
from mcp_actors.errors import ConfigError, McpActorsError
from mcp_actors.tools import McpTool

from ._convert import ApiFormat, OpenAIApi, _profile, convert_tools_async
from ._schema import Schema

__all__ = ["McpToolSource", "McpToolsConfig", "ToolsMode", "fetch_mcp_tools", "setup_mcp_tools"]

logger = logging.getLogger("mcp_actors.formats")


class McpToolSource(Protocol):
    """What the loader needs from the registry (``McpService``): two listing calls."""

    async def list_all_active_server_tools(self) -> list[McpTool]:
        """Every tool of every active server; a failing server is left out, not raised."""
        ...

    async def list_server_tools(self, server_id_or_name: str) -> list[McpTool]:
        """One server's tools.

        Raises:
            McpActorsError: The server is unknown, inactive or unreachable.
        """
        ...


class ToolsMode(enum.Enum):
    """How the servers whose tools a request gets are chosen."""

    AUTO = "auto"
    """Every active server."""
    MANUAL = "manual"
    """Only the servers listed in ``selected_servers``."""


def _selected(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"selectedServers must be a list of server ids or names, got {value!r}", field="selectedServers"
        )
    return tuple(value)


@attrs.frozen(kw_only=True)
class McpToolsConfig:
    """Which MCP tools go with an LLM request (the reference design's config object).

    Attributes:
        enabled: Whether MCP tools are offered at all (off unless set).
        mode: ``AUTO`` (every active server) or ``MANUAL`` (``selected_servers`` only).
        selected_servers: Server ids or names, for ``MANUAL``.
    """

    enabled: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    mode: ToolsMode = attrs.field(default=ToolsMode.AUTO, converter=ToolsMode)
    selected_servers: tuple[str, ...] = attrs.field(default=(), converter=_selected)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> McpToolsConfig:
        """Read the reference design's ``{"enabled", "mode", "selectedServers"}`` mapping.

        Missing keys take the defaults (``enabled`` false, ``mode`` auto); a ``None``
        value counts as missing, as in the reference design's optional fields.

        Raises:
            ConfigError: A key is unknown or a value has the wrong type.
        """
        known = {"enabled", "mode", "selectedServers", "selected_servers"}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ConfigError(
                f"unknown MCP tools setting(s) {unknown}; the settings are enabled, mode and selectedServers",
                field=unknown[0],
            )
        enabled = config.get("enabled")
        mode = config.get("mode")
        selected = config.get("selectedServers", config.get("selected_servers"))
        if enabled is not None and not isinstance(enabled, bool):
            raise ConfigError(f"enabled must be true or false, got {enabled!r}", field="enabled")
        try:
            mode_value = ToolsMode(mode) if mode is not None else ToolsMode.AUTO
        except ValueError:
            raise ConfigError(f"mode must be 'auto' or 'manual', got {mode!r}", field="mode") from None
        return cls(enabled=bool(enabled), mode=mode_value, selected_servers=selected or ())


def _config(config: McpToolsConfig | Mapping[str, Any] | None) -> McpToolsConfig:
    if config is None:
        return McpToolsConfig()
    if isinstance(config, McpToolsConfig):
        return config
    if isinstance(config, Mapping):
        return McpToolsConfig.from_mapping(config)
    raise TypeError(f"config must be a mapping or McpToolsConfig, got {type(config).__name__}")


async def fetch_mcp_tools(
    service: McpToolSource, config: McpToolsConfig | Mapping[str, Any] | None = None
) -> list[McpTool]:
    """The MCP tools an LLM request should get, by the reference design's table.

    ============================  =============================================
    ``enabled`` false or unset    ``[]`` (nothing is asked of the service)
    ``mode`` auto or unset        ``service.list_all_active_server_tools()``
    ``mode`` manual               ``service.list_server_tools()`` per selected
                                  server, concurrently; a server that fails is
                                  logged and skipped, the others still count
    ============================  =============================================

    A server named twice (by id and by name) contributes its tools once.

    Args:
        service: The registry (anything with the two listing calls). Awaited on asyncio,
            the asyncio facade (``rt.service`` of ``mcp_actors.asyncio.open_runtime``): the body runs on
            the runtime's trio loop.
        config: ``{"enabled", "mode", "selectedServers"}`` or a :class:`McpToolsConfig`.

    Returns:
        The tools, in server order (manual mode: the order of ``selectedServers``).

    Raises:
        ConfigError: The config has an unknown key or a wrongly typed value.
        RuntimeError: Awaited off trio with a service that is not the asyncio facade.
    """
    cfg = _config(config)
    if not cfg.enabled:
        return []
    hop = hop_for(service, "fetch_mcp_tools")
    if hop is not None:
        return await hop.run_in_runtime(lambda runtime_service: fetch_mcp_tools(runtime_service, cfg))
    if cfg.mode is ToolsMode.AUTO:
        return list(await service.list_all_active_server_tools())
    servers = list(dict.fromkeys(cfg.selected_servers))
    found: list[list[McpTool]] = [[] for _ in servers]

    async def list_one(i: int, server: str) -> None:
        try:
            found[i] = list(await service.list_server_tools(server))
        except McpActorsError as exc:
            logger.warning("mcp tools: server %r skipped: %s", server, exc)

    async with trio.open_nursery() as nursery:
        for i, server in enumerate(servers):
            nursery.start_soon(list_one, i, server)
    seen: set[str] = set()
    tools: list[McpTool] = []
    for server_tools in found:
        for tool in server_tools:
            if tool.id not in seen:
                seen.add(tool.id)
                tools.append(tool)
    return tools


async def setup_mcp_tools(
    service: McpToolSource,
    config: McpToolsConfig | Mapping[str, Any] | None = None,
    api_format: ApiFormat | str = "openai",
    *,
    strict: bool = False,
    api: OpenAIApi | str = "chat",
    json_schema: bool = False,
) -> tuple[list[Schema], list[McpTool]] | None:
    """The tool definitions for one LLM request, in the provider's format.

    Called before every request, so it is cheap when nothing changed: each server's
    converted definitions are cached per format and options, and a repeated call whose
    servers hand out the same tool objects (the registry does, while nothing changed)
    costs an identity check per tool, O(servers) work otherwise. A server whose tools
    changed re-converts only the changed tools. Uncached tools are converted on this
    task with a checkpoint every 2 ms (see :func:`convert_tools_async`).

    Args:
        service: The registry (anything with the two listing calls). Awaited on asyncio,
            the asyncio facade (``rt.service`` of ``mcp_actors.asyncio.open_runtime``): the body runs on
            the runtime's trio loop.
        config: ``{"enabled", "mode", "selectedServers"}`` or a :class:`McpToolsConfig`;
            unset means disabled, as in the reference design.
        api_format: ``"openai"``, ``"anthropic"``, ``"google"`` (or ``"gemini"``).
        strict: OpenAI only: strict mode.
        api: OpenAI only: ``"chat"`` or ``"responses"``.
        json_schema: Gemini only: ``parametersJsonSchema`` instead of ``parameters``.

    Returns:
        ``(definitions, tools)``: the provider's tool list and the MCP tools behind it
        (to map a called name back with ``tool.id``), or ``None`` when there are none.

    Raises:
        ConfigError: The config is invalid.
        InvalidToolName: A tool id breaks the providers' name rule or is repeated.
        ValueError: An unknown ``api_format`` or an option that does not apply to it.
        RuntimeError: Awaited off trio with a service that is not the asyncio facade.
    """
    _profile(api_format, strict=strict, api=api, json_schema=json_schema)  # fail early, not only with tools
    hop = hop_for(service, "setup_mcp_tools")
    if hop is not None:
        return await hop.run_in_runtime(
            lambda runtime_service: setup_mcp_tools(
                runtime_service, config, api_format, strict=strict, api=api, json_schema=json_schema
            )
        )
    tools = await fetch_mcp_tools(service, config)
    if not tools:
        return None
    if logger.isEnabledFor(logging.DEBUG):
        per_server: dict[str, int] = {}
        for tool in tools:
            per_server[tool.server_name] = per_server.get(tool.server_name, 0) + 1
        for server, count in per_server.items():
            logger.debug("mcp tools: %d from server %r", count, server)
    definitions = await convert_tools_async(tools, api_format, strict=strict, api=api, json_schema=json_schema)
    return definitions, tools
