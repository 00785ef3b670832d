"""The settler: the worker's writes that end a claim, apart from the handler's own.

Group settlement: completions from many handler calls written in one statement.
Completions that arrive while a write is in flight wait for the next one, so a
busy worker writes one ``complete_many`` per round trip instead of one
statement per task; an idle one writes each completion at once.

It also fails claimed rows no handler can take (``reject``) and hands back, at
shutdown, tasks this worker stopped running (``release``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from .. import kernel
from ..backends import Backend
from ..errors import LostLease
from ..kernel.periodic import ErrorHook
from ..kernel.points import NO_POINTS, Points
from ..models import Lease
from ..store._leases import complete_attempt

MAX_GROUP = 256
Pending = tuple[Lease, "str | None", "int | None", "asyncio.Future[Mapping[str, Any]]"]


class Settler:
    """Collects ``complete`` requests and writes them in groups."""

    def __init__(
        self,
        backend: Backend,
        worker_id: str,
        report: ErrorHook | None = None,
        points: Points = NO_POINTS,
    ) -> None:
        self._backend = backend
        # The extensions' hooks each settlement runs in its transaction (those in use then).
        self.points = points
        self._worker_id = worker_id
        self._report = report
        self._pending: list[Pending] = []
        self._flushing = False
        self._task: asyncio.Future[None] | None = None
        self._rejects: set[asyncio.Future[Any]] = set()
        # The client's store when its method is replaced (``CairnQ._overriding``), else
        # None; a replaced ``complete`` settles each success in place of the group write.
        self.overriding: Callable[[str], Any] | None = None

    def reject(self, lease: Lease, error: str, started: int | None = None) -> None:
        """Fail a claimed task for good with ``error`` (an encoded envelope), in the background.

        ``started`` is when it was claimed, for the attempt history.
        """
        op = kernel.fail(
            lease,
            self._worker_id,
            error,
            retryable=False,
            delay_ms=0,
            points=self.points,
            started=started,
        )
        call = asyncio.ensure_future(self._backend.arun(op, write=True))
        self._rejects.add(call)
        call.add_done_callback(self._rejected)

    def _rejected(self, call: asyncio.Future[Any]) -> None:
        self._rejects.discard(call)
        if not call.cancelled() and call.exception() is not None:
            exc = call.exception()
            assert exc is not None
            if self._report is not None:
                self._report(exc, {"phase": "settle", "worker_id": self._worker_id})

    async def wait_rejects(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the rejections still being written."""
        if self._rejects:
            await asyncio.wait(set(self._rejects), timeout=timeout_s)

    async def release(self, lease: Lease, started: int | None = None) -> None:
        """Hand a task this worker stopped running back to the queue, its attempt uncounted."""
        op = kernel.release(lease, self._worker_id, points=self.points, started=started)
        try:
            await self._backend.arun(op, write=True)
        except Exception as exc:
            if self._report is not None:
                self._report(exc, {"phase": "shutdown", "task_id": lease.id})

    async def complete(
        self, lease: Lease, result: str | None, started: int | None = None
    ) -> Mapping[str, Any]:
        """Settle ``lease`` as ``complete`` would; returns its row (id, status, queue).

        ``started`` is when the attempt was claimed, for the attempt history.

        Raises:
            LostLease: the attempt was no longer owned when the group was written.
        """
        store = None if self.overriding is None else self.overriding("complete")
        if store is not None:
            return await self._complete_through(store, lease, result, started)
        future: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending.append((lease, result, started, future))
        if not self._flushing:
            self._flushing = True
            self._task = asyncio.ensure_future(self._flush())
        return await future

    async def _complete_through(
        self, store: Any, lease: Lease, result: str | None, started: int | None
    ) -> Mapping[str, Any]:
        """Settle with the store's replaced ``complete``, fenced on this attempt's lease
        (a ``WorkerLease``: the store's own ``complete`` settles exactly this attempt)."""
        task = await complete_attempt(store, lease, self._worker_id, started, result, self.points)
        return {"id": task.id, "status": task.status, "queue": task.queue}

    async def _flush(self) -> None:
        try:
            while self._pending:
                group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
                leases = [lease for lease, _, _, _ in group]
                results = [result for _, result, _, _ in group]
                op = kernel.complete_many(
                    leases,
                    results,
                    self._worker_id,
                    points=self.points,
                    started=[start for _, _, start, _ in group],
                )
                try:
                    rows = await self._backend.arun(op, write=True)
                except Exception as exc:
                    for _, _, _, future in group:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for lease, _, _, future in group:
                    if future.done():
                        continue
                    row = rows.get(lease.id)
                    if row is None:
                        future.set_exception(LostLease(lease.id))
                    else:
                        future.set_result(row)
        finally:
            self._flushing = False
