"""Operations of durable steps and attempt history (extension tables of ``x0009_steps.sql``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.

A step's result is written fenced on the attempt's lease, exactly as every
owned write: a stale attempt (its lease lost, the task perhaps running
elsewhere) writes nothing and gets ``LostLease``. The steps a task recorded are
read back by its next attempt, which returns them instead of running the steps
again.

An attempt's history row is written in the transaction that ends the attempt:
the settlement (``complete``, ``fail``, a snooze, a release at shutdown) or
cairnq's lease recovery (outcome ``lost``). Each row is keyed by the claim's
lease token, which no other claim of the task shares, so an attempt number a
snooze or a release gave back appears once per claim that used it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import kernel
from .._checks import check_text
from .._json import JsonCodec
from ..errors import SchemaIncomplete, SerializationError, error_envelope
from ..kernel.points import (
    AttemptEnd,
    AttemptEndHook,
    Points,
    Recovered,
    TaskEnd,
    always,
    settled_outcome,
)
from ..kernel.settle import _owned, _owned_row
from ..models import Lease
from . import flow as _flow
from .steps import NOW, Call, Op, Row

STEPS_MIGRATION = "x0009_steps.sql"

Outcome = Literal["succeeded", "failed", "retry", "canceled", "snoozed", "lost", "released"]
OUTCOMES: tuple[Outcome, ...] = (
    "succeeded",
    "failed",
    "retry",
    "canceled",
    "snoozed",
    "lost",
    "released",
)


@dataclass(frozen=True)
class StepRecord:
    """One recorded step of a task.

    Attributes:
        task_id: The task.
        name: The step's name, unique within the task.
        seq: Its position in the run that recorded it (1 for the first step).
        result: The step's result, decoded from JSON.
        attempt: The attempt that recorded it.
        recorded_at_ms: When it was recorded (epoch ms).
    """

    task_id: str
    name: str
    seq: int
    result: Any
    attempt: int
    recorded_at_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "name": self.name,
            "seq": self.seq,
            "result": self.result,
            "attempt": self.attempt,
            "recorded_at_ms": self.recorded_at_ms,
        }


@dataclass(frozen=True)
class Attempt:
    """One ended attempt of a task, as cairnq recorded it.

    Attributes:
        task_id: The task.
        claim: The claim's lease token (orders the attempts; one per claim).
        attempt: The attempt number the claim ran under (a snoozed or released
            claim gives its number back, so the next claim repeats it).
        worker_id: The worker that ran it.
        started_at_ms: When it was claimed (epoch ms, the database's clock);
            ``None`` for an attempt whose lease cairnq recovered (the task row
            keeps no claim time).
        ended_at_ms: When it ended.
        outcome: ``succeeded``, ``failed``, ``retry`` (failed, queued again),
            ``canceled``, ``snoozed``, ``lost`` (its lease expired and cairnq
            recovered it) or ``released`` (handed back unrun at shutdown).
        error: The error envelope recorded, or ``None``.
    """

    task_id: str
    claim: int
    attempt: int
    worker_id: str | None
    started_at_ms: int | None
    ended_at_ms: int
    outcome: str
    error: dict[str, Any] | None

    @property
    def duration_ms(self) -> int | None:
        """How long it ran, when its start is known."""
        return None if self.started_at_ms is None else self.ended_at_ms - self.started_at_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "claim": self.claim,
            "attempt": self.attempt,
            "worker_id": self.worker_id,
            "started_at_ms": self.started_at_ms,
            "ended_at_ms": self.ended_at_ms,
            "outcome": self.outcome,
            "error": self.error,
        }


# --- readiness ---------------------------------------------------------------------------


def steps_ready() -> Op[bool]:
    """Whether the database has the steps and attempts tables (``x0009_steps.sql``)."""
    applied = yield from kernel.applied_migrations()
    return STEPS_MIGRATION in applied


def _require() -> Op[None]:
    ready = yield from steps_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's durable steps and attempt history (migration "
            f"{STEPS_MIGRATION}); run `cairnq migrate` to add it",
            missing=(STEPS_MIGRATION,),
        )


# --- steps -------------------------------------------------------------------------------


def check_step_name(name: Any) -> str:
    """A step name: text like a task name (non-empty, no NUL, at most 1000 bytes)."""
    return check_text(name, "step name") or ""


def recorded_steps(task_id: str) -> Op[list[Row]]:
    """The raw rows of a task's recorded steps, in ``seq`` order (for the worker).

    Raises:
        SchemaIncomplete: the database lacks ``x0009_steps.sql``.
    """
    yield from _require()
    rows = yield Call("step_list", {"id": task_id})
    return list(rows)


def record_step(lease: Lease, worker_id: str, name: str, seq: int, result: str) -> Op[Row]:
    """Record a step's encoded result, fenced on the attempt's lease.

    Raises:
        LostLease: the attempt is no longer owned (a stale attempt); nothing is written.
    """
    rows = yield Call(
        "step_record",
        _owned(lease, worker_id) | {"name": name, "seq": seq, "result": result},
    )
    return _owned_row(lease, rows)


def steps(task_id: Any) -> Op[list[StepRecord]]:
    """A task's recorded steps, ``seq`` order; validated eagerly.

    Raises:
        InvalidArgument: a bad task id.
        SchemaIncomplete: the database lacks ``x0009_steps.sql``.
    """
    return _steps(check_text(task_id, "task id") or "")


def _steps(task_id: str) -> Op[list[StepRecord]]:
    rows = yield from recorded_steps(task_id)
    return [step_of(task_id, r) for r in rows]


def step_of(task_id: str, row: Row) -> StepRecord:
    """A ``StepRecord`` from a ``step_list`` row."""
    return StepRecord(
        task_id,
        str(row["name"]),
        int(row["seq"]),
        JsonCodec.decode(row["result"], what="step result", task_id=task_id),
        int(row["attempt"]),
        int(row["recorded_at_ms"]),
    )


def attempt_of(task_id: str, row: Row) -> Attempt:
    """An ``Attempt`` from an ``attempt_list`` row (an unreadable error reads as ``None``)."""
    try:
        error = JsonCodec.decode(row["error"], what="attempt error", task_id=task_id)
    except SerializationError:
        error = None
    return Attempt(
        task_id,
        int(row["claim"]),
        int(row["attempt"]),
        None if row["worker_id"] is None else str(row["worker_id"]),
        None if row["started_at_ms"] is None else int(row["started_at_ms"]),
        int(row["ended_at_ms"]),
        str(row["outcome"]),
        error if isinstance(error, dict) else None,
    )


# --- attempts ----------------------------------------------------------------------------


Ended = AttemptEnd
"""What the history records of one attempt (``kernel.points.AttemptEnd``)."""


def record(ended: Sequence[AttemptEnd], recovered: Recovered | None) -> Op[None]:
    """The attempt history's ``attempt_end`` hook: record the attempts a settlement
    ended, or (``recovered``) those a recovery ended, whose expired leases
    ``expired`` read first in the same transaction."""
    if recovered is not None:
        # ``expired``'s rows, read in the same transaction before the recovery.
        candidates: Sequence[Row] = recovered.before or ()  # type: ignore[assignment]
        moved = {str(r["id"]) for r in recovered.rows}
        ended = [
            AttemptEnd(
                Lease(str(c["id"]), int(c["attempt"]), int(c["claim"])),
                None if c["worker_id"] is None else str(c["worker_id"]),
                None,
                "lost",
                lost_error(None if c["updated_at_ms"] is None else int(c["updated_at_ms"])),
            )
            for c in candidates
            if str(c["id"]) in moved
        ]
    if not ended:
        return
    rows = [
        [
            e.lease.id,
            e.lease.token,
            e.lease.attempt,
            e.worker_id,
            e.started_at_ms,
            e.outcome,
            e.error,
        ]
        for e in ended
    ]
    yield Call(
        "attempt_record",
        {"rows": json.dumps(rows, ensure_ascii=False, separators=(",", ":")), "now_ms": NOW},
    )


def expired(limit: int) -> Op[list[Row]]:
    """The attempt history's ``before_recover`` hook: the expired leases a recovery of
    ``limit`` may move (their worker and claim; recovery clears the worker of a task
    it queues again). An expired lease cannot be renewed or settled, so what is read
    still describes it when ``record`` runs."""
    rows = yield Call("attempt_expired", {"now_ms": NOW, "limit": limit})
    return list(rows)


RECORDING = Points(attempt_end=((record, expired, always),))
"""The history's hooks alone, always in use."""


def _recording(task_end: TaskEnd | None) -> Points:
    if task_end is None:
        return RECORDING
    return Points(attempt_end=RECORDING.attempt_end, task_end=((task_end, always),))


def complete(
    lease: Lease,
    worker_id: str,
    result: str | None,
    started: int | None,
    *,
    task_end: TaskEnd | None = None,
) -> Op[Row]:
    """``kernel.complete``, with the attempt recorded in the same transaction."""
    return kernel.complete(lease, worker_id, result, points=_recording(task_end), started=started)


def complete_many(
    leases: Sequence[Lease],
    results: Sequence[str | None],
    worker_id: str,
    started: Sequence[int | None],
    *,
    task_end: TaskEnd | None = None,
) -> Op[dict[str, Row]]:
    """``kernel.complete_many``, with every settled attempt recorded in the same transaction."""
    return kernel.complete_many(
        leases, results, worker_id, points=_recording(task_end), started=started
    )


def fail(
    lease: Lease,
    worker_id: str,
    error: str,
    *,
    retryable: bool,
    delay_ms: int,
    started: int | None,
    task_end: TaskEnd | None = None,
) -> Op[Row]:
    """``kernel.fail``, with the attempt and its error recorded in the same transaction."""
    return kernel.fail(
        lease,
        worker_id,
        error,
        retryable=retryable,
        delay_ms=delay_ms,
        points=_recording(task_end),
        started=started,
    )


def release(lease: Lease, worker_id: str, started: int | None) -> Op[Row]:
    """``kernel.release``, with the attempt recorded (``released``, or ``canceled``)."""
    return kernel.release(lease, worker_id, points=RECORDING, started=started)


def snoozed(
    lease: Lease, worker_id: str, started: int | None, row: Row, counted: bool
) -> AttemptEnd:
    """The attempt a snooze ended (``flow.snooze`` ran first in this transaction).

    ``counted`` is whether the snooze was counted (the task queued again); else the
    snooze limit failed the task, or a pending cancel won.
    """
    if counted:
        outcome = "snoozed"
        error = None
    else:
        outcome = settled_outcome(row["status"])
        error = row["error"] if outcome == "failed" else None
    if error is not None and not isinstance(error, str):
        error = json.dumps(error)
    return AttemptEnd(lease, worker_id, started, outcome, error)


def snooze(
    lease: Lease,
    worker_id: str,
    delay_ms: int,
    *,
    max_snoozes: int,
    limit_error: Callable[[int], str],
    started: int | None,
    hooks: Sequence[AttemptEndHook] = (record,),
) -> Op[_flow.SnoozeOutcome]:
    """``flow.snooze``, with the attempt hooks (the history's) run in the same transaction."""
    outcome = yield from _flow.snooze(
        lease, worker_id, delay_ms, max_snoozes=max_snoozes, limit_error=limit_error
    )
    end = snoozed(lease, worker_id, started, outcome.row, outcome.snoozes is not None)
    for hook in hooks:
        yield from hook([end], None)
    return outcome


def lost_error(last_heartbeat_ms: int | None) -> str:
    """The envelope of an attempt whose lease expired (encoded)."""
    return json.dumps(
        error_envelope(
            "LeaseExpired",
            "lease_expired",
            "the attempt's lease expired (its worker stopped renewing it); cairnq recovered it",
            retryable=True,
            details={"last_heartbeat_ms": last_heartbeat_ms},
        ),
        separators=(",", ":"),
    )


def recover(limit: int) -> Op[list[Row]]:
    """``kernel.recover``, with each recovered attempt recorded as ``lost``."""
    return kernel.recover(limit, points=RECORDING)


def attempts(task_id: Any) -> Op[list[Attempt]]:
    """A task's recorded attempts, in claim order; validated eagerly.

    Raises:
        InvalidArgument: a bad task id.
        SchemaIncomplete: the database lacks ``x0009_steps.sql``.
    """
    return _attempts(check_text(task_id, "task id") or "")


def _attempts(task_id: str) -> Op[list[Attempt]]:
    yield from _require()
    rows = yield Call("attempt_list", {"id": task_id})
    return [attempt_of(task_id, r) for r in rows]


def history_if_ready(task_id: Any) -> Op[tuple[list[Attempt], list[StepRecord]] | None]:
    """A task's attempts and steps, or ``None`` without ``x0009`` (for displays)."""
    checked = check_text(task_id, "task id") or ""
    return _history_if_ready(checked)


def _history_if_ready(task_id: str) -> Op[tuple[list[Attempt], list[StepRecord]] | None]:
    ready = yield from steps_ready()
    if not ready:
        return None
    attempt_rows = yield Call("attempt_list", {"id": task_id})
    step_rows = yield Call("step_list", {"id": task_id})
    return (
        [attempt_of(task_id, r) for r in attempt_rows],
        [step_of(task_id, r) for r in step_rows],
    )
