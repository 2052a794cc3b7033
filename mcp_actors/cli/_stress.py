"""``mcp-actors stress``: load and chaos testing of one MCP server (see docs/stress.md).

Registered by :mod:`mcp_actors.cli._app` with ``app.add_typer(stress_app, name="stress")``.

``mcp-actors stress [TARGET] [WORKLOAD] [LOAD] [OUTPUT]`` runs a load; the subcommands
``merge`` and ``compare`` work on ``--json`` results. Exit status: 0 when the run finished
and every ``--slo`` threshold holds, 1 when a threshold fails, 2 for bad options, 3 when the
target cannot be reached, 130 on Ctrl-C or SIGTERM (after printing what was measured).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcp_actors.cli import _console
from mcp_actors.cli._support import CliError, ExitCode, parse_arguments_json, print_json, report_failure

if TYPE_CHECKING:
    from rich.live import Live
    from rich.table import Table

__all__ = ["stress_app"]


stress_app = typer.Typer(
    help="Load and chaos testing of an MCP server: constant-rate or closed-loop load, HDR latencies, SLOs.",
    invoke_without_command=True,
    no_args_is_help=False,
)

# The options' groups: typer's rich help shows them as panels; the plain help the root app
# uses (for its start-up) lists the options in this order, group after group.
_TARGET = "Target"
_WORKLOAD = "Workload"
_LOAD = "Load"
_OUTPUT = "Output"


def _config_path(ctx: typer.Context) -> Path | None:
    """The root command's ``--config`` (set by the root callback on the context object)."""
    obj = ctx.find_root().obj
    config = getattr(obj, "config", None)
    return Path(config) if config is not None else None


def _debug(ctx: typer.Context) -> bool:
    return bool(getattr(ctx.find_root().obj, "debug", False))


