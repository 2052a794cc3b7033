"""The ``resources``, ``prompts`` and ``tasks`` commands of ``mcp-actors``.

Kept apart from :mod:`mcp_actors.cli._app`, which registers the sub-apps::

    mcp-actors resources list NAME [--templates] [--json]
    mcp-actors resources read NAME URI [--output FILE] [--json]
    mcp-actors prompts list NAME [--json]
    mcp-actors prompts get NAME PROMPT [--arg KEY=VALUE ...] [--json]
    mcp-actors tasks list NAME [--json]

The shared plumbing (global options, the runtime for one command, failure reporting) is
the main CLI's; it is imported when a command runs, so importing this module costs nothing
and there is no import cycle.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcp_actors.cli import _console
from mcp_actors.cli._run import _run_async, _with_service
from mcp_actors.cli._support import CliError, ExitCode, add_columns, print_json, write_text

if TYPE_CHECKING:
    from mcp_actors.service import McpService

__all__ = ["prompts_app", "resources_app", "tasks_app"]

resources_app = typer.Typer(help="List and read a server's resources and resource templates.", no_args_is_help=True)
prompts_app = typer.Typer(help="List a server's prompts and render one with arguments.", no_args_is_help=True)
tasks_app = typer.Typer(help="List a server's tasks (task-augmented tool calls, 2025-11-25).", no_args_is_help=True)


JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (and nothing else there).")]
ServerArg = Annotated[str, typer.Argument(metavar="NAME", help="The server's name (or id).")]


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _run(ctx: typer.Context, fn: Any, *, as_json: bool) -> Any:
    """Run ``fn(service)`` in a runtime open for this command; failures become one stderr line.

    With ``as_json`` a failure also prints the ``{"ok": false, ...}`` document on stdout.
    """
    holder: dict[str, Any] = {}

    async def body(opts: Any) -> ExitCode:
        holder["value"] = await _with_service(opts, fn)
        return ExitCode.OK

    _run_async(ctx, body, as_json=as_json)
    return holder.get("value")


# --------------------------------------------------------------------------- resources


@resources_app.command("list")
def resources_list(
    ctx: typer.Context,
    server: ServerArg,
    templates: Annotated[bool, typer.Option("--templates", help="List the resource templates instead.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """List a server's resources (every page), or its resource templates."""
    from rich.table import Table
    from rich.text import Text

    async def fn(service: McpService) -> list[Any]:
        if templates:
            return list(await service.list_resource_templates(server))
        return list(await service.list_resources(server))

    items = _run(ctx, fn, as_json=as_json)
    if as_json:
        print_json([_dump(item) for item in items])
        return
    if templates:
        table = Table(title=f"Resource templates ({len(items)})", title_justify="left")
        for column in ("URI TEMPLATE", "NAME", "MIME TYPE", "DESCRIPTION"):
            table.add_column(column, overflow="fold")
        for t in items:
            table.add_row(
                Text(t.uri_template, style="bold"), Text(t.name), Text(t.mime_type or ""), Text(t.description or "")
            )
    else:
        table = Table(title=f"Resources ({len(items)})", title_justify="left")
        for column in ("URI", "NAME", "MIME TYPE", "DESCRIPTION"):
            table.add_column(column, overflow="fold")
        for r in items:
            table.add_row(
                Text(str(r.uri), style="bold"), Text(r.name), Text(r.mime_type or ""), Text(r.description or "")
            )
    _console.out().print(table)


