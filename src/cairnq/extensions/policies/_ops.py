"""The policies' operations: a submit's policies checked and stored with its task, the
policies of what a worker claimed looked up (expired tasks handed back and canceled),
and the sweep that cancels queued tasks past their expiry."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ... import kernel
from ..._checks import MAX_DELAY_MS, check_text
from ...backoff import MAX_RETRY_DELAY_MS, Retry, check_retry
from ...durations import duration_ms, point_ms
from ...errors import InvalidArgument, SchemaIncomplete
from ...kernel.points import NO_POINTS, Points, ThenWrite
from ...models import Lease, Task
from ...protocol.steps import NOW, Call, Op, Row

MIGRATION = "x0020_policies.sql"
EXPIRED = "expired"
# How long after the first submit that stores a policy (in a database that never had
# one) its tasks wait before they can be claimed: longer than a worker trusts its last
# look at the marker (``STALE_MS``), so every cairnq worker looks the policies up by then.
ACTIVATION_MS = 12_000
# How long a worker trusts a look at the marker that found none.
STALE_MS = 10_000
# How often a worker looks at the marker while it found none, and sweeps expired tasks.
REFRESH_MS = 500
SWEEP_LIMIT = 100


@dataclass(frozen=True)
class SubmitPolicy:
    """What one submit asked beyond the kernel's options, checked.

    Attributes:
        expires_in_ms: From the submit, how long the task may wait to start (``None``: ever).
        run_timeout_ms: How long one run may take (``None``: the handler's or worker's).
        retry: The retry policy as stored (JSON text), or ``None``.
        max_attempts: The retry policy's ``max_attempts``, written into the task's row.
    """

    expires_in_ms: int | None
    run_timeout_ms: int | None
    retry: str | None
    max_attempts: int | None


@dataclass(frozen=True)
class TaskPolicy:
    """The policies a submit stored with one task (``cq.policies.of``).

    Attributes:
        task_id: The task.
        expires_at_ms: When it stops being startable (epoch ms), or ``None``.
        started_at_ms: When a cairnq worker's claim first let it run (epoch ms): from
            then on its expiry no longer applies. ``None`` while it never started (and
            for a task without an expiry, which nothing marks).
        run_timeout_ms: How long one run may take, or ``None``.
        retry: The stored retry policy (a dict), or ``None``.
        reason: Why a policy ended the task (``"expired"``), or ``None``.
    """

    task_id: str
    expires_at_ms: int | None
    run_timeout_ms: int | None
    retry: dict[str, Any] | None
    reason: str | None
    started_at_ms: int | None = None


def check_submit(
    *,
    retry: Any,
    timeout: Any,
    expires_in: Any,
    deadline: Any,
    now_ms: int,
) -> SubmitPolicy | None:
    """A submit's policies, checked; ``None`` when it gives none.

    ``deadline`` is read against ``now_ms`` (the client's clock) and stored, like
    ``run_at``, as a wait from now.

    Raises:
        InvalidArgument: a value of the wrong type or out of bounds, both
            ``expires_in`` and ``deadline``, or a retry policy that cannot be stored
            (a backoff function).
    """
    if retry is None and timeout is None and expires_in is None and deadline is None:
        return None
    policy = check_retry(retry)
    if policy is not None and not policy.storable:
        raise InvalidArgument(
            "a backoff function cannot be stored with a task: give it on @worker.task(retry=...) "
            "or TaskDef(retry=...), or give submit a named backoff"
        )
    if expires_in is not None and deadline is not None:
        raise InvalidArgument("give expires_in or deadline, not both")
    expires_in_ms = None
    if expires_in is not None:
        expires_in_ms = duration_ms(expires_in, "expires_in", low_ms=1, high_ms=MAX_DELAY_MS)
    elif deadline is not None:
        if not isinstance(deadline, datetime.datetime):
            raise InvalidArgument(
                f"deadline must be an aware datetime, like datetime.now(timezone.utc) + "
                f"timedelta(hours=1); got {deadline!r}"
            )
        expires_in_ms = point_ms(deadline, "deadline") - now_ms
        if expires_in_ms < 1:
            raise InvalidArgument(f"deadline={deadline.isoformat()} has passed")
        if expires_in_ms > MAX_DELAY_MS:
            raise InvalidArgument(f"deadline={deadline.isoformat()} is too far away")
    run_timeout_ms = None
    if timeout is not None:
        run_timeout_ms = duration_ms(timeout, "timeout", low_ms=1, high_ms=MAX_RETRY_DELAY_MS)
    return SubmitPolicy(
        expires_in_ms=expires_in_ms,
        run_timeout_ms=run_timeout_ms,
        retry=None if policy is None else stored_retry(policy),
        max_attempts=None if policy is None else policy.max_attempts,
    )


def stored_retry(retry: Retry) -> str:
    """A storable retry policy as the JSON text kept with its task."""
    return json.dumps(
        {
            "max_attempts": retry.max_attempts,
            "backoff": retry.backoff,
            "base_ms": retry.base_ms,
            "max_delay_ms": retry.max_delay_ms,
            "jitter": retry.jitter,
            "no_retry": [_class_name(kind) for kind in retry.no_retry],
        },
        separators=(",", ":"),
    )


def _class_name(kind: type[BaseException]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


@dataclass(frozen=True)
class StoredRetry:
    """A retry policy read back from a task's row: a ``Retry`` but for its
    ``no_retry``, which holds class names (``module.Qualname``), matched against the
    classes an error is an instance of; ``max_attempts`` is the number the submit gave
    (``None``: none), which the task's row holds."""

    retry: Retry
    no_retry: frozenset[str]
    max_attempts: int | None = None

    def retries(self, error: object) -> bool:
        if not self.no_retry or not isinstance(error, BaseException):
            return True
        return not any(_class_name(kind) in self.no_retry for kind in type(error).__mro__)


def read_retry(text: str | None) -> StoredRetry | None:
    """The retry policy stored as ``text``; ``None`` for none or one unreadable."""
    if not text:
        return None
    try:
        found = json.loads(text) if isinstance(text, str) else text
        base, most = found.get("base_ms"), found.get("max_delay_ms")
        retry = Retry(
            backoff=found.get("backoff", "exponential"),
            base=None if base is None else datetime.timedelta(milliseconds=base),
            max_delay=None if most is None else datetime.timedelta(milliseconds=most),
            jitter=found.get("jitter"),
        )
        most_attempts = found.get("max_attempts")
        return StoredRetry(
            retry,
            frozenset(str(n) for n in found.get("no_retry") or ()),
            None if most_attempts is None else int(most_attempts),
        )
    except (AttributeError, TypeError, ValueError, InvalidArgument):
        return None


def policies_ready() -> Op[bool]:
    """Whether the database has the policies' tables (migration ``x0020_policies.sql``)."""
    applied = yield from kernel.applied_migrations()
    return MIGRATION in applied


def submit(
    spec: kernel.NewTask,
    policy: SubmitPolicy,
    *,
    activation_ms: int = ACTIVATION_MS,
    since_ms: int | None = None,
    points: Points = NO_POINTS,
) -> Op[Task]:
    """Store ``spec`` and its policies in one transaction.

    The first submit that stores policies in a database marks them in use; its
    tasks (and those of any submit until then) wait ``activation_ms`` to start, so
    every cairnq worker looks up the policies of its claims by then. The marker is
    read first and written only when missing, never updated: submits do not queue on
    its row. ``since_ms`` is the marker's time when the caller wrote or read it in a
    transaction of its own (a submit inside an application's transaction: its commit
    may come much later, so the wait is taken from the marker's own commit); the
    marker is then not looked at here. A keyed submit that returns an existing task
    stores nothing.

    Raises:
        SchemaIncomplete: the database lacks the policies' tables.
        AlreadyExists: the key is taken and ``conflict="reject"``.
    """
    yield from _require()
    if since_ms is None:
        marker = yield from _mark(activation_ms)
        since, now = int(marker["since_ms"]), int(marker["now_ms"])
    else:
        clock = yield Call("clock_now", {"now_ms": NOW})
        since, now = since_ms, int(clock[0]["now_ms"])
    wait_ms = max(0, since - now)
    if wait_ms > spec.delay_ms:
        spec = dataclasses.replace(spec, delay_ms=wait_ms)
    task = yield from kernel.submit(spec, points=points)
    if task.id == spec.id:
        yield Call(
            "policies_record",
            {
                "id": task.id,
                "expires_in_ms": policy.expires_in_ms,
                "run_timeout_ms": policy.run_timeout_ms,
                "retry": policy.retry,
                "now_ms": NOW,
            },
        )
    return task


def _mark(activation_ms: int) -> Op[Row]:
    """The marker's row (``since_ms``, ``now_ms``), written first when missing."""
    found: Sequence[Row] = yield Call("policies_marked", {"now_ms": NOW})
    if not found:
        found = yield Call("policies_mark", {"now_ms": NOW, "activation_ms": activation_ms})
    if not found:  # another submit wrote it meanwhile
        found = yield Call("policies_marked", {"now_ms": NOW})
    return found[0]


def since() -> Op[int | None]:
    """When the marker says the policies are in use from (epoch ms); ``None`` unmarked.

    Raises:
        SchemaIncomplete: the database lacks the policies' tables.
    """
    yield from _require()
    found = yield Call("policies_marked", {"now_ms": NOW})
    return int(found[0]["since_ms"]) if found else None


def enable(activation_ms: int = ACTIVATION_MS) -> Op[int]:
    """Mark the policies in use (as the first submit that stores one does); returns
    the epoch ms from which tasks with policies start without waiting.

    Raises:
        SchemaIncomplete: the database lacks the policies' tables.
    """
    yield from _require()
    marker = yield from _mark(activation_ms)
    return int(marker["since_ms"])


def _require() -> Op[None]:
    ready = yield from policies_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's task policies (migration {MIGRATION}); "
            "run `cairnq migrate` to add them",
            missing=(MIGRATION,),
        )


