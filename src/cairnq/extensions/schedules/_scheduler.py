"""The worker's schedule evaluator: a periodic job under the named lease ``cairnq.schedules``.

Every cairnq worker runs one (``Worker(extensions=[Schedules(evaluate=False)])`` turns
it off); the lease lets one process at a time evaluate, and another takes over within
the lease's time to live when the holder dies. Exactly one task per slot does not rest
on the lease: ``evaluate`` records each slot under its primary key in the transaction
that submits its task, so two evaluators (a lease that ran out mid-evaluation, a
database without named leases) still submit a slot once.

At start the worker stores the schedules it declares (``@worker.periodic``,
``worker.schedule``), replacing their definitions and keeping their cursors,
paused state and history. On a database without the schedules tables
(``migrate=False`` on a database another SDK migrated) it logs one line and
evaluates nothing; the rest of the worker runs as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..._json import JsonCodec
from ...backends import Backend
from ...kernel.periodic import NamedLease, PeriodicJob
from ...kernel.procedures import afollow
from ...protocol.steps import Op
from . import _ops as _schedules

if TYPE_CHECKING:
    from ._model import ScheduleSpec

log = logging.getLogger("cairnq.schedules")

LEASE_NAME = "cairnq.schedules"
INTERVAL_MS = 1_000
LEASE_TTL_MS = 5_000


class Scheduler:
    """Stores a worker's declared schedules (``prepare``), then evaluates every due one
    each second (``job``, a ``PeriodicJob`` that gives up the lease when stopped).
    """

    def __init__(
        self,
        backend: Backend,
        codec: JsonCodec,
        declared: Sequence[ScheduleSpec],
        *,
        report: Any,
        worker_id: str,
        interval_ms: int = INTERVAL_MS,
        lease_ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self.backend = backend
        self.codec = codec
        self.declared = list(declared)
        self.worker_id = worker_id
        self.absent = False
        self.job = PeriodicJob(
            LEASE_NAME,
            self.tick,
            interval_ms=interval_ms,
            first_delay_ms=0,
            on_error=report,
            lease=NamedLease(backend, holder=worker_id, ttl_ms=lease_ttl_ms),
            phase="schedules",
            context={"worker_id": worker_id},
        )

    async def prepare(self) -> None:
        """Store the declared schedules (before the worker's first claim); on a database
        without the schedules tables, one line and ``absent`` (then ``job`` is not run)."""
        ready = await self.backend.arun(_schedules.schedules_ready(), write=False)
        if not ready:
            self.absent = True
            level = logging.WARNING if self.declared else logging.INFO
            log.log(
                level,
                "this database lacks cairnq's schedules (migration %s), so this worker "
                "evaluates no schedules%s (run `cairnq migrate` to add them)",
                _schedules.SCHEDULES_MIGRATION,
                f" and the {len(self.declared)} it declares are not stored"
                if self.declared
                else "",
                extra={"worker_id": self.worker_id, "phase": "schedules"},
            )
            return
        for spec in self.declared:
            before = await self.backend.arun(_schedules.get(spec.name), write=False)
            await self.backend.arun(_schedules.put(spec, source="code", replace=True), write=True)
            if before is not None and before.source != "code":
                # Code owns the names it declares: each deploy stores them as written.
                log.warning(
                    "schedule %s (%s, task %s) was added by a client or `cairnq schedules "
                    "add`; this worker declares a schedule of that name in code, which "
                    "replaced it (now %s, task %s): rename one of the two to keep both",
                    spec.name,
                    before.when,
                    before.task,
                    spec.timing.describe(),
                    spec.task,
                    extra={"worker_id": self.worker_id, "phase": "schedules"},
                )

    async def tick(self) -> int:
        """Evaluate every due schedule now; returns how many tasks were submitted."""
        evaluated = await afollow(_schedules.run_due(self.codec), self._run)
        submitted = 0
        for done in evaluated:
            name = done.name
            submitted += len(done.enqueued)
            for slot_ms, task_id in done.enqueued:
                log.debug(
                    "schedule %s submitted %s for slot %d",
                    name,
                    task_id,
                    slot_ms,
                    extra={"schedule": name, "slot_ms": slot_ms, "task_id": task_id},
                )
            for outcome, count in done.skipped.items():
                log.info(
                    "schedule %s skipped %d slot%s (%s)",
                    name,
                    count,
                    "" if count == 1 else "s",
                    outcome,
                    extra={"schedule": name, "outcome": outcome, "slots": count},
                )
        return submitted

    async def _run(self, op: Op[Any], write: bool) -> Any:
        return await self.backend.arun(op, write=write)
