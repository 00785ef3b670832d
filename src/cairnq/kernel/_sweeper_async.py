"""The retention sweeper, async: the source the blocking sweeper is generated from.

``scripts/generate_sync.py`` turns this file into ``_sweeper_sync.py`` beside it
(``RetentionSweeper`` -> ``SyncRetentionSweeper``, ``AsyncSweepTimer`` ->
``SyncSweepTimer``). What differs between the halves is the timer's, in ``_sweep.py``.
"""

from __future__ import annotations

from typing import Any

from ..backends import Backend
from ..protocol.steps import Op
from ._sweep import AsyncSweepTimer, PurgingStore, Retention, Sweeping, Tally
from .procedures import afollow
from .store_calls import StoreCall


class RetentionSweeper(Sweeping):
    """Runs a ``Retention`` against one backend or store; see ``cairnq.kernel.retention``.

    Args:
        source: A ``Backend``, or a store (``cq.store``, a ``SQLiteStore``...): a
            ``purge`` replaced on it is each batch.
        retention: The policy.

    Example::

        sweeper = RetentionSweeper(cq.store, Retention(older_than_ms=86_400_000))
        deleted = await sweeper.sweep()
    """

    def __init__(self, source: Backend | PurgingStore, retention: Retention) -> None:
        super().__init__(source, retention)
        self._timer = AsyncSweepTimer(self.sweep, retention.interval_ms)

    def _stopped(self) -> bool:
        return self._timer.stopping()

    @property
    def running(self) -> bool:
        """Whether it sweeps every interval now."""
        return self._timer.running

    def start(self) -> None:
        """Start sweeping every interval (the first sweep after one interval)."""
        self._timer.start()

    async def stop(self, *, wait: bool = True) -> None:
        """Stop promptly, including mid-sweep between batches; waits for the batch in flight
        unless ``wait`` is false. A stopped sweeper can be started again.

        Raises:
            EventLoopMismatch: called from another loop while the one it started on runs.
        """
        await self._timer.stop(wait=wait)

    async def sweep(self) -> int:
        """Purge everything past the cutoffs now, batch by batch; returns rows deleted.

        Returns 0 without deleting when another process holds the sweep, or when stopped.
        """
        tally = Tally()
        try:
            await afollow(self._batches(tally), self._run_op)
        except Exception as exc:
            self._report(exc)
        return self._swept(tally)

    async def _run_op(self, op: Op[Any], write: bool) -> Any:
        call = self._replaced(op)
        if call is not None:
            return await self._timer.outcome(call())
        if isinstance(op, StoreCall):
            op = op.inner
        return await self.backend.arun(op, write=write)
