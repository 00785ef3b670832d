"""The attempt history's kernel hooks, and the kernel's endings with them.

An attempt's history row is written in the transaction that ends the attempt:
the settlement (``complete``, ``fail``, a snooze, a release at shutdown) or
cairnq's lease recovery (outcome ``lost``, for a cairnq worker's claims: the
``worker_id`` column names their nonce). Each row is keyed by the claim's nonce,
which no other claim of the task shares, so an attempt number a snooze or a
release gave back appears once per claim that used it.

``record`` is the ``attempt_end`` hook and ``expired`` the ``before_recover`` one
(``kernel.points``); ``complete``, ``fail``, ``release``, ``recover`` and the rest
are the kernel's operations with them alone (``RECORDING``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ... import kernel
from ...errors import error_envelope
from ...kernel.points import (
    AttemptEnd,
    Points,
    Recovered,
    TaskEnd,
    always,
)
from ...models import Lease, parse_holder
from ...protocol.statements import Dialect, statements
from ...protocol.steps import NOW, Call, Op, Row

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
        ended = []
        for c in candidates:
            worker, nonce = parse_holder(c["worker_id"])
            # A claim without a nonce (a store's or a reference SDK's) names no claim to
            # record it under.
            if nonce is not None and str(c["id"]) in moved:
                heartbeat = None if c["updated_at_ms"] is None else int(c["updated_at_ms"])
                lease = Lease(str(c["id"]), int(c["attempt"]), nonce)
                ended.append(AttemptEnd(lease, worker, None, "lost", lost_error(heartbeat)))
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
        "history_record",
        {"rows": json.dumps(rows, ensure_ascii=False, separators=(",", ":")), "now_ms": NOW},
    )


def expired(limit: int) -> Op[list[Row]]:
    """The attempt history's ``before_recover`` hook: the expired leases a recovery of
    ``limit`` may move (their worker and claim; recovery clears the worker of a task
    it queues again). An expired lease cannot be renewed or settled, so what is read
    still describes it when ``record`` runs."""
    rows = yield Call("history_expired", {"now_ms": NOW, "limit": limit})
    return list(rows)


SETTLING = {
    "complete": "history_complete",
    "complete_many": "history_complete_many",
    "fail": "history_fail",
}
"""The settling statements that record their attempts themselves (a data-modifying
CTE, shipped for PostgreSQL), by the kernel statement each stands in for."""


def settling_for(dialect: Dialect) -> Mapping[str, str] | None:
    """The settling statements that record their attempts themselves, of those
    ``dialect`` ships (PostgreSQL ships them all; SQLite, without data-modifying CTEs,
    none: ``None``)."""
    shipped = statements(dialect)
    found = {kernel: variant for kernel, variant in SETTLING.items() if variant in shipped}
    return found or None


RECORDING = Points(attempt_end=((record, expired, always),))
"""The history's hooks alone, always in use."""


def _recording(task_end: TaskEnd | None) -> Points:
    if task_end is None:
        return RECORDING
    return Points(attempt_end=RECORDING.attempt_end, task_end=((task_end, always, None),))


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
