"""Gateway profiles: named selections of servers and tools, kept in the config file's ``profiles`` section.

A profile is what one agent sees through ``mcp-actors serve`` at ``/mcp/<profile>``: some
servers (all their tools, or the tools matching globs), tools renamed or described anew,
and the servers' prompts and resources unless turned off. The section is a JSON object of
profiles by name::

    "profiles": {
      "coder": {
        "description": "what the coding agent needs",
        "naming": "server",
        "servers": {
          "github": {"tools": ["search_*", "get_issue"], "rename": {"search_code": "search"},
                     "describe": {"search_code": "Search the code of our repositories"}},
          "fs": {"prompts": false, "resources": false}
        }
      }
    }

* ``servers`` maps a server's name (or a glob: ``"*"`` is every server) to what is taken of
  it; an exact name wins over a glob.
* ``tools`` lists tool names or globs (``fnmatch``, case-sensitive); absent: every tool. A
  tool named in ``rename`` or ``describe`` is selected too.
* ``rename`` gives a tool its public name in this profile (as written, without the server
  prefix); ``describe`` replaces its description.
* ``naming``: ``"server"`` (default) names the other tools and prompts ``<server>__<name>``
  as the plain endpoint does; ``"tool"`` keeps their own names (a profile in front of one
  server, or of servers whose names do not collide).
* ``prompts`` / ``resources`` (default ``true``): whether the server's prompts, resources and
  templates come along.

The profile named :data:`DEFAULT_PROFILE` (``default``), when there is one, is what the plain
endpoint (``/mcp``) serves; without it ``/mcp`` serves every enabled server.

The config file has one writer per change: :func:`modify_profiles` changes the section under
the store's cross-process lock (:meth:`~mcp_actors._config.store.ConfigStore.modify_section`),
leaving the server records and every other section as they are.
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import attrs

from mcp_actors.errors import InvalidProfile

if TYPE_CHECKING:
    from mcp_actors._config.store import ConfigStore

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES_KEY",
    "Profile",
    "ProfileNaming",
    "ServerSelection",
    "check_profile_name",
    "load_profiles",
    "modify_profiles",
    "profile_from_json",
    "profile_to_json",
    "profiles_from_json",
    "profiles_to_json",
]

PROFILES_KEY: Final = "profiles"
"""The config file's top-level key of the profiles section."""
DEFAULT_PROFILE: Final = "default"
"""The profile the plain endpoint (``/mcp``) serves when it is defined."""

_PROFILE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A profile's name is one path segment: letters, digits, ``_ . -``, at most 64, not starting with a mark."""
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_./-]{1,128}")
"""What MCP allows in a tool name (SEP-986)."""
_SERVER_KEYS: Final = ("tools", "rename", "describe", "prompts", "resources")
_PROFILE_KEYS: Final = ("description", "naming", "servers")
_T = TypeVar("_T")


class ProfileNaming(enum.StrEnum):
    """How a profile names the tools and prompts it does not rename."""

    SERVER = "server"
    """``<server>__<name>``, as the plain endpoint names them."""
    TOOL = "tool"
    """The item's own name (a collision gets the project's hash suffix)."""


def _frozen_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return dict(value)


def _frozen_selections(value: Mapping[str, ServerSelection]) -> Mapping[str, ServerSelection]:
    return dict(value)


@attrs.frozen(kw_only=True)
class ServerSelection:
    """What a profile takes of one server.

    Attributes:
        tools: Tool names or globs selected; ``None``: every tool.
        rename: Public names by tool name.
        describe: Descriptions by tool name, replacing the server's.
        prompts: Whether the server's prompts come along.
        resources: Whether the server's resources and templates come along.
    """

    tools: tuple[str, ...] | None = None
    rename: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    describe: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map)
    prompts: bool = True
    resources: bool = True

    def selects(self, tool: str) -> bool:
        """Whether ``tool`` is in the selection (listed, matched by a glob, renamed or described)."""
        if self.tools is None or tool in self.rename or tool in self.describe:
            return True
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.tools)


