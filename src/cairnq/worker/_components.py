"""The worker's background parts, each as a ``Component`` its ``Lifecycle`` drives.

A run's components, in start order (``Worker._components``; stopped in reverse):

- ``limits``: prepare stores the declared limits, and refuses the start on a
  database without the limits tables (``SchemaIncomplete``). No job: claims
  refresh the book.
- ``pauses``: prepare reads the pauses once (a failure is reported and the
  worker starts with nothing paused); the job reads them again every 500 ms.
- ``presence``: prepare writes the worker's row in the background (a database
  without ``cairnq_workers``: one line, then nothing); the job refreshes it and
  ``close`` deletes it. Stops after the drain.
- ``heartbeat``: the job renews the leases of calls in flight. Stops after the
  drain, so draining calls keep their leases.
- ``workflows``: prepare reads whether the workflow tables exist; the job sweeps
  under its named lease.
- ``recovery``: the job recovers expired leases; a stop cancels a recovery in
  progress.
- ``retention`` (with a ``Retention`` only): the job sweeps under its named lease.
- ``schedules`` (unless ``schedules=False``): prepare stores the declared
  schedules (their tables missing: one line, no job); the job evaluates under
  its named lease.
"""

from __future__ import annotations

from .._periodic import ErrorHook
from ..schedules._scheduler import Scheduler
from ._lifecycle import Job, Part
from ._limits import LimitBook
from ._pauses import Pauses
from ._presence import Presence
from ._workflows import WorkflowSweeper


class JobComponent(Part):
    """A part that is only a job (the heartbeater, the recoverer, the retention sweeper)."""

    def __init__(self, name: str, job: Job, *, stops_after_drain: bool = False) -> None:
        self.name = name
        self.job = job
        self.stops_after_drain = stops_after_drain


class LimitsComponent(Part):
    name = "limits"

    def __init__(self, book: LimitBook) -> None:
        self.book = book

    async def prepare(self) -> None:
        await self.book.start()


class PausesComponent(Part):
    name = "pauses"

    def __init__(self, pauses: Pauses, report: ErrorHook, worker_id: str) -> None:
        self.pauses = pauses
        self.job = pauses.job
        self._report = report
        self._worker_id = worker_id

    async def prepare(self) -> None:
        try:
            await self.pauses.refresh()
        except Exception as exc:
            self._report(exc, {"phase": "pauses", "worker_id": self._worker_id})


class PresenceComponent(Part):
    name = "presence"
    # The row says the worker serves its queues until its calls have drained.
    stops_after_drain = True

    def __init__(self, presence: Presence) -> None:
        self.presence = presence
        self.job = presence.job

    async def prepare(self) -> None:
        self.presence.start()

    async def close(self) -> None:
        await self.presence.close()


class WorkflowsComponent(Part):
    name = "workflows"

    def __init__(self, sweeper: WorkflowSweeper) -> None:
        self.sweeper = sweeper
        self.job = sweeper.job

    async def prepare(self) -> None:
        await self.sweeper.prepare()


class SchedulesComponent(Part):
    name = "schedules"

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def prepare(self) -> None:
        await self.scheduler.prepare()
        # Without the schedules tables there is nothing to evaluate.
        self.job = None if self.scheduler.absent else self.scheduler.job
