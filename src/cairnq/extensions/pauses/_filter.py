"""The pauses' claim filter: the paused queues and task names as this worker knows
them, read again every half second.

The claimer draws only what is not paused (``PauseSet.unpaused``, the extension's
claim filter): a paused queue leaves the claim's queues, a paused name leaves every
draw's names. A pause is honoured from the first refresh after it commits
(``REFRESH_MS`` plus a claim in flight at most); calls already running finish. A
database without the flow-control tables (``x0007_flow.sql``, opened with
``migrate=False``) has no pauses: the worker claims as usual and looks for the
tables again on each refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...backends import Backend
from ...kernel import Draw
from ...kernel.periodic import ErrorHook, PeriodicJob
from . import _ops

REFRESH_MS = 500


class PauseSet:
    """This worker's copy of ``cairnq_pauses``; ``job`` keeps it fresh while the worker runs.

    Args:
        backend: The worker's backend.
        on_change: Called after a refresh that changed the set (wakes the claimer,
            so a resume is claimed from at once).
        report: The worker's error hook (a failed refresh keeps the last set).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        on_change: Callable[[], None],
        report: ErrorHook,
        worker_id: str,
        interval_ms: int = REFRESH_MS,
    ) -> None:
        self.backend = backend
        self.queues: frozenset[str] = frozenset()
        self.names: frozenset[str] = frozenset()
        # Whether the database has the flow tables: the ledger is read until it has.
        self._ready = False
        self._on_change = on_change
        self.job = PeriodicJob(
            "cairnq.pauses",
            self.refresh,
            interval_ms=interval_ms,
            on_error=report,
            phase="pauses",
            context={"worker_id": worker_id},
        )

    async def refresh(self) -> None:
        """Read the pauses now; wake the claimer when they changed."""
        if not self._ready:
            self._ready = await self.backend.arun(_ops.pauses_ready(), write=False)
        pauses = (
            await self.backend.arun(_ops.paused_with_tables(), write=False) if self._ready else None
        )
        queues = frozenset(p.target for p in pauses or () if p.scope == "queue")
        names = frozenset(p.target for p in pauses or () if p.scope == "name")
        if queues != self.queues or names != self.names:
            self.queues, self.names = queues, names
            self._on_change()

    def unpaused(
        self, queues: Sequence[str], draws: Sequence[Draw]
    ) -> tuple[list[str], list[Draw]]:
        """``queues`` and ``draws`` without what is paused (unchanged when nothing is)."""
        if not self.queues and not self.names:
            return list(queues), list(draws)
        open_queues = [q for q in queues if q not in self.queues]
        kept: list[Draw] = []
        for draw in draws:
            if draw.names is None or not self.names:
                kept.append(draw)
                continue
            names = [n for n in draw.names if n not in self.names]
            if names:
                kept.append(Draw(names, draw.limit))
        return open_queues, kept
