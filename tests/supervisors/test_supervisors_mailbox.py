"""Mailboxes: bounded tell with backpressure, ask/reply, and callers that give up."""

from __future__ import annotations

import math

import attrs
import pytest
import trio
import trio.testing
from testkit import counting_steps

from supervisors import Mailbox, MailboxClosed, NoReply, Reply, open_mailbox


@attrs.frozen(kw_only=True)
class Note:
    text: str


@attrs.frozen(kw_only=True)
class Add:
    a: int
    b: int
    reply: Reply[int]


@attrs.frozen(kw_only=True)
class Slow:
    release: trio.Event
    reply: Reply[str]


@attrs.frozen(kw_only=True)
class Explode:
    reply: Reply[int]


@attrs.frozen(kw_only=True)
class Ignore:
    reply: Reply[int]


Message = Note | Add | Slow | Explode | Ignore


async def calculator(receive: trio.MemoryReceiveChannel[Message], log: list[object]) -> None:
    """A small actor: answers Add, fails Explode, drops Ignore, answers Slow when released."""
    async with receive:
        async for message in receive:
            match message:
                case Note(text=text):
                    log.append(text)
                case Add(a=a, b=b, reply=reply):
                    reply.send(a + b)
                case Explode(reply=reply):
                    reply.fail(ValueError("exploded"))
                case Ignore(reply=reply):
                    reply.close()
                case Slow(release=release, reply=reply):
                    await release.wait()
                    log.append(("wanted", reply.wanted))
                    reply.send("late")  # the caller is gone: this must not raise
                    log.append("survived")
                case _:
                    raise TypeError(f"unknown message {message!r}")
            del message  # replies are dropped as soon as they are handled


@pytest.mark.parametrize(
    ("capacity", "error", "words"),
    [
        (0, ValueError, "capacity must be >= 1"),
        (-3, ValueError, "capacity must be >= 1"),
        (math.inf, TypeError, "capacity must be an int"),
        (2.0, TypeError, "capacity must be an int"),
        (True, TypeError, "capacity must be an int"),
    ],
)
def test_capacity_must_be_a_positive_int(capacity: object, error: type, words: str) -> None:
    """A mailbox is never unbuffered and never unbounded."""
    with pytest.raises(error, match=words):
        open_mailbox(capacity)  # type: ignore[arg-type]


async def test_tell_delivers_in_order_and_subscripted_form_works() -> None:
    """tell/tell_nowait deliver messages in order; open_mailbox[T](n) returns a Mailbox and a channel."""
    send, receive = open_mailbox[Note](4)
    assert isinstance(send, Mailbox)
    assert isinstance(receive, trio.MemoryReceiveChannel)
    await send.tell(Note(text="a"))
    send.tell_nowait(Note(text="b"))
    assert [receive.receive_nowait().text, receive.receive_nowait().text] == ["a", "b"]


async def test_full_mailbox_applies_backpressure() -> None:
    """With capacity 2 a third tell waits until the actor takes a message; tell_nowait raises WouldBlock."""
    send, receive = open_mailbox[Note](capacity=2)
    send.tell_nowait(Note(text="1"))
    send.tell_nowait(Note(text="2"))
    with pytest.raises(trio.WouldBlock):
        send.tell_nowait(Note(text="3"))
    delivered = trio.Event()

    async def third() -> None:
        await send.tell(Note(text="3"))
        delivered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(third)
        await trio.testing.wait_all_tasks_blocked()
        assert not delivered.is_set()
        assert send.statistics().tasks_waiting_send == 1
        assert receive.receive_nowait().text == "1"
    assert delivered.is_set()
    assert [receive.receive_nowait().text, receive.receive_nowait().text] == ["2", "3"]


async def test_ask_returns_the_answer_and_raises_the_actors_failure() -> None:
    """ask returns what the actor sent; an actor's fail(exc) raises exc in the caller only."""
    send, receive = open_mailbox[Message](8)
    log: list[object] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(calculator, receive, log)
        assert await send.ask(lambda reply: Add(a=2, b=3, reply=reply)) == 5
        with pytest.raises(ValueError, match="exploded"):
            await send.ask(lambda reply: Explode(reply=reply))
        assert await send.ask(lambda reply: Add(a=1, b=1, reply=reply)) == 2
        send.close()


