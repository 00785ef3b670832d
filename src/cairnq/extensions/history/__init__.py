"""Attempt history: one row per ended attempt of a task (``cairnq_task_attempts``), written
in the transaction that ends it, read back by ``cq.attempts.list()``, ``cairnq get`` and the
dashboard's task page.

The table comes with the steps' migration (``x0009_steps.sql``), which the history
needs; its hourly rollups for the trends come with ``x0028_attempt_rollups.sql``
(``_rollups``: the tables and the worker's periodic job that fills them). Everything
else of the feature is in this folder: the reads and the ``Attempt`` model (``_ops``),
the kernel hooks that record (``_hooks``) and its statements
(``sql/<dialect>/history_*.sql``). ``cairnq.history`` re-exports the public names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from ..._lazy import exports
from .._base import Component, Extension, Hooks, Option, TaskRows, WorkerView
from ._rollups import ROLLUPS_MIGRATION, RollupComponent

if TYPE_CHECKING:
    from ._hooks import expired as expired
    from ._hooks import record as record
    from ._hooks import settling_for as settling_for
    from ._ops import OUTCOMES, Attempt
else:
    # The operations and the hooks are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "OUTCOMES": "._ops",
            "Attempt": "._ops",
            "expired": "._hooks",
            "record": "._hooks",
            "settling_for": "._hooks",
        },
    )

__all__ = ["OUTCOMES", "Attempt", "History"]


class History(Extension):
    """Records each ended attempt in the settlement's transaction: in use wherever
    its table exists (the extension is ready: the worker's shared line says when it
    is not), unless the worker was given ``History(record=False)``; a store's
    settlements are recorded wherever the table exists.

    Args:
        record: Record each ended attempt in the transaction that ends it, where
            the table exists; ``False`` saves that write.

    Example::

        worker = Worker(cq, extensions=[History(record=False)])
    """

    name = "history"
    migrations = (ROLLUPS_MIGRATION,)
    # The rollups only make the trends faster: the history works without them.
    optional = (ROLLUPS_MIGRATION,)
    needs = ("x0009_steps.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_task_attempts": "trigger",
        # Aggregates of attempts, kept when their tasks go.
        "cairnq_attempt_rollups": "not_task_keyed",
        "cairnq_attempt_rollup_marks": "not_task_keyed",
    }
    words = ("history", "task_attempts", "record_attempts", "attempt_rollup")
    cli = "cairnq.extensions.history._surfaces.cli"
    pages = "cairnq.extensions.history._surfaces.pages"
    options: ClassVar[Mapping[str, Option]] = {"record_attempts": Option(True, bool)}

    def __init__(self, *, record: bool = True) -> None:
        super().__init__(record_attempts=record)

    def hooks(self, worker: WorkerView) -> Hooks:
        from ._hooks import expired, record, settling_for

        recording = bool(worker.options["record_attempts"])
        return Hooks(
            before_recover=expired,
            attempt_end=record,
            in_use=lambda: recording,
            settling=settling_for(worker.backend.dialect),
        )

    def ending_hooks(self) -> Hooks:
        from ._hooks import record

        return Hooks(attempt_end=record)

    def components(self, worker: WorkerView) -> Sequence[Component]:
        return (RollupComponent(worker.backend, worker.worker_id, report=worker.report),)
