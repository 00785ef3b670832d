"""What cairnq recorded of a task's runs: its attempts and its durable steps.

``Attempt`` and ``StepRecord`` are what ``cq.attempts.list`` and ``cq.steps.list``
read back; ``ctx.step`` writes the steps.
"""

from __future__ import annotations

from .errors import StepsChanged
from .extensions.history import OUTCOMES, Attempt, History
from .extensions.steps import StepRecord

__all__ = ["OUTCOMES", "Attempt", "History", "StepRecord", "StepsChanged"]
