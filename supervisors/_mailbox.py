"""Bounded mailboxes with fire-and-forget and request/reply on top of trio channels.

An actor is a task that owns the receive end of a mailbox and reads it with
``async for``. Everyone else holds a :class:`Mailbox` (the send end) and either
``tell``\\s it a message or ``ask``\\s it one that carries a one-shot :class:`Reply`.

Two rules keep callers and actors from hurting each other:

* The mailbox is always bounded (capacity >= 1, never infinite), so a flood of
  messages turns into backpressure on the senders instead of unbounded memory.
* A reply takes exactly one answer and answering never blocks: the answer wakes the
  waiting caller, and answering a caller that has given up (cancelled, timed out) is
  silently ignored instead of crashing the actor.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Final, Generic, TypeVar, final

import attrs
import trio

from ._errors import MailboxClosed, NoReply

__all__ = ["Mailbox", "Reply", "open_mailbox"]

T = TypeVar("T")
R = TypeVar("R")


@attrs.frozen
class _Value(Generic[R]):
    value: R


@attrs.frozen
class _Failure:
    error: Exception


_Answer = _Value[R] | _Failure
_NO_ANSWER: Final = object()
"""What a request's slot holds when the actor dropped it: the caller's ``ask`` raises NoReply."""


class _AnswerSlot:
    """The caller's side of one request: where its one answer lands and who waits for it.

    Why not a one-slot memory channel (as before): an ``ask`` is on every actor round trip,
    and a channel pair costs about as much as the rest of the round trip's bookkeeping.
    Only the trio thread touches a slot (a reply's finalizer hands its answer over with
    ``run_sync_soon``).
    """

    __slots__ = ("answer", "gone", "task")

    def __init__(self) -> None:
        self.answer: object = None
        self.task: trio.lowlevel.Task | None = None
        self.gone = False
        """True once the caller has its answer or gave up: later answers are dropped."""

    def deliver(self, answer: object) -> None:
        """Keep the first answer and wake the waiting caller (a no-op once it has one or gave up)."""
        if self.gone or self.answer is not None:
            return
        self.answer = answer
        task = self.task
        if task is not None:  # else the caller is still delivering its request: it finds the answer
            self.task = None
            self.gone = True
            trio.lowlevel.reschedule(task)

    async def wait(self) -> object:
        """The answer: at once if it came while the caller waited for room, else when it comes."""
        if self.answer is None:  # (not None: answered while the caller waited for room in the mailbox)
            self.task = trio.lowlevel.current_task()

            def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
                self.task = None
                self.gone = True
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        return self.answer


@final
class Reply(Generic[R]):
    """The one-shot answer channel of a request sent with :meth:`Mailbox.ask`.

    The actor answers once with :meth:`send` or :meth:`fail`; both never block and
    never raise, and every answer after the first is ignored. If the actor never
    answers — it calls :meth:`close`, or drops the last reference to the reply, for
    example because it stopped with the request still queued — the caller's ``ask``
    raises :class:`NoReply` instead of waiting forever.

    Replies are created by :meth:`Mailbox.ask`; do not construct them yourself.
    """

    __slots__ = ("_done", "_slot", "_token")

    def __init__(self, slot: _AnswerSlot, token: trio.lowlevel.TrioToken) -> None:
        self._slot = slot
        self._token = token
        self._done = False

    def send(self, value: R) -> None:
        """Answer the request with a value; ``ask`` returns it.

        Args:
            value: The result for the caller.
        """
        self._answer(_Value(value))

    def fail(self, error: Exception) -> None:
        """Answer the request with an error; ``ask`` raises it in the caller.

        Args:
            error: The exception the caller's ``ask`` raises.
        """
        self._answer(_Failure(error))

    def close(self) -> None:
        """Drop the request without an answer; the caller's ``ask`` raises NoReply."""
        if not self._done:
            self._done = True
            self._slot.deliver(_NO_ANSWER)

    @property
    def answered(self) -> bool:
        """True once the reply was answered or closed; further answers are ignored."""
        return self._done

    @property
    def wanted(self) -> bool:
        """True while the caller still waits for the answer.

        False once the caller gave up (cancelled or timed out) or the reply was
        answered; an actor may use it to skip work nobody will see.
        """
        return not self._done and not self._slot.gone

    def _answer(self, answer: _Answer[R]) -> None:
        # Never raises: a caller that gave up makes this a no-op, and an actor must never
        # crash because of that.
        if not self._done:
            self._done = True
            self._slot.deliver(answer)

    def __del__(self) -> None:
        # A reply dropped unanswered (the actor lost the message, or its mailbox was
        # closed with the request still buffered) must wake the caller with NoReply.
        # Finalizers may run in any thread (cyclic garbage collection), so the answer is
        # handed to the trio loop, which run_sync_soon allows from anywhere.
        try:
            if self._done:
                return
            slot = self._slot
            token = self._token
        except AttributeError:  # __init__ did not complete
            return
        try:
            token.run_sync_soon(slot.deliver, _NO_ANSWER)
        except Exception:  # the run is over: nobody is waiting any more
            pass

    def __enter__(self) -> Reply[R]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Leaving ``with reply:`` unanswered drops the request: ``ask`` raises NoReply at once.

        An actor that handles each request inside ``with message.reply:`` never leaves a
        caller waiting when it crashes mid-request: a traceback may keep the reply alive
        (so its finalizer would never run), but the block's exit closes it anyway.
        """
        if not self._done:
            self.close()

    def __repr__(self) -> str:
        return f"<Reply {'answered' if self.answered else 'pending'}>"


@final
class Mailbox(Generic[T]):
    """The send end of an actor's bounded mailbox.

    Every clone must be closed for the actor's ``async for`` over its receive channel
    to end; that is an actor's clean stop. A mailbox is also a (sync or async) context
    manager that closes it.

    Created by :func:`open_mailbox`.
    """

    __slots__ = ("_send",)

    def __init__(self, send: trio.MemorySendChannel[T]) -> None:
        self._send = send

    async def tell(self, message: T) -> None:
        """Send a message, waiting while the mailbox is full.

        Cancellation: if cancelled, the message was not delivered.

        Args:
            message: The message.

        Raises:
            MailboxClosed: The actor closed its receive end, or this handle is closed.
        """
        try:
            await self._send.send(message)
        except trio.BrokenResourceError:
            raise MailboxClosed(_ACTOR_GONE) from None
        except trio.ClosedResourceError:
            raise MailboxClosed(_HANDLE_CLOSED) from None

    def tell_nowait(self, message: T) -> None:
        """Send a message if there is room, without waiting.

        Args:
            message: The message.

        Raises:
            trio.WouldBlock: The mailbox is full.
            MailboxClosed: The actor closed its receive end, or this handle is closed.
        """
        try:
            self._send.send_nowait(message)
        except trio.BrokenResourceError:
            raise MailboxClosed(_ACTOR_GONE) from None
        except trio.ClosedResourceError:
            raise MailboxClosed(_HANDLE_CLOSED) from None

    async def ask(self, build: Callable[[Reply[R]], T]) -> R:
        """Send a request and wait for its answer.

        ``build`` gets a fresh :class:`Reply` and returns the message that carries it.
        There is no timeout argument: wrap the call in ``trio.fail_after`` or
        ``trio.move_on_after``. Cancelling ``ask`` (before or after the message was
        delivered) never affects the actor; its late answer is dropped.

        Args:
            build: Makes the request message around the reply, e.g.
                ``lambda reply: Get(key="k", reply=reply)``.

        Returns:
            The value the actor passed to :meth:`Reply.send`.

        Raises:
            MailboxClosed: The message could not be delivered.
            NoReply: The actor dropped the request without answering.
            Exception: Whatever the actor passed to :meth:`Reply.fail`.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        slot = _AnswerSlot()
        reply: Reply[R] = Reply(slot, trio.lowlevel.current_trio_token())
        message = build(reply)
        del reply  # the message is the reply's only owner: dropping it means "no answer"
        try:
            try:
                # Delivered at once when there is room: no scheduling pass before the wait
                # (the actor cannot answer before this task blocks, so nothing is missed).
                self._send.send_nowait(message)
            except trio.WouldBlock:
                await self.tell(message)  # waits for room; cancelled there, nothing is delivered
            except trio.BrokenResourceError:
                raise MailboxClosed(_ACTOR_GONE) from None
            except trio.ClosedResourceError:
                raise MailboxClosed(_HANDLE_CLOSED) from None
            del message
            answer = await slot.wait()
        finally:
            slot.gone = True
        if answer is _NO_ANSWER:
            raise NoReply("the actor dropped the request without replying")
        if isinstance(answer, _Failure):
            raise answer.error
        assert isinstance(answer, _Value)
        return answer.value  # type: ignore[no-any-return]

    def clone(self) -> Mailbox[T]:
        """Return another handle to the same mailbox, closed independently.

        Raises:
            MailboxClosed: This handle is already closed.
        """
        try:
            return Mailbox(self._send.clone())
        except trio.ClosedResourceError:
            raise MailboxClosed(_HANDLE_CLOSED) from None

    def close(self) -> None:
        """Close this handle; once every clone is closed the actor's loop ends."""
        self._send.close()

    async def aclose(self) -> None:
        """Close this handle (a checkpoint); see :meth:`close`."""
        await self._send.aclose()

    def statistics(self) -> trio.MemoryChannelStatistics:
        """Return a snapshot of the mailbox: buffer use, open handles, waiting tasks."""
        return self._send.statistics()

    def __enter__(self) -> Mailbox[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Mailbox[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        stats = self._send.statistics()
        return f"<Mailbox {stats.current_buffer_used}/{stats.max_buffer_size} queued>"


_ACTOR_GONE = "the actor's mailbox is closed: the actor has stopped; restart it and retry"
_HANDLE_CLOSED = "this mailbox handle is closed; send through an open clone"


# Written as a class, like trio.open_memory_channel, so that callers can say
# ``open_mailbox[Message](64)`` and get typed ends.
@final
class open_mailbox(tuple["Mailbox[T]", "trio.MemoryReceiveChannel[T]"]):
    """Open a bounded mailbox: ``send, receive = open_mailbox[Msg](capacity)``.

    The actor owns ``receive`` (a plain :class:`trio.MemoryReceiveChannel`) and reads it
    with ``async for``; closing it stops delivery and makes pending ``ask`` calls raise
    :class:`NoReply`. Everyone else gets (clones of) ``send``.

    Args:
        capacity: Messages buffered before senders wait; an int >= 1. Zero would make
            every ``tell`` a rendezvous with the actor and infinity would hide overload,
            so neither is allowed.

    Returns:
        The pair ``(Mailbox[T], trio.MemoryReceiveChannel[T])``.

    Raises:
        TypeError: ``capacity`` is not an int (``math.inf`` included).
        ValueError: ``capacity`` < 1.
    """

    def __new__(  # type: ignore[misc]  # returns a plain tuple, like trio's
        cls, capacity: int = 64
    ) -> tuple[Mailbox[T], trio.MemoryReceiveChannel[T]]:
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(f"capacity must be an int, not {capacity!r}")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity!r}")
        send, receive = trio.open_memory_channel[T](capacity)
        return Mailbox(send), receive

    def __init__(self, capacity: int = 64) -> None: ...
