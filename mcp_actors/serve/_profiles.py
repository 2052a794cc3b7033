"""Profiles served: each profile of the config file is a view of the gateway at ``/mcp/<profile>``.

A view asks the gateway's core for what it serves to everyone (listings, calls, reads) and
keeps what the profile selects, under the profile's names: a tool outside the profile is
an unknown tool, a prompt or resource of a server not taken is not found. The core does all
the relaying; a view only filters and translates names, so a request through a profile
costs a dict look-up or two more than one at the plain endpoint.

Names in a view follow the core's rules (:class:`~mcp_actors.serve._names.NameTable`): a
tool renamed by the profile gets its new name first (renames win over generated names),
the rest are named by the profile's ``naming`` (``<server>__<tool>`` or the tool's own
name), a collision gets the project's hash suffix, and a name stays with its tool for the
view's life. A changed profile gets a new view (its names are worked out again, and
clients are told the lists changed); an unchanged one keeps its view and names.

The plain endpoint is the profile :data:`~mcp_actors._config.profiles.DEFAULT_PROFILE`:
everything, unless the config defines a profile of that name.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import mcp_types

from mcp_actors._config.profiles import DEFAULT_PROFILE, Profile, ProfileNaming, ServerSelection
from mcp_actors.errors import McpActorsError
from mcp_actors.serve._gateway import Request, RpcError
from mcp_actors.serve._names import Joined, NameTable, Naming

if TYPE_CHECKING:
    from mcp_actors.serve._gateway import Gateway

__all__ = ["ProfileView", "Profiles", "not_served", "profile_of_path"]

logger = logging.getLogger("mcp_actors.serve")

_RELIST_AFTER: Final = 1.0
"""A name the view never handed out lists again at most this often (as the core does)."""
_RESOURCE_NOT_FOUND: Final = -32002


def _own_name(_server: str, item: str) -> str:
    return item


@attrs.define(eq=False)
class ProfileView:
    """One profile as served: its selection, and the public names it handed out.

    Args:
        profile: The profile.
        naming: The gateway's naming, for a profile named ``server``.
    """

    profile: Profile
    naming: Naming
    tools: NameTable = attrs.field(init=False)
    prompts: NameTable = attrs.field(init=False)
    listed_at: dict[str, float] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        base = _own_name if self.profile.naming is ProfileNaming.TOOL else self.naming
        self.tools = NameTable(self._tool_naming(base))
        self.prompts = NameTable(base)

    def _tool_naming(self, base: Naming) -> Naming:
        def name(server: str, tool: str) -> str:
            selection = self.profile.selection(server)
            renamed = selection.rename.get(tool) if selection is not None else None
            return renamed if renamed is not None else base(server, tool)

        return name

    def tool_selected(self, server: str, tool: str) -> ServerSelection | None:
        """The server's selection when the profile takes ``tool`` of ``server``, else ``None``."""
        selection = self.profile.selection(server)
        return selection if selection is not None and selection.selects(tool) else None

    def takes(self, server: str, kind: str) -> bool:
        """Whether the profile takes the ``prompts`` or ``resources`` of ``server``."""
        selection = self.profile.selection(server)
        return selection is not None and bool(getattr(selection, kind))

    def by_rename(self, name: str) -> tuple[str, str] | None:
        """``(server name, tool)`` that the profile renames to ``name`` (found without a listing)."""
        for server, selection in self.profile.servers.items():
            for tool, renamed in selection.rename.items():
                if renamed == name:
                    return server, tool
        return None


