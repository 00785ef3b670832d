"""Writes on tasks from outside an attempt: cancel and retry (by id or by key,
``cancel_rows`` as a step of another operation),
deferring queued tasks and bringing them back (``defer``, ``undefer``), failing a
queued task without running it (``fail_queued``), purge, and the named leases that
keep a periodic job to one holder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._checks import MAX_LIST_LIMIT, check_int, check_status, check_text
from ..models import Task
from ..protocol.steps import NOW, Call, Emit, Op, Row, SingleStatement, single_statement
from ._shared import _emit_for, _id, _key, _named
from .points import NO_POINTS, Points, TaskEnd


def cancel(task_id: str, *, points: Points = NO_POINTS) -> Op[Task | None]:
    """Cancel a queued task at once, or request a running one's cancel.

    The task hooks of ``points`` in use run on the row of a task that ends
    canceled here, in the same transaction; without any the cancel is one statement.
    """
    task_id = _id(task_id)
    hooks = points.ending([task_id]).task
    op = _named(_cancel(task_id, hooks), "cancel")
    return op if hooks else SingleStatement(op)


def _cancel(task_id: str, hooks: Sequence[TaskEnd]) -> Op[Task | None]:
    rows = yield from cancel_rows(task_id)
    for hook in hooks:
        yield from hook(rows)
    return Task.from_row(rows[0]) if rows else None


def cancel_rows(task_id: str) -> Op[list[Row]]:
    """Cancel a queued task at once, or request a running one's cancel, as a step of
    the caller's operation; returns the changed row (nothing once the task has ended)
    and wakes whoever waits on it. No hooks run: the caller decides what the ending
    does."""
    rows = yield Call("cancel", {"id": task_id, "now_ms": NOW})
    yield from _emit_for(rows)
    return list(rows)


@single_statement
def retry(task_id: str, reset_attempt: bool = False) -> Op[Task | None]:
    return _retry(_id(task_id), reset_attempt)


def _retry(task_id: str, reset_attempt: bool) -> Op[Task | None]:
    rows = yield Call("retry", {"id": task_id, "now_ms": NOW, "reset_attempt": reset_attempt})
    yield from _emit_for(rows)
    return Task.from_row(rows[0]) if rows else None


def cancel_by_key(key: str, *, points: Points = NO_POINTS) -> Op[Task | None]:
    """``cancel`` of the task the key points at (``points``: as for ``cancel``)."""
    return _cancel_by_key(_key(key), points.ending().task)


def _cancel_by_key(key: str, hooks: Sequence[TaskEnd]) -> Op[Task | None]:
    task_id = yield from _key_target(key)
    if task_id is None:
        return None
    return (yield from _cancel(task_id, hooks))


def retry_by_key(key: str, reset_attempt: bool = False) -> Op[Task | None]:
    return _retry_by_key(_key(key), reset_attempt)


def _retry_by_key(key: str, reset_attempt: bool) -> Op[Task | None]:
    task_id = yield from _key_target(key)
    if task_id is None:
        return None
    return (yield from _retry(task_id, reset_attempt))


def defer(task_ids: Sequence[str], run_at_ms: int) -> Op[list[Row]]:
    """Make queued tasks due at ``run_at_ms``; returns their rows (a task no longer
    queued is left as it is and missing from them). A time no clock reaches keeps
    them unclaimed until ``undefer``."""
    rows = yield Call("defer", {"ids": list(task_ids), "run_at_ms": run_at_ms, "now_ms": NOW})
    return list(rows)


def undefer(delays_ms: Mapping[str, int], run_at_ms: int) -> Op[list[Row]]:
    """Make each task of ``delays_ms`` still queued and due at ``run_at_ms`` (as ``defer``
    left it) due its delay after now; returns the changed rows, and wakes their queues."""
    ids = list(delays_ms)
    rows = yield Call(
        "undefer",
        {
            "ids": ids,
            "delays_ms": [delays_ms[i] for i in ids],
            "run_at_ms": run_at_ms,
            "now_ms": NOW,
        },
    )
    for queue in sorted({str(r["queue"]) for r in rows}):
        yield Emit("queued", queue)
    return list(rows)


def fail_queued(task_id: str, error: str) -> Op[list[Row]]:
    """Fail a queued task for good with ``error`` (an encoded envelope) without running
    it; returns its row, or nothing when it is no longer queued. No hooks run."""
    rows = yield Call("fail_queued", {"id": task_id, "error": error, "now_ms": NOW})
    yield from _emit_for(rows)
    return list(rows)


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
