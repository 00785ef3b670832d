"""Submitting tasks: one, or a batch in one transaction; a keyed submit decides its
key's conflict under the key's lock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import _ids
from .._checks import MAX_DELAY_MS, MAX_INT4, check_int, check_text
from .._json import JsonCodec
from ..errors import AlreadyExists, InvalidArgument
from ..models import CONFLICTS, Task
from ..protocol.steps import NOW, Call, Emit, Op, Row, pipelined, single_statement
from ._shared import _emit_for
from .points import NO_POINTS, Points, TaskEnd


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
        payload="{}" if payload is None else codec.seal(payload, what="payload"),
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
        text = codec.seal(payload, what="payload")
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


def submit(spec: NewTask, *, points: Points = NO_POINTS) -> Op[Task]:
    """Submit one task, deciding its key's conflict under the key's lock.

    The task hooks of ``points`` in use run on the row of a task
    ``conflict="replace"`` cancels, in the same transaction.
    """
    task_end = points.task_end_hook()
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


def submit_first(spec: NewTask) -> Op[Task]:
    """The task ``spec.key`` points at, whatever its status, else ``spec`` inserted and
    the key pointed at it, decided under the key's lock: submitting again under one
    key gets the first task.
    """
    key = spec.key or ""
    yield Call("lock_key", {"key": key})
    pointer = yield Call("get_key", {"key": key})
    if pointer:
        rows = yield Call("get", {"id": pointer[0]["task_id"]})
        if rows:
            return Task.from_row(rows[0])
    task = yield from _insert(spec)
    yield Call("upsert_key", {"key": key, "task_id": task.id, "now_ms": NOW})
    return task


def revise_queued(task_id: str, spec: NewTask) -> Op[Task | None]:
    """Give the queued task ``task_id``, if it never started (attempt 0), ``spec``'s
    payload and metadata, due ``spec.delay_ms`` after now; its id, name, queue, key and
    everything else stay. Returns the task as revised, or ``None`` when it is no longer
    queued or has started."""
    rows = yield Call(
        "revise_queued",
        {
            "id": task_id,
            "payload": spec.payload,
            "metadata": spec.metadata,
            "delay_ms": spec.delay_ms,
            "now_ms": NOW,
        },
    )
    return Task.from_row(rows[0]) if rows else None


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
    keys = sorted({spec.key for spec in specs if spec.key is not None})
    if not keys:
        return _Batch(list(specs), {}, [], [])
    pointers = yield from _locked_pointers(keys)
    batch = _Batch([], {}, [], [])
    _decide(specs, pointers, batch)
    return batch


def _locked_pointers(keys: Sequence[str]) -> Op[dict[str, tuple[str, str]]]:
    """Lock ``keys`` (sorted, so two batches never deadlock) and read where each points:
    key -> (task id, status), for each key whose task is there."""
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
    return {
        r["key"]: (r["task_id"], locked_status[r["task_id"]])
        for r in rows
        if r["task_id"] in locked_status
    }


def _decide(specs: Sequence[NewTask], pointers: dict[str, tuple[str, str]], batch: _Batch) -> None:
    """Decide each of ``specs`` as ``submit`` would, in order, into ``batch`` (``existing``
    by index in ``specs``). ``pointers`` follows the keys as they are decided, so a key
    used twice sees its first use. Raises ``AlreadyExists``."""
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


def submit_many(specs: Sequence[NewTask], *, points: Points = NO_POINTS) -> Op[list[Task]]:
    """Submit every task in one transaction, with a handful of statements for the lot.

    Key conflicts are decided as ``submit`` decides them, in order, so a key used
    twice in one batch sees the first use. All tasks are stored, or none. A batch
    without keys is one statement (``insert_many``). ``points``: as for ``submit``.
    """
    if any(spec.key is not None for spec in specs):
        return _submit_many(specs, points.task_end_hook())
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


def submit_many_ids(specs: Sequence[NewTask], *, points: Points = NO_POINTS) -> Op[list[str]]:
    """``submit_many`` that returns only the ids, so nothing is read back after the writes.

    The rows written and the key decisions are ``submit_many``'s; a reused key
    gives the id of the task it points at. A batch without keys is one statement.
    ``points``: as for ``submit``.
    """
    keys = sorted({spec.key for spec in specs if spec.key is not None})
    if keys:
        return submit_many_ids_streamed([specs], keys=keys, points=points)
    return _insert_many_ids(specs)


@single_statement
def _insert_many_ids(specs: Sequence[NewTask]) -> Op[list[str]]:
    if specs:
        yield Call("insert_many_quiet", {"rows": _rows_json(specs), "now_ms": NOW})
        for queue in sorted({spec.queue for spec in specs}):
            yield Emit("queued", queue)
    return [spec.id for spec in specs]


@pipelined
def submit_many_ids_streamed(
    parts: Iterable[Sequence[NewTask]], *, keys: Sequence[str] = (), points: Points = NO_POINTS
) -> Op[list[str]]:
    """``submit_many_ids`` of tasks that come in parts, each part's insert sent as soon
    as the part is built and decided; the ids, in order. A keyed batch built whole is
    one part.

    ``keys``: every key the tasks carry, sorted. They are locked and read first, so each
    part's key conflicts are decided as ``submit_many_ids`` decides them, in order. The
    parts are drawn one at a time while the operation runs, so on a database that
    receives pipelined statements as they come (PostgreSQL) the server inserts one part
    while the caller builds the next. They share one transaction: all are stored or
    none, and a part that raises while it is built rolls back the parts sent before it.
    ``points``: as for ``submit``.

    Raises:
        AlreadyExists: a task's key is taken under ``conflict="reject"``.
        ValueError: a task's key is not among ``keys``.
    """
    named = set(keys)
    pointers = (yield from _locked_pointers(keys)) if keys else {}
    ids: list[str] = []
    queues: set[str] = set()
    cancels: list[str] = []
    key_rows: list[tuple[str, str]] = []
    for specs in parts:
        if any(spec.key is not None and spec.key not in named for spec in specs):
            raise ValueError("a streamed batch names its tasks' keys beforehand (keys=)")
        part = _Batch([], {}, cancels, key_rows)
        _decide(specs, pointers, part)
        if part.inserts:
            rows_json = _rows_json(part.inserts)
            yield Call("insert_many_quiet", {"rows": rows_json, "now_ms": NOW}, discard=True)
            queues.update(spec.queue for spec in part.inserts)
        existing = part.existing
        ids.extend(existing.get(i, spec.id) for i, spec in enumerate(specs))
    for queue in sorted(queues):
        yield Emit("queued", queue)
    yield from _cancel_replaced(cancels, points.task_end_hook())
    if key_rows:
        yield Call("upsert_keys", {"rows": json.dumps(key_rows), "now_ms": NOW}, discard=True)
    return ids


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
