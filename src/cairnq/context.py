"""The task context a handler receives, importable as ``cairnq.context``.

``from cairnq.context import TaskContext`` is the reference SDK's import path;
``from cairnq import TaskContext`` is cairnq's. Both name the same class.

Example::

    from cairnq.context import TaskContext

    @worker.task
    async def resize(ctx: TaskContext, payload: dict) -> None:
        await ctx.progress(0.5, "halfway")
"""

from __future__ import annotations

from .worker import SyncTaskContext, TaskContext

__all__ = ["SyncTaskContext", "TaskContext"]
