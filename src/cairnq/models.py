"""Tasks as the database stores them, and the names the protocol gives things."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, get_args

from ._json import JsonCodec

__all__ = [
    "CONFLICTS",
    "STATUSES",
    "TERMINAL_STATUSES",
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
]

TaskStatus = Literal["queued", "running", "succeeded", "failed", "canceled"]
STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "canceled"})

Conflict = Literal["reuse", "reuse-succeeded", "reject", "replace"]
CONFLICTS: tuple[Conflict, ...] = get_args(Conflict)

Row = Mapping[str, Any]

P = TypeVar("P")
R = TypeVar("R")


def is_terminal_status(status: str) -> bool:
    """Whether ``status`` is one a task never leaves on its own (succeeded, failed, canceled)."""
    return status in TERMINAL_STATUSES


HOLDER_SEPARATOR = "#"

HANDLER_TASKS = "__cairnq_tasks__"
"""The attribute a worker sets on a handler it registers: the task names it is
registered under in this process, so ``cq.submit(handler, ...)`` can name its task."""
"""What separates a worker id from its claim's nonce in the ``worker_id`` column of a
task a cairnq worker claimed (``worker_1#9f86d081884c7d65``). Worker ids never contain it."""

_NONCE_DIGITS = 16
_U64 = 1 << 64


def new_nonce() -> int:
    """A fresh claim nonce: 64 random bits, as a signed 64-bit integer."""
    return int.from_bytes(os.urandom(8), "big", signed=True)


def holder(worker_id: str, nonce: int | None) -> str:
    """The ``worker_id`` column value of a claim by ``worker_id`` with ``nonce`` (the bare
    id for a claim made without one: a store claim, as the reference makes it)."""
    if nonce is None:
        return worker_id
    return f"{worker_id}{HOLDER_SEPARATOR}{nonce % _U64:0{_NONCE_DIGITS}x}"


def parse_holder(value: str | None) -> tuple[str | None, int | None]:
    """``holder`` read back: the worker id part of a ``worker_id`` column value, and the
    claim's nonce (``None`` when the value carries none: a reference claim, a store's)."""
    if value is None:
        return None, None
    worker, sep, digits = value.rpartition(HOLDER_SEPARATOR)
    if not sep or len(digits) != _NONCE_DIGITS:
        return value, None
    try:
        unsigned = int(digits, 16)
    except ValueError:
        return value, None
    return worker, unsigned - _U64 if unsigned >= _U64 // 2 else unsigned


def worker_of(value: str | None) -> str | None:
    """The worker id a ``worker_id`` column value names (without its claim's nonce)."""
    return parse_holder(value)[0]


@dataclass(frozen=True)
class Lease:
    """What a worker holds: a task id, the attempt it claimed and the claim's nonce.

    A cairnq worker's claim writes its worker id and ``token`` (64 random bits, fresh
    for every claim statement) into the task's ``worker_id`` column, so every owned
    write is fenced by the protocol's own predicate (id, running, worker id, attempt,
    live lease) on a value no other claim of the task had: a worker id can be shared
    and an attempt repeats after ``retry(reset_attempt=True)``. ``bare``: the claim
    wrote the worker id alone (a store claim, as the reference makes it), fenced on
    (worker id, attempt) as the reference's are; ``token`` is then a nonce of this
    process's own, naming the claim in the attempt history only.
    """

    id: str
    attempt: int
    token: int
    bare: bool = False

    @classmethod
    def of(cls, row: Row) -> Lease:
        """The lease a claimed row stands for."""
        _, nonce = parse_holder(row["worker_id"])
        if nonce is None:
            return cls(str(row["id"]), int(row["attempt"]), new_nonce(), bare=True)
        return cls(str(row["id"]), int(row["attempt"]), nonce)

    def holder(self, worker_id: str) -> str:
        """The ``worker_id`` column value this lease's owned writes are fenced on."""
        return holder(worker_id, None if self.bare else self.token)


@dataclass(frozen=True)
class TaskRef:
    """A task id with its status: what ``get_status`` returns."""

    id: str
    status: TaskStatus

    @property
    def is_terminal(self) -> bool:
        """Whether the task is finished: succeeded, failed or canceled."""
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_row(cls, row: Row) -> TaskRef:
        """Build a ref from a row holding at least ``id`` and ``status``.

        Args:
            row: A mapping with ``id`` and ``status`` keys (a ``cairnq_tasks`` row).

        Returns:
            The ``TaskRef``.

        Raises:
            KeyError: the row lacks ``id`` or ``status``.

        Example::

            ref = TaskRef.from_row({"id": "task_01J...", "status": "queued"})
            assert not ref.is_terminal
        """
        return cls(id=str(row["id"]), status=row["status"])


@dataclass(frozen=True)
class Task:
    """One row of ``cairnq_tasks``, with its JSON columns decoded.

    Six fields are required: ``id``, ``name``, ``status``, ``run_at_ms``,
    ``created_at_ms`` and ``updated_at_ms`` (positionally in that order). The
    other seventeen are keyword arguments with the column defaults: ``queue``
    ``"default"``, ``metadata`` ``{}``, ``attempt`` 0, ``max_attempts`` 3,
    ``priority`` 0, every other ``None``. Fields and ``to_dict()`` keep the
    table's column order.

    ``repr()`` leaves out payload, result and metadata so logs never carry them.

    Example::

        task = Task(id="task_01J...", name="email.send", status="queued",
                    run_at_ms=0, created_at_ms=0, updated_at_ms=0)
        assert task.queued and task.max_attempts == 3
    """

    id: str
    name: str
    queue: str = field(default="default", kw_only=True)
    status: TaskStatus
    payload: Any = field(default=None, repr=False, kw_only=True)
    result: Any = field(default=None, repr=False, kw_only=True)
    error: dict[str, Any] | None = field(default=None, kw_only=True)
    metadata: Any = field(default_factory=dict, repr=False, kw_only=True)
    progress: float | None = field(default=None, kw_only=True)
    message: str | None = field(default=None, kw_only=True)
    attempt: int = field(default=0, kw_only=True)
    max_attempts: int = field(default=3, kw_only=True)
    priority: int = field(default=0, kw_only=True)
    worker_id: str | None = field(default=None, kw_only=True)
    lease_until_ms: int | None = field(default=None, kw_only=True)
    run_at_ms: int
    cancel_requested_at_ms: int | None = field(default=None, kw_only=True)
    parent_id: str | None = field(default=None, kw_only=True)
    root_id: str | None = field(default=None, kw_only=True)
    correlation_id: str | None = field(default=None, kw_only=True)
    created_at_ms: int
    updated_at_ms: int
    completed_at_ms: int | None = field(default=None, kw_only=True)

    @classmethod
    def from_row(cls, row: Row) -> Task:
        """Build a task from a database row, decoding its JSON columns.

        Raises:
            SerializationError: a JSON column holds text Python cannot read.
        """
        if type(row) is not dict and not isinstance(row, Mapping):
            # A sqlite3.Row finds each name by a scan of its columns: read them all once.
            row = dict(zip(row.keys(), row, strict=True))
        task_id = str(row["id"])
        decode = JsonCodec.decode
        return cls(
            id=task_id,
            name=row["name"],
            queue=row["queue"],
            status=row["status"],
            payload=decode(row["payload"], what="payload", task_id=task_id),
            result=decode(row["result"], what="result", task_id=task_id),
            error=decode(row["error"], what="error", task_id=task_id),
            metadata=decode(row["metadata"], what="metadata", task_id=task_id),
            progress=None if row["progress"] is None else float(row["progress"]),
            message=row["message"],
            attempt=int(row["attempt"]),
            max_attempts=int(row["max_attempts"]),
            priority=int(row["priority"]),
            worker_id=worker_of(row["worker_id"]),
            lease_until_ms=_opt_int(row["lease_until_ms"]),
            run_at_ms=int(row["run_at_ms"]),
            cancel_requested_at_ms=_opt_int(row["cancel_requested_at_ms"]),
            parent_id=row["parent_id"],
            root_id=row["root_id"],
            correlation_id=row["correlation_id"],
            created_at_ms=int(row["created_at_ms"]),
            updated_at_ms=int(row["updated_at_ms"]),
            completed_at_ms=_opt_int(row["completed_at_ms"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """Every column as a plain dict, JSON columns decoded."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @property
    def is_queued(self) -> bool:
        """Whether the task waits to be claimed (also spelled ``queued``)."""
        return self.status == "queued"

    @property
    def is_running(self) -> bool:
        """Whether a worker holds the task (also spelled ``running``)."""
        return self.status == "running"

    @property
    def is_succeeded(self) -> bool:
        """Whether the task ended with a result (also spelled ``succeeded``)."""
        return self.status == "succeeded"

    @property
    def is_failed(self) -> bool:
        """Whether the task ended failed (also spelled ``failed``)."""
        return self.status == "failed"

    @property
    def is_canceled(self) -> bool:
        """Whether the task ended canceled (also spelled ``canceled``)."""
        return self.status == "canceled"

    @property
    def is_terminal(self) -> bool:
        """Whether the task is finished: succeeded, failed or canceled."""
        return self.status in TERMINAL_STATUSES

    # The reference SDK's spellings of the predicates above.
    queued = is_queued
    running = is_running
    succeeded = is_succeeded
    failed = is_failed
    canceled = is_canceled

    @property
    def cancel_requested(self) -> bool:
        """Whether a cancel was asked for while the task was running."""
        return self.cancel_requested_at_ms is not None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class TaskDef(Generic[P, R]):
    """A task name with submit defaults, shared by the code that submits and the worker.

    Example::

        resize = TaskDef[dict, dict]("images.resize", queue="media", max_attempts=5)

        @worker.task(resize)
        async def do_resize(ctx, payload): ...

        result = await cq.call(resize, {"width": 640})

    ``retry`` (a ``cairnq.Retry``) and ``timeout`` (a duration: how long one run
    may take) are the handler's policies (``docs/policies.md``): the worker that
    registers the definition applies them, and a client submitting it writes
    ``max_attempts`` (this one's or the retry policy's) into the task. They are
    checked where the definition is used: ``@worker.task(defn)`` and ``submit``.
    """

    name: str
    queue: str | None = None
    max_attempts: int | None = None
    priority: int | None = None
    options: Mapping[str, Any] | None = field(default=None, hash=False)
    """Further ``submit`` keywords, the defaults of every submit of this task that does
    not give its own (those of the built-in extensions' that ``submit`` lists as taken
    here); ``None``: none."""
    retry: Any = None
    timeout: Any = None


# --- read models for dashboards and metrics -------------------------------------------------


@dataclass(frozen=True)
class QueueSummary:
    """One queue at a glance: what ``CairnQ.overview()`` returns, one per queue.

    Attributes:
        queue: The queue name.
        counts: Tasks per status, one entry for every status in ``STATUSES`` (0 when none).
        oldest_queued_age_ms: How long the oldest *due* queued task has been waiting
            (now minus its ``run_at_ms``); ``None`` when no queued task is due.
            Tasks delayed into the future do not count: they are not late.
        due: The due backlog: queued tasks whose ``run_at_ms`` has come, those a
            worker of the queue could claim now (the signal an autoscaler reads).
    """

    queue: str
    counts: dict[str, int]
    oldest_queued_age_ms: int | None
    due: int = 0

    @property
    def total(self) -> int:
        """Every task of the queue, whatever its status."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class TaskPage:
    """One page of a keyset-paginated task listing (``CairnQ.list_page``), newest first by id.

    The tasks leave out ``payload``, ``result`` and ``metadata`` (they read as
    ``None``): a listing never loads large values; ``get`` reads one task whole.
    ``next_cursor`` is an opaque string to pass back as ``cursor`` for the next
    (older) page, ``None`` on the last page.
    """

    tasks: list[Task]
    next_cursor: str | None


@dataclass(frozen=True)
class QueueActivity:
    """Tasks of one queue finished per time bucket (``CairnQ.activity``), oldest bucket first.

    Bucket ``i`` covers ``[start_ms + i * bucket_ms, start_ms + (i + 1) * bucket_ms)``
    by ``completed_at_ms``; each tuple has one count per bucket.
    """

    queue: str
    start_ms: int
    bucket_ms: int
    succeeded: tuple[int, ...]
    failed: tuple[int, ...]
    canceled: tuple[int, ...]

    @property
    def finished(self) -> int:
        """Tasks finished over the whole window, any terminal status."""
        return sum(self.succeeded) + sum(self.failed) + sum(self.canceled)

    @property
    def failure_rate(self) -> float | None:
        """Failed over succeeded plus failed in the window; ``None`` when neither happened."""
        ended = sum(self.succeeded) + sum(self.failed)
        return None if ended == 0 else sum(self.failed) / ended


@dataclass(frozen=True)
class WorkerInfo:
    """A worker as the database sees it (``cq.presence.workers``).

    cairnq workers record themselves (``last_seen_ms`` and the fields after it
    are set); workers of other SDKs are known only from the tasks they hold, so
    those fields are ``None`` for them. ``running`` lists the tasks it holds a
    live lease on, without payload, result or metadata.
    """

    worker_id: str
    running: tuple[Task, ...]
    queues: tuple[str, ...] | None = None
    host: str | None = None
    pid: int | None = None
    concurrency: int | None = None
    started_at_ms: int | None = None
    last_seen_ms: int | None = None


@dataclass(frozen=True)
class UnservedTasks:
    """Due queued tasks of one name on one queue that no live cairnq worker serves
    (``cq.presence.unserved``).

    ``count`` is capped: ``capped`` says it is the cap, so there may be more.
    ``oldest_run_at_ms`` is the earliest ``run_at_ms`` among the tasks counted.
    ``queue_served`` is ``False`` when no live cairnq worker serves the queue at
    all (a queue nobody serves), ``True`` when workers serve the queue but none
    has a handler for the name (a name nobody handles).
    """

    queue: str
    name: str
    count: int
    capped: bool
    oldest_run_at_ms: int | None
    queue_served: bool

    def describe(self) -> str:
        """``email.send on default: 3 queued, no live worker serves it`` (one line)."""
        many = f"{self.count}+" if self.capped else str(self.count)
        why = (
            "no live worker has a handler for it"
            if self.queue_served
            else "no live worker serves the queue"
        )
        return f"{self.name} on {self.queue}: {many} queued, {why}"
