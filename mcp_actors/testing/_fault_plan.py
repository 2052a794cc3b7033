"""The fault server's command line, its fault plan, and the faults that act on the process.

Standard library, attrs and nothing else: the stdio fault server must start fast, since
every test that uses it pays its start-up time.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Final, Literal

import attrs

__all__ = [
    "GARBAGE_MODES",
    "GRANDCHILD_LIFETIME",
    "HANG_LIMIT",
    "FaultPlan",
    "build_parser",
    "fault_line",
    "flood_stderr",
    "parse_fault_args",
    "run_start_faults",
    "spawn_grandchild",
    "write_stderr",
]

GARBAGE_MODES: Final = ("start", "interleave", "binary")
"""The variants of ``--garbage-stdout``."""

HANG_LIMIT: Final = 3600.0
"""How long "forever" is: a hung call, a server with stdout closed. Every wait is bounded."""

GRANDCHILD_LIFETIME: Final = 3600.0
"""How long the grandchild of ``--spawn-grandchild`` sleeps: forever for a test, not immortal."""

_MAX_BYTES: Final = 1024 * 1024 * 1024

Transport = Literal["stdio", "streamable-http"]


@attrs.frozen(kw_only=True)
class FaultPlan:
    """What the fault server does wrong; the defaults make it a well-behaved server.

    Attributes:
        transport: ``stdio`` or ``streamable-http``.
        host: Address to bind for HTTP.
        port: Port to bind for HTTP (0: a free one, announced on stderr).
        exit_at_start: Exit with this code before reading anything.
        slow_start: Seconds to wait before serving.
        crash_on_call: Exit abruptly when the Nth ``tools/call`` arrives (1-based).
        crash_exit_code: The exit code of that crash.
        hang_on_call: Never answer the Nth ``tools/call`` (1-based).
        hang_tools: Never answer any call of these tools.
        garbage_stdout: Which kinds of garbage to write to stdout (see ``GARBAGE_MODES``).
        flood_stderr: Bytes written to stderr at start and again on every ``tools/call``.
        close_stdout: Close stdout after the ``initialize`` reply, then stay alive.
        spawn_grandchild: Start a grandchild that ignores SIGTERM.
        huge_output: Every tool result is a text of exactly this many bytes.
        no_ping: Read ``ping`` requests and never answer them.
        untyped_tool: Also list a tool ``untyped`` whose ``inputSchema`` is a root ``anyOf``
            with no ``"type": "object"``, as some real servers ship (stdio only).
        flood_notifications: Notifications sent before every ``tools/call`` result.
        http_error_on_call: Answer the Nth ``tools/call`` POST with an HTTP error status
            (streamable HTTP only).
        http_error_status: That status (default 500).
        protocol_version: Answer ``initialize`` with this revision whatever the client asks
            (a server that knows only it); ``None``: the client's, when known.
        modern: Also answer ``server/discover`` (2026-07-28; streamable HTTP only). Off by
            default: the faults are handshake-era mechanisms (see the HTTP engine).
    """

    transport: Transport = "stdio"
    host: str = "127.0.0.1"
    port: int = 0
    exit_at_start: int | None = None
    slow_start: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    crash_on_call: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.ge(1)))
    crash_exit_code: int = 3
    hang_on_call: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.ge(1)))
    hang_tools: frozenset[str] = frozenset()
    garbage_stdout: frozenset[str] = attrs.field(default=frozenset())
    flood_stderr: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    close_stdout: bool = False
    spawn_grandchild: bool = False
    huge_output: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.ge(0)))
    no_ping: bool = False
    untyped_tool: bool = False
    flood_notifications: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    http_error_on_call: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    http_error_status: int = attrs.field(default=500, validator=[attrs.validators.ge(400), attrs.validators.le(599)])
    modern: bool = False
    protocol_version: str | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(
            attrs.validators.in_(("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"))
        ),
    )

    @garbage_stdout.validator
    def _check_garbage(self, attribute: attrs.Attribute[frozenset[str]], value: frozenset[str]) -> None:
        unknown = sorted(value - set(GARBAGE_MODES))
        if unknown:
            raise ValueError(f"garbage_stdout modes must be among {GARBAGE_MODES}, got {unknown}")

    def __attrs_post_init__(self) -> None:
        if self.transport != "stdio" and (self.garbage_stdout or self.close_stdout or self.untyped_tool):
            raise ValueError("garbage_stdout, close_stdout and untyped_tool need transport 'stdio'")
        if self.transport != "streamable-http" and self.http_error_on_call is not None:
            raise ValueError("http_error_on_call needs transport 'streamable-http'")


def _non_negative_int(text: str) -> int:
    value = int(text)
    if not 0 <= value <= _MAX_BYTES:
        raise argparse.ArgumentTypeError(f"must be in 0..{_MAX_BYTES}, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _exit_code(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 255:
        raise argparse.ArgumentTypeError(f"must be in 0..255, got {value}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value <= HANG_LIMIT:
        raise argparse.ArgumentTypeError(f"must be in 0..{HANG_LIMIT:g}, got {value}")
    return value


def _garbage_modes(text: str) -> frozenset[str]:
    modes = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(modes - set(GARBAGE_MODES))
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"must be a comma-separated list of {', '.join(GARBAGE_MODES)}, got {text!r}")
    return modes


def build_parser() -> argparse.ArgumentParser:
    """Return the fault server's argument parser (its ``--help`` is the flag reference)."""
    parser = argparse.ArgumentParser(
        prog="python -m mcp_actors.testing.fault_server",
        description=(
            "An MCP server that misbehaves on purpose, for testing MCP clients. Without "
            "flags it is a well-behaved server with the tools echo, add, sleep, big and "
            "fail. Each flag injects one fault; flags combine. Diagnostic lines go to "
            "stderr and start with 'fault: '."
        ),
        epilog="Documented in docs/testing.md of mcp-actors.",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "streamable-http"),
        default="stdio",
        help="how to serve MCP (default: stdio)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help=(
            "HTTP port; 0 binds a free one (default). Once serving, the server writes "
            "'mcp-actors: listening on <url>' to stderr"
        ),
    )
    parser.add_argument(
        "--exit-at-start",
        type=_exit_code,
        metavar="CODE",
        help="write 'fault: exiting at start with code CODE' to stderr and exit with CODE before reading anything",
    )
    parser.add_argument(
        "--slow-start",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="wait SECONDS before serving (the initialize request waits in the pipe)",
    )
    parser.add_argument(
        "--crash-on-call",
        type=_positive_int,
        metavar="N",
        help="when the Nth tools/call arrives, write 'fault: crashing on call N' to stderr "
        "and exit at once (os._exit) with --crash-exit-code, answering nothing",
    )
    parser.add_argument(
        "--crash-exit-code",
        type=_exit_code,
        default=3,
        metavar="CODE",
        help="exit code of --crash-on-call (default: 3)",
    )
    parser.add_argument(
        "--hang-on-call",
        type=_positive_int,
        metavar="N",
        help="never answer the Nth tools/call; write 'fault: hanging call <id>' when it "
        "arrives and 'fault: cancelled <id>' when notifications/cancelled for it arrives",
    )
    parser.add_argument(
        "--hang-tool",
        action="append",
        default=[],
        metavar="NAME",
        help="never answer calls of tool NAME (repeatable); same stderr lines as --hang-on-call",
    )
    parser.add_argument(
        "--garbage-stdout",
        nargs="?",
        const=frozenset({"start"}),
        type=_garbage_modes,
        metavar="MODES",
        help="write non-MCP output to stdout (stdio only). MODES is a comma-separated list: "
        "'start' (non-JSON text lines before anything else; the default), 'interleave' (a "
        "non-JSON text line before every message), 'binary' (a line of non-UTF-8 bytes at "
        "start and before every message)",
    )
    parser.add_argument(
        "--flood-stderr",
        type=_non_negative_int,
        default=0,
        metavar="BYTES",
        help="write BYTES bytes to stderr at start and again on every tools/call, with "
        "blocking writes: a client that does not drain stderr stalls the server",
    )
    parser.add_argument(
        "--close-stdout",
        action="store_true",
        help="close stdout right after the initialize reply and keep the process alive "
        "(sleeping, stdin unread) until it is killed (stdio only)",
    )
    parser.add_argument(
        "--spawn-grandchild",
        action="store_true",
        help="start a grandchild process (same process group, no stdio) that ignores "
        "SIGTERM and sleeps for an hour; write 'fault: grandchild <pid>' to stderr",
    )
    parser.add_argument(
        "--huge-output",
        type=_non_negative_int,
        metavar="BYTES",
        help="every successful tool result is one text item of exactly BYTES bytes",
    )
    parser.add_argument(
        "--protocol-version",
        metavar="VERSION",
        help="answer initialize with this handshake revision whatever the client asks (2024-11-05 .. 2025-11-25)",
    )
    parser.add_argument(
        "--modern",
        action="store_true",
        help="streamable HTTP: also answer server/discover, so a client may speak 2026-07-28",
    )
    parser.add_argument(
        "--no-ping",
        action="store_true",
        help="read ping requests and never answer them; write 'fault: ignoring ping <id>'",
    )
    parser.add_argument(
        "--untyped-tool",
        action="store_true",
        help='also list a tool \'untyped\' whose inputSchema is a root anyOf with no "type": "object" '
        "(against the spec, as some real servers ship; stdio only)",
    )
    parser.add_argument(
        "--flood-notifications",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="before every tools/call result send N notifications/message (level info), "
        "and N notifications/progress when the call asked for progress",
    )
    parser.add_argument(
        "--http-error-on-call",
        type=_positive_int,
        metavar="N",
        help="answer the Nth tools/call POST with HTTP --http-error-status and a plain-text body, "
        "before MCP sees it; write 'fault: http error <status> on call N' (streamable-http only)",
    )
    parser.add_argument(
        "--http-error-status",
        type=_http_error_status,
        default=500,
        metavar="STATUS",
        help="the status of --http-error-on-call, 400..599 (default: 500)",
    )
    return parser