@attrs.frozen(kw_only=True)
class Profile:
    """One named view of the gateway: the servers and tools an agent sees, and their names.

    Attributes:
        name: The profile's name (its path segment: ``/mcp/<name>``).
        description: What it is for (shown by ``mcp-actors profile list``).
        naming: How tools and prompts that are not renamed are named.
        servers: What is taken of each server, by server name or glob.
    """

    name: str
    description: str = ""
    naming: ProfileNaming = ProfileNaming.SERVER
    servers: Mapping[str, ServerSelection] = attrs.field(factory=dict, converter=_frozen_selections)

    def selection(self, server: str) -> ServerSelection | None:
        """What the profile takes of server ``server`` (exact name first, then the first glob), or ``None``."""
        exact = self.servers.get(server)
        if exact is not None:
            return exact
        for pattern, selection in self.servers.items():
            if fnmatch.fnmatchcase(server, pattern):
                return selection
        return None


# ----------------------------------------------------------------------------- validation


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_profile_name(name: Any) -> str:
    """Return ``name`` when it can name a profile (one URL path segment), else raise.

    Raises:
        InvalidProfile: It is not a string of letters, digits, ``_ . -`` (at most 64,
            starting with a letter or digit).
    """
    if not isinstance(name, str) or _PROFILE_NAME.fullmatch(name) is None:
        raise InvalidProfile(
            f"profile name {name!r} is not usable in a URL path: use letters, digits, '_', '.' and '-'"
            " (at most 64, starting with a letter or digit)",
            profile=name if isinstance(name, str) else None,
            field="profiles",
        )
    return name


class _Problem(Exception):
    """One problem at a path inside a profile (turned into :class:`InvalidProfile`)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


def _object(value: Any, path: str, keys: tuple[str, ...] | None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Problem(path, f"must be an object, got {_type_name(value)}")
    if keys is not None:
        for key in value:
            if key not in keys:
                raise _Problem(f"{path}.{key}" if path else key, f"is not a known key (known: {', '.join(keys)})")
    return value


def _strings(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Problem(path, f"must be a list of tool names or globs, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise _Problem(f"{path}[{index}]", f"must be a non-empty string, got {_type_name(item)}")
    return tuple(value)


def _string_map(value: Any, path: str, *, tool_names: bool) -> dict[str, str]:
    mapping = _object(value, path, None)
    for key, item in mapping.items():
        if not isinstance(item, str) or not item:
            raise _Problem(f"{path}.{key}", f"must be a non-empty string, got {_type_name(item)}")
        if tool_names and _TOOL_NAME.fullmatch(item) is None:
            raise _Problem(
                f"{path}.{key}",
                f"{item!r} is not a valid tool name (letters, digits, '_', '-', '.', '/'; at most 128)",
            )
    return dict(mapping)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _Problem(path, f"must be true or false, got {_type_name(value)}")
    return value


def _selection(value: Any, path: str) -> ServerSelection:
    data = _object(value, path, _SERVER_KEYS)
    return ServerSelection(
        tools=_strings(data["tools"], f"{path}.tools") if "tools" in data else None,
        rename=_string_map(data.get("rename", {}), f"{path}.rename", tool_names=True),
        describe=_string_map(data.get("describe", {}), f"{path}.describe", tool_names=False),
        prompts=_bool(data.get("prompts", True), f"{path}.prompts"),
        resources=_bool(data.get("resources", True), f"{path}.resources"),
    )


def _profile(name: str, value: Any) -> Profile:
    data = _object(value, "", _PROFILE_KEYS)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _Problem("description", f"must be a string, got {_type_name(description)}")
    naming = data.get("naming", ProfileNaming.SERVER.value)
    try:
        naming = ProfileNaming(naming)
    except ValueError:
        allowed = ", ".join(repr(member.value) for member in ProfileNaming)
        raise _Problem("naming", f"must be one of {allowed}, got {naming!r}") from None
    servers_value = _object(data.get("servers", {}), "servers", None)
    servers: dict[str, ServerSelection] = {}
    public: dict[str, str] = {}
    for server, selection_value in servers_value.items():
        if not server:
            raise _Problem("servers", "a server name must not be empty")
        selection = _selection(selection_value, f"servers.{server}")
        for tool, renamed in selection.rename.items():
            other = public.get(renamed)
            if other is not None:
                raise _Problem(
                    f"servers.{server}.rename.{tool}",
                    f"{renamed!r} is already the new name of {other}; give each tool its own name",
                )
            public[renamed] = f"{server}/{tool}"
        servers[server] = selection
    return Profile(name=name, description=description, naming=naming, servers=servers)


def profile_from_json(name: str, value: Any) -> Profile:
    """Read one profile from its JSON form.

    Raises:
        InvalidProfile: The name or a field is invalid; the message names the profile and
            the field (``profiles.<name>.<path>``) and says what is expected.
    """
    check_profile_name(name)
    try:
        return _profile(name, value)
    except _Problem as exc:
        field = f"{PROFILES_KEY}.{name}" + (f".{exc.path}" if exc.path else "")
        raise InvalidProfile(
            f"profile {name!r}: {field} {exc.problem}; fix it (mcp-actors profile show {name}) and retry",
            profile=name,
            field=field,
        ) from None


def profiles_from_json(value: Any) -> dict[str, Profile]:
    """Read the ``profiles`` section (``None``, when the file has none, is no profiles).

    Raises:
        InvalidProfile: The section is not an object, or a profile is invalid (named, with
            its field).
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidProfile(
            f"the config file's {PROFILES_KEY!r} section must be an object of profiles by name,"
            f" got {_type_name(value)}; fix it by hand",
            field=PROFILES_KEY,
        )
    return {name: profile_from_json(name, item) for name, item in value.items()}


