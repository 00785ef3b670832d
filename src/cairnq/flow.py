"""Flow control a handler or an operator asks for: snoozing a task, pausing a queue or a name.

``Snooze`` is raised from a handler; ``Snoozes`` and ``Pause`` are what
``cq.snooze.get`` and ``cq.pauses.list`` read back. They live in their extensions
(``cairnq.extensions.snooze``, ``cairnq.extensions.pauses``); this module
re-exports them.
"""

from __future__ import annotations

from .extensions.pauses import Pause
from .extensions.snooze import DEFAULT_MAX_SNOOZES, Snooze, Snoozes, Snoozing

__all__ = ["DEFAULT_MAX_SNOOZES", "Pause", "Snooze", "Snoozes", "Snoozing"]
