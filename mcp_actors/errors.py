"""Typed errors of mcp-actors.

Every error a user can hit derives from :class:`McpActorsError`. Each one says what
went wrong, names the server (and the field or tool) involved, and says what to do
next. Messages never contain secrets: environment values and header values are never
formatted into them.

The hierarchy is grouped by what a caller does about it:

* :class:`ConfigError` — the input is wrong; fix it and retry.
* :class:`LookupFailed` — the thing named does not exist (server, tool).
* :class:`ConnectionFailed` — the server could not be reached or died; the runtime
  isolates it and reports; retry after fixing the server or call ``reconnect``.
* :class:`ToolCallFailed` — one call did not complete (timeout, denied, lost).
* :class:`ConfigStoreError` — the config file could not be written or locked; nothing
  was half-written and the runtime keeps serving; fix the disk or the path and retry.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ActorStopped",
    "AuthorizationFailed",
    "AuthorizationRequired",
    "AuthorizationServerUnreachable",
    "CommandNotFound",
    "ConfigError",
    "ConfigFileCorrupt",
    "ConfigFileLocked",
    "ConfigFileRefused",
    "ConfigStoreError",
    "ConfigWriteFailed",
    "ConnectTimeout",
    "ConnectionFailed",
    "DuplicateServerName",
    "IdentityProviderRefused",
    "InvalidCallInput",
    "InvalidProfile",
    "InvalidServerConfig",
    "InvalidToolName",
    "LookupFailed",
    "McpActorsError",
    "ProfileNotFound",
    "ServerCircuitOpen",
    "ServerConnectionLost",
    "ServerInactive",
    "ServerMessageTooLarge",
    "ServerMisconfigured",
    "ServerNotFound",
    "ServerProtocolError",
    "ServerRequestFailed",
    "ServerStartFailed",
    "SharedStoreUnavailable",
    "StressConfigInvalid",
    "StressWorkerDied",
    "ToolCallDenied",
    "ToolCallFailed",
    "ToolCallTimeout",
    "ToolDisabled",
    "ToolNotFound",
    "ToolOutputInvalid",
    "ToolTaskFailed",
    "UnresolvedPlaceholder",
    "WorkingDirectoryNotFound",
]


def _rebuild_error(cls: type[McpActorsError], args: tuple[Any, ...], state: dict[str, Any]) -> McpActorsError:
    """Unpickle an error without calling its ``__init__`` (see :meth:`McpActorsError.__reduce__`)."""
    error = cls.__new__(cls, *args)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class McpActorsError(Exception):
    """Root of every error this library raises on purpose.

    Attributes:
        server: The server's name (or id when no name is known), or ``None`` when the
            error is not about one server.
    """

    server: str | None

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message)
        self.server = server

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle as ``cls(*args)``, which loses keyword-only attributes (and
        # fails for required ones): rebuild from the message and the attributes instead,
        # so an error raised in a worker process reaches its parent intact.
        return (_rebuild_error, (type(self), self.args, dict(vars(self))))


# ----------------------------------------------------------------------------- config


class ConfigError(McpActorsError, ValueError):
    """Configuration input is invalid. Nothing was saved; fix the input and retry.

    Attributes:
        field: The offending field (camelCase, as in the config file), if known.
    """

    field: str | None

    def __init__(self, message: str, *, server: str | None = None, field: str | None = None) -> None:
        super().__init__(message, server=server)
        self.field = field


class InvalidProfile(ConfigError):
    """A gateway profile (the config file's ``profiles`` section) is malformed.

    The message names the profile and the field (``profiles.<name>.<path>``) and says what
    is expected; a gateway keeps serving the profiles it had until the section is fixed.

    Attributes:
        profile: The profile's name, or ``None`` when the section itself is wrong.
    """

    profile: str | None

    def __init__(self, message: str, *, profile: str | None = None, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.profile = profile


class InvalidServerConfig(ConfigError):
    """A server entry has a missing, mistyped or contradictory field."""


class DuplicateServerName(ConfigError):
    """A server name is already taken (or collides with one after id-cleaning)."""


class ConfigFileCorrupt(ConfigError):
    """The config file cannot be parsed. It has been left untouched.

    Attributes:
        path: The file's path.
        line: 1-based line of the first error, if known.
        column: 1-based column of the first error, if known.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.column = column


class ConfigFileRefused(ConfigFileCorrupt):
    """A file read as configuration is no regular file (a FIFO, a device, a directory) or is too large.

    Raised before a byte is read: a FIFO never blocks the reader, a device or a huge file never
    fills its memory. The file is left untouched (never written over). Point the path at a
    regular file of reasonable size (see ``mcp_actors._config.files.MAX_CONFIG_FILE_BYTES``).

    Attributes:
        reason: What is wrong with it, e.g. "is a FIFO (named pipe), not a regular file".
    """

    reason: str

    def __init__(self, message: str, *, path: str, reason: str) -> None:
        super().__init__(message, path=path)
        self.reason = reason


class InvalidToolName(ConfigError):
    """A tool name is not accepted by every LLM provider (``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``)."""


# ----------------------------------------------------------------------------- lookups


class LookupFailed(McpActorsError, LookupError):
    """Something named by the caller does not exist."""


class ServerNotFound(LookupFailed):
    """No server with that id or name is configured."""


class ProfileNotFound(LookupFailed):
    """No gateway profile of that name is configured.

    Attributes:
        profile: The name asked for.
    """

    profile: str

    def __init__(self, message: str, *, profile: str) -> None:
        super().__init__(message)
        self.profile = profile


class ToolNotFound(LookupFailed):
    """No tool with that id or name is offered by the server (or the runtime)."""


# ----------------------------------------------------------------------------- connections


class ConnectionFailed(McpActorsError):
    """A server could not be reached, or its connection ended.

    Attributes:
        stderr_tail: The last lines the server wrote to stderr (stdio servers only),
            oldest first; often the real reason.
    """

    stderr_tail: tuple[str, ...]

    def __init__(self, message: str, *, server: str | None = None, stderr_tail: tuple[str, ...] = ()) -> None:
        if stderr_tail:
            message = f"{message}; last stderr line: {stderr_tail[-1]!r}"
        super().__init__(message, server=server)
        self.stderr_tail = tuple(stderr_tail)


class ServerMisconfigured(ConnectionFailed):
    """The server's configuration cannot work, and no retry can fix it.

    A command that does not exist, a working directory that does not exist, a
    placeholder that is still unresolved: the circuit opens at once (no restarts are
    spent on it). Fix the record (``update``) or the machine, then ``reconnect``.
    """


class CommandNotFound(ServerMisconfigured):
    """A stdio server's command does not resolve on PATH (or is not executable)."""

    def __init__(self, message: str, *, server: str | None = None, command: str) -> None:
        super().__init__(message, server=server)
        self.command = command


class WorkingDirectoryNotFound(ServerMisconfigured):
    """A stdio server's ``cwd`` does not exist or is not a directory.

    Attributes:
        cwd: The configured working directory.
    """

    def __init__(self, message: str, *, server: str | None = None, cwd: str) -> None:
        super().__init__(message, server=server)
        self.cwd = cwd


class ServerStartFailed(ConnectionFailed):
    """The server process started but the MCP handshake did not complete."""


class ConnectTimeout(ServerStartFailed):
    """Connecting and initializing took longer than the server's connect timeout."""


class ServerProtocolError(ConnectionFailed):
    """The server sent something that is not MCP (garbage on stdout, a bad reply)."""


class ServerMessageTooLarge(ServerProtocolError):
    """The server sent a message larger than the transport accepts; it was refused before it was held.

    A JSON answer announcing or reaching more bytes than the limit, a compressed one that
    inflates beyond it, an SSE event that outgrows it: refused at the limit, whatever the
    transport. Over streamable HTTP only the request it answered fails (the connection
    lives on); where messages share one stream (stdio, legacy SSE) the connection dies
    with this reason. If the server's answers are legitimately that large, raise
    ``max_message_bytes`` in its transport params; otherwise the server is at fault.

    Attributes:
        limit: The limit, in bytes.
    """

    def __init__(self, message: str, *, server: str | None = None, limit: int) -> None:
        super().__init__(message, server=server)
        self.limit = limit


class ServerConnectionLost(ConnectionFailed):
    """The connection died (process exit, stdout closed, HTTP stream error).

    In-flight calls fail with this at once; tool calls are never replayed.
    """


class ServerCircuitOpen(ConnectionFailed):
    """The server failed too often in a short time and is parked in ``error``.

    Call ``reconnect`` (or update its config) to try again.
    """


class ServerRequestFailed(McpActorsError):
    """The server answered a request (``resources/read``, ``prompts/get``, ...) with a JSON-RPC error.

    The connection is fine: the server refused this one request (an unknown resource or
    prompt, arguments it rejects). Read the message, fix the request and retry.

    Attributes:
        method: The request's method.
        code: The JSON-RPC error code the server sent.
    """

    def __init__(self, message: str, *, server: str | None = None, method: str, code: int) -> None:
        super().__init__(message, server=server)
        self.method = method
        self.code = code


class ServerInactive(McpActorsError):
    """The server is configured but disabled (``isActive: false``). Enable it first.

    Not a :class:`ConnectionFailed`: nothing was tried, and nothing failed to connect.
    """


class ActorStopped(McpActorsError, RuntimeError):
    """The actor behind this handle has stopped (the runtime is closing or closed)."""


# ----------------------------------------------------------------------------- calls


class ToolCallFailed(McpActorsError):
    """One tool call did not complete.

    Attributes:
        tool: The tool's name on its server.
        code: The JSON-RPC error code, when the server refused the call with one (``-32021``:
            the call needs a client capability that was not declared), else ``None``.
        data: That error's ``data`` (``{"requiredCapabilities": ...}`` for ``-32021``), else ``None``.
    """

    tool: str | None
    code: int | None
    data: Any

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        tool: str | None = None,
        code: int | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message, server=server)
        self.tool = tool
        self.code = code
        self.data = data


