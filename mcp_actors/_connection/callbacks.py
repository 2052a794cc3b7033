"""Host callbacks: what a server may ask of the host (sampling, elicitation, roots).

A server reaches these the way its protocol revision allows: as a server-to-client request
in the handshake revisions (2025-06-18, 2025-11-25), or embedded in an
``InputRequiredResult`` that the client fulfils and retries (2026-07-28, SEP-2322). Both
ways run the same :class:`HostCallbacks` wrappers, so a handler behaves the same whichever
way it is reached.

The rules, written once here:

* A capability is declared in ``initialize`` only when the host provides the handler *and*
  the server's record allows it (``config.allowSampling`` / ``allowElicitation`` /
  ``allowRoots``, default true). A server that asks for an undeclared capability gets the
  SDK's JSON-RPC error ``-32600`` ("... not supported"), as the protocol says.
* A handler that raises ``mcp.shared.exceptions.MCPError`` answers the server with exactly
  that error (code and message): the way a host refuses with its own words.
* Every handler is bounded by :attr:`HostCallbacks.timeout`. A sampling or roots handler
  that times out or raises answers the server with a JSON-RPC error (``-32001`` for the
  timeout, ``-32603`` for a raise) whose message names the server and the handler, never
  the exception's text (it may hold secrets); the traceback goes to the log. An elicitation
  handler that times out answers ``cancel`` (the user walked away); one that raises answers
  the ``-32603`` error.
* An elicitation answer ``accept`` gets the requested schema's defaults filled into the
  fields it left out (SEP-1034), then is validated against the requested schema (enums of
  SEP-1330 included). An answer that does not validate is *never sent*: the server gets a
  ``-32602`` error naming the field and the problem, and the log says the same.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

import attrs
import jsonschema  # type: ignore[import-untyped]  # a dependency of the mcp SDK; no stubs installed
import mcp.types as mcp_types
import trio
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError

from mcp_actors._sdk import run_input_required_driver

if TYPE_CHECKING:
    from mcp_actors._connection.status import ConnectionSettings

__all__ = [
    "DEFAULT_CALLBACK_TIMEOUT",
    "ElicitationHandler",
    "HostCallbacks",
    "INPUT_REQUIRED_MAX_ROUNDS",
    "REQUEST_KEY",
    "RootsSource",
    "SamplingHandler",
    "answer_input_requests",
    "complete_elicitation",
    "fulfil_input_required",
    "to_roots",
]

logger = logging.getLogger("mcp_actors.callbacks")

REQUEST_KEY: contextvars.ContextVar[str | int | None] = contextvars.ContextVar("mcp_actors_request_key", default=None)
"""While a handler runs: the server's id of the request it answers (its JSON-RPC id, or its key in an
``InputRequiredResult``), for a handler that passes the request on (the gateway keeps the keys)."""

DEFAULT_CALLBACK_TIMEOUT: Final = 600.0
"""Seconds a host handler may take: long, because elicitation waits for a person."""

SamplingHandler: TypeAlias = Callable[
    [str, mcp_types.CreateMessageRequestParams],
    Awaitable[mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools],
]
"""``async (server_id, params) -> CreateMessageResult``: run the host's model for a server.

