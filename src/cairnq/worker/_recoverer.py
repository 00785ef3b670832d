"""The recoverer: moves expired leases out of ``running`` on a timer, for every queue.

It runs in every worker, without a named lease: a crashed worker's tasks come
back within ``recovery_interval_ms`` only if every live worker keeps recovering,
whatever its own queues and however busy it is (a lease taken by one worker
could sit on a worker that is itself stuck). Claims recover too, but only when
the worker has room to claim.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import kernel
from ..backends import Backend
from ..errors import SchemaIncomplete, SerializationError, StoreClosed
from ..kernel.periodic import ErrorHook, PeriodicJob
from ..models import Task
from ._context import Runtime
from ._task_events import TaskEvent

log = logging.getLogger("cairnq.worker")

RECOVER_LIMIT = 100
RECOVERY_BATCHES = 10


class Recoverer:
    """Recovers expired leases now (``recover``) and every ``interval_ms`` (``start``)."""

    def __init__(
        self,
        backend: Backend,
        runtime: Runtime,
        *,
        worker_id: str,
        interval_ms: int,
        report: ErrorHook,
        give_up: Callable[[SchemaIncomplete], None],
    ) -> None:
        self.backend = backend
        self.runtime = runtime
        self.worker_id = worker_id
        self._give_up = give_up
        self._report = report
        # When expired leases were last recovered (time.monotonic), here or by a claim.
        self.recovered_at = float("-inf")
        self.job = PeriodicJob(
            "cairnq.recovery",
            self.recover,
            interval_ms=interval_ms,
            # No backoff after errors: the interval bounds how long a crashed worker's
            # tasks wait, and a failing database is already backed off by the claims.
            max_error_backoff_ms=interval_ms,
            on_error=self._on_error,
            phase="recovery",
            context={"worker_id": worker_id},
            stop_on=(SchemaIncomplete,),
        )

    def start(self) -> None:
        self.job.start()

    async def stop(self, *, wait: bool = True) -> None:
        """Stop at once, a recovery in progress included (the next worker finishes it),
        whatever ``wait`` says."""
        await self.job.stop(wait=False)

    async def recover(self, batches: int = RECOVERY_BATCHES) -> int:
        """Recover expired leases now, at most ``batches`` x 100 rows; returns how many."""
        recovered = 0
        for _ in range(batches):
            if not await self.backend.arun(kernel.expired_leases_exist(), write=False):
                break
            rows: list[Mapping[str, Any]] = await self.backend.arun(
                kernel.recover(RECOVER_LIMIT, points=self.runtime.points),
                write=True,
            )
            recovered += len(rows)
            self.announce(rows)
            if len(rows) < RECOVER_LIMIT:
                break
        self.recovered_at = time.monotonic()
        if recovered:
            log.info("recovered %d expired leases", recovered, extra={"worker_id": self.worker_id})
        return recovered

    async def recover_in_turn(self) -> int | None:
        """``recover`` one batch for the claim loop: how many, or ``None`` when it failed.

        The error is reported rather than raised, and counts as a recovery for
        when the next is due, so a failing one is retried by the timer, the polling
        claims and the claim loop's later turns, not by the next claim at once. A
        closed backend is left to the claim loop's next claim, which stops it.
        """
        try:
            return await self.recover(batches=1)
        except StoreClosed:
            return None
        except Exception as exc:
            self.recovered_at = time.monotonic()
            self._on_error(exc, {"phase": "recovery", "worker_id": self.worker_id})
            return None

    def announce(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Emit a ``recovered`` event per row (when anyone listens)."""
        if not self.runtime.listeners:
            return
        for row in rows:
            try:
                task: Task | None = Task.from_row(row)
            except SerializationError:
                task = None
            self.runtime.emit(
                TaskEvent(
                    kind="recovered",
                    task_id=str(row["id"]),
                    name=row["name"],
                    queue=row["queue"],
                    attempt=int(row["attempt"]),
                    worker_id=self.worker_id,
                    error=task.error if task is not None and task.is_failed else None,
                    task=task,
                )
            )

    def _on_error(self, exc: BaseException, context: dict[str, Any]) -> None:
        self._report(exc, context)
        if isinstance(exc, SchemaIncomplete):
            self._give_up(exc)
