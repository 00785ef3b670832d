"""The pauses' worker part: it reads the pauses before the first claim and keeps them fresh."""

from __future__ import annotations

from .._base import Part, WorkerView
from ._filter import PauseSet


class PausesComponent(Part):
    """Prepare reads the pauses once (a failure is reported and the worker starts
    with nothing paused); the job reads them again every 500 ms."""

    name = "pauses"

    def __init__(self, pauses: PauseSet, worker: WorkerView) -> None:
        self.pauses = pauses
        self.job = pauses.job
        self._report = worker.report
        self._worker_id = worker.worker_id

    async def prepare(self) -> None:
        try:
            await self.pauses.refresh()
        except Exception as exc:
            self._report(exc, {"phase": "pauses", "worker_id": self._worker_id})
