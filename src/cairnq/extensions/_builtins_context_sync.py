# generated from src/cairnq/extensions/_builtins_context_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""The built-in extensions' context methods, blocking: ``SyncTaskContext`` inherits them."""

from __future__ import annotations

from .logs._context_sync import SyncLogsContext
from .snooze._context_sync import SyncSnoozeContext
from .steps._context_sync import SyncStepsContext
from .waits._context_sync import SyncWaitsContext
from .workflows._context_sync import SyncWorkflowsContext


class SyncBuiltinContext(
    SyncSnoozeContext, SyncStepsContext, SyncWorkflowsContext, SyncWaitsContext, SyncLogsContext
):
    """The built-ins' methods of a plain ``def`` handler's context."""