def _selection_to_json(selection: ServerSelection) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if selection.tools is not None:
        data["tools"] = list(selection.tools)
    if selection.rename:
        data["rename"] = dict(selection.rename)
    if selection.describe:
        data["describe"] = dict(selection.describe)
    if not selection.prompts:
        data["prompts"] = False
    if not selection.resources:
        data["resources"] = False
    return data


def profile_to_json(profile: Profile) -> dict[str, Any]:
    """The JSON form of ``profile`` (defaults left out); :func:`profile_from_json` reads it back equal."""
    data: dict[str, Any] = {}
    if profile.description:
        data["description"] = profile.description
    if profile.naming is not ProfileNaming.SERVER:
        data["naming"] = profile.naming.value
    data["servers"] = {server: _selection_to_json(selection) for server, selection in profile.servers.items()}
    return data


def profiles_to_json(profiles: Mapping[str, Profile]) -> dict[str, Any] | None:
    """The ``profiles`` section for ``profiles`` (``None`` when there are none: the key is left out)."""
    if not profiles:
        return None
    return {name: profile_to_json(profile) for name, profile in profiles.items()}


# ----------------------------------------------------------------------------- the file


def load_profiles(store: ConfigStore) -> tuple[dict[str, Profile], tuple[int, int, int, int] | None]:
    """The profiles of ``store``'s file, and the fingerprint of the version read.

    Raises:
        InvalidProfile: The section is malformed.
        ConfigFileCorrupt, OSError: The file cannot be read (as :meth:`ConfigStore.load`).
    """
    value, fingerprint = store.load_section(PROFILES_KEY)
    return profiles_from_json(value), fingerprint


def modify_profiles(store: ConfigStore, fn: Callable[[dict[str, Profile]], _T]) -> _T:
    """Change the profiles under the config file's lock; ``fn`` edits the dict in place.

    The section is written back only when it changed; the server records and every other
    section stay as they are. If ``fn`` raises, nothing is written.

    Raises:
        InvalidProfile: The section in the file is malformed (fix it by hand first), or
            ``fn`` left an invalid profile.
        ConfigFileCorrupt, ConfigFileLocked, ConfigWriteFailed: As :meth:`ConfigStore.modify`.
    """
    from mcp_actors._config.store import SectionChange

    def change(current: Any) -> SectionChange:
        profiles = profiles_from_json(current)
        result = fn(profiles)
        for name, profile in profiles.items():
            if profile.name != name:
                raise ValueError(f"profile {profile.name!r} is stored under another name, {name!r}")
        section = profiles_to_json(profiles)
        if section is not None:
            for name, item in section.items():
                profile_from_json(name, item)  # what is written reads back
        return SectionChange(value=section, result=result)

    return cast("_T", store.modify_section(PROFILES_KEY, change))