async def test_caller_that_gives_up_never_crashes_the_actor(autojump_clock: trio.abc.Clock) -> None:
    """A caller timing out before the reply leaves the actor running; its late reply is dropped."""
    send, receive = open_mailbox[Message](8)
    log: list[object] = []
    release = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(calculator, receive, log)
        with trio.move_on_after(1.0) as scope:
            await send.ask(lambda reply: Slow(release=release, reply=reply))
        assert scope.cancelled_caught
        assert trio.current_time() == 1.0
        release.set()
        assert await send.ask(lambda reply: Add(a=20, b=22, reply=reply)) == 42
        assert log == [("wanted", False), "survived"]
        send.close()


async def test_ask_cancelled_while_the_mailbox_is_full_sends_nothing(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An ask cancelled while waiting for room never delivers its message."""
    send, receive = open_mailbox[Message](1)
    send.tell_nowait(Note(text="filler"))
    with trio.move_on_after(2.0):
        await send.ask(lambda reply: Add(a=1, b=2, reply=reply))
    assert trio.current_time() == 2.0
    assert receive.receive_nowait() == Note(text="filler")
    with pytest.raises(trio.WouldBlock):
        receive.receive_nowait()


async def test_reply_closed_without_answer_raises_no_reply() -> None:
    """An actor that closes the reply makes ask raise NoReply."""
    send, receive = open_mailbox[Message](8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(calculator, receive, [])
        with pytest.raises(NoReply):
            await send.ask(lambda reply: Ignore(reply=reply))
        send.close()


async def test_reply_dropped_without_answer_raises_no_reply(autojump_clock: trio.abc.Clock) -> None:
    """An actor that loses the request (drops every reference to it) makes ask raise NoReply."""
    send, receive = open_mailbox[Message](8)

    async def forgetful() -> None:
        message = await receive.receive()
        assert isinstance(message, Add)
        del message  # plain reference counting frees the reply here

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forgetful)
        with pytest.raises(NoReply), trio.fail_after(10):  # a hang fails, in virtual time
            await send.ask(lambda reply: Add(a=1, b=2, reply=reply))
        assert trio.current_time() == 0.0


async def test_actor_stopping_with_queued_requests_answers_them_no_reply(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Requests still queued when the actor closes its mailbox end in NoReply, not a hang."""
    send, receive = open_mailbox[Message](8)
    outcomes: list[str] = []

    async def asker(a: int) -> None:
        try:
            with trio.fail_after(10):  # a hang fails, in virtual time
                await send.ask(lambda reply: Add(a=a, b=0, reply=reply))
        except NoReply:
            outcomes.append(f"no reply at {trio.current_time()}")

    async with trio.open_nursery() as nursery:
        for a in range(3):
            nursery.start_soon(asker, a)
        await trio.testing.wait_all_tasks_blocked()
        assert receive.statistics().current_buffer_used == 3
        receive.close()
    assert outcomes == ["no reply at 0.0"] * 3


async def test_second_answer_is_ignored() -> None:
    """Only the first answer counts; later send/fail/close calls neither raise nor change it."""
    send, receive = open_mailbox[Message](8)

    async def double_answer() -> None:
        message = await receive.receive()
        assert isinstance(message, Add)
        assert not message.reply.answered
        message.reply.send(1)
        assert message.reply.answered
        message.reply.send(2)
        message.reply.fail(RuntimeError("late"))
        message.reply.close()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(double_answer)
        assert await send.ask(lambda reply: Add(a=0, b=0, reply=reply)) == 1


async def test_mailbox_closed_when_the_actor_is_gone() -> None:
    """tell, tell_nowait and ask raise MailboxClosed once the actor closed its receive end."""
    send, receive = open_mailbox[Message](8)
    receive.close()
    with pytest.raises(MailboxClosed, match="actor has stopped"):
        await send.tell(Note(text="x"))
    with pytest.raises(MailboxClosed):
        send.tell_nowait(Note(text="x"))
    with pytest.raises(MailboxClosed):
        await send.ask(lambda reply: Add(a=1, b=1, reply=reply))


async def test_blocked_tell_gets_mailbox_closed_when_the_actor_stops() -> None:
    """A sender waiting on a full mailbox is woken with MailboxClosed when the actor goes away."""
    send, receive = open_mailbox[Note](1)
    send.tell_nowait(Note(text="filler"))
    errors: list[BaseException] = []

    async def blocked() -> None:
        try:
            await send.tell(Note(text="x"))
        except MailboxClosed as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(blocked)
        await trio.testing.wait_all_tasks_blocked()
        receive.close()
    assert len(errors) == 1


async def test_closed_handle_raises_mailbox_closed() -> None:
    """Using or cloning a handle after closing it raises MailboxClosed, naming the handle."""
    send, _receive = open_mailbox[Note](8)
    other = send.clone()
    await send.aclose()
    with pytest.raises(MailboxClosed, match="handle is closed"):
        await send.tell(Note(text="x"))
    with pytest.raises(MailboxClosed):
        send.clone()
    await other.tell(Note(text="still open"))
    other.close()


async def test_closing_every_clone_ends_the_actor_loop() -> None:
    """The actor's async for ends only after the last clone is closed (its clean stop)."""
    send, receive = open_mailbox[Message](8)
    log: list[object] = []
    ended = trio.Event()

    async def actor() -> None:
        await calculator(receive, log)
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor)
        clone = send.clone()
        with send:
            await send.tell(Note(text="from original"))
        await trio.testing.wait_all_tasks_blocked()
        assert not ended.is_set()
        async with clone:
            await clone.tell(Note(text="from clone"))
    assert ended.is_set()
    assert log == ["from original", "from clone"]