def marked() -> Op[bool]:
    """Whether a submit marked the policies in use; ``False`` on a database without them."""
    ready = yield from policies_ready()
    if not ready:
        return False
    return (yield from marked_with_tables())


def marked_with_tables() -> Op[bool]:
    """``marked`` on a database known to have the policies' tables (no ledger read)."""
    rows = yield Call("policies_marked", {"now_ms": NOW})
    return bool(rows)


@dataclass(frozen=True)
class _Look:
    """What the read of claimed tasks' policies found: each task's policy, by id, and
    whether a write must follow (a task with an expiry that never started: it is
    either past it, to be canceled, or starts now, which is recorded)."""

    by_id: dict[str, Row]
    write: bool


def _look(rows: Sequence[Row]) -> Op[_Look]:
    found = yield Call("policies_for", {"ids": [str(r["id"]) for r in rows], "now_ms": NOW})
    by_id = {str(p["task_id"]): p for p in found}
    write = any(p["expires_at_ms"] is not None and p["started_at_ms"] is None for p in found)
    return _Look(by_id, write)


def _with_policies(rows: Sequence[Row], by_id: dict[str, Row]) -> list[Row]:
    if not by_id:
        return list(rows)
    return [
        {**row, "policies": {**by_id[str(row["id"])]}} if str(row["id"]) in by_id else row
        for row in rows
    ]


