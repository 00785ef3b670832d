"""What cairnq recorded of a task's runs: its attempts and its durable steps.

``Attempt`` and ``StepRecord`` are what ``cq.attempts.list`` and ``cq.steps.list``
read back; ``ctx.step`` writes the steps. ``AttemptLog`` is what ``cq.attempts.logs``
reads back of what ``ctx.log`` (and ``capture_logging``) kept.
"""

from __future__ import annotations

from .errors import StepsChanged
from .extensions.history import OUTCOMES, Attempt, History
from .extensions.logs import AttemptLog, AttemptLogs, LogLine, capture_logging
from .extensions.steps import StepRecord

__all__ = [
    "OUTCOMES",
    "Attempt",
    "AttemptLog",
    "AttemptLogs",
    "History",
    "LogLine",
    "StepRecord",
    "StepsChanged",
    "capture_logging",
]
