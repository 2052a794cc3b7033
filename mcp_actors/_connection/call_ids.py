"""Call ids: a name for one tool call in logs, events and approvals, cheap to draw.

Nothing needs a call id to be unguessable, so a counter after a per-process random prefix
(16 hex digits, the shape the ids always had) replaces the ``uuid4()`` per call that
docs/performance.md measured on the hot path. One home for the rule: the facade and the
agent-engine adapters draw from here.
"""

from __future__ import annotations

import itertools
import os
from typing import Final

__all__ = ["new_call_id"]

_PREFIX: Final = os.urandom(4).hex()
_counter = itertools.count(1)


def new_call_id() -> str:
    """A fresh id for a call whose caller gave none: unique in this process, 16 hex digits."""
    return f"{_PREFIX}{next(_counter) & 0xFFFFFFFF:08x}"
