"""The gateway's stdio front: one client on stdin and stdout, so a desktop app runs one gateway as its only server.

Newline-delimited JSON-RPC, as every MCP stdio server speaks it. The client's first request
decides the era, as the SDK's ``serve_dual_era_loop`` decides it: ``initialize`` opens a
handshake session (2025-06-18, 2025-11-25, ...; list changes are sent once the client says
``notifications/initialized``); a request carrying the 2026-07-28 ``_meta`` envelope is served
at that revision, each request on its own (``subscriptions/listen`` is then the stream of list
changes, on stdout, until the client cancels it).

Requests run concurrently, each in its own task: a slow tool call never holds up a listing,
and ``notifications/cancelled`` ends the named request (and its upstream call). One writer
task owns stdout; answers wait for room in its queue (bounded), notifications (progress,
list changes) are dropped when it is full. A message larger than ``max_message`` bytes is
refused with a parse error and skipped; the session goes on. The end of stdin ends the
gateway: requests in flight get ``grace`` seconds to finish.
"""

from __future__ import annotations

import logging
from typing import Any, Final, NoReturn

import attrs
import mcp_types
import trio
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from mcp_actors._wire.codec import decode, encode
from mcp_actors.serve._client_requests import PendingAnswers
from mcp_actors.serve._gateway import Gateway, Listener, Request, RpcError
from mcp_actors.serve._subscriptions import admits

__all__ = ["DEFAULT_MAX_MESSAGE", "StdioFront"]

logger = logging.getLogger("mcp_actors.serve")

DEFAULT_MAX_MESSAGE: Final = 4 * 1024 * 1024
"""The largest message read from stdin, in bytes (the HTTP front's body bound)."""
_READ_SIZE: Final = 65536
_QUEUE: Final = 256
_LIST_KINDS: Final = frozenset({"tools", "prompts", "resources"})


def _error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def _modern(params: Any) -> bool:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


@attrs.define(eq=False)
class _Listen(Listener):
    """One ``subscriptions/listen`` (2026-07-28) or the handshake session's list changes."""

    front: StdioFront
    kinds: frozenset[str]
    meta: dict[str, Any] | None = None

    def changed(self, kinds: frozenset[str]) -> None:
        for kind in sorted(kinds & self.kinds):
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"}
            if self.meta is not None:
                message["params"] = {"_meta": self.meta}
            self.front.notify(message)

    def log(self, message: dict[str, Any], level: str) -> None:
        if self.meta is None and admits(self.front.log_level, level):  # the handshake session's, not a listen
            self.front.notify(message)