class ToolCallTimeout(ToolCallFailed, TimeoutError):
    """The call did not finish within its timeout; the server was told to cancel it.

    Attributes:
        timeout: The bound that was exceeded, in seconds.
    """

    def __init__(self, message: str, *, server: str | None = None, tool: str | None = None, timeout: float) -> None:
        super().__init__(message, server=server, tool=tool)
        self.timeout = timeout


class ToolDisabled(ToolCallFailed):
    """The tool is listed in the server's ``disabledTools``."""


class InvalidCallInput(ToolCallFailed, ValueError):
    """The call's own input is wrong; nothing was sent. Fix the call and retry.

    Its arguments are not a JSON object of JSON values (a list, a set, ``NaN``, an object
    JSON cannot carry), or its timeout is not a positive, finite number of seconds.

    Attributes:
        field: What is wrong: ``"arguments"`` (or a path into them, ``"arguments.when"``) or ``"timeout"``.
    """

    def __init__(self, message: str, *, server: str | None = None, tool: str | None = None, field: str) -> None:
        super().__init__(message, server=server, tool=tool)
        self.field = field


class ToolCallDenied(ToolCallFailed, PermissionError):
    """The call needed approval and the approver said no (or none is installed)."""


# ----------------------------------------------------------------------------- storage


class ConfigStoreError(McpActorsError):
    """The config file could not be locked or written. Nothing was half-written.

    An expected failure, answered to the caller: the runtime and every server keep
    serving, and the records already saved are untouched.

    Attributes:
        path: The config file's path.
    """

    path: str

    def __init__(self, message: str, *, path: str, server: str | None = None) -> None:
        super().__init__(message, server=server)
        self.path = path