async def test_actor_crashing_mid_request_leaves_no_caller_waiting(autojump_clock: trio.abc.Clock) -> None:
    """When an actor crashes, the request it was handling and those still queued all end in NoReply at once."""
    send, receive = open_mailbox[Message](8)
    outcomes: list[object] = []
    kept: list[BaseException] = []  # the crash's traceback stays alive, as a supervisor's log would keep it

    async def crashing() -> None:
        async with receive:  # closing the receive end drops (and so answers) every queued request
            async for message in receive:
                assert isinstance(message, Add)
                with message.reply:  # leaving the block unanswered answers NoReply, whatever was raised
                    raise ValueError(f"bug while adding {message.a}")

    async def caller(a: int) -> None:
        try:
            with trio.fail_after(10):  # a hang fails, in virtual time
                outcomes.append(await send.ask(lambda reply: Add(a=a, b=0, reply=reply)))
        except NoReply:
            outcomes.append(("no reply", trio.current_time()))

    async with trio.open_nursery() as callers:
        for a in range(3):
            callers.start_soon(caller, a)
        await trio.testing.wait_all_tasks_blocked()
        try:
            async with trio.open_nursery() as actor:
                actor.start_soon(crashing)
        except* ValueError as group:
            kept.append(group)
    assert outcomes == [("no reply", 0.0)] * 3
    assert kept
    with pytest.raises(MailboxClosed):
        await send.ask(lambda reply: Add(a=9, b=0, reply=reply))


async def test_reply_block_that_answers_keeps_the_answer() -> None:
    """A request answered inside ``with reply:`` keeps its answer; the block's exit changes nothing."""
    send, receive = open_mailbox[Message](8)

    async def actor() -> None:
        message = await receive.receive()
        assert isinstance(message, Add)
        with message.reply as reply:
            reply.send(message.a + message.b)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor)
        assert await send.ask(lambda reply: Add(a=40, b=2, reply=reply)) == 42


async def test_ask_delivers_at_once_and_runs_again_only_for_the_answer() -> None:
    """With room in the mailbox an ask costs its caller two steps: deliver and wait, then the answer.

    Every actor round trip (a connection's first listing takes three) is an ask: a step
    spent only to deliver would be a scheduler pass on each (docs/performance.md).
    """
    send, receive = open_mailbox[Message](8)
    log: list[object] = []
    answers: list[int] = []

    async def caller() -> None:
        answers.append(await send.ask(lambda reply: Add(a=2, b=3, reply=reply)))

    with counting_steps("caller") as steps:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(calculator, receive, log)
            nursery.start_soon(caller, name="caller")
            await trio.testing.wait_all_tasks_blocked()
            send.close()
    assert answers == [5]
    assert steps.count == 2


async def test_ask_that_waited_for_room_keeps_an_answer_given_before_it_ran_again() -> None:
    """The actor may take a waiting ask's request and answer it before the caller runs again."""
    send, receive = open_mailbox[Message](1)
    send.tell_nowait(Note(text="filler"))
    answers: list[int] = []

    async def caller() -> None:
        answers.append(await send.ask(lambda reply: Add(a=40, b=2, reply=reply)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller, name="caller")
        await trio.testing.wait_all_tasks_blocked()  # the caller waits for room
        assert receive.receive_nowait() == Note(text="filler")  # its request moves into the mailbox
        request = receive.receive_nowait()
        assert isinstance(request, Add)
        request.reply.send(request.a + request.b)  # answered before the caller ran again
        del request
    assert answers == [42]
