"""What a handler sees of its task: ``TaskContext`` (async) and ``SyncTaskContext``.

``TaskContext`` and what every context of one worker shares are written in
``_context_async``; ``SyncTaskContext`` is generated from it (``_context_sync``).
"""

from __future__ import annotations

from ._context_async import (
    CallScope,
    GroupSettler,
    Listener,
    Runtime,
    TaskContext,
    envelope_for,
)
from ._context_sync import SyncTaskContext

__all__ = [
    "CallScope",
    "GroupSettler",
    "Listener",
    "Runtime",
    "SyncTaskContext",
    "TaskContext",
    "envelope_for",
]
