"""The facade hosts use, :class:`McpService`, and the values its operations return.

The facade owns no state of its own: it reads the registry actor's published snapshot
(records, handles, fresh tool views, tool ids) and sends the actor a message for everything
else (add, update, remove, a cache miss, a config re-read). It addresses the actor through
a :class:`~mcp_actors._registry.actor.RegistryRef`, which survives the actor's restarts, so a
facade taken once (``svc = rt.service``) keeps working for the runtime's whole life.

A tool call costs one mailbox round trip, to the server's connection actor; the registry
is not on that path.
"""

from __future__ import annotations

import builtins
import difflib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from logging import DEBUG
from typing import Any, Final

import attrs
import mcp.types as mcp_types
import trio
import trio.lowlevel

from mcp_actors import events
from mcp_actors._config.host_import import AddJsonEntryResult, parse_server_configs
from mcp_actors._config.record import LOG_LEVELS, InstallSource, McpServerRecord
from mcp_actors._config.store import ConfigStore
from mcp_actors._connection.call_ids import new_call_id
from mcp_actors._connection.call_input import check_timeout, checked_arguments
from mcp_actors._connection.callbacks import DEFAULT_CALLBACK_TIMEOUT, HostCallbacks, RootsSource
from mcp_actors._connection.handle import ConnectionHandle
from mcp_actors._connection.status import ConnectionState, ConnectionStatus, ProgressCallback
from mcp_actors._registry.actor import (
    AddServers,
    ForgetTools,
    RegistryMessage,
    RegistryRef,
    RemoveServer,
    StoreTools,
    SyncConfig,
    ToolView,
    UpdateServer,
    check_tool_enabled,
    normalise_changes,
    server_inactive,
)
from mcp_actors._registry.rules import server_not_found, to_record
from mcp_actors.errors import (
    ActorStopped,
    McpActorsError,
    ServerConnectionLost,
    ToolCallDenied,
    ToolNotFound,
)
from mcp_actors.naming import clean_name
from mcp_actors.naming import tool_id as naming_tool_id
from mcp_actors.tools import McpTool
from supervisors import MailboxClosed, NoReply, Reply

__all__ = [
    "AddJsonEntryResult",
    "ApprovalRequest",
    "Approver",
    "Discovery",
    "McpService",
    "ServerTestResult",
    "ToolListing",
]

logger = logging.getLogger("mcp_actors.service")
_CALL_LOG: Final = logging.getLogger("mcp_actors._connection.actor")
"""Where a call's id is logged (at DEBUG) when it starts: the connection's logger."""


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """What an approver is asked about: one tool call that is not auto-approved."""

    server_id: str
    server_name: str
    tool_name: str
    arguments: Mapping[str, Any]
    call_id: str


Approver = Callable[[ApprovalRequest], Awaitable[bool] | bool]
"""A host's callback deciding calls that are not auto-approved (True allows)."""


@attrs.frozen(kw_only=True)
class ToolListing:
    """Tools of several servers, plus which servers failed and why."""

    tools: tuple[McpTool, ...] = ()
    failures: Mapping[str, McpActorsError] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class ServerTestResult:
    """The outcome of :meth:`McpService.test`.

    Attributes:
        ok: Connected and listed tools.
        connect_seconds: Time to connect (0 when it was already connected).
        list_seconds: Time for ``tools/list``.
        tool_names: The tools the server offers (before ``disabledTools`` filtering).
        server_info: ``(name, version)`` from ``initialize``.
        error: What failed, when not ok.
    """

    ok: bool
    connect_seconds: float = 0.0
    list_seconds: float = 0.0
    tool_names: tuple[str, ...] = ()
    server_info: tuple[str, str] | None = None
    error: McpActorsError | None = None


@attrs.frozen(kw_only=True)
class Discovery:
    """Tools, prompts and resources of one server; each part may fail on its own."""

    tools: tuple[McpTool, ...] = ()
    prompts: tuple[mcp_types.Prompt, ...] = ()
    resources: tuple[mcp_types.Resource, ...] = ()
    resource_templates: tuple[mcp_types.ResourceTemplate, ...] = ()
    errors: Mapping[str, McpActorsError] = attrs.field(factory=dict)


def _close_tool_ids(tool_id: str, known: builtins.list[str]) -> builtins.list[str]:
    """Up to three known ids close to ``tool_id``, for "did you mean".

    Ids of one server share a long prefix, which would make every one of them "close": when
    the server part matches, only the tool parts are compared.
    """
    head, sep, tail = clean_name(tool_id).rpartition("__")
    same_server = {i.rpartition("__")[2]: i for i in known if sep and i.rpartition("__")[0] == head}
    if same_server:
        return [same_server[n] for n in difflib.get_close_matches(tail, list(same_server), n=3, cutoff=0.6)]
    return difflib.get_close_matches(tool_id, known, n=3, cutoff=0.8)


