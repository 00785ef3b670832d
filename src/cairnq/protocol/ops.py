"""The domain, written once: every protocol operation as a statement-yielding generator.

Nothing here does IO. Each function validates its inputs eagerly (so bad input
raises before a transaction opens), then returns a generator the backend drives
(see ``steps``). The generator decides every branch of the protocol: key
conflicts, recover-then-claim, cancel wins, ownership checks that turn zero rows
into ``LostLease``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .. import _ids

# ``X as X``: callers import the argument checks and ``Lease`` from here too.
from .._checks import MAX_DELAY_MS as MAX_DELAY_MS
from .._checks import MAX_IDENTIFIER_BYTES as MAX_IDENTIFIER_BYTES
from .._checks import MAX_INT4 as MAX_INT4
from .._checks import MAX_LIST_LIMIT as MAX_LIST_LIMIT
from .._checks import MAX_TEXT_BYTES as MAX_TEXT_BYTES
from .._checks import SCHEMA_NAME as SCHEMA_NAME
from .._checks import SYSTEM_SCHEMA_REASON as SYSTEM_SCHEMA_REASON
from .._checks import check_int as check_int
from .._checks import check_names as check_names
from .._checks import check_schema as check_schema
from .._checks import check_status as check_status
from .._checks import check_text as check_text
from .._checks import system_schema as system_schema
from .._json import JsonCodec
from ..errors import (
    AlreadyExists,
    DatabaseError,
    InvalidArgument,
    LostLease,
    ProtocolVersionMismatch,
    SchemaMismatch,
)
from ..models import CONFLICTS, STATUSES, TERMINAL_STATUSES, Task, TaskRef
from ..models import Lease as Lease
from ._points import DrawClaimer, TaskEnd
from .steps import (
    NOW,
    Call,
    Emit,
    Op,
    Row,
    Script,
    SingleStatement,
    pipelined,
    single_statement,
)

_R = TypeVar("_R")

PROTOCOL_VERSION = 1

LEASES_MIGRATION = "x0003_leases.sql"
NAMED_LEASES_MIGRATION = "x0001_locks.sql"

LEASE_EXPIRED_ERROR = (
    '{"type":"LeaseExpired","code":"lease_expired",'
    '"message":"task lease expired and max attempts reached","retryable":false,"details":{}}'
)


# --- submit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewTask:
    """A validated, encoded submission, ready for ``insert_task``."""

    id: str
    name: str
    queue: str
    payload: str
    metadata: str
    max_attempts: int
    priority: int
    delay_ms: int
    parent_id: str | None
    root_id: str
    correlation_id: str | None
    key: str | None
    conflict: str
    payload_value: Any = None
    metadata_value: Any = None

    def insert_params(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "queue": self.queue,
            "payload": self.payload,
            "metadata": self.metadata,
            "max_attempts": self.max_attempts,
            "priority": self.priority,
            "delay_ms": self.delay_ms,
            "parent_id": self.parent_id,
            "root_id": self.root_id,
            "correlation_id": self.correlation_id,
            "now_ms": NOW,
        }


def new_task(
    codec: JsonCodec,
    name: Any,
    payload: Any = None,
    *,
    key: Any = None,
    queue: Any = "default",
    conflict: Any = "reuse",
    max_attempts: Any = 3,
    priority: Any = 0,
    metadata: Any = None,
    delay_ms: Any = 0,
    parent_id: Any = None,
    root_id: Any = None,
    correlation_id: Any = None,
    task_id: str | None = None,
) -> NewTask:
    """Validate and encode one submission. Raises ``InvalidArgument`` / ``SerializationError``.

    ``task_id`` is a fresh id made beforehand (``_ids.task_ids`` for a batch); by
    default one is made here.
    """
    if conflict not in CONFLICTS:
        raise InvalidArgument(f"conflict must be one of {', '.join(CONFLICTS)}; got {conflict!r}")
    if task_id is None:
        task_id = _ids.task_id()
    return NewTask(
        id=task_id,
        name=check_text(name, "task name") or "",
        queue=check_text(queue, "queue") or "",
        payload="{}" if payload is None else codec.encode(payload, what="payload"),
        metadata="{}" if metadata is None else codec.encode(metadata, what="metadata"),
        payload_value={} if payload is None else payload,
        metadata_value={} if metadata is None else metadata,
        max_attempts=check_int(max_attempts, "max_attempts", low=1),
        priority=check_int(priority, "priority", low=-MAX_INT4 - 1),
        delay_ms=check_int(delay_ms, "delay_ms", low=0, high=MAX_DELAY_MS),
        parent_id=check_text(parent_id, "parent_id", optional=True),
        root_id=check_text(root_id, "root_id", optional=True) or task_id,
        correlation_id=check_text(correlation_id, "correlation_id", optional=True),
        key=check_text(key, "key", optional=True),
        conflict=conflict,
    )


def new_plain_task(
    codec: JsonCodec, name: str, payload: Any, task_id: str, names: set[str]
) -> NewTask:
    """``new_task(codec, name, payload, task_id=task_id)``: every option at its default.

    ``names`` holds the names already checked in this batch; a repeated name is
    not checked again.
    """
    if name not in names:
        check_text(name, "task name")
        names.add(name)
    if payload is None:
        payload = {}
        text = "{}"
    else:
        text = codec.encode(payload, what="payload")
    return NewTask(
        id=task_id,
        name=name,
        queue="default",
        payload=text,
        metadata="{}",
        max_attempts=3,
        priority=0,
        delay_ms=0,
        parent_id=None,
        root_id=task_id,
        correlation_id=None,
        key=None,
        conflict="reuse",
        payload_value=payload,
        metadata_value={},
    )


Decision = Literal["return", "insert", "reject", "replace"]


def decide_conflict(conflict: str, existing_status: str) -> Decision:
    """What a keyed submit does given the status of the task its key points at."""
    live = existing_status in ("queued", "running")
    if conflict == "reject":
        return "reject"
    if conflict == "replace":
        return "replace" if live else "insert"
    if live or (conflict == "reuse-succeeded" and existing_status == "succeeded"):
        return "return"
    return "insert"


def submit(spec: NewTask, *, task_end: TaskEnd | None = None) -> Op[Task]:
    """Submit one task, deciding its key's conflict under the key's lock.

    ``task_end``: run on the row of a task ``conflict="replace"`` cancels, in the
    same transaction (the workflow ops' hook decides its parked dependents).
    """
    if spec.key is None:
        task = yield from _insert(spec)
        return task
    key = spec.key
    yield Call("lock_key", {"key": key})
    pointer = yield Call("get_key", {"key": key})
    if pointer:
        # Locked, so a retry of that task cannot make it live again while this decides.
        rows = yield Call("get_for_update", {"id": pointer[0]["task_id"]})
        if rows:
            decision = decide_conflict(spec.conflict, rows[0]["status"])
            if decision == "return":
                return Task.from_row(rows[0])
            if decision == "reject":
                raise AlreadyExists(key)
            if decision == "replace":
                canceled = yield Call("cancel", {"id": rows[0]["id"], "now_ms": NOW})
                yield from _emit_for(canceled)
                if task_end is not None:
                    yield from task_end(canceled)
    task = yield from _insert(spec)
    yield Call("upsert_key", {"key": key, "task_id": task.id, "now_ms": NOW})
    return task


@single_statement
def insert(spec: NewTask) -> Op[Task]:
    """Submit a task without a key: one statement."""
    task = yield from _insert(spec)
    return task


@dataclass
class _Batch:
    """What a batch submit writes, decided under its key locks.

    ``existing`` maps an item's index to the task its key already points at,
    ``cancels`` lists the live tasks ``conflict="replace"`` displaces.
    """

    inserts: list[NewTask]
    existing: dict[int, str]
    cancels: list[str]
    key_rows: list[tuple[str, str]]


def _plan_many(specs: Sequence[NewTask]) -> Op[_Batch]:
    """Lock a batch's keys and decide each item as ``submit`` would, in order.

    A key used twice in one batch sees the first use. Raises ``AlreadyExists``
    before anything is written.
    """
    pointers: dict[str, tuple[str, str]] = {}
    keys = sorted({spec.key for spec in specs if spec.key is not None})
    if keys:
        keys_json = json.dumps(keys)
        yield Call("lock_keys", {"keys": keys_json}, discard=True)
        rows = yield Call("key_pointers", {"keys": keys_json})
        # The statuses the decisions use are read under the tasks' row locks, so a retry
        # cannot make a finished task live again while this decides.
        ids = sorted({r["task_id"] for r in rows if r["status"]})
        locked_status: dict[str, str] = {}
        if ids:
            locked = yield Call("lock_tasks", {"ids": ids})
            locked_status = {t["id"]: t["status"] for t in locked}
        pointers = {
            r["key"]: (r["task_id"], locked_status[r["task_id"]])
            for r in rows
            if r["task_id"] in locked_status
        }
    if not keys:
        return _Batch(list(specs), {}, [], [])
    batch = _Batch([], {}, [], [])
    for index, spec in enumerate(specs):
        if spec.key is not None and spec.key in pointers:
            current, status = pointers[spec.key]
            decision = decide_conflict(spec.conflict, status)
            if decision == "return":
                batch.existing[index] = current
                continue
            if decision == "reject":
                raise AlreadyExists(spec.key)
            if decision == "replace":
                batch.cancels.append(current)
        batch.inserts.append(spec)
        if spec.key is not None:
            pointers[spec.key] = (spec.id, "queued")
            batch.key_rows.append((spec.key, spec.id))
    return batch


def submit_many(specs: Sequence[NewTask], *, task_end: TaskEnd | None = None) -> Op[list[Task]]:
    """Submit every task in one transaction, with a handful of statements for the lot.

    Key conflicts are decided as ``submit`` decides them, in order, so a key used
    twice in one batch sees the first use. All tasks are stored, or none. A batch
    without keys is one statement (``insert_many``). ``task_end``: as for ``submit``.
    """
    if any(spec.key is not None for spec in specs):
        return _submit_many(specs, task_end)
    return _insert_many(specs)


@single_statement
def _insert_many(specs: Sequence[NewTask]) -> Op[list[Task]]:
    if not specs:
        return []
    rows = yield Call("insert_many", {"rows": _rows_json(specs), "now_ms": NOW})
    times = {r["id"]: (int(r["run_at_ms"]), int(r["created_at_ms"])) for r in rows}
    for queue in sorted({spec.queue for spec in specs}):
        yield Emit("queued", queue)
    return [_as_inserted(spec, *times[spec.id]) for spec in specs]


@pipelined
def _submit_many(specs: Sequence[NewTask], task_end: TaskEnd | None) -> Op[list[Task]]:
    batch = yield from _plan_many(specs)
    stored: dict[str, Task] = {}
    if batch.inserts:
        rows = yield Call("insert_many", {"rows": _rows_json(batch.inserts), "now_ms": NOW})
        times = {r["id"]: (int(r["run_at_ms"]), int(r["created_at_ms"])) for r in rows}
        stored = {spec.id: _as_inserted(spec, *times[spec.id]) for spec in batch.inserts}
        for queue in sorted({spec.queue for spec in batch.inserts}):
            yield Emit("queued", queue)
    canceled = yield from _cancel_replaced(batch.cancels, task_end)
    for row in canceled:
        if row["id"] in stored:
            stored[row["id"]] = Task.from_row(row)
    if batch.key_rows:
        yield Call("upsert_keys", {"rows": json.dumps(batch.key_rows), "now_ms": NOW}, discard=True)
    wanted = sorted(set(batch.existing.values()) - stored.keys())
    if wanted:
        rows = yield Call("get_many", {"ids": wanted})
        stored.update({r["id"]: Task.from_row(r) for r in rows})
    existing = batch.existing
    return [stored[existing.get(i, spec.id)] for i, spec in enumerate(specs)]


def submit_many_ids(specs: Sequence[NewTask], *, task_end: TaskEnd | None = None) -> Op[list[str]]:
    """``submit_many`` that returns only the ids, so nothing is read back after the writes.

    The rows written and the key decisions are ``submit_many``'s; a reused key
    gives the id of the task it points at. A batch without keys is one statement.
    ``task_end``: as for ``submit``.
    """
    if any(spec.key is not None for spec in specs):
        return _submit_many_ids(specs, task_end)
    return _insert_many_ids(specs)


@single_statement
def _insert_many_ids(specs: Sequence[NewTask]) -> Op[list[str]]:
    if specs:
        yield Call("insert_many_quiet", {"rows": _rows_json(specs), "now_ms": NOW})
        for queue in sorted({spec.queue for spec in specs}):
            yield Emit("queued", queue)
    return [spec.id for spec in specs]


@pipelined
def _submit_many_ids(specs: Sequence[NewTask], task_end: TaskEnd | None) -> Op[list[str]]:
    batch = yield from _plan_many(specs)
    if batch.inserts:
        rows_json = _rows_json(batch.inserts)
        yield Call("insert_many_quiet", {"rows": rows_json, "now_ms": NOW}, discard=True)
        for queue in sorted({spec.queue for spec in batch.inserts}):
            yield Emit("queued", queue)
    yield from _cancel_replaced(batch.cancels, task_end)
    if batch.key_rows:
        yield Call("upsert_keys", {"rows": json.dumps(batch.key_rows), "now_ms": NOW}, discard=True)
    existing = batch.existing
    if not existing:
        return [spec.id for spec in specs]
    return [existing.get(i, spec.id) for i, spec in enumerate(specs)]


def _cancel_replaced(task_ids: Sequence[str], task_end: TaskEnd | None) -> Op[list[Row]]:
    """Cancel the live tasks a batch's ``conflict="replace"`` displaces; their rows.

    ``task_end``: then run on the rows of those it canceled.
    """
    canceled: list[Row] = []
    for task_id in task_ids:
        rows = yield Call("cancel", {"id": task_id, "now_ms": NOW})
        yield from _emit_for(rows)
        canceled.extend(rows)
    if task_end is not None:
        yield from task_end(canceled)
    return canceled


def _rows_json(specs: Sequence[NewTask]) -> str:
    """The ``insert_many`` rows, as one JSON array (payloads travel as their JSON text)."""
    return json.dumps(
        [
            [
                s.id,
                s.name,
                s.queue,
                s.payload,
                s.metadata,
                s.max_attempts,
                s.priority,
                s.delay_ms,
                s.parent_id,
                s.root_id,
                s.correlation_id,
            ]
            for s in specs
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _as_inserted(spec: NewTask, run_at_ms: int, created_at_ms: int) -> Task:
    """The task ``insert_many`` stored, built from the submission (no payload re-read)."""
    return Task(
        id=spec.id,
        name=spec.name,
        queue=spec.queue,
        status="queued",
        payload=spec.payload_value,
        result=None,
        error=None,
        metadata=spec.metadata_value,
        progress=None,
        message=None,
        attempt=0,
        max_attempts=spec.max_attempts,
        priority=spec.priority,
        worker_id=None,
        lease_until_ms=None,
        run_at_ms=run_at_ms,
        cancel_requested_at_ms=None,
        parent_id=spec.parent_id,
        root_id=spec.root_id,
        correlation_id=spec.correlation_id,
        created_at_ms=created_at_ms,
        updated_at_ms=created_at_ms,
        completed_at_ms=None,
    )


def _insert(spec: NewTask) -> Op[Task]:
    rows = yield Call("insert_task", spec.insert_params())
    task = Task.from_row(rows[0])
    yield Emit("queued", task.queue)
    return task


def _emit_for(rows: Iterable[Row]) -> Op[None]:
    """Wake-ups for rows a statement just moved: to ``queued``, or to a terminal status."""
    for row in rows:
        status = row["status"]
        if status == "queued":
            yield Emit("queued", row["queue"])
        elif status in TERMINAL_STATUSES:
            yield Emit("done", row["id"])


# --- reads -------------------------------------------------------------------------------


def _id(task_id: Any) -> str:
    """A task id as looked up: text that could have been stored (ids are checked like names)."""
    return check_text(task_id, "task id") or ""


def _key(key: Any) -> str:
    return check_text(key, "key") or ""


def get(task_id: str) -> Op[Task | None]:
    return _get(_id(task_id))


def _get(task_id: str) -> Op[Task | None]:
    rows = yield Call("get", {"id": task_id})
    return Task.from_row(rows[0]) if rows else None


def get_by_key(key: str) -> Op[Task | None]:
    return _get_by_key(_key(key))


def _get_by_key(key: str) -> Op[Task | None]:
    rows = yield Call("get_by_key", {"key": key})
    return Task.from_row(rows[0]) if rows else None


def get_status(task_id: str) -> Op[TaskRef | None]:
    return _get_status(_id(task_id))


def _get_status(task_id: str) -> Op[TaskRef | None]:
    rows = yield Call("get_status", {"id": task_id})
    return TaskRef(rows[0]["id"], rows[0]["status"]) if rows else None


def get_status_by_key(key: str) -> Op[TaskRef | None]:
    return _get_status_by_key(_key(key))


def _get_status_by_key(key: str) -> Op[TaskRef | None]:
    rows = yield Call("get_status_by_key", {"key": key})
    return TaskRef(rows[0]["id"], rows[0]["status"]) if rows else None


def list_tasks(
    *,
    status: Any = None,
    queue: Any = None,
    name: Any = None,
    root_id: Any = None,
    correlation_id: Any = None,
    limit: Any = 100,
    offset: Any = 0,
) -> Op[list[Task]]:
    params = {
        "status": check_status(status),
        "queue": check_text(queue, "queue", optional=True),
        "name": check_text(name, "name", optional=True),
        "root_id": check_text(root_id, "root_id", optional=True),
        "correlation_id": check_text(correlation_id, "correlation_id", optional=True),
        "limit": check_int(limit, "limit", low=0, high=MAX_LIST_LIMIT),
        "offset": check_int(offset, "offset", low=0),
    }
    return _list(params)


def _list(params: dict[str, Any]) -> Op[list[Task]]:
    rows = yield Call("list", params)
    return [Task.from_row(r) for r in rows]


def stats(queue: Any = None) -> Op[dict[str, dict[str, int]]]:
    return _stats(check_text(queue, "queue", optional=True))


def _stats(queue: str | None) -> Op[dict[str, dict[str, int]]]:
    rows = yield Call("stats", {"queue": queue})
    out: dict[str, dict[str, int]] = {}
    if queue is not None:
        out[queue] = dict.fromkeys(STATUSES, 0)
    for row in rows:
        counts = out.setdefault(row["queue"], dict.fromkeys(STATUSES, 0))
        counts[row["status"]] = int(row["count"])
    return out


def queue_depth(queue: Any, max_depth: Any) -> Op[int]:
    return _queue_depth(check_text(queue, "queue") or "", check_int(max_depth, "max_depth", low=0))


def _queue_depth(queue: str, max_depth: int) -> Op[int]:
    rows = yield Call("queue_depth", {"queue": queue, "max_depth": max_depth})
    return int(rows[0]["headroom"])


def protocol_version() -> Op[int]:
    rows = yield Call("protocol_version", {})
    return int(rows[0]["value"]) if rows else 0


# --- client writes -----------------------------------------------------------------------


def cancel(task_id: str, *, task_end: TaskEnd | None = None) -> Op[Task | None]:
    """Cancel a queued task at once, or request a running one's cancel.

    ``task_end``: run on the row of a task that ends canceled here, in the same
    transaction; without it the cancel is one statement.
    """
    op = _named(_cancel(_id(task_id), task_end), "cancel")
    return op if task_end is not None else SingleStatement(op)


def _cancel(task_id: str, task_end: TaskEnd | None) -> Op[Task | None]:
    rows = yield Call("cancel", {"id": task_id, "now_ms": NOW})
    yield from _emit_for(rows)
    if task_end is not None:
        yield from task_end(rows)
    return Task.from_row(rows[0]) if rows else None


@single_statement
def retry(task_id: str, reset_attempt: bool = False) -> Op[Task | None]:
    return _retry(_id(task_id), reset_attempt)


def _retry(task_id: str, reset_attempt: bool) -> Op[Task | None]:
    rows = yield Call("retry", {"id": task_id, "now_ms": NOW, "reset_attempt": reset_attempt})
    yield from _emit_for(rows)
    return Task.from_row(rows[0]) if rows else None


def cancel_by_key(key: str, *, task_end: TaskEnd | None = None) -> Op[Task | None]:
    """``cancel`` of the task the key points at (``task_end``: as for ``cancel``)."""
    return _cancel_by_key(_key(key), task_end)


def _cancel_by_key(key: str, task_end: TaskEnd | None) -> Op[Task | None]:
    task_id = yield from _key_target(key)
    if task_id is None:
        return None
    return (yield from _cancel(task_id, task_end))


def retry_by_key(key: str, reset_attempt: bool = False) -> Op[Task | None]:
    return _retry_by_key(_key(key), reset_attempt)


def _retry_by_key(key: str, reset_attempt: bool) -> Op[Task | None]:
    task_id = yield from _key_target(key)
    if task_id is None:
        return None
    return (yield from _retry(task_id, reset_attempt))


def _key_target(key: str) -> Op[str | None]:
    yield Call("lock_key", {"key": key})
    rows = yield Call("get_key", {"key": key})
    return str(rows[0]["task_id"]) if rows else None


def purge(
    *,
    older_than_ms: Any = 0,
    queue: Any = None,
    status: Any = None,
    name: Any = None,
    limit: Any = 1000,
) -> Op[list[str]]:
    params = {
        "older_than_ms": check_int(older_than_ms, "older_than_ms", low=0, high=2**62),
        "queue": check_text(queue, "queue", optional=True),
        "status": check_status(status, terminal=True),
        "name": check_text(name, "name", optional=True),
        "limit": check_int(limit, "limit", low=1, high=MAX_LIST_LIMIT),
        "now_ms": NOW,
    }
    return _purge(params)


@single_statement
def _purge(params: dict[str, Any]) -> Op[list[str]]:
    rows = yield Call("purge", params)
    return [str(r["id"]) for r in rows]


def purge_counts(
    *,
    older_than_ms: Any = 0,
    queue: Any = None,
    status: Any = None,
    name: Any = None,
) -> Op[dict[str, int]]:
    """How many tasks ``purge`` with the same filters would delete now, per status.

    Only statuses with a match appear; an empty dict means nothing matches.
    """
    params = {
        "older_than_ms": check_int(older_than_ms, "older_than_ms", low=0, high=2**62),
        "queue": check_text(queue, "queue", optional=True),
        "status": check_status(status, terminal=True),
        "name": check_text(name, "name", optional=True),
        "now_ms": NOW,
    }
    return _purge_counts(params)


@single_statement
def _purge_counts(params: dict[str, Any]) -> Op[dict[str, int]]:
    rows = yield Call("purge_counts", params)
    return {str(r["status"]): int(r["count"]) for r in rows}


# --- worker ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Draw:
    """One claim draw inside a claim transaction: up to ``limit`` tasks of ``names``.

    ``names=None`` means any name; an empty list claims nothing.
    """

    names: Sequence[str] | None
    limit: int


def probe(queues: Sequence[str], names: Sequence[str] | None) -> Op[bool]:
    """Whether a claim transaction would find work (due tasks, or an expired lease)."""
    rows = yield Call(
        "claimable_probe",
        {"queues": list(queues), "names": None if names is None else list(names), "now_ms": NOW},
    )
    return bool(rows and rows[0]["has_work"])


@single_statement
def recover(limit: int) -> Op[list[Row]]:
    """Move up to ``limit`` expired leases out of ``running`` (any queue, any name)."""
    rows = yield Call(
        "recover_leases",
        {"now_ms": NOW, "lease_expired_error": LEASE_EXPIRED_ERROR, "limit": limit},
    )
    yield from _emit_for(rows)
    return list(rows)


def claim(
    queues: Sequence[str],
    worker_id: str,
    lease_ms: int,
    draws: Sequence[Draw],
    recover_limit: int,
    recovered: list[Row] | None = None,
    *,
    recover_with: Callable[[int], Op[list[Row]]] | None = None,
    gate: DrawClaimer | None = None,
) -> Op[list[Row]]:
    """Recover expired leases, then claim each draw, all in one transaction.

    Returns the claimed rows, undecoded (a row whose JSON cannot be read is the
    worker's to fail, not a reason to abort the whole claim), in claim order.
    ``recovered``, when given, receives the rows the recovery moved out of
    ``running``, from the attempt that committed (a retried transaction starts it over).
    ``recover_with`` replaces ``recover`` (``durable.recover`` records the attempts).
    ``gate``, when given, claims the draws it governs (``protocol.limits``' gate
    holds the limits in force); every other draw is claimed as without it.
    A ``recover_limit`` of 0 leaves expired leases to another claim or the recoverer.
    """
    if recover_limit > 0:
        rows = yield from (recover_with or recover)(recover_limit)
        if recovered is not None:
            recovered[:] = rows
    claimed: list[Row] = []
    for draw in draws:
        if draw.limit <= 0 or (draw.names is not None and not draw.names):
            continue
        governing = gate.governing(queues, draw.names) if gate is not None else []
        if gate is not None and governing:
            rows = yield from gate.claim(
                queues, draw.names, draw.limit, worker_id, lease_ms, governing
            )
            claimed.extend(rows)
            continue
        rows = yield from claim_draw(queues, draw.names, draw.limit, worker_id, lease_ms)
        claimed.extend(rows)
    return claimed


def is_lone_claim(draws: Sequence[Draw], recover_limit: int, gate: DrawClaimer | None) -> bool:
    """Whether ``claim`` with these arguments is one claim statement on PostgreSQL.

    PostgreSQL's claim statements raise the lease tokens themselves, so such a
    claim can run as one autocommitted statement (``SingleStatement``).
    """
    live = [d for d in draws if d.limit > 0 and (d.names is None or d.names)]
    return recover_limit <= 0 and gate is None and len(live) == 1


def claim_draw(
    queues: Sequence[str], names: Sequence[str] | None, limit: int, worker_id: str, lease_ms: int
) -> Op[list[Row]]:
    """Claim up to ``limit`` due tasks of ``names`` in ``queues``: one statement (and the
    lease tokens); the claimed rows in claim order."""
    statement, params = _claim_variant(queues, names)
    params.update({"now_ms": NOW, "worker_id": worker_id, "lease_ms": lease_ms, "limit": limit})
    rows = yield Call(statement, params)
    if rows and "lease_token" not in rows[0].keys():  # noqa: SIM118 (sqlite3.Row)
        rows = yield from hand_out_tokens(rows)
    return sorted(rows, key=lambda r: (-r["priority"], r["run_at_ms"], r["id"]))


def hand_out_tokens(rows: Sequence[Row]) -> Op[list[Row]]:
    """A new lease token for each claimed row, in the claim's transaction.

    PostgreSQL's claim statements raise the tokens themselves; SQLite has no
    data-modifying subqueries, so its claims are followed by ``claim_tokens``.
    """
    tokens = yield Call("claim_tokens", {"ids": [row["id"] for row in rows]})
    by_id = {t["task_id"]: t["token"] for t in tokens}
    return [{**dict(row), "lease_token": by_id[row["id"]]} for row in rows]


def _claim_variant(
    queues: Sequence[str], names: Sequence[str] | None
) -> tuple[str, dict[str, Any]]:
    """The claim statement whose equality predicates let the index serve this draw in order."""
    one_queue = len(queues) == 1
    if names is not None and len(names) == 1:
        if one_queue:
            return "claim_one_queue_one_name", {"queue": queues[0], "name": names[0]}
        return "claim_one_name", {"queues": list(queues), "name": names[0]}
    listed = None if names is None else list(names)
    if one_queue:
        return "claim_one_queue", {"queue": queues[0], "names": listed}
    return "claim", {"queues": list(queues), "names": listed}


@single_statement
def heartbeat(lease: Lease, worker_id: str, lease_ms: int) -> Op[Row]:
    rows = yield Call("heartbeat", _owned(lease, worker_id) | {"lease_ms": lease_ms})
    return _owned_row(lease, rows)


class Beat(dict[str, bool]):
    """``heartbeat_batch``'s answer: ``{task_id: cancel_requested}`` for every lease still held.

    ``renewed`` names the leases it extended. On PostgreSQL a row locked by another
    transaction (a settlement in progress, ``succeed_in``) is skipped rather than
    waited on: still held, but not renewed.
    """

    renewed: frozenset[str] = frozenset()


def heartbeat_batch(leases: Sequence[Lease], worker_id: str, lease_ms: int) -> Op[Beat]:
    """Renew every lease in one statement; returns what is held and what was renewed.

    A task absent from the result is lost. A row the statement skipped (locked
    elsewhere) is looked up without locking and counts as held if it still is.
    """
    if not leases:
        return Beat()
    rows = yield Call(
        "heartbeat_batch",
        {
            "ids": [lease.id for lease in leases],
            "attempts": [lease.attempt for lease in leases],
            "lease_tokens": [lease.token for lease in leases],
            "worker_id": worker_id,
            "now_ms": NOW,
            "lease_ms": lease_ms,
        },
    )
    held = {r["id"]: r["cancel_requested_at_ms"] is not None for r in rows}
    renewed = frozenset(held)
    missing = [lease for lease in leases if lease.id not in held]
    if missing:
        states = yield Call("lease_states", {"ids": [lease.id for lease in missing], "now_ms": NOW})
        by_id = {r["id"]: r for r in states}
        for lease in missing:
            row = by_id.get(lease.id)
            if row and _still_held(row, lease, worker_id):
                held[lease.id] = row["cancel_requested_at_ms"] is not None
    beat = Beat({lease.id: held[lease.id] for lease in leases if lease.id in held})
    beat.renewed = renewed
    return beat


def _still_held(row: Row, lease: Lease, worker_id: str) -> bool:
    return bool(
        row["status"] == "running"
        and row["worker_id"] == worker_id
        and row["attempt"] == lease.attempt
        and row["lease_token"] == lease.token
        and row["lease_live"]
    )


def cancel_requested(task_id: str) -> Op[bool]:
    """Whether a cancel is pending on the task (a missing row counts as canceled)."""
    rows = yield Call("cancel_state", {"id": task_id})
    if not rows:
        return True
    return rows[0]["cancel_requested_at_ms"] is not None or rows[0]["status"] == "canceled"


@single_statement
def progress(lease: Lease, worker_id: str, value: float | None, message: str | None) -> Op[Row]:
    rows = yield Call(
        "progress", _owned(lease, worker_id) | {"progress": value, "message": message}
    )
    return _owned_row(lease, rows)


def complete(
    lease: Lease,
    worker_id: str,
    result: str | None,
    *,
    task_end: TaskEnd | None = None,
) -> Op[Row]:
    """Settle a returned attempt: succeeded, or canceled when a cancel is pending.

    ``task_end``: run on the settled row in the same transaction (the workflow ops'
    hook decides the task's parked dependents); without it the settlement is one
    statement.
    """
    op = _named(_complete(lease, worker_id, result, task_end), "complete")
    return op if task_end is not None else SingleStatement(op)


def _complete(
    lease: Lease, worker_id: str, result: str | None, task_end: TaskEnd | None
) -> Op[Row]:
    rows = yield Call("complete", _owned(lease, worker_id) | {"result": result})
    yield from _emit_for(rows)
    if task_end is not None:
        yield from task_end(rows)
    return _owned_row(lease, rows)


def complete_many(
    leases: Sequence[Lease],
    results: Sequence[str | None],
    worker_id: str,
    *,
    task_end: TaskEnd | None = None,
) -> Op[dict[str, Row]]:
    """``complete`` for many attempts in one statement; returns the settled rows by task id.

    An attempt missing from the result was no longer owned (its lease is lost).
    Each row carries only ``id``, ``status`` and ``queue``. ``task_end``: as for
    ``complete``.
    """
    op = _named(_complete_many(leases, results, worker_id, task_end), "complete_many")
    return op if task_end is not None else SingleStatement(op)


def _complete_many(
    leases: Sequence[Lease], results: Sequence[str | None], worker_id: str, task_end: TaskEnd | None
) -> Op[dict[str, Row]]:
    rows = yield Call(
        "complete_many",
        {
            "ids": [lease.id for lease in leases],
            "attempts": [lease.attempt for lease in leases],
            "lease_tokens": [lease.token for lease in leases],
            "results": list(results),
            "worker_id": worker_id,
            "now_ms": NOW,
        },
    )
    yield from _emit_for(rows)
    if task_end is not None:
        yield from task_end(rows)
    return {str(row["id"]): row for row in rows}


def succeed(
    lease: Lease, worker_id: str, result: str | None, *, task_end: TaskEnd | None = None
) -> Op[Row]:
    """Settle as succeeded whatever cancel is pending (the low-level primitive).

    ``task_end``: as for ``complete``.
    """
    op = _named(_succeed(lease, worker_id, result, task_end), "succeed")
    return op if task_end is not None else SingleStatement(op)


def _succeed(lease: Lease, worker_id: str, result: str | None, task_end: TaskEnd | None) -> Op[Row]:
    rows = yield Call("succeed", _owned(lease, worker_id) | {"result": result, "message": None})
    yield from _emit_for(rows)
    if task_end is not None:
        yield from task_end(rows)
    return _owned_row(lease, rows)


def fail(
    lease: Lease,
    worker_id: str,
    error: str,
    *,
    retryable: bool,
    delay_ms: int,
    task_end: TaskEnd | None = None,
) -> Op[Row]:
    """Settle a failed attempt: requeued, failed, or canceled when a cancel is pending.

    ``task_end``: as for ``complete`` (the hook sees a requeued task's row too).
    """
    op = _named(_fail(lease, worker_id, error, retryable, delay_ms, task_end), "fail")
    return op if task_end is not None else SingleStatement(op)


def _fail(
    lease: Lease,
    worker_id: str,
    error: str,
    retryable: bool,
    delay_ms: int,
    task_end: TaskEnd | None,
) -> Op[Row]:
    rows = yield Call(
        "fail",
        _owned(lease, worker_id) | {"error": error, "retryable": retryable, "delay_ms": delay_ms},
    )
    yield from _emit_for(rows)
    if task_end is not None:
        yield from task_end(rows)
    return _owned_row(lease, rows)


def _named(op: Op[_R], name: str) -> Op[_R]:
    """``op`` under the operation's public name, which crash points and logs go by."""
    op.__name__ = name  # type: ignore[attr-defined]
    return op


def hold(lease: Lease, worker_id: str) -> Op[bool]:
    """Lock an owned attempt for a settlement later in the same transaction (PostgreSQL).

    Returns whether a cancel is pending. From here to the end of the transaction
    the lock is the ownership: recovery and heartbeats skip the row, and a cancel
    requested meanwhile waits, so the settlement that follows (``complete_held``)
    sees every cancel it must and needs no live lease.

    Raises:
        LostLease: the attempt is no longer owned.
    """
    rows = yield Call("hold", _owned(lease, worker_id))
    return _owned_row(lease, rows)["cancel_requested_at_ms"] is not None


def complete_held(
    lease: Lease,
    worker_id: str,
    result: str | None,
    *,
    task_end: TaskEnd | None = None,
) -> Op[Row]:
    """``complete`` for an attempt this transaction holds (``hold`` ran first).

    ``task_end``: as for ``complete``.
    """
    rows = yield Call("complete_held", _owned(lease, worker_id) | {"result": result})
    yield from _emit_for(rows)
    if task_end is not None:
        yield from task_end(rows)
    return _owned_row(lease, rows)


@single_statement
def release(lease: Lease, worker_id: str) -> Op[Row]:
    """Hand an attempt back unrun: queued again at once, its attempt not counted.

    For a worker that stops before running a task it claimed. A pending cancel
    still wins (the task ends canceled).
    """
    rows = yield Call("release", _owned(lease, worker_id))
    yield from _emit_for(rows)
    return _owned_row(lease, rows)


def _owned(lease: Lease, worker_id: str) -> dict[str, Any]:
    return {
        "id": lease.id,
        "attempt": lease.attempt,
        "lease_token": lease.token,
        "worker_id": worker_id,
        "now_ms": NOW,
    }


def _owned_row(lease: Lease, rows: Sequence[Row]) -> Row:
    """The row an owned write changed, undecoded: settling never depends on reading JSON."""
    if not rows:
        raise LostLease(lease.id)
    return rows[0]


def expired_leases_exist() -> Op[bool]:
    """Whether some running task's lease has expired (a read; any queue, any name)."""
    rows = yield Call("expired_lease_probe", {"now_ms": NOW})
    return bool(rows and rows[0]["has_expired"])


# --- named leases (extension) ------------------------------------------------------------


@single_statement
def lock_acquire(name: str, holder: str, ttl_ms: int) -> Op[bool]:
    """Take or renew a named lease; False when another holder has it."""
    rows = yield Call(
        "lock_acquire", {"name": name, "holder": holder, "now_ms": NOW, "ttl_ms": ttl_ms}
    )
    return bool(rows)


@single_statement
def lock_release(name: str, holder: str) -> Op[bool]:
    """End a named lease now, if ``holder`` has it; False when it did not."""
    rows = yield Call("lock_release", {"name": name, "holder": holder})
    return bool(rows)


def purge_exclusive(
    lock: str,
    *,
    older_than_ms: Any = 0,
    queue: Any = None,
    status: Any = None,
    name: Any = None,
    limit: Any = 1000,
) -> Op[list[str] | None]:
    """``purge`` in a transaction that first takes the one-sweeper lock ``lock``
    without ``cairnq_locks``: PostgreSQL's transaction-level advisory lock, or
    SQLite's write transaction (exclusive already).

    Returns:
        The deleted ids, or ``None`` (nothing deleted) when another transaction
        holds the lock.
    """
    params = {
        "older_than_ms": check_int(older_than_ms, "older_than_ms", low=0, high=2**62),
        "queue": check_text(queue, "queue", optional=True),
        "status": check_status(status, terminal=True),
        "name": check_text(name, "name", optional=True),
        "limit": check_int(limit, "limit", low=1, high=MAX_LIST_LIMIT),
        "now_ms": NOW,
    }
    return _purge_exclusive(check_text(lock, "lock") or "", params)


def _purge_exclusive(lock: str, params: dict[str, Any]) -> Op[list[str] | None]:
    taken = yield Call("sweep_lock", {"name": lock})
    if not taken or not taken[0]["taken"]:
        return None
    rows = yield Call("purge", params)
    return [str(r["id"]) for r in rows]


def named_leases_ready() -> Op[bool]:
    """Whether the database has the named leases (``cairnq_locks``, ``x0001_locks.sql``)."""
    applied = yield from applied_migrations()
    return NAMED_LEASES_MIGRATION in applied


# --- migrations --------------------------------------------------------------------------


def applied_migrations() -> Op[set[str]]:
    rows = yield Call("ledger_applied", {})
    return {str(r["name"]) for r in rows}


def check_lease_tokens() -> Op[None]:
    """Refuse to claim on a database without cairnq's lease tokens (opened with ``migrate=False``).

    Raises:
        DatabaseError: the ledger lacks ``x0003_leases.sql``.
    """
    applied = yield from applied_migrations()
    if LEASES_MIGRATION not in applied:
        raise DatabaseError(
            f"this database lacks cairnq's lease tokens (migration {LEASES_MIGRATION}), "
            "which a worker fences its writes on; run `cairnq migrate` first "
            "(or open the worker with migrate=True)"
        )


def apply_migration(name: str, source: str, *, again: bool = False) -> Op[bool]:
    """Apply one migration unless the ledger has it (``again``: even then, recording it
    once); run inside its own write transaction."""
    yield Call("ledger_lock", {})
    applied = yield from applied_migrations()
    if name in applied and not again:
        return False
    yield Script(name, source)
    if name not in applied:
        yield Call("ledger_record", {"name": name, "now_ms": NOW})
    return True


def check_protocol_version() -> Op[int]:
    version = yield from protocol_version()
    if version != PROTOCOL_VERSION:
        raise ProtocolVersionMismatch(
            f"storage protocol_version={version}, cairnq supports {PROTOCOL_VERSION}"
        )
    return version


def check_installation(schema: str | None) -> Op[None]:
    """PostgreSQL: refuse to start a second, invisible installation (raises ``SchemaMismatch``).

    With ``schema`` given, the connection's current schema must be it. Without,
    tables found only in other schemas mean this connection would create a new
    installation nobody else sees, and a current schema of PostgreSQL's own
    (``search_path`` set so in the DSN) raises ``InvalidArgument``.
    """
    rows = yield Call("installations", {})
    current = rows[0]["current_schema"] if rows else None
    found = sorted({r["schema"] for r in rows if r["schema"] is not None})
    if schema is not None:
        if current is None:
            raise DatabaseError(
                f"schema {schema!r} does not exist yet; run migrations first "
                "(cairnq migrate, or open with migrate=True)"
            )
        if current != schema:
            raise SchemaMismatch(
                f"connection's current schema is {current!r}, not the configured {schema!r}; "
                "check search_path"
            )
        return
    if current is not None and system_schema(current):
        raise InvalidArgument(
            f"the connection's current schema is {current!r} (check search_path): "
            f"{SYSTEM_SCHEMA_REASON}"
        )
    if current is None or not found or current in found:
        return
    raise SchemaMismatch(
        f"cairnq tables exist in schema(s) {', '.join(found)} but not in the current schema "
        f"{current!r}; pass schema=... to use one of them"
    )
