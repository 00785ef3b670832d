"""The policies' worker part: whether this worker looks up the policies of what it
claims (``PolicyGate.in_use``), and the sweep that cancels queued tasks past their expiry.

A database where no submit ever stored a policy costs a worker's claims nothing: the
gate is shut while the worker's last look at the marker (``cairnq_policies_use``)
found none and is under ``STALE_MS`` old. Once the marker is seen it stays open for
the worker's run. The first submit that writes the marker makes its tasks wait
``ACTIVATION_MS``, longer than any worker trusts a look that found none, so no
cairnq worker runs a task with a policy without having looked it up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol, cast

from ...backends import Backend
from ...kernel.periodic import ErrorHook, PeriodicJob
from ...kernel.points import NO_POINTS, Points, ThenWrite
from ...protocol.steps import Op, Row
from .._base import Part, WorkerView
from . import _ops


class _Ending(Protocol):
    async def _ends(self) -> Points: ...


class PolicyGate:
    """One worker run's view of the policies: the gate, its refresh and the sweep."""

    def __init__(
        self,
        backend: Backend,
        client: object,
        worker_id: str,
        report: ErrorHook,
        *,
        stale_ms: int = _ops.STALE_MS,
        interval_ms: int = _ops.REFRESH_MS,
    ) -> None:
        self.backend = backend
        self._client = client
        self.worker_id = worker_id
        self.seen = False
        # Whether the database has the policies' tables: the ledger is read until it has.
        self._ready = False
        self._read_at: float | None = None
        self._stale_s = stale_ms / 1000
        # The hooks of the writes that end tasks (a client's), for releases and cancels.
        self.points: Points = NO_POINTS
        self.job = PeriodicJob(
            "cairnq.policies",
            self.tick,
            interval_ms=interval_ms,
            on_error=report,
            phase="policies",
            context={"worker_id": worker_id},
        )

    def in_use(self) -> bool:
        """Whether claims look the policies up: the marker seen, or not looked at lately."""
        if self.seen:
            return True
        read_at = self._read_at
        return read_at is None or time.monotonic() - read_at > self._stale_s

    async def refresh(self) -> None:
        """Look at the marker (until seen) and take the client's ending hooks."""
        ends = getattr(self._client, "_ends", None)
        if ends is not None:
            self.points = await cast(_Ending, self._client)._ends()
        if self.seen:
            return
        sent = time.monotonic()
        if not self._ready:
            self._ready = await self.backend.arun(_ops.policies_ready(), write=False)
        self.seen = self._ready and await self.backend.arun(_ops.marked_with_tables(), write=False)
        self._read_at = sent

    async def tick(self) -> None:
        """One turn of the job: refresh, then cancel what expired while queued."""
        await self.refresh()
        while self.seen:
            # A read first: a turn with nothing expired opens no write transaction.
            found = await self.backend.arun(_ops.due(), write=False)
            if found:
                await self.backend.arun(_ops.expire_many(found, self.points), write=True)
            if len(found) < _ops.SWEEP_LIMIT:
                break

    def claimed(self, rows: Sequence[Row]) -> Op[list[Row] | ThenWrite]:
        """The claim hook: ``_ops.claimed_hook`` with this worker's id and ending hooks."""
        return _ops.claimed_hook(rows, self.worker_id, self.points)


class PoliciesComponent(Part):
    """Prepare looks at the marker once (a failure is reported; the gate then stays
    open, so claims look the policies up); the job looks again every 500 ms and
    sweeps expired tasks."""

    name = "policies"

    def __init__(self, gate: PolicyGate, worker: WorkerView) -> None:
        self.gate = gate
        self.job = gate.job
        self._report = worker.report
        self._worker_id = worker.worker_id

    async def prepare(self) -> None:
        try:
            await self.gate.refresh()
        except Exception as exc:
            self._report(exc, {"phase": "policies", "worker_id": self._worker_id})
