"""The built-in features, declared as extensions; the code of most still lives where it did.

Each declaration names the feature's migrations, tables and words, and builds its
worker parts from the code in ``worker/`` (the limit book, the pauses, the
workflow sweeper), which moves into the feature's own folder later, as presence's
and schedules' have (``extensions/presence/``, ``extensions/schedules/``). Snooze, durable steps
and attempt history have no worker part: they run inside the handler's context
and the settlements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from ..worker._limits import LimitBook
from ..worker._pauses import Pauses as PauseSet
from ..worker._workflows import WorkflowSweeper
from ._base import Component, Extension, Part, TaskRows, WorkerView


class LimitsComponent(Part):
    """Prepare stores the declared limits, and refuses the start on a database
    without the limits tables when any are declared. No job: claims refresh the book."""

    name = "limits"

    def __init__(self, extension: Extension, book: LimitBook) -> None:
        self.extension = extension
        self.book = book

    async def prepare(self) -> None:
        missing = await self.extension.amissing(self.book.backend)
        if missing and self.book.declared:
            raise self.extension.refusal(missing, f"{len(self.book.declared)} limit(s)")
        await self.book.start(ready=not missing)


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


class WorkflowsComponent(Part):
    """Prepare reads whether the workflow tables exist; the job sweeps under its named lease."""

    name = "workflows"

    def __init__(self, sweeper: WorkflowSweeper) -> None:
        self.sweeper = sweeper
        self.job = sweeper.job

    async def prepare(self) -> None:
        await self.sweeper.prepare()


class Limits(Extension):
    name = "limits"
    migrations = ("x0006_limits.sql", "x0015_limit_keys_unbound.sql")
    optional = ("x0015_limit_keys_unbound.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_limits": "not_task_keyed",
        "cairnq_limit_keys": "swept",
        "cairnq_rate_buckets": "not_task_keyed",
    }
    words = ("limit_", "claimgate", "cairnq_limits", "limitbook")

    def components(self, worker: WorkerView) -> Sequence[Component]:
        return (LimitsComponent(self, worker.book),)


class Pauses(Extension):
    name = "pauses"
    # x0007 creates the snoozes' table too; snooze needs it.
    migrations = ("x0007_flow.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_pauses": "not_task_keyed"}
    words = ("paused", "pause_list", "pause_queue", "pause_task", "cairnq_pauses", "pauses")

    def components(self, worker: WorkerView) -> Sequence[Component]:
        return (PausesComponent(worker.pauses, worker),)


class Workflows(Extension):
    name = "workflows"
    migrations = (
        "x0008_workflows.sql",
        "x0010_dependencies_satisfied.sql",
        "x0013_workflows_forget.sql",
    )
    optional = ("x0013_workflows_forget.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_dependencies": "trigger",
        "cairnq_dependencies_satisfied": "trigger",
        "cairnq_parked": "trigger",
    }
    words = ("workflow", "parked", "depend", "gathering", "spawn")

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


class Steps(Extension):
    name = "steps"
    # x0009 and x0014 create and forget the attempts' table too; history needs them.
    migrations = ("x0009_steps.sql", "x0014_steps_forget.sql")
    optional = ("x0014_steps_forget.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_steps": "trigger"}
    words = ("step_record", "recorded_step", "task_steps", "transaction_step", "steptransaction")


class History(Extension):
    name = "history"
    needs = ("x0009_steps.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_attempts": "trigger"}
    words = ("history", "task_attempts", "attempt_record", "attempt_expired", "durable")
