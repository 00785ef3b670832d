"""The exceptions cairnq raises, and the error envelope stored in failed tasks.

::

    CairnQError
    ├── InvalidArgument (also ValueError)       a bad argument, rejected before any write
    │   ├── SerializationError (a ValueError)   a value that is not portable JSON
    │   ├── InvalidGraph                        a cycle, a missing node or dependency
    │   └── InvalidExtension                    an extension declared against the rules
    ├── AlreadyExists                           keyed submit under conflict="reject"
    ├── QueueFull                               backpressure wait ran out
    ├── TaskTimeout (not an OSError)            wait/call gave up; the task keeps going
    ├── TaskFailed                              call() on a task that ended failed
    ├── TaskCanceled                            call() on a task that ended canceled
    ├── TaskError                               raised by handlers to fail a task on purpose
    ├── LostLease                               an owned write no longer owns the task
    ├── EventLoopBlocked                        a handler held the worker's event loop
    ├── EventLoopMismatch (also RuntimeError)   a client or worker called from a loop not its own
    ├── ProtocolVersionMismatch                 the database speaks another protocol
    ├── SchemaMismatch                          PostgreSQL: another installation is visible
    ├── UnsupportedBackend                      the backend cannot do this at all
    ├── StoreClosed                             the client or backend was closed
    ├── ListenUnavailable                       PostgreSQL LISTEN cannot work here
    └── DatabaseError                           the database refused; translated driver errors
        ├── DatabaseBusy                        SQLite: the write lock stayed taken past the budget
        ├── DatabaseUnavailable                 the database cannot be reached or opened
        └── SchemaIncomplete                    cairnq's tables (or indexes...) are missing

    UnservedTaskWarning (a UserWarning)         submit(warn_unserved=True): no live worker
                                                serves that task name on that queue

Beside ``CairnQError`` only three classes have a built-in base, each on purpose:
``InvalidArgument`` is a ``ValueError``, as the reference SDK's bad arguments are
plain ``ValueError``; ``SerializationError`` is an ``InvalidArgument``, because a
payload, metadata or result that is not portable JSON is a bad argument, rejected
before anything is written (``except ValueError`` catches it, as it catches
``json.dumps``'s own refusals); ``EventLoopMismatch`` is a ``RuntimeError``, like
asyncio's own loop errors. ``TaskTimeout`` is deliberately *not* a
``TimeoutError``: that is an ``OSError``, and a task that is still queued or
running is no operating-system failure, so ``except OSError`` (or
``except TimeoutError``) around network code never swallows it. Catch
``TaskTimeout`` (or ``CairnQError``), as with the reference SDK.

Every driver exception is translated into a ``DatabaseError`` in one place per
backend, so callers never need to import ``sqlite3`` or ``psycopg`` to catch one.

Errors that say the call itself is wrong, so that making it again can never
succeed, are ``permanent``: ``InvalidArgument`` and its subclasses (a bad
argument, a value no store can hold) and ``UnsupportedBackend``. One escaping a
handler fails its task at once, whatever ``max_attempts`` is left, with a
``misuse`` envelope, and a step does not retry it (``is_permanent``). Transient
errors (``DatabaseError``, ``LostLease``) and the handler's own exceptions are
retried as before; a ``TaskError`` records the envelope it carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
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
    "is_permanent",
]


class CairnQError(Exception):
    """Base class of every error cairnq raises."""

    permanent: ClassVar[bool] = False
    """Whether making the same call again can never succeed (see ``is_permanent``)."""


class InvalidArgument(CairnQError, ValueError):
    """An argument was rejected before anything was written.

    Permanent: raised out of a handler (by cairnq or by the handler's own code),
    it fails the task at once instead of being retried.
    """

    permanent = True


class SerializationError(InvalidArgument):
    """A value cannot cross the JSON boundary unchanged.

    Raised for NaN and infinities, lone surrogates, NUL characters, an object
    whose keys would be written twice (``{"1": 0, 1: 0}``), nesting deeper than
    the configured limit, values JSON cannot represent, and encoded payloads
    over the configured size. Also raised when a stored row holds JSON that
    Python cannot read back.
    """

    def __init__(self, message: str, *, task_id: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id


class InvalidGraph(InvalidArgument):
    """A workflow that cannot be stored as given; nothing was written.

    A cycle among a graph's nodes, a node depending on a node the graph does not
    define, or a dependency (``depends_on``, ``gather``) on a task that does not
    exist or was purged.

    Attributes:
        missing: The node names or task ids not found (empty for a cycle).
        cycle: The nodes of one cycle as a closed path, ``["a", "b", "a"]``
            (empty when the graph is acyclic).
    """

    def __init__(
        self, message: str, *, missing: Sequence[str] = (), cycle: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.missing = tuple(missing)
        self.cycle = tuple(cycle)


class InvalidExtension(InvalidArgument):
    """An extension declared against cairnq's rules, refused before anything of it
    is loaded or applied: a name taken or malformed, a migration not named
    ``x_<extension>_NNNN_<what>.sql`` or not declared, a statement not named
    ``<extension>_*``, a table not named ``cairnq_<extension>_*``, or a statement or
    migration name another folder defines. A client raises it too when asked for
    the namespace (``cq.extension(...)``) of an extension it was not given.

    Attributes:
        extension: The extension's name.
    """

    def __init__(self, message: str, *, extension: str) -> None:
        super().__init__(f"extension {extension}: {message}")
        self.extension = extension


class AlreadyExists(CairnQError):
    """A keyed submit with ``conflict="reject"`` found the key taken."""

    def __init__(self, key: str) -> None:
        super().__init__(f"task with key {key!r} already exists")
        self.key = key


class QueueFull(CairnQError):
    """A queue stayed at its ``max_queue_depth`` for longer than the wait allowed."""

    def __init__(self, queue: str, max_depth: int, waited_ms: int) -> None:
        super().__init__(
            f"queue {queue!r} is full (max_queue_depth={max_depth}); waited {waited_ms} ms"
        )
        self.queue = queue
        self.max_depth = max_depth
        self.waited_ms = waited_ms


class TaskTimeout(CairnQError):
    """``wait`` or ``call`` gave up before the task finished.

    Not a ``TimeoutError`` (an ``OSError``): catch ``TaskTimeout`` itself.

    The task itself is unaffected and may still finish later. ``task`` holds
    the last snapshot read, when there was one.
    """

    def __init__(
        self,
        task_id: str | None,
        *,
        timeout_ms: int,
        task: Any = None,
        key: str | None = None,
        detail: str = "",
    ) -> None:
        what = f"task {task_id}" if task_id else f"key {key}"
        message = f"{what} did not finish within {timeout_ms}ms"
        if detail:
            message = f"{message}: {detail}"
        super().__init__(message)
        self.task_id = task_id
        self.timeout_ms = timeout_ms
        self.task = task
        self.key = key


class TaskFailed(CairnQError):
    """``call`` waited on a task that ended ``failed``; carries its error envelope."""

    def __init__(self, error: Any, *, task_id: str | None = None) -> None:
        envelope = error if isinstance(error, dict) else {}
        self.error = error
        self.task_id = task_id
        self.type: str = str(envelope.get("type") or "TaskError")
        self.code: str = str(envelope.get("code") or "task_error")
        self.message: str = str(envelope.get("message") or "task failed")
        self.retryable: bool = bool(envelope.get("retryable", False))
        details = envelope.get("details")
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        super().__init__(f"{self.type} [{self.code}]: {self.message}")


class TaskCanceled(CairnQError):
    """``call`` waited on a task that ended ``canceled``."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was canceled")
        self.task_id = task_id


