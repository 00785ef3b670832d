"""Pauses: a queue or a task name paused across the deployment, claimed by no cairnq worker
until it is resumed.

A pause is a row of ``cairnq_pauses`` (migration ``x0007_flow.sql``, which this
extension owns and ships; it creates the snoozes' table too, which the snooze
extension needs); a timed pause has a row of ``cairnq_pause_ends`` too
(``x0021_pauses_until.sql``), and every read leaves it out once its end has
passed. Each worker reads the pauses before its first claim and every 500 ms
(``_component``, ``_filter``), and its claims leave out what is paused
(``PauseSet.unpaused``, the claim filter, in use while something is paused).

Everything of the feature is in this folder: the operations (``_ops``), the claim
filter and the worker's part, the statements (``sql/<dialect>/pauses_*.sql``) and
the migration (``migrations/<dialect>/``), the ``cairnq pause``, ``resume`` and
``paused`` commands and the dashboard's pause and resume buttons (``_surfaces/``),
which the CLI and the dashboard import by the names the extension declares
(``Extension.cli``, ``Extension.pages``). ``cairnq.flow`` re-exports ``Pause``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar
from weakref import WeakKeyDictionary

from ..._lazy import exports
from .._base import Component, Extension, Hooks, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._component import PausesComponent
    from ._filter import PauseSet
    from ._ops import Pause
else:
    # The operations and the worker's parts are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {"Pause": "._ops", "PauseSet": "._filter", "PausesComponent": "._component"},
    )

__all__ = ["Pause", "PauseSet", "Pauses", "PausesComponent"]


class Pauses(Extension):
    name = "pauses"
    # x0007 creates the snoozes' table too; snooze needs it.
    migrations = ("x0007_flow.sql", "x0021_pauses_until.sql")
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_pauses": "not_task_keyed",
        "cairnq_pause_ends": "not_task_keyed",
    }
    words = (
        "paused",
        "pause_list",
        "pause_queue",
        "pause_task",
        "cairnq_pauses",
        "cairnq_pause_ends",
        "pauses",
    )
    cli = "cairnq.extensions.pauses._surfaces.cli"
    pages = "cairnq.extensions.pauses._surfaces.pages"

    def __init__(self) -> None:
        self._runs: WeakKeyDictionary[WorkerView, PauseSet] = WeakKeyDictionary()

    def pauses(self, worker: WorkerView) -> PauseSet:
        """The pauses of one run of ``worker``, which its claim filter and its
        component share; a change wakes the run's claimer."""
        found = self._runs.get(worker)
        if found is None:
            from ._filter import PauseSet

            found = self._runs[worker] = PauseSet(
                worker.backend,
                on_change=worker.wake,
                report=worker.report,
                worker_id=worker.worker_id,
            )
        return found

    def hooks(self, worker: WorkerView) -> Hooks:
        pauses = self.pauses(worker)
        return Hooks(
            claim_filter=pauses.unpaused, in_use=lambda: bool(pauses.queues or pauses.names)
        )

    def components(self, worker: WorkerView) -> Sequence[Component]:
        from ._component import PausesComponent

        return (PausesComponent(self.pauses(worker), worker),)
