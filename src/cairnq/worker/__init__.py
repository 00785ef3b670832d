"""The worker: claims tasks, runs their handlers, keeps their leases, settles them."""

from ._context import SyncTaskContext, TaskContext
from ._isolating import ChildContext
from ._task_events import TaskEvent
from ._worker import Worker

__all__ = ["ChildContext", "SyncTaskContext", "TaskContext", "TaskEvent", "Worker"]
