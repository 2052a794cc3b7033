"""Errors raised by the supervisors package.

Every error here derives from :class:`SupervisionError`, so a caller can catch the
package's failures in one place. Messages are short, lowercase, name the supervisor and
the child involved, and say what to do next. They never include a child's value or the
arguments of its start function (those may hold secrets); only the id and the type and
message of a child's own exception.
"""

from __future__ import annotations

__all__ = [
    "ChildStartFailed",
    "MailboxClosed",
    "NoReply",
    "RestartIntensityExceeded",
    "SupervisionError",
]


class SupervisionError(Exception):
    """Root of the errors this package raises on purpose."""


class ChildStartFailed(SupervisionError):
    """A child's start function failed before it called ``task_status.started()``.

    The start function raised, returned, was stopped while starting, or did not call
    ``started()`` within its ``start_timeout``. ``__cause__`` is the underlying error
    (for a timeout, a :class:`TimeoutError`).

    Attributes:
        supervisor: The supervisor's name.
        child_id: The id of the child that failed to start.
    """

    supervisor: str
    child_id: str

    def __init__(self, message: str, *, supervisor: str, child_id: str) -> None:
        super().__init__(message)
        self.supervisor = supervisor
        self.child_id = child_id


class RestartIntensityExceeded(SupervisionError):
    """A supervisor gave up: more restarts within its period than its intensity allows.

    Raised out of the supervisor (its ``async with`` block or :func:`run_supervisor`)
    after all its children were stopped. ``__cause__`` is the last error a child of this
    supervisor raised (``None`` when every counted exit was a normal return). A parent
    supervisor sees this as an abnormal exit of the child supervisor.

    Attributes:
        supervisor: The name of the supervisor that gave up.
        child_id: The child whose exit exceeded the intensity.
        restarts: Restarts counted within the period, including the one refused.
        max_restarts: The supervisor's ``Intensity.max_restarts``.
        period: The supervisor's ``Intensity.period`` in seconds.
    """

    supervisor: str
    child_id: str
    restarts: int
    max_restarts: int
    period: float

    def __init__(
        self,
        *,
        supervisor: str,
        child_id: str,
        restarts: int,
        max_restarts: int,
        period: float,
    ) -> None:
        super().__init__(
            f"supervisor {supervisor!r} gave up after child {child_id!r} exited: "
            f"{restarts} restarts within {period:g} s exceed max_restarts={max_restarts}; "
            "all its children were stopped — fix the failing child or raise the intensity"
        )
        self.supervisor = supervisor
        self.child_id = child_id
        self.restarts = restarts
        self.max_restarts = max_restarts
        self.period = period


class MailboxClosed(SupervisionError):
    """The mailbox cannot take messages: the actor has stopped or this sender was closed.

    Raised by :meth:`Mailbox.tell`, :meth:`Mailbox.tell_nowait`, :meth:`Mailbox.ask` and
    :meth:`Mailbox.clone`. The message was not delivered; restart the actor (or get a
    fresh mailbox handle) and retry.
    """


class NoReply(SupervisionError):
    """The actor dropped a request without answering it.

    Raised by :meth:`Mailbox.ask` when the :class:`Reply` was closed, or garbage
    collected, before the actor called ``send()`` or ``fail()`` — for example because
    the actor stopped with the request still in its mailbox. The request may or may
    not have had an effect; retry only if it is idempotent.
    """