def _pairs(values: Sequence[str] | None, option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for i, item in enumerate(values or (), start=1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} expects KEY=VALUE; occurrence {i} of {option} is not")
        pairs[key.strip()] = value
    return pairs


def _finish(ctx: typer.Context, body: Callable[[], ExitCode]) -> None:
    try:
        code = body()
    except (SystemExit, typer.Exit):
        raise
    except BaseException as exc:  # the command's last line of defence: one line, an exit status
        code = report_failure(exc, debug=_debug(ctx))
    if code != ExitCode.OK:
        raise typer.Exit(int(code))


@stress_app.callback()
def stress(
    ctx: typer.Context,
    server: Annotated[
        str | None, typer.Option("--server", "-s", help="A configured server, by name.", rich_help_panel=_TARGET)
    ] = None,
    command: Annotated[
        str | None,
        typer.Option(
            "--command", help="Ad hoc stdio server: its command line ('python -m x --flag').", rich_help_panel=_TARGET
        ),
    ] = None,
    arg: Annotated[
        list[str] | None,
        typer.Option(
            "--arg", metavar="ARG", help="One more argument for --command (repeatable).", rich_help_panel=_TARGET
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env", metavar="KEY=VALUE", help="Environment for --command (repeatable).", rich_help_panel=_TARGET
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="Ad hoc remote server (SSE or streamable HTTP).", rich_help_panel=_TARGET),
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option("--type", help="sse or http for --url [default: sse if it ends in /sse]", rich_help_panel=_TARGET),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header", metavar="KEY=VALUE", help="HTTP header for --url (repeatable).", rich_help_panel=_TARGET
        ),
    ] = None,
    scenario: Annotated[
        Path | None,
        typer.Option("--scenario", dir_okay=False, help="A TOML or JSON scenario file.", rich_help_panel=_WORKLOAD),
    ] = None,
    tool: Annotated[
        str | None, typer.Option("--tool", help="The simplest workload: call this tool.", rich_help_panel=_WORKLOAD)
    ] = None,
    args: Annotated[
        str | None, typer.Option("--args", metavar="JSON", help="Arguments of --tool.", rich_help_panel=_WORKLOAD)
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", "-c", help="Closed model: virtual users. [default: 1]", rich_help_panel=_LOAD),
    ] = None,
    think: Annotated[
        str, typer.Option("--think", help="Closed model: pause between a user's calls.", rich_help_panel=_LOAD)
    ] = "0s",
    rate: Annotated[
        str | None,
        typer.Option(
            "--rate",
            "-r",
            help="Open model: R calls/s, steps like 100:2000:100/10s, or a ramp like 100..2000/60s.",
            rich_help_panel=_LOAD,
        ),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option("--duration", "-d", help="Measured time (10s, 2m). [default: 10s]", rich_help_panel=_LOAD),
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", "-n", help="Stop after this many calls.", rich_help_panel=_LOAD)
    ] = None,
    ramp_up: Annotated[
        str, typer.Option("--ramp-up", help="Ramp the rate (or users) up over this time.", rich_help_panel=_LOAD)
    ] = "0s",
    warmup: Annotated[
        str, typer.Option("--warmup", help="Run this long first, excluded from results.", rich_help_panel=_LOAD)
    ] = "0s",
    timeout: Annotated[str, typer.Option("--timeout", help="Bound of one call.", rich_help_panel=_LOAD)] = "30s",
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", "-w", help="Worker processes (0: in this process). [default: cores]", rich_help_panel=_LOAD
        ),
    ] = None,
    connections: Annotated[
        int,
        typer.Option(
            "--connections", help="Connections per worker (stdio: servers per worker).", rich_help_panel=_LOAD
        ),
    ] = 1,
    max_in_flight: Annotated[
        int, typer.Option("--max-in-flight", help="Open model: most calls in flight per worker.", rich_help_panel=_LOAD)
    ] = 10_000,
    chaos: Annotated[
        list[str] | None,
        typer.Option(
            "--chaos",
            metavar="SPEC",
            help="kill-every=10s, or stop-every=5s,stop-for=1s (repeatable).",
            rich_help_panel=_LOAD,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random choices.", rich_help_panel=_LOAD)] = 0,
    slo: Annotated[
        str | None,
        typer.Option(
            "--slo", help="Thresholds: 'p99<50ms,errors<0.1%,rate>=1000'; exit 1 if one fails.", rich_help_panel=_OUTPUT
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result document on stdout (only).", rich_help_panel=_OUTPUT)
    ] = False,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", dir_okay=False, help="Write the per-second series.", rich_help_panel=_OUTPUT)
    ] = None,
    html_path: Annotated[
        Path | None, typer.Option("--html", dir_okay=False, help="Write the HTML report.", rich_help_panel=_OUTPUT)
    ] = None,
    save: Annotated[
        Path | None,
        typer.Option("--save", dir_okay=False, help="Also write the result document here.", rich_help_panel=_OUTPUT),
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            "--compare",
            metavar="A.json B.json",
            help="Print how run B differs from run A; no load.",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--no-live", help="The live view on stderr [default: on a terminal]", rich_help_panel=_OUTPUT
        ),
    ] = None,
) -> None:
    """Put load on an MCP server and report latencies, throughput and errors."""
    if ctx.invoked_subcommand is not None:
        return
    if compare is not None:
        _finish(ctx, lambda: _compare(compare[0], compare[1], as_json))
        return

    def body() -> ExitCode:
        import trio

        settings = _settings(
            ctx,
            server=server,
            command=command,
            arg=arg or [],
            env=env or [],
            url=url,
            kind=kind,
            header=header or [],
            scenario=scenario,
            tool=tool,
            args=args,
            concurrency=concurrency,
            think=think,
            rate=rate,
            duration=duration,
            requests=requests,
            ramp_up=ramp_up,
            warmup=warmup,
            timeout=timeout,
            workers=workers,
            connections=connections,
            max_in_flight=max_in_flight,
            chaos=chaos or [],
            seed=seed,
            slo=slo,
        )
        show_live = live if live is not None else (_console.err().is_terminal and not as_json)
        ctrl_c: list[bool] = []
        try:
            doc = trio.run(_run, settings, show_live, ctrl_c)
        finally:
            if ctrl_c and threading.current_thread() is threading.main_thread():
                # The person asked to stop: a Ctrl-C or SIGTERM still pending (trio re-delivers
                # the ones its receiver did not consume) must not kill the report on its way out.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
        interrupted = bool(ctrl_c)
        _write_outputs(doc, as_json=as_json, csv_path=csv_path, html_path=html_path, save=save)
        if interrupted:
            _console.err().print("stress: interrupted; the results above cover the calls made until then")
            return ExitCode.INTERRUPTED
        if any(not item["ok"] for item in doc.get("slo", [])):
            failed = ", ".join(i["threshold"] for i in doc["slo"] if not i["ok"])
            print(f"mcp-actors: thresholds failed: {failed}", file=sys.stderr)
            return ExitCode.FAILED
        return ExitCode.OK

    _finish(ctx, body)


