"""Presence's reads and writes: each worker's row in ``cairnq_workers`` (x0002) and the
task names it serves in ``cairnq_worker_names`` (x0004).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator. The writes (``worker_start``, ``worker_beat``, ``worker_gone`` and their
``_named`` forms) are the worker's presence component's; the reads (``workers``,
``serving``, ``served``, ``unserved``) are the client's, the dashboard's and ``top``'s.
A read on a database without x0002 answers without the table (lease holders only,
"cannot tell", or nothing unserved); without x0004 every live worker counts as
serving every name on its queues. Each read takes the clock once and passes that
instant to every statement.
"""

from __future__ import annotations

import json
from typing import Any

from ..._checks import MAX_INT4, check_int, check_names, check_text
from ..._deprecated import renamed
from ...durations import duration_or_ms
from ...kernel.ledger import applied_migrations
from ...kernel.views import MAX_WINDOW_MS, light_task
from ...models import Task, UnservedTasks, WorkerInfo
from ...protocol.steps import NOW, Call, Op, Row, single_statement

MAX_RUNNING = 10_000
WORKER_ROW_TTL_MS = 86_400_000
WORKERS_MIGRATION = "x0002_workers.sql"
WORKER_NAMES_MIGRATION = "x0004_worker_names.sql"
# A cairnq worker counts as alive when seen this recently: the dashboard's and
# ``cq.presence.workers()``'s default window, four presence intervals.
ALIVE_WINDOW_MS = 60_000
UNSERVED_COUNT_CAP = 10_000


def _now() -> Op[int]:
    rows = yield Call("clock_now", {"now_ms": NOW})
    return int(rows[0]["now_ms"])


# --- workers ---------------------------------------------------------------------------------


def within_of(within: Any, within_ms: Any, where: str) -> int:
    """How recently a worker must have been seen, in milliseconds: ``within`` (a
    duration), or the old ``within_ms`` (warns once, kept one release); a minute.

    Raises:
        InvalidArgument: both given, or a bad value (named as given).
    """
    if within_ms is not None:
        renamed(f"{where}(within_ms=...)", f"{where}(within=...) (a duration)")
    ms = duration_or_ms(within, within_ms, "within", low_ms=1, high_ms=MAX_WINDOW_MS)
    return ALIVE_WINDOW_MS if ms is None else ms


def workers(*, within_ms: Any = ALIVE_WINDOW_MS, max_running: Any = 1000) -> Op[list[WorkerInfo]]:
    """Validate the window; the op lists workers seen within it and every live lease holder."""
    window = check_int(within_ms, "within_ms", low=1, high=MAX_WINDOW_MS)
    most = check_int(max_running, "max_running", low=1, high=MAX_RUNNING)
    return _workers(window, most)


def _workers(window: int, most: int) -> Op[list[WorkerInfo]]:
    now = yield from _now()
    # A database migrated without cairnq's extensions (another SDK's, or opened with
    # migrate=False before x0002 existed) has no workers table: lease holders only.
    applied = yield from applied_migrations()
    seen: list[Row] = []
    if WORKERS_MIGRATION in applied:
        seen = yield Call("presence_seen", {"since_ms": now - window})
    leases = yield Call("running_leases", {"now_ms": now, "limit": most})
    running: dict[str, list[Task]] = {}
    for row in leases:
        task = light_task(row)
        running.setdefault(str(task.worker_id), []).append(task)
    out: dict[str, WorkerInfo] = {}
    for row in seen:
        worker_id = str(row["worker_id"])
        out[worker_id] = WorkerInfo(
            worker_id=worker_id,
            running=tuple(running.get(worker_id, ())),
            queues=_queues(row["queues"]),
            host=row["host"],
            pid=None if row["pid"] is None else int(row["pid"]),
            concurrency=None if row["concurrency"] is None else int(row["concurrency"]),
            started_at_ms=int(row["started_at_ms"]),
            last_seen_ms=int(row["last_seen_ms"]),
        )
    for worker_id, tasks in running.items():
        if worker_id not in out:
            out[worker_id] = WorkerInfo(worker_id=worker_id, running=tuple(tasks))
    return [out[worker_id] for worker_id in sorted(out)]


def _queues(text: Any) -> tuple[str, ...] | None:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    return tuple(str(v) for v in value)