@attrs.define(eq=False)
class Profiles:
    """The profiles a gateway serves, by name; replaced whole when the config file changes.

    Args:
        naming: The gateway's naming (profiles named ``server`` use it).
    """

    naming: Naming = attrs.field(factory=Joined)
    views: dict[str, ProfileView] = attrs.field(factory=dict, init=False)

    def serves(self, name: str) -> bool:
        """Whether ``name`` is a profile served now (the default one always is)."""
        return name == DEFAULT_PROFILE or name in self.views

    def applies(self, name: str) -> bool:
        """Whether a request of profile ``name`` needs a view (the default one without a profile needs none)."""
        return name != DEFAULT_PROFILE or name in self.views

    def names(self) -> list[str]:
        """The configured profiles' names, sorted."""
        return sorted(self.views)

    def update(self, profiles: Mapping[str, Profile]) -> frozenset[str]:
        """Serve ``profiles`` from now on; return the names of those added, changed or removed.

        An unchanged profile keeps its view (and the names it handed out).
        """
        changed = {name for name in self.views if name not in profiles}
        views: dict[str, ProfileView] = {}
        for name, profile in profiles.items():
            current = self.views.get(name)
            if current is not None and current.profile == profile:
                views[name] = current
            else:
                views[name] = ProfileView(profile, self.naming)
                changed.add(name)
        self.views = views
        return frozenset(changed)

    def header_schema(self, gateway: Gateway, profile: str | None, name: str) -> Any | None:
        """The input schema that marks ``Mcp-Param-*`` headers for tool ``name`` of ``profile``, if it marks any.

        A profile names its tools its own way; the schema is the one the gateway listed for
        the same tool, so a header is checked whatever path the call came by.
        """
        view = self.views.get(profile or DEFAULT_PROFILE)
        if view is None:
            return gateway.header_schemas.get(name)
        target = view.tools.resolve(name)
        server = _server_name(gateway, target[0]) if target is not None else None
        if target is None or server is None:
            return None
        return gateway.header_schemas.get(gateway.tools.claim(target[0], server, target[1]))

    # ------------------------------------------------------------------ requests

    async def handle(self, gateway: Gateway, request: Request) -> dict[str, Any]:
        """Answer ``request`` as its profile (:attr:`Request.profile`) sees the gateway.

        Raises:
            RpcError: The JSON-RPC error to answer with (an unknown tool of the profile,
                a profile no longer configured, or what the core raised).
        """
        name = request.profile or DEFAULT_PROFILE
        view = self.views.get(name)
        if view is None:
            if name == DEFAULT_PROFILE:
                return await gateway.handle(_plain(request, request.params))
            raise RpcError(
                mcp_types.INVALID_REQUEST,
                f"the profile {name!r} is no longer configured; connect to one of"
                f" {', '.join(['default', *self.names()])}",
            )
        handler = _HANDLERS.get(request.method)
        if handler is None:
            return await gateway.handle(_plain(request, request.params))
        return await handler(self, gateway, view, request)

    async def _list_tools(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        wire = await gateway.handle(_plain(request, request.params))
        view.listed_at["tools"] = time.monotonic()
        chosen: list[tuple[dict[str, Any], str, str, str, ServerSelection]] = []
        for tool in wire.get("tools", ()):
            target = gateway.tools.resolve(tool.get("name"))
            if target is None:
                continue
            server_id, item = target
            server = _server_name(gateway, server_id)
            selection = view.tool_selected(server, item) if server is not None else None
            if server is not None and selection is not None:
                chosen.append((tool, server_id, server, item, selection))
        # Renamed tools claim their names first: a rename wins over a generated name.
        for tool, server_id, server, item, selection in sorted(chosen, key=lambda c: c[3] not in c[4].rename):
            tool["name"] = view.tools.claim(server_id, server, item)
            description = selection.describe.get(item)
            if description is not None:
                tool["description"] = description
        wire["tools"] = [tool for tool, *_ in chosen]
        return wire

    async def _call_tool(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            return await gateway.handle(_plain(request, params))  # the core's schema check answers
        server_id, server, tool = await self._tool_target(gateway, view, request, name)
        public = gateway.tools.claim(server_id, server, tool)
        return await gateway.handle(_plain(request, {**params, "name": public}))

    async def _tool_target(
        self, gateway: Gateway, view: ProfileView, request: Request, name: str
    ) -> tuple[str, str, str]:
        """``(server id, server name, tool)`` of a tool name of the profile, listing once if it is new."""
        target = view.tools.resolve(name)
        if target is None and time.monotonic() - view.listed_at.get("tools", -math.inf) > _RELIST_AFTER:
            await self._list_tools(gateway, view, _plain(request, _envelope(request), "tools/list"))
            target = view.tools.resolve(name)
        if target is not None:
            server = _server_name(gateway, target[0])
            if server is not None:
                return target[0], server, target[1]
        renamed = view.by_rename(name)
        if renamed is not None:
            # A renamed tool of a server that is down (never listed): its call reports the server.
            server, tool = renamed
            server_id = _server_id(gateway, server)
            if server_id is not None:
                return server_id, server, tool
        raise RpcError(mcp_types.INVALID_PARAMS, f"Unknown tool: {name}")

    async def _list_prompts(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        wire = await gateway.handle(_plain(request, request.params))
        view.listed_at["prompts"] = time.monotonic()
        prompts = []
        for prompt in wire.get("prompts", ()):
            target = gateway.prompts.resolve(prompt.get("name"))
            server = _server_name(gateway, target[0]) if target is not None else None
            if target is not None and server is not None and view.takes(server, "prompts"):
                prompt["name"] = view.prompts.claim(target[0], server, target[1])
                prompts.append(prompt)
        wire["prompts"] = prompts
        return wire

    async def _prompt_target(self, gateway: Gateway, view: ProfileView, request: Request, name: str) -> str:
        """The core's name of a prompt of the profile."""
        target = view.prompts.resolve(name)
        if target is None and time.monotonic() - view.listed_at.get("prompts", -math.inf) > _RELIST_AFTER:
            await self._list_prompts(gateway, view, _plain(request, _envelope(request), "prompts/list"))
            target = view.prompts.resolve(name)
        server = _server_name(gateway, target[0]) if target is not None else None
        if target is None or server is None:
            raise RpcError(mcp_types.INVALID_PARAMS, f"Unknown prompt: {name}")
        return gateway.prompts.claim(target[0], server, target[1])

    async def _get_prompt(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            return await gateway.handle(_plain(request, params))
        public = await self._prompt_target(gateway, view, request, name)
        return await gateway.handle(_plain(request, {**params, "name": public}))

    async def _list_resources(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        wire = await gateway.handle(_plain(request, request.params))
        wire["resources"] = [
            item for item in wire.get("resources", ()) if _takes(gateway, view, gateway.resources.resolve(item["uri"]))
        ]
        return wire

    async def _list_templates(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        wire = await gateway.handle(_plain(request, request.params))
        wire["resourceTemplates"] = [
            item
            for item in wire.get("resourceTemplates", ())
            if _takes(gateway, view, gateway.templates.resolve(item["uriTemplate"]))
        ]
        return wire

    async def _read_resource(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        uri = request.params.get("uri")
        if isinstance(uri, str):
            try:
                target = await gateway.resource_target(uri)
            except RpcError:
                target = None
            if not _takes(gateway, view, target):
                raise RpcError(_RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        return await gateway.handle(_plain(request, request.params))

    async def _complete(self, gateway: Gateway, view: ProfileView, request: Request) -> dict[str, Any]:
        params = request.params
        ref = params.get("ref")
        if isinstance(ref, dict) and ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            public = await self._prompt_target(gateway, view, request, ref["name"])
            params = {**params, "ref": {**ref, "name": public}}
        elif isinstance(ref, dict) and isinstance(ref.get("uri"), str):
            if not _takes(gateway, view, gateway.templates.resolve(ref["uri"])):
                raise RpcError(mcp_types.INVALID_PARAMS, f"Unknown resource template: {ref['uri']}")
        return await gateway.handle(_plain(request, params))


_Handler = Callable[[Profiles, "Gateway", ProfileView, Request], Awaitable[dict[str, Any]]]
_HANDLERS: Final[dict[str, _Handler]] = {
    "tools/list": Profiles._list_tools,
    "tools/call": Profiles._call_tool,
    "prompts/list": Profiles._list_prompts,
    "prompts/get": Profiles._get_prompt,
    "resources/list": Profiles._list_resources,
    "resources/templates/list": Profiles._list_templates,
    "resources/read": Profiles._read_resource,
    "completion/complete": Profiles._complete,
}
"""The methods a profile filters or renames; every other one (ping, discover, logging) is the core's."""


def _plain(request: Request, params: dict[str, Any], method: str | None = None) -> Request:
    """The request as the core answers it for everyone (no profile; its headers kept for the trace it continues)."""
    return Request(method or request.method, params, request.version, notify=request.notify, headers=request.headers)


def _envelope(request: Request) -> dict[str, Any]:
    """Params of a listing made for ``request``: its ``_meta`` (at 2026-07-28, the envelope every request needs)."""
    meta = request.params.get("_meta")
    return {"_meta": meta} if isinstance(meta, dict) else {}


def _server_name(gateway: Gateway, server_id: str) -> str | None:
    try:
        return gateway.service.get(server_id).name
    except McpActorsError:
        return None  # removed from the config meanwhile


def _server_id(gateway: Gateway, server: str) -> str | None:
    try:
        return gateway.service.get(server).id
    except McpActorsError:
        return None


def _takes(gateway: Gateway, view: ProfileView, target: tuple[str, str] | None) -> bool:
    """Whether a resource or template of ``(server id, uri)`` is in the view."""
    if target is None:
        return False
    server = _server_name(gateway, target[0])
    return server is not None and view.takes(server, "resources")


def profile_of_path(path: str, endpoint: str, profiles: Profiles | None) -> str | None:
    """The profile a request's path selects: the endpoint itself is the default one, ``<endpoint>/<name>`` a profile.

    Returns:
        The profile's name, or ``None`` when the path is not served (a profile not configured).
    """
    if path == endpoint:
        return DEFAULT_PROFILE
    head, slash, name = path.rpartition("/")
    if slash and head == endpoint.rstrip("/") and profiles is not None and profiles.serves(name):
        return name
    return None


def not_served(path: str, endpoint: str, profiles: Profiles | None) -> str:
    """Why ``path`` is not found (the 404's message): a profile not configured is named, with those that are."""
    head, slash, name = path.rpartition("/")
    if slash and head == endpoint.rstrip("/") and name:
        known = ", ".join([DEFAULT_PROFILE, *(profiles.names() if profiles is not None else ())])
        return f"no profile {name!r} is configured (the profiles are: {known}); connect to {endpoint}/<profile>"
    return f"not found; the MCP endpoint is {endpoint} (or {endpoint}/<profile>)"
