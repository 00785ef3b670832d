"""The built-in features, declared as extensions; the code of most still lives where it did.

Each declaration names the feature's migrations, tables and words, and builds its
kernel hooks and worker parts from the code in ``protocol/`` and ``worker/`` (the
pauses), which moves into the feature's own folder later, as presence's, schedules',
limits', workflows', durable steps' and the attempt history's have
(``extensions/<name>/``). Snooze has no worker part: it runs inside the handler's
context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

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