@single_statement
def worker_beat(
    worker_id: str, queues: list[str], host: str | None, pid: int | None, concurrency: int
) -> Op[None]:
    """Record that this worker is alive (the extension table ``cairnq_workers``)."""
    yield Call(
        "presence_beat",
        {
            "worker_id": worker_id,
            "queues": json.dumps(queues, ensure_ascii=False),
            "host": host,
            "pid": pid,
            "concurrency": min(concurrency, MAX_INT4),
            "now_ms": NOW,
        },
    )


def worker_start(
    worker_id: str,
    queues: list[str],
    host: str | None,
    pid: int | None,
    concurrency: int,
    names: list[str] | None = None,
) -> Op[bool]:
    """The first beat of a worker, after deleting rows of workers gone for a day.

    A row left under the same id by an earlier run (one that crashed) is replaced,
    so ``started_at_ms`` is this run's start. ``names`` (the task names served) are
    recorded too where the database has ``x0004_worker_names.sql``.

    Returns:
        Whether the names were recorded (``False``: the database lacks x0004, or no
        names were given); later beats use ``worker_beat_named`` only when it is true.
    """
    now = yield from _now()
    applied = yield from applied_migrations()
    named = names is not None and WORKER_NAMES_MIGRATION in applied
    yield Call("presence_prune", {"before_ms": now - WORKER_ROW_TTL_MS})
    yield Call("presence_gone", {"worker_id": worker_id})
    if named:
        yield Call("presence_names_prune", {})
        yield Call("presence_names_gone", {"worker_id": worker_id})
    yield from worker_beat(worker_id, queues, host, pid, concurrency)
    if named:
        yield from _worker_names(worker_id, names or [])
    return named


def worker_row(worker_id: str) -> Op[WorkerInfo | None]:
    """The row under ``worker_id`` as it stands, seen at any time (``None``: no row)."""
    rows = yield Call("presence_seen", {"since_ms": 0})
    for row in rows:
        if str(row["worker_id"]) == worker_id:
            return WorkerInfo(
                worker_id=worker_id,
                running=(),
                queues=_queues(row["queues"]),
                host=row["host"],
                pid=None if row["pid"] is None else int(row["pid"]),
                concurrency=None if row["concurrency"] is None else int(row["concurrency"]),
                started_at_ms=int(row["started_at_ms"]),
                last_seen_ms=int(row["last_seen_ms"]),
            )
    return None


def worker_beat_named(
    worker_id: str,
    queues: list[str],
    host: str | None,
    pid: int | None,
    concurrency: int,
    names: list[str],
) -> Op[None]:
    """``worker_beat`` and the task names served (``cairnq_worker_names``, x0004)."""
    yield from worker_beat(worker_id, queues, host, pid, concurrency)
    yield from _worker_names(worker_id, names)


def _worker_names(worker_id: str, names: list[str]) -> Op[None]:
    yield Call(
        "presence_names_put",
        {"worker_id": worker_id, "names": json.dumps(sorted(names), ensure_ascii=False)},
    )


@single_statement
def worker_gone(worker_id: str) -> Op[None]:
    """Delete this worker's row: it stopped cleanly."""
    yield Call("presence_gone", {"worker_id": worker_id})


def worker_gone_named(worker_id: str) -> Op[None]:
    """Delete this worker's row and its names (x0004): it stopped cleanly."""
    yield Call("presence_gone", {"worker_id": worker_id})
    yield Call("presence_names_gone", {"worker_id": worker_id})


# --- who serves what -------------------------------------------------------------------------


def serving(queue: Any, name: Any, *, within_ms: Any = ALIVE_WINDOW_MS) -> Op[list[str] | None]:
    """Validate; the op lists the live cairnq workers that serve task ``name`` on ``queue``.

    A worker is live when its presence row was refreshed within ``within_ms``; it
    serves ``name`` on ``queue`` when ``queue`` is one of its queues and ``name`` one
    of its task names. A worker that publishes no names (a cairnq version before
    x0004, or a database without it) counts as serving every name on its queues.
    Workers of other SDKs publish nothing and are never listed.

    The op returns the worker ids, sorted, or ``None`` when the database cannot tell:
    it lacks the presence table (``x0002_workers.sql``).
    """
    return _serving(
        check_text(queue, "queue") or "",
        check_text(name, "task name") or "",
        check_int(within_ms, "within_ms", low=1, high=MAX_WINDOW_MS),
    )


