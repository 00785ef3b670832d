"""What cairnq recorded of a task's runs: its attempts and its durable steps.

``Attempt`` and ``StepRecord`` are what the client's ``attempts`` and ``steps``
read back; ``ctx.step`` writes the steps.
"""

from __future__ import annotations

from .protocol.durable import OUTCOMES, Attempt, StepRecord

__all__ = ["OUTCOMES", "Attempt", "StepRecord"]