@resources_app.command("read")
def resources_read(
    ctx: typer.Context,
    server: ServerArg,
    uri: Annotated[str, typer.Argument(metavar="URI", help="The resource's URI (a template filled in works too).")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            dir_okay=False,
            help="Write the (first) contents to this file (blobs decoded); with --json, print what was written.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Read a resource: text is printed; binary contents are named (or written with --output)."""

    async def fn(service: McpService) -> Any:
        result = await service.read_resource(server, uri)
        if output is None:
            return result
        # Written here, inside the command's error handling: a path that cannot be written is one line.
        if not result.contents:
            raise CliError(
                f"server {server!r} returned no contents for {uri!r}; nothing was written to {str(output)!r}",
                ExitCode.FAILED,
            )
        first = result.contents[0]
        data = base64.b64decode(first.blob) if hasattr(first, "blob") else first.text.encode()
        await _write_output(output, data)
        return first, len(data)

    result = _run(ctx, fn, as_json=as_json)
    if output is not None:
        first, size = result
        if as_json:
            print_json({"uri": str(first.uri), "output": str(output), "bytes": size, "mimeType": first.mime_type})
        else:
            print(f"wrote {size} bytes to {output}", file=sys.stderr)
        return
    if as_json:
        print_json(_dump(result))
        return
    for item in result.contents:
        if hasattr(item, "text"):
            write_text(item.text + ("" if item.text.endswith("\n") else "\n"))
        else:
            size = len(base64.b64decode(item.blob))
            write_text(f"[Binary: {item.mime_type or 'unknown type'}, {size} bytes; use --output FILE]\n")
    sys.stdout.flush()


async def _write_output(path: Path, data: bytes) -> None:
    """Write ``--output``; a path that cannot be written is a usage error naming it and the reason."""
    import trio

    try:
        await trio.to_thread.run_sync(path.write_bytes, data)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CliError(f"--output: cannot write {str(path)!r}: {reason}; give a path in a writable directory") from None


# --------------------------------------------------------------------------- prompts


@prompts_app.command("list")
def prompts_list(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """List a server's prompts with their arguments (``?`` marks an optional one)."""
    from rich.table import Table
    from rich.text import Text

    async def fn(service: McpService) -> list[Any]:
        return list(await service.list_prompts(server))

    prompts = _run(ctx, fn, as_json=as_json)
    if as_json:
        print_json([_dump(p) for p in prompts])
        return
    table = Table(title=f"Prompts ({len(prompts)})", title_justify="left")
    add_columns(table, "NAME", "ARGUMENTS", "DESCRIPTION")
    for p in prompts:
        arguments = ", ".join(a.name + ("" if a.required else "?") for a in p.arguments or ())
        table.add_row(Text(p.name, style="bold"), Text(arguments), Text(p.description or ""))
    _console.out().print(table)


@prompts_app.command("get")
def prompts_get(
    ctx: typer.Context,
    server: ServerArg,
    prompt: Annotated[str, typer.Argument(metavar="PROMPT", help="The prompt's name.")],
    arg: Annotated[
        list[str] | None, typer.Option("--arg", metavar="KEY=VALUE", help="A prompt argument (repeatable).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Render a prompt with arguments and print its messages."""

    async def fn(service: McpService) -> Any:
        arguments: dict[str, str] = {}
        for i, item in enumerate(arg or (), start=1):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise CliError(f"--arg expects KEY=VALUE; occurrence {i} of --arg has no '=' or no key")
            arguments[key.strip()] = value
        return await service.get_prompt(server, prompt, arguments)

    result = _run(ctx, fn, as_json=as_json)
    if as_json:
        print_json(_dump(result))
        return
    from mcp_actors.adapters import flatten_content

    for message in result.messages:
        write_text(f"[{message.role}] {flatten_content([message.content])}\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- tasks


@tasks_app.command("list")
def tasks_list(ctx: typer.Context, server: ServerArg, as_json: JsonFlag = False) -> None:
    """List a server's tasks with their status (``tasks/list``, every page)."""
    from rich.table import Table
    from rich.text import Text

    async def fn(service: McpService) -> list[Any]:
        return list(await service.list_tasks(server))

    tasks = _run(ctx, fn, as_json=as_json)
    if as_json:
        print_json([_dump(t) for t in tasks])
        return
    table = Table(title=f"Tasks ({len(tasks)})", title_justify="left")
    add_columns(table, "TASK", "STATUS", "MESSAGE", "UPDATED")
    for t in tasks:
        style = {"completed": "green", "failed": "red", "cancelled": "yellow"}.get(t.status, "")
        table.add_row(
            Text(t.task_id, style="bold"),
            Text(t.status, style=style),
            Text(t.status_message or ""),
            str(t.last_updated_at),
        )
    _console.out().print(table)
