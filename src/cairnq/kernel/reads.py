"""Reads of tasks: one by id or by key, a filtered list, counts per queue and
status, and a queue's headroom.
"""

from __future__ import annotations

from typing import Any

from .._checks import MAX_LIST_LIMIT, check_int, check_status, check_text
from ..models import STATUSES, Task, TaskRef
from ..protocol.steps import Call, Op
from ._shared import _id, _key


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
