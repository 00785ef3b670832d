"""Attempt history: one row per ended attempt of a task (``cairnq_task_attempts``), written
in the transaction that ends it, read back by ``cq.attempts()``, ``cairnq get`` and the
dashboard's task page.

The table comes with the steps' migration (``x0009_steps.sql``), which the history
needs. Everything else of the feature is in this folder: the reads and the
``Attempt`` model (``_ops``), the kernel hooks that record (``_hooks``) and its
statements (``sql/<dialect>/history_*.sql``). ``cairnq.history`` re-exports the
public names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from .._base import Component, Extension, Hooks, Part, TaskRows, WorkerView
from ._hooks import expired, record
from ._ops import OUTCOMES, Attempt, history_ready

__all__ = ["OUTCOMES", "Attempt", "History", "HistoryComponent"]


class HistoryComponent(Part):
    """Prepare reads whether the attempt history's table exists: settlements record
    attempts only then (the worker's shared line says when it does not)."""

    name = "history"

    def __init__(self, worker: WorkerView) -> None:
        self.backend = worker.backend
        self.switch = worker.switch

    async def prepare(self) -> None:
        self.switch.history = await self.backend.arun(history_ready(), write=False)


class History(Extension):
    """Records each ended attempt in the settlement's transaction: in use wherever
    its table exists, unless the worker was built with ``record_attempts=False``."""

    name = "history"
    needs = ("x0009_steps.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {"cairnq_task_attempts": "trigger"}
    words = ("history", "task_attempts", "record_attempts")
    cli = "cairnq.extensions.history._surfaces.cli"
    pages = "cairnq.extensions.history._surfaces.pages"

    def hooks(self, worker: WorkerView) -> Hooks:
        switch = worker.switch
        return Hooks(
            before_recover=expired,
            attempt_end=record,
            in_use=lambda: switch.record_attempts and switch.history,
        )

    def components(self, worker: WorkerView) -> Sequence[Component]:
        return (HistoryComponent(worker),)
