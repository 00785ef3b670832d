"""Schedules: periodic tasks, one per slot, evaluated by every cairnq worker under a named lease.

A schedule is stored in the database (``cairnq_schedules``, migration
``x0005_schedules.sql``): declared by a worker (``@worker.periodic``,
``worker.schedule``) or added by a client or ``cairnq schedules add``. Each slot's
decision is recorded once (``cairnq_schedule_slots``) in the transaction that
submits its task, so a slot submits at most one task however many processes
evaluate; see ``cairnq.protocol.schedules``.
"""

from ._model import CATCH_UP_POLICIES, OUTCOMES, OVERLAPS, Schedule, ScheduleSlot, ScheduleSpec
from ._timing import Timing

__all__ = [
    "CATCH_UP_POLICIES",
    "OUTCOMES",
    "OVERLAPS",
    "Schedule",
    "ScheduleSlot",
    "ScheduleSpec",
    "Timing",
]
