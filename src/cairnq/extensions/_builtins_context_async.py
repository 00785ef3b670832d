"""The built-in extensions' context methods, composed: what ``TaskContext`` inherits
(part of the registry of the built-ins, ``_registry``). ``SyncTaskContext`` inherits
their blocking twins, generated from this module (``_builtins_context_sync``).

Each mixin is in its extension's package (``<name>/_context_async.py``) and types
``self`` as ``_context.ContextHost``.
"""

from __future__ import annotations

from .logs._context_async import LogsContext
from .snooze._context_async import SnoozeContext
from .steps._context_async import StepsContext
from .waits._context_async import WaitsContext
from .workflows._context_async import WorkflowsContext


class BuiltinContext(SnoozeContext, StepsContext, WorkflowsContext, WaitsContext, LogsContext):
    """The built-ins' methods of an async handler's context."""