def _settings(ctx: typer.Context, **o: Any) -> Any:
    from mcp_actors.errors import StressConfigInvalid
    from mcp_actors.stress import (
        LoadPlan,
        StressSettings,
        adhoc_target,
        configured_target,
        load_scenario,
        parse_chaos,
        parse_duration,
        parse_rate,
        parse_slo,
        single_tool,
    )

    targets = [o["server"] is not None, o["command"] is not None, o["url"] is not None]
    if sum(targets) != 1:
        raise StressConfigInvalid(
            "give exactly one target: --server NAME (configured), --command 'CMD ARGS' or --url URL", field="target"
        )
    if (o["arg"] or o["env"]) and o["command"] is None:
        raise CliError("--arg and --env are for --command")
    if (o["header"] or o["kind"]) and o["url"] is None:
        raise CliError("--header and --type are for --url")
    if o["server"] is not None:
        from mcp_actors._config.store import ConfigStore

        target = configured_target(ConfigStore(_config_path(ctx)).load(), o["server"])
        label = o["server"]
    elif o["command"] is not None:
        argv = [*shlex.split(o["command"]), *o["arg"]]
        target = adhoc_target(command=argv, env=_pairs(o["env"], "--env"))
        label = " ".join([argv[0].rsplit("/", 1)[-1], *argv[1:]])[:80]
    else:
        if o["kind"] not in (None, "sse", "http"):
            raise CliError(f"--type expects sse or http, got {o['kind']!r}")
        target = adhoc_target(url=o["url"], kind=o["kind"], headers=_pairs(o["header"], "--header"))
        label = "url"
    if (o["scenario"] is None) == (o["tool"] is None):
        raise StressConfigInvalid(
            "give exactly one workload: --scenario FILE or --tool NAME [--args JSON]", field="workload"
        )
    if o["args"] is not None and o["tool"] is None:
        raise CliError("--args goes with --tool")
    if o["tool"] is not None:
        arguments = parse_arguments_json(o["args"]) if o["args"] else {}
        mix = single_tool(o["tool"], arguments)
    else:
        mix = load_scenario(o["scenario"])
    if o["rate"] is not None and o["concurrency"] is not None:
        raise StressConfigInvalid("give --rate (open model) or --concurrency (closed model), not both", field="--rate")
    steps = parse_rate(o["rate"]) if o["rate"] is not None else None
    if o["requests"] is not None and o["requests"] < 1:
        raise StressConfigInvalid(f"--requests must be >= 1, got {o['requests']}", field="--requests")
    duration = parse_duration(o["duration"], field="--duration", allow_zero=False) if o["duration"] else None
    open_ended = steps is not None and len(steps) == 1 and steps[0].seconds == float("inf")
    if duration is None and o["requests"] is None and (steps is None or open_ended):
        duration = 10.0
    users = o["concurrency"] if o["concurrency"] is not None else 1
    if users < 1:
        raise StressConfigInvalid(f"--concurrency must be >= 1, got {users}", field="--concurrency")
    if o["max_in_flight"] < 1:
        raise StressConfigInvalid(f"--max-in-flight must be >= 1, got {o['max_in_flight']}", field="--max-in-flight")
    plan = LoadPlan(
        rate=steps,
        users=users,
        think=parse_duration(o["think"], field="--think"),
        ramp_up=parse_duration(o["ramp_up"], field="--ramp-up"),
        duration=duration,
        requests=o["requests"],
        warmup=parse_duration(o["warmup"], field="--warmup"),
        timeout=parse_duration(o["timeout"], field="--timeout", allow_zero=False),
        max_in_flight=o["max_in_flight"],
        seed=o["seed"],
        chaos=tuple(parse_chaos(c) for c in o["chaos"]),
    )
    if plan.warmup >= plan.length:
        raise StressConfigInvalid(
            f"--warmup ({plan.warmup:g}s) must be shorter than the run ({plan.length:g}s)", field="--warmup"
        )
    workers = o["workers"] if o["workers"] is not None else (os.cpu_count() or 1)
    if steps is None and workers > users:
        workers = users  # a worker without a virtual user would only cost a server
    return StressSettings(
        target=target,
        target_label=label,
        scenario=mix,
        plan=plan,
        workers=workers,
        connections=o["connections"],
        slos=parse_slo(o["slo"]) if o["slo"] else (),
    )


async def _run(settings: Any, show_live: bool, ctrl_c: list[bool]) -> dict[str, Any]:
    """Run under a SIGINT and SIGTERM handler: the first stops gracefully, the second aborts.

    SIGTERM (a service manager's stop, a CI job's timeout) is taken as a Ctrl-C: whoever
    sends it gets the results measured so far, as a load tool's users expect.

    Each Ctrl-C received is appended to ``ctrl_c`` (the caller's, so it is known even when
    the second one ends the run with ``KeyboardInterrupt``), and one if the run was stopped
    because a worker died of one (a SIGINT that reached only the workers).
    """
    import trio
    from rich.live import Live

    from mcp_actors.stress import run_stress

    stop = trio.Event()
    live_view: Live | None = None
    if show_live:
        live_view = Live(_live_table(None, settings), console=_console.err(), refresh_per_second=4, transient=False)
        live_view.start()

    def on_progress(stats: Any) -> None:
        if live_view is not None:
            live_view.update(_live_table(stats, settings))

    result: dict[str, Any] = {}
    # Ctrl-C handling needs the main thread (signal handlers); elsewhere the host handles it.
    signals_here = threading.current_thread() is threading.main_thread()
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) if signals_here else _no_signals() as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    async for _ in signals:
                        ctrl_c.append(True)
                        if len(ctrl_c) > 1:
                            raise KeyboardInterrupt
                        stop.set()
                        _console.err().print("stress: stopping, finishing the calls in flight (Ctrl-C again to abort)")

                async def main() -> None:
                    result.update(await run_stress(settings, stop=stop, on_progress=on_progress))
                    if stop.is_set() and not ctrl_c:
                        ctrl_c.append(True)  # a worker died of a Ctrl-C this process did not see
                    nursery.cancel_scope.cancel()

                if signals_here:
                    nursery.start_soon(watch)
                nursery.start_soon(main)
    finally:
        if live_view is not None:
            live_view.stop()
    return result


