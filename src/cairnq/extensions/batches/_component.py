"""The batches' worker part: a sweep under the named lease ``cairnq.batches``, and a look
for a batch not done yet that keeps the ``in_use`` gate current (``BatchesComponent``).

cairnq's own settlements and cancels record a member's end and decide its batch in
the transaction that ends it, while the gate is open. A reference SDK's worker
sharing the database does not, and neither does lease recovery; the sweep records,
about once a second, every member whose task ended meanwhile (or is gone), and
submits the callbacks of every batch that completes. One process at a time sweeps
(the lease); deciding twice is harmless, as a batch becomes done once, ever.

The gate (``gate``) is open while the batch tables exist and either a batch is not
done yet (the look reads it about once a second, no lease) or this worker's client
made a batch. A member this worker settles while the gate is shut is left to the
sweep, which records it within about a second more (a run ``until_idle`` sweeps
once more before it stops, ``BatchesComponent.before_idle``): its outcome is its
task's status, which only its end can set, and a purge meanwhile records it too (the
delete trigger of ``x0017_batches.sql``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from weakref import WeakSet

from ... import kernel
from ...backends import Backend
from ...kernel.periodic import ErrorHook
from .._base import Jobs, Part, SweepTurns, sweep_and_look
from . import _ops

log = logging.getLogger("cairnq.worker")

LEASE_NAME = "cairnq.batches"
INTERVAL_MS = 1_000
LEASE_TTL_MS = 5_000

# Clients that made a batch: a worker built on one records its members from then on.
BATCHING: WeakSet[object] = WeakSet()


class BatchesRun:
    """One worker run's batches state: whether the database has the batch tables and
    whether a batch is not done yet (the look notes both), and the worker's client."""

    def __init__(self, worker_id: str, client: object) -> None:
        self.worker_id = worker_id
        self.client = client
        self.ready = False
        self.active = False


def gate(run: BatchesRun) -> Callable[[], bool]:
    """The batches' ``in_use``: whether a settlement may end a member of a batch."""

    def in_use() -> bool:
        return run.ready and (run.active or run.client in BATCHING)

    return in_use


class BatchSweeper:
    """Records the member ends no transaction recorded and decides their batches."""

    def __init__(
        self,
        backend: Backend,
        run: BatchesRun,
        *,
        report: ErrorHook,
        interval_ms: int = INTERVAL_MS,
        lease_ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self.backend = backend
        self.run = run
        self.turns = SweepTurns(self._sweep)
        self.job, self.looks = sweep_and_look(
            LEASE_NAME,
            backend,
            holder=run.worker_id,
            sweep=self.tick,
            look=self.look,
            ready=self.ready,
            report=report,
            phase="batches",
            interval_ms=interval_ms,
            lease_ttl_ms=lease_ttl_ms,
        )

    async def look(self) -> None:
        """Note whether a batch is not done yet (and whether the tables appeared meanwhile)."""
        run = self.run
        if not run.ready:
            applied = await self.backend.arun(kernel.applied_migrations(), write=False)
            run.ready = _ops.BATCHES_MIGRATION in applied
        if run.ready:
            run.active = await self.backend.arun(_ops.in_use(), write=False)

    async def ready(self) -> bool:
        """Whether the database has the batch tables (read again while it has not)."""
        if not self.run.ready:
            self.run.ready = await self.backend.arun(_ops.batches_ready(), write=False)
        return self.run.ready

    async def tick(self) -> int:
        """Sweep once; returns how many batches it made done."""
        return await self.turns.run()

    async def _sweep(self) -> tuple[int, bool]:
        if not self.run.active and self.run.client not in BATCHING:
            return 0, False
        done, more = await self.backend.arun(_ops.sweep_turn(_ops.SWEEP_LIMIT), write=True)
        if done:
            log.debug(
                "batch sweep submitted the callbacks of %d batch(es)",
                len(done),
                extra={"worker_id": self.run.worker_id, "phase": "batches"},
            )
        return len(done), more


class BatchesComponent(Part):
    """Prepare reads whether the batch tables exist and a batch is not done; the jobs
    look again once a second and sweep under their named lease."""

    name = "batches"

    def __init__(self, sweeper: BatchSweeper) -> None:
        self.sweeper = sweeper
        self.job = Jobs(sweeper.looks, sweeper.job)

    async def prepare(self) -> None:
        await self.sweeper.look()

    async def before_idle(self) -> bool:
        """Submit the callbacks of the batches whose members ended with no decision (what
        the sweep would within a second), looking first for a batch made since the last
        look: a run ``until_idle`` must not stop before they are submitted. ``True`` when
        a sweep of this run made a batch done since the last ask."""
        sweeper = self.sweeper
        await sweeper.look()
        if not sweeper.run.ready:
            return False
        return await sweeper.turns.changed_since_asked()
