"""Backpressure: while a queue holds ``max_queue_depth`` queued tasks, producers wait.

A **parked** task (queued, waiting on a dependency, an event or a sleep that an
extension holds: ``Extension.parked``) is not counted: the probe counts the queue's
parked tasks and reads the protocol's headroom under the limit plus that many, so
the protocol's ``queue_depth`` statement is unchanged (``docs/backpressure.md``).

A submit to a full queue waits (250 ms, doubling to 5 s between looks) up to
``max_queue_wait_ms``, then raises ``QueueFull`` with nothing enqueued. Each
process keeps a small grant per queue (up to 64 submits, from one headroom
read) so a busy producer does not read the depth before every submit; the limit
is therefore soft across processes: N producers may overshoot by (N-1) x 64.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from . import kernel
from ._checks import check_int, check_text
from .errors import QueueFull
from .extensions import Extension, waiting_counts, waiting_extensions
from .kernel.procedures import Nap, Procedure, Run
from .kernel.store_calls import StoreCall
from .protocol.steps import Op

GRANT_MAX = 64
FIRST_PAUSE_S = 0.25
LONGEST_PAUSE_S = 5.0
DEFAULT_MAX_QUEUE_WAIT_MS = 600_000

DepthLimit = int | Mapping[str, int] | None


class QueueGate:
    """Admits submits while their queue is under its depth limit.

    Args:
        max_queue_depth: One limit for every queue, a ``{queue: limit}`` mapping
            (other queues are not gated), or ``None`` (no gate).
        max_queue_wait_ms: How long a submit waits for room before ``QueueFull``.
        extensions: Extensions besides cairnq's own whose parked tasks the depth leaves
            out too (the client's).
    """

    def __init__(
        self,
        max_queue_depth: DepthLimit,
        max_queue_wait_ms: int = DEFAULT_MAX_QUEUE_WAIT_MS,
        extensions: Sequence[Extension] = (),
    ) -> None:
        if isinstance(max_queue_depth, Mapping):
            self._limits: dict[str, int] | int | None = {
                check_text(q, "queue") or "": check_int(n, f"max_queue_depth[{q!r}]", low=1)
                for q, n in max_queue_depth.items()
            }
        elif max_queue_depth is None:
            self._limits = None
        else:
            self._limits = check_int(max_queue_depth, "max_queue_depth", low=1)
        self.max_queue_wait_ms = check_int(
            max_queue_wait_ms, "max_queue_wait_ms", low=0, high=2**40
        )
        self._grants: dict[str, int] = {}
        self._lock = threading.Lock()
        self._extensions = tuple(extensions)
        self._waiting: list[Extension] | None = None

    @property
    def gates_any(self) -> bool:
        """Whether some queue has a limit (a batch with none to check skips counting)."""
        return bool(self._limits)

    def limit_for(self, queue: str) -> int | None:
        if isinstance(self._limits, dict):
            return self._limits.get(queue)
        return self._limits

    def _take(self, queue: str, count: int) -> bool:
        with self._lock:
            left = self._grants.get(queue, 0)
            if left >= count:
                self._grants[queue] = left - count
                return True
            return False

    def _grant(self, queue: str, headroom: int, count: int) -> bool:
        with self._lock:
            if headroom < count:
                return False
            self._grants[queue] = min(headroom, max(GRANT_MAX, count)) - count
            return True

    def admit(self, queue: str, count: int = 1) -> Procedure[None]:
        """Return once ``count`` submits to ``queue`` may go ahead, or raise ``QueueFull``.

        A batch larger than the queue's limit can never fit and fails at once.
        """
        limit = self.limit_for(queue)
        if limit is None or self._take(queue, count):
            return
        if count > limit:
            raise QueueFull(queue, limit, 0)
        started = time.monotonic()
        pause = FIRST_PAUSE_S
        while True:
            # A store's replaced ``queue_depth`` answers this probe (``cairnq.store``).
            probe = StoreCall(self._headroom(queue, limit), "queue_depth", (queue, limit))
            headroom = yield Run(probe)
            if self._grant(queue, int(headroom), count):
                return
            waited = time.monotonic() - started
            remaining = self.max_queue_wait_ms / 1000 - waited
            if remaining <= 0:
                raise QueueFull(queue, limit, int(waited * 1000))
            yield Nap(min(pause, remaining))
            pause = min(pause * 2, LONGEST_PAUSE_S)

    def _headroom(self, queue: str, limit: int) -> Op[int]:
        """The room left in ``queue`` under ``limit`` tasks queued and not parked: the
        protocol's headroom under ``limit`` plus the queue's parked tasks."""
        if self._waiting is None:
            self._waiting = waiting_extensions(self._extensions)
        counted = yield from waiting_counts(self._waiting, queue)
        return (yield from kernel.queue_depth(queue, limit + counted.get(queue, 0)))


QueueDepthGate = QueueGate
"""The reference SDK's name for ``QueueGate``, with the same arguments:
``QueueDepthGate(max_queue_depth, max_queue_wait_ms=600_000)``."""
