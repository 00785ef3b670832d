"""The built-in extensions' context methods, composed: what ``TaskContext`` and
``SyncTaskContext`` inherit (part of the registry of the built-ins, ``_registry``).

Each mixin is in its extension's package and types ``self`` as ``_context.ContextHost``
(``SyncHost`` for the blocking ones).
"""

from __future__ import annotations

from .snooze._context import SnoozeContext, SyncSnoozeContext
from .steps._context import StepsContext, SyncStepsContext
from .workflows._context import SyncWorkflowsContext, WorkflowsContext


class BuiltinContext(SnoozeContext, StepsContext, WorkflowsContext):
    """The built-ins' methods of an async handler's context."""


class SyncBuiltinContext(SyncSnoozeContext, SyncStepsContext, SyncWorkflowsContext):
    """The built-ins' methods of a plain ``def`` handler's context."""
