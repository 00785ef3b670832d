"""Reads of the attempt history (extension table ``cairnq_task_attempts``, created by the
steps' ``x0009_steps.sql``): a task's attempts, and for displays its attempts and steps.

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..._checks import check_text
from ..._json import JsonCodec
from ...errors import SerializationError
from ...protocol.steps import Call, Op, Row
from ..steps._ops import StepRecord, require, step_of, step_rows, steps_ready

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
class Attempt:
    """One ended attempt of a task, as cairnq recorded it.

    Attributes:
        task_id: The task.
        claim: The claim's nonce (one per claim; attempts are listed in the order
            they ended).
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


def history_ready() -> Op[bool]:
    """Whether the database has the attempts' table (the steps' ``x0009_steps.sql``)."""
    return steps_ready()


def attempt_of(task_id: str, row: Row) -> Attempt:
    """An ``Attempt`` from a ``history_list`` row (an unreadable error reads as ``None``)."""
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


def attempts(task_id: Any) -> Op[list[Attempt]]:
    """A task's recorded attempts, in claim order; validated eagerly.

    Raises:
        InvalidArgument: a bad task id.
        SchemaIncomplete: the database lacks ``x0009_steps.sql``.
    """
    return _attempts(check_text(task_id, "task id") or "")


def _attempts(task_id: str) -> Op[list[Attempt]]:
    yield from require()
    rows = yield Call("history_list", {"id": task_id})
    return [attempt_of(task_id, r) for r in rows]


def history_if_ready(task_id: Any) -> Op[tuple[list[Attempt], list[StepRecord]] | None]:
    """A task's attempts and steps, or ``None`` without ``x0009`` (for displays)."""
    checked = check_text(task_id, "task id") or ""
    return _history_if_ready(checked)


def _history_if_ready(task_id: str) -> Op[tuple[list[Attempt], list[StepRecord]] | None]:
    ready = yield from history_ready()
    if not ready:
        return None
    attempt_rows = yield Call("history_list", {"id": task_id})
    step_list = yield from step_rows(task_id)
    return (
        [attempt_of(task_id, r) for r in attempt_rows],
        [step_of(task_id, r) for r in step_list],
    )


def attempts_if_ready(task_id: Any) -> Op[list[Attempt] | None]:
    """A task's recorded attempts, or ``None`` without ``x0009`` (for displays)."""
    return _attempts_if_ready(check_text(task_id, "task id") or "")


def _attempts_if_ready(task_id: str) -> Op[list[Attempt] | None]:
    ready = yield from history_ready()
    if not ready:
        return None
    rows = yield Call("history_list", {"id": task_id})
    return [attempt_of(task_id, r) for r in rows]