@contextlib.contextmanager
def _no_signals() -> Iterator[Any]:
    yield None


def _live_table(stats: Any, settings: Any) -> Table:
    from rich.table import Table

    table = Table(title="mcp-actors stress (live)", show_header=True)
    for col in ("elapsed", "done", "rate/s", "in flight", "p50", "p90", "p99", "max", "errors"):
        table.add_column(col, justify="right")
    if stats is None:
        table.add_row("starting", "", "", "", "", "", "", "", "")
        return table
    if stats.workers_ready < stats.workers:
        table.add_row(f"connecting {stats.workers_ready}/{stats.workers}", "", "", "", "", "", "", "", "")
        return table
    lat = stats.latency

    def ms(p: float | None) -> str:
        value = lat.max if p is None else lat.percentile(p)
        return f"{value * 1e3:.1f} ms"

    errors = ", ".join(f"{k}: {n}" for k, n in sorted(stats.errors.items())) or "0"
    table.add_row(
        f"{stats.elapsed:.1f}s",
        str(stats.finished),
        f"{stats.rate:.0f}",
        str(stats.in_flight),
        ms(50),
        ms(90),
        ms(99),
        ms(None),
        errors,
    )
    return table


def _write_outputs(
    doc: dict[str, Any], *, as_json: bool, csv_path: Path | None, html_path: Path | None, save: Path | None
) -> None:
    from mcp_actors.stress import render_csv, render_html
    from mcp_actors.stress._report import render_tables

    if csv_path is not None:
        csv_path.write_text(render_csv(doc), encoding="utf-8")
    if html_path is not None:
        html_path.write_text(render_html(doc), encoding="utf-8")
    if save is not None:
        save.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    if as_json:
        print_json(doc)
    else:
        _console.out().print(render_tables(doc))


def _compare(a: Path, b: Path, as_json: bool) -> ExitCode:
    from mcp_actors.stress import compare_documents, load_document
    from mcp_actors.stress._report import render_compare

    rows = compare_documents(load_document(a), load_document(b))
    if as_json:
        print_json({"a": str(a), "b": str(b), "rows": rows})
    else:
        _console.out().print(render_compare(rows, a.name, b.name))
    return ExitCode.OK


@stress_app.command("compare")
def compare_command(
    ctx: typer.Context,
    a: Annotated[Path, typer.Argument(metavar="A.json", dir_okay=False, help="The baseline run.")],
    b: Annotated[Path, typer.Argument(metavar="B.json", dir_okay=False, help="The run to compare with it.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Print how run B differs from run A (the same as --compare A B)."""
    _finish(ctx, lambda: _compare(a, b, as_json))


@stress_app.command("merge")
def merge_command(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(metavar="RESULT.json...", dir_okay=False, help="Runs to combine.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the merged document on stdout (only).")] = False,
    csv_path: Annotated[Path | None, typer.Option("--csv", dir_okay=False, help="Write the per-second series.")] = None,
    html_path: Annotated[Path | None, typer.Option("--html", dir_okay=False, help="Write the HTML report.")] = None,
    save: Annotated[Path | None, typer.Option("--save", dir_okay=False, help="Write the merged document.")] = None,
    slo: Annotated[str | None, typer.Option("--slo", help="Thresholds judged on the merged result.")] = None,
) -> None:
    """Combine runs made at the same time on several machines, exactly (percentiles of the union)."""

    def body() -> ExitCode:
        from mcp_actors.stress import evaluate_slos, load_document, merge_documents, parse_slo

        slos = parse_slo(slo) if slo else ()
        doc = merge_documents([load_document(f) for f in files])
        if slos:
            doc["slo"] = evaluate_slos(doc, slos)
        _write_outputs(doc, as_json=as_json, csv_path=csv_path, html_path=html_path, save=save)
        if any(not item["ok"] for item in doc.get("slo", [])):
            return ExitCode.FAILED
        return ExitCode.OK

    _finish(ctx, body)
