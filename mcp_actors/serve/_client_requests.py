"""Requests of an upstream server to the client whose call caused them: sampling, elicitation, roots.

Why: a server behind the gateway may ask, during a tool call, for the host's model
(``sampling/createMessage``), for the user (``elicitation/create``) or for the host's roots
(``roots/list``). Only the client that made the call can answer, and only that one may see
the question (it can hold that client's data). The runtime answers servers through one set
of host callbacks per runtime (:class:`~mcp_actors._connection.callbacks.HostCallbacks`,
``(server id, params)``); the gateway puts its own callbacks there, and they find the call
the question belongs to:

* **exactly**, by a context variable the gateway sets in the task that runs the call: the
  runtime runs a call in its caller's task, a 2026-07-28 upstream's ``InputRequiredResult``
  is fulfilled in that task, and a streamable-HTTP upstream's request that arrives on the
  call's own response stream is handled in a task started from it, so the variable is seen;
* otherwise (a request a stdio upstream sends on its one channel, which says nothing of the
  call) by the server's calls in flight: when they all come from one client, that client is
  asked on its most recent call's stream; when several clients' calls run, the request cannot
  be attributed and is refused.

How the client is asked depends on its revision: at 2025-06-18 and 2025-11-25 the request is
sent on the call's own event stream and the client's answer comes back as a POST (HTTP) or a
line (stdio) with the same id (:class:`PendingAnswers`); at 2026-07-28 the call is *parked*:
the client's request is answered with an ``InputRequiredResult`` carrying the questions and a
``requestState`` naming the parked call, the upstream call goes on waiting, and the client's
retry (``inputResponses`` + ``requestState``) delivers the answers to it (:class:`ParkedCalls`).

A request that arrives when no call of a client to that server is running, or whose client did
not declare the capability, is answered upstream with a JSON-RPC error that says so (unless the
runtime's host has its own handler, which then answers as it did before the gateway).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final

import attrs
import mcp.types as sdk_types
import mcp_types
import trio
from mcp.shared.exceptions import MCPError

from mcp_actors._connection.callbacks import REQUEST_KEY, HostCallbacks, RootsSource

__all__ = [
    "Ask",
    "Caller",
    "ClientRequests",
    "ParkedCall",
    "PendingAnswers",
    "client_capabilities",
]

logger = logging.getLogger("mcp_actors.serve")

Ask = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Send one request (method, params) to the client on the call's own stream; its result's wire form.

Raises :class:`~mcp.shared.exceptions.MCPError` with the client's error when it answers one.
"""

PARK_TIMEOUT: Final = 600.0
"""Seconds a parked call waits for its client's retry (the runtime's default callback bound)."""
_BATCH_CHECKPOINTS: Final = 3
"""Scheduler passes a parked call waits after its first question, so sibling questions go in one answer."""

_CAPABILITY: Final[Mapping[str, str]] = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


