"""The built-in features, declared as extensions; the code of most still lives where it did.

Each declaration names the feature's migrations, tables and words, and builds its
kernel hooks and worker parts from the code in ``protocol/`` and ``worker/`` (the
pauses, the workflow sweeper), which moves into the feature's own folder later, as
presence's, schedules', limits', durable steps' and the attempt history's have
(``extensions/presence/``, ``extensions/schedules/``, ``extensions/limits/``,
``extensions/steps/``, ``extensions/history/``). Snooze has no worker part: it runs
inside the handler's context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from ..protocol.workflows import after_ended
from ..worker._pauses import Pauses as PauseSet
from ..worker._workflows import WorkflowSweeper
from ..worker._workflows import gate as workflows_gate
from ._base import Component, Extension, Hooks, Job, Part, TaskRows, WorkerView


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


class Jobs:
    """Several jobs started and stopped as one, in order (stopped in reverse)."""

    def __init__(self, *jobs: Job) -> None:
        self.jobs = jobs

    def start(self) -> None:
        for job in self.jobs:
            job.start()

    async def stop(self, *, wait: bool = True) -> None:
        for job in reversed(self.jobs):
            await job.stop(wait=wait)


class WorkflowsComponent(Part):
    """Prepare reads whether the workflow tables exist and a task is parked; the
    jobs look for a parked task once a second and sweep under their named lease."""

    name = "workflows"

    def __init__(self, sweeper: WorkflowSweeper) -> None:
        self.sweeper = sweeper
        self.job = Jobs(sweeper.looks, sweeper.job)

    async def prepare(self) -> None:
        await self.sweeper.prepare()


class Pauses(Extension):
    name = "pauses"
    # x0007 creates the snoozes' table too; snooze needs it.
    migrations = ("x0007_flow.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_pauses": "not_task_keyed"}
    words = ("paused", "pause_list", "pause_queue", "pause_task", "cairnq_pauses", "pauses")

    def hooks(self, worker: WorkerView) -> Hooks:
        pauses = worker.pauses
        return Hooks(
            claim_filter=pauses.unpaused, in_use=lambda: bool(pauses.queues or pauses.names)
        )

    def components(self, worker: WorkerView) -> Sequence[Component]:
        return (PausesComponent(worker.pauses, worker),)


class Workflows(Extension):
    name = "workflows"
    migrations = (
        "x0008_workflows.sql",
        "x0010_dependencies_satisfied.sql",
        "x0013_workflows_forget.sql",
        "x0016_workflows_keep_success.sql",
    )
    # Without x0016 every settlement decides dependents (``worker/_workflows.py``).
    optional = ("x0013_workflows_forget.sql", "x0016_workflows_keep_success.sql")
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_dependencies": "trigger",
        "cairnq_dependencies_satisfied": "trigger",
        "cairnq_parked": "trigger",
    }
    words = ("workflow", "parked", "depend", "gathering", "spawn")

    def hooks(self, worker: WorkerView) -> Hooks:
        return Hooks(task_end=after_ended, in_use=workflows_gate(worker.switch))

    def components(self, worker: WorkerView) -> Sequence[Component]:
        sweeper = WorkflowSweeper(worker.backend, worker.switch, report=worker.report)
        return (WorkflowsComponent(sweeper),)


class Snooze(Extension):
    name = "snooze"
    migrations = ("x0012_snoozes_forget.sql",)
    optional = ("x0012_snoozes_forget.sql",)
    needs = ("x0007_flow.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_snoozes": "trigger"}
    words = ("snooze",)