``params.tools`` is set when the server samples with tools (2025-11-25); answer with a
:class:`~mcp.types.CreateMessageResultWithTools` then.
"""

ElicitationHandler: TypeAlias = Callable[[str, mcp_types.ElicitRequestParams], Awaitable[mcp_types.ElicitResult]]
"""``async (server_id, params) -> ElicitResult``: ask the user (form mode) or send them to a URL (URL mode)."""

RootLike: TypeAlias = mcp_types.Root | str
RootsSource: TypeAlias = Sequence[RootLike] | Callable[[str], Awaitable[Sequence[RootLike]]]
"""Roots: a static list (``Root`` or ``file://`` URI strings) or ``async (server_id) -> list``."""


def to_roots(roots: Sequence[RootLike]) -> tuple[mcp_types.Root, ...]:
    """Normalise roots to ``Root`` values; a string is a ``file://`` URI.

    Raises:
        ValueError: A root is not a ``file://`` URI (the protocol allows no other scheme).
        TypeError: ``roots`` is a string, or holds something that is neither a Root nor a string.
    """
    if isinstance(roots, str):
        raise TypeError(f"roots must be a list of file:// URIs or Root values, not one string: {roots!r}")
    out: list[mcp_types.Root] = []
    for root in roots:
        if isinstance(root, mcp_types.Root):
            out.append(root)
        elif isinstance(root, str):
            if not root.startswith("file://"):
                raise ValueError(f"a root must be a file:// URI, got {root!r}")
            out.append(mcp_types.Root(uri=root))  # type: ignore[arg-type]  # pydantic converts the string
        else:
            raise TypeError(f"a root must be a Root or a file:// URI string, got {type(root).__name__}")
    return tuple(out)


def _check_roots_source(roots: RootsSource | None) -> RootsSource | None:
    if roots is None or callable(roots):
        return roots
    return to_roots(roots)


def _check_handler(name: str, handler: Callable[..., Any] | None) -> None:
    if handler is not None and not callable(handler):
        raise TypeError(f"{name} must be an async function (server_id, params) -> result, got {handler!r}")


# ---------------------------------------------------------------------- elicitation content


def complete_elicitation(schema: Mapping[str, Any], content: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill the schema's defaults into missing fields (SEP-1034), then validate (SEP-1330 enums).

    Args:
        schema: The ``requestedSchema`` of a form-mode elicitation (a flat object schema).
        content: What the host answered.

    Returns:
        The content to send: the answer plus every default it left out.

    Raises:
        ValueError: The content does not match the schema; the message names the field and
            the problem (``field 'age': 'x' is not of type 'integer'``).
    """
    filled = dict(content or {})
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, prop in properties.items():
            if name not in filled and isinstance(prop, Mapping) and "default" in prop:
                filled[name] = prop["default"]
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(filled), key=lambda e: list(e.absolute_path))
    if errors:
        problems = []
        for error in errors[:5]:
            where = f"field {error.absolute_path[0]!r}" if error.absolute_path else "the answer"
            problems.append(f"{where}: {error.message}")
        raise ValueError("; ".join(problems))
    return filled


# ---------------------------------------------------------------------- 2026-07-28: InputRequiredResult

INPUT_REQUIRED_MAX_ROUNDS: Final = 10
"""Retry rounds before giving up on a server that keeps asking (the SDK's and other SDKs' default)."""

_R = TypeVar("_R")


async def fulfil_input_required(
    session: ClientSession,
    first: _R | mcp_types.InputRequiredResult,
    retry: Callable[[mcp_types.InputResponses | None, str | None], Awaitable[_R | mcp_types.InputRequiredResult]],
) -> _R:
    """Resolve an ``InputRequiredResult`` (SEP-2322) through the same host callbacks as a server request.

    Each embedded input request (sampling, elicitation, roots) is dispatched through the
    session's callback table, so defaults, validation, timeouts and refusals are exactly
    those of the handshake revisions; the original request is retried with the answers and
    the server's ``request_state`` until a final result comes (at most
    :data:`INPUT_REQUIRED_MAX_ROUNDS` rounds). A result that is not an
    ``InputRequiredResult`` passes through untouched.

    Raises:
        MCPError: A callback refused (its error, as the server would have received it).
        RuntimeError: The server asked for more than the allowed rounds.
    """
    if not isinstance(first, mcp_types.InputRequiredResult):
        return first

    async def dispatch(key: str, request: mcp_types.InputRequest) -> mcp_types.InputResponse | mcp_types.ErrorData:
        return await _dispatch(session, key, request)

    result: _R = await run_input_required_driver(
        first, dispatch=dispatch, retry=retry, max_rounds=INPUT_REQUIRED_MAX_ROUNDS
    )
    return result


async def _dispatch(
    session: ClientSession, key: str, request: mcp_types.InputRequest
) -> mcp_types.InputResponse | mcp_types.ErrorData:
    """One embedded input request through the session's callback table, as a server request would go."""
    meta = request.params.meta if request.params is not None else None
    ctx = ClientRequestContext(session=session, request_id=key, meta=meta)
    return await session.dispatch_input_request(ctx, request)


async def answer_input_requests(
    session: ClientSession, requests: Mapping[str, mcp_types.InputRequest]
) -> dict[str, Any]:
    """Answer a task's input requests (2026-07-28, the tasks extension) through the host callbacks, concurrently.

    The same callbacks, bounds and refusals as for any server request and for
    :func:`fulfil_input_required`; the answers come back keyed as asked, as the JSON that
    ``tasks/update`` carries in ``inputResponses``.

    Raises:
        MCPError: A callback refused (the first refusal; the other answers are abandoned).
    """
    answers: dict[str, Any] = {}
    refused: list[mcp_types.ErrorData] = []

    async def one(key: str, request: mcp_types.InputRequest, scope: trio.CancelScope) -> None:
        answer = await _dispatch(session, key, request)
        if isinstance(answer, mcp_types.ErrorData):
            refused.append(answer)
            scope.cancel()  # the first refusal ends the round: nobody waits on a slow sibling
            return
        answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)

    async with trio.open_nursery() as nursery:
        for key, request in requests.items():
            nursery.start_soon(one, key, request, nursery.cancel_scope)
    if refused:
        raise MCPError.from_error_data(refused[0])
    return answers