@attrs.define(eq=False)
class StdioFront:
    """Serves a :class:`Gateway` to one client over a pair of byte streams (stdin, stdout).

    Args:
        gateway: What answers the requests.
        receive: The client's messages (stdin).
        send: Where answers and notifications go (stdout).
        max_message: The largest message accepted, in bytes.
        profile: The profile served (``None``: the default one).
    """

    gateway: Gateway
    receive: trio.abc.ReceiveStream
    send: trio.abc.SendStream
    max_message: int = DEFAULT_MAX_MESSAGE
    profile: str | None = None
    version: str | None = None
    """The handshake revision, once ``initialize`` was answered."""
    in_flight: dict[Any, trio.CancelScope] = attrs.field(factory=dict)
    capabilities: dict[str, Any] = attrs.field(factory=dict)
    """What the client declared in ``initialize`` (sampling, elicitation, roots)."""
    log_level: str | None = None
    """The client's ``logging/setLevel`` (``None``: every level)."""
    answers: PendingAnswers = attrs.field(factory=PendingAnswers)
    """The gateway's requests to the client (relayed from upstreams) waiting for its answer."""
    _session_listener: _Listen | None = None
    _idle: trio.Event = attrs.field(factory=trio.Event)
    _out: trio.MemorySendChannel[bytes] = attrs.field(init=False)
    _out_receive: trio.MemoryReceiveChannel[bytes] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._out, self._out_receive = trio.open_memory_channel[bytes](_QUEUE)

    def notify(self, message: dict[str, Any]) -> None:
        """Queue a notification; dropped when the queue is full (progress and list changes say it again)."""
        try:
            self._out.send_nowait(encode(message, newline=True))
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _answer(self, message: dict[str, Any]) -> None:
        try:
            await self._out.send(encode(message, newline=True))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def serve(self, grace: float) -> None:
        """Serve until stdin ends (then requests in flight get ``grace`` seconds) or cancellation."""
        async with trio.open_nursery() as outer:
            outer.start_soon(self._write)
            try:
                async with trio.open_nursery() as requests:
                    await self._read(requests)
                    with trio.move_on_after(grace):
                        while self.in_flight:
                            self._idle = trio.Event()
                            await self._idle.wait()
                    requests.cancel_scope.cancel()
            finally:
                if self._session_listener is not None:
                    self.gateway.listeners.discard(self._session_listener)
                self.answers.abandon()
                self.gateway.subscriptions.forget(self)
                self._out.close()

    async def _write(self) -> None:
        async with self._out_receive:
            async for line in self._out_receive:
                try:
                    await self.send.send_all(line)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return  # the client went away: nothing more to say to it

    async def _read(self, requests: trio.Nursery) -> None:
        buffer = b""
        skipping = False
        while True:
            try:
                chunk = await self.receive.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                return
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                if skipping:
                    skipping = False  # the end of a message too large: skipped, answered already
                    continue
                if line.strip():
                    self._dispatch(line, requests)
            if len(buffer) > self.max_message:
                if not skipping:
                    await self._answer(
                        _error(None, mcp_types.PARSE_ERROR, f"a message exceeds {self.max_message} bytes")
                    )
                skipping, buffer = True, b""

    def _dispatch(self, line: bytes, requests: trio.Nursery) -> None:
        try:
            message = decode(line)
        except (ValueError, RecursionError):
            self.notify(_error(None, mcp_types.PARSE_ERROR, "Parse error"))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.notify(_error(None, mcp_types.INVALID_REQUEST, "not one JSON-RPC 2.0 message"))
            return
        method = message.get("method")
        params = message.get("params")
        if not isinstance(method, str):
            self.answers.answered(message)  # an answer to an upstream's request, relayed to this client
            return
        if params is not None and not isinstance(params, dict):
            self.notify(_error(message.get("id"), mcp_types.INVALID_REQUEST, "params must be an object"))
            return
        if "id" not in message:
            self._notification(method, params or {})
            return
        rid = message["id"]
        if isinstance(rid, bool) or not isinstance(rid, str | int):
            self.notify(_error(None, mcp_types.INVALID_REQUEST, "the id must be a string or an integer"))
            return
        scope = trio.CancelScope()
        self.in_flight[rid] = scope
        requests.start_soon(self._request, rid, method, params or {}, scope)

    def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            scope = self.in_flight.get(params.get("requestId"))
            if scope is not None:
                scope.cancel()
        elif method == "notifications/initialized" and self.version is not None and self._session_listener is None:
            self._session_listener = _Listen(self, _LIST_KINDS)
            self.gateway.listeners.add(self._session_listener)

    async def _request(self, rid: Any, method: str, params: dict[str, Any], scope: trio.CancelScope) -> None:
        try:
            with scope:
                answer = await self._outcome(rid, method, params)
                await self._answer(answer)
        finally:
            if self.in_flight.get(rid) is scope:
                del self.in_flight[rid]
                if not self.in_flight:
                    self._idle.set()

    async def _outcome(self, rid: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            capabilities = params.get("capabilities")
            self.capabilities = capabilities if isinstance(capabilities, dict) else {}
            try:
                result, self.version = self.gateway.initialize(params)
            except RpcError as exc:
                return {"jsonrpc": "2.0", "id": rid, "error": exc.to_json()}
            return {"jsonrpc": "2.0", "id": rid, "result": result}
        if _modern(params):
            verdict = classify_inbound_request({"method": method, "params": params})
            if isinstance(verdict, InboundLadderRejection):
                return _error(rid, verdict.code, verdict.message, verdict.data)
            version = verdict.protocol_version
            if method == "subscriptions/listen":
                await self._listen(rid, params)  # until the client cancels it, or the gateway stops
        elif self.version is None:
            if method != "ping":
                return _error(rid, mcp_types.INVALID_REQUEST, "the session is not initialized: send initialize first")
            version = LATEST_HANDSHAKE_VERSION
        else:
            version = self.version
        if version == self.version:
            request = Request(
                method, params, version, notify=self.notify, profile=self.profile, ask=self._ask, client=self
            )
        else:
            request = Request(method, params, version, notify=self.notify, profile=self.profile)
        try:
            result = await self.gateway.handle(request)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "id": rid, "error": exc.to_json()}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send an upstream's request to the client (on stdout, never dropped) and wait for its answer."""
        return await self.answers.ask(self._answer, method, params)

    async def _listen(self, rid: Any, params: dict[str, Any]) -> NoReturn:
        """A 2026-07-28 ``subscriptions/listen`` on stdio: the acknowledgement, then list changes until cancelled."""
        wanted = params.get("notifications") or {}
        kinds = frozenset(kind for kind in _LIST_KINDS if isinstance(wanted, dict) and wanted.get(f"{kind}ListChanged"))
        meta = {SUBSCRIPTION_ID_META_KEY: rid}
        listener = _Listen(self, kinds, meta)
        honoured = {f"{kind}ListChanged": True for kind in sorted(kinds)}
        self.notify(
            {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": honoured, "_meta": meta},
            }
        )
        self.gateway.listeners.add(listener)
        try:
            await trio.sleep_forever()
        finally:
            self.gateway.listeners.discard(listener)
