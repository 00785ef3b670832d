"""What a committed write tells this process's waiters, and what a waiter waits on.

Operations yield ``Emit`` (``protocol.steps``); the wake hub (``_wakeups``)
delivers them after the commit; a procedure's pause (``kernel.procedures``)
waits on a ``Latch`` the hub sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Channel = Literal["queued", "done"]
CHANNELS: frozenset[str] = frozenset({"queued", "done"})


@dataclass(frozen=True)
class Emit:
    """After commit, tell this process's waiters: a task became ``queued`` or ``done``.

    ``value`` is the queue name for ``queued`` and the task id for ``done``.
    """

    channel: Channel
    value: str


class Latch(Protocol):
    """Something a waiter can wait on from a thread or from a loop (a ``Subscription``)."""

    def wait(self, timeout_s: float) -> bool:
        """Block until set; False after ``timeout_s``."""
        ...

    async def wait_async(self, timeout_s: float) -> bool:
        """Wait on the running loop until set; False after ``timeout_s``."""
        ...