def claimed_hook(rows: Sequence[Row], worker_id: str, points: Points) -> Op[list[Row] | ThenWrite]:
    """The worker's claim hook, run in a read transaction: the claimed ``rows`` with
    their policies, or, when a claimed task has an expiry and never started, a
    ``ThenWrite`` of ``claimed`` (its write transaction decides again).

    A claim whose tasks have no expiry, or only ones that started before, costs this
    one read.
    """
    look = yield from _look(rows)
    if look.write:
        return ThenWrite(claimed(rows, worker_id, points))
    return _with_policies(rows, look.by_id)


def claimed(rows: Sequence[Row], worker_id: str, points: Points) -> Op[list[Row]]:
    """The claimed ``rows`` a worker may run, each with its policies (``policies``).

    A task past its expiry that never started is handed back unrun (its attempt not
    counted) and canceled, with the reason ``expired``, in this transaction: it never
    starts. A task with an expiry that it lets run is recorded as started
    (``started_at_ms``): its expiry no longer applies, to a later run after a park
    (``ctx.sleep``, ``ctx.wait_for``, a snooze) or a retry.
    """
    look = yield from _look(rows)
    if not look.by_id:
        return list(rows)
    kept: list[Row] = []
    starting: list[str] = []
    for row in rows:
        task_id = str(row["id"])
        policy = look.by_id.get(task_id)
        if policy is None:
            kept.append(row)
            continue
        expires = policy["expires_at_ms"]
        if expires is not None and policy["started_at_ms"] is None:
            if int(expires) <= int(policy["now_ms"]):
                lease = Lease.of(row)
                yield from kernel.release(
                    lease, worker_id, points=points, started=int(row["updated_at_ms"])
                )
                yield from expire(task_id, points)
                continue
            starting.append(task_id)
        kept.append({**row, "policies": {**policy}})
    if starting:
        now_ms = int(look.by_id[starting[0]]["now_ms"])
        yield Call("policies_started", {"ids": starting, "now_ms": now_ms})
    return kept


