"""One log line for the first of many like events, then at most one summary per interval.

A server can make us log as fast as it can write (a line of garbage on stdout, a request
past the in-flight bound): a line per event is the host's log flooded, and the logging
itself the bottleneck. :class:`LogThrottle` is the one rule: the first event is logged at
once, then the events are only counted, and the count is logged at most once per
``interval`` seconds (when the next event comes, or when the owner calls :meth:`flush`).
"""

from __future__ import annotations

import math
import time
from typing import Final

import attrs

__all__ = ["LOG_INTERVAL", "LogThrottle"]

LOG_INTERVAL: Final = 10.0
"""Seconds between two summaries of one throttle."""


@attrs.define
class LogThrottle:
    """Counts events and says when a line may be logged (see the module docstring).

    Attributes:
        interval: Seconds between two lines.
        total: Every event counted so far.
    """

    interval: float = LOG_INTERVAL
    total: int = 0
    _unlogged: int = 0
    _next: float = -math.inf

    def hit(self) -> int:
        """Count one event; the number of events to log now (this one included), or 0 to stay quiet."""
        self.total += 1
        self._unlogged += 1
        now = time.monotonic()
        if now < self._next:
            return 0
        self._next = now + self.interval
        count, self._unlogged = self._unlogged, 0
        return count

    def flush(self) -> int:
        """The events counted but not logged yet (now taken as logged)."""
        count, self._unlogged = self._unlogged, 0
        return count