def client_capabilities(params: Mapping[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request's client capabilities, from its ``_meta`` envelope (empty when absent)."""
    meta = params.get("_meta")
    caps = meta.get(mcp_types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    return caps if isinstance(caps, dict) else {}


@attrs.define(eq=False)
class _Waiting:
    """One request to the client waiting for its answer."""

    done: trio.Event = attrs.field(factory=trio.Event)
    answer: dict[str, Any] | None = None


@attrs.define(eq=False)
class PendingAnswers:
    """A client's requests in flight (2025 revisions): ids sent on call streams, answers coming back.

    One per client (an HTTP session, the stdio client): answers arrive on a channel of their
    own (a POST, a line) and are matched by id.
    """

    _waiting: dict[Any, _Waiting] = attrs.field(factory=dict)
    _ids: Iterator[int] = attrs.field(factory=lambda: itertools.count(1))

    async def ask(
        self, send: Callable[[dict[str, Any]], Awaitable[None]], method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Send ``method`` with ``send`` and wait for the client's answer; cancelling tells the client."""
        rid = f"mcp-actors-{next(self._ids)}"
        waiting = self._waiting[rid] = _Waiting()
        try:
            await send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            await waiting.done.wait()
        except trio.Cancelled:
            with trio.move_on_after(1, shield=True):
                cancelled = {"requestId": rid, "reason": "the server no longer needs the answer"}
                with contextlib.suppress(Exception):
                    await send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled})
            raise
        finally:
            self._waiting.pop(rid, None)
        answer = waiting.answer or {}
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            code = error.get("code")
            raise MCPError(
                code if isinstance(code, int) else mcp_types.INTERNAL_ERROR,
                str(error.get("message") or "the client refused"),
                error.get("data"),
            )
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def answered(self, message: Mapping[str, Any]) -> bool:
        """Deliver a client's answer (a JSON-RPC response); ``False`` when no request waits for its id."""
        waiting = self._waiting.get(message.get("id"))
        if waiting is None:
            return False
        waiting.answer = dict(message)
        waiting.done.set()
        return True

    def abandon(self) -> None:
        """The client is gone: every request waiting on it gets an error."""
        for waiting in self._waiting.values():
            waiting.answer = {"error": {"code": mcp_types.CONNECTION_CLOSED, "message": "the client went away"}}
            waiting.done.set()


@attrs.define(eq=False)
class _Question:
    """One question of a parked call, handed to the client in an ``InputRequiredResult``."""

    method: str
    params: dict[str, Any]
    done: trio.Event = attrs.field(factory=trio.Event)
    answer: Any = None
    sent: bool = False
    """Handed to a 2025-11-25 client on its ``tasks/result`` stream (:mod:`._tasks`)."""


@attrs.define(eq=False)
class ParkedCall:
    """A 2026-07-28 client's call whose upstream call waits for the client's answers (SEP-2322).

    The upstream call runs in the gateway's own task; each client request (the first, then
    each retry) waits until the call ends or asks something.
    """

    questions: dict[str, _Question] = attrs.field(factory=dict)
    fresh: list[str] = attrs.field(factory=list)
    """Keys of questions not yet handed to the client."""
    wake: trio.Event = attrs.field(factory=trio.Event)
    result: Any = None
    error: BaseException | None = None
    finished: bool = False
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    token: str | None = None
    caller: Caller | None = None
    """The call's caller; each retry points its ``notify`` at the retry's own stream."""
    on_end: Callable[[], None] | None = None
    """Called once the call ended (a task's status notification, :mod:`._tasks`)."""
    task_answer: dict[str, Any] | None = None
    """The ``CreateTaskResult`` the client's request gets once the call became a task (:mod:`._tasks`)."""
    _keys: Iterator[int] = attrs.field(factory=lambda: itertools.count(1))

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Queue a question for the client's next ``InputRequiredResult``; its answer's wire form."""
        asked = REQUEST_KEY.get()  # the upstream's own key, kept: a client may know what it asks by it
        key = str(asked) if asked is not None else ""
        while not key or key in self.questions:
            key = f"{method.split('/')[0]}-{next(self._keys)}"
        question = self.questions[key] = _Question(method, params)
        self.fresh.append(key)
        self.wake.set()
        try:
            await question.done.wait()
        finally:
            self.questions.pop(key, None)
        answer = question.answer
        if isinstance(answer, dict):
            return answer
        raise MCPError(mcp_types.INVALID_PARAMS, f"the client's retry carried no answer to {method} ({key})")

    def deliver(self, responses: Mapping[str, Any]) -> None:
        """The client's ``inputResponses``: each answers the question of its key; the others stay open."""
        for key, answer in responses.items():
            question = self.questions.get(key)
            if question is not None and not question.done.is_set():
                question.answer = answer
                question.done.set()

    def end(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.finished = result, error, True
        self.wake.set()
        if self.on_end is not None:
            self.on_end()


@attrs.define(eq=False)
class Caller:
    """One client request in flight that an upstream server may ask things of.

    Attributes:
        server_id: The server the request went to.
        client: The client's identity (its session; the request itself at 2026-07-28).
        capabilities: What the client declared (wire form).
        ask: How to ask the client on this call's stream (2025 revisions), or ``None``.
        parked: The parked call (2026-07-28), or ``None``.
        notify: Where this call's notifications go (log messages), or ``None``.
        log_level: The lowest log level the client wants on this call; ``None``: every level
            (2025, no ``logging/setLevel``), ``"off"``: none.
    """

    server_id: str
    client: object
    capabilities: Mapping[str, Any]
    ask: Ask | None = None
    parked: ParkedCall | None = None
    notify: Callable[[dict[str, Any]], None] | None = None
    log_level: str | None = None


_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("mcp_actors_gateway_caller", default=None)


@attrs.define(eq=False)
class ClientRequests:
    """The gateway's host callbacks: each upstream request relayed to the client whose call caused it."""

    server_names: Callable[[str], str] = attrs.field(default=str)
    callers: dict[str, list[Caller]] = attrs.field(factory=dict)
    parked: dict[str, ParkedCall] = attrs.field(factory=dict)
    _nursery: trio.Nursery | None = None
    _host: HostCallbacks | None = None
    _previous: tuple[Any, Any, RootsSource | None] = (None, None, None)

    async def run(
        self, host: HostCallbacks | None, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Answer the runtime's server requests through the gateway's clients until cancelled.

        The gateway's callbacks take the place of the host's (kept, and asked when no client
        call can be found) in ``host``; the capabilities are declared to the servers that
        connect from now on. On exit the host's own callbacks are put back.
        """
        if host is not None:
            self._host = host
            self._previous = (host.sampling, host.elicitation, host.roots)
            host.sampling, host.elicitation = self._sampling, self._elicitation
            host.set_roots(self._roots)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            if host is not None:
                host.sampling, host.elicitation = self._previous[0], self._previous[1]
                host.set_roots(self._previous[2])

    # ------------------------------------------------------------------ calls in flight

    @contextlib.contextmanager
    def calling(self, caller: Caller) -> Iterator[None]:
        """Mark ``caller`` as running for the block: its server's requests come to it."""
        callers = self.callers.setdefault(caller.server_id, [])
        callers.append(caller)
        token = _CALLER.set(caller)
        try:
            yield
        finally:
            _CALLER.reset(token)
            callers.remove(caller)
            if not callers:
                del self.callers[caller.server_id]

    def unique_caller(self, server_id: str) -> Caller | None:
        """The newest call to ``server_id`` when every call in flight to it comes from one client, else ``None``."""
        callers = self.callers.get(server_id)
        if not callers:
            return None
        first = callers[0].client
        if all(caller.client is first for caller in callers):
            return callers[-1]
        return None

    def _caller_for(self, server_id: str, method: str) -> Caller:
        caller = _CALLER.get()
        if caller is not None and caller.server_id == server_id:
            return caller
        caller = self.unique_caller(server_id)
        if caller is not None:
            return caller
        name = self.server_names(server_id)
        if server_id in self.callers:
            why = (
                f"server {name!r} asked {method} while calls of several clients to it run through the gateway,"
                " and the request does not say which call it belongs to: ask only during one client's call,"
                " or reach the server over streamable HTTP, where a request travels on its call's stream"
            )
        else:
            why = (
                f"server {name!r} asked {method} while no client call to it runs through the gateway: the"
                " gateway relays such a request only to the client whose call caused it"
            )
        raise MCPError(mcp_types.INVALID_REQUEST, why)

    # ------------------------------------------------------------------ the host callbacks

    async def _relay(self, server_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        caller = self._caller_for(server_id, method)
        capability = _CAPABILITY[method]
        declared = caller.capabilities.get(capability)
        if not isinstance(declared, dict):
            raise MCPError(
                mcp_types.INVALID_REQUEST,
                f"the client of this call does not support {capability} (it did not declare the capability);"
                f" {method} of server {self.server_names(server_id)!r} cannot be relayed to it",
            )
        if method == "elicitation/create" and params.get("mode") == "url" and not isinstance(declared.get("url"), dict):
            raise MCPError(mcp_types.INVALID_REQUEST, "the client of this call does not support URL-mode elicitation")
        if caller.ask is not None:
            return await caller.ask(method, params)
        if caller.parked is not None:
            return await caller.parked.ask(method, params)
        raise MCPError(
            mcp_types.INVALID_REQUEST,
            f"the client of this call cannot be asked {method}: it does not accept an event stream on its request",
        )

    async def _sampling(
        self, server_id: str, params: sdk_types.CreateMessageRequestParams
    ) -> sdk_types.CreateMessageResult | sdk_types.CreateMessageResultWithTools:
        if not self._has_caller(server_id) and self._previous[0] is not None:
            result: sdk_types.CreateMessageResult | sdk_types.CreateMessageResultWithTools = await self._previous[0](
                server_id, params
            )
            return result
        answer = await self._relay(server_id, "sampling/createMessage", _wire(params))
        if isinstance(answer.get("content"), list):
            return sdk_types.CreateMessageResultWithTools.model_validate(answer)
        return sdk_types.CreateMessageResult.model_validate(answer)

    async def _elicitation(self, server_id: str, params: sdk_types.ElicitRequestParams) -> sdk_types.ElicitResult:
        if not self._has_caller(server_id) and self._previous[1] is not None:
            result: sdk_types.ElicitResult = await self._previous[1](server_id, params)
            return result
        answer = await self._relay(server_id, "elicitation/create", _wire(params))
        return sdk_types.ElicitResult.model_validate(answer)

    async def _roots(self, server_id: str) -> list[sdk_types.Root | str]:
        previous = self._previous[2]
        if not self._has_caller(server_id) and previous is not None:
            if callable(previous):
                return list(await previous(server_id))
            return list(previous)
        answer = await self._relay(server_id, "roots/list", {})
        return list(sdk_types.ListRootsResult.model_validate(answer).roots)

    def _has_caller(self, server_id: str) -> bool:
        caller = _CALLER.get()
        return (caller is not None and caller.server_id == server_id) or server_id in self.callers

    # ------------------------------------------------------------------ 2026-07-28: parked calls

    async def run_parked(
        self,
        caller: Caller,
        params: Mapping[str, Any],
        op: Callable[[], Awaitable[Any]],
    ) -> Any:
        """Run a 2026-07-28 client's request whose upstream call may ask the client things.

        The first request starts ``op`` in the gateway's task (``caller`` set for it); a retry
        (``requestState`` of a parked call, ``inputResponses``) resumes that call. Either way
        the answer is the call's result, or an ``InputRequiredResult`` (a dict) with its questions.

        Raises:
            MCPError: ``requestState`` names no parked call (unknown, or kept too long).
        """
        state = params.get("requestState")
        if state is not None:
            parked = self.parked.pop(state, None) if isinstance(state, str) else None
            if parked is None:
                raise MCPError(
                    mcp_types.INVALID_PARAMS,
                    "requestState names no call waiting at this gateway (unknown, or not retried within"
                    f" {PARK_TIMEOUT:g}s): send the request again without it",
                )
            if parked.caller is not None:
                parked.caller.notify = caller.notify  # what the call says from now on goes on the retry's stream
            responses = params.get("inputResponses")
            if isinstance(responses, dict):
                parked.deliver(responses)
        else:
            parked = ParkedCall(caller=caller)
            caller.parked = parked
            if self._nursery is None:
                with self.calling(caller):
                    return await op()
            self._nursery.start_soon(self._drive, parked, caller, op)
        return await self._await(parked)

    async def _drive(self, parked: ParkedCall, caller: Caller, op: Callable[[], Awaitable[Any]]) -> None:
        with parked.scope, self.calling(caller):
            try:
                parked.end(result=await op())
            except Exception as exc:
                parked.end(error=exc)
        if not parked.finished:
            parked.end(error=MCPError(mcp_types.INTERNAL_ERROR, "the call was cancelled"))
        # A result nobody came back for is kept until its park expires.

    async def _await(self, parked: ParkedCall) -> Any:
        try:
            while True:
                if parked.task_answer is not None:
                    return parked.task_answer  # the call goes on as a task: the client follows it by its id
                if parked.finished:
                    if parked.error is not None:
                        raise parked.error
                    return parked.result
                if parked.fresh:
                    for _ in range(_BATCH_CHECKPOINTS):
                        await trio.lowlevel.checkpoint()  # sibling questions asked at once go together
                    return self._park(parked)
                parked.wake = trio.Event()
                await parked.wake.wait()
        except trio.Cancelled:
            parked.scope.cancel()  # the client left while the call ran: the upstream call ends too
            raise

    def _park(self, parked: ParkedCall) -> dict[str, Any]:
        requests = {
            key: {"method": parked.questions[key].method, "params": parked.questions[key].params}
            for key in parked.fresh
            if key in parked.questions
        }
        parked.fresh.clear()
        token = parked.token = secrets.token_urlsafe(24)
        self.parked[token] = parked
        if self._nursery is not None:
            self._nursery.start_soon(self._expire, token, parked)
        return {"resultType": "input_required", "inputRequests": requests, "requestState": token}

    async def _expire(self, token: str, parked: ParkedCall) -> None:
        await trio.sleep(PARK_TIMEOUT)
        if self.parked.get(token) is parked:
            del self.parked[token]
            logger.info("a parked call was not retried within %gs: ended", PARK_TIMEOUT)
            parked.scope.cancel()


def _wire(params: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped
