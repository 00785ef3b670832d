"""Reads for dashboards and metrics: queue overview, keyset pages, activity.

Like the kernel's, every function validates eagerly and returns a statement-yielding
generator. None of these reads loads a payload, result or metadata column except
``get`` (in ``kernel``): a page of a listing stays small whatever tasks carry.
Each read takes the clock once (``clock_now``) and passes that instant to every
statement, so ages and windows in one answer agree with each other.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .._checks import check_int, check_status, check_text
from ..errors import InvalidArgument, SerializationError
from ..models import (
    STATUSES,
    QueueActivity,
    QueueSummary,
    Task,
    TaskPage,
)
from ..protocol.steps import NOW, Call, Op, Row, single_statement

MAX_PAGE = 1000
MAX_WINDOW_MS = 31 * 86_400_000
MAX_BUCKETS = 1000
MAX_CHILDREN = 1000
_MAX_CODE_POINT = sys.maxunicode


def _now() -> Op[int]:
    rows = yield Call("clock_now", {"now_ms": NOW})
    return int(rows[0]["now_ms"])


# --- overview --------------------------------------------------------------------------------


def overview() -> Op[list[QueueSummary]]:
    """Every queue that holds a task: counts per status, the due backlog and the oldest
    due queued age."""
    now = yield from _now()
    counted = yield Call("stats", {"queue": None})
    heads = yield Call("queue_heads", {"now_ms": now})
    counts: dict[str, dict[str, int]] = {}
    for row in counted:
        counts.setdefault(row["queue"], dict.fromkeys(STATUSES, 0))[row["status"]] = int(
            row["count"]
        )
    oldest = {row["queue"]: max(0, now - int(row["oldest_run_at_ms"])) for row in heads}
    due = {row["queue"]: int(row["due"]) for row in heads}
    return [
        QueueSummary(
            queue=queue,
            counts=counts[queue],
            oldest_queued_age_ms=oldest.get(queue),
            due=due.get(queue, 0),
        )
        for queue in sorted(counts)
    ]


def not_due() -> Op[dict[str, int]]:
    """Per queue, the queued tasks not due yet (delayed, or retries in backoff), by the
    database's clock; queues without any are left out."""
    now = yield from _now()
    rows = yield Call("queued_not_due", {"now_ms": now})
    return {str(row["queue"]): int(row["count"]) for row in rows}


# --- keyset pages ----------------------------------------------------------------------------


_CURSOR_TAG = "id"


def encode_cursor(task_id: str) -> str:
    """The opaque cursor for the page after (older than) the task ``task_id``."""
    return f"{_CURSOR_TAG}.{task_id}"


def decode_cursor(cursor: Any) -> str:
    """The task id a cursor from ``encode_cursor`` names: the next page lists older ids.

    Raises:
        InvalidArgument: not a cursor this library produced.
    """
    if not isinstance(cursor, str):
        raise InvalidArgument(f"cursor must be a string, not {type(cursor).__name__}")
    tag, dot, task_id = cursor.partition(".")
    if not dot or not task_id or tag != _CURSOR_TAG:
        raise InvalidArgument(f"malformed cursor {cursor[:60]!r}")
    return check_text(task_id, "cursor task id") or ""


def prefix_range(prefix: str) -> tuple[str, str | None]:
    """``[low, high)`` holding exactly the strings that start with ``prefix``, in code point order.

    ``high`` is ``None`` when no string bounds the range (a prefix of only the
    highest code point). A range lets an index serve the lookup, and the prefix
    is never a pattern: ``%`` and ``_`` match themselves.
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < _MAX_CODE_POINT:
            following = last + 1
            if 0xD800 <= following <= 0xDFFF:
                following = 0xE000
            return prefix, "".join(chars) + chr(following)
    return prefix, None


def list_page(
    *,
    status: Any = None,
    queue: Any = None,
    name: Any = None,
    key: Any = None,
    root_id: Any = None,
    correlation_id: Any = None,
    id_prefix: Any = None,
    cursor: Any = None,
    limit: Any = 50,
) -> Op[TaskPage]:
    """Validate a listing's filters; the op reads one page newest first (by id)."""
    prefix = check_text(id_prefix, "id_prefix", optional=True)
    low, high = prefix_range(prefix) if prefix is not None else (None, None)
    before_id = decode_cursor(cursor) if cursor is not None else None
    size = check_int(limit, "limit", low=1, high=MAX_PAGE)
    params = {
        "status": check_status(status),
        "queue": check_text(queue, "queue", optional=True),
        "name": check_text(name, "name", optional=True),
        "root_id": check_text(root_id, "root_id", optional=True),
        "correlation_id": check_text(correlation_id, "correlation_id", optional=True),
        "id_low": low,
        "id_high": high,
        "before_id": before_id,
        # One row more than asked says whether another page follows.
        "limit": size + 1,
    }
    return _list_page(params, size, check_text(key, "key", optional=True))


# Which statement serves a listing: the first filter given, in this order, is the one
# an index answers; the others are checked on the rows it finds. Ids order the pages
# (``task_`` + ULID: newest first to the millisecond), so the primary key serves the
# order: "list_page" walks it down from the cursor and stops after a page of matches.
_ANCHORS = (
    ("id_low", "list_page_ids"),
    ("root_id", "list_page_root"),
    ("correlation_id", "list_page_correlation"),
    ("name", "list_page_name"),
    ("status", "list_page_status"),
    ("queue", "list_page_queue"),
)
# A name, status or queue index finds the matching rows but not in id order: reading
# them all and sorting is cheap for a rare value and a full sort for a common one,
# while walking the primary key and checking each row is the reverse. A capped count on
# the index (``list_count_*``) tells which: under this many matches the index serves the
# page, otherwise the walk does, finding a page after about limit / share rows.
INDEX_SORT_MAX = 1000
_COUNTED = {"name": "list_count_name", "status": "list_count_status", "queue": "list_count_queue"}


def _list_page(params: dict[str, Any], size: int, key: str | None) -> Op[TaskPage]:
    exact: str | None = None
    if key is not None:
        # A key names at most one task: list within that id only.
        pointer = yield Call("get_key", {"key": key})
        if not pointer:
            return TaskPage(tasks=[], next_cursor=None)
        exact = str(pointer[0]["task_id"])
        low, high = params["id_low"], params["id_high"]
        if (low is not None and exact < low) or (high is not None and exact >= high):
            return TaskPage(tasks=[], next_cursor=None)
        params = params | dict(zip(("id_low", "id_high"), prefix_range(exact), strict=True))
    anchor, statement = next(
        ((field, name) for field, name in _ANCHORS if params[field] is not None),
        (None, "list_page"),
    )
    if statement == "list_page_ids" and params["id_high"] is None:
        statement = "list_page"  # an unbounded range: the index would not narrow it
    elif anchor in _COUNTED:
        counted = yield Call(_COUNTED[anchor], {anchor: params[anchor], "cap": INDEX_SORT_MAX})
        if int(counted[0]["n"]) >= INDEX_SORT_MAX:
            statement = "list_page"
    rows = yield Call(statement, params)
    if exact is not None:
        rows = [row for row in rows if row["id"] == exact]
    tasks = [light_task(row) for row in rows[:size]]
    more = len(rows) > size
    cursor = encode_cursor(tasks[-1].id) if more and tasks else None
    return TaskPage(tasks=tasks, next_cursor=cursor)


def children(task: Task, *, limit: Any = 100) -> Op[list[Task]]:
    """Tasks submitted with ``task`` as their parent, oldest first (through the root index)."""
    size = check_int(limit, "limit", low=1, high=MAX_CHILDREN)
    return _children(task.root_id or task.id, task.id, size)


def _children(root_id: str, parent_id: str, size: int) -> Op[list[Task]]:
    rows = yield Call("task_children", {"root_id": root_id, "parent_id": parent_id, "limit": size})
    return [light_task(row) for row in rows]


