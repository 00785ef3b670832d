"""The built-in features, declared as extensions; the code of most still lives where it did.

Each declaration names the feature's migrations, tables and words, and builds its
kernel hooks and worker parts from the code in ``protocol/`` and ``worker/`` (the
pauses), which moves into the feature's own folder later, as presence's, schedules',
limits' and workflows' have (``extensions/<name>/``). Snooze and durable steps have no
worker part: they run inside the handler's context; attempt history runs inside the
settlements, through its hooks, and its part only reads whether its table exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from ..protocol import durable as _durable
from ..protocol.durable import expired, record
from ..worker._pauses import Pauses as PauseSet
from ._base import Component, Extension, Hooks, Part, TaskRows, WorkerView


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


class HistoryComponent(Part):
    """Prepare reads whether the attempt history's table exists: settlements record
    attempts only then (the worker's shared line says when it does not)."""

    name = "history"

    def __init__(self, worker: WorkerView) -> None:
        self.backend = worker.backend
        self.switch = worker.switch

    async def prepare(self) -> None:
        self.switch.history = await self.backend.arun(_durable.steps_ready(), write=False)


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
    """Records each ended attempt in the settlement's transaction: in use wherever
    its table exists, unless the worker was built with ``record_attempts=False``."""

    name = "history"
    needs = ("x0009_steps.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_attempts": "trigger"}
    words = ("history", "task_attempts", "attempt_record", "attempt_expired", "durable")

    def hooks(self, worker: WorkerView) -> Hooks:
        switch = worker.switch
        return Hooks(
            before_recover=expired,
            attempt_end=record,
            in_use=lambda: switch.record_attempts and switch.history,
        )

    def components(self, worker: WorkerView) -> Sequence[Component]:
        return (HistoryComponent(worker),)
