"""Schedules: periodic tasks, one per slot, evaluated by every cairnq worker under a named lease.

A schedule is stored in the database (``cairnq_schedules``, migration
``x0005_schedules.sql``): declared by a worker (``@worker.periodic``,
``worker.schedule``) or added by a client or ``cairnq schedules add``. Each slot's
decision is recorded once (``cairnq_schedule_slots``) in the transaction that
submits its task, so a slot submits at most one task however many processes
evaluate (``_ops.evaluate``).

A schedule's options (``ScheduleOptions``, or the same names as keywords,
``ScheduleKeywords``) are one object every entry takes, checked in one place.

Everything of the feature is in this folder: the model (``_model``, ``_timing``,
``_plan``), the operations (``_ops``), the worker's evaluator (``_scheduler``) and
API (``_worker``: ``periodic``, ``schedule``, ``schedules``, mixed into the worker), its
statements (``sql/<dialect>/schedule_*.sql``) and migration
(``migrations/<dialect>/x0005_schedules.sql``), the ``cairnq schedules`` commands
and the dashboard's pages (``_surfaces/``, with ``templates/``). The CLI and the
dashboard, above the extensions, import those two by the names the extension
declares (``Extension.cli``, ``Extension.pages``). ``cairnq.schedules`` re-exports
the public names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from ..._lazy import exports
from .._base import Component, Extension, Option, Part, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._model import (
        CATCH_UP_POLICIES,
        OUTCOMES,
        OVERLAPS,
        Schedule,
        ScheduleKeywords,
        ScheduleOptions,
        ScheduleSlot,
        ScheduleSpec,
    )
    from ._scheduler import Scheduler
    from ._timing import Timing
else:
    # The model and the scheduler are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "CATCH_UP_POLICIES": "._model",
            "OUTCOMES": "._model",
            "OVERLAPS": "._model",
            "Schedule": "._model",
            "ScheduleKeywords": "._model",
            "ScheduleOptions": "._model",
            "ScheduleSlot": "._model",
            "ScheduleSpec": "._model",
            "Scheduler": "._scheduler",
            "Timing": "._timing",
        },
    )

__all__ = [
    "CATCH_UP_POLICIES",
    "OUTCOMES",
    "OVERLAPS",
    "Schedule",
    "ScheduleKeywords",
    "ScheduleOptions",
    "ScheduleSlot",
    "ScheduleSpec",
    "Schedules",
    "SchedulesComponent",
    "Timing",
]


class SchedulesComponent(Part):
    """Prepare stores the declared schedules (their tables missing: one line, no job);
    the job evaluates them under its named lease."""

    name = "schedules"

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    async def prepare(self) -> None:
        await self.scheduler.prepare()
        # Without the schedules tables there is nothing to evaluate.
        self.job = None if self.scheduler.absent else self.scheduler.job


class Schedules(Extension):
    """Evaluates the database's schedules (unless ``Schedules(evaluate=False)``), and
    stores the worker's declared ones (``declared``, by name) when it starts.

    Args:
        evaluate: Evaluate the database's schedules: every worker may, one at a
            time under a named lease. ``False`` leaves it to other workers; the
            schedules this worker declares are then not stored either.

    Example::

        worker = Worker(cq, extensions=[Schedules(evaluate=False)])
    """

    name = "schedules"
    migrations = ("x0005_schedules.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_schedules": "not_task_keyed",
        "cairnq_schedule_slots": "not_task_keyed",
    }
    words = ("schedule",)
    cli = "cairnq.extensions.schedules._surfaces.cli"
    pages = "cairnq.extensions.schedules._surfaces.pages"
    says_when_missing = True  # the scheduler's line
    options: ClassVar[Mapping[str, Option]] = {"schedules": Option(True, bool)}

    def __init__(self, *, evaluate: bool = True) -> None:
        super().__init__(schedules=evaluate)
        self.declared: dict[str, ScheduleSpec] = {}

    def components(self, worker: WorkerView) -> Sequence[Component]:
        if not worker.options["schedules"]:
            return ()
        from ._scheduler import Scheduler

        scheduler = Scheduler(
            worker.backend,
            worker.codec,
            list(self.declared.values()),
            report=worker.report,
            worker_id=worker.worker_id,
        )
        return (SchedulesComponent(scheduler),)
