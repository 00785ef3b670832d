"""Schedules: periodic tasks, one per slot, evaluated by every cairnq worker under a named lease.

The feature lives in ``cairnq.extensions.schedules``; this package re-exports its
public names where they have always been imported from.
"""

from ..extensions.schedules import (
    CATCH_UP_POLICIES,
    OUTCOMES,
    OVERLAPS,
    Schedule,
    ScheduleKeywords,
    ScheduleOptions,
    ScheduleSlot,
    ScheduleSpec,
    Timing,
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
    "Timing",
]