class ConfigFileLocked(ConfigStoreError, TimeoutError):
    """Another process held the config file's lock for longer than ``lock_timeout``.

    Nothing was read or written. Usually a process is stuck inside a write (or a debugger is
    paused in one); retry, or stop that process.
    """


class ConfigWriteFailed(ConfigStoreError, OSError):
    """The operating system refused to write the config file (read-only, full, no permission, ...).

    The file on disk is exactly as it was before the attempt, and the change was not
    applied in memory either. Free space, fix permissions or choose another config path
    (``--config`` / ``MCP_ACTORS_CONFIG``), then retry.

    Attributes:
        reason: The operating system's reason (``strerror``), e.g. "Read-only file system".
        os_errno: The ``errno`` value, when there is one.
    """

    reason: str
    os_errno: int | None

    def __init__(
        self, message: str, *, path: str, reason: str, os_errno: int | None = None, server: str | None = None
    ) -> None:
        super().__init__(message, path=path, server=server)
        self.reason = reason
        self.os_errno = os_errno
        # Like any OSError, so that code checking ``errno`` keeps working.
        self.errno = os_errno
        self.strerror = reason
        self.filename = path

    def __str__(self) -> str:
        # OSError.__str__ would format errno/strerror; our message already says everything.
        return str(self.args[0]) if self.args else ""


# ----------------------------------------------------------------------------- stress


class StressConfigInvalid(ConfigError):
    """A stress run's settings or scenario are invalid; nothing was started. Fix them and retry.

    Attributes:
        field: The offending option (``--rate``) or scenario path (``operations[2].weight``).
    """