def light_task(row: Row) -> Task:
    """A listing row as a ``Task`` (no payload, result or metadata).

    A stored error envelope Python cannot read becomes a ``SerializationError``
    envelope, so one damaged row never hides a whole page.
    """
    try:
        return Task.from_row(row)
    except SerializationError as exc:
        envelope = {
            "type": "SerializationError",
            "code": "invalid_error",
            "message": str(exc),
            "retryable": False,
            "details": {},
        }
        return Task.from_row({**row, "error": json.dumps(envelope)})


# --- activity --------------------------------------------------------------------------------


def activity(
    *, window_ms: Any = 3_600_000, bucket_ms: Any = 300_000, queue: Any = None
) -> Op[list[QueueActivity]]:
    """Validate a window and bucket width; the op counts finished tasks per queue and bucket."""
    window = check_int(window_ms, "window_ms", low=1, high=MAX_WINDOW_MS)
    bucket = check_int(bucket_ms, "bucket_ms", low=1, high=window)
    buckets = -(-window // bucket)
    if buckets > MAX_BUCKETS:
        raise InvalidArgument(
            f"window_ms / bucket_ms makes {buckets} buckets, over the limit of {MAX_BUCKETS}"
        )
    return _activity(window, bucket, buckets, check_text(queue, "queue", optional=True))


def _activity(window: int, bucket: int, buckets: int, only: str | None) -> Op[list[QueueActivity]]:
    now = yield from _now()
    # Buckets end at now: the last one is the most recent bucket_ms.
    start = now - buckets * bucket
    rows = yield Call("queue_activity", {"since_ms": start, "bucket_ms": bucket})
    series: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        if only is not None and row["queue"] != only:
            continue
        per_status = series.setdefault(
            row["queue"], {s: [0] * buckets for s in ("succeeded", "failed", "canceled")}
        )
        index = int(row["bucket"])
        if 0 <= index < buckets:
            per_status[row["status"]][index] += int(row["count"])
    if only is not None and only not in series:
        series[only] = {s: [0] * buckets for s in ("succeeded", "failed", "canceled")}
    return [
        QueueActivity(
            queue=name,
            start_ms=start,
            bucket_ms=bucket,
            succeeded=tuple(counts["succeeded"]),
            failed=tuple(counts["failed"]),
            canceled=tuple(counts["canceled"]),
        )
        for name, counts in sorted(series.items())
    ]


def task_key(task_id: str) -> Op[str | None]:
    """The idempotency key pointing at a task, or ``None``."""
    rows = yield Call("task_key", {"task_id": check_text(task_id, "task id")})
    return str(rows[0]["key"]) if rows else None


def get_light(task_id: Any) -> Op[Task | None]:
    """One task without payload, result and metadata, or ``None``."""
    return _get_light(check_text(task_id, "task id") or "")


def _get_light(task_id: str) -> Op[Task | None]:
    rows = yield Call("get_light", {"id": task_id})
    return light_task(rows[0]) if rows else None


# --- purge preview ---------------------------------------------------------------------------

PURGE_COUNT_MAX = 1_000_000


def purge_count(
    *,
    older_than_ms: Any = 0,
    queue: Any = None,
    status: Any = None,
    name: Any = None,
    cap: Any = 100_000,
) -> Op[int]:
    """How many tasks ``purge`` with the same filters would delete now, up to ``cap``.

    A count equal to ``cap`` means at least that many. Validates as ``purge`` does.

    Raises:
        InvalidArgument: a filter ``purge`` would refuse, or ``cap`` out of 1..1,000,000.
    """
    params = {
        "older_than_ms": check_int(older_than_ms, "older_than_ms", low=0, high=2**62),
        "queue": check_text(queue, "queue", optional=True),
        "status": check_status(status, terminal=True),
        "name": check_text(name, "name", optional=True),
        "cap": check_int(cap, "cap", low=1, high=PURGE_COUNT_MAX),
        "now_ms": NOW,
    }
    return _purge_count(params)


@single_statement
def _purge_count(params: dict[str, Any]) -> Op[int]:
    rows = yield Call("purge_count", params)
    return int(rows[0]["n"])
