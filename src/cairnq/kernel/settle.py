"""What the holder of a lease does: heartbeats, progress, and each settlement of an
attempt (complete, succeed, fail, release; ``hold`` and ``complete_held`` for a
settlement inside another transaction), and ``hand_back``, which returns an attempt
unspent for later. Each ending runs the end hooks of its ``points`` in use for the
tasks it settles (``Points.ending`` is given their ids) in the same transaction; an
attempt hook with a ``Settling`` variant of the settling statement (``complete``,
``complete_many``, ``fail``) has its write made by that statement, run in place of
the kernel's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import LostLease
from ..models import Lease
from ..protocol.steps import NOW, Call, Op, Row, SingleStatement, single_statement
from ._shared import _emit_for, _named
from .points import (
    NO_POINTS,
    AttemptEnd,
    AttemptEndHook,
    Ending,
    Points,
    run_ending,
    settled_outcome,
)


@single_statement
def heartbeat(lease: Lease, worker_id: str, lease_ms: int) -> Op[Row]:
    rows = yield Call("heartbeat", owned(lease, worker_id) | {"lease_ms": lease_ms})
    return owned_row(lease, rows)


class Beat(dict[str, bool]):
    """``heartbeat_batch``'s answer: ``{task_id: cancel_requested}`` for every lease still held.

    ``renewed`` names the leases it extended. On PostgreSQL a row locked by another
    transaction (a settlement in progress, ``succeed_in``) is skipped rather than
    waited on: still held, but not renewed.
    """

    renewed: frozenset[str] = frozenset()


def heartbeat_batch(leases: Sequence[Lease], worker_id: str, lease_ms: int) -> Op[Beat]:
    """Renew every lease in one statement; returns what is held and what was renewed.

    A task absent from the result is lost. A row the statement skipped (locked
    elsewhere) is looked up without locking and counts as held if it still is.
    """
    if not leases:
        return Beat()
    rows = yield Call(
        "heartbeat_batch",
        {
            **owned_many(leases, worker_id),
            "now_ms": NOW,
            "lease_ms": lease_ms,
        },
    )
    held = {r["id"]: r["cancel_requested_at_ms"] is not None for r in rows}
    renewed = frozenset(held)
    missing = [lease for lease in leases if lease.id not in held]
    if missing:
        states = yield Call("lease_states", {"ids": [lease.id for lease in missing], "now_ms": NOW})
        by_id = {r["id"]: r for r in states}
        for lease in missing:
            row = by_id.get(lease.id)
            if row and _still_held(row, lease, worker_id):
                held[lease.id] = row["cancel_requested_at_ms"] is not None
    beat = Beat({lease.id: held[lease.id] for lease in leases if lease.id in held})
    beat.renewed = renewed
    return beat


def _still_held(row: Row, lease: Lease, worker_id: str) -> bool:
    return bool(
        row["status"] == "running"
        and row["worker_id"] == lease.holder(worker_id)
        and row["attempt"] == lease.attempt
        and row["lease_live"]
    )


def cancel_requested(task_id: str) -> Op[bool]:
    """Whether a cancel is pending on the task (a missing row counts as canceled)."""
    rows = yield Call("cancel_state", {"id": task_id})
    if not rows:
        return True
    return rows[0]["cancel_requested_at_ms"] is not None or rows[0]["status"] == "canceled"


@single_statement
def progress(lease: Lease, worker_id: str, value: float | None, message: str | None) -> Op[Row]:
    rows = yield Call("progress", owned(lease, worker_id) | {"progress": value, "message": message})
    return owned_row(lease, rows)


def complete(
    lease: Lease,
    worker_id: str,
    result: str | None,
    *,
    points: Points = NO_POINTS,
    started: int | None = None,
) -> Op[Row]:
    """Settle a returned attempt: succeeded, or canceled when a cancel is pending.

    The end hooks of ``points`` in use run in the same transaction, the attempt
    hooks told ``started`` (when it was claimed); without any the settlement is
    one statement.
    """
    statement, ending, variant = points.ending([lease.id]).settled_by("complete")
    params = owned(lease, worker_id) | {"result": result}
    if variant:
        params |= recorded(lease, worker_id, started)
    op = _named(_complete(lease, worker_id, statement, params, ending, started), "complete")
    return op if ending else SingleStatement(op)


def _complete(
    lease: Lease,
    worker_id: str,
    statement: str,
    params: dict[str, Any],
    ending: Ending,
    started: int | None,
) -> Op[Row]:
    rows = yield Call(statement, params)
    yield from _emit_for(rows)
    if ending:
        yield from _ended(ending, rows, [(lease, started)], worker_id)
    return owned_row(lease, rows)


def complete_many(
    leases: Sequence[Lease],
    results: Sequence[str | None],
    worker_id: str,
    *,
    points: Points = NO_POINTS,
    started: Sequence[int | None] | None = None,
) -> Op[dict[str, Row]]:
    """``complete`` for many attempts in one statement; returns the settled rows by task id.

    An attempt missing from the result was no longer owned (its lease is lost).
    Each row carries only ``id``, ``status`` and ``queue``. ``points`` and
    ``started`` (one per lease): as for ``complete``.
    """
    ids = [lease.id for lease in leases]
    statement, ending, variant = points.ending(ids).settled_by("complete_many")
    starts = list(started) if started is not None else [None] * len(leases)
    params: dict[str, Any] = {
        **owned_many(leases, worker_id),
        "results": list(results),
        "now_ms": NOW,
    }
    if variant:
        params |= {
            "started": starts,
            "claims": [lease.token for lease in leases],
            "worker": worker_id,
        }
    op = _named(
        _complete_many(leases, statement, params, worker_id, ending, starts), "complete_many"
    )
    return op if ending else SingleStatement(op)


def _complete_many(
    leases: Sequence[Lease],
    statement: str,
    params: dict[str, Any],
    worker_id: str,
    ending: Ending,
    started: Sequence[int | None],
) -> Op[dict[str, Row]]:
    rows = yield Call(statement, params)
    yield from _emit_for(rows)
    if ending:
        yield from _ended(ending, rows, list(zip(leases, started, strict=True)), worker_id)
    return {str(row["id"]): row for row in rows}


def succeed(
    lease: Lease,
    worker_id: str,
    result: str | None,
    *,
    points: Points = NO_POINTS,
    started: int | None = None,
) -> Op[Row]:
    """Settle as succeeded whatever cancel is pending (the low-level primitive).

    ``points`` and ``started``: as for ``complete``.
    """
    ending = points.ending([lease.id])
    op = _named(_succeed(lease, worker_id, result, ending, started), "succeed")
    return op if ending else SingleStatement(op)


def _succeed(
    lease: Lease, worker_id: str, result: str | None, ending: Ending, started: int | None
) -> Op[Row]:
    rows = yield Call("succeed", owned(lease, worker_id) | {"result": result, "message": None})
    yield from _emit_for(rows)
    if ending:
        yield from _ended(ending, rows, [(lease, started)], worker_id)
    return owned_row(lease, rows)


def fail(
    lease: Lease,
    worker_id: str,
    error: str,
    *,
    retryable: bool,
    delay_ms: int,
    points: Points = NO_POINTS,
    started: int | None = None,
) -> Op[Row]:
    """Settle a failed attempt: requeued, failed, or canceled when a cancel is pending.

    ``points`` and ``started``: as for ``complete`` (the task hooks see a requeued
    task's row too; the attempt hooks get ``error``).
    """
    statement, ending, variant = points.ending([lease.id]).settled_by("fail")
    params = owned(lease, worker_id) | {
        "error": error,
        "retryable": retryable,
        "delay_ms": delay_ms,
    }
    if variant:
        params |= recorded(lease, worker_id, started)
    op = _named(_fail(lease, worker_id, error, statement, params, ending, started), "fail")
    return op if ending else SingleStatement(op)


def _fail(
    lease: Lease,
    worker_id: str,
    error: str,
    statement: str,
    params: dict[str, Any],
    ending: Ending,
    started: int | None,
) -> Op[Row]:
    rows = yield Call(statement, params)
    yield from _emit_for(rows)
    if ending:
        yield from _ended(ending, rows, [(lease, started)], worker_id, error)
    return owned_row(lease, rows)


def _ended(
    ending: Ending,
    rows: Sequence[Row],
    attempts: Sequence[tuple[Lease, int | None]],
    worker_id: str,
    error: str | None = None,
) -> Op[None]:
    """Run ``ending`` on what a settlement ended: each settled attempt, then the rows."""
    ends: list[AttemptEnd] = []
    if ending.attempt:
        by_id = {str(row["id"]): row for row in rows}
        for lease, start in attempts:
            row = by_id.get(lease.id)
            if row is not None:
                outcome = settled_outcome(row["status"])
                ends.append(AttemptEnd(lease, worker_id, start, outcome, error))
    yield from run_ending(ending, rows, ends)


def hold(lease: Lease, worker_id: str) -> Op[bool]:
    """Lock an owned attempt for a settlement later in the same transaction (PostgreSQL).

    Returns whether a cancel is pending. From here to the end of the transaction
    the lock is the ownership: recovery and heartbeats skip the row, and a cancel
    requested meanwhile waits, so the settlement that follows (``complete_held``)
    sees every cancel it must and needs no live lease.

    Raises:
        LostLease: the attempt is no longer owned.
    """
    rows = yield Call("hold", owned(lease, worker_id))
    return owned_row(lease, rows)["cancel_requested_at_ms"] is not None


def complete_held(
    lease: Lease,
    worker_id: str,
    result: str | None,
    *,
    points: Points = NO_POINTS,
    started: int | None = None,
) -> Op[Row]:
    """``complete`` for an attempt this transaction holds (``hold`` ran first).

    ``points`` and ``started``: as for ``complete``, in the same transaction.
    """
    rows = yield Call("complete_held", owned(lease, worker_id) | {"result": result})
    yield from _emit_for(rows)
    ending = points.ending([lease.id])
    if ending:
        yield from _ended(ending, rows, [(lease, started)], worker_id)
    return owned_row(lease, rows)


def release(
    lease: Lease, worker_id: str, *, points: Points = NO_POINTS, started: int | None = None
) -> Op[Row]:
    """Hand an attempt back unrun: queued again at once, its attempt not counted.

    For a worker that stops before running a task it claimed. A pending cancel
    still wins (the task ends canceled). The attempt hooks of ``points`` in use
    run in the same transaction (outcome ``released``, or ``canceled``); the task
    hooks do not.
    """
    attempt = points.ending().attempt
    op = _named(_release(lease, worker_id, attempt, started), "release")
    return op if attempt else SingleStatement(op)


def _release(
    lease: Lease, worker_id: str, hooks: Sequence[AttemptEndHook], started: int | None
) -> Op[Row]:
    row = yield from hand_back(lease, worker_id)
    outcome = "canceled" if row["status"] == "canceled" else "released"
    for hook in hooks:
        yield from hook([AttemptEnd(lease, worker_id, started, outcome)], None)
    return row


def hand_back(
    lease: Lease, worker_id: str, *, delay_ms: int = 0, run_at_ms: int | None = None
) -> Op[Row]:
    """Hand an owned attempt back unspent: queued again with its attempt not counted,
    due at ``run_at_ms`` when given, else ``delay_ms`` after now. A pending cancel
    still wins (the task ends canceled). A step of a larger operation: no hooks run.

    Raises:
        LostLease: the attempt is no longer owned; nothing is written.
    """
    params = owned(lease, worker_id) | {"delay_ms": delay_ms, "run_at_ms": run_at_ms}
    rows = yield Call("hand_back", params)
    row = owned_row(lease, rows)
    yield from _emit_for(rows)
    return row


def owned(lease: Lease, worker_id: str) -> dict[str, Any]:
    """The parameters that fence a write on the attempt ``lease`` of ``worker_id``: the
    protocol's ownership predicate (id, running, worker id, attempt, live lease), the
    worker id as the claim wrote it (with the claim's nonce); a statement written with
    them changes nothing once the attempt is no longer owned."""
    return {
        "id": lease.id,
        "attempt": lease.attempt,
        "worker_id": lease.holder(worker_id),
        "now_ms": NOW,
    }


def recorded(lease: Lease, worker_id: str, started: int | None) -> dict[str, Any]:
    """What a ``Settling`` variant records of the attempt beside ``owned``'s fence: the
    claim (its nonce), the worker id alone, and when it was claimed (``None``: not known)."""
    return {"claim": lease.token, "worker": worker_id, "started_at_ms": started}


def owned_many(leases: Sequence[Lease], worker_id: str) -> dict[str, list[Any]]:
    """``owned`` for a batch: ``ids[i]`` held at ``attempts[i]`` by ``worker_ids[i]`` (each
    lease's own claim, so one batch may hold leases of several claims)."""
    return {
        "ids": [lease.id for lease in leases],
        "attempts": [lease.attempt for lease in leases],
        "worker_ids": [lease.holder(worker_id) for lease in leases],
    }


def owned_row(lease: Lease, rows: Sequence[Row]) -> Row:
    """The row an owned write changed, undecoded: settling never depends on reading JSON.

    Raises:
        LostLease: ``rows`` is empty, the attempt was no longer owned.
    """
    if not rows:
        raise LostLease(lease.id)
    return rows[0]