def expire(task_id: str, points: Points) -> Op[bool]:
    """Cancel a queued task past its expiry, recording the reason ``expired``."""
    task = yield from kernel.cancel(task_id, points=points)
    if task is None or task.status != "canceled":
        return False
    yield Call("policies_ended", {"id": task_id, "reason": EXPIRED})
    return True


def due(limit: int = SWEEP_LIMIT) -> Op[list[str]]:
    """Up to ``limit`` queued tasks past their expiry that never started and no policy
    ended yet (a read)."""
    rows = yield Call("policies_due", {"now_ms": NOW, "limit": limit})
    return [str(row["task_id"]) for row in rows]


def expire_many(task_ids: Sequence[str], points: Points) -> Op[int]:
    """Cancel each of ``task_ids`` still queued, as expired; how many."""
    ended = 0
    for task_id in task_ids:
        done = yield from expire(task_id, points)
        ended += done
    return ended


def sweep(points: Points, limit: int = SWEEP_LIMIT) -> Op[int]:
    """Cancel up to ``limit`` queued tasks past their expiry; how many."""
    found = yield from due(limit)
    ended = yield from expire_many(found, points)
    return ended


def of(task_id: Any) -> Op[TaskPolicy | None]:
    """The policies a submit stored with a task; ``None`` for none (or no tables)."""
    checked = check_text(task_id, "task id") or ""
    return _of(checked)


def _of(task_id: str) -> Op[TaskPolicy | None]:
    ready = yield from policies_ready()
    if not ready:
        return None
    rows = yield Call("policies_get", {"id": task_id})
    if not rows:
        return None
    row = rows[0]
    retry = row["retry"]
    return TaskPolicy(
        task_id=task_id,
        expires_at_ms=None if row["expires_at_ms"] is None else int(row["expires_at_ms"]),
        run_timeout_ms=None if row["run_timeout_ms"] is None else int(row["run_timeout_ms"]),
        retry=json.loads(retry) if isinstance(retry, str) else retry,
        reason=row["reason"],
        started_at_ms=None if row["started_at_ms"] is None else int(row["started_at_ms"]),
    )
