"""``mcp-actors profile``: the gateway's profiles (what each agent sees), edited in the config file.

::

    mcp-actors profile list [--json]
    mcp-actors profile show NAME [--json]
    mcp-actors profile add NAME [--server S]... [--tool S/GLOB]... [--rename S/TOOL=NEW]...
                                [--describe S/TOOL=TEXT]... [--naming server|tool] [--description TEXT]
    mcp-actors profile edit NAME [the same options] [--remove-server S]... [--remove-tool S/GLOB]...
    mcp-actors profile rm NAME

Every change goes through the config file's lock (:func:`mcp_actors._config.profiles.modify_profiles`):
the server records and every other section are written back as they were, and a running
``mcp-actors serve`` applies the change within a second. A server named by ``--server``,
``--tool``, ``--rename`` or ``--describe`` must be configured (globs such as ``*`` are taken
as they are). Registered in :mod:`mcp_actors.cli._app` as ``app.add_typer(profile_app, name="profile")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcp_actors.cli._run import _execute, _Options
from mcp_actors.cli._support import CliError, ExitCode, print_json

if TYPE_CHECKING:
    from mcp_actors._config.profiles import Profile, ServerSelection
    from mcp_actors._config.store import ConfigStore

__all__ = ["profile_app"]

profile_app = typer.Typer(
    help="The gateway's profiles: named selections of servers and tools, served at /mcp/<profile>.",
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (and nothing else there).")]
NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The profile's name (its path: /mcp/NAME).")]
Servers = Annotated[
    list[str] | None, typer.Option("--server", metavar="S", help="Take every tool of server S (repeatable).")
]
Tools = Annotated[
    list[str] | None,
    typer.Option("--tool", metavar="S/GLOB", help="Take the tools of server S matching GLOB (repeatable)."),
]
Renames = Annotated[
    list[str] | None,
    typer.Option("--rename", metavar="S/TOOL=NEW", help="Serve TOOL of S as NEW; an empty NEW undoes it."),
]
Describes = Annotated[
    list[str] | None,
    typer.Option("--describe", metavar="S/TOOL=TEXT", help="Give TOOL of S this description; empty undoes it."),
]
NamingOpt = Annotated[
    str | None,
    typer.Option("--naming", metavar="server|tool", help="Name other tools <server>__<tool> or by their own names."),
]
DescriptionOpt = Annotated[str | None, typer.Option("--description", help="What the profile is for.")]


def _store(opts: _Options) -> ConfigStore:
    from mcp_actors._config.store import ConfigStore

    return ConfigStore(opts.config)


def _split_tool(value: str, option: str) -> tuple[str, str]:
    server, slash, tool = value.partition("/")
    if not slash or not server or not tool:
        raise CliError(f"{option} takes SERVER/TOOL (a server name, '/', a tool name or glob), got {value!r}")
    return server, tool


def _split_assignment(value: str, option: str) -> tuple[str, str, str]:
    target, equals, text = value.partition("=")
    if not equals:
        raise CliError(f"{option} takes SERVER/TOOL=VALUE, got {value!r}")
    server, tool = _split_tool(target, option)
    return server, tool, text


def _check_servers(store: ConfigStore, names: set[str]) -> None:
    """Every literal server name must be configured; a glob is taken as it is."""
    configured = {record.name for record in store.load()}
    for name in sorted(names):
        if any(mark in name for mark in "*?[") or name in configured:
            continue
        from mcp_actors.errors import ServerNotFound

        known = ", ".join(sorted(configured)) or "none"
        raise ServerNotFound(
            f"no server named {name!r} is configured (the servers are: {known}); add it first (mcp-actors add)",
            server=name,
        )


def _changed(
    profile: Profile,
    *,
    servers: list[str],
    tools: list[str],
    renames: list[str],
    describes: list[str],
    remove_servers: list[str],
    remove_tools: list[str],
    naming: str | None,
    description: str | None,
) -> Profile:
    """``profile`` with the options applied: removals first, then servers, tools, renames, descriptions."""
    import attrs

    from mcp_actors._config.profiles import ProfileNaming, ServerSelection

    selections: dict[str, ServerSelection] = dict(profile.servers)
    for server in remove_servers:
        if selections.pop(server, None) is None:
            raise CliError(f"profile {profile.name!r} takes nothing of server {server!r}; nothing to remove")
    for value in remove_tools:
        server, tool = _split_tool(value, "--remove-tool")
        current = selections.get(server)
        if current is None or current.tools is None or tool not in current.tools:
            raise CliError(f"profile {profile.name!r} does not list tool {tool!r} of server {server!r}")
        selections[server] = attrs.evolve(current, tools=tuple(t for t in current.tools if t != tool))
    for server in servers:
        current = selections.get(server)
        if current is None or current.tools is not None:
            selections[server] = attrs.evolve(current or ServerSelection(), tools=None)
    for value in tools:
        server, tool = _split_tool(value, "--tool")
        current = selections.get(server)
        if current is not None and current.tools is None:
            raise CliError(
                f"profile {profile.name!r} takes every tool of server {server!r}; to pick some, run"
                f" 'mcp-actors profile edit {profile.name} --remove-server {server} --tool {server}/GLOB'"
            )
        listed = current.tools if current is not None and current.tools is not None else ()
        if tool not in listed:
            selections[server] = attrs.evolve(current or ServerSelection(tools=()), tools=(*listed, tool))
    for option, values, field in (("--rename", renames, "rename"), ("--describe", describes, "describe")):
        for value in values:
            server, tool, text = _split_assignment(value, option)
            current = selections.get(server) or ServerSelection(tools=())
            mapping: dict[str, str] = dict(getattr(current, field))
            if text:
                mapping[tool] = text
            else:
                mapping.pop(tool, None)
            changed: dict[str, Any] = {field: mapping}
            selections[server] = attrs.evolve(current, **changed)
    changes: dict[str, Any] = {"servers": selections}
    if naming is not None:
        try:
            changes["naming"] = ProfileNaming(naming)
        except ValueError:
            raise CliError(f"--naming must be 'server' or 'tool', got {naming!r}") from None
    if description is not None:
        changes["description"] = description
    return attrs.evolve(profile, **changes)


def _named_servers(servers: list[str], tools: list[str], renames: list[str], describes: list[str]) -> set[str]:
    names = set(servers)
    names |= {_split_tool(value, "--tool")[0] for value in tools}
    names |= {_split_assignment(value, "--rename")[0] for value in renames}
    names |= {_split_assignment(value, "--describe")[0] for value in describes}
    return names


def _save(
    opts: _Options,
    name: str,
    *,
    create: bool,
    servers: list[str],
    tools: list[str],
    renames: list[str],
    describes: list[str],
    remove_servers: list[str] = (),  # type: ignore[assignment]
    remove_tools: list[str] = (),  # type: ignore[assignment]
    naming: str | None,
    description: str | None,
) -> Profile:
    from mcp_actors._config.profiles import Profile, check_profile_name, modify_profiles
    from mcp_actors.errors import ProfileNotFound

    check_profile_name(name)
    store = _store(opts)
    _check_servers(store, _named_servers(servers, tools, renames, describes))

    def change(profiles: dict[str, Profile]) -> Profile:
        current = profiles.get(name)
        if create and current is not None:
            raise CliError(f"profile {name!r} exists already; change it with 'mcp-actors profile edit {name} ...'")
        if not create and current is None:
            raise ProfileNotFound(
                f"no profile {name!r} (the profiles are: {', '.join(sorted(profiles)) or 'none'}); create it with"
                f" 'mcp-actors profile add {name} ...'",
                profile=name,
            )
        updated = _changed(
            current or Profile(name=name),
            servers=servers,
            tools=tools,
            renames=renames,
            describes=describes,
            remove_servers=list(remove_servers),
            remove_tools=list(remove_tools),
            naming=naming,
            description=description,
        )
        profiles[name] = updated
        return updated

    return modify_profiles(store, change)


def _print_profile(profile: Profile) -> None:
    from mcp_actors.cli._console import out

    out().print(f"[bold]{profile.name}[/bold]  /mcp/{profile.name}", highlight=False)
    if profile.description:
        out().print(f"  {profile.description}", highlight=False, markup=False)
    out().print(f"  naming: {profile.naming.value}", highlight=False)
    if not profile.servers:
        out().print("  no servers", highlight=False)
    for server, selection in profile.servers.items():
        out().print(f"  {server}: {_summary(selection)}", highlight=False, markup=False)
        for tool, new in selection.rename.items():
            out().print(f"    {tool} -> {new}", highlight=False, markup=False)
        for tool, text in selection.describe.items():
            out().print(f"    {tool}: {text!r}", highlight=False, markup=False)


def _summary(selection: ServerSelection) -> str:
    tools = "every tool" if selection.tools is None else (", ".join(selection.tools) or "no tools")
    left_out = [kind for kind in ("prompts", "resources") if not getattr(selection, kind)]
    return tools + (f" (without {' and '.join(left_out)})" if left_out else "")


@profile_app.command("list")
def list_profiles(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the profiles (their paths, servers and what they are for)."""

    def body(opts: _Options) -> ExitCode:
        from mcp_actors._config.profiles import load_profiles, profile_to_json
        from mcp_actors.cli._console import out

        profiles, _ = load_profiles(_store(opts))
        if as_json:
            print_json({name: profile_to_json(profile) for name, profile in profiles.items()})
            return ExitCode.OK
        if not profiles:
            out().print("No profiles: the gateway serves every server at /mcp (mcp-actors profile add NAME ...).")
        for name, profile in profiles.items():
            servers = ", ".join(profile.servers) or "no servers"
            about = f"  {profile.description}" if profile.description else ""
            out().print(f"/mcp/{name}  {servers}{about}", highlight=False, markup=False)
        return ExitCode.OK

    _execute(ctx, body, as_json=as_json)


