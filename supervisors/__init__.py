"""OTP-style supervision and mailboxes for trio.

A small, generic package (it knows nothing of MCP) that brings Erlang/OTP's supervisor
semantics to trio: child specs with restart types and shutdown specs, the
``one_for_one`` / ``one_for_all`` / ``rest_for_one`` strategies, restart intensity per
supervisor, exponential backoff with jitter between restarts, dynamic children, and
bounded mailboxes with ``tell`` and ``ask`` for the actors that run under them.

Example::

    async def counter(*, task_status=trio.TASK_STATUS_IGNORED):
        send, receive = open_mailbox[Get](16)
        task_status.started(send)
        async with receive:
            count = 0
            async for message in receive:
                count += 1
                message.reply.send(count)

    async with open_supervisor(SupervisorSpec(), [ChildSpec(id="counter", start=counter)]) as sup:
        mailbox = sup.child_value("counter")
        assert await mailbox.ask(lambda reply: Get(reply=reply)) == 1
"""

import logging as _logging

from ._errors import ChildStartFailed as ChildStartFailed
from ._errors import MailboxClosed as MailboxClosed
from ._errors import NoReply as NoReply
from ._errors import RestartIntensityExceeded as RestartIntensityExceeded
from ._errors import SupervisionError as SupervisionError
from ._mailbox import Mailbox as Mailbox
from ._mailbox import Reply as Reply
from ._mailbox import open_mailbox as open_mailbox
from ._policy import Backoff as Backoff
from ._policy import ChildKind as ChildKind
from ._policy import ChildSpec as ChildSpec
from ._policy import Intensity as Intensity
from ._policy import Restart as Restart
from ._policy import Shutdown as Shutdown
from ._policy import Strategy as Strategy
from ._policy import SupervisorSpec as SupervisorSpec
from ._policy import add_restart as add_restart
from ._policy import backoff_delay as backoff_delay
from ._policy import should_restart as should_restart
from ._supervisor import ChildInfo as ChildInfo
from ._supervisor import Supervisor as Supervisor
from ._supervisor import SupervisorStatistics as SupervisorStatistics
from ._supervisor import open_supervisor as open_supervisor
from ._supervisor import raise_single as raise_single
from ._supervisor import run_supervisor as run_supervisor

__all__ = [
    "Backoff",
    "ChildInfo",
    "ChildKind",
    "ChildSpec",
    "ChildStartFailed",
    "Intensity",
    "Mailbox",
    "MailboxClosed",
    "NoReply",
    "Reply",
    "Restart",
    "RestartIntensityExceeded",
    "Shutdown",
    "Strategy",
    "SupervisionError",
    "Supervisor",
    "SupervisorSpec",
    "SupervisorStatistics",
    "add_restart",
    "backoff_delay",
    "open_mailbox",
    "open_supervisor",
    "raise_single",
    "run_supervisor",
    "should_restart",
]

# A library never writes to an unconfigured host's stderr (logging's last resort).
_logging.getLogger(__name__).addHandler(_logging.NullHandler())
