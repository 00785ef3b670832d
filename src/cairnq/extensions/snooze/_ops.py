"""Operations of snoozing (extension table ``cairnq_task_snoozes``).

Like the kernel's, each function validates eagerly and returns a statement-yielding
generator.

A snooze hands an owned attempt back (the kernel's ``hand_back``): the task is
queued again after a delay with the claim's attempt undone (``attempt - 1``, as
``release`` does), so the attempt it ran under is not spent, and
``max_attempts`` is left as submitted. A reference worker sharing the database
reads such a task as any other queued task whose earlier claim never happened.
The snooze is fenced on the lease like every owned write, and counted in
``cairnq_task_snoozes`` in the same transaction; the snooze past ``max_snoozes``
fails the task instead (``snooze_limit``).

The table is created by ``x0007_flow.sql``, which the pauses extension owns and
ships (it creates ``cairnq_pauses`` too); snooze needs it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ... import kernel
from ..._checks import MAX_DELAY_MS, check_int, check_text
from ..._deprecated import renamed
from ...durations import delay_ms_of
from ...errors import InvalidArgument, SchemaIncomplete, error_envelope
from ...kernel.points import AttemptEnd, AttemptEndHook, settled_outcome
from ...models import Lease
from ...protocol.steps import NOW, Call, Op, Row

FLOW_MIGRATION = "x0007_flow.sql"
DEFAULT_MAX_SNOOZES = 20
MAX_SNOOZE_DELAY_MS = MAX_DELAY_MS


@dataclass(frozen=True)
class Snoozes:
    """How often a task was snoozed, and the latest snooze.

    Attributes:
        task_id: The task.
        count: Snoozes so far (none of them spent an attempt).
        last_snoozed_at_ms: When the latest snooze was written (epoch ms).
        last_delay_ms: The delay the latest snooze asked for.
    """

    task_id: str
    count: int
    last_snoozed_at_ms: int
    last_delay_ms: int

    @property
    def wake_at_ms(self) -> int:
        """When the latest snooze ends: the task is due again from then."""
        return self.last_snoozed_at_ms + self.last_delay_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "count": self.count,
            "last_snoozed_at_ms": self.last_snoozed_at_ms,
            "last_delay_ms": self.last_delay_ms,
        }


# --- validation --------------------------------------------------------------------------


def snooze_delay_ms(delay: Any, delay_ms: Any, *, spelled: str = "ctx.snooze") -> int:
    """The snooze delay in milliseconds, from exactly one of ``delay`` and ``delay_ms``.

    ``delay_ms`` is the old spelling, kept for one release: it warns once
    (``spelled`` names the caller, ``Snooze`` or ``ctx.snooze``).

    Raises:
        InvalidArgument: neither or both given, or a bad value.
    """
    if (delay is None) == (delay_ms is None):
        raise InvalidArgument("snooze needs one delay: seconds (a number), a timedelta or '30s'")
    if delay_ms is not None:
        renamed(f"{spelled}(delay_ms=...)", f"{spelled}(delay) (a duration: '500ms')")
        return check_int(delay_ms, "delay_ms", low=0, high=MAX_SNOOZE_DELAY_MS)
    return delay_ms_of(delay, "snooze delay")


def check_max_snoozes(value: Any) -> int:
    """``max_snoozes``: a whole number of snoozes a task may take, 0 and up."""
    return check_int(value, "max_snoozes", low=0)


# --- readiness ---------------------------------------------------------------------------


def snooze_ready() -> Op[bool]:
    """Whether the database has the snoozes' table (migration ``x0007_flow.sql``)."""
    applied = yield from kernel.applied_migrations()
    return FLOW_MIGRATION in applied


def _require() -> Op[None]:
    ready = yield from snooze_ready()
    if not ready:
        raise SchemaIncomplete(
            f"this database lacks cairnq's flow control (migration {FLOW_MIGRATION}); "
            "run `cairnq migrate` to add it",
            missing=(FLOW_MIGRATION,),
        )


# --- snooze ------------------------------------------------------------------------------