class TaskError(CairnQError):
    """Raise from a handler to fail its task with a chosen envelope.

    Unlike other exceptions (recorded as a retryable ``handler_error``, or a
    ``misuse`` when ``is_permanent``), a ``TaskError`` carries the envelope it
    is given, and is final unless ``retryable=True`` is given.

    Example::

        @worker.task
        async def charge(ctx, payload):
            if payload["amount"] <= 0:
                raise TaskError("amount must be positive", code="bad_amount")
    """

    def __init__(
        self,
        message: str = "task failed",
        *,
        code: str = "task_error",
        retryable: bool = False,
        type: str = "TaskError",
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.type = type
        self.details = dict(details or {})

    def envelope(self) -> dict[str, Any]:
        """The error envelope this exception records."""
        return error_envelope(
            self.type, self.code, self.message, retryable=self.retryable, details=self.details
        )


class StepsChanged(TaskError):
    """A retry met durable steps its handler's code no longer matches; the task fails.

    Raised by ``ctx.step`` (and ``ctx.patched``) when the steps an earlier attempt
    recorded were recorded by another version of the handler
    (``@worker.task(version=...)``), or stood in another order: a recorded step
    whose name now comes at another position, or another step's name at this
    one. A recorded result is never handed to a different step: the attempt
    fails for good with the envelope ``steps_changed``, whose ``details`` say
    what was recorded and what the code asked for (``docs/cancel-and-versions.md``).
    """

    def __init__(self, message: str, *, details: dict[str, Any]) -> None:
        super().__init__(
            message, code="steps_changed", retryable=False, type="StepsChanged", details=details
        )


class LostLease(CairnQError):
    """The worker no longer owns the task (or never did): the write changed nothing.

    The message says which: the lease was lost (it ran out, or the task was
    recovered), or the worker id given does not own the task (another worker
    holds it, or it is not running).
    """

    def __init__(self, task_id: str, message: str | None = None) -> None:
        super().__init__(message or f"lease on task {task_id} was lost")
        self.task_id = task_id


class EventLoopBlocked(CairnQError):
    """The worker's event loop was held far longer than a heartbeat interval.

    Reported through the worker's ``on_error`` hook, never raised into handlers.
    A handler that blocks the loop (a sync call inside ``async def``) delays every
    heartbeat and can cost leases.
    """

    def __init__(self, gap_ms: int, interval_ms: int) -> None:
        super().__init__(
            f"event loop was blocked for ~{gap_ms} ms (heartbeat interval {interval_ms} ms); "
            "move blocking work out of async handlers or register them as plain def"
        )
        self.gap_ms = gap_ms
        self.interval_ms = interval_ms


class EventLoopMismatch(CairnQError, RuntimeError):
    """An async client, worker or backend was called from an event loop not its own.

    Its connections, locks and background tasks belong to the event loop that
    first used it; from any other loop they would wait on futures that loop
    never wakes. Create one ``CairnQ`` (or ``Worker``) per event loop, or use
    ``SyncCairnQ`` from threads. Closing is also accepted from another loop
    once the owning loop is closed.
    """


class ProtocolVersionMismatch(CairnQError):
    """The database was written by an incompatible protocol version."""


class SchemaMismatch(CairnQError):
    """PostgreSQL: this connection does not see the cairnq installation it should."""


class UnsupportedBackend(CairnQError):
    """The backend cannot do this, whatever the arguments (e.g. ``succeed_in`` on SQLite).

    Permanent, like ``InvalidArgument``: out of a handler, it fails the task at once.
    """

    permanent = True


class StoreClosed(CairnQError):
    """The client, worker or backend was used after ``close()``."""


class ListenUnavailable(CairnQError):
    """PostgreSQL LISTEN cannot work on this connection (e.g. behind a transaction pooler)."""


class DatabaseError(CairnQError):
    """The database refused an operation. ``retryable`` tells whether trying again may help."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class DatabaseBusy(DatabaseError):
    """SQLite: another connection held the write lock for longer than ``busy_timeout_ms``."""

    retryable = True


class DatabaseUnavailable(DatabaseError):
    """The database could not be reached or opened."""

    retryable = True


class SchemaIncomplete(DatabaseError):
    """Tables, indexes or triggers cairnq needs are missing; never retryable.

    Raised when a statement meets a missing cairnq table (a database never
    migrated, or tables dropped from outside), and when opening or migrating
    finds objects missing that the migration ledger records as created.
    Trying again cannot help: ``cairnq migrate`` says what is missing, and
    ``cairnq migrate --repair`` (``migrate(..., repair=True)``) re-creates it.
    A worker that meets it stops and raises it from ``run``.

    Attributes:
        missing: What is missing, e.g. ``("table cairnq_tasks",)``, when known.
    """

    retryable = False

    def __init__(self, message: str, *, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing


class UnservedTaskWarning(UserWarning):
    """A task was submitted that no live cairnq worker serves (``submit(warn_unserved=True)``).

    The task is stored all the same; it waits until a worker serving its name on
    its queue starts. Workers of other SDKs publish no presence, so a queue served
    only by them warns too: pass ``warn_unserved=False`` (the library default) or
    silence the category with ``warnings.filterwarnings``.

    Attributes:
        task_id: The submitted task.
        name: Its task name.
        queue: Its queue.
    """

    def __init__(self, message: str, *, task_id: str, name: str, queue: str) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.name = name
        self.queue = queue


def is_permanent(exc: BaseException) -> bool:
    """Whether ``exc`` says a call can never succeed, however often it is made again.

    The one rule a worker applies to an exception escaping a handler: a
    permanent one (``InvalidArgument`` and its subclasses, ``UnsupportedBackend``)
    fails the task at once with a ``misuse`` envelope, and a step's ``retries``
    do not retry it. Only the exception that escapes counts (one wrapping a
    permanent error as its ``__cause__`` is not permanent), and whoever raised
    it: a handler's own ``raise InvalidArgument(...)`` fails its task at once too.
    Transient errors (``DatabaseError``, ``LostLease``) and every exception that is
    not a ``CairnQError`` are not permanent.
    """
    return isinstance(exc, CairnQError) and exc.permanent


def error_envelope(
    type: str,
    code: str,
    message: str,
    *,
    retryable: bool = False,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the JSON error envelope stored in a task's ``error`` column.

    ``type``, ``code`` and ``message`` are made strings (``safe_str``); what no
    store can hold in them is escaped when the worker records the envelope.

    Args:
        type: A class-like name, e.g. ``"ValueError"`` or ``"LeaseExpired"``.
        code: A stable machine code, e.g. ``"handler_error"``.
        message: Human-readable text.
        retryable: Whether the failure was considered transient.
        details: Extra JSON-safe fields.

    Returns:
        ``{"type", "code", "message", "retryable", "details"}``.
    """
    return {
        "type": safe_str(type),
        "code": safe_str(code),
        "message": safe_str(message),
        "retryable": retryable,
        "details": dict(details or {}),
    }


def safe_str(value: Any) -> str:
    """``str(value)``, or a stand-in naming its type when ``str()`` itself raises.

    A failure is recorded whatever the failing object does: an exception whose
    ``__str__`` raises still leaves a readable envelope.
    """
    if type(value) is str:
        return value
    try:
        return str(value)
    except Exception as exc:
        return f"<unprintable {type(value).__name__}: str() raised {type(exc).__name__}>"