class StressWorkerDied(McpActorsError):
    """A stress run's worker process died: killed from outside (the kernel's OOM killer,
    ``kill -9``) or crashed. Its calls are lost and the run stops with an error.

    Check the machine's memory (``dmesg`` names the OOM killer's victims) and run again,
    with fewer ``--workers`` if memory is short. A Ctrl-C that kills a worker still
    starting is not this error: the run is interrupted, as by any Ctrl-C.

    Attributes:
        worker: The worker's index (0-based).
        exit_code: Its exit status; negative for the signal that ended it, ``None`` if unknown.
    """

    worker: int
    exit_code: int | None

    def __init__(
        self, message: str, *, server: str | None = None, worker: int = 0, exit_code: int | None = None
    ) -> None:
        super().__init__(message, server=server)
        self.worker = worker
        self.exit_code = exit_code


# ----------------------------------------------------------------------------- authorization


class AuthorizationRequired(ServerMisconfigured):
    """The server needs an OAuth login that no one can give now.

    There is no usable token for it (never logged in, logged out, or the grant was revoked)
    and the runtime has no ``authorization_handler`` to ask a person: no call ever waits on
    a human. Log in (``mcp-actors auth login NAME``) or install a handler, then
    ``reconnect``. The circuit opens at once: no retry can fix it.
    """


class AuthorizationFailed(ServerMisconfigured):
    """The OAuth flow for the server failed in a way no retry can fix.

    A refused refresh with no way to log in again, a denied or mismatched authorization
    response, malformed discovery metadata, a protected resource that names another server,
    a token endpoint that rejects the client: the message says which. Fix the server's
    ``config.oauth`` (or the authorization server), log in again, then ``reconnect``.

    Attributes:
        oauth_error: The OAuth ``error`` code the authorization server sent, if any.
    """

    def __init__(self, message: str, *, server: str | None = None, oauth_error: str | None = None) -> None:
        super().__init__(message, server=server)
        self.oauth_error = oauth_error


class IdentityProviderRefused(AuthorizationFailed):
    """The enterprise identity provider would not exchange the user's ID token for an ID-JAG.

    Enterprise-managed authorization (``config.oauth.grant: identity_assertion``) asks the IdP
    for a grant to one server on the user's behalf, and the IdP said no: its policy denies
    this user, client or server (``access_denied``, ``invalid_target``), the ID token has
    expired or was issued to another client (``invalid_grant``), or the client's credentials
    at the IdP are wrong (``invalid_client``); :attr:`oauth_error` says which. A host that
    holds the ID token signs the user in again for a fresh one (or fixes ``idpClientId`` /
    ``idpClientSecret``), then calls ``reconnect``.
    """


class AuthorizationServerUnreachable(ConnectionFailed):
    """The authorization server (or the metadata it publishes) could not be reached.

    Transient: the slot retries with backoff as for any connection failure. Check the
    network and the authorization server.
    """


# ----------------------------------------------------------------------------- protocol features


class ToolOutputInvalid(ToolCallFailed):
    """The tool's structured result does not match the ``outputSchema`` it declared.

    The server is at fault; the result is not handed on, because a host that trusts the
    schema would misread it.
    """


class ToolTaskFailed(ToolCallFailed):
    """A tool called as a task ended ``failed`` or ``cancelled`` on the server.

    Attributes:
        task_id: The server's id of the task.
        status: The task's final status.
    """

    def __init__(
        self, message: str, *, server: str | None = None, tool: str | None = None, task_id: str, status: str
    ) -> None:
        super().__init__(message, server=server, tool=tool)
        self.task_id = task_id
        self.status = status


# ----------------------------------------------------------------------------- variables


class UnresolvedPlaceholder(ServerMisconfigured):
    """A ``${...}`` placeholder in a server's config has no value at connect time.

    ``${env:NAME}`` / ``${NAME}`` with ``NAME`` unset in the host environment, an
    ``${input:ID}`` that was never answered, a ``${workspaceFolder}`` of an import without
    a file. No retry can fix it, so the circuit opens at once: set the variable (or
    ``servers update`` the record), then reconnect.

    Attributes:
        placeholder: The placeholder as written, e.g. ``"${env:GITHUB_TOKEN}"``.
        field: Where it is, camelCase (``config.env.GITHUB_TOKEN``, ``config.args[2]``).
    """

    def __init__(self, message: str, *, server: str | None = None, placeholder: str, field: str) -> None:
        super().__init__(message, server=server)
        self.placeholder = placeholder
        self.field = field


class SharedStoreUnavailable(McpActorsError, ConnectionError):
    """The store the replicas of a gateway share (Redis) did not answer, or refused.

    Nothing was written there by the failed operation. Check that the server at ``url`` is up
    and reachable (and the credentials in the URL), then retry.

    Attributes:
        url: The store's URL, without its password.
    """

    url: str

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url
