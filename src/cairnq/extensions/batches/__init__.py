"""Batches: a group of tasks submitted at once, with callbacks submitted exactly once when
all of them ended (``on_complete``), when all succeeded (``on_success``) or when one did
not (``on_failure``).

Everything of the feature is in this folder: the operations (``_ops``: submit, add,
close, decide, sweep, the reads), the worker's part, its sweep and the ``in_use`` gate
(``_component``), the client's ``cq.batches``, ``cq.batch`` and ``cq.batch_status``
(``_client_async``, its blocking twin generated), the ``cairnq batch`` command
(``_surfaces/cli.py``), its statements (``sql/<dialect>/batches_*.sql``) and its
migration (``migrations/<dialect>/x0017_batches.sql``). ``docs/batches.md`` is the
user's guide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar
from weakref import WeakKeyDictionary

from ..._lazy import exports
from .._base import Component, Extension, Hooks, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._component import BatchesComponent as BatchesComponent
    from ._component import BatchesRun
    from ._component import BatchSweeper as BatchSweeper
    from ._component import gate as gate
    from ._ops import Batch, BatchClosed, BatchNotFound, Member
    from ._ops import after_ended as after_ended
else:
    # The operations and the worker's parts are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "Batch": "._ops",
            "BatchClosed": "._ops",
            "BatchNotFound": "._ops",
            "BatchSweeper": "._component",
            "BatchesComponent": "._component",
            "BatchesRun": "._component",
            "Member": "._ops",
            "after_ended": "._ops",
            "gate": "._component",
        },
    )

__all__ = ["Batch", "BatchClosed", "BatchNotFound", "Batches", "Member"]


class Batches(Extension):
    name = "batches"
    migrations = ("x0017_batches.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_batches": "not_task_keyed",
        # A member's row outlives its task on purpose: it keeps the outcome the
        # callbacks read (its end recorded, by the delete trigger at the latest).
        "cairnq_batch_members": "not_task_keyed",
    }
    words = ("batch_member", "on_complete")
    cli = "cairnq.extensions.batches._surfaces.cli"
    pages = "cairnq.extensions.batches._surfaces.pages"

    def __init__(self) -> None:
        self._runs: WeakKeyDictionary[WorkerView, BatchesRun] = WeakKeyDictionary()

    def run(self, worker: WorkerView) -> BatchesRun:
        """The batches state of one run of ``worker``, which its gate and its sweeper share."""
        found = self._runs.get(worker)
        if found is None:
            from ._component import BatchesRun

            found = self._runs[worker] = BatchesRun(worker.worker_id, worker.client)
        return found

    def hooks(self, worker: WorkerView) -> Hooks:
        from ._component import gate
        from ._ops import after_ended

        return Hooks(task_end=after_ended, in_use=gate(self.run(worker)))

    def ending_hooks(self) -> Hooks:
        from ._ops import after_ended

        # Outside a worker run no look keeps a gate current: record wherever ready.
        return Hooks(task_end=after_ended)

    def components(self, worker: WorkerView) -> Sequence[Component]:
        from ._component import BatchesComponent, BatchSweeper

        sweeper = BatchSweeper(worker.backend, self.run(worker), report=worker.report)
        return (BatchesComponent(sweeper),)