@profile_app.command("show")
def show(ctx: typer.Context, name: NameArg, as_json: JsonFlag = False) -> None:
    """Show one profile: its servers, tool selections, renames and descriptions."""

    def body(opts: _Options) -> ExitCode:
        from mcp_actors._config.profiles import load_profiles, profile_to_json
        from mcp_actors.errors import ProfileNotFound

        profiles, _ = load_profiles(_store(opts))
        profile = profiles.get(name)
        if profile is None:
            raise ProfileNotFound(
                f"no profile {name!r} (the profiles are: {', '.join(sorted(profiles)) or 'none'})", profile=name
            )
        if as_json:
            print_json(profile_to_json(profile))
        else:
            _print_profile(profile)
        return ExitCode.OK

    _execute(ctx, body, as_json=as_json)


@profile_app.command("add")
def add(
    ctx: typer.Context,
    name: NameArg,
    server: Servers = None,
    tool: Tools = None,
    rename: Renames = None,
    describe: Describes = None,
    naming: NamingOpt = None,
    description: DescriptionOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a profile; it is served at /mcp/NAME (a running gateway picks it up)."""

    def body(opts: _Options) -> ExitCode:
        profile = _save(
            opts,
            name,
            create=True,
            servers=server or [],
            tools=tool or [],
            renames=rename or [],
            describes=describe or [],
            naming=naming,
            description=description,
        )
        _report(profile, "added", as_json)
        return ExitCode.OK

    _execute(ctx, body, as_json=as_json)


@profile_app.command("edit")
def edit(
    ctx: typer.Context,
    name: NameArg,
    server: Servers = None,
    tool: Tools = None,
    rename: Renames = None,
    describe: Describes = None,
    remove_server: Annotated[
        list[str] | None, typer.Option("--remove-server", metavar="S", help="Take nothing of server S any more.")
    ] = None,
    remove_tool: Annotated[
        list[str] | None, typer.Option("--remove-tool", metavar="S/GLOB", help="Drop GLOB from server S's tools.")
    ] = None,
    naming: NamingOpt = None,
    description: DescriptionOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Change a profile: add or remove servers and tools, rename or describe tools."""

    def body(opts: _Options) -> ExitCode:
        profile = _save(
            opts,
            name,
            create=False,
            servers=server or [],
            tools=tool or [],
            renames=rename or [],
            describes=describe or [],
            remove_servers=remove_server or [],
            remove_tools=remove_tool or [],
            naming=naming,
            description=description,
        )
        _report(profile, "changed", as_json)
        return ExitCode.OK

    _execute(ctx, body, as_json=as_json)


@profile_app.command("rm")
def remove(ctx: typer.Context, name: NameArg, as_json: JsonFlag = False) -> None:
    """Remove a profile; its path stops being served (open sessions there are refused)."""

    def body(opts: _Options) -> ExitCode:
        from mcp_actors._config.profiles import modify_profiles
        from mcp_actors.cli._console import err
        from mcp_actors.errors import ProfileNotFound

        def change(profiles: dict[str, Profile]) -> Profile:
            removed = profiles.pop(name, None)
            if removed is None:
                raise ProfileNotFound(
                    f"no profile {name!r} (the profiles are: {', '.join(sorted(profiles)) or 'none'})", profile=name
                )
            return removed

        modify_profiles(_store(opts), change)
        if as_json:
            print_json({"ok": True, "removed": name})
        else:
            err().print(f"Removed profile {name!r}.", highlight=False, markup=False)
        return ExitCode.OK

    _execute(ctx, body, as_json=as_json)


def _report(profile: Profile, what: str, as_json: bool) -> None:
    from mcp_actors._config.profiles import profile_to_json
    from mcp_actors.cli._console import err

    if as_json:
        print_json({"ok": True, "profile": {"name": profile.name, **profile_to_json(profile)}})
        return
    err().print(f"Profile {profile.name!r} {what}: served at /mcp/{profile.name}.", highlight=False, markup=False)
    _print_profile(profile)
