"""The heartbeater: renews the leases this worker holds and flags the ones it lost.

It runs in every worker, without a named lease: a lease is one worker's own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from .. import kernel
from ..backends import Backend, ReservedRunner
from ..errors import DatabaseUnavailable, EventLoopBlocked
from ..kernel.periodic import ErrorHook, PeriodicJob
from ._context import TaskContext

log = logging.getLogger("cairnq.worker")


class Heartbeater:
    """Every interval: flag leases past their local deadline, then renew the rest.

    The renewal runs as its own task and is never awaited by the timer, so a
    database that stops answering cannot stop the deadline checks: a handler
    learns its lease is gone on time even while the renewal is stuck.
    """

    def __init__(
        self,
        backend: Backend,
        contexts: Mapping[str, TaskContext],
        *,
        worker_id: str,
        lease_ms: int,
        interval_ms: int,
        report: ErrorHook,
    ) -> None:
        self.backend = backend
        self.contexts = contexts
        self.worker_id = worker_id
        self.lease_ms = lease_ms
        self.interval_ms = interval_ms
        self._report = report
        self._beating: asyncio.Task[None] | None = None
        self._beat_sent = 0.0
        self._last_turn = 0.0
        self.job = PeriodicJob(
            "cairnq.heartbeat",
            self._turn,
            interval_ms=interval_ms,
            on_error=report,
            phase="heartbeat",
            context={"worker_id": worker_id},
        )

    def start(self) -> None:
        self._last_turn = time.monotonic()
        self.job.start()

    async def stop(self, *, wait: bool = True) -> None:
        await self.job.stop(wait=wait)
        if self._beating is not None:
            self._beating.cancel()

    async def _turn(self) -> None:
        gap = time.monotonic() - self._last_turn
        if gap > 2 * self.interval_ms / 1000:
            self._report(
                EventLoopBlocked(int(gap * 1000), self.interval_ms),
                {"phase": "heartbeat", "worker_id": self.worker_id},
            )
        self.expire_overdue()
        if self._beating is None or self._beating.done():
            self._beating = asyncio.ensure_future(self._beat())
        elif time.monotonic() - self._beat_sent > self.lease_ms / 1000:
            slow = DatabaseUnavailable(f"heartbeat got no answer for over {self.lease_ms} ms")
            self._report(slow, {"phase": "heartbeat", "worker_id": self.worker_id})
        self._last_turn = time.monotonic()

    def expire_overdue(self) -> None:
        """Flag every lease whose local deadline passed without a successful renewal."""
        now = time.monotonic()
        for ctx in list(self.contexts.values()):
            if ctx.holds_lease and not ctx.in_transaction and now >= ctx.lease_deadline:
                log.warning(
                    "lease expired without renewal",
                    extra={"task_id": ctx.task_id, "worker_id": self.worker_id},
                )
                ctx.mark_lost()

    async def _beat(self) -> None:
        """Renew every held lease in one statement; flag the ones the database says are gone.

        A renewal extends the local deadline from the moment it was sent, never later
        than the database's own expiry.
        """
        live = [c for c in self.contexts.values() if c.holds_lease and not c.in_transaction]
        if not live:
            return
        backend = self.backend
        run = backend.arun_reserved if isinstance(backend, ReservedRunner) else backend.arun
        self._beat_sent = sent = time.monotonic()
        beat = kernel.heartbeat_batch([c.lease for c in live], self.worker_id, self.lease_ms)
        try:
            held = await run(beat, write=True)
        except Exception as exc:
            self._report(exc, {"phase": "heartbeat", "worker_id": self.worker_id})
            return
        for ctx in live:
            if ctx.task_id in held:
                # A lease held but not renewed (its row locked by a settlement in progress)
                # keeps the deadline it had: the database's expiry did not move.
                if ctx.task_id in held.renewed:
                    ctx.lease_deadline = max(ctx.lease_deadline, sent + self.lease_ms / 1000)
                if held[ctx.task_id]:
                    ctx.mark_cancel_requested()
            elif not ctx.settled:
                log.warning(
                    "lease lost", extra={"task_id": ctx.task_id, "worker_id": ctx.worker_id}
                )
                ctx.mark_lost()