def snooze_limit_error(count: int, max_snoozes: int) -> dict[str, Any]:
    """The envelope of a task failed by the snooze past ``max_snoozes``."""
    return error_envelope(
        "SnoozeLimit",
        "snooze_limit",
        f"snoozed {count} times, the limit (max_snoozes={max_snoozes}); "
        "failed instead of snoozing again",
        retryable=False,
        details={"snoozes": count, "max_snoozes": max_snoozes},
    )


@dataclass(frozen=True)
class SnoozeOutcome:
    """What a snooze wrote: the task's row and its snooze counts (``None`` when none was
    counted: a pending cancel won, or the limit failed the task)."""

    row: Row
    snoozes: Snoozes | None
    over_limit: bool


def snooze(
    lease: Lease,
    worker_id: str,
    delay_ms: int,
    *,
    max_snoozes: int,
    limit_error: Callable[[int], str],
) -> Op[SnoozeOutcome]:
    """Snooze an owned attempt for ``delay_ms``, or fail it past ``max_snoozes``.

    ``limit_error(count)`` encodes the envelope recorded when the limit is
    reached (``snooze_limit_error``). One transaction: the count is read,
    then the attempt is handed back and counted, or failed.

    Raises:
        LostLease: the attempt is no longer owned; nothing is written.
        SchemaIncomplete: the database lacks ``x0007_flow.sql``.
    """
    yield from _require()
    rows = yield Call("snooze_count", {"id": lease.id})
    count = int(rows[0]["count"]) if rows else 0
    if count >= max_snoozes:
        failed = yield from kernel.fail(
            lease, worker_id, limit_error(count), retryable=False, delay_ms=0
        )
        return SnoozeOutcome(failed, None, True)
    row = yield from kernel.hand_back(lease, worker_id, delay_ms=delay_ms)
    if row["status"] != "queued":
        return SnoozeOutcome(row, None, False)
    counted = yield Call("snooze_record", {"id": lease.id, "now_ms": NOW, "delay_ms": delay_ms})
    return SnoozeOutcome(row, _snoozes(lease.id, counted[0]), False)


def _snoozes(task_id: str, row: Row) -> Snoozes:
    return Snoozes(
        task_id, int(row["count"]), int(row["last_snoozed_at_ms"]), int(row["last_delay_ms"])
    )


def snoozes(task_id: Any) -> Op[Snoozes | None]:
    """A task's snooze counts, or ``None`` when it was never snoozed."""
    return _read_snoozes(check_text(task_id, "task id") or "")


def _read_snoozes(task_id: str) -> Op[Snoozes | None]:
    yield from _require()
    rows = yield Call("snooze_count", {"id": task_id})
    return _snoozes(task_id, rows[0]) if rows else None


def snoozes_if_ready(task_id: Any) -> Op[Snoozes | None]:
    """``snoozes``, or ``None`` on a database without the flow tables (for displays)."""
    checked = check_text(task_id, "task id") or ""
    return _snoozes_if_ready(checked)


def _snoozes_if_ready(task_id: str) -> Op[Snoozes | None]:
    ready = yield from snooze_ready()
    if not ready:
        return None
    rows = yield Call("snooze_count", {"id": task_id})
    return _snoozes(task_id, rows[0]) if rows else None


def snoozed(
    lease: Lease, worker_id: str, started: int | None, row: Row, counted: bool
) -> AttemptEnd:
    """The attempt a snooze ended (``snooze`` ran first in this transaction).

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


def snooze_ending(
    lease: Lease,
    worker_id: str,
    delay_ms: int,
    *,
    max_snoozes: int,
    limit_error: Callable[[int], str],
    started: int | None,
    hooks: Sequence[AttemptEndHook],
) -> Op[SnoozeOutcome]:
    """``snooze``, with the attempt-end ``hooks`` in use (the history's) run in the same
    transaction on the attempt it ended."""
    outcome = yield from snooze(
        lease, worker_id, delay_ms, max_snoozes=max_snoozes, limit_error=limit_error
    )
    end = snoozed(lease, worker_id, started, outcome.row, outcome.snoozes is not None)
    for hook in hooks:
        yield from hook([end], None)
    return outcome