# ---------------------------------------------------------------------- the host's callbacks


def _error(code: int, message: str) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=code, message=message)


@attrs.define(eq=False)
class HostCallbacks:
    """The host's answers to servers' requests, shared by every connection of a runtime.

    One object per runtime, written only through :meth:`set_roots` (by the facade); the
    connections read it when they connect and when a server asks.

    Attributes:
        sampling: The sampling handler, or ``None`` (sampling not offered).
        elicitation: The elicitation handler, or ``None`` (elicitation not offered).
        roots: The roots (a list or a callable), or ``None`` (roots not offered).
        timeout: Seconds any one handler may take.
    """

    sampling: SamplingHandler | None = None
    elicitation: ElicitationHandler | None = None
    roots: RootsSource | None = attrs.field(default=None, converter=_check_roots_source)
    timeout: float = DEFAULT_CALLBACK_TIMEOUT

    def __attrs_post_init__(self) -> None:
        _check_handler("sampling_handler", self.sampling)
        _check_handler("elicitation_handler", self.elicitation)
        if not self.timeout > 0:
            raise ValueError(f"callback_timeout must be > 0 seconds, got {self.timeout!r}")

    def set_roots(self, roots: RootsSource | None) -> None:
        """Replace the roots (a list, a callable, or ``None`` to offer none from now on)."""
        self.roots = _check_roots_source(roots)

    # ------------------------------------------------------------------ per connection

    def offers(self, settings: ConnectionSettings) -> frozenset[str]:
        """What this host offers the server of ``settings``: host handler present and record allowing."""
        offered = set()
        if self.sampling is not None and settings.allow_sampling:
            offered.add("sampling")
        if self.elicitation is not None and settings.allow_elicitation:
            offered.add("elicitation")
        if self.roots is not None and settings.allow_roots:
            offered.add("roots")
        return frozenset(offered)

    def session_kwargs(self, settings: ConnectionSettings) -> dict[str, Any]:
        """The ``ClientSession`` arguments for one connection: only the callbacks offered.

        The SDK declares a capability exactly when its callback is given, so leaving one out
        is what keeps an unoffered capability undeclared.
        """
        offered = self.offers(settings)
        server_id, label = settings.server_id, settings.server_name
        kwargs: dict[str, Any] = {}
        if "sampling" in offered:

            async def sampling(
                ctx: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
            ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | mcp_types.ErrorData:
                REQUEST_KEY.set(ctx.request_id)
                return await self.answer_sampling(server_id, label, params)

            kwargs["sampling_callback"] = sampling
            kwargs["sampling_capabilities"] = mcp_types.SamplingCapability(tools=mcp_types.SamplingToolsCapability())
        if "elicitation" in offered:

            async def elicitation(
                ctx: ClientRequestContext, params: mcp_types.ElicitRequestParams
            ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
                REQUEST_KEY.set(ctx.request_id)
                return await self.answer_elicitation(server_id, label, params)

            kwargs["elicitation_callback"] = elicitation
        if "roots" in offered:

            async def list_roots(ctx: ClientRequestContext) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
                REQUEST_KEY.set(ctx.request_id)
                return await self.answer_roots(server_id, label)

            kwargs["list_roots_callback"] = list_roots
        return kwargs

    # ------------------------------------------------------------------ answers

    async def answer_sampling(
        self, server_id: str, label: str, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | mcp_types.ErrorData:
        """Run the sampling handler for a server, bounded; every failure is an ``ErrorData`` for the server."""
        handler = self.sampling
        if handler is None:
            return _error(mcp_types.INVALID_REQUEST, "sampling is not offered by this client")
        with trio.move_on_after(self.timeout):
            try:
                result = await handler(server_id, params)
            except MCPError as exc:
                return exc.error  # the host chose this answer: sent as is
            except Exception:
                logger.exception("server %s: the host's sampling handler raised", label)
                return _error(mcp_types.INTERNAL_ERROR, "the client's sampling handler failed")
            if not isinstance(result, mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools):
                logger.error(
                    "server %s: the sampling handler returned %s, not a CreateMessageResult",
                    label,
                    type(result).__name__,
                )
                return _error(mcp_types.INTERNAL_ERROR, "the client's sampling handler returned no message")
            return result
        logger.warning("server %s: the sampling handler did not answer within %gs", label, self.timeout)
        return _error(
            mcp_types.REQUEST_TIMEOUT, f"the client's sampling handler did not answer within {self.timeout:g}s"
        )

    async def answer_elicitation(
        self, server_id: str, label: str, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """Run the elicitation handler, bounded; fill defaults and validate an accepted form before sending."""
        handler = self.elicitation
        if handler is None:
            return _error(mcp_types.INVALID_REQUEST, "elicitation is not offered by this client")
        result: mcp_types.ElicitResult | None = None
        with trio.move_on_after(self.timeout):
            try:
                result = await handler(server_id, params)
            except MCPError as exc:
                return exc.error  # the host chose this answer: sent as is
            except Exception:
                logger.exception("server %s: the host's elicitation handler raised", label)
                return _error(mcp_types.INTERNAL_ERROR, "the client's elicitation handler failed")
        if result is None:
            logger.warning("server %s: the elicitation handler did not answer within %gs: cancel", label, self.timeout)
            return mcp_types.ElicitResult(action="cancel")
        if not isinstance(result, mcp_types.ElicitResult):
            logger.error(
                "server %s: the elicitation handler returned %s, not an ElicitResult", label, type(result).__name__
            )
            return _error(mcp_types.INTERNAL_ERROR, "the client's elicitation handler returned no ElicitResult")
        if result.action != "accept":
            return mcp_types.ElicitResult(action=result.action, _meta=result.meta)
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            return mcp_types.ElicitResult(action="accept", _meta=result.meta)  # URL mode carries no content
        try:
            content = complete_elicitation(params.requested_schema, result.content)
        except ValueError as exc:
            logger.error("server %s: the host's elicitation answer does not match the requested schema: %s", label, exc)
            return _error(mcp_types.INVALID_PARAMS, f"the client's answer does not match the requested schema: {exc}")
        return mcp_types.ElicitResult(action="accept", content=content, _meta=result.meta)

    async def answer_roots(self, server_id: str, label: str) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        """The current roots for a server (calling the roots callable, bounded)."""
        source = self.roots
        if source is None:
            return mcp_types.ListRootsResult(roots=[])  # declared at connect, withdrawn since by set_roots(None)
        if not callable(source):
            return mcp_types.ListRootsResult(roots=list(to_roots(source)))
        with trio.move_on_after(self.timeout):
            try:
                return mcp_types.ListRootsResult(roots=list(to_roots(await source(server_id))))
            except MCPError as exc:
                return exc.error  # the host chose this answer: sent as is
            except Exception:
                logger.exception("server %s: the host's roots callable raised", label)
                return _error(mcp_types.INTERNAL_ERROR, "the client's roots callable failed")
        logger.warning("server %s: the roots callable did not answer within %gs", label, self.timeout)
        return _error(mcp_types.REQUEST_TIMEOUT, f"the client's roots callable did not answer within {self.timeout:g}s")