def _serving(queue: str, name: str, window: int) -> Op[list[str] | None]:
    applied = yield from applied_migrations()
    if WORKERS_MIGRATION not in applied:
        return None
    now = yield from _now()
    since = now - window
    if WORKER_NAMES_MIGRATION in applied:
        rows = yield Call("presence_serving", {"since_ms": since, "queue": queue, "name": name})
        return [str(row["worker_id"]) for row in rows]
    seen = yield Call("presence_seen", {"since_ms": since})
    return [str(row["worker_id"]) for row in seen if queue in (_queues(row["queues"]) or ())]


def served(*, within_ms: Any = ALIVE_WINDOW_MS) -> Op[dict[str, frozenset[str] | None] | None]:
    """Validate; the op maps each queue live cairnq workers serve to the task names served
    there (``None``: a worker on it publishes no names, so it may serve any).

    ``None`` instead of a map when the database lacks the presence table (x0002).
    """
    return _served_now(check_int(within_ms, "within_ms", low=1, high=MAX_WINDOW_MS))


def _served_now(window: int) -> Op[dict[str, frozenset[str] | None] | None]:
    applied = yield from applied_migrations()
    if WORKERS_MIGRATION not in applied:
        return None
    now = yield from _now()
    return (yield from _served(applied, now - window))


def _served(applied: set[str], since: int) -> Op[dict[str, frozenset[str] | None]]:
    if WORKER_NAMES_MIGRATION in applied:
        live = yield Call("presence_served", {"since_ms": since})
    else:
        live = [
            {**row, "names": None} for row in (yield Call("presence_seen", {"since_ms": since}))
        ]
    names_by_queue: dict[str, set[str] | None] = {}
    for row in live:
        names = _queues(row["names"]) if row["names"] is not None else None
        for queue in _queues(row["queues"]) or ():
            have = names_by_queue.setdefault(queue, set())
            if have is None or names is None:
                names_by_queue[queue] = None
            else:
                have.update(names)
    return {q: None if n is None else frozenset(n) for q, n in names_by_queue.items()}


def unserved(
    *,
    within_ms: Any = ALIVE_WINDOW_MS,
    queues: Any = None,
    cap: Any = UNSERVED_COUNT_CAP,
) -> Op[list[UnservedTasks]]:
    """Validate; the op lists due queued tasks no live cairnq worker serves, by queue and name.

    ``queues``: only these queues (``None``: all). Sorted by queue, then name.

    Cost, whatever the table holds: one index seek per queue and per distinct task
    name queued in a queue (``queued_names`` on the claim indexes), one read of the
    live workers' rows, then for each (queue, name) pair no live worker serves a
    count of its due tasks stopped at ``cap`` index entries. Served backlogs and
    finished tasks are never read.

    A database without the presence table (``x0002_workers.sql``; migrated by
    another SDK) gives an empty list: it cannot tell who serves what.
    """
    return _unserved(
        check_int(within_ms, "within_ms", low=1, high=MAX_WINDOW_MS),
        None if queues is None else frozenset(check_names(queues, "queues")),
        check_int(cap, "cap", low=1, high=MAX_INT4),
    )


def _unserved(window: int, only: frozenset[str] | None, cap: int) -> Op[list[UnservedTasks]]:
    applied = yield from applied_migrations()
    if WORKERS_MIGRATION not in applied:
        return []
    now = yield from _now()
    by_queue = yield from _served(applied, now - window)
    pairs = yield Call("queued_names", {})
    out: list[UnservedTasks] = []
    for row in pairs:
        queue, name = str(row["queue"]), str(row["name"])
        if only is not None and queue not in only:
            continue
        have = by_queue.get(queue, frozenset())
        if have is None or name in have:
            continue
        counted = yield Call(
            "queued_due_count", {"queue": queue, "name": name, "now_ms": now, "cap": cap}
        )
        count = int(counted[0]["n"])
        if count == 0:
            continue  # every task of it is scheduled later
        oldest = counted[0]["oldest_run_at_ms"]
        out.append(
            UnservedTasks(
                queue=queue,
                name=name,
                count=count,
                capped=count >= cap,
                oldest_run_at_ms=None if oldest is None else int(oldest),
                queue_served=queue in by_queue,
            )
        )
    return out