def _http_error_status(text: str) -> int:
    value = int(text)
    if not 400 <= value <= 599:
        raise argparse.ArgumentTypeError(f"must be an HTTP error status 400..599, got {value}")
    return value


def parse_fault_args(argv: Sequence[str] | None = None) -> FaultPlan:
    """Parse the fault server's command line into a :class:`FaultPlan`.

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.

    Raises:
        SystemExit: On a bad flag (argparse prints the usage and the reason).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    try:
        return FaultPlan(
            transport=args.transport,
            host=args.host,
            port=args.port,
            exit_at_start=args.exit_at_start,
            slow_start=args.slow_start,
            crash_on_call=args.crash_on_call,
            crash_exit_code=args.crash_exit_code,
            hang_on_call=args.hang_on_call,
            hang_tools=frozenset(args.hang_tool),
            garbage_stdout=args.garbage_stdout or frozenset(),
            flood_stderr=args.flood_stderr,
            close_stdout=args.close_stdout,
            spawn_grandchild=args.spawn_grandchild,
            huge_output=args.huge_output,
            no_ping=args.no_ping,
            untyped_tool=args.untyped_tool,
            flood_notifications=args.flood_notifications,
            http_error_on_call=args.http_error_on_call,
            http_error_status=args.http_error_status,
            modern=args.modern,
            protocol_version=args.protocol_version,
        )
    except ValueError as exc:
        parser.error(str(exc))


def write_stderr(data: str | bytes) -> None:
    """Write to fd 2 with blocking writes, all of it, unbuffered.

    Blocking on purpose: a server whose stderr pipe is full really stops (that is the
    ``--flood-stderr`` fault). A closed stderr is ignored.
    """
    raw = data.encode("utf-8", errors="replace") if isinstance(data, str) else data
    view = memoryview(raw)
    try:
        while view:
            written = os.write(2, view)
            view = view[written:]
    except (BrokenPipeError, OSError):
        pass


def fault_line(text: str) -> None:
    """Write one ``fault: <text>`` diagnostic line to stderr."""
    write_stderr(f"fault: {text}\n")


_FLOOD_LINE: Final = b"fault: flood " + b"#" * 50 + b"\n"


def flood_stderr(nbytes: int) -> None:
    """Write exactly ``nbytes`` bytes of printable lines to stderr (blocking)."""
    if nbytes <= 0:
        return
    repeats = nbytes // len(_FLOOD_LINE) + 1
    write_stderr((_FLOOD_LINE * repeats)[:nbytes])


def _ignore_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def spawn_grandchild() -> int:
    """Start the SIGTERM-ignoring grandchild and return its pid.

    SIGTERM is ignored from before ``exec`` (an ignored disposition survives it), so
    there is no window in which a SIGTERM could still kill it.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep({GRANDCHILD_LIFETIME})"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        preexec_fn=_ignore_sigterm,
    )
    return child.pid


def run_start_faults(plan: FaultPlan) -> None:
    """Apply the faults that happen before serving, in this order.

    ``--exit-at-start`` (and nothing else), ``--spawn-grandchild``, ``--flood-stderr``,
    ``--slow-start``. Garbage on stdout is the stdio engine's business.
    """
    if plan.exit_at_start is not None:
        fault_line(f"exiting at start with code {plan.exit_at_start}")
        os._exit(plan.exit_at_start)
    if plan.spawn_grandchild:
        fault_line(f"grandchild {spawn_grandchild()}")
    flood_stderr(plan.flood_stderr)
    if plan.slow_start > 0:
        fault_line(f"slow start: serving in {plan.slow_start:g} s")
        time.sleep(plan.slow_start)