class McpService:
    """The facade hosts use: the operations of the reference design's McpService.

    Every async method is a checkpoint and safe to cancel; every wait inside is bounded by
    the server's configured timeouts. Servers are named by id or by name. The facade stays
    valid across registry restarts (it addresses the registry by a reference, not by an
    incarnation's mailbox).
    """

    def __init__(self, registry: RegistryRef) -> None:
        self._registry = registry
        self._approver: Approver | None = None

    # --------------------------------------------------------------- helpers

    async def _ask(self, build: Callable[[Reply[Any]], RegistryMessage]) -> Any:
        """Send a request to the serving incarnation; wait (bounded) through a restart to deliver it.

        A request that was delivered and then lost with its incarnation is answered with
        ActorStopped by that incarnation (never replayed: a mutation may have been applied).
        """
        while True:
            mailbox = await self._registry.current_mailbox()
            try:
                return await mailbox.ask(build)
            except MailboxClosed:
                # Not delivered: that incarnation just ended. The next one takes it.
                if self._registry.mailbox is mailbox:
                    await trio.lowlevel.checkpoint()  # let the ending incarnation detach itself
                continue
            except NoReply:
                raise ActorStopped(
                    "the registry stopped while handling this request (restarting or closing); retry"
                ) from None

    async def _sync(self) -> None:
        """Apply other processes' config changes when the file moved (one ``stat`` when it did not)."""
        ref = self._registry
        try:
            current = await trio.to_thread.run_sync(ref.store.fingerprint)
        except OSError:
            return
        if current != ref.fingerprint:
            await self._ask(lambda r: SyncConfig(reply=r))

    def _record(self, server: str) -> McpServerRecord:
        snap = self._registry.snapshot
        record = snap.find(server)
        if record is None:
            raise server_not_found(server, snap.records.values())
        return record

    async def _lookup(self, server: str) -> McpServerRecord:
        """:meth:`_record`, re-reading the config first on a miss (the server may be new elsewhere)."""
        record = self._registry.snapshot.find(server)
        if record is None:
            await self._sync()
            record = self._record(server)
        return record

    def _handle(self, record: McpServerRecord) -> ConnectionHandle:
        handle = self._registry.snapshot.handles.get(record.id)
        if handle is None or not record.is_active:
            raise server_inactive(record)
        return handle

    async def _active(self, server: str) -> tuple[McpServerRecord, ConnectionHandle]:
        """The record and connection of an enabled server, both read from one snapshot.

        The call path's look-up: a hit is two dict reads on the published snapshot (the
        record and handle always belong together); only a miss re-reads the config.
        """
        snap = self._registry.snapshot
        record = snap.find(server)
        if record is None:
            await self._sync()
            snap = self._registry.snapshot
            record = snap.find(server)
            if record is None:
                raise server_not_found(server, snap.records.values())
        handle = snap.handles.get(record.id)
        if handle is None or not record.is_active:
            raise server_inactive(record)
        return record, handle

    # --------------------------------------------------------------- records

    async def list(self) -> builtins.list[McpServerRecord]:
        """Every configured server's record, in configuration order, current with the file.

        One ``stat`` of the config file; when another process changed it, the change is
        applied to the running tree first (as if made here, with ``servers:changed``).
        """
        await trio.lowlevel.checkpoint()
        await self._sync()
        return builtins.list(self._registry.snapshot.records.values())

    def get(self, server: str) -> McpServerRecord:
        """One server's record, by id or name.

        Raises:
            ServerNotFound: No such server.
        """
        return self._record(server)

    def status(self, server: str) -> ConnectionStatus:
        """One server's connection status (disabled servers report ``disconnected``)."""
        record = self._record(server)
        handle = self._registry.snapshot.handles.get(record.id)
        if handle is None:
            return ConnectionStatus(server_id=record.id, server_name=record.name)
        return handle.status()

    def is_connected(self, server: str) -> bool:
        """Whether the server's connection is up now: :meth:`status`'s state, without a snapshot built.

        The tool adapters ask it before every call (a server that is not connected is
        connected first, within the call's bound).
        """
        handle = self._registry.snapshot.handles.get(self._record(server).id)
        return handle is not None and handle.state is ConnectionState.CONNECTED

    def call_goes_straight(self, server: str, tool_name: str) -> bool:
        """Whether :meth:`call_tool` of this tool, awaited now, awaits nothing before its bounded request.

        No approval applies to it, and its connection is up with the tool listed (see
        :meth:`ConnectionHandle.call_goes_straight`): then ``timeout`` alone bounds the
        call from start to answer. The tool adapters ask it before every call: when true,
        their own bound is handed down as the call's timeout, with no cancel scope of their
        own; when false (connecting, an approver, progress that resets the timeout), their
        scope bounds every step.
        """
        snap = self._registry.snapshot
        record = snap.find(server)
        if record is None or not record.is_active:
            return False
        handle = snap.handles.get(record.id)
        if handle is None:
            return False
        if self._approver is not None and not (
            record.is_trusted and tool_name not in record.disabled_auto_approve_tools
        ):
            return False
        return handle.call_goes_straight(tool_name)

    @property
    def tool_list_requests(self) -> int:
        """How many ``tools/list`` requests were sent to servers so far (cache misses)."""
        return self._registry.tool_list_requests

    async def add(self, input: McpServerRecord | Mapping[str, Any]) -> McpServerRecord:
        """Add a server and save it; it connects on its first use.

        Nothing is spawned by adding it (unless the runtime was opened with
        ``connect_on_add=True``): use :meth:`test` to try it now.

        Args:
            input: A record, or a JSON-style mapping with the config file's camelCase keys
                (``name``, ``type``, ``config``, ``isActive``, ...); ``id`` and the
                timestamps are generated when absent.

        Raises:
            DuplicateServerName: The name is taken, or collides with another after
                cleaning (tool ids would collide).
            InvalidServerConfig: A field is invalid (the error names it).
            ConfigStoreError: The config file could not be written (nothing was written).
        """
        await trio.lowlevel.checkpoint()
        record = to_record(input)
        [outcome] = await self._ask(lambda r: AddServers(records=(record,), reply=r))
        if isinstance(outcome, McpActorsError):
            raise outcome
        saved: McpServerRecord = outcome
        return saved

    async def add_json(
        self, text: str, *, install_source: InstallSource = InstallSource.MANUAL
    ) -> builtins.list[AddJsonEntryResult]:
        """Add every server of a desktop-app / IDE ``mcpServers`` document (or VS Code ``servers``).

        Good entries are saved (in one write) even when others are rejected; each entry gets
        its own result. As with :meth:`add`, nothing is spawned until a server's first use.
        Each new record's ``installSource`` is ``install_source``: ``manual`` (the default)
        for JSON a person typed or pasted, ``unknown`` for a file another host wrote (what
        ``mcp-actors servers import`` records); records of mcp-actors' own list form keep
        theirs.

        Raises:
            ConfigError: The text is not JSON, or not any known shape (line/column given).
            ConfigStoreError: The config file could not be written; no entry was saved.
        """
        await trio.lowlevel.checkpoint()
        report = parse_server_configs(text, install_source=install_source)
        good = tuple(entry.record for entry in report.entries if entry.record is not None)
        outcomes: tuple[McpServerRecord | McpActorsError, ...] = ()
        if good:
            outcomes = await self._ask(lambda r: AddServers(records=good, reply=r))
        by_record = dict(zip([id(r) for r in good], outcomes, strict=True))
        results: builtins.list[AddJsonEntryResult] = []
        for entry in report.entries:
            outcome: McpServerRecord | McpActorsError | None = entry.error
            if entry.record is not None:
                outcome = by_record[id(entry.record)]
            results.append(
                attrs.evolve(
                    entry,
                    record=outcome if isinstance(outcome, McpServerRecord) else None,
                    error=outcome if isinstance(outcome, McpActorsError) else None,
                )
            )
        return results

    async def update(self, server: str, changes: Mapping[str, Any] | None = None, /, **more: Any) -> McpServerRecord:
        """Change fields of a record and save it.

        Fields are named as on the record (``is_active``) or as in the config file
        (``isActive``), given as a mapping, as keywords, or both. ``id`` is immutable;
        ``updated_at`` is set. A change of name, type or config reconnects the server;
        ``is_active`` starts or stops its connection.

        Raises:
            ConfigError: An unknown or immutable field, or an invalid value.
            ServerNotFound: No such server.
            ConfigStoreError: The config file could not be written (nothing was written).
        """
        await trio.lowlevel.checkpoint()
        fields = normalise_changes({**(changes or {}), **more})
        server_id = (await self._lookup(server)).id
        updated: McpServerRecord = await self._ask(lambda r: UpdateServer(server_id=server_id, changes=fields, reply=r))
        return updated

    async def remove(self, server: str) -> McpServerRecord:
        """Remove a server: stop its connection (and process) and delete its record.

        Raises:
            ServerNotFound: No such server.
            ConfigStoreError: The config file could not be written (the server keeps running).
        """
        await trio.lowlevel.checkpoint()
        server_id = (await self._lookup(server)).id
        removed: McpServerRecord = await self._ask(lambda r: RemoveServer(server_id=server_id, reply=r))
        return removed

    # --------------------------------------------------------------- tools

    async def _view(self, record: McpServerRecord, handle: ConnectionHandle) -> ToolView:
        view = self._registry.snapshot.tools.get(record.id)
        if view is not None and view.fresh(record, handle, self._registry.tool_cache_ttl):
            await trio.lowlevel.checkpoint()
            return view
        # Listed on the connection (its actor joins concurrent misses into one tools/list, and
        # a list that a caller who gave up left behind is still current there), cached by the
        # registry, which builds the view and its tool ids.
        for attempt in (1, 2):
            try:
                listing = await handle.tools_listing(max_age=self._registry.tool_cache_ttl)
                break
            except ServerConnectionLost:
                if attempt == 2:
                    raise  # lost twice in a row: not a restart in passing
        stored: ToolView = await self._ask(
            lambda r: StoreTools(server_id=record.id, handle=handle, listing=listing, reply=r)
        )
        return stored

    async def list_server_tools(self, server: str) -> builtins.list[McpTool]:
        """The server's tools (cached for the TTL; ``disabledTools`` filtered out).

        While the server's tools and record are unchanged, a cache hit returns the same
        :class:`McpTool` objects (converters may cache on their identity).

        Raises:
            ServerNotFound, ServerInactive, ConnectionFailed: As the names say.
        """
        record, handle = await self._active(server)
        return builtins.list((await self._view(record, handle)).tools)

    async def list_tool_definitions(self, server: str) -> builtins.list[mcp_types.Tool]:
        """The server's tools as the protocol defines them (``mcp.types.Tool``), ``disabledTools`` filtered out.

        The same listing as :meth:`list_server_tools` (cached on the connection for the
        tool cache's TTL), with every field the server sent (title, output schema,
        annotations): for libraries that take the SDK's own objects.

        Raises:
            ServerNotFound, ServerInactive, ConnectionFailed: As the names say.
        """
        record, handle = await self._active(server)
        listing = await handle.tools_listing(max_age=self._registry.tool_cache_ttl)
        disabled = record.disabled_tools
        tools: tuple[mcp_types.Tool, ...] = listing.items
        return [tool for tool in tools if tool.name not in disabled]

    async def list_all_active_server_tools(self) -> builtins.list[McpTool]:
        """Tools of every active server; a failing server is logged and skipped."""
        return builtins.list((await self.list_tools_detailed()).tools)

    async def list_tools_detailed(self, servers: Sequence[str] | None = None) -> ToolListing:
        """Tools of the given servers (default: all active), with per-server failures.

        The servers are asked concurrently; one that fails does not hold up the others.
        """
        await trio.lowlevel.checkpoint()
        failures: dict[str, McpActorsError] = {}
        if servers is None:
            records = [r for r in self._registry.snapshot.records.values() if r.is_active]
        else:
            records = []
            for name in servers:
                try:
                    records.append(await self._lookup(name))
                except McpActorsError as exc:
                    failures[name] = exc
        results: dict[str, builtins.list[McpTool]] = {}

        async def one(record: McpServerRecord) -> None:
            try:
                results[record.id] = await self.list_server_tools(record.id)
            except McpActorsError as exc:
                logger.warning("server %s: listing tools failed: %s", record.name, exc)
                failures[record.name] = exc

        async with trio.open_nursery() as nursery:
            for record in records:
                nursery.start_soon(one, record)
        tools = [tool for record in records for tool in results.get(record.id, ())]
        return ToolListing(tools=tuple(tools), failures=failures)

    def resolve_tool_id(self, tool_id: str) -> tuple[McpServerRecord, str]:
        """``(record, tool name)`` for a tool id handed out by a listing.

        Also accepted: the id spelled with the tool's (and server's) own names,
        ``mcp__everything__get-tiny-image`` for ``mcp__everything__get_tiny_image``, as a
        person copies it from the server's docs; it resolves to the tool whose provider-safe
        id it cleans to (an exact spelling wins over a cleaned one).

        Raises:
            ToolDisabled: The id names a tool in its server's ``disabledTools``.
            ServerInactive: The id names a tool of a disabled server.
            ToolNotFound: The id was never handed out (list the tools first), its tool is
                gone from the server, or its server is gone; close ids are suggested.
        """
        snap = self._registry.snapshot
        found = snap.tool_ids.get(tool_id)
        record = snap.records.get(found[0]) if found is not None else None
        if found is not None and record is not None:
            return record, found[1]
        wanted = clean_name(tool_id)
        spelled: list[tuple[McpServerRecord, str]] = []
        for view in snap.tools.values():
            current = snap.records.get(view.record.id)
            for tool in view.tools if current is not None else ():
                written = f"mcp__{current.name}__{tool.name}"  # type: ignore[union-attr]
                if written == tool_id:
                    return current, tool.name  # type: ignore[return-value]
                if clean_name(written) == wanted:
                    spelled.append((current, tool.name))  # type: ignore[arg-type]
        if len(spelled) == 1:
            return spelled[0]
        for current in snap.records.values():
            prefix = f"mcp__{clean_name(current.name)}__"
            if not wanted.startswith(prefix):
                continue
            for name in current.disabled_tools:
                if wanted == clean_name(f"mcp__{current.name}__{name}") or tool_id == naming_tool_id(
                    current.name, name
                ):
                    check_tool_enabled(current, name)
            if not current.is_active:
                raise server_inactive(current)
        hints = _close_tool_ids(tool_id, list(snap.tool_ids))
        hint = f" (did you mean {' or '.join(repr(h) for h in hints)}?)" if hints else ""
        raise ToolNotFound(
            f"unknown tool id {tool_id!r}{hint}; ids come from listing the tools (list_server_tools,"
            " list_all_active_server_tools, or 'mcp-actors tools')"
        )

    def _unlisted_server_of(self, tool_id: str) -> McpServerRecord | None:
        """The active server whose id prefix ``tool_id`` carries, when its tools are not in the snapshot."""
        snap = self._registry.snapshot
        wanted = clean_name(tool_id)
        for record in snap.records.values():
            if (
                record.is_active
                and record.id not in snap.tools
                and wanted.startswith(f"mcp__{clean_name(record.name)}__")
            ):
                return record
        return None

    def is_auto_approved(self, server: str, tool_name: str) -> bool:
        """Whether a call needs no approval: the server is trusted and the tool is not excluded."""
        record = self._record(server)
        return record.is_trusted and tool_name not in record.disabled_auto_approve_tools

    def set_approver(self, approver: Approver | None) -> None:
        """Install (or remove) the callback consulted for calls that are not auto-approved.

        Without an approver, such calls proceed: approval is the host's policy. The approver
        (a function, or one returning an awaitable) is bounded by ``open_runtime``'s
        ``callback_timeout``, as every host callback is: no answer in time, or an exception,
        denies the call (:class:`~mcp_actors.errors.ToolCallDenied`, the exception chained).
        """
        self._approver = approver

    async def _approved(self, approver: Approver, request: ApprovalRequest) -> bool:
        """Ask ``approver``, bounded by the runtime's ``callback_timeout`` like every host callback.

        No answer in time, or an approver that raises, is a typed denial: the call is not made.
        """
        host = self._registry.host
        bound = host.timeout if host is not None else DEFAULT_CALLBACK_TIMEOUT
        denied = f"the call to {request.tool_name!r} of server {request.server_name!r} was not approved"
        with trio.move_on_after(bound):
            try:
                verdict = approver(request)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:
                raise ToolCallDenied(
                    f"{denied}: the approver failed: {type(exc).__name__}: {exc}",
                    server=request.server_name,
                    tool=request.tool_name,
                ) from exc
            return bool(verdict)
        raise ToolCallDenied(
            f"{denied}: the approver did not answer within {bound:g}s (open_runtime's callback_timeout)",
            server=request.server_name,
            tool=request.tool_name,
        )

    async def call_tool(
        self,
        server: str,
        tool_name: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        as_task: bool | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool and return the MCP result (a tool-level error is ``is_error``, not an exception).

        Emits ``tool:called`` with the duration and success (built only while someone is
        subscribed), and ``tool:progress`` for every
        progress notification (also given to ``on_progress(progress, total, message)``).
        Progress is asked of the server only when something can see it: ``on_progress``, a
        subscriber at the call's start, or the server's ``resetTimeoutOnProgress``. A task
        is driven to its result (polled at the server's interval, its result fetched,
        cancelled if the caller gives up), emitting ``task:status``. At 2025-11-25 a tool
        whose ``execution.taskSupport`` is ``required`` runs as a task, and ``as_task=True``
        runs an ``optional`` one as a task too; at 2026-07-28 the server decides (the
        ``io.modelcontextprotocol/tasks`` extension) and ``as_task=False`` declines a task
        (docs/protocol/tasks.md).
        The result keeps ``structured_content``, checked against the tool's ``outputSchema``.
        ``meta`` is the request's ``_meta`` (a tracing id, say), sent as the SDK's
        ``ClientSession.call_tool(meta=)`` sends it.

        Raises:
            ServerNotFound, ServerInactive: The server does not exist or is disabled.
            ToolDisabled: The tool is in ``disabledTools``.
            InvalidCallInput: ``arguments`` are not a JSON object of JSON values (``NaN``
                included), or ``timeout`` is not a positive, finite number of seconds.
            ToolCallDenied: The approver said no, raised, or did not answer within ``callback_timeout``.
            ToolCallTimeout: No result within the timeout (the server was told to cancel).
            ToolOutputInvalid: The structured result breaks the tool's ``outputSchema``.
            ToolTaskFailed: The tool ran as a task that failed or was cancelled on the server.
            ConnectionFailed: The server could not be reached or died during the call.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        record, handle = await self._active(server)
        if tool_name in record.disabled_tools:
            check_tool_enabled(record, tool_name)
        bus = self._registry.bus
        if call_id is None and (self._approver is not None or bus.watches_calls or _CALL_LOG.isEnabledFor(DEBUG)):
            call_id = new_call_id()  # an id only when something can see it (an approver, events, the call log)
        args = checked_arguments(arguments, server=record.name, tool=tool_name)
        check_timeout(timeout, server=record.name, tool=tool_name)
        if self._approver is not None and not (
            record.is_trusted and tool_name not in record.disabled_auto_approve_tools
        ):
            request = ApprovalRequest(
                server_id=record.id,
                server_name=record.name,
                tool_name=tool_name,
                arguments=args,
                call_id=call_id or new_call_id(),
            )
            if not await self._approved(self._approver, request):
                raise ToolCallDenied(
                    f"the call to {tool_name!r} of server {record.name!r} was not approved",
                    server=record.name,
                    tool=tool_name,
                )
        start = time.perf_counter()
        success = False
        try:
            result = await handle.call_tool(
                tool_name, args, timeout=timeout, call_id=call_id, on_progress=on_progress, as_task=as_task, meta=meta
            )
            success = not result.is_error
            return result
        finally:
            # Built only for a listener: nobody can ever see an event emitted to no one.
            if bus.watches_calls:
                bus.emit(
                    events.TOOL_CALLED,
                    serverId=record.id,
                    serverName=record.name,
                    toolName=tool_name,
                    callId=call_id or new_call_id(),
                    duration=time.perf_counter() - start,
                    success=success,
                )

    async def call_tool_by_id(
        self,
        tool_id: str,
        arguments: Mapping[str, Any] | None = None,
        call_id: str | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        as_task: bool | None = None,
    ) -> mcp_types.CallToolResult:
        """:meth:`call_tool` for a tool id from a listing (what an LLM asks for).

        An id of an active server whose tools were not listed yet in this runtime (an id a
        host kept from an earlier run) lists that server first, then resolves.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            record, name = self.resolve_tool_id(tool_id)
        except ToolNotFound:
            unlisted = self._unlisted_server_of(tool_id)
            if unlisted is None:
                raise
            await self.list_server_tools(unlisted.id)
            record, name = self.resolve_tool_id(tool_id)
        return await self.call_tool(
            record.id, name, arguments, call_id, timeout=timeout, on_progress=on_progress, as_task=as_task
        )

    # --------------------------------------------------------------- connections

    async def test(self, server: str) -> ServerTestResult:
        """Connect (if needed) and list tools, timing both; failures are a result, not an exception."""
        await trio.lowlevel.checkpoint()
        record = await self._lookup(server)
        try:
            handle = self._handle(record)
            start = time.perf_counter()
            await handle.connect()
            connected = time.perf_counter()
            tools = await handle.list_tools()
            listed = time.perf_counter()
        except McpActorsError as exc:
            return ServerTestResult(ok=False, error=exc)
        return ServerTestResult(
            ok=True,
            connect_seconds=connected - start,
            list_seconds=listed - connected,
            tool_names=tuple(t.name for t in tools),
            server_info=handle.status().server_info,
        )

    async def health(self, server: str, *, timeout: float = 10.0) -> float:
        """Ping the server now (connecting first if needed); returns the round trip in seconds.

        Health is otherwise checked periodically by each connection (``pingInterval``);
        this asks on demand, e.g. before handing a server's tools to a model. As for the
        periodic ping, a ping unanswered within ``timeout`` means the server is dead: it is
        declared so (state ``error``, its calls in flight fail, it restarts on next use).
        Unless calls sent before the ping are still within their timeouts: a server
        blocked in a synchronous tool answers nothing until it returns, so the ping fails
        (``ConnectionFailed``, saying it is busy) and the server is left alone. A server
        whose tools do not block its loop answers a ping while they run, so pick a bound it
        can always meet.

        Raises:
            ServerNotFound, ServerInactive: The server does not exist or is disabled.
            InvalidCallInput: ``timeout`` is not a positive, finite number of seconds.
            ConnectionFailed: It could not be reached or did not answer the ping in time.
        """
        await trio.lowlevel.checkpoint()
        record, handle = await self._active(server)
        check_timeout(timeout, server=record.name, tool=None, default="the default of 10 s")
        return await handle.health(timeout=timeout)

    async def discover(self, server: str) -> Discovery:
        """Tools, prompts and resources; each part that fails is reported in ``errors``."""
        await trio.lowlevel.checkpoint()
        record, handle = await self._active(server)
        errors: dict[str, McpActorsError] = {}
        tools: builtins.list[McpTool] = []
        prompts: tuple[mcp_types.Prompt, ...] = ()
        resources: tuple[mcp_types.Resource, ...] = ()
        try:
            tools = await self.list_server_tools(record.id)
        except McpActorsError as exc:
            errors["tools"] = exc
        try:
            prompts = await handle.list_prompts()
        except McpActorsError as exc:
            errors["prompts"] = exc
        try:
            resources = await handle.list_resources()
        except McpActorsError as exc:
            errors["resources"] = exc
        templates: tuple[mcp_types.ResourceTemplate, ...] = ()
        try:
            templates = await handle.list_resource_templates()
        except McpActorsError as exc:
            errors["resource_templates"] = exc
        return Discovery(
            tools=tuple(tools), prompts=prompts, resources=resources, resource_templates=templates, errors=errors
        )

    async def connect(self, server: str) -> None:
        """Connect now (servers otherwise connect on first use)."""
        await trio.lowlevel.checkpoint()
        await (await self._active(server))[1].connect()

    async def initialize_result(self, server: str) -> mcp_types.InitializeResult:
        """The server's answer to this connection's handshake, connecting first if needed; nothing is sent.

        What ``ClientSession.initialize()`` returns (protocol version, capabilities, server
        info, instructions), for hosts and libraries that want it without a second handshake.
        A 2026-07-28 connection, which has no handshake, gives its discovery in that shape.

        Raises:
            ServerNotFound, ServerInactive, ConnectionFailed: As the names say.
        """
        await trio.lowlevel.checkpoint()
        return await (await self._active(server))[1].initialize_result()

    async def notifications_delivered(self, server: str) -> None:
        """Wait until ``server``'s notifications received so far have reached their handlers and events.

        A server's notifications (log messages, list changes) are handled in the wire's order
        in a task of their own, so a call's answer may reach the caller before the log
        messages the server sent just before it. A host that relays both in order (the
        gateway) waits here after the answer. Returns at once when nothing is queued or the
        server is not connected.

        Raises:
            ServerNotFound, ServerInactive: As the names say.
        """
        await trio.lowlevel.checkpoint()
        await (await self._active(server))[1].notifications_delivered()

    async def disconnect(self, server: str) -> None:
        """Close the server's connection (it reconnects lazily on the next use)."""
        await trio.lowlevel.checkpoint()
        await (await self._active(server))[1].disconnect()

    async def reconnect(self, server: str) -> None:
        """Close and reconnect; also closes an open circuit and invalidates the tool cache."""
        await trio.lowlevel.checkpoint()
        record, handle = await self._active(server)
        await self._ask(lambda r: ForgetTools(server_id=record.id, reply=r))
        await handle.reconnect()

    async def cleanup(self) -> None:
        """Disconnect every server (their processes stop); records are kept."""
        await trio.lowlevel.checkpoint()
        async with trio.open_nursery() as nursery:
            for handle in self._registry.snapshot.handles.values():
                nursery.start_soon(_disconnect_quietly, handle)

    async def wait_for_stderr(self, server: str, predicate: Callable[[str], bool]) -> str:
        """Wait until a running stdio server writes a stderr line satisfying ``predicate``.

        For fault-injection tests ("fault: cancelled 7"); unbounded, so wrap it in
        ``trio.fail_after``. Raises ``RuntimeError`` when the server has no process.
        """
        await trio.lowlevel.checkpoint()
        return await (await self._active(server))[1].wait_for_stderr(predicate)

    def stderr_tail(self, server: str, n: int = 20) -> tuple[str, ...]:
        """The server's last stderr lines (live while it runs; stdio only)."""
        return self._handle(self._record(server)).stderr_tail(n)

    # -- host callbacks

    @property
    def host_callbacks(self) -> HostCallbacks | None:
        """The runtime's answers to servers' requests (sampling, elicitation, roots), or ``None``.

        The gateway (``mcp_actors.serve``) puts its own there, to relay those requests to its clients.
        """
        return self._registry.host

    async def set_roots(self, roots: RootsSource | None) -> int:
        """Replace the host's roots and tell every connected server that can hear it.

        Sends ``notifications/roots/list_changed`` to each connected server to which roots
        are offered (the runtime has roots and the record allows them); those servers list
        the roots again when they want them. A server connected while the runtime had no
        roots did not hear of the capability and is not told; it sees the roots after its
        next connect.

        Args:
            roots: A list of ``file://`` URIs or ``Root`` values, ``async (server_id) -> list``,
                or ``None`` to offer no roots to servers that connect from now on.

        Returns:
            How many servers were notified.

        Raises:
            ValueError: A root is not a ``file://`` URI.
            TypeError: ``roots`` is neither a list nor a callable.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        host = self._registry.host
        if host is None:
            raise RuntimeError("this service has no host callbacks (it was not built by open_runtime)")
        host.set_roots(roots)
        sent = 0

        async def notify(handle: ConnectionHandle) -> None:
            nonlocal sent
            if await handle.notify_roots_changed():
                sent += 1

        async with trio.open_nursery() as nursery:
            for handle in builtins.list(self._registry.snapshot.handles.values()):
                nursery.start_soon(notify, handle)
        return sent

    # --------------------------------------------------------------- resources, prompts, completion, logging

    async def list_resources(self, server: str) -> builtins.list[mcp_types.Resource]:
        """The server's resources, every page (empty when it offers none).

        Cached per connection for five minutes; ``notifications/resources/list_changed``
        (emitted as ``resources:changed``) and every reconnect invalidate it.

        Raises:
            ServerNotFound, ServerInactive, ConnectionFailed: As the names say.
        """
        await trio.lowlevel.checkpoint()
        return builtins.list(await (await self._active(server))[1].list_resources())

    async def list_resource_templates(self, server: str) -> builtins.list[mcp_types.ResourceTemplate]:
        """The server's resource templates (``demo://note/{name}``), every page."""
        await trio.lowlevel.checkpoint()
        return builtins.list(await (await self._active(server))[1].list_resource_templates())

    async def read_resource(self, server: str, uri: str) -> mcp_types.ReadResourceResult:
        """Read one resource; ``contents`` holds text (``.text``) or binary (``.blob``, base64) items.

        Raises:
            ServerRequestFailed: The server refused (an unknown URI, no resources at all): its
                JSON-RPC error, with ``method`` and ``code``; the connection is fine.
        """
        await trio.lowlevel.checkpoint()
        return await (await self._active(server))[1].read_resource(_text_arg("uri", uri))

    async def subscribe_resource(self, server: str, uri: str) -> None:
        """Subscribe to changes of ``uri``: each one is emitted as ``resource:updated`` ({serverId, uri}).

        A subscription lasts as long as the connection; subscribe again after a reconnect.
        """
        await trio.lowlevel.checkpoint()
        await (await self._active(server))[1].subscribe_resource(_text_arg("uri", uri))

    async def unsubscribe_resource(self, server: str, uri: str) -> None:
        """End a subscription made with :meth:`subscribe_resource`."""
        await trio.lowlevel.checkpoint()
        await (await self._active(server))[1].unsubscribe_resource(_text_arg("uri", uri))

    async def list_tasks(self, server: str) -> builtins.list[mcp_types.Task]:
        """The server's tasks with their status (``tasks/list``, 2025-11-25), every page.

        Raises:
            ServerRequestFailed: The server does not list tasks (it answers "method not found").
        """
        await trio.lowlevel.checkpoint()
        return builtins.list(await (await self._active(server))[1].list_tasks())

    async def list_prompts(self, server: str) -> builtins.list[mcp_types.Prompt]:
        """The server's prompts with their arguments, every page (empty when it offers none)."""
        await trio.lowlevel.checkpoint()
        return builtins.list(await (await self._active(server))[1].list_prompts())

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """One prompt rendered with ``arguments`` (string values, as the protocol wants).

        Raises:
            ServerRequestFailed: The server refused (an unknown prompt, a missing required
                argument): its JSON-RPC error, with ``method`` and ``code``; the connection is fine.
        """
        await trio.lowlevel.checkpoint()
        args = {str(k): str(v) for k, v in (arguments or {}).items()}
        return await (await self._active(server))[1].get_prompt(_text_arg("name", name), args)

    async def complete(
        self,
        server: str,
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference | Mapping[str, Any],
        argument: Mapping[str, str] | tuple[str, str],
        context: Mapping[str, str] | None = None,
    ) -> mcp_types.Completion:
        """Completion values for an argument of a prompt or a resource template.

        Args:
            server: The server's id or name.
            ref: ``PromptReference(name=...)``, ``ResourceTemplateReference(uri=...)``, or
                their JSON form (``{"type": "ref/prompt", "name": "compose"}``).
            argument: ``{"name": ..., "value": <what is typed so far>}`` or ``(name, value)``.
            context: Arguments already chosen, by name.
        """
        await trio.lowlevel.checkpoint()
        parsed_ref = _completion_ref(ref)
        arg = dict(zip(("name", "value"), argument, strict=True)) if isinstance(argument, tuple) else dict(argument)
        ctx = dict(context) if context is not None else None
        return await (await self._active(server))[1].complete(parsed_ref, arg, ctx)

    async def set_log_level(self, server: str, level: str) -> None:
        """Ask the server to send log messages from ``level`` up (``logging/setLevel``), now.

        For a lasting choice set the record's ``config.logLevel``: it is sent on every
        connect. Messages arrive on stdlib logging as ``mcp_actors.server.<name>`` and as
        ``server:log`` events.

        Raises:
            ValueError: ``level`` is not an MCP log level.
        """
        await trio.lowlevel.checkpoint()
        if level not in LOG_LEVELS:
            raise ValueError(f"level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        await (await self._active(server))[1].set_log_level(level)

    @property
    def config_store(self) -> ConfigStore:
        """The config file this service reads (a gateway watches it for its profiles)."""
        return self._registry.store

    @property
    def bus(self) -> events.EventBus:
        """The runtime's event bus (for parts of the host that report events, as the gateway does)."""
        return self._registry.bus

    def subscribe(
        self, *, buffer: int = 1024, types: Iterable[events.EventType | str] | None = None
    ) -> events.Subscription:
        """Events from now on (bounded; a slow reader loses its oldest events, counted); only ``types`` if given."""
        return self._registry.bus.subscribe(buffer=buffer, types=types)


def _text_arg(what: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _completion_ref(
    ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference | Mapping[str, Any],
) -> mcp_types.PromptReference | mcp_types.ResourceTemplateReference:
    if isinstance(ref, mcp_types.PromptReference | mcp_types.ResourceTemplateReference):
        return ref
    if isinstance(ref, Mapping):
        kind = ref.get("type")
        if kind == "ref/prompt" and isinstance(ref.get("name"), str):
            return mcp_types.PromptReference(name=ref["name"])
        if kind == "ref/resource" and isinstance(ref.get("uri"), str):
            return mcp_types.ResourceTemplateReference(uri=ref["uri"])
    raise ValueError(
        "ref must be PromptReference(name=...), ResourceTemplateReference(uri=...),"
        f' {{"type": "ref/prompt", "name": ...}} or {{"type": "ref/resource", "uri": ...}}, got {ref!r}'
    )


async def _disconnect_quietly(handle: ConnectionHandle) -> None:
    try:
        await handle.disconnect()
    except McpActorsError as exc:
        logger.info("server %s: disconnect failed: %s", handle.settings.server_name, exc)
