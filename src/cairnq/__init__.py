"""cairnq: a durable task runtime for Python on SQLite and PostgreSQL.

Example::

    from cairnq import CairnQ, Worker

    worker = Worker.sqlite("tasks.db")

    @worker.task
    async def add(ctx, payload):
        return payload["a"] + payload["b"]

    async with CairnQ.sqlite("tasks.db") as cq, worker.background():
        assert await cq.call("add", {"a": 1, "b": 2}) == 3

``__all__`` is the kernel's surface: the clients, the worker, the store layer, the
models, the errors. What belongs to one feature is imported from its module:
``cairnq.limits`` (``Limit``, ``LimitUsage``, ``LimitKeyError``, ``Limits``),
``cairnq.flow`` (``Snooze``, ``Snoozes``, ``Pause``, ``Snoozing``), ``cairnq.history``
(``Attempt``, ``StepRecord``, ``History``), ``cairnq.schedules`` (``Schedule``,
``ScheduleSlot``), and every extension from ``cairnq.extensions``. Those names are
still importable from ``cairnq`` itself (``from cairnq import Limit``), outside
``__all__``.
"""

from typing import TYPE_CHECKING, Any

from ._deprecated import CairnQDeprecationWarning
from ._lazy import exports as _exports
from .backends import (
    Backend,
    PgExecutor,
    PgSession,
    SQLiteBackend,
    create_pool_executor,
    open_backend,
)
from .backoff import Retry
from .client import CairnQ, WatchSignal
from .errors import (
    AlreadyExists,
    CairnQError,
    DatabaseBusy,
    DatabaseError,
    DatabaseUnavailable,
    EventLoopBlocked,
    EventLoopMismatch,
    InvalidArgument,
    InvalidExtension,
    InvalidGraph,
    ListenUnavailable,
    LostLease,
    ProtocolVersionMismatch,
    QueueFull,
    SchemaIncomplete,
    SchemaMismatch,
    SerializationError,
    StoreClosed,
    TaskCanceled,
    TaskError,
    TaskFailed,
    TaskTimeout,
    UnservedTaskWarning,
    UnsupportedBackend,
    error_envelope,
)
from .kernel.retention import Retention, RetentionRule
from .lineage import Lineage
from .migrate import migrate
from .models import (
    STATUSES,
    Conflict,
    QueueActivity,
    QueueSummary,
    Task,
    TaskDef,
    TaskPage,
    TaskRef,
    TaskStatus,
    UnservedTasks,
    WorkerInfo,
    is_terminal_status,
)
from .store import PostgresStore, SQLiteStore, TaskStore
from .worker import SyncTaskContext, TaskContext, TaskEvent, Worker

if TYPE_CHECKING:
    from .client import SyncCairnQ
    from .flow import Pause as Pause
    from .flow import Snooze as Snooze
    from .flow import Snoozes as Snoozes
    from .history import Attempt as Attempt
    from .history import StepRecord as StepRecord
    from .limits import Limit as Limit
    from .limits import LimitKeyError as LimitKeyError
    from .limits import LimitUsage as LimitUsage
    from .schedules import Schedule as Schedule
    from .schedules import ScheduleSlot as ScheduleSlot

# The blocking client and the features' names (and their modules) are imported when
# first asked for.
_features = _exports(
    __name__,
    {
        "Attempt": ".history",
        "Limit": ".limits",
        "LimitKeyError": ".limits",
        "LimitUsage": ".limits",
        "Pause": ".flow",
        "Schedule": ".schedules",
        "ScheduleSlot": ".schedules",
        "Snooze": ".flow",
        "Snoozes": ".flow",
        "StepRecord": ".history",
        "SyncCairnQ": ".client",
        "flow": ".flow",
        "history": ".history",
        "limits": ".limits",
        "schedules": ".schedules",
    },
)
__dir__ = _features[1]


def __getattr__(name: str) -> Any:
    # The version is read from the package metadata on first use: importing
    # importlib.metadata costs every process that never asks for it.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("cairnq")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            found = "0.0.0"
        globals()["__version__"] = found
        return found
    return _features[0](name)


__all__ = [
    # clients and worker
    "CairnQ",
    "SyncCairnQ",
    "WatchSignal",
    "Worker",
    "TaskContext",
    "SyncTaskContext",
    "TaskEvent",
    "Retention",
    "RetentionRule",
    # backends
    "Backend",
    "SQLiteBackend",
    "open_backend",
    "migrate",
    # store layer
    "TaskStore",
    "SQLiteStore",
    "PostgresStore",
    # PostgreSQL executor seam
    "PgExecutor",
    "PgSession",
    "create_pool_executor",
    # models
    "Lineage",
    "Retry",
    "CairnQDeprecationWarning",
    "STATUSES",
    "Conflict",
    "Task",
    "TaskDef",
    "TaskRef",
    "TaskStatus",
    "is_terminal_status",
    "QueueActivity",
    "QueueSummary",
    "TaskPage",
    "UnservedTasks",
    "WorkerInfo",
    # errors
    "AlreadyExists",
    "CairnQError",
    "DatabaseBusy",
    "DatabaseError",
    "DatabaseUnavailable",
    "EventLoopBlocked",
    "EventLoopMismatch",
    "InvalidArgument",
    "InvalidExtension",
    "InvalidGraph",
    "ListenUnavailable",
    "LostLease",
    "ProtocolVersionMismatch",
    "QueueFull",
    "SchemaIncomplete",
    "SchemaMismatch",
    "SerializationError",
    "StoreClosed",
    "TaskCanceled",
    "TaskError",
    "TaskFailed",
    "TaskTimeout",
    "UnservedTaskWarning",
    "UnsupportedBackend",
    "error_envelope",
    "__version__",
]
